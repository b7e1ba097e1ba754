/* credit.h - credit granted ahead to a tenant's processes (protocol 3, CREDIT and
 * CREDIT_RECALL in include/kairos/proto.h; design in docs/memory.md).
 *
 * A member's credit is a reservation charged to its tenant in the ledger: the
 * process allocates within it without asking kairosd. For every tenant and GPU,
 *     held (what its processes hold) + draining (departed members' memory the GPU
 *     still holds, linger.h) + credit (what they may still take) <= quota
 * whenever kairosd grants anything (a reattaching process's claim or a revoked
 * member's report may push a tenant over: it is then granted nothing until it
 * drops). Far from the quota a request gets its need plus a chunk ahead; near it
 * (less room than need plus a chunk) all the room left (ALL: the member keeps it
 * and allocates with no message), unless members contend there (another waits, or
 * a recall was sent less than CREDIT_CONTENDED_MS ago): then exactly its need
 * (EXACT). When even the need does not fit, the unused credit of the tenant's other
 * members is recalled and the request waits for it (CREDIT_RECALL_TIMEOUT_MS at
 * most: a member that does not answer is revoked, granted none ahead any more, and
 * its credit stays counted until it says it read that, or leaves; what waits on it
 * is refused CREDIT_ACK_TIMEOUT_MS later). After a restart no grant is made to
 * anyone until the known members have reattached (reattach.h).
 *
 * The arithmetic and the waiting requests live here, on the ledger's records (a
 * member's part, struct credit_member, is a plain type of credit_member.h that the
 * ledger embeds); the server sends what this decides through struct credit_io.
 *
 * Thread rules: the loop thread only; no I/O but through credit_io.
 */
#ifndef KAIROS_DAEMON_CREDIT_H
#define KAIROS_DAEMON_CREDIT_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/memory/credit_member.h"
#include "kairos/proto.h"

#define CREDIT_CHUNK_DIV 16                   /* a chunk is 1/16 of the quota, */
#define CREDIT_CHUNK_MIN (2ull << 20)         /* at least one 2 MiB page, */
#define CREDIT_CHUNK_MAX (256ull << 20)       /* at most 256 MiB */
#define CREDIT_RECALL_TIMEOUT_MS 500          /* a recall unanswered this long revokes */
#define CREDIT_RECALL_ROUNDS 3                /* recalls for one waiting request */
#define CREDIT_ACK_TIMEOUT_MS 1000            /* what waits on a revoked member's word
                                               * that it dropped its credit waits this
                                               * long, then is refused */
#define CREDIT_CONTENDED_MS 1000              /* after a recall, grants there are exact
                                               * this long */

struct ledger;
struct ledger_tenant;
struct ledger_member;

/* How the server sends what credit decides. */
struct credit_io {
    void *ctx;
    void (*reply)(void *ctx, void *peer, uint32_t seq, const struct kairos_credit *c);
    void (*recall)(void *ctx, void *peer, unsigned gpu, uint64_t bytes);
    void (*refused)(void *ctx, struct ledger_tenant *t, struct ledger_member *m, unsigned gpu,
                    uint64_t need);
    void (*revoked)(void *ctx, struct ledger_tenant *t, struct ledger_member *m, unsigned gpu,
                    uint64_t bytes);
    void (*room)(void *ctx, void *peer, unsigned gpu); /* ROOM: a refusal may fit now */
};

/* What the tenant holds on g as its members' memory views count it: held, and what
 * departed members left that the GPU still holds (draining). */
uint64_t credit_view_held(const struct ledger_tenant *t, unsigned g);

/* The credit granted ahead on a GPU with this quota (see the limits above). A
 * process keeps at most CREDIT_KEEP_CHUNKS of them unused. */
#define CREDIT_KEEP_CHUNKS 2
uint64_t credit_chunk(uint64_t quota);
/* quota - held - draining - credit of tenant t on GPU g (draining: departed members'
 * memory the GPU still holds, linger.h), 0 when none is left. */
uint64_t credit_room(const struct ledger_tenant *t, unsigned g);

/* What kairosd counts of a member's claim to hold claim bytes on g (a CREDIT's held,
 * a COMMIT's actual size): what it was granted (held + credit) is counted; beyond it
 * (the driver took more than was reserved, or the shim lies) only what the tenant's
 * quota has room for (what a CHARGE of the difference would be granted). *counted
 * gets what is counted; returns what is not (0: the claim is within bounds). */
uint64_t credit_bound_claim(const struct ledger_member *m, unsigned g, uint64_t claim,
                            uint64_t *counted);

/* Takes what a CREDIT says: returned credit comes back to the tenant (never more
 * than the member has), held (when the report is the newest) becomes the member's
 * holdings and the rest of what it had its credit. A held beyond held + credit is
 * bounded by credit_bound_claim: no report raises a tenant above its quota, whatever
 * it says (issue 25, item 5). A recall is answered by a report flagged
 * KAIROS_CREDIT_RECALLED; a revoked member's newest report flagged
 * KAIROS_CREDIT_REVOKED ends its credit. Returns the bytes of held not counted (the
 * caller logs and counts such a report), 0 for a report within bounds. */
uint64_t credit_take_report(struct ledger_member *m, unsigned g, const struct kairos_credit *c);

/* Answers the request of c (need, least, AHEAD) from member m now, or records it
 * as waiting; hold: no grant may be made now (the reattach window). After a
 * CREDIT flagged KAIROS_CREDIT_LAST (the process exits) m holds no credit on g,
 * even what a reply that crossed it granted, and a request still waiting is
 * refused: a departing member's lingering charge is its memory, never credit it
 * could not have used. */
void credit_request(struct ledger *l, struct ledger_member *m, unsigned g, uint32_t seq,
                    const struct kairos_credit *c, bool hold, uint64_t now_ms,
                    const struct credit_io *io);
/* Answers what waits in tenant t on GPU g that can be answered now (after a report,
 * a departure, a revocation, the end of the reattach window). */
void credit_serve(struct ledger *l, struct ledger_tenant *t, unsigned g, bool hold,
                  uint64_t now_ms, const struct credit_io *io);
/* Revokes members whose recall went unanswered past its deadline (their credit
 * still counted) and ends the wait on the word of those revoked past
 * CREDIT_ACK_TIMEOUT_MS; serves the waits of their tenants. */
void credit_expire(struct ledger *l, bool hold, uint64_t now_ms, const struct credit_io *io);
/* Sends the ROOM owed to members of tenant t on GPU g (credit_serve does it too),
 * or of every tenant and GPU (t NULL; the loop's tick: quota changes, reloads and
 * drained memory reach no credit_serve of their own). A notice is owed once the
 * tenant's memory not held there (quota - held - draining) is above what it was at
 * the refusal: only then may what was refused fit. */
void credit_notify(struct ledger *l, struct ledger_tenant *t, unsigned g,
                   const struct credit_io *io);

/* A member is leaving: its credit goes back to the tenant (its holdings are the
 * ledger's to release or keep). */
void credit_drop(struct ledger_member *m);

/* A departed member whose memory the GPU still holds (linger.h): its credit is
 * counted as held, since it may have allocated from it after its last report. */
void credit_fold(struct ledger_member *m);

#endif /* KAIROS_DAEMON_CREDIT_H */
