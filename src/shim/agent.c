/* agent.c - the shim's side of the kairosd protocol (see agent.h).
 *
 * Every exchange is one message out and, for HELLO and CHARGE, one reply in, on a
 * socket this file owns. CREDIT goes out one-way (agent_send_credit, the credit
 * sender's call) and its replies, like CREDIT_RECALL, come back as pushes. Replies are checked as strictly as the daemon checks
 * requests: magic, version, type, size and sequence number must all match, or the
 * connection is dropped and the caller treats the daemon as gone. The one
 * exception is an ERROR with sequence 0: kairosd refusing the connection itself
 * (connection limits), which is a refusal (-EPERM), never a daemon gone.
 *
 * Every receive happens under agent_mu. The daemon may push TIME_POLICY at any
 * time after WELCOME (and CREDIT replies and recalls): a requester waiting for its
 * reply dispatches the pushes it reads first and keeps waiting; agent_service (the watcher thread) reads the
 * pushes that arrive while nobody waits, with MSG_DONTWAIT. The handler runs with
 * agent_mu held and must not call back into the agent.
 */
#include "shim/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define AGENT_FD_FLOOR 700         /* move the socket above the usual descriptors */
#define AGENT_REPLY_TIMEOUT_MS 3000
#define AGENT_FORK_WAIT_MS 100 /* a fork with no ticket waits this long for one */
#define AGENT_FORK_REFILL 8     /* asks for more once this many tickets are spent */

static pthread_mutex_t agent_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int agent_fd = -1;
static atomic_uint agent_seq;

/* Fork tickets (agent.h). tk_mu guards them and the one-way sends of the fork path,
 * which never wait: it is never held across a blocking call, and is taken after
 * agent_mu when both are. */
static pthread_mutex_t tk_mu = PTHREAD_MUTEX_INITIALIZER;
static bool tk_enabled;  /* this connection's kairosd sends tickets */
static uint32_t tk_held; /* tickets in hand */
static uint32_t tk_spent; /* FORKED with TICKET sent on this connection */
static bool tk_asked;    /* a FORK_TICKETS ask waits for its answer */
static bool tk_refused;  /* the answer to the last ask held none */
static uint32_t agent_refusal; /* the code of the last ERROR read (agent_mu held) */
static const struct shim_real *agent_real;
static _Atomic(agent_policy_fn *) agent_policy_handler;
static _Atomic(agent_credit_fn *) agent_credit_handler;
static _Atomic(agent_room_fn *) agent_room_handler;

static void tickets_reset_locked(bool enabled)
{
    tk_enabled = enabled;
    tk_held = tk_spent = 0;
    tk_asked = tk_refused = false;
}

/* agent_mu held. Under tk_mu too, so no send of the fork path is under way on fd. */
static void drop_locked(void)
{
    pthread_mutex_lock(&tk_mu);
    int fd = atomic_exchange(&agent_fd, -1);
    tickets_reset_locked(false);
    pthread_mutex_unlock(&tk_mu);
    if (fd >= 0 && agent_real)
        agent_real->close(fd);
}

