/* handle_ps.h - PS: every tenant's quotas, holdings, refusals, compute and processes,
 * one PS_REPLY per tenant. The listing is paged: it stops while replies wait in the
 * peer's outbox and goes on (handle_ps_pump) once the transport sent them, so a
 * thousand tenants never pin a thousand replies; the peer's next requests wait
 * meanwhile.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_HANDLE_PS_H
#define KAIROS_DAEMON_HANDLE_PS_H

#include <stdbool.h>

#include "daemon/transport/peer.h"
#include "daemon/transport/proto_check.h"

/* PS (requests.c's table): starts the listing; false when c must be disconnected. */
bool handle_ps(struct peer *c, const struct proto_request *r);
/* Sends the listing's next replies while nothing waits in c's outbox, one tenant
 * each, from where it stopped (tenants added or removed meanwhile are seen or not,
 * none twice); c->ps_active stays true while more follow. False when c must be
 * disconnected. */
bool handle_ps_pump(struct peer *c);

#endif /* KAIROS_DAEMON_HANDLE_PS_H */
