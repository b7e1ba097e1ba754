/* server.c - kairosd's socket: listening, accepting within the connection limits,
 * each peer's credentials, pidfd and outbox, framing, and the sweep of idle peers;
 * each whole message goes to requests.c, whose handlers answer through peer_send
 * (see server.h). */
#include "daemon/transport/server.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <linux/sockios.h>
#include <time.h>
#include <unistd.h>

#include "daemon/base/folders.h"
#include "daemon/base/log.h"
#include "daemon/memory/linger.h"
#include "daemon/space/client_end.h"
#include "daemon/transport/conn_limits.h"
#include "daemon/transport/handle_members.h"
#include "daemon/transport/handle_memory.h"
#include "daemon/transport/handle_ps.h"
#include "daemon/transport/owners.h"
#include "daemon/transport/peer.h"
#include "daemon/transport/proto_check.h"
#include "daemon/transport/requests.h"

#define SERVER_BATCH 32 /* messages handled per wake-up of one peer, for fairness */
#define SERVER_EXIT_ROUNDS 16 /* batches read from a process that exited, at most */
#define SERVER_OUTQ_MAX 64          /* replies waiting for a peer that reads slowly */
#define SERVER_SNDBUF (64 << 10)    /* the kernel's buffer per peer (it doubles it) */
#define SERVER_TICK_MS 200          /* the sweep of idle peers, the end of an accept pause */
#define SERVER_ACCEPT_PAUSE_MS 200  /* out of descriptors: wait before accepting again */
#define SERVER_DROP_UNREAD_MAX 1024 /* records of a closed peer's dropped at most (drop_unread) */

struct conn {
    struct peer p;            /* what the handlers see (peer.h); in sv.peers */
    struct server *srv;
    int fd, pidfd;
    struct loop_watch *w, *pw;
    uint64_t last_active_ms;  /* its last request, or the last reply it took: unregistered
                               * peers idle for register_timeout_ms go (conn_limits_idle) */
    int outq_seen;            /* bytes sent and not yet read by it, at the last sweep */
    unsigned char *out[SERVER_OUTQ_MAX]; /* packed messages the socket could not take */
    size_t out_len[SERVER_OUTQ_MAX];
    unsigned out_head, out_n;
    bool gone;                /* it reads no more (its end is closed): replies are
                               * dropped, what it sent before is still taken */
    uint32_t events;          /* what is watched now */
};

struct server {
    struct services sv;       /* what the handlers act on (peer.h) */
    struct loop *loop;
    int listen_fd;
    struct loop_watch *lw;
    char path[CONFIG_SOCKET_MAX];
    unsigned n_conns;
    struct owners owners;
    time_t last_full_warning;
    struct loop_watch *cw;       /* wake-up: compute_changed_later */
    struct conn_limits limits;
    struct loop_watch *tw;    /* timer: SERVER_TICK_MS */
    bool accept_paused;
    uint64_t accept_resume_ms;
    time_t last_emfile_warning;
};

static struct conn *conn_of(const struct peer *p)
{
    return (struct conn *)((char *)p - offsetof(struct conn, p));
}

/* Reading while nothing waits to be written; writing (and no reading: the peer's
 * next requests wait in its socket) while something does. */
static void conn_watch(struct conn *c)
{
    uint32_t want = c->out_n || c->p.ps_active ? EPOLLOUT : EPOLLIN | EPOLLRDHUP;
    if (want != c->events && loop_modify(c->srv->loop, c->w, want) == 0)
        c->events = want;
}

/* The peer's end is closed (it exited, or closed the socket) while its last
 * messages may still wait to be read: a process's report at exit often follows a
 * request whose answer it never reads. What waits for it is dropped and nothing
 * more is sent; its messages are read until the end of the stream. */
static void conn_gone(struct conn *c)
{
    if (!c->gone)
        log_debug("pid %u no longer reads; taking what it sent before", c->p.pid);
    c->gone = true;
    c->p.ps_active = false;
    for (; c->out_n; c->out_n--) {
        free(c->out[c->out_head]);
        c->out[c->out_head] = NULL;
        c->out_head = (c->out_head + 1) % SERVER_OUTQ_MAX;
    }
}

/* Whether a send failed because the peer's end is closed. */
static bool peer_closed(ssize_t sent)
{
    return sent < 0 && (errno == EPIPE || errno == ECONNRESET);
}

