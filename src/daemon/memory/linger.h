/* linger.h - a departed process's memory charge stays while the GPU still holds
 * its memory.
 *
 * The driver frees an RM client's memory at the last reference to the open file
 * it lives on, not when the process that made it leaves: a child that inherited
 * the descriptor, or the program a process exec'd without O_CLOEXEC, keeps it.
 * When a member process departs (its connection hangs up or it exits) while the
 * GPU backend (NVML, or the fake in tests) still lists its pid with memory in
 * use, or the holder check (heirs.h: the process itself after an exec, or a
 * process it forked or handed its descriptors to, still holds a driver file) says
 * its files live on, its ledger member stays, holding what it held, and is
 * released once neither says so (checked every LINGER_CHECK_MS). With neither a
 * GPU backend nor a holder check a departure releases at once, as before.
 *
 * The GPU may stop listing the pid before its memory.used has dropped (the driver
 * frees after its process list forgets the client). So while a member lingers its
 * GPUs' memory.used is sampled with what the backend attributes to the processes
 * it lists (the difference is memory no listed process accounts for: the driver's
 * own); once released, what that difference has grown by since (at most what the
 * member held) is the tenant's "draining" amount on that GPU (ledger.h): it counts
 * against the tenant's quota until memory.used shows it gone, or
 * LINGER_DRAIN_MAX_MS passed (a backend that never shows it must not lock the
 * tenant out; logged). Only the GPU's own figures are compared, never the ledger's
 * (whose holdings lead or lag the driver's by what is in flight). Memory that no
 * listed process accounts for and that appears meanwhile for another reason (the
 * few MiB RM keeps in the kernel for a new context, memory taken with no context)
 * is taken for draining memory: at most what the member held, for at most the
 * bound; less than LINGER_DRAIN_SLACK (16 MiB; RM keeps 7 MiB per context on the
 * H200) drains nothing. A backend that cannot tell memory.used or a process's
 * memory drains nothing.
 *
 * A lingering member's unused credit is counted as held with it (it may have taken
 * some after its last report: an exec right after allocating); while the GPU lists
 * the process with its memory, the charge is settled to that figure at each check,
 * never below what the process had reported when it departed.
 *
 * A member that the GPU no longer lists when it departs (NVML forgot it first, or
 * the process exited before the list was read) drains the same way when a sample
 * of its GPU (taken every LINGER_BASELINE_MS while there are members) listed it
 * with memory at most LINGER_BASELINE_MAX_AGE_MS before: the last such sample is
 * the evidence that its memory was held, and the comparison with it says whether
 * memory.used still shows it. One that was never sampled, or not lately, is
 * released at once. A member the GPU does not list when it
 * departs is released at once: nothing shows its memory was still held, and
 * holding it on a guess would refuse the next process's allocations.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_LINGER_H
#define KAIROS_DAEMON_LINGER_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/gpu/gpu.h"
#include "daemon/memory/ledger.h"
#include "daemon/base/loop.h"

#define LINGER_CHECK_MS 200
#define LINGER_DRAIN_MAX_MS 2000  /* the longest a tenant waits for memory.used to drop */
#define LINGER_DRAIN_SLACK (16ull << 20) /* less than this still shown drains nothing */
#define LINGER_BASELINE_MS 1000   /* how often the GPUs are sampled while there are members */
#define LINGER_BASELINE_MAX_AGE_MS 2500 /* the oldest sample taken as evidence */

struct linger_set; /* not "struct linger": <sys/socket.h> has one (SO_LINGER) */

/* What linger works with, given at init. */
struct linger_deps {
    struct loop *loop;
    struct gpu_backend *gpu;  /* NULL: only the holder check keeps a charge */
    struct ledger *ledger;    /* the members that linger stay in it */
    unsigned n_gpus;
    /* After a lingering member's release: whether its tenant went with it (an ad hoc
     * tenant without members, a removed one: tenants_after_leave). NULL: never. */
    bool (*after_leave)(void *ctx, struct ledger_tenant *t);
    void *after_leave_ctx;
    /* A second witness besides the GPU's process list: holds(holds_ctx, pid) true
     * while the departed process pid's files may be alive (imports_holder_cb).
     * NULL: the GPU's list alone. */
    bool (*holds)(void *ctx, uint32_t pid);
    void *holds_ctx;
};

int linger_init(struct linger_set **out, const struct linger_deps *deps);
/* Forgets what lingers; the members stay in the ledger (kairosd is exiting). */
void linger_fini(struct linger_set *lg);
/* Member m (process pid) departed. True when m is charged something and the GPU
 * (or the holder check) still shows memory of pid: m stays in the ledger and
 * lingers; false: the caller releases it now (what memory.used still shows of it
 * may drain, see above). */
bool linger_keep(struct linger_set *lg, struct ledger_member *m, uint32_t pid);
/* Called (with ctx) when a release removed an ephemeral tenant. */
void linger_set_removed_hook(struct linger_set *lg, void (*fn)(void *ctx), void *ctx);
/* A departed member's charge saved before a kairosd restart (handovers.h): t is
 * charged held for departed pid, which lingers as if it had just departed, when
 * vouched (a verified holder keeps its files) or a GPU lists pid with memory.
 * False (nothing charged) otherwise, or when pid lingers already. */
bool linger_restore(struct linger_set *lg, struct ledger_tenant *t, uint32_t pid,
                    const uint64_t held[KAIROS_MAX_GPUS], bool vouched);
/* The i-th lingering member (its departed process in *pid), or NULL past the end. */
const struct ledger_member *linger_at(const struct linger_set *lg, size_t i, uint32_t *pid);
/* fn(ctx) when a charge starts or stops lingering (handovers.h saves them). */
void linger_set_changed_hook(struct linger_set *lg, void (*fn)(void *ctx), void *ctx);
/* Whether m is a departed process's member that lingers (its process is no longer
 * registered; the audit treats it as one that left). lg may be NULL. */
bool linger_has(const struct linger_set *lg, const struct ledger_member *m);
/* When m began to linger (CLOCK_MONOTONIC ms), or 0 when it does not linger. */
uint64_t linger_departed_ms(const struct linger_set *lg, const struct ledger_member *m);
/* The lingering member of departed process pid, or NULL. lg may be NULL. */
const struct ledger_member *linger_member_of(const struct linger_set *lg, uint32_t pid);
/* One check of what lingers and drains: what the timer runs (every LINGER_CHECK_MS
 * while something does); the tests call it directly. */
void linger_check(struct linger_set *lg);
/* The clock lingering and draining are timed by: clock(ctx) in ms, CLOCK_MONOTONIC
 * until set (NULL: back to it). For tests; kairosd never sets it. */
void linger_set_clock(struct linger_set *lg, uint64_t (*clock)(void *ctx), void *ctx);
/* How many departed processes' charges linger (tests, logs). */
unsigned linger_count(const struct linger_set *lg);
/* How many released charges still drain (tests, logs). */
unsigned linger_draining(const struct linger_set *lg);

#endif /* KAIROS_DAEMON_LINGER_H */
