/* client.c - connect, send and receive kairosd messages for the CLI (see client.h). */
#include "cli/client.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/grow.h"

const char *client_socket_path(const char *given)
{
    if (given && *given)
        return given;
    const char *env = getenv("KAIROS_SOCKET");
    return env && *env ? env : KAIROS_DEFAULT_SOCKET;
}

/* Whether kairosd's systemd unit is installed (a packaged node). */
static bool has_unit(void)
{
    static const char *const units[] = {"/etc/systemd/system/kairosd.service",
                                        "/lib/systemd/system/kairosd.service",
                                        "/usr/lib/systemd/system/kairosd.service"};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (access(units[i], F_OK) == 0)
            return true;
    return false;
}

/* What to do when nothing listens on path: the service where the package installed
 * one, kairosd by hand on a source build; or the standalone shim, without a daemon. */
static void not_running(const char *path, char *err, size_t err_len)
{
    const char *start = has_unit()
        ? "start it with 'sudo systemctl start kairosd' ('journalctl -u kairosd' says why "
          "it stopped)"
        : "start it as root with 'kairosd' (see kairosd(8))";
    snprintf(err, err_len,
             "kairosd is not running (nothing listens on %s): %s, set KAIROS_SOCKET if it "
             "uses another socket, or run one process without a daemon in standalone mode: "
             "KAIROS_MEM=SIZE LD_PRELOAD=\"$(kairos shim)\" CMD", path, start);
}

int client_connect(struct client *c, const char *path, char *err, size_t err_len)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memset(c, 0, sizeof *c);
    c->timeout_ms = 5000;
    c->path = path;
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, err_len, "socket path %s is too long", path);
        return -ENAMETOOLONG;
    }
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        snprintf(err, err_len, "socket: %s", strerror(errno));
        return -errno;
    }
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa)) {
        int e = errno;
        if (e == ENOENT || e == ECONNREFUSED)
            not_running(path, err, err_len);
        else if (e == EACCES || e == EPERM)
            snprintf(err, err_len, "permission denied on %s: kairosd's socket should be mode "
                     "0666; ask the administrator", path);
        else
            snprintf(err, err_len, "cannot connect to kairosd at %s: %s", path, strerror(e));
        close(c->fd);
        c->fd = -1;
        return -e;
    }
    return 0;
}

void client_close(struct client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

int client_send(struct client *c, uint16_t type, const void *body, size_t len)
{
    unsigned char buf[sizeof(struct kairos_hdr) + 1024];
    if (len > 1024)
        return -EMSGSIZE;
    struct kairos_hdr h = {.magic = KAIROS_PROTO_MAGIC, .version = KAIROS_PROTO_VERSION,
                           .type = type, .size = (uint32_t)len, .seq = ++c->seq};
    memcpy(buf, &h, sizeof h);
    if (len)
        memcpy(buf + sizeof h, body, len);
    if (send(c->fd, buf, sizeof h + len, MSG_NOSIGNAL) != (ssize_t)(sizeof h + len))
        return -errno;
    return (int)h.seq;
}

static size_t expected_size(uint16_t type)
{
    switch (type) {
    case KAIROS_MSG_ERROR:
        return sizeof(struct kairos_error);
    case KAIROS_MSG_WELCOME:
        return sizeof(struct kairos_welcome);
    case KAIROS_MSG_GRANT:
        return sizeof(struct kairos_grant);
    case KAIROS_MSG_PS_REPLY:
        return sizeof(struct kairos_ps_reply);
    default:
        return 0; /* OK */
    }
}

/* The body sizes kairosd may send with type: its own, and for PS_REPLY the bodies of
 * before (a PS without KAIROS_PS_HOLDS, or without KAIROS_PS_FAULTS, proto.h). */
static bool size_ok(uint16_t type, size_t size)
{
    return size == expected_size(type) ||
           (type == KAIROS_MSG_PS_REPLY &&
            (size == KAIROS_PS_REPLY_SIZE_V1 || size == KAIROS_PS_REPLY_SIZE_V2));
}

int client_recv(struct client *c, uint32_t seq, uint16_t *type, void *body, size_t cap,
                uint32_t *code, char *err, size_t err_len)
{
    unsigned char buf[sizeof(struct kairos_hdr) + sizeof(struct kairos_ps_reply)]; /* the largest */
    for (;;) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int n = poll(&p, 1, c->timeout_ms);
        if (n == 0) {
            snprintf(err, err_len, "kairosd at %s did not answer within %d ms", c->path,
                     c->timeout_ms);
            return -ETIMEDOUT;
        }
        if (n < 0 && errno == EINTR)
            continue;
        ssize_t got = recv(c->fd, buf, sizeof buf, 0);
        if (got <= 0) {
            snprintf(err, err_len, "kairosd closed the connection (is it stopping?)");
            return -ECONNRESET;
        }
        struct kairos_hdr h;
        if ((size_t)got < sizeof h) {
            snprintf(err, err_len, "kairosd sent a short message; versions differ?");
            return -EPROTO;
        }
        memcpy(&h, buf, sizeof h);
        size_t size = (size_t)got - sizeof h;
        if (h.magic != KAIROS_PROTO_MAGIC || h.version != KAIROS_PROTO_VERSION ||
            h.size != size || !size_ok(h.type, size)) {
            snprintf(err, err_len, "kairosd sent a message this kairos does not understand "
                     "(protocol version %u); use matching versions", h.version);
            return -EPROTO;
        }
        if (h.seq != seq && !(h.seq == 0 && h.type == KAIROS_MSG_ERROR))
            continue; /* a late reply to an earlier request; seq 0: the connection refused */
        if (h.type == KAIROS_MSG_ERROR) {
            struct kairos_error e;
            memcpy(&e, buf + sizeof h, sizeof e);
            e.message[sizeof e.message - 1] = 0;
            if (code)
                *code = e.code;
            snprintf(err, err_len, "%s", e.message);
            return -EREMOTEIO;
        }
        *type = h.type;
        c->last_size = size;
        if (body && size && cap)
            memcpy(body, buf + sizeof h, size < cap ? size : cap);
        return 0;
    }
}