/* Sends what waits, in order; false when the peer must be disconnected. */
static bool flush_out(struct conn *c)
{
    while (c->out_n) {
        unsigned i = c->out_head;
        ssize_t n = send(c->fd, c->out[i], c->out_len[i], MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return true;
        if (peer_closed(n)) {
            conn_gone(c);
            return true;
        }
        if (n != (ssize_t)c->out_len[i]) {
            log_warn("pid %u: cannot send (%s); disconnecting it", c->p.pid,
                     n < 0 ? strerror(errno) : "cut short");
            return false;
        }
        free(c->out[i]);
        c->out[i] = NULL;
        c->last_active_ms = peer_now_ms(); /* it reads: a slow listing is not idle */
        c->out_head = (i + 1) % SERVER_OUTQ_MAX;
        c->out_n--;
    }
    return true;
}

/* Sends, or queues behind what waits; a peer with SERVER_OUTQ_MAX messages waiting
 * does not read its replies and is disconnected (false), so none pins memory. */
static bool send_msg(struct conn *c, uint16_t type, uint32_t seq, const void *body, size_t len)
{
    unsigned char buf[PROTO_MSG_MAX];
    if (c->gone)
        return true; /* nobody reads it */
    size_t n = proto_pack(buf, type, seq, body, len);
    if (!c->out_n) {
        ssize_t sent = send(c->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent == (ssize_t)n) {
            c->last_active_ms = peer_now_ms();
            return true;
        }
        if (peer_closed(sent)) {
            conn_gone(c);
            return true;
        }
        if (sent >= 0 || (errno != EAGAIN && errno != EINTR)) {
            log_warn("pid %u: cannot send %s (%s); disconnecting it", c->p.pid,
                     proto_type_name(type), sent < 0 ? strerror(errno) : "cut short");
            return false;
        }
    }
    if (c->out_n == SERVER_OUTQ_MAX) {
        log_warn("pid %u (uid %u): %d replies wait for it to read them; disconnecting it",
                 c->p.pid, c->p.uid, SERVER_OUTQ_MAX);
        return false;
    }
    unsigned char *copy = malloc(n);
    if (!copy) {
        log_warn("pid %u: out of memory queueing %s; disconnecting it", c->p.pid,
                 proto_type_name(type));
        return false;
    }
    memcpy(copy, buf, n);
    unsigned i = (c->out_head + c->out_n) % SERVER_OUTQ_MAX;
    c->out[i] = copy;
    c->out_len[i] = n;
    c->out_n++;
    conn_watch(c);
    return true;
}

static bool send_error(struct conn *c, uint32_t seq, uint32_t code, const char *message)
{
    struct kairos_error e = {.code = code};
    snprintf(e.message, sizeof e.message, "%s", message);
    return send_msg(c, KAIROS_MSG_ERROR, seq, &e, sizeof e);
}

/* handle_members_tenants_changed once back in the loop, for a tenant removed while
 * closing a connection: conn_close may run inside server_send_time_policy's walk over the connections,
 * which a reconfiguration (sending, and closing who cannot take it) must not
 * change under its feet. */
static void compute_changed_later(struct services *sv)
{
    struct server *s = (struct server *)((char *)sv - offsetof(struct server, sv));
    int rc = s->cw ? loop_wake(s->cw) : -EBADF;
    if (rc)
        log_warn("cannot defer the time-share update (%s); it comes with the next change",
                 strerror(-rc));
}

static void on_compute_changed(void *ctx, int fd, uint32_t events)
{
    eventfd_t n;
    if (eventfd_read(fd, &n) == 0)
        handle_members_tenants_changed(&((struct server *)ctx)->sv);
}

/* What a peer sent and kairosd will not read is dropped before its socket is closed:
 * closing a socket with unread data resets the peer's end, and the peer's next recv
 * fails (ECONNRESET) before the ERROR that says why it was disconnected (a malformed
 * message followed by others). Bounded: a peer writing as fast as this reads. */
static void drop_unread(int fd)
{
    char b[1];
    for (int i = 0; i < SERVER_DROP_UNREAD_MAX; i++)
        if (recv(fd, b, sizeof b, MSG_DONTWAIT | MSG_TRUNC) <= 0)
            return;
}

static void conn_close(struct conn *c)
{
    struct server *s = c->srv;
    handle_members_left(&c->p); /* what its departure releases */
    loop_del(s->loop, c->w);
    loop_del(s->loop, c->pw);
    for (unsigned i = 0; i < c->out_n; i++)
        free(c->out[(c->out_head + i) % SERVER_OUTQ_MAX]);
    conn_limits_remove(&s->limits, c->p.uid);
    drop_unread(c->fd);
    close(c->fd);
    if (c->pidfd >= 0)
        close(c->pidfd);
    if (c->p.prev)
        c->p.prev->next = c->p.next;
    else
        s->sv.peers = c->p.next;
    if (c->p.next)
        c->p.next->prev = c->p.prev;
    s->n_conns--;
    free(c);
}

static void on_pidfd(void *ctx, int fd, uint32_t events);

/* --- what the transport does for the handlers (peer.h) --- */

static bool io_send(struct peer *p, uint16_t type, uint32_t seq, const void *body, size_t len)
{
    return send_msg(conn_of(p), type, seq, body, len);
}

static bool io_waiting(const struct peer *p)
{
    return conn_of(p)->out_n > 0;
}

static void io_joined(struct peer *p)
{
    struct conn *c = conn_of(p);
    if (c->pidfd < 0) {
        c->pidfd = owners_pidfd_open(p->pid);
        if (c->pidfd >= 0)
            c->pw = loop_add(c->srv->loop, c->pidfd, EPOLLIN, on_pidfd, c);
    }
}

static const struct peer_io server_io = {
    .send = io_send,
    .waiting = io_waiting,
    .joined = io_joined,
    .compute_changed_later = compute_changed_later,
};

/* The PS listing's next replies once the outbox is empty (handle_ps.h). */
static bool ps_pump(struct conn *c)
{
    if (!handle_ps_pump(&c->p))
        return false;
    conn_watch(c);
    return true;
}

static void on_conn(void *ctx, int fd, uint32_t events)
{
    struct conn *c = ctx;
    unsigned char buf[PROTO_MSG_MAX];
    if ((events & EPOLLOUT) && (!flush_out(c) || !ps_pump(c))) {
        conn_close(c);
        return;
    }
    if ((events & (EPOLLERR | EPOLLHUP)) && (c->out_n || c->p.ps_active))
        conn_gone(c); /* gone without reading what it asked for: take what it sent */
    for (int i = 0; i < SERVER_BATCH && !c->out_n && !c->p.ps_active; i++) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) { /* 0: hang-up (the process exited or closed the socket) */
            conn_close(c);
            return;
        }
        if ((size_t)n > sizeof buf) {
            char why[128];
            snprintf(why, sizeof why, "message of %zd bytes is larger than any kairos message "
                     "(%zu)", n, sizeof buf);
            log_warn("pid %u (uid %u): %s; disconnecting it", c->p.pid, c->p.uid, why);
            send_error(c, 0, KAIROS_ERR_PROTOCOL, why);
            conn_close(c);
            return;
        }
        c->last_active_ms = peer_now_ms();
        if (!requests_handle(&c->p, buf, (size_t)n)) {
            conn_close(c);
            return;
        }
    }
    conn_watch(c);
}

