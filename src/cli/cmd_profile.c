/* cmd_profile.c - `kairos profile -- CMD`: a workload's throughput as a function of the
 * GPU fraction it gets, written as the table `kairos plan` reads (profile.c).
 *
 * Where the admin configured MIG (nvidia-smi -L lists MIG devices), CMD runs once on
 * one instance of each profile (CUDA_VISIBLE_DEVICES=MIG-uuid). Otherwise the proxy is
 * MPS: a private nvidia-cuda-mps-control daemon (its own CUDA_MPS_PIPE_DIRECTORY and
 * CUDA_MPS_LOG_DIRECTORY under a temporary directory) and one run of CMD per SM share
 * with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=p; the daemon is stopped afterwards. MIG
 * settings are never changed. CMD prints "throughput=<n>" (and may print
 * "memory_mib=<n>"); otherwise the peak memory is the largest rise of the GPU's used
 * memory (nvidia-smi --query-gpu=memory.used) seen while CMD runs.
 * With --time-shares, CMD then runs once per share on the whole GPU as a tenant of the
 * running kairosd with its GPU time capped at that share: the child becomes
 * `kairos run --mem SIZE --limit PCT -- CMD` through cmd_run itself (an ephemeral
 * tenant, gone when CMD ends), and the table gets time_shares (curve.c says which are
 * usable). kairosd is asked first (cmd_run_daemon_check), before any run.
 * One child at a time; the tool reads the child's output with poll() and samples
 * memory every 200 ms. Exit: 0 table written, 1 a run failed, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cmd_plan.h"
#include "cli/commands.h"
#include "kairos/plan.h"

static const char profile_usage[] =
    "usage: kairos profile [--model NAME] [--name NAME] [--out FILE] [--method auto|mps|mig]\n"
    "                      [--timeout SECONDS] [--time-shares LIST [--mem SIZE]]\n"
    "                      -- CMD [ARG...]\n"
    "\n"
    "Measure CMD's throughput on each spatial option of a GPU model and write the table\n"
    "kairos plan reads (workload key 'profile'). On MIG instances the admin configured,\n"
    "CMD runs on one instance of each profile; otherwise MPS active-thread percentages\n"
    "matching each option's SM share stand in (a private MPS daemon, stopped after).\n"
    "CMD prints a line throughput=<number> (and may print memory_mib=<number>).\n"
    "\n"
    "      --model NAME    GPU model whose options are measured (default H200-141GB)\n"
    "      --name NAME     the workload's name in the table (default: CMD's name)\n"
    "      --out FILE      write the table there (default: standard output)\n"
    "      --method M      auto (default: mig if MIG devices exist, else mps), mps or mig\n"
    "      --timeout S     seconds per run before CMD is killed (default 120)\n"
    "      --time-shares L time shares in % of the whole GPU, e.g. 25,50,75: one more run\n"
    "                      each, as a tenant of the running kairosd with its GPU time capped\n"
    "                      there (kairos run --limit; root or a kairosd administrator)\n"
    "      --mem SIZE      those runs' tenant memory quota (kairos run --mem; default 100%)\n"
    "  -h, --help          this text\n";

struct profile_run {
    char *const *cmd;
    char **run_argv;           /* set: the child is cmd_run(run_argc, run_argv), not cmd */
    int run_argc;
    const char *env[4][2];     /* extra environment: name, value */
    int timeout_s;
    double thr, mem;           /* mem: reported, or -1 */
    double mem_rise;           /* sampled rise of the GPU's used memory (MiB) */
};

/* One value from a command's standard output (nvidia-smi queries); NULL on failure.
 * The caller frees it. */