/* The next PS_REPLY into r (what a reply of before lacks left 0); -ENOTSUP for the
 * refusal of a kairosd that knows no PS body, -ENOPROTOOPT for that of one that knows
 * no KAIROS_PS_FAULTS. */
static int ps_reply(struct client *c, int seq, uint32_t flags, struct kairos_ps_reply *r,
                    char *err, size_t err_len)
{
    uint16_t type;
    uint32_t code = 0;
    memset(r, 0, sizeof *r);
    int rc = client_recv(c, (uint32_t)seq, &type, r, sizeof *r, &code, err, err_len);
    if (rc == -EREMOTEIO && code == KAIROS_ERR_PROTOCOL && flags)
        return -ENOTSUP;
    if (rc == -EREMOTEIO && code == KAIROS_ERR_INVALID && (flags & KAIROS_PS_FAULTS))
        return -ENOPROTOOPT; /* a kairosd of before the faults */
    if (rc)
        return rc;
    if (type != KAIROS_MSG_PS_REPLY) {
        snprintf(err, err_len, "kairosd answered PS with message type %u", type);
        return -EPROTO;
    }
    if (c->last_size < KAIROS_PS_REPLY_SIZE_V2) /* the body of before: no hold figures */
        for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
            r->compute_flags[g] &= ~KAIROS_PS_COMPUTE_HOLDS;
    return 0;
}

int client_ps(struct client *c, uint32_t flags, struct kairos_ps_reply **out, size_t *n,
              unsigned *n_gpus, char *err, size_t err_len)
{
    struct kairos_ps_reply *list = NULL, r;
    size_t count = 0, cap = 0;
    int rc = 0;
    *out = NULL;
    *n = 0;
    *n_gpus = 0;
    struct kairos_ps body = {.flags = flags};
    int seq = client_send(c, KAIROS_MSG_PS, flags ? &body : NULL, flags ? sizeof body : 0);
    if (seq < 0) {
        snprintf(err, err_len, "cannot send to kairosd: %s", strerror(-seq));
        return seq;
    }
    for (;;) {
        if ((rc = ps_reply(c, seq, flags, &r, err, err_len)))
            goto out;
        r.tenant[KAIROS_NAME_MAX - 1] = 0;
        *n_gpus = r.n_gpus > KAIROS_MAX_GPUS ? KAIROS_MAX_GPUS : r.n_gpus;
        if (r.tenant[0]) {
            struct kairos_ps_reply *grown = grow_for_one(list, &cap, count, sizeof *grown, 64);
            if (!grown) {
                rc = -ENOMEM;
                snprintf(err, err_len, "out of memory");
                goto out;
            }
            list = grown;
            list[count++] = r;
        }
        if (r.flags & KAIROS_PS_LAST)
            break;
    }
out:
    if (rc) {
        free(list);
        return rc;
    }
    *out = list;
    *n = count;
    return 0;
}
