/* mps_domains.c - starting, watching, adopting and retiring the MPS control daemons
 * of the fault domains (see mps_domains.h). */
#include "daemon/space/mps_domains.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/base/log.h"
#include "daemon/base/loop.h"
#include "daemon/base/proc_stat.h"
#include "daemon/memory/ledger.h"
#include "daemon/tenants/settings_book.h"

/* ---- paths ------------------------------------------------------------------------- */

/* The control program as a path: cfg's when absolute, else found on PATH. */
static int resolve_control(const struct space_config *cfg, char *out, size_t cap)
{
    if (cfg->mps_control[0] == '/') {
        snprintf(out, cap, "%s", cfg->mps_control);
        return access(out, X_OK) ? -errno : 0;
    }
    const char *path = getenv("PATH");
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path ? path : "/usr/local/bin:/usr/bin:/bin");
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        if (snprintf(out, cap, "%s/%s", dir, cfg->mps_control) < (int)cap && !access(out, X_OK))
            return 0;
    }
    return -ENOENT;
}

void mps_domains_root_of(const char *socket_path, char *out, size_t cap)
{
    const char *slash = strrchr(socket_path, '/');
    if (slash)
        snprintf(out, cap, "%.*s/mps", (int)(slash - socket_path), socket_path);
    else
        snprintf(out, cap, "./mps");
}

static void daemon_dir(const struct mps_domains *m, const char *domain, uint32_t uid,
                       char *out, size_t cap)
{
    if (uid == MPS_SHARED_UID)
        snprintf(out, cap, "%s/%s@all", m->root, domain);
    else
        snprintf(out, cap, "%s/%s@%u", m->root, domain, uid);
}

static void sub(const struct mps_daemon *d, const char *leaf, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", d->dir, leaf);
}

/* mkdir that accepts an existing folder, then owner and mode as asked. */
static int make_dir(const char *path, uid_t uid, mode_t mode)
{
    if (mkdir(path, mode) && errno != EEXIST)
        return -errno;
    struct stat st;
    if (lstat(path, &st) || !S_ISDIR(st.st_mode))
        return -ENOTDIR;
    if ((st.st_uid != uid && chown(path, uid, (gid_t)-1)) || chmod(path, mode))
        return -errno;
    return 0;
}

/* ---- the exit watch ----------------------------------------------------------------- */

static void stopped(struct mps_daemon *d, const char *how)
{
    log_warn("space: the MPS control daemon of fault domain %s (%s%u, pid %d) %s; its clients "
             "lost their server; it starts again with the domain's next process", d->domain,
             d->uid == MPS_SHARED_UID ? "all uids" : "uid ",
             d->uid == MPS_SHARED_UID ? 0 : d->uid, (int)d->pid, how);
    if (d->watch && d->owner->loop)
        loop_del(d->owner->loop, d->watch);
    d->watch = NULL;
    if (d->pidfd >= 0)
        close(d->pidfd);
    d->pidfd = -1;
    d->pid = 0;
    d->quitting = false;
    char pidfile[MPS_DIR_MAX + 16];
    sub(d, "control.pid", pidfile, sizeof pidfile);
    unlink(pidfile);
}

static void on_exit_event(void *ctx, int fd, uint32_t events)
{
    (void)fd;
    (void)events;
    struct mps_daemon *d = ctx;
    int status = 0;
    char how[64] = "exited";
    if (waitpid(d->pid, &status, WNOHANG) == d->pid) { /* our child: reaped */
        if (WIFEXITED(status))
            snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
            snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(status));
    }
    stopped(d, how);
}

static int watch(struct mps_domains *m, struct mps_daemon *d)
{
    d->pidfd = (int)syscall(SYS_pidfd_open, d->pid, 0);
    if (d->pidfd < 0)
        return -errno;
    if (m->loop && !(d->watch = loop_add(m->loop, d->pidfd, EPOLLIN, on_exit_event, d))) {
        int e = errno;
        close(d->pidfd);
        d->pidfd = -1;
        return -e;
    }
    return 0;
}

/* ---- start -------------------------------------------------------------------------- */

static void write_pidfile(const struct mps_daemon *d)
{
    char path[MPS_DIR_MAX + 16];
    sub(d, "control.pid", path, sizeof path);
    FILE *f = fopen(path, "we");
    if (!f)
        return;
    fprintf(f, "%d\n", (int)d->pid);
    fclose(f);
}

