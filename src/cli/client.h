/* client.h - the CLI's side of kairosd's socket (include/kairos/proto.h): connect
 * with errors that say what to do, requests with sequence numbers and a timeout.
 *
 * Thread rules: one client per thread.
 */
#ifndef KAIROS_CLI_CLIENT_H
#define KAIROS_CLI_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "kairos/proto.h"

struct client {
    int fd;
    uint32_t seq;
    int timeout_ms;
    const char *path;
    size_t last_size; /* of the body client_recv returned last */
};

/* The socket: the given path, else $KAIROS_SOCKET, else the default. */
const char *client_socket_path(const char *given);

/* 0, or -errno with a message in err saying what to do (daemon not running, no
 * permission on the socket). */
int client_connect(struct client *c, const char *path, char *err, size_t err_len);
void client_close(struct client *c);

/* Sends type/body with the next sequence number; returns that number or -errno. */
int client_send(struct client *c, uint16_t type, const void *body, size_t len);
/* Receives the reply to seq: *type, and body (exact size checked against the type;
 * a PS_REPLY may also be the KAIROS_PS_REPLY_SIZE_V1 bytes of before, the rest of
 * body left as it was; c->last_size says which).
 * An ERROR reply returns -EREMOTEIO with its code and message in *code/err.
 * -ETIMEDOUT, -ECONNRESET (with err set). */
int client_recv(struct client *c, uint32_t seq, uint16_t *type, void *body, size_t cap,
                uint32_t *code, char *err, size_t err_len);

/* PS with flags (KAIROS_PS_HOLDS, with KAIROS_PS_FAULTS, or 0: the request of
 * before): every tenant (malloc'd array in *out, *n entries, empty names dropped) and
 * the node's GPU count; in a reply without the hold figures or the faults they are 0
 * and compute_flags lacks KAIROS_PS_COMPUTE_HOLDS. 0 or -errno with err set; -ENOTSUP
 * when kairosd refused the flags as a kairosd of before the holds does (it closed the
 * connection: ask again without them on a new one); -ENOPROTOOPT when it refused
 * KAIROS_PS_FAULTS as one of before the faults does (ask again with HOLDS alone). */
int client_ps(struct client *c, uint32_t flags, struct kairos_ps_reply **out, size_t *n,
              unsigned *n_gpus, char *err, size_t err_len);

#endif /* KAIROS_CLI_CLIENT_H */
