/* audit_mps_kill.h - the audit's kills of fault-domain members, each after its MPS
 * client is ended (docs/space.md, "Faults"): `terminate_client` goes to the domain's
 * control daemon (mps_domains.h) and the kill follows when the control client exits,
 * or after AUDIT_MPS_KILL_WAIT_MS, whichever comes first. Nothing waits in the loop:
 * a tenant whose control daemon (its own uid's) never answers delays only its own
 * process's end, never kairosd's other work. The victim is held by a pidfd taken at
 * the start, so a pid reused meanwhile is never the one killed.
 *
 * Bounds: AUDIT_MPS_KILLS_MAX kills wait at once, AUDIT_MPS_KILLS_PER_TENANT of one
 * tenant (a tenant that stalls its own control daemon cannot take every slot); beyond
 * them the caller kills at once, as without space mode.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_AUDIT_MPS_KILL_H
#define KAIROS_DAEMON_AUDIT_MPS_KILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/base/procscan.h"

#define AUDIT_MPS_KILL_WAIT_MS 2000
#define AUDIT_MPS_KILLS_MAX 64
#define AUDIT_MPS_KILLS_PER_TENANT 8

struct loop;
struct mps_domains;
struct audit_mps_kills;

/* NULL loop: nothing can wait (every start is refused). 0 or -errno. */
int audit_mps_kills_init(struct audit_mps_kills **out, struct loop *loop);
/* The kills still waiting are made now (the audit decided them), then all is freed. */
void audit_mps_kills_fini(struct audit_mps_kills *k);

/* Whether the kill of pid is waiting for its MPS client's end. */
bool audit_mps_kills_pending(const struct audit_mps_kills *k, uint32_t pid);

/* Starts ending p's MPS client (p a member of tenant, in fault domain domain, seen on
 * gpu; what: the finding, for the kill's line) and arranges the kill after it. 0: the
 * kill will follow and be logged then; -errno with why: nothing started (the caller
 * kills at once). */
int audit_mps_kills_start(struct audit_mps_kills *k, const struct mps_domains *m,
                          const char *proc, const struct procscan_proc *p, const char *tenant,
                          const char *domain, int gpu, const char *what, char *why,
                          size_t why_len);

#endif /* KAIROS_DAEMON_AUDIT_MPS_KILL_H */
