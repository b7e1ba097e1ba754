/* spank_job.c - a job step's tenant: options, names, commands, and running them
 * (see spank_job.h). */
#include "integrations/slurm/spank_job.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/units.h"

void spank_job_init(struct spank_job *j)
{
    memset(j, 0, sizeof *j);
    j->kairos = "/usr/bin/kairos";
    j->timeout_s = 10;
}

int spank_job_arg(struct spank_job *j, const char *arg, char *err, size_t err_len)
{
    const char *eq = strchr(arg, '=');
    const char *v = eq ? eq + 1 : "";
    size_t klen = eq ? (size_t)(eq - arg) : strlen(arg);
    if (eq && klen == 6 && !strncmp(arg, "kairos", klen) && *v == '/')
        j->kairos = v;
    else if (eq && klen == 6 && !strncmp(arg, "socket", klen) && *v == '/')
        j->socket = v;
    else if (eq && klen == 4 && !strncmp(arg, "shim", klen) && *v == '/')
        j->shim = v;
    else if (eq && klen == 7 && !strncmp(arg, "timeout", klen) && atoi(v) > 0 && atoi(v) <= 300)
        j->timeout_s = (unsigned)atoi(v);
    else
        return snprintf(err, err_len, "plugstack.conf argument '%s': expected kairos=PATH, "
                        "socket=PATH, shim=PATH (absolute) or timeout=SECONDS (1-300)", arg),
               -EINVAL;
    return 0;
}

static int check_percent(const char *opt, const char *value, bool none_ok, char *err,
                         size_t err_len)
{
    double f;
    char why[160];
    if (none_ok && !strcmp(value, "none"))
        return 0;
    if (units_parse_percent(value, &f, why, sizeof why) == 0)
        return 0;
    snprintf(err, err_len, "--%s=%s: %s (e.g. --%s=30%%%s)", opt, value, why, opt,
             none_ok ? ", or none" : "");
    return -EINVAL;
}

static int check_size(const char *value, char *err, size_t err_len)
{
    uint64_t bytes;
    double f;
    char why[160];
    size_t n = strlen(value);
    int rc = n && value[n - 1] == '%' ? units_parse_percent(value, &f, why, sizeof why)
                                      : units_parse_size_with_unit(value, 0, &bytes, why, sizeof why);
    if (rc == 0 && (value[n - 1] == '%' ? f > 0 : bytes > 0))
        return 0;
    snprintf(err, err_len, "--gpu-mem=%s: %s (a size per GPU: 8G, 512MiB, or 50%%)", value,
             rc ? why : "zero");
    return -EINVAL;
}

int spank_job_option(struct spank_job *j, const char *opt, const char *value, char *err,
                     size_t err_len)
{
    if (!value || !*value)
        return snprintf(err, err_len, "--%s needs a value", opt), -EINVAL;
    if (!strcmp(opt, "gpu-mem")) {
        if (check_size(value, err, err_len))
            return -EINVAL;
        j->mem = value;
    } else if (!strcmp(opt, "gpu-share")) {
        if (check_percent(opt, value, false, err, err_len))
            return -EINVAL;
        j->share = value;
    } else if (!strcmp(opt, "gpu-limit")) {
        if (check_percent(opt, value, true, err, err_len))
            return -EINVAL;
        j->limit = value;
    } else if (!strcmp(opt, "gpu-priority")) {
        if (strcmp(value, "latency") && strcmp(value, "normal") && strcmp(value, "batch"))
            return snprintf(err, err_len, "--gpu-priority=%s: latency, normal or batch",
                            value), -EINVAL;
        j->priority = value;
    } else {
        return snprintf(err, err_len, "unknown option --%s", opt), -EINVAL;
    }
    return 0;
}

bool spank_job_wanted(const struct spank_job *j)
{
    return j->mem || j->share || j->limit || j->priority;
}

int spank_job_check(const struct spank_job *j, char *err, size_t err_len)
{
    if (spank_job_wanted(j) && !j->mem)
        return snprintf(err, err_len, "--gpu-share, --gpu-limit and --gpu-priority go with "
                        "--gpu-mem=SIZE (the step's tenant is created with its quota)"),
               -EINVAL;
    return 0;
}