/* In a child about to exec: a per-uid daemon, and the client that talks to it, run as
 * that uid, so that nothing running as root opens a file in a folder the user owns (a
 * symlink planted there would be followed as root). A multi-user daemon stays root's,
 * its folders root's. */
static void become(uint32_t uid)
{
    if (uid == MPS_SHARED_UID || uid == geteuid())
        return;
    struct passwd *pw = getpwuid(uid); /* kairosd is single-threaded: safe after fork */
    gid_t gid = pw ? pw->pw_gid : (gid_t)uid;
    if (setgroups(0, NULL) || setgid(gid) || setuid(uid))
        _exit(126);
}

/* The child: a session of its own (kairosd's signals and its unit's stop do not reach
 * it through the process group), the pipe and log folders, nothing else inherited. */
static void exec_control(const struct mps_daemon *d, const char *control, bool multi)
{
    char pipe[MPS_DIR_MAX + 16], logd[MPS_DIR_MAX + 16];
    sub(d, "pipe", pipe, sizeof pipe);
    sub(d, "log", logd, sizeof logd);
    setsid();
    become(d->uid);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
    }
    syscall(SYS_close_range, 3, ~0u, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL); /* kairosd blocks the ones its signalfd reads */
    setenv("CUDA_MPS_PIPE_DIRECTORY", pipe, 1);
    setenv("CUDA_MPS_LOG_DIRECTORY", logd, 1);
    char *argv[] = {"nvidia-cuda-mps-control", "-f", multi ? "-M" : NULL, NULL};
    execv(control, argv);
    _exit(127);
}

static int start(struct mps_domains *m, struct mps_daemon *d, char *why, size_t why_len)
{
    char control[PATH_MAX];
    int rc = resolve_control(m->cfg, control, sizeof control);
    if (rc) {
        snprintf(why, why_len, "fault domain %s needs NVIDIA MPS, and %s is not an executable "
                 "program on this node (%s): install the driver's nvidia-cuda-mps-control or "
                 "set space: mps_control: in kairosd's configuration", d->domain,
                 m->cfg->mps_control, strerror(-rc));
        return rc;
    }
    char pipe[MPS_DIR_MAX + 16], logd[MPS_DIR_MAX + 16];
    sub(d, "pipe", pipe, sizeof pipe);
    sub(d, "log", logd, sizeof logd);
    bool multi = d->uid == MPS_SHARED_UID;
    if ((rc = make_dir(d->dir, 0, 0711)) ||
        (rc = make_dir(logd, multi ? 0 : d->uid, 0755)) ||
        (rc = make_dir(pipe, multi ? 0 : d->uid, multi ? 0755 : 0700))) {
        snprintf(why, why_len, "kairosd cannot prepare %s for fault domain %s: %s", d->dir,
                 d->domain, strerror(-rc));
        return rc;
    }
    pid_t pid = fork();
    if (pid < 0) {
        rc = -errno;
        snprintf(why, why_len, "kairosd cannot start the MPS control daemon of fault domain "
                 "%s: %s", d->domain, strerror(-rc));
        return rc;
    }
    if (pid == 0)
        exec_control(d, control, multi);
    d->pid = pid;
    d->starts++;
    if ((rc = watch(m, d)) < 0)
        log_warn("space: cannot watch the MPS control daemon of %s (pid %d): %s", d->domain,
                 (int)pid, strerror(-rc));
    write_pidfile(d);
    log_info("space: started the MPS control daemon of fault domain %s for %s%u (pid %d, %s)",
             d->domain, multi ? "all uids" : "uid ", multi ? 0 : d->uid, (int)pid, d->dir);
    return 0;
}

/* ---- the table ---------------------------------------------------------------------- */

const struct mps_daemon *mps_domains_find(const struct mps_domains *m, const char *domain,
                                          uint32_t uid)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i]->uid == uid && !strcmp(m->v[i]->domain, domain))
            return m->v[i];
    return NULL;
}

static size_t uids_of(const struct mps_domains *m, const char *domain)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n; i++)
        n += !strcmp(m->v[i]->domain, domain);
    return n;
}

