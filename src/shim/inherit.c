/* inherit.c - the fork report to kairosd (see inherit.h). */
#include "shim/inherit.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "kairos/proto.h"
#include "shim/agent.h"
#include "shim/fdtable.h"
#include "shim/memguard.h"
#include "shim/settings.h"
#include "shim/state.h"

/* Whether a fork now hands NVIDIA files to the child in a way kairosd must know:
 * a named tenant's process with at least one NVIDIA file open. */
static bool fork_shares_files(void)
{
    if (!memguard_active() || settings_get()->mode != SETTINGS_TENANT)
        return false;
    uint32_t files = 0, descriptors = 0;
    state_fd_counts(&files, &descriptors);
    return files > 0;
}

static void report_fork(const struct shim_real *r, pid_t child)
{
    int saved = errno;
    char err[KAIROS_MSG_MAX] = "";
    int rc = agent_connected() ? 0 : memguard_first_gpu_use(r);
    if (rc == 0) {
        struct kairos_forked m = {.child_pid = (uint32_t)child};
        rc = agent_report_handover(KAIROS_MSG_FORKED, &m, sizeof m, err, sizeof err);
    }
    if (rc < 0 && settings_get()->log_stderr)
        dprintf(2, "kairos[%d]: could not tell kairosd that child %d shares this process's "
                "GPU files (%s); its memory may be released from the ledger before the "
                "child closes them\n", (int)getpid(), (int)child, err[0] ? err : "no daemon");
    errno = saved;
}

pid_t shim_fork(const struct shim_real *r)
{
    bool report = fork_shares_files();
    pid_t pid = r->fork();
    if (pid < 0)
        return pid;
    int saved = errno;
    state_lock();
    fdtable_mark_shared_locked(); /* in both: neither's last close is the file's */
    state_unlock();
    errno = saved;
    if (pid > 0 && report)
        report_fork(r, pid);
    return pid;
}