static int send_msg_flags(int fd, uint16_t type, uint32_t seq, const void *body, uint32_t size,
                          int flags)
{
    struct kairos_hdr h = {KAIROS_PROTO_MAGIC, KAIROS_PROTO_VERSION, type, size, seq};
    struct iovec iov[2] = {{&h, sizeof h}, {(void *)body, size}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = body ? 2 : 1};
    ssize_t n;
    do {
        n = sendmsg(fd, &m, MSG_NOSIGNAL | flags);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return n == (ssize_t)(sizeof h + size) ? 0 : -EPROTO;
}

static int send_msg(int fd, uint16_t type, uint32_t seq, const void *body, uint32_t size)
{
    return send_msg_flags(fd, type, seq, body, size, 0);
}

/* One message as read from the socket. */
union agent_msg {
    struct {
        struct kairos_hdr h;
        uint8_t body[sizeof(struct kairos_ps_reply)];
    } m;
    uint8_t raw[sizeof(struct kairos_hdr) + sizeof(struct kairos_ps_reply)];
};

/* Reads one message (flags: 0 or MSG_DONTWAIT). Returns its length, -EAGAIN when
 * none is waiting, -ECONNRESET at end of stream, -EPROTO when it is malformed. */
static ssize_t recv_one(int fd, union agent_msg *buf, int flags)
{
    ssize_t n;
    do {
        n = recv(fd, buf->raw, sizeof buf->raw, flags);
    } while (n < 0 && errno == EINTR);
    if (n == 0)
        return -ECONNRESET;
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    const struct kairos_hdr *h = &buf->m.h;
    if ((size_t)n < sizeof *h || h->magic != KAIROS_PROTO_MAGIC ||
        h->version != KAIROS_PROTO_VERSION || h->size != n - (ssize_t)sizeof *h)
        return -EPROTO;
    return n;
}

/* An unsolicited message: hands a TIME_POLICY to the handler. True if it was one
 * (whatever its seq: pushes are numbered by the daemon, not by us). */
static bool dispatch_credit_locked(const union agent_msg *buf)
{
    agent_credit_fn *fn = atomic_load(&agent_credit_handler);
    if (buf->m.h.type == KAIROS_MSG_CREDIT && buf->m.h.size == sizeof(struct kairos_credit)) {
        struct kairos_credit c;
        memcpy(&c, buf->m.body, sizeof c);
        if (fn && c.gpu < KAIROS_MAX_GPUS)
            fn(&c, NULL);
    } else if (buf->m.h.type == KAIROS_MSG_CREDIT_RECALL &&
               buf->m.h.size == sizeof(struct kairos_credit_recall)) {
        struct kairos_credit_recall r;
        memcpy(&r, buf->m.body, sizeof r);
        if (fn && r.gpu < KAIROS_MAX_GPUS)
            fn(NULL, &r);
    }
    return true; /* one we cannot read is ignored, like a TIME_POLICY */
}

/* FORK_TICKETS from kairosd: held counts every FORKED sent before the ask whose
 * spent it echoes; those sent since have spent one each. */
static void tickets_on_push(const union agent_msg *buf)
{
    struct kairos_fork_tickets m;
    memcpy(&m, buf->m.body, sizeof m);
    pthread_mutex_lock(&tk_mu);
    if (tk_enabled) {
        uint32_t since = tk_spent - m.spent;
        tk_held = m.held > since ? m.held - since : 0;
        tk_asked = false;
        tk_refused = tk_held == 0;
    }
    pthread_mutex_unlock(&tk_mu);
}

/* ROOM: sent only to a shim whose requests said KAIROS_CREDIT_NOTICE. */
static bool dispatch_room_locked(const union agent_msg *buf)
{
    agent_room_fn *fn = atomic_load(&agent_room_handler);
    struct kairos_room r;
    if (buf->m.h.size != sizeof r)
        return true; /* one we cannot read is ignored: the refusal expires by itself */
    memcpy(&r, buf->m.body, sizeof r);
    if (fn && r.gpu < KAIROS_MAX_GPUS)
        fn(r.gpu);
    return true;
}

static bool dispatch_push_locked(const union agent_msg *buf)
{
    if (buf->m.h.type == KAIROS_MSG_FORK_TICKETS) {
        if (buf->m.h.size == sizeof(struct kairos_fork_tickets))
            tickets_on_push(buf);
        return true;
    }
    if (buf->m.h.type == KAIROS_MSG_CREDIT || buf->m.h.type == KAIROS_MSG_CREDIT_RECALL)
        return dispatch_credit_locked(buf);
    if (buf->m.h.type == KAIROS_MSG_ROOM)
        return dispatch_room_locked(buf);
    if (buf->m.h.type != KAIROS_MSG_TIME_POLICY)
        return false;
    if (buf->m.h.size != sizeof(struct kairos_time_policy))
        return true; /* a push we cannot read: ignored, like an older policy */
    struct kairos_time_policy tp;
    memcpy(&tp, buf->m.body, sizeof tp);
    agent_policy_fn *fn = atomic_load(&agent_policy_handler);
    if (fn)
        fn(&tp);
    return true;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* buf holds kairosd's ERROR: its message into err (when given), and -EPERM. */
static int refused(const union agent_msg *buf, char *err, size_t err_len)
{
    struct kairos_error e;
    memcpy(&e, buf->m.body, sizeof e);
    agent_refusal = e.code;
    e.message[sizeof e.message - 1] = 0;
    if (err && err_len)
        snprintf(err, err_len, "%s", e.message);
    return -EPERM;
}

/* Waits for the reply to seq, dispatching pushes that arrive first: fills body
 * (want_size bytes) for type want, or the error text for KAIROS_MSG_ERROR
 * (returned as -EPERM). */
static int recv_reply(int fd, uint32_t seq, uint16_t want, void *body, uint32_t want_size,
                      char *err, size_t err_len)
{
    union agent_msg buf;
    int64_t deadline = now_ms() + AGENT_REPLY_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {fd, POLLIN, 0};
        int rc = poll(&p, 1, (int)left);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0)
            return -ETIMEDOUT;
        if (rc < 0)
            return -errno;
        ssize_t n = recv_one(fd, &buf, 0);
        if (n < 0)
            return (int)n;
        if (dispatch_push_locked(&buf))
            continue;
        const struct kairos_hdr *h = &buf.m.h;
        bool refusal = h->seq == 0 && h->type == KAIROS_MSG_ERROR; /* of the connection */
        if (h->seq != seq && !refusal)
            return -EPROTO;
        if (h->type == KAIROS_MSG_ERROR && h->size == sizeof(struct kairos_error))
            return refused(&buf, err, err_len);
        if (h->type != want || h->size != want_size)
            return -EPROTO;
        memcpy(body, buf.m.body, want_size);
        return 0;
    }
}