/* Binds fd at path, mode 0666, listening: made at a name beside it and linked at path
 * once listening (the name beside it then removed), so that the path never names a
 * socket nobody listens on yet (a client that waits for it to appear, as scripts and
 * tests do, would be refused in that moment), and a socket another kairosd put at path
 * meanwhile stays (-EEXIST); at path itself where the name beside it would be too
 * long. 0 or -errno (nothing this call bound is left). */
static int listen_at(int fd, const char *path)
{
    struct sockaddr_un at = {.sun_family = AF_UNIX};
    int n = snprintf(at.sun_path, sizeof at.sun_path, "%s.%ld.new", path, (long)getpid());
    bool staged = n > 0 && (size_t)n < sizeof at.sun_path;
    if (!staged)
        snprintf(at.sun_path, sizeof at.sun_path, "%s", path);
    else
        unlink(at.sun_path); /* a kairosd of this pid that died here */
    if (bind(fd, (struct sockaddr *)&at, sizeof at))
        return -errno; /* nothing of ours there: what is at the name is left alone */
    int rc = 0;
    if (chmod(at.sun_path, 0666) || listen(fd, SOMAXCONN) || (staged && link(at.sun_path, path)))
        rc = -errno;
    if (rc || staged)
        unlink(at.sun_path); /* the name this call bound, or its stage */
    return rc;
}

