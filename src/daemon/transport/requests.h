/* requests.h - the table of requests a peer may send kairosd: for each type, who may
 * send it and the handler that serves it (the body's size and content are checked
 * before, by proto_check.c's table, which stays pure for the fuzzer). The transport
 * hands each whole message to requests_handle; the handlers answer through
 * peer_send (peer.h) and never touch a socket.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_REQUESTS_H
#define KAIROS_DAEMON_REQUESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/transport/peer.h"
#include "daemon/transport/proto_check.h"

/* Who may send a request. */
enum request_who {
    REQUEST_ANYONE,  /* any peer (the handler refuses what it must) */
    REQUEST_MEMBER,  /* a tenant's member: before HELLO, an ERROR and a disconnection */
    REQUEST_ADMIN,   /* root or an administrator (members_is_admin): others get an ERROR
                      * (PERMISSION) and stay connected */
};

struct request_type {
    uint16_t type;
    enum request_who who;
    bool registers; /* taken from an administrator, it registers the connection (no
                     * idle close: conn_limits_idle) */
    bool (*handle)(struct peer *p, const struct proto_request *r); /* false: disconnect */
};

/* The entry of a request type, or NULL (a type proto_check refuses). */
const struct request_type *requests_find(uint16_t type);

/* Checks one whole message from p (proto_check) and serves it; false when p must be
 * disconnected (a malformed message: its ERROR was sent; a request before HELLO that
 * needs a member; a reply that p's outbox cannot take). */
bool requests_handle(struct peer *p, const unsigned char *buf, size_t len);

#endif /* KAIROS_DAEMON_REQUESTS_H */