/* kairosd refused the connection itself (too many connections, of this user or in
 * all) and closed it before our request: its ERROR (sequence 0) may still wait to
 * be read. -EPERM with its message then, so that the refusal is obeyed (never
 * taken for a daemon that is down); else rc. */
static int refusal_waiting(int fd, int rc, char *err, size_t err_len)
{
    union agent_msg buf;
    ssize_t n = recv_one(fd, &buf, MSG_DONTWAIT);
    if (n < 0 || buf.m.h.seq != 0 || buf.m.h.type != KAIROS_MSG_ERROR ||
        buf.m.h.size != sizeof(struct kairos_error))
        return rc;
    return refused(&buf, err, err_len);
}

static int exchange_locked(uint16_t type, const void *body, uint32_t size, uint16_t want,
                           void *reply, uint32_t reply_size, char *err, size_t err_len)
{
    int fd = atomic_load(&agent_fd);
    if (fd < 0)
        return -ENOTCONN;
    uint32_t seq = atomic_fetch_add(&agent_seq, 1) + 1;
    int rc = send_msg(fd, type, seq, body, size);
    if (rc == -EPIPE || rc == -ECONNRESET)
        rc = refusal_waiting(fd, rc, err, err_len);
    if (rc == 0 && want)
        rc = recv_reply(fd, seq, want, reply, reply_size, err, err_len);
    if (rc < 0 && rc != -EPERM)
        drop_locked();
    return rc;
}

static int open_socket(const struct shim_real *r, const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        r->close(fd);
        return -e;
    }
    int high = r->fcntl(fd, F_DUPFD_CLOEXEC, AGENT_FD_FLOOR);
    if (high >= 0) {
        r->close(fd);
        fd = high;
    }
    return fd;
}

/* ROUTE after WELCOME (agent_mu held): kairosd's answer into q. */
static int route_locked(struct agent_quota *q, char *err, size_t err_len)
{
    struct kairos_route ask = {0};
    int rc = exchange_locked(KAIROS_MSG_ROUTE, &ask, sizeof ask, KAIROS_MSG_ROUTED, &q->route,
                             sizeof q->route, err, err_len);
    if (rc == 0) {
        q->route.domain[sizeof q->route.domain - 1] = 0;
        q->route.pipe_dir[sizeof q->route.pipe_dir - 1] = 0;
        q->routed = true;
    }
    return rc;
}

/* One connection and HELLO (agent_mu held); news: ask for fork tickets, and ROUTE on a
 * first registration (flags a kairosd of before refuses). */