static void on_pidfd(void *ctx, int fd, uint32_t events)
{
    struct conn *c = ctx;
    struct server *s = c->srv; /* on_conn may close (and free) c */
    /* the process exited; read what it sent before dying (all of it: batches until
     * the end of the stream, or nothing is left), then release */
    conn_gone(c);
    for (unsigned round = 0; round < SERVER_EXIT_ROUNDS; round++) {
        on_conn(c, c->fd, EPOLLIN);
        struct peer *still;
        for (still = s->sv.peers; still && still != &c->p; still = still->next)
            ;
        if (!still)
            return; /* the end of its stream: closed */
        int unread = 0;
        if (ioctl(c->fd, FIONREAD, &unread) || unread <= 0)
            break;
    }
    conn_close(c);
}

/* Out of descriptors (EMFILE, ENFILE) or kernel memory: stop watching the listener
 * for SERVER_ACCEPT_PAUSE_MS instead of spinning on it; waiting clients stay in the
 * backlog, and idle unregistered peers are being closed meanwhile. */
static void pause_accept(struct server *s, int err)
{
    time_t now = time(NULL);
    if (now - s->last_emfile_warning >= 10) {
        log_warn("cannot accept connections: %s (%u open); pausing %d ms at a time until "
                 "descriptors are free (raise LimitNOFILE= or lower max_connections)",
                 strerror(err), s->limits.total, SERVER_ACCEPT_PAUSE_MS);
        s->last_emfile_warning = now;
    }
    if (loop_modify(s->loop, s->lw, 0) == 0) {
        s->accept_paused = true;
        s->accept_resume_ms = peer_now_ms() + SERVER_ACCEPT_PAUSE_MS;
    }
}

static void refuse(struct server *s, int cfd, const struct ucred *cred, const char *why)
{
    time_t now = time(NULL);
    if (now - s->last_full_warning >= 10) {
        log_warn("refusing pid %d (uid %u): %s", (int)cred->pid, (unsigned)cred->uid, why);
        s->last_full_warning = now;
    }
    unsigned char buf[PROTO_MSG_MAX];
    struct kairos_error e = {.code = KAIROS_ERR_BUSY};
    snprintf(e.message, sizeof e.message, "%s", why);
    size_t n = proto_pack(buf, KAIROS_MSG_ERROR, 0, &e, sizeof e);
    (void)!send(cfd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    drop_unread(cfd); /* else the close resets it and the ERROR is lost */
    close(cfd);
}

static void on_accept(void *ctx, int fd, uint32_t events)
{
    struct server *s = ctx;
    for (;;) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                pause_accept(s, errno);
            return; /* EAGAIN: all taken */
        }
        struct ucred cred;
        socklen_t cl = sizeof cred;
        if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &cl)) {
            close(cfd);
            continue;
        }
        char why[KAIROS_MSG_MAX], cgroup[MEMBERS_CGROUP_PATH_MAX];
        members_read_cgroup((uint32_t)cred.pid, NULL, cgroup, sizeof cgroup);
        if (conn_limits_admit(&s->limits, s->sv.cfg, cred.uid, cgroup, why, sizeof why)) {
            refuse(s, cfd, &cred, why);
            continue;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c || conn_limits_add(&s->limits, cred.uid)) {
            free(c);
            close(cfd);
            continue;
        }
        int sndbuf = SERVER_SNDBUF;
        setsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
        c->srv = s;
        c->fd = cfd;
        c->pidfd = -1;
        c->p.sv = &s->sv;
        c->p.pid = (uint32_t)cred.pid;
        c->p.uid = cred.uid;
        c->p.gid = cred.gid;
        memcpy(c->p.cgroup, cgroup, sizeof c->p.cgroup);
        c->last_active_ms = peer_now_ms();
        c->events = EPOLLIN | EPOLLRDHUP;
        c->w = loop_add(s->loop, cfd, c->events, on_conn, c);
        if (!c->w) {
            conn_limits_remove(&s->limits, cred.uid);
            close(cfd);
            free(c);
            continue;
        }
        c->p.next = s->sv.peers;
        if (s->sv.peers)
            s->sv.peers->prev = &c->p;
        s->sv.peers = &c->p;
        s->n_conns++;
        log_debug("pid %u (uid %u) connected", c->p.pid, c->p.uid);
    }
}

