/* handle_memory.h - the requests on device memory: CHARGE, COMMIT, RELEASE and
 * CREDIT, answered from the ledger and the credit (credit.h), whose decisions go to
 * the peers through handle_memory_credit_io; and the credit's work at each tick.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_HANDLE_MEMORY_H
#define KAIROS_DAEMON_HANDLE_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/memory/credit.h"
#include "daemon/transport/peer.h"
#include "daemon/transport/proto_check.h"

/* What credit decides, sent to the peer of each member (credit_member.peer: a struct
 * peer); a peer that cannot take it is marked broken. */
extern const struct credit_io handle_memory_credit_io;

/* Whether no grant may be made now: the members of before a restart reattach
 * (reattach.h). */
bool handle_memory_hold(struct services *sv);
/* Answers what waits for credit in tenant t (every GPU), or in every tenant. */
void handle_memory_serve(struct services *sv, struct ledger_tenant *t);
void handle_memory_serve_all(struct services *sv);
/* Kept charges of freed shared objects were released when imports.h keeps fewer
 * than kept_before: the room they held back may answer allocations waiting. */
void handle_memory_kept_released(struct services *sv, size_t kept_before);
/* Member p claimed more than kairosd granted it (what: the message and field, claim:
 * what it said, beyond: what was not counted): counted, logged once per interval. */
void handle_memory_claim_beyond(struct peer *p, unsigned gpu, const char *what,
                                uint64_t claim, uint64_t beyond);

/* "holds X of Y": what tenant t holds on gpu, of its quota. */
void handle_memory_describe_held(const struct ledger_tenant *t, unsigned gpu, char *out,
                                 size_t cap);

/* The requests (requests.c's table); false when p must be disconnected. COMMIT,
 * RELEASE and CREDIT come from members only (the table checks it). */
bool handle_memory_charge(struct peer *p, const struct proto_request *r);
bool handle_memory_commit(struct peer *p, const struct proto_request *r);
bool handle_memory_release(struct peer *p, const struct proto_request *r);
bool handle_memory_credit(struct peer *p, const struct proto_request *r);

/* Every tick of the server: recalls past their deadline, ROOM owed, imports whose
 * heirs went, the end of the reattach window. */
void handle_memory_tick(struct services *sv, uint64_t now);

#endif /* KAIROS_DAEMON_HANDLE_MEMORY_H */
