/* peer.h - what the request handlers see and act on: a connected process (struct
 * peer: its credentials, its membership, its session's state), the services of the
 * node (struct services: the tenants, the ledger's neighbours, the time-share), and
 * the one way a handler answers: peer_send, which hands a message to the transport
 * (server.c) for the peer's outbox. No handler touches a socket or a descriptor.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_PEER_H
#define KAIROS_DAEMON_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/base/ratelog.h"
#include "daemon/config/config.h"
#include "daemon/memory/heirs.h"
#include "daemon/memory/reattach.h"
#include "daemon/tenants/membership.h"
#include "daemon/tenants/tenants.h"

struct peer;
struct services;
struct owners;
struct timeshare;
struct linger_set;
struct imports;
struct mps_domains;
struct client_ends;
struct faults;
struct gpu_backend;

/* What the transport does for the handlers. */
struct peer_io {
    /* Sends a message to p now or queues it in p's outbox, behind what waits there
     * (nothing when p reads no more); false when p must be disconnected (its outbox
     * is full, or the send failed). */
    bool (*send)(struct peer *p, uint16_t type, uint32_t seq, const void *body, size_t len);
    /* Whether messages wait in p's outbox (a PS listing goes on once they are sent). */
    bool (*waiting)(const struct peer *p);
    /* p joined a tenant: its exit is watched (a pidfd) from now on. */
    void (*joined)(struct peer *p);
    /* A tenant removed while a connection closes: the time-share takes the change
     * once back in the loop (not inside a walk over the peers). */
    void (*compute_changed_later)(struct services *sv);
};

/* The node as the handlers act on it; owned by the server, set at init. */
struct services {
    struct tenants *ts;
    const struct config *cfg;     /* read at each use: a reload applies at once */
    const struct peer_io *io;
    struct peer *peers;           /* every connected peer, the newest first */
    struct owners *owners;        /* the owners of ephemeral tenants, watched */
    struct timeshare *timeshare;  /* compute policies, or NULL */
    struct membership membership; /* who joins which tenant (membership.h) */
    struct gpu_backend *gpu;      /* for REATTACH checks, or NULL */
    struct linger_set *linger;    /* departed members the GPU still holds memory for */
    struct heirs *heirs;          /* who else holds a process's NVIDIA files, or NULL */
    struct imports *imports;      /* legacy CUDA IPC: shared objects, imports, or NULL */
    struct mps_domains *mps;      /* space mode's MPS daemons (mps_domains.h), or NULL */
    struct client_ends *ends;     /* members' SIGTERMs waiting for their MPS clients'
                                   * end (client_end.h), or NULL */
    const struct faults *faults;  /* GPU faults per tenant (faults.h), or NULL */
    struct reattach_window window;    /* after a restart: no grant until members are back */
    struct ratelog handover_refusals; /* FORKED/INHERITED refused: logged once per interval */
    bool stopping; /* kairosd is exiting: members keep their holdings for the restart */
};

/* A connected process. The transport fills in its credentials at accept; the
 * handlers keep the rest. */
struct peer {
    struct services *sv;
    uint32_t pid, uid, gid;
    char cgroup[MEMBERS_CGROUP_PATH_MAX]; /* when it connected: who administers (config.h) */
    struct ledger_member *member;
    bool registered;          /* a member, or an administrator's request was taken */
    bool broken;              /* a message to it could not be sent or queued: closed at
                               * the next tick */
    uint64_t reattached_ms;   /* when its HELLO said REATTACH (0: it did not) */
    bool ps_active;           /* a PS listing in progress, one tenant per message */
    uint32_t ps_seq, ps_next_id;
    size_t ps_size;           /* of each PS_REPLY: whole, or the V1 prefix (proto.h) */
    bool wants_tickets;       /* its HELLO asked for fork tickets */
    uint32_t fork_tickets;    /* held: edges reserved for its forks (heirs.h) */
    struct heir_owner ticket_owner; /* whose shares they count in */
    uint64_t start;           /* its start time (/proc), read at HELLO; 0: unknown */
    bool ending_refused;      /* an ENDING of it was refused (logged once a connection) */
    struct peer *prev, *next; /* in sv->peers */
};

/* Hands a message for p to the transport (peer_io.send). */
bool peer_send(struct peer *p, uint16_t type, uint32_t seq, const void *body, size_t len);
/* An ERROR with code and message (cut to fit). */
bool peer_error(struct peer *p, uint32_t seq, uint32_t code, const char *message);
/* OK, the reply of a request that has no other. */
bool peer_ok(struct peer *p, uint32_t seq);

/* snprintf for messages that may be cut to fit a reply (the cut is acceptable). */
void peer_msgf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The monotonic clock in milliseconds, as every deadline of the handlers counts it. */
uint64_t peer_now_ms(void);

#endif /* KAIROS_DAEMON_PEER_H */