static int connect_locked(const struct shim_real *r, const char *socket_path,
                          const char *tenant, const uint64_t held[KAIROS_MAX_GPUS],
                          bool reattach, bool news, struct agent_quota *q, char *err,
                          size_t err_len)
{
    drop_locked();
    agent_refusal = 0;
    int fd = open_socket(r, socket_path);
    int rc = fd;
    if (fd >= 0) {
        atomic_store(&agent_fd, fd);
        struct kairos_hello hello = {.flags = (reattach ? KAIROS_HELLO_REATTACH : 0) |
                                              (tenant[0] ? 0 : KAIROS_HELLO_PLACE) |
                                              (news ? KAIROS_HELLO_FORK_TICKETS |
                                                          KAIROS_HELLO_SPACE : 0),
                                     .pid = (uint32_t)getpid()};
        snprintf(hello.tenant, sizeof hello.tenant, "%s", tenant);
        if (held)
            memcpy(hello.held, held, sizeof hello.held);
        struct kairos_welcome w;
        rc = exchange_locked(KAIROS_MSG_HELLO, &hello, sizeof hello, KAIROS_MSG_WELCOME, &w,
                             sizeof w, err, err_len);
        if (rc == 0) {
            q->tenant_id = w.tenant_id;
            q->n_gpus = w.n_gpus < KAIROS_MAX_GPUS ? w.n_gpus : KAIROS_MAX_GPUS;
            memcpy(q->quota, w.quota, sizeof q->quota);
            pthread_mutex_lock(&tk_mu);
            tickets_reset_locked(news); /* its FORK_TICKETS push follows WELCOME */
            pthread_mutex_unlock(&tk_mu);
            q->routed = false;
            if (news && !reattach)
                rc = route_locked(q, err, err_len);
        }
        if (rc)
            drop_locked();
    }
    return rc;
}

int agent_connect(const struct shim_real *r, const char *socket_path, const char *tenant,
                  const uint64_t held[KAIROS_MAX_GPUS], bool reattach, struct agent_quota *q,
                  char *err, size_t err_len)
{
    pthread_mutex_lock(&agent_mu);
    agent_real = r;
    int rc = connect_locked(r, socket_path, tenant, held, reattach, true, q, err, err_len);
    if (rc == -EPERM && agent_refusal == KAIROS_ERR_INVALID) /* a kairosd of before the
                                                              * tickets: HELLO without */
        rc = connect_locked(r, socket_path, tenant, held, reattach, false, q, err, err_len);
    pthread_mutex_unlock(&agent_mu);
    return rc;
}

int agent_charge_flags(uint32_t gpu, uint64_t bytes, uint64_t token, uint32_t flags,
                       struct kairos_grant *grant)
{
    struct kairos_charge c = {.gpu = gpu, .flags = flags, .bytes = bytes, .token = token};
    pthread_mutex_lock(&agent_mu);
    int rc = exchange_locked(KAIROS_MSG_CHARGE, &c, sizeof c, KAIROS_MSG_GRANT, grant,
                             sizeof *grant, NULL, 0);
    pthread_mutex_unlock(&agent_mu);
    return rc == -EPERM ? -EPROTO : rc;
}

int agent_commit(const struct kairos_commit *commit)
{
    pthread_mutex_lock(&agent_mu);
    int rc = exchange_locked(KAIROS_MSG_COMMIT, commit, sizeof *commit, 0, NULL, 0, NULL, 0);
    pthread_mutex_unlock(&agent_mu);
    return rc;
}

int agent_release(uint32_t gpu, uint64_t bytes)
{
    struct kairos_release rel = {.gpu = gpu, .bytes = bytes};
    pthread_mutex_lock(&agent_mu);
    int rc = exchange_locked(KAIROS_MSG_RELEASE, &rel, sizeof rel, 0, NULL, 0, NULL, 0);
    pthread_mutex_unlock(&agent_mu);
    return rc;
}

/* One message without waiting for room on the socket (agent_mu held): -EAGAIN when
 * the socket is full (nothing sent, the link kept), -ENOTCONN without a link; any
 * other failure drops the link. */
static int send_nowait_locked(uint16_t type, const void *body, uint32_t size)
{
    int fd = atomic_load(&agent_fd);
    if (fd < 0)
        return -ENOTCONN;
    int rc = send_msg_flags(fd, type, atomic_fetch_add(&agent_seq, 1) + 1, body, size,
                            MSG_DONTWAIT);
    if (rc == -EWOULDBLOCK || rc == -EAGAIN)
        return -EAGAIN;
    if (rc < 0)
        drop_locked();
    return rc;
}

int agent_tell(uint16_t type, const void *body, uint32_t size)
{
    pthread_mutex_lock(&agent_mu);
    /* never blocks: a daemon that stopped reading must not stop a free */
    int rc = send_nowait_locked(type, body, size);
    pthread_mutex_unlock(&agent_mu);
    return rc == -EAGAIN ? -EBUSY : rc;
}

