/* handle_space.h - ROUTE: how a member reaches the GPU, and ENDING: a member's own
 * SIGTERM once its MPS client is ended (space mode, docs/space.md).
 *
 * A member of a tenant with no fault domain is told KAIROS_ROUTE_TIME, with the folder
 * of the domains' daemons (its shim keeps the process out of it). A member of a
 * tenant in a fault domain is told the pipe folder of its domain's MPS control daemon
 * for its uid (mps_domains.h: started now if it does not run), its active thread
 * percentage and client priority (client_settings.h); where that daemon cannot run,
 * ERROR (KAIROS_ERR_PERMISSION) with the reason, which the shim obeys by refusing the
 * process the GPU. The
 * uid is the socket's (SO_PEERCRED), never the process's word.
 *
 * ENDING (one-way): the member's shim caught a SIGTERM the application left to its
 * default action. Its MPS client is ended through its domain's control daemon, then
 * SIGTERM goes to it again (client_end.h), by a pidfd checked against the start time
 * read at its HELLO: a member ends only itself, never another process with its pid.
 * A member of no fault domain, or one whose tenant has CLIENT_ENDS_PER_TENANT ends
 * waiting, is only logged (once a connection): its shim raises SIGTERM itself after
 * KAIROS_ENDING_WAIT_MS.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_HANDLE_SPACE_H
#define KAIROS_DAEMON_HANDLE_SPACE_H

#include <stdbool.h>

#include "daemon/transport/peer.h"
#include "daemon/transport/proto_check.h"

/* ROUTE (requests.c's table; members only). */
bool handle_space_route(struct peer *p, const struct proto_request *r);
/* ENDING (requests.c's table; members only; no reply). */
bool handle_space_ending(struct peer *p, const struct proto_request *r);

#endif /* KAIROS_DAEMON_HANDLE_SPACE_H */
