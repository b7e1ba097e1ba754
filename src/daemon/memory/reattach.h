/* reattach.h - how much of what a reattaching process says it holds kairosd counts.
 *
 * After a restart, a member's shim reattaches (HELLO with REATTACH) and claims
 * what it holds per GPU; the daemon kept no holdings. A claim is the process's
 * word, so it is bounded: never more than the tenant's quota leaves on that GPU
 * (a claim of 1 PiB cannot lock a tenant out beyond its own quota), and never
 * more than the GPU backend reports for that process, when the backend lists the
 * GPU's processes with their memory (NVML; the fake backend in tests) plus the
 * unused credit a process may keep (credit.h: two chunks).
 *
 * The reattach window: a process that starts while the members of before the
 * restart have not reattached yet could be granted memory they hold. So kairosd
 * keeps the pids of its members in a file next to its socket (<socket>.members,
 * rewritten at each join and departure; an orderly stop leaves it as it was), and
 * at start, while any of those processes that is still alive has not reattached,
 * and for REATTACH_WINDOW_MS at most, it grants nothing (credit, CHARGE) to anyone:
 * requests wait (a CHARGE is answered "busy, ask again"), and processes go on
 * allocating within the credit they hold.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_REATTACH_H
#define KAIROS_DAEMON_REATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/gpu/gpu.h"
#include "daemon/memory/ledger.h"

/* The bytes of claim to count for pid on GPU g of tenant t (gpu may be NULL: no
 * backend). why says what bounded it, "" when the claim counts whole. */
uint64_t reattach_bound(const struct ledger_tenant *t, unsigned g, uint64_t claim, uint32_t pid,
                        struct gpu_backend *gpu, char *why, size_t why_len);

#define REATTACH_WINDOW_MS 2000

struct reattach_window {
    char path[256];       /* the members file; "" when it cannot be kept */
    uint32_t *known;      /* members of before the restart, alive, not back yet */
    size_t n_known;
    uint64_t until_ms;    /* the window's end */
    bool holding;         /* reattach_window_ended has not reported the end yet */
};

/* At start: reads the members file beside socket_path; returns how many of its
 * processes are alive (the window holds while any of them has not come back). */
size_t reattach_window_start(struct reattach_window *w, const char *socket_path,
                             uint64_t now_ms);
void reattach_window_fini(struct reattach_window *w);
/* Whether grants are held now. */
bool reattach_window_holds(const struct reattach_window *w, uint64_t now_ms);
/* A process joined (reattached or new): it is back. */
void reattach_window_joined(struct reattach_window *w, uint32_t pid, uint64_t now_ms);
/* True once, the first time it is called after the window ended. */
bool reattach_window_ended(struct reattach_window *w, uint64_t now_ms);
/* Writes the current members' pids to the file (after a join or a departure). */
void reattach_window_record(const struct reattach_window *w, const struct ledger *l);

#endif /* KAIROS_DAEMON_REATTACH_H */
