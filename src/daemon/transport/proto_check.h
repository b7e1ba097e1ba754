/* proto_check.h - validation of one message received by kairosd, and packing of
 * the daemon's replies. The one table of message types and body sizes lives in
 * proto_check.c.
 *
 * proto_check is pure (no state, no I/O) so that the fuzz target can call it with
 * any bytes: every message a peer sends goes through it before any field is used,
 * and nothing after it needs to re-check sizes, names or ranges.
 *
 * Thread rules: no state.
 */
#ifndef KAIROS_DAEMON_PROTO_CHECK_H
#define KAIROS_DAEMON_PROTO_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kairos/proto.h"

/* Largest message on the wire (header + PS_REPLY). */
#define PROTO_MSG_MAX (sizeof(struct kairos_hdr) + sizeof(struct kairos_ps_reply))

/* A checked request, copied out of the (possibly unaligned) buffer. */
struct proto_request {
    uint16_t type;
    uint32_t seq;
    uint32_t body_len; /* as received: a body of an earlier revision is shorter, the rest
                        * of body 0 (proto.h; a TENANT_SET of before changes no domain) */
    union {
        struct kairos_hello hello;
        struct kairos_charge charge;
        struct kairos_commit commit;
        struct kairos_release release;
        struct kairos_runnable runnable;
        struct kairos_forked forked;
        struct kairos_fork_tickets fork_tickets;
        struct kairos_inherited inherited;
        struct kairos_shared shared;
        struct kairos_imported imported;
        struct kairos_credit credit;
        struct kairos_tenant_set tenant_set;
        struct kairos_ps ps;
        struct kairos_tenant_del tenant_del;
        struct kairos_tenant_members tenant_members;
        struct kairos_tenant_admit tenant_admit;
        struct kairos_route route;
        struct kairos_ending ending;
    } body;
};

/* Checks msg (len bytes) as a request a peer may send to the daemon. Returns 0 and
 * fills out, or a KAIROS_ERR_* code (PROTOCOL, VERSION, INVALID) with the reason in
 * why. out->seq is set whenever the header was readable, so the ERROR can echo it. */
int proto_check(const void *msg, size_t len, struct proto_request *out, char *why,
                size_t why_len);

/* Expected body size of a message type, or -1 when the type is unknown. (A
 * TENANT_SET of KAIROS_TENANT_SET_SIZE_V0 or _V1 bytes and a PS without a body are
 * accepted too: proto.h.) */
long proto_body_size(uint16_t type);
/* Whether a peer may send the type to the daemon (proto_check refuses the others);
 * each such type has its handler in requests.c's table. */
bool proto_is_request(uint16_t type);
/* The type's name ("HELLO"), or "unknown". */
const char *proto_type_name(uint16_t type);

/* Writes header + body into buf (PROTO_MSG_MAX bytes); returns the length. */
size_t proto_pack(void *buf, uint16_t type, uint32_t seq, const void *body, size_t body_len);

#endif /* KAIROS_DAEMON_PROTO_CHECK_H */
