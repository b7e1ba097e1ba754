/* client_end.h - a fault-domain member ended by a signal only once its MPS client is
 * ended (docs/space.md, "Faults"): `terminate_client` goes to the domain's control
 * daemon (mps_domains.h) and the signal follows when the control client exits, or
 * after CLIENT_END_WAIT_MS, whichever comes first. Three callers: the audit's kills
 * (SIGKILL, observe/audit.c) and a member's own SIGTERM, which its shim hands to
 * kairosd (ENDING, transport/handle_space.c), since a signal to a client with work in
 * flight may fault every client of its server; and a stranger to a domain found among
 * its server's clients (space/mps_clients.c: signal 0, its MPS client ended only).
 *
 * Nothing waits in the loop: a tenant whose control daemon (its own uid's) never
 * answers delays only its own process's end, never kairosd's other work. The victim
 * is held by a pidfd taken at the start, checked against the start time the caller
 * knows (where it knows one), so a pid reused before or after is never the one
 * signalled.
 *
 * Bounds: CLIENT_ENDS_MAX ends wait at once, CLIENT_ENDS_PER_TENANT of one tenant (a
 * tenant that stalls its own control daemon cannot take every slot), and a tenant
 * asks for at most CLIENT_ENDS_PER_TENANT_PER_S a second (each start is a control
 * client kairosd forks: a tenant that starts, registers and ends processes in a loop
 * cannot make kairosd fork as fast as it can; refused asks count too); beyond them
 * nothing starts and the caller decides (the audit kills at once, a member's shim
 * raises its SIGTERM).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_CLIENT_END_H
#define KAIROS_DAEMON_CLIENT_END_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/base/procscan.h"

#define CLIENT_END_WAIT_MS 2000
#define CLIENT_ENDS_MAX 64
#define CLIENT_ENDS_PER_TENANT 8
#define CLIENT_ENDS_PER_TENANT_PER_S 16

struct loop;
struct mps_domains;
struct client_ends;

/* How one wait ended, told to its order's done. */
struct client_end_outcome {
    const struct procscan_proc *victim;
    const char *tenant, *domain, *what;
    int gpu;
    bool ended;          /* the control client answered well: the MPS client is gone */
    const char *failure; /* !ended: why, for a line ("no answer within 2000 ms: ...") */
    int signal_err;      /* 0: the signal was sent; else its errno (ESRCH: gone) */
};

/* What to end and how. */
struct client_end_order {
    struct procscan_proc victim; /* pid; uid, whose control daemon is asked */
    uint64_t start;              /* the victim's start time (proc_stat.h); 0: unchecked */
    const char *tenant, *domain; /* its tenant and that tenant's fault domain */
    int gpu;                     /* for the lines; -1: none */
    const char *what;            /* why it ends, for the lines */
    int signal;                  /* sent once the MPS client is ended (0: none) */
    void (*done)(void *ctx, const struct client_end_outcome *o); /* may be NULL */
    void *ctx;
};

/* NULL loop: nothing can wait (every start is refused). 0 or -errno. */
int client_ends_init(struct client_ends **out, struct loop *loop);
/* The signals still waiting are sent now (their callers decided them; their done is
 * told "kairosd is stopping"), then all is freed. */
void client_ends_fini(struct client_ends *k);

/* Whether pid's end is waiting for its MPS client's end. */
bool client_ends_pending(const struct client_ends *k, uint32_t pid);

/* Starts ending o->victim's MPS client (proc: "/proc" or a test's copy) and arranges
 * the signal after it; o's strings are copied. 0: the signal will follow and done be
 * called then; -errno with why: nothing started (-EBUSY: a bound; -ESRCH: the victim
 * is gone or is not the process that started at o->start). */
int client_ends_start(struct client_ends *k, const struct mps_domains *m, const char *proc,
                      const struct client_end_order *o, char *why, size_t why_len);

#endif /* KAIROS_DAEMON_CLIENT_END_H */