void spank_job_tenant(uint32_t job_id, uint32_t step_id, char *out, size_t cap)
{
    static const struct {
        uint32_t id;
        const char *name;
    } special[] = {
        {0xfffffffbu, "batch"},       /* SLURM_BATCH_SCRIPT */
        {0xfffffffcu, "extern"},      /* SLURM_EXTERN_CONT */
        {0xfffffffau, "interactive"}, /* SLURM_INTERACTIVE_STEP */
    };
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        if (step_id == special[i].id) {
            snprintf(out, cap, "job-%u.%s", job_id, special[i].name);
            return;
        }
    snprintf(out, cap, "job-%u.%u", job_id, step_id);
}

/* argv builder: appends; false when full (the last slot stays for NULL). */
struct argv_b {
    const char **argv;
    size_t n, cap;
};

static bool push(struct argv_b *b, const char *s)
{
    if (b->n + 1 >= b->cap)
        return false;
    b->argv[b->n++] = s;
    b->argv[b->n] = NULL;
    return true;
}

static bool push_opt(struct argv_b *b, const char *opt, const char *value)
{
    return !value || (push(b, opt) && push(b, value));
}


int spank_job_argv_set(const struct spank_job *j, const char *tenant, const char *gpus,
                       const char **argv, size_t cap)
{
    struct argv_b b = {argv, 0, cap};
    bool ok = push(&b, j->kairos) && push(&b, "tenant") && push(&b, "set") && push(&b, tenant) &&
              push_opt(&b, "--mem", j->mem) && push_opt(&b, "--gpus", gpus) &&
              push_opt(&b, "--share", j->share) && push_opt(&b, "--limit", j->limit) &&
              push_opt(&b, "--priority", j->priority);
    return ok ? 0 : -ENOSPC;
}

int spank_job_argv_admit(const struct spank_job *j, const char *tenant, pid_t pid,
                         char *buf, size_t buf_len, const char **argv, size_t cap)
{
    struct argv_b b = {argv, 0, cap};
    int w = snprintf(buf, buf_len, "%ld", (long)pid);
    bool ok = w > 0 && (size_t)w < buf_len && push(&b, j->kairos) && push(&b, "tenant") &&
              push(&b, "admit") && push(&b, tenant) && push(&b, buf);
    return ok ? 0 : -ENOSPC;
}

int spank_job_argv_del(const struct spank_job *j, const char *tenant, const char **argv,
                       size_t cap)
{
    struct argv_b b = {argv, 0, cap};
    bool ok = push(&b, j->kairos) && push(&b, "tenant") && push(&b, "del") && push(&b, tenant);
    return ok ? 0 : -ENOSPC;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
}

/* In the child: its own process group, output to the pipe, nothing else
 * inherited, exec. */
static void exec_child(const char *const *argv, const char *socket, int out_fd)
{
    if (socket)
        setenv("KAIROS_SOCKET", socket, 1);
    setpgid(0, 0); /* its own group: a hung command goes with all it started */
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0)
        dup2(devnull, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    execv(argv[0], (char *const *)argv);
    dprintf(STDERR_FILENO, "cannot run %s: %s", argv[0], strerror(errno));
    _exit(127);
}

/* Reads what the child writes until it closes the pipe or the deadline passes;
 * false on the deadline. */
static bool collect(int fd, long long deadline, char *out, size_t out_len, size_t *len)
{
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? false : true;
        char chunk[512];
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return true;
        size_t keep = *len + 1 < out_len ? out_len - 1 - *len : 0;
        keep = (size_t)r < keep ? (size_t)r : keep;
        memcpy(out + *len, chunk, keep);
        *len += keep;
        out[*len] = 0;
    }
}

int spank_job_run(const struct spank_job *j, const char *const *argv, char *out,
                  size_t out_len)
{
    unsigned timeout_s = j->timeout_s;
    int p[2];
    if (out_len)
        out[0] = 0;
    if (pipe2(p, O_CLOEXEC))
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return -e;
    }
    if (pid == 0)
        exec_child(argv, j->socket, p[1]);
    close(p[1]);
    size_t len = 0;
    long long deadline = now_ms() + (long long)timeout_s * 1000;
    bool in_time = collect(p[0], deadline, out, out_len, &len);
    close(p[0]);
    int status = 0;
    pid_t w = 0;
    while (in_time && (w = waitpid(pid, &status, WNOHANG)) == 0) { /* closed its output */
        if (now_ms() >= deadline)
            in_time = false;
        else
            usleep(10000);
    }
    if (!in_time || w < 0) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        return 124;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