static struct mps_daemon *add(struct mps_domains *m, const char *domain, uint32_t uid)
{
    struct mps_daemon *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    snprintf(d->domain, sizeof d->domain, "%s", domain);
    d->uid = uid;
    d->pidfd = -1;
    d->owner = m;
    daemon_dir(m, domain, uid, d->dir, sizeof d->dir);
    m->v[m->n++] = d;
    return d;
}

int mps_domains_route(struct mps_domains *m, const char *domain, uint32_t uid, char *pipe_dir,
                      size_t cap, char *why, size_t why_len)
{
    const struct space_domain_config *dc = space_config_domain(m->cfg, domain);
    if (dc && dc->shared_uids)
        uid = MPS_SHARED_UID;
    struct mps_daemon *d = (struct mps_daemon *)mps_domains_find(m, domain, uid);
    if (!d && m->n >= MPS_DOMAINS_MAX) {
        snprintf(why, why_len, "kairosd runs %d MPS control daemons already (its bound): fault "
                 "domain %s cannot have one more; put tenants' uids in fewer domains or give "
                 "the domain shared_uids: true", MPS_DOMAINS_MAX, domain);
        return -EMFILE;
    }
    if (!d && uids_of(m, domain) >= MPS_DOMAIN_UIDS_MAX) {
        snprintf(why, why_len, "fault domain %s has MPS daemons for %d uids already (the bound "
                 "per domain): give it shared_uids: true (one multi-user server) or split it",
                 domain, MPS_DOMAIN_UIDS_MAX);
        return -EMFILE;
    }
    if (!d && !(d = add(m, domain, uid))) {
        snprintf(why, why_len, "kairosd is out of memory; try again");
        return -ENOMEM;
    }
    if (d->pid && d->quitting) { /* MPS takes no new client once told to quit */
        snprintf(why, why_len, "the MPS control daemon of fault domain %s (pid %d) is "
                 "shutting down, since no tenant named the domain; start the process again "
                 "once that daemon's clients have ended", domain, (int)d->pid);
        return -EAGAIN;
    }
    int rc = d->pid ? 0 : start(m, d, why, why_len);
    if (rc == 0)
        sub(d, "pipe", pipe_dir, cap);
    return rc;
}

/* ---- retire: the daemon's own quit, sent by its client program ---------------------- */

/* The child: d's control client, as d's uid, reading its commands from in_fd, its
 * answers to out_fd (-1: none kept). */
static _Noreturn void exec_client(const struct mps_daemon *d, const char *control,
                                  const char *pipe, int in_fd, int out_fd)
{
    become(d->uid);
    dup2(in_fd, 0);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(out_fd >= 0 ? out_fd : null, 1);
        dup2(null, 2);
    }
    syscall(SYS_close_range, 3, ~0u, 0);
    setenv("CUDA_MPS_PIPE_DIRECTORY", pipe, 1);
    char *argv[] = {"nvidia-cuda-mps-control", NULL};
    execv(control, argv);
    _exit(127);
}

static void send_quit(const struct mps_domains *m, const struct mps_daemon *d)
{
    char control[PATH_MAX], pipe[MPS_DIR_MAX + 16];
    if (resolve_control(m->cfg, control, sizeof control))
        return;
    sub(d, "pipe", pipe, sizeof pipe);
    int in[2];
    if (pipe2(in, O_CLOEXEC))
        return;
    pid_t pid = fork();
    if (pid == 0) { /* a grandchild does it, so that nothing waits for it */
        if (fork() != 0)
            _exit(0);
        exec_client(d, control, pipe, in[0], -1);
    }
    close(in[0]);
    if (pid > 0) {
        (void)!write(in[1], "quit\n", 5);
        waitpid(pid, NULL, 0); /* the intermediate child exits at once */
    }
    close(in[1]);
}

/* Asks d to quit unless it was asked already (then the next change of tenants does not
 * ask again) or runs no more. Whether it was asked now. */
static bool ask_to_quit(const struct mps_domains *m, struct mps_daemon *d)
{
    if (!d->pid || d->quitting)
        return false;
    d->quitting = true;
    send_quit(m, d);
    return true;
}

void mps_domains_retire(struct mps_domains *m, const char *const *named, size_t n)
{
    for (size_t i = 0; i < m->n; i++) {
        struct mps_daemon *d = m->v[i];
        bool still = false;
        for (size_t j = 0; j < n && !still; j++)
            still = !strcmp(named[j], d->domain);
        if (!still && ask_to_quit(m, d))
            log_info("space: fault domain %s is named by no tenant now: its MPS control daemon "
                     "(pid %d) is asked to quit once its clients end", d->domain, (int)d->pid);
    }
}