/* A peer with replies waiting took some since the last sweep when the bytes it has
 * not read went down (the kernel's count, SIOCOUTQ): it reads, even when kairosd
 * itself was held back and has not yet seen the socket writable (a sweep may run
 * before the write after a stall), so kairosd's own delays never count as the
 * peer's idleness. */
static void note_reading(struct conn *c, uint64_t now)
{
    int unread = 0;
    if (ioctl(c->fd, SIOCOUTQ, &unread))
        return;
    if (unread < c->outq_seen)
        c->last_active_ms = now;
    c->outq_seen = unread;
}

/* A peer whose messages wait in its socket for kairosd, which still reads it, is not
 * idle: kairosd is behind (a flood of connections ahead of it in the loop) and reads
 * them next (SIOCINQ: bytes not yet read). One whose reading kairosd stopped (its
 * replies wait for it: no EPOLLIN) is judged by what it reads, as before. */
static bool has_unread_requests(const struct conn *c)
{
    int queued = 0;
    return (c->events & EPOLLIN) && ioctl(c->fd, SIOCINQ, &queued) == 0 && queued > 0;
}

/* Every SERVER_TICK_MS: closes the peers that neither registered (HELLO, or an
 * administrator's request) nor asked or read anything for register_timeout_ms (or
 * longer while replies wait for them: conn_limits_idle), unless what they sent waits
 * for kairosd, and ends an accept pause. */
static void on_tick(void *ctx, int fd, uint32_t events)
{
    struct server *s = ctx;
    uint64_t expirations, now = peer_now_ms();
    (void)!read(fd, &expirations, sizeof expirations);
    if (s->accept_paused && now >= s->accept_resume_ms &&
        loop_modify(s->loop, s->lw, EPOLLIN) == 0)
        s->accept_paused = false;
    handle_memory_tick(&s->sv, now);
    handle_members_tick(&s->sv, now);
    unsigned closed = 0;
    struct peer *next;
    for (struct peer *p = s->sv.peers; p; p = next) {
        struct conn *c = conn_of(p);
        next = p->next;
        if (p->broken) {
            conn_close(c);
            continue;
        }
        if (p->member || p->registered)
            continue;
        bool waiting = c->out_n || p->ps_active;
        if (waiting)
            note_reading(c, now);
        if (!conn_limits_idle(s->sv.cfg, now - c->last_active_ms, waiting) ||
            has_unread_requests(c))
            continue;
        char msg[KAIROS_MSG_MAX];
        peer_msgf(msg, sizeof msg, "closed: no HELLO, request or read of a reply within %u ms "
                  "(register_timeout_ms)", s->sv.cfg->register_timeout_ms);
        if (!c->out_n)
            send_error(c, 0, KAIROS_ERR_BUSY, msg);
        conn_close(c);
        closed++;
    }
    if (closed)
        log_debug("closed %u idle connection(s) that did not register", closed);
}

static void linger_removed_tenant(void *ctx);

