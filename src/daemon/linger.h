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
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_LINGER_H
#define KAIROS_DAEMON_LINGER_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/gpu.h"
#include "daemon/ledger.h"
#include "daemon/loop.h"
#include "daemon/tenants.h"

#define LINGER_CHECK_MS 200

struct linger_set; /* not "struct linger": <sys/socket.h> has one (SO_LINGER) */

/* gpu may be NULL: then only the holder check keeps a charge. */
int linger_init(struct linger_set **out, struct loop *loop, struct gpu_backend *gpu,
                struct tenants *ts);
/* Forgets what lingers; the members stay in the ledger (kairosd is exiting). */
void linger_fini(struct linger_set *lg);
/* Member m (process pid) departed. True when m is charged something and the GPU
 * (or the holder check) still shows memory of pid: m stays in the ledger and
 * lingers; false: the caller releases it now. */
bool linger_keep(struct linger_set *lg, struct ledger_member *m, uint32_t pid);
/* A second witness besides the GPU's process list: holds(ctx, pid) true while the
 * departed process pid's files may be alive (heirs_hold_cb). */
void linger_set_holder_check(struct linger_set *lg, bool (*holds)(void *ctx, uint32_t pid),
                              void *ctx);
/* Called (with ctx) when a release removed an ephemeral tenant. */
void linger_set_removed_hook(struct linger_set *lg, void (*fn)(void *ctx), void *ctx);
/* Whether m is a departed process's member that lingers (its process is no longer
 * registered; the audit treats it as one that left). lg may be NULL. */
bool linger_has(const struct linger_set *lg, const struct ledger_member *m);
/* How many departed processes' charges linger (tests, logs). */
unsigned linger_count(const struct linger_set *lg);

#endif /* KAIROS_DAEMON_LINGER_H */
