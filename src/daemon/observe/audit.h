/* audit.h - the audit, the backstop behind the shim: every interval it compares
 * what the GPUs hold with the ledger (docs/audit.md).
 *  - The backend's process list of each GPU, however long: a process that is no
 *    registered member is reported; a tenant whose member processes together use
 *    more than its quota is reported with them, the largest named until the rest fit.
 *  - memory.used of each GPU against the processes listed, the members' holdings and
 *    the overhead allowance: memory that stays unexplained longer than
 *    leave_grace_ms is reported with the processes that may hold it.
 *  - The openers of /dev/nvidia* found through /proc (procscan.h) every
 *    AUDIT_SCAN_EVERY intervals, and at once when memory is unexplained: an opener
 *    that is neither a member nor listed is reported; they are the holders named.
 *    Without a GPU backend this scan is all the audit does, and it says so.
 *  - An NVIDIA MPS server (mps_server.h: root's binary, whatever its uid) is no
 *    intruder: its clients make their own allocations and are members charged for
 *    them. It is noted once; its own memory, outside every quota, is reported when
 *    above mps_server_max; it is never killed (its clients' work would end with it).
 *  - A member whose connection just closed still holds memory in the driver for a
 *    few hundred ms: for leave_grace_ms after it left (and while it is exiting) it
 *    is not taken for an intruder.
 * Each finding is reported once while it stays. With audit: { action: kill } the
 * processes named for memory they hold are killed (SIGKILL), except the exempt
 * (by command and/or uid; by default root's monitoring tools), pid 1 and kairosd;
 * an opener with no memory seen is only reported. Each kill is logged with why.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_AUDIT_H
#define KAIROS_DAEMON_AUDIT_H

#include "daemon/config/config.h"
#include "daemon/gpu/gpu.h"
#include "daemon/base/loop.h"
#include "daemon/tenants/tenants.h"

struct audit;
struct heirs;
struct linger_set;
struct mps_domains;

/* What the audit reads, given at init. */
struct audit_deps {
    struct loop *loop;
    struct gpu_backend *gpu;  /* NULL (no backend): the audit scans /proc only */
    struct tenants *ts;
    const struct config *cfg;
    const char *proc_root;    /* where processes are looked up and scanned (NULL:
                               * "/proc"; tests: a directory of files, kept by the caller) */
    /* Departed members whose charge lingers (linger.h) are no members for the audit:
     * their memory stays explained by the charge, but a process still on the GPU
     * after audit leave_grace_ms is reported like any member that left. NULL: none. */
    const struct linger_set *linger;
    /* Who holds members' NVIDIA files (heirs.h): an opener that holds a member's files
     * (a forked child, a verified receiver) is no intruder while that member, live or
     * lingering, is charged for them. NULL: none. */
    struct heirs *heirs;
    /* Space mode's MPS daemons (NULL: none): a member of a fault domain the audit
     * kills has its MPS client ended by terminate_client first (space/client_end.h). */
    const struct mps_domains *mps;
};

int audit_init(struct audit **out, const struct audit_deps *deps);
void audit_fini(struct audit *a);
/* Re-reads cfg's interval (after a reload). */
void audit_reconfigure(struct audit *a);
/* Who must own an MPS server's binary and its folder (mps_server.h): root
 * (MPS_SERVER_OWNER) until set. For tests; kairosd never sets it. */
void audit_set_mps_owner(struct audit *a, uint32_t owner);
/* The clock findings are timed by: clock(ctx) in ms, CLOCK_MONOTONIC until set
 * (NULL: back to it). For tests; kairosd never sets it. */
void audit_set_clock(struct audit *a, uint64_t (*clock)(void *ctx), void *ctx);
/* One pass (also what the timer runs). */
void audit_tick(struct audit *a);

#endif /* KAIROS_DAEMON_AUDIT_H */
