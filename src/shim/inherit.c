/* inherit.c - the reports to kairosd of who else holds NVIDIA files: a child this
 * process forked, files it started with, received or took (see inherit.h). */
#include "shim/inherit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kairos/proto.h"
#include "shim/agent.h"
#include "shim/dispatch.h"
#include "shim/fdtable.h"
#include "shim/memguard.h"
#include "shim/reentry.h"
#include "shim/settings.h"
#include "shim/state.h"

/* How many NVIDIA files this process has open; a process that never had one is
 * left alone (no state made, no lock taken). */
static uint32_t nvidia_files(void)
{
    if (!fdtable_had_files())
        return 0;
    uint32_t files = 0, descriptors = 0;
    state_fd_counts(&files, &descriptors);
    return files;
}

/* Whether kairosd must hear of the fork: a named tenant's process. */
static bool tenant_process(void)
{
    return memguard_active() && settings_get()->mode == SETTINGS_TENANT;
}

/* Reports child; 0, or -EAGAIN when kairosd follows no more hand-overs for this
 * process's tenant or user, or gives no ticket in time (inherit.h: the fork must
 * fail). Takes no lock that is held across a connect or a wait for kairosd but with
 * a kairosd of before the tickets (agent_report_handover, as before). */
static int report_fork(pid_t child)
{
    int saved = errno;
    char err[KAIROS_MSG_MAX] = "";
    int rc = agent_report_fork(child, err, sizeof err);
    if (rc == -EOPNOTSUPP && agent_connected()) {
        struct kairos_forked m = {.child_pid = (uint32_t)child};
        rc = agent_report_handover(KAIROS_MSG_FORKED, &m, sizeof m, err, sizeof err);
    }
    if (rc == -EAGAIN)
        dprintf(2, "kairos[%d]: fork() failed (EAGAIN): kairosd cannot follow another child "
                "holding this process's GPU files: %s\n", (int)getpid(), err);
    else if (rc < 0 && settings_get()->log_stderr)
        dprintf(2, "kairos[%d]: could not tell kairosd that child %d shares this process's "
                "GPU files (%s); its memory may be released from the ledger before the "
                "child closes them\n", (int)getpid(), (int)child, err[0] ? err : "no daemon");
    errno = saved;
    return rc == -EAGAIN ? rc : 0;
}

/* The child kairosd would not follow: killed and reaped before anyone sees it. */
static void unfork(pid_t child)
{
    kill(child, SIGKILL);
    while (waitpid(child, NULL, __WALL) < 0 && errno == EINTR)
        ;
}

pid_t shim_fork(const struct shim_real *r)
{
    bool files = nvidia_files() > 0;
    pid_t pid = r->fork();
    if (pid < 0 || !files)
        return pid;
    int saved = errno;
    state_lock(); /* exists already (it has files): no allocation in the child */
    fdtable_mark_shared_locked(); /* in both: neither's last close is the file's */
    state_unlock();
    errno = saved;
    if (pid == 0) {
        shim_fork_child_closes_lightly(); /* no lock, no malloc in its closes */
        return 0;                         /* nothing more until it execs */
    }
    reentry_enter(); /* the agent's locks: a handler's close is recorded later */
    bool refused = tenant_process() && report_fork(pid) == -EAGAIN;
    reentry_leave();
    if (refused) {
        unfork(pid);
        errno = EAGAIN;
        return -1;
    }
    errno = saved;
    return pid;
}

/* ---- descriptors this process holds of another's files ----------------------------- */

#define KCMP_FILE_TYPE 0 /* KCMP_FILE of <linux/kcmp.h> */

/* A node of the driver where RM clients or UVM state live. */
static bool driver_fd(const struct shim_real *r, int fd)
{
    struct stat st;
    int minor;
    if (r->fstat(fd, &st) != 0)
        return false;
    if (fdtable_classify_stat(&st, &minor) != RM_NODE_NONE)
        return true;
    char proc[40], path[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = S_ISCHR(st.st_mode) ? r->readlink(proc, path, sizeof path - 1) : -1;
    if (n <= 0)
        return false;
    path[n] = '\0';
    return fdtable_classify_path(AT_FDCWD, path, &minor) == RM_NODE_UVM;
}

/* Whether fd is the same open file as one of pid's descriptors (kcmp). */
static bool shares_with(int fd, pid_t pid)
{
    char dir[40];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool same = false;
    pid_t self = getpid();
    for (struct dirent *e = readdir(d); e && !same; e = readdir(d))
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
            same = syscall(SYS_kcmp, self, pid, KCMP_FILE_TYPE, fd,
                           (int)strtol(e->d_name, NULL, 10)) == 0;
    closedir(d);
    return same;
}

static void report_inherited(const struct shim_real *r, pid_t from, uint32_t flags,
                             const int *fds, size_t n)
{
    if (!memguard_active() || settings_get()->mode != SETTINGS_TENANT || from <= 0 ||
        from == getpid())
        return;
    struct kairos_inherited m = {.from_pid = (uint32_t)from, .flags = flags};
    for (size_t i = 0; i < n && m.n_fds < KAIROS_INHERITED_MAX_FDS; i++)
        if (fds[i] >= 0 && driver_fd(r, fds[i]))
            m.fds[m.n_fds++] = fds[i];
    if (m.n_fds == 0)
        return;
    int saved = errno;
    char err[KAIROS_MSG_MAX] = "";
    int rc = agent_connected() ? 0 : memguard_first_gpu_use(r);
    if (rc == 0)
        rc = agent_report_handover(KAIROS_MSG_INHERITED, &m, sizeof m, err, sizeof err);
    if (rc < 0 && settings_get()->log_stderr)
        dprintf(2, "kairos[%d]: could not tell kairosd that this process holds GPU files of "
                "pid %d (%s)\n", (int)getpid(), (int)from, err[0] ? err : "no daemon");
    errno = saved;
}

void inherit_at_start(const struct shim_real *r)
{
    if (!memguard_active() || settings_get()->mode != SETTINGS_TENANT)
        return;
    pid_t parent = getppid();
    int fds[KAIROS_INHERITED_MAX_FDS];
    size_t n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    for (struct dirent *e = readdir(d); e && n < KAIROS_INHERITED_MAX_FDS; e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = (int)strtol(e->d_name, NULL, 10);
        /* only the parent's files: after an exec in the same process nothing is new */
        if (fd != dirfd(d) && driver_fd(r, fd) && shares_with(fd, parent))
            fds[n++] = fd;
    }
    closedir(d);
    if (n)
        report_inherited(r, parent, KAIROS_INHERITED_EXEC, fds, n);
}

void inherit_received(const struct shim_real *r, int sock, const int *fds, size_t n)
{
    struct ucred peer;
    socklen_t len = sizeof peer;
    if (n == 0 || getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0)
        return;
    report_inherited(r, peer.pid, KAIROS_INHERITED_RECEIVED, fds, n);
}

void inherit_taken(const struct shim_real *r, int pidfd, int fd)
{
    char path[48], line[128];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    FILE *f = fopen(path, "re");
    pid_t from = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Pid: %d", &from) == 1)
            break;
    if (f)
        fclose(f);
    report_inherited(r, from, KAIROS_INHERITED_RECEIVED, &fd, 1);
}