static char *profile_capture(char *const *argv)
{
    int fd[2];
    if (pipe(fd))
        return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    char *buf = malloc(65536);
    size_t len = 0;
    ssize_t got;
    while (buf && (got = read(fd[0], buf + len, 65535 - len)) > 0)
        len += (size_t)got;
    close(fd[0]);
    int st = 0;
    if (pid > 0)
        waitpid(pid, &st, 0);
    if (!buf || pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

static double profile_gpu_used(void)
{
    static char *const q[] = {"nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                              "-i", "0", NULL};
    char *out = profile_capture(q);
    double v = out ? strtod(out, NULL) : -1;
    free(out);
    return v;
}

/* Run CMD once with the run's environment; 0 and r->thr set, or -1 with a message. */
static int profile_run_once(struct profile_run *r)
{
    int fd[2];
    double base = profile_gpu_used(), start = plan_cli_monotonic();
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        for (int k = 0; k < 4 && r->env[k][0]; k++)
            setenv(r->env[k][0], r->env[k][1], 1);
        if (r->run_argv)
            _exit(cmd_run(r->run_argc, r->run_argv));
        execvp(r->cmd[0], r->cmd);
        fprintf(stderr, "kairos profile: cannot run %s: %s\n", r->cmd[0], strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap + 1);
    int st = 0, done = 0;
    r->mem_rise = 0;
    while (out && !done) {
        struct pollfd p = {fd[0], POLLIN, 0};
        if (poll(&p, 1, 200) > 0) {
            if (len == cap) {   /* keep the last half: the result is printed last */
                memmove(out, out + cap / 2, cap / 2);
                len = cap / 2;
            }
            ssize_t got = read(fd[0], out + len, cap - len);
            done = got <= 0;
            len += got > 0 ? (size_t)got : 0;
        }
        double used = profile_gpu_used();
        if (base >= 0 && used - base > r->mem_rise)
            r->mem_rise = used - base;
        if (plan_cli_monotonic() - start > r->timeout_s) {
            kill(pid, SIGKILL);
            fprintf(stderr, "kairos profile: %s ran past %d s; killed\n", r->cmd[0], r->timeout_s);
            done = 1;
        }
    }
    close(fd[0]);
    waitpid(pid, &st, 0);
    if (!out)
        return -1;
    out[len] = '\0';
    r->thr = -1;
    r->mem = -1;
    plan_profile_scan(out, &r->thr, &r->mem);
    free(out);
    if (!WIFEXITED(st) || WEXITSTATUS(st) || !(r->thr > 0)) {
        fprintf(stderr, "kairos profile: %s %s without a line throughput=<number>\n", r->cmd[0],
                WIFEXITED(st) && !WEXITSTATUS(st) ? "finished" : "failed");
        return -1;
    }
    return 0;
}

/* MIG devices the admin configured: profile name and UUID from nvidia-smi -L. */
static int profile_mig_devices(char names[][PLAN_NAME_MAX], char uuids[][96], int max)
{
    static char *const q[] = {"nvidia-smi", "-L", NULL};
    char *out = profile_capture(q), *save = NULL;
    int n = 0;
    for (char *l = out ? strtok_r(out, "\n", &save) : NULL; l && n < max; l = strtok_r(NULL, "\n", &save)) {
        char name[PLAN_NAME_MAX], uuid[96];
        const char *mig = strstr(l, "MIG "), *u = strstr(l, "UUID: ");
        if (!mig || !u || sscanf(mig, "MIG %47s", name) != 1 || sscanf(u, "UUID: %95[^)]", uuid) != 1)
            continue;
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen |= !strcmp(names[k], name);
        if (!seen) {
            snprintf(names[n], PLAN_NAME_MAX, "%s", name);
            snprintf(uuids[n++], 96, "%s", uuid);
        }
    }
    free(out);
    return n;
}

static int profile_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Start or stop the private MPS daemon; 0 on success. */
static int profile_mps(const char *pipe_dir, const char *log_dir, int start)
{
    pid_t pid;
    int fd[2], st = 0;
    if (pipe(fd))
        return -1;
    if ((pid = fork()) == 0) {
        dup2(fd[0], 0);
        close(fd[0]);
        close(fd[1]);
        setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir, 1);
        setenv("CUDA_MPS_LOG_DIRECTORY", log_dir, 1);
        if (start)
            execlp("nvidia-cuda-mps-control", "nvidia-cuda-mps-control", "-d", (char *)NULL);
        else
            execlp("nvidia-cuda-mps-control", "nvidia-cuda-mps-control", (char *)NULL);
        _exit(127);
    }
    close(fd[0]);
    if (!start && write(fd[1], "quit\n", 5) != 5)
        st = -1;
    close(fd[1]);
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
        return -1;
    return 0;
}

static int profile_by_mps(struct profile_run *r, const struct plan_gpu_model *m,
                          struct plan_profile_table *t)
{
    int percent[PLAN_MAX_OPTIONS], point_of[PLAN_MAX_OPTIONS], rc = 0;
    double thr[PLAN_MAX_OPTIONS] = {0};
    const char *tmp = getenv("TMPDIR");
    char dir[200], pipe_dir[256], log_dir[256], pct[16];
    snprintf(dir, sizeof(dir), "%.170s/kairos-profile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return -1;
    snprintf(pipe_dir, sizeof(pipe_dir), "%s/pipe", dir);
    snprintf(log_dir, sizeof(log_dir), "%s/log", dir);
    if (mkdir(pipe_dir, 0700) || mkdir(log_dir, 0700) || profile_mps(pipe_dir, log_dir, 1)) {
        fprintf(stderr, "kairos profile: cannot start nvidia-cuda-mps-control -d (is the NVIDIA "
                "driver's MPS installed?)\n");
        nftw(dir, profile_rm, 8, FTW_DEPTH | FTW_PHYS);
        return -1;
    }
    int n = plan_profile_points(m, percent, point_of);
    r->env[0][0] = "CUDA_MPS_PIPE_DIRECTORY";
    r->env[0][1] = pipe_dir;
    r->env[1][0] = "CUDA_MPS_LOG_DIRECTORY";
    r->env[1][1] = log_dir;
    r->env[2][0] = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
    r->env[2][1] = pct;
    for (int k = 0; k < n && !rc; k++) {
        snprintf(pct, sizeof(pct), "%d", percent[k]);
        fprintf(stderr, "kairos profile: %s at %d %% of the SMs\n", r->cmd[0], percent[k]);
        rc = profile_run_once(r);
        thr[k] = r->thr;
        if (r->mem > t->mem_mib)
            t->mem_mib = (int64_t)r->mem;
        if (r->mem < 0 && r->mem_rise > t->mem_mib)
            t->mem_mib = (int64_t)r->mem_rise;
    }
    if (profile_mps(pipe_dir, log_dir, 0))
        fprintf(stderr, "kairos profile: the MPS daemon did not quit cleanly\n");
    nftw(dir, profile_rm, 8, FTW_DEPTH | FTW_PHYS);
    for (int o = 0; !rc && o < plan_option_count(m); o++) {
        snprintf(t->option[t->n], PLAN_NAME_MAX, "%s", plan_option_name(m, o));
        t->thr[t->n++] = thr[point_of[o]];
    }
    snprintf(t->method, sizeof(t->method), "mps");
    snprintf(t->note, sizeof(t->note), "MPS active-thread percentage as the proxy of each "
             "option's SM share (memory bandwidth and L2 are not partitioned as MIG does)");
    return rc;
}

static int profile_by_mig(struct profile_run *r, char names[][PLAN_NAME_MAX], char uuids[][96],
                          int n, struct plan_profile_table *t)
{
    r->env[0][0] = "CUDA_VISIBLE_DEVICES";
    for (int k = 0; k < n; k++) {
        r->env[0][1] = uuids[k];
        fprintf(stderr, "kairos profile: %s on MIG %s (%s)\n", r->cmd[0], names[k], uuids[k]);
        if (profile_run_once(r))
            return -1;
        snprintf(t->option[t->n], PLAN_NAME_MAX, "%.47s", names[k]);
        t->thr[t->n++] = r->thr;
        if (r->mem > t->mem_mib)
            t->mem_mib = (int64_t)r->mem;
        if (r->mem < 0 && r->mem_rise > t->mem_mib)
            t->mem_mib = (int64_t)r->mem_rise;
    }
    snprintf(t->method, sizeof(t->method), "mig");
    snprintf(t->note, sizeof(t->note), "measured on the MIG instances configured by the admin "
             "(the whole GPU is not measurable while MIG is on)");
    return 0;
}

/* "25,50,75" (a % after each allowed) into ascending shares in (0, 100); 0, or 2 after a
 * message. */
static int profile_parse_shares(const char *list, struct plan_profile_table *t)
{
    const char *p = list;
    t->n_shares = 0;
    while (*p) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v > 0 && v < 100)) {
            fprintf(stderr, "kairos profile: --time-shares %s: each share is a percentage above "
                    "0 and below 100 (100 %% is the whole GPU's own run), e.g. 25,50,75\n", list);
            return 2;
        }
        end += *end == '%';
        if ((*end && *end != ',') || t->n_shares == PLAN_MAX_SHARES) {
            fprintf(stderr, "kairos profile: --time-shares %s: expected at most %d percentages "
                    "separated by commas, e.g. 25,50,75\n", list, PLAN_MAX_SHARES);
            return 2;
        }
        int k = t->n_shares++;
        while (k > 0 && t->share_pct[k - 1] > v) {
            t->share_pct[k] = t->share_pct[k - 1];
            k--;
        }
        t->share_pct[k] = v;
        if (k > 0 && t->share_pct[k - 1] == v) {
            fprintf(stderr, "kairos profile: --time-shares %s: %g given twice\n", list, v);
            return 2;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* CMD once per time share on the whole GPU, through cmd_run as
 * `kairos run --mem MEM --limit PCT% -- CMD`; then the shares are checked as the planner
 * will check them. 0, or -1 after a message. */
static int profile_by_shares(struct profile_run *r, const char *mem, struct plan_profile_table *t)
{
    int n = 0;
    while (r->cmd[n])
        n++;
    char **argv = calloc((size_t)n + 8, sizeof(*argv)), limit[32], why[300];
    if (!argv)
        return -1;
    static char run[] = "run", opt_mem[] = "--mem", opt_limit[] = "--limit", dashes[] = "--";
    char *head[] = {run, opt_mem, (char *)mem, opt_limit, limit, dashes};
    memcpy(argv, head, sizeof(head));
    memcpy(argv + 6, r->cmd, (size_t)n * sizeof(*argv));
    memset(r->env, 0, sizeof(r->env));
    r->run_argv = argv;
    r->run_argc = n + 6;
    int rc = 0;
    for (int k = 0; k < t->n_shares && !rc; k++) {
        snprintf(limit, sizeof(limit), "%g%%", t->share_pct[k]);
        fprintf(stderr, "kairos profile: %s on the whole GPU, its GPU time capped at %s by "
                "kairosd (kairos run --limit %s)\n", r->cmd[0], limit, limit);
        rc = profile_run_once(r);
        t->share_thr[k] = r->thr;
    }
    r->run_argv = NULL;
    free(argv);
    if (!rc && plan_profile_check_shares(t, why, sizeof(why))) {
        fprintf(stderr, "kairos profile: the time shares measured are not usable (%s); the "
                "table is not written. Measured:", why);
        for (int k = 0; k < t->n_shares; k++)
            fprintf(stderr, " %g %%: %g,", t->share_pct[k], t->share_thr[k]);
        fprintf(stderr, " whole: the throughput table's\n");
        rc = -1;
    }
    return rc;
}

int cmd_profile(int argc, char **argv)
{
    static const struct option longs[] = {
        {"model", required_argument, NULL, 'M'}, {"name", required_argument, NULL, 'N'},
        {"out", required_argument, NULL, 'o'},   {"method", required_argument, NULL, 'm'},
        {"timeout", required_argument, NULL, 'T'}, {"help", no_argument, NULL, 'h'},
        {"time-shares", required_argument, NULL, 'S'}, {"mem", required_argument, NULL, 'G'},
        {NULL, 0, NULL, 0},
    };
    const char *model = "H200-141GB", *name = NULL, *out = NULL, *method = "auto";
    const char *mem = "100%";
    struct profile_run r;
    struct plan_profile_table t;
    struct plan_gpu_model m;
    int ch;
    memset(&r, 0, sizeof(r));
    memset(&t, 0, sizeof(t));
    r.timeout_s = 120;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
        switch (ch) {
        case 'M': model = optarg; break;
        case 'N': name = optarg; break;
        case 'o': out = optarg; break;
        case 'm': method = optarg; break;
        case 'T':
            if (plan_cli_count(optarg, 1, 86400, &r.timeout_s)) {
                fprintf(stderr, "kairos profile: --timeout takes seconds (1..86400), got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'S':
            if (profile_parse_shares(optarg, &t))
                return 2;
            break;
        case 'G': mem = optarg; break;
        case 'h': fputs(profile_usage, stdout); return 0;
        default:
            fprintf(stderr, "%skairos profile: unknown or incomplete option '%s'\n", profile_usage,
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind >= argc || (strcmp(method, "auto") && strcmp(method, "mps") && strcmp(method, "mig"))) {
        fprintf(stderr, "%skairos profile: %s\n", profile_usage, optind >= argc
                ? "expected -- CMD" : "--method takes auto, mps or mig");
        return 2;
    }
    if (plan_model_builtin(model, &m)) {
        fprintf(stderr, "kairos profile: unknown GPU model '%s' (built in: A100-40GB, "
                "A100-40GB+1g.10gb, H100-80GB, H200-141GB)\n", model);
        return 2;
    }
    r.cmd = argv + optind;
    const char *base = strrchr(r.cmd[0], '/');
    snprintf(t.model, sizeof(t.model), "%s", model);
    snprintf(t.workload, sizeof(t.workload), "%.47s", name ? name : base ? base + 1 : r.cmd[0]);
    char names[PLAN_MAX_PROFILES * 2][PLAN_NAME_MAX], uuids[PLAN_MAX_PROFILES * 2][96];
    int n_mig = strcmp(method, "mps") ? profile_mig_devices(names, uuids, PLAN_MAX_PROFILES * 2) : 0;
    if (!strcmp(method, "mig") && !n_mig) {
        fprintf(stderr, "kairos profile: --method mig, but nvidia-smi -L lists no MIG device "
                "(MIG is the admin's to configure; use --method mps)\n");
        return 1;
    }
    if (t.n_shares && n_mig) {
        fprintf(stderr, "kairos profile: --time-shares measures the whole GPU, which MIG hides "
                "(nvidia-smi -L lists MIG devices); profile the time shares on a GPU with MIG "
                "off\n");
        return 1;
    }
    if (t.n_shares && cmd_run_daemon_check("kairos profile")) {
        fprintf(stderr, "kairos profile: --time-shares runs CMD as a tenant of kairosd (kairos "
                "run --limit), so kairosd must be running; nothing was run\n");
        return 1;
    }
    int rc = n_mig ? profile_by_mig(&r, names, uuids, n_mig, &t) : profile_by_mps(&r, &m, &t);
    if (!rc && t.n_shares)
        rc = profile_by_shares(&r, mem, &t);
    if (rc)
        return 1;
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f || plan_profile_write(&t, f) || (out && fclose(f))) {
        fprintf(stderr, "kairos profile: cannot write %s\n", out ? out : "the table");
        return 1;
    }
    return 0;
}