int server_init(struct server **out, const struct server_deps *deps)
{
    int rc = 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct server *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    struct loop *loop = deps->loop;
    struct tenants *ts = deps->ts;
    const struct config *cfg = deps->cfg;
    const char *socket_path = deps->socket_path;
    s->loop = loop;
    s->sv.ts = ts;
    s->sv.cfg = cfg;
    s->sv.gpu = deps->gpu;
    s->sv.linger = deps->linger;
    s->sv.heirs = deps->heirs;
    s->sv.imports = deps->imports;
    s->sv.mps = deps->mps;
    s->sv.faults = deps->faults;
    s->sv.timeshare = deps->timeshare;
    s->sv.io = &server_io;
    s->sv.owners = &s->owners;
    s->listen_fd = -1;
    membership_init(&s->sv.membership, ts, cfg);
    owners_init(&s->owners, loop, &s->sv);
    char warn[256];
    conn_limits_init(&s->limits, cfg, warn, sizeof warn);
    if (warn[0])
        log_warn("%s", warn);
    if (deps->mps && (rc = client_ends_init(&s->sv.ends, loop))) {
        log_error("cannot keep members' ends waiting for their MPS clients: %s",
                  strerror(-rc));
        goto out;
    }
    if (!(s->tw = loop_add_timer(loop, SERVER_TICK_MS * 1000u, on_tick, s))) {
        rc = -errno;
        log_error("timerfd: %s", strerror(errno));
        goto out;
    }
    if (!(s->cw = loop_add_wakeup(loop, on_compute_changed, s))) {
        rc = -errno;
        log_error("eventfd: %s", strerror(errno));
        goto out;
    }
    if (strlen(socket_path) >= sizeof sa.sun_path) {
        log_error("socket path %s is too long (at most %zu characters)", socket_path,
                  sizeof sa.sun_path - 1);
        rc = -ENAMETOOLONG;
        goto out;
    }
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", socket_path);
    snprintf(s->path, sizeof s->path, "%s", socket_path);
    if ((rc = folders_make_parents(socket_path))) {
        log_error("cannot create the directory of %s: %s", socket_path, strerror(-rc));
        goto out;
    }
    s->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0) {
        rc = -errno;
        log_error("socket: %s", strerror(errno));
        goto out;
    }
    struct stat st;
    if (lstat(socket_path, &st) == 0) {
        int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        bool alive = probe >= 0 && S_ISSOCK(st.st_mode) &&
                     connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
        if (probe >= 0)
            close(probe);
        if (alive) {
            log_error("another kairosd is already listening on %s; stop it first", socket_path);
            rc = -EADDRINUSE;
            goto out;
        }
        if (!S_ISSOCK(st.st_mode)) {
            log_error("%s exists and is not a socket; remove it or choose another 'socket:'",
                      socket_path);
            rc = -EEXIST;
            goto out;
        }
        unlink(socket_path); /* left by a kairosd that died */
    }
    if ((rc = listen_at(s->listen_fd, socket_path))) {
        log_error("cannot listen on %s: %s", socket_path, strerror(-rc));
        goto out;
    }
    s->lw = loop_add(loop, s->listen_fd, EPOLLIN, on_accept, s);
    if (!s->lw) {
        rc = -errno;
        goto out;
    }
    log_info("listening on %s", socket_path);
    size_t known = reattach_window_start(&s->sv.window, socket_path, peer_now_ms());
    if (known)
        log_info("%zu process(es) of before the restart are alive: no memory is granted "
                 "until they reattach (%d ms at most)", known, REATTACH_WINDOW_MS);
out:
    if (rc) {
        if (s->listen_fd >= 0)
            close(s->listen_fd);
        loop_del_close(loop, s->cw);
        client_ends_fini(s->sv.ends);
        membership_fini(&s->sv.membership);
        loop_del_close(loop, s->tw);
        conn_limits_fini(&s->limits);
        free(s);
        return rc;
    }
    linger_set_removed_hook(s->sv.linger, linger_removed_tenant, s);
    *out = s;
    return 0;
}

void server_send_time_policy(void *ctx, const char *tenant, const struct kairos_time_policy *p)
{
    struct server *s = ctx;
    struct peer *next;
    for (struct peer *m = s->sv.peers; m; m = next) {
        next = m->next;
        if (m->member && !strcmp(m->member->tenant->name, tenant) &&
            !send_msg(conn_of(m), KAIROS_MSG_TIME_POLICY, 0, p, sizeof *p))
            conn_close(conn_of(m));
    }
}

void server_fini(struct server *s)
{
    if (!s)
        return;
    s->sv.stopping = true;
    linger_set_removed_hook(s->sv.linger, NULL, NULL);
    s->sv.linger = NULL; /* what the closed connections held is released, not lingered */
    if (s->n_conns)
        log_info("%u connection(s) closed; their processes reattach when kairosd is back",
                 s->n_conns);
    while (s->sv.peers)
        conn_close(conn_of(s->sv.peers));
    owners_fini(&s->owners);
    client_ends_fini(s->sv.ends); /* the SIGTERMs still waiting are sent now */
    loop_del(s->loop, s->lw);
    close(s->listen_fd);
    loop_del_close(s->loop, s->cw);
    loop_del_close(s->loop, s->tw);
    conn_limits_fini(&s->limits);
    unlink(s->path);
    membership_fini(&s->sv.membership);
    reattach_window_fini(&s->sv.window);
    free(s);
}

static void linger_removed_tenant(void *ctx)
{
    struct server *s = ctx;
    compute_changed_later(&s->sv);
}

unsigned server_connections(const struct server *s)
{
    return s ? s->n_conns : 0;
}

void server_watch_owners(struct server *s)
{
    owners_watch_all(&s->owners);
}
