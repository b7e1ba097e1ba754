/* handle_members.h - the requests on membership: HELLO (a process joins the tenant
 * membership.h decides, or reattaches after a restart), TENANT_SET and TENANT_DEL
 * (administrators create, change and remove tenants), TENANT_MEMBERS (an
 * administrator's rules of who joins) and TENANT_ADMIT; and what a member's
 * departure releases when its connection closes.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_HANDLE_MEMBERS_H
#define KAIROS_DAEMON_HANDLE_MEMBERS_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/transport/peer.h"
#include "daemon/transport/proto_check.h"

/* The requests (requests.c's table); false when p must be disconnected. A refusal
 * is an ERROR that keeps the connection. */
bool handle_members_hello(struct peer *p, const struct proto_request *r);
bool handle_members_tenant_set(struct peer *p, const struct proto_request *r);
bool handle_members_tenant_del(struct peer *p, const struct proto_request *r);
/* TENANT_MEMBERS (administrators only) and TENANT_ADMIT. */
bool handle_members_membership(struct peer *p, const struct proto_request *r);

/* p's connection closes: its fork tickets go back, and its member leaves its tenant
 * (its charge lingers while the GPU holds its memory: linger.h; when kairosd stops,
 * nothing is released: the process reattaches to the next kairosd). */
void handle_members_left(struct peer *p);

/* Every tick of the server: removed tenants whose memory drained go. */
void handle_members_tick(struct services *sv, uint64_t now);
/* Tenants changed (a run-time tenant's compute policy or fault domain, a tenant
 * removed): the scheduler takes the policies again (and tells the member processes
 * whose policy changed), and the MPS daemons of domains no tenant names any more are
 * asked to quit (mps_domains.h). */
void handle_members_tenants_changed(struct services *sv);

#endif /* KAIROS_DAEMON_HANDLE_MEMBERS_H */