int agent_report_handover(uint16_t type, const void *body, uint32_t size, char *err,
                          size_t err_len)
{
    char none[1];
    pthread_mutex_lock(&agent_mu);
    agent_refusal = 0;
    int rc = exchange_locked(type, body, size, KAIROS_MSG_OK, none, 0, err, err_len);
    if (rc == -EPERM && agent_refusal == KAIROS_ERR_BUSY)
        rc = -EAGAIN;
    pthread_mutex_unlock(&agent_mu);
    return rc;
}

int agent_report_runnable(const struct kairos_runnable *r)
{
    if (pthread_mutex_trylock(&agent_mu) != 0)
        return -EBUSY; /* a requester owns the socket until its reply: next time */
    /* never blocks: a daemon that does not read costs this report, not a window */
    int rc = send_nowait_locked(KAIROS_MSG_RUNNABLE, r, sizeof *r);
    pthread_mutex_unlock(&agent_mu);
    return rc == -EAGAIN ? -EBUSY : rc;
}

int agent_send_ending(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += AGENT_ENDING_LOCK_MS / 1000;
    until.tv_nsec += (AGENT_ENDING_LOCK_MS % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    if (pthread_mutex_timedlock(&agent_mu, &until) != 0)
        return -EBUSY;
    struct kairos_ending e = {0};
    int rc = send_nowait_locked(KAIROS_MSG_ENDING, &e, sizeof e);
    pthread_mutex_unlock(&agent_mu);
    return rc == -EAGAIN ? -EBUSY : rc;
}

static int send_credit_locked(const struct kairos_credit *c)
{
    return send_nowait_locked(KAIROS_MSG_CREDIT, c, sizeof *c);
}

int agent_send_credit(const struct kairos_credit *c)
{
    pthread_mutex_lock(&agent_mu);
    int rc = send_credit_locked(c);
    pthread_mutex_unlock(&agent_mu);
    return rc;
}

int agent_try_send_credit(const struct kairos_credit *c)
{
    if (pthread_mutex_trylock(&agent_mu) != 0)
        return -EBUSY; /* a registration owns the socket: the sender will do it */
    int rc = send_credit_locked(c);
    pthread_mutex_unlock(&agent_mu);
    return rc;
}

void agent_set_credit_handler(agent_credit_fn *fn)
{
    atomic_store(&agent_credit_handler, fn);
}

void agent_set_room_handler(agent_room_fn *fn)
{
    atomic_store(&agent_room_handler, fn);
}

void agent_set_policy_handler(agent_policy_fn *fn)
{
    atomic_store(&agent_policy_handler, fn);
}

/* Reads and dispatches what waits on fd (agent_mu held, nobody waiting for a reply):
 * 0, or -ENOTCONN when the link is dropped (hung up, failed, or a reply nobody asked
 * for). */
static int read_pushes_locked(int fd)
{
    for (;;) {
        union agent_msg buf;
        ssize_t n = recv_one(fd, &buf, MSG_DONTWAIT);
        if (n == -EAGAIN)
            return 0;
        if (n < 0 || !dispatch_push_locked(&buf)) {
            drop_locked();
            return -ENOTCONN;
        }
    }
}

int agent_service(int timeout_ms)
{
    int fd = atomic_load(&agent_fd);
    if (fd < 0)
        return -ENOTCONN;
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
    int rc = poll(&p, 1, timeout_ms);
    if (rc <= 0)
        return 0;
    /* Pushes, and the end of the stream, are read under the mutex: a requester
     * holding it owns the socket until its reply is in, and dispatches what it
     * meets on the way, so whatever is left here is unsolicited. */
    pthread_mutex_lock(&agent_mu);
    rc = atomic_load(&agent_fd) == fd ? read_pushes_locked(fd)
                                      : (atomic_load(&agent_fd) < 0 ? -ENOTCONN : 0);
    pthread_mutex_unlock(&agent_mu);
    return rc;
}

bool agent_connected(void)
{
    return atomic_load(&agent_fd) >= 0;
}

bool agent_owns_fd(int fd)
{
    return fd >= 0 && fd == atomic_load(&agent_fd);
}

void agent_forget(void)
{
    /* the descriptor is already closed or replaced by the application: do not close it */
    atomic_store(&agent_fd, -1);
}

void agent_after_fork(void)
{
    int fd = atomic_exchange(&agent_fd, -1);
    if (fd >= 0 && agent_real)
        agent_real->close(fd); /* the child's copy; the parent keeps its connection */
    pthread_mutex_init(&agent_mu, NULL); /* another thread may have held them at the fork */
    pthread_mutex_init(&tk_mu, NULL);
    tickets_reset_locked(false); /* the parent's tickets are the parent's */
}

/* ---- fork reports (issue 25, item 9) ------------------------------------------------ */

/* One message on the socket, never waiting (tk_mu held, agent_mu maybe not: a
 * SOCK_SEQPACKET message goes whole, and drop_locked takes tk_mu before closing). */
static int send_tk_locked(uint16_t type, const void *body, uint32_t size)
{
    int fd = atomic_load(&agent_fd);
    if (fd < 0)
        return -ENOTCONN;
    int rc = send_msg_flags(fd, type, atomic_fetch_add(&agent_seq, 1) + 1, body, size,
                            MSG_DONTWAIT);
    return rc == -EWOULDBLOCK ? -EAGAIN : rc;
}

/* Asks for tickets unless an ask is on its way (tk_mu held). */
static void ask_tickets_locked(void)
{
    if (tk_asked)
        return;
    struct kairos_fork_tickets m = {.want = KAIROS_FORK_TICKETS_MAX, .spent = tk_spent};
    if (send_tk_locked(KAIROS_MSG_FORK_TICKETS, &m, sizeof m) == 0) {
        tk_asked = true;
        tk_refused = false;
    }
}

/* One try (tk_mu taken here): 0 when the FORKED went with a ticket, -EAGAIN when
 * kairosd answered that it has none to give, -EINPROGRESS while the answer is
 * awaited, -ENOTCONN without a ticket-speaking link. */
static int fork_try(pid_t child)
{
    pthread_mutex_lock(&tk_mu);
    int rc = -EINPROGRESS;
    if (!tk_enabled || atomic_load(&agent_fd) < 0) {
        rc = -ENOTCONN;
    } else if (tk_held > 0) {
        struct kairos_forked m = {.child_pid = (uint32_t)child, .flags = KAIROS_FORKED_TICKET};
        int sent = send_tk_locked(KAIROS_MSG_FORKED, &m, sizeof m);
        if (sent == 0) {
            tk_held--;
            tk_spent++;
            rc = 0;
        } else if (sent != -EAGAIN) {
            rc = -ENOTCONN; /* the watcher sees the link fail and reattaches */
        } /* -EAGAIN: kairosd reads nothing; wait like for a ticket */
    } else if (tk_refused) {
        rc = -EAGAIN;
    }
    if (rc != -ENOTCONN && tk_held + AGENT_FORK_REFILL <= KAIROS_FORK_TICKETS_MAX)
        ask_tickets_locked(); /* refilled off the fork path: the answer is a push */
    pthread_mutex_unlock(&tk_mu);
    return rc;
}

/* Reads pushes for up to ms when no other thread owns the socket, else naps. */
static void pump(int ms)
{
    if (pthread_mutex_trylock(&agent_mu) == 0) {
        int fd = atomic_load(&agent_fd);
        struct pollfd p = {fd, POLLIN, 0};
        if (fd >= 0 && poll(&p, 1, ms) > 0)
            read_pushes_locked(fd);
        pthread_mutex_unlock(&agent_mu);
        return;
    }
    struct timespec nap = {0, 200 * 1000};
    nanosleep(&nap, NULL); /* the owner (a requester, the watcher) dispatches the push */
}

int agent_report_fork(pid_t child, char *err, size_t err_len)
{
    pthread_mutex_lock(&tk_mu);
    bool enabled = tk_enabled && atomic_load(&agent_fd) >= 0;
    pthread_mutex_unlock(&tk_mu);
    if (!enabled)
        return -EOPNOTSUPP;
    int64_t deadline = now_ms() + AGENT_FORK_WAIT_MS;
    for (;;) {
        int rc = fork_try(child);
        if (rc == -EAGAIN)
            snprintf(err, err_len, "this process has no fork ticket left and kairosd gives "
                     "none: the tenant's or user's share of hand-overs is nearly full");
        if (rc != -EINPROGRESS)
            return rc;
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            snprintf(err, err_len, "this process has no fork ticket left and kairosd did "
                     "not give one within %d ms", AGENT_FORK_WAIT_MS);
            return -EAGAIN;
        }
        pump(left < 2 ? (int)left : 2);
    }
}
