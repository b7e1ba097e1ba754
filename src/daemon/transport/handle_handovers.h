/* handle_handovers.h - the requests on memory that outlives its process: a member's
 * fork tickets (FORK_TICKETS), FORKED and INHERITED (heirs.h), SHARED and IMPORTED
 * (legacy CUDA IPC, imports.h). Only a tenant's members hand over; every refusal is
 * answered (but FORKED with a ticket and SHARED FREED, which get no reply).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_HANDLE_HANDOVERS_H
#define KAIROS_DAEMON_HANDLE_HANDOVERS_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/transport/peer.h"
#include "daemon/transport/proto_check.h"

/* Reserves up to want tickets for p in all, and sends how many it holds
 * (FORK_TICKETS, spent echoing its ask); false when p must be disconnected. */
bool handle_handovers_push_tickets(struct peer *p, uint32_t want, uint32_t spent);

/* The requests (requests.c's table); false when p must be disconnected. */
bool handle_handovers_fork_tickets(struct peer *p, const struct proto_request *r);
/* FORKED, INHERITED: another process holds the NVIDIA files of the sender. */
bool handle_handovers_handover(struct peer *p, const struct proto_request *r);
/* SHARED, IMPORTED: legacy CUDA IPC. */
bool handle_handovers_ipc(struct peer *p, const struct proto_request *r);

#endif /* KAIROS_DAEMON_HANDLE_HANDOVERS_H */