size_t mps_domains_quit_all(struct mps_domains *m)
{
    size_t asked = 0;
    for (size_t i = 0; i < m->n; i++)
        asked += ask_to_quit(m, m->v[i]);
    return asked;
}

void mps_domains_retire_unnamed(struct mps_domains *m, const struct ledger *l,
                                const struct settings_book *sb)
{
    const char *named[LEDGER_MAX_TENANTS];
    size_t n = 0;
    for (size_t i = 0; i < l->n_tenants && n < LEDGER_MAX_TENANTS; i++) {
        const char *domain = settings_book_of(sb, l->tenants[i]->id)->fault_domain;
        if (domain[0])
            named[n++] = domain;
    }
    mps_domains_retire(m, named, n);
}

/* ---- terminate_client: one client's contexts ended, its server and neighbours spared -- */

uint32_t mps_domains_server(const struct mps_daemon *d, const char *proc)
{
    DIR *dir = opendir(proc);
    uint32_t found = 0;
    for (struct dirent *e = dir ? readdir(dir) : NULL; e && !found; e = readdir(dir)) {
        uint32_t ppid;
        uint64_t start;
        if (!proc_stat_is_pid(e->d_name))
            continue;
        uint32_t pid = (uint32_t)strtoul(e->d_name, NULL, 10);
        if (!proc_stat_read(proc, pid, &ppid, &start) && d->pid > 0 && ppid == (uint32_t)d->pid)
            found = pid;
    }
    if (dir)
        closedir(dir);
    return found;
}

pid_t mps_domains_ask(const struct mps_domains *m, const struct mps_daemon *d,
                      const char *command, int *answer_fd)
{
    char control[PATH_MAX], pipe[MPS_DIR_MAX + 16];
    int in[2], out[2];
    if (resolve_control(m->cfg, control, sizeof control))
        return -ENOENT;
    if (pipe2(in, O_CLOEXEC))
        return -errno;
    if (pipe2(out, O_CLOEXEC | O_NONBLOCK)) {
        int rc = -errno;
        close(in[0]);
        close(in[1]);
        return rc;
    }
    sub(d, "pipe", pipe, sizeof pipe);
    pid_t pid = fork();
    if (pid == 0)
        exec_client(d, control, pipe, in[0], out[1]);
    int rc = pid < 0 ? -errno : 0;
    close(in[0]);
    close(out[1]);
    if (!rc)
        (void)!write(in[1], command, strlen(command)); /* a pipe holds far more */
    close(in[1]);
    if (rc) {
        close(out[0]);
        return rc;
    }
    *answer_fd = out[0];
    return pid;
}

pid_t mps_domains_terminate_client(const struct mps_domains *m, const char *proc,
                                   const char *domain, uint32_t uid, uint32_t client,
                                   int *answer_fd, char *why, size_t why_len)
{
    const struct mps_daemon *d = mps_domains_find(m, domain, uid);
    if (!d)
        d = mps_domains_find(m, domain, MPS_SHARED_UID);
    if (!d || d->pid <= 0) {
        snprintf(why, why_len, "no MPS control daemon of fault domain %s runs for uid %u",
                 domain, uid);
        return -ENOENT;
    }
    uint32_t server = mps_domains_server(d, proc);
    if (!server) {
        snprintf(why, why_len, "the MPS control daemon of fault domain %s (pid %d) runs no "
                 "server", domain, (int)d->pid);
        return -ESRCH;
    }
    char command[64];
    snprintf(command, sizeof command, "terminate_client %u %u\n", server, client);
    pid_t pid = mps_domains_ask(m, d, command, answer_fd);
    if (pid < 0)
        snprintf(why, why_len, "the MPS control client of fault domain %s could not be "
                 "started: %s", domain, strerror((int)-pid));
    return pid;
}

/* ---- open: adopting what a previous kairosd left running ------------------------------ */

/* Whether pid runs the program control names: its /proc/PID/exe, or for a script
 * (an interpreter's exe) the script's path, the first argument the kernel gives it. */
