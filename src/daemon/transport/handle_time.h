/* handle_time.h - the requests of the time-share: RUNNABLE (a member's runnable time,
 * the scheduler's demand), and the TIME_POLICY messages a new member gets after its
 * WELCOME (timeshare.h).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_HANDLE_TIME_H
#define KAIROS_DAEMON_HANDLE_TIME_H

#include <stdbool.h>

#include "daemon/transport/peer.h"
#include "daemon/transport/proto_check.h"

/* RUNNABLE (requests.c's table; members only): never disconnects. */
bool handle_time_runnable(struct peer *p, const struct proto_request *r);

/* Sends p, which just joined tenant t, the time policies in force on each GPU;
 * false when p must be disconnected. */
bool handle_time_welcome(struct peer *p, const struct ledger_tenant *t);

#endif /* KAIROS_DAEMON_HANDLE_TIME_H */