static bool runs(pid_t pid, const char *control)
{
    char link[64], exe[PATH_MAX], want[PATH_MAX], args[2 * PATH_MAX];
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, exe, sizeof exe - 1);
    if (n <= 0 || !realpath(control, want))
        return false;
    exe[n] = 0;
    if (!strcmp(exe, want))
        return true;
    snprintf(link, sizeof link, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(link, "re");
    if (!f)
        return false;
    size_t len = fread(args, 1, sizeof args - 1, f);
    fclose(f);
    args[len] = 0;
    size_t first = strlen(args) + 1; /* argv[1]: the script */
    char script[PATH_MAX];
    return first < len && realpath(args + first, script) && !strcmp(script, want);
}

/* "DOMAIN@UID" or "DOMAIN@all" into its parts; false for any other name. */
static bool parse_entry(const char *name, char *domain, size_t cap, uint32_t *uid)
{
    const char *at = strrchr(name, '@');
    if (!at || at == name || (size_t)(at - name) >= cap)
        return false;
    snprintf(domain, cap, "%.*s", (int)(at - name), name);
    if (!strcmp(at + 1, "all")) {
        *uid = MPS_SHARED_UID;
        return true;
    }
    char *end;
    errno = 0;
    unsigned long v = strtoul(at + 1, &end, 10);
    *uid = (uint32_t)v;
    return at[1] && !*end && !errno && v < UINT32_MAX;
}

static void adopt(struct mps_domains *m, const char *entry, const char *control)
{
    char domain[KAIROS_NAME_MAX];
    uint32_t uid;
    if (!parse_entry(entry, domain, sizeof domain, &uid) || m->n >= MPS_DOMAINS_MAX ||
        mps_domains_find(m, domain, uid))
        return;
    struct mps_daemon *d = add(m, domain, uid);
    if (!d)
        return;
    char pidfile[MPS_DIR_MAX + 16];
    sub(d, "control.pid", pidfile, sizeof pidfile);
    FILE *f = fopen(pidfile, "re");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    if (pid <= 1 || !runs(pid, control)) {
        unlink(pidfile); /* gone, or its pid now another program's */
        return;
    }
    d->pid = pid;
    d->adopted = true;
    if (watch(m, d))
        log_warn("space: cannot watch the adopted MPS control daemon of %s (pid %d)", domain,
                 pid);
    log_info("space: adopted the MPS control daemon of fault domain %s (pid %d) left running "
             "by the kairosd before", domain, pid);
}

int mps_domains_open(struct mps_domains *m, const char *root, struct loop *loop,
                     const struct space_config *cfg, char *why, size_t why_len)
{
    memset(m, 0, sizeof *m);
    if (strlen(root) >= sizeof m->root) {
        snprintf(why, why_len, "the MPS daemons' folder %s is too long", root);
        return -ENAMETOOLONG;
    }
    snprintf(m->root, sizeof m->root, "%s", root);
    m->loop = loop;
    m->cfg = cfg;
    int rc = make_dir(root, geteuid(), 0711);
    if (rc) {
        snprintf(why, why_len, "cannot make %s for the MPS daemons of space mode: %s", root,
                 strerror(-rc));
        return rc;
    }
    char control[PATH_MAX];
    DIR *dir = opendir(root);
    if (!dir || resolve_control(cfg, control, sizeof control)) {
        if (dir)
            closedir(dir);
        return 0; /* nothing to adopt, or no MPS to run: a space tenant is told at its turn */
    }
    for (struct dirent *e = readdir(dir); e; e = readdir(dir))
        if (e->d_name[0] != '.')
            adopt(m, e->d_name, control);
    closedir(dir);
    return 0;
}

void mps_domains_close(struct mps_domains *m)
{
    for (size_t i = 0; i < m->n; i++) {
        struct mps_daemon *d = m->v[i];
        if (d->watch && m->loop)
            loop_del(m->loop, d->watch);
        if (d->pidfd >= 0)
            close(d->pidfd);
        free(d);
    }
    m->n = 0;
}

bool mps_domains_server_domain(const struct mps_domains *m, const char *proc, uint32_t pid,
                               char *domain, size_t cap)
{
    uint32_t ppid;
    uint64_t start;
    if (proc_stat_read(proc, pid, &ppid, &start))
        return false;
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i]->pid > 0 && (uint32_t)m->v[i]->pid == ppid) {
            snprintf(domain, cap, "%s", m->v[i]->domain);
            return true;
        }
    return false;
}
