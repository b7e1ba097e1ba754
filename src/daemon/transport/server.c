/* server.c - the socket, the peers and the handling of their requests (see server.h). */
#include "daemon/transport/server.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <linux/sockios.h>
#include <time.h>
#include <unistd.h>

#include "daemon/transport/conn_limits.h"
#include "daemon/memory/credit.h"
#include "daemon/memory/heirs.h"
#include "daemon/memory/imports.h"
#include "daemon/memory/linger.h"
#include "daemon/base/log.h"
#include "daemon/tenants/membership.h"
#include "daemon/base/proc_stat.h"
#include "daemon/transport/proto_check.h"
#include "daemon/memory/reattach.h"
#include "daemon/time/timeshare.h"

#define FORK_TICKETS_AT_HELLO 8 /* fork tickets reserved for a member that asks at HELLO */
#define SERVER_BATCH 32 /* messages handled per wake-up of one peer, for fairness */
#define SERVER_EXIT_ROUNDS 16 /* batches read from a process that exited, at most */
#define SERVER_OUTQ_MAX 64          /* replies waiting for a peer that reads slowly */
#define SERVER_SNDBUF (64 << 10)    /* the kernel's buffer per peer (it doubles it) */
#define SERVER_TICK_MS 200          /* the sweep of idle peers, the end of an accept pause */
#define SERVER_ACCEPT_PAUSE_MS 200  /* out of descriptors: wait before accepting again */
#define SERVER_DROP_UNREAD_MAX 1024 /* records of a closed peer's dropped at most (drop_unread) */

struct conn {
    struct server *srv;
    int fd, pidfd;
    struct loop_watch *w, *pw;
    uint32_t pid, uid, gid;
    char cgroup[MEMBERS_CGROUP_PATH_MAX]; /* when it connected: who administers (config.h) */
    struct ledger_member *member;
    bool registered;          /* a member, or an administrator's request was taken */
    uint64_t reattached_ms;   /* when its HELLO said REATTACH (0: it did not) */
    uint64_t last_active_ms;  /* its last request, or the last reply it took: unregistered
                               * peers idle for register_timeout_ms go (conn_limits_idle) */
    int outq_seen;            /* bytes sent and not yet read by it, at the last sweep */
    unsigned char *out[SERVER_OUTQ_MAX]; /* packed messages the socket could not take */
    size_t out_len[SERVER_OUTQ_MAX];
    unsigned out_head, out_n;
    bool ps_active;           /* a PS listing in progress, one tenant per message */
    bool broken;              /* a message to it could not be sent or queued: closed */
    bool gone;                /* it reads no more (its end is closed): replies are
                               * dropped, what it sent before is still taken */
    uint32_t ps_seq, ps_next_id;
    size_t ps_size;           /* of each PS_REPLY: whole, or the V1 prefix (proto.h) */
    uint32_t events;          /* what is watched now */
    bool wants_tickets;       /* its HELLO asked for fork tickets */
    uint32_t fork_tickets;    /* held: edges reserved for its forks (heirs.h) */
    struct heir_owner ticket_owner; /* whose shares they count in */
    uint64_t start;           /* its start time (/proc), read at HELLO */
    struct conn *prev, *next;
};

struct owner {
    struct server *srv;
    int pidfd;
    struct loop_watch *w;
    char tenant[KAIROS_NAME_MAX];
    uint32_t pid;
    struct owner *next;
};

struct server {
    struct loop *loop;
    struct tenants *ts;
    const struct config *cfg;
    int listen_fd;
    struct loop_watch *lw;
    char path[CONFIG_SOCKET_MAX];
    struct conn *conns;
    unsigned n_conns;
    struct owner *owners;
    time_t last_full_warning;
    bool stopping; /* kairosd is exiting: members keep their holdings for the restart */
    struct timeshare *timeshare; /* compute policies, or NULL */
    struct loop_watch *cw;       /* wake-up: compute_changed_later */
    struct membership membership; /* who joins which tenant (membership.h) */
    struct gpu_backend *gpu;      /* for REATTACH checks, or NULL */
    struct conn_limits limits;
    struct loop_watch *tw;    /* timer: SERVER_TICK_MS */
    bool accept_paused;
    uint64_t accept_resume_ms;
    time_t last_emfile_warning;
    struct linger_set *linger;       /* departed members the GPU still holds memory for */
    struct heirs *heirs;             /* who else holds a process's NVIDIA files, or NULL */
    struct imports *imports;         /* legacy CUDA IPC: shared objects, imports, or NULL */
    struct reattach_window window;   /* after a restart: no grant until members are back */
    struct ratelog handover_refusals; /* FORKED/INHERITED refused: logged once per interval */
};

/* snprintf for messages that may be cut to fit a reply (the cut is acceptable). */
static void msgf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void msgf(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

static int pidfd_open_compat(uint32_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reading while nothing waits to be written; writing (and no reading: the peer's
 * next requests wait in its socket) while something does. */
static void conn_watch(struct conn *c)
{
    uint32_t want = c->out_n || c->ps_active ? EPOLLOUT : EPOLLIN | EPOLLRDHUP;
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
        log_debug("pid %u no longer reads; taking what it sent before", c->pid);
    c->gone = true;
    c->ps_active = false;
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
            log_warn("pid %u: cannot send (%s); disconnecting it", c->pid,
                     n < 0 ? strerror(errno) : "cut short");
            return false;
        }
        free(c->out[i]);
        c->out[i] = NULL;
        c->last_active_ms = now_ms(); /* it reads: a slow listing is not idle */
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
            c->last_active_ms = now_ms();
            return true;
        }
        if (peer_closed(sent)) {
            conn_gone(c);
            return true;
        }
        if (sent >= 0 || (errno != EAGAIN && errno != EINTR)) {
            log_warn("pid %u: cannot send %s (%s); disconnecting it", c->pid,
                     proto_type_name(type), sent < 0 ? strerror(errno) : "cut short");
            return false;
        }
    }
    if (c->out_n == SERVER_OUTQ_MAX) {
        log_warn("pid %u (uid %u): %d replies wait for it to read them; disconnecting it", c->pid,
                 c->uid, SERVER_OUTQ_MAX);
        return false;
    }
    unsigned char *copy = malloc(n);
    if (!copy) {
        log_warn("pid %u: out of memory queueing %s; disconnecting it", c->pid,
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

/* The compute policies of tenants created at run time changed: the scheduler takes
 * them again (and tells the member processes whose policy changed). */
static void compute_changed(struct server *s)
{
    if (s->timeshare)
        timeshare_reconfigure(s->timeshare);
}

/* The same once back in the loop, for a tenant removed while closing a connection:
 * conn_close may run inside server_send_time_policy's walk over the connections,
 * which a reconfiguration (sending, and closing who cannot take it) must not
 * change under its feet. */
static void compute_changed_later(struct server *s)
{
    int rc = s->cw ? loop_wake(s->cw) : -EBADF;
    if (rc)
        log_warn("cannot defer the time-share update (%s); it comes with the next change",
                 strerror(-rc));
}

static void on_compute_changed(void *ctx, int fd, uint32_t events)
{
    eventfd_t n;
    if (eventfd_read(fd, &n) == 0)
        compute_changed(ctx);
}

/* --- credit (credit.h): what it decides, sent --- */

static void credit_reply(void *ctx, void *peer, uint32_t seq, const struct kairos_credit *cr)
{
    (void)ctx;
    struct conn *c = peer;
    if (c && !send_msg(c, KAIROS_MSG_CREDIT, seq, cr, sizeof *cr))
        c->broken = true; /* closed by its handler or the next tick */
}

static void credit_recall(void *ctx, void *peer, unsigned gpu, uint64_t bytes)
{
    (void)ctx;
    struct conn *c = peer;
    struct kairos_credit_recall r = {.gpu = gpu, .bytes = bytes};
    if (c) {
        char a[32];
        log_debug("tenant %s: recalling %s of credit on GPU %u from pid %u",
                  c->member->tenant->name, tenants_size(bytes, a, sizeof a), gpu, c->pid);
        if (!send_msg(c, KAIROS_MSG_CREDIT_RECALL, 0, &r, sizeof r))
            c->broken = true;
    }
}

static void credit_refused(void *ctx, struct ledger_tenant *t, struct ledger_member *m,
                           unsigned gpu, uint64_t need)
{
    (void)ctx;
    uint64_t quiet;
    if (!ratelog_event(&t->refusal_log, now_ms(), RATELOG_INTERVAL_MS, &quiet))
        return;
    char a[32], b[32], c[32], d[32];
    log_about_info(t->name, m->pid, (int)gpu,
                   "tenant %s: refused %s on GPU %u for pid %u (holds %s of %s, %s more "
                   "reserved as its processes' unused credit); %llu "
                   "refusal(s) on this GPU so far, %llu of the tenant's not logged since its "
                   "last such line (one every %d s)",
                   t->name, tenants_size(need, a, sizeof a), gpu, m->pid,
                   tenants_size(t->held[gpu], b, sizeof b),
                   tenants_size(t->quota[gpu], c, sizeof c),
                   tenants_size(t->credit[gpu], d, sizeof d),
                   (unsigned long long)t->refusals[gpu], (unsigned long long)quiet,
                   RATELOG_INTERVAL_MS / 1000);
}

static void credit_revoked(void *ctx, struct ledger_tenant *t, struct ledger_member *m,
                           unsigned gpu, uint64_t bytes)
{
    (void)ctx;
    char a[32];
    log_about_warn(t->name, m->pid, (int)gpu,
                   "tenant %s: pid %u did not answer a credit recall within %d ms; it gets "
                   "no credit ahead on GPU %u any more, and its %s of credit there stays "
                   "counted until it says it read this or exits (what waits for room there "
                   "is refused after %d ms more)",
                   t->name, m->pid, CREDIT_RECALL_TIMEOUT_MS, gpu,
                   tenants_size(bytes, a, sizeof a), CREDIT_ACK_TIMEOUT_MS);
    struct conn *c = m->cr.peer;
    struct kairos_credit r = {.gpu = gpu, .flags = KAIROS_CREDIT_REVOKED | KAIROS_CREDIT_EXACT,
                              .held = credit_view_held(t, gpu), .returned = m->held[gpu],
                              .least = credit_chunk(t->quota[gpu]), .quota = t->quota[gpu]};
    if (c && !send_msg(c, KAIROS_MSG_CREDIT, 0, &r, sizeof r))
        c->broken = true;
}

/* ROOM to a shim that remembers a refusal on gpu (credit.h, credit_notify). */
static void credit_room_notice(void *ctx, void *peer, unsigned gpu)
{
    (void)ctx;
    struct conn *c = peer;
    struct kairos_room r = {.gpu = gpu};
    if (c && !send_msg(c, KAIROS_MSG_ROOM, 0, &r, sizeof r))
        c->broken = true;
}

static const struct credit_io credit_io = {
    .reply = credit_reply,
    .recall = credit_recall,
    .refused = credit_refused,
    .revoked = credit_revoked,
    .room = credit_room_notice,
};

/* No grant while the members of before a restart reattach (reattach.h). */
static bool credit_hold(struct server *s)
{
    return reattach_window_holds(&s->window, now_ms());
}

static void serve_credit(struct server *s, struct ledger_tenant *t)
{
    for (unsigned g = 0; g < s->ts->n_gpus; g++)
        credit_serve(&s->ts->ledger, t, g, credit_hold(s), now_ms(), &credit_io);
}

/* Kept charges of freed shared objects were released (imports.h): the room they
 * held back may answer allocations waiting for credit. */
static void after_kept_released(struct server *s, size_t kept_before)
{
    if (!s->imports || s->imports->n_kept >= kept_before)
        return;
    for (size_t i = 0; i < s->ts->ledger.n_tenants; i++)
        serve_credit(s, s->ts->ledger.tenants[i]);
}

static bool push_fork_tickets(struct conn *c, uint32_t want, uint32_t spent);

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
    if (c->fork_tickets && s->heirs) /* reserved, never spent: back to the shares */
        heirs_unreserve(s->heirs, &c->ticket_owner, c->fork_tickets);
    c->fork_tickets = 0;
    if (c->member && s->stopping) {
        ledger_leave(&s->ts->ledger, c->member, NULL); /* in memory only; nothing logged */
        c->member = NULL;
    }
    struct ledger_tenant *left_from = c->member ? c->member->tenant : NULL;
    if (c->member)
        c->member->cr.peer = NULL;
    if (c->member && s->imports && !s->stopping) {
        size_t kept_before = s->imports->n_kept;
        imports_member_left(s->imports, c->pid); /* its imports end with it (imports.h) */
        after_kept_released(s, kept_before);
    }
    if (c->member && linger_keep(s->linger, c->member, c->pid)) {
        credit_fold(c->member); /* what it took after its last report stays counted */
        c->member = NULL; /* its charge stays until the GPU frees its memory */
    }
    if (c->member)
        credit_drop(c->member); /* unused credit is nobody's memory: back to the tenant */
    if (c->member) {
        uint64_t freed[KAIROS_MAX_GPUS];
        struct ledger_tenant *t = ledger_leave(&s->ts->ledger, c->member, freed);
        char line[512], a[32];
        size_t len = 0;
        for (unsigned g = 0; g < s->ts->n_gpus; g++)
            if (freed[g] && len < sizeof line) {
                int n = snprintf(line + len, sizeof line - len, ", %s on GPU %u",
                                 tenants_size(freed[g], a, sizeof a), g);
                len += n > 0 ? (size_t)n : 0;
            }
        log_about_info(t->name, c->pid, -1, "tenant %s: pid %u left%s%s", t->name, c->pid,
                        len ? "; released" : "",
                 len ? line + 1 : "");
        c->member = NULL;
        serve_credit(s, t); /* what waited for room may fit now */
        if (tenants_after_leave(s->ts, t))
            compute_changed_later(s);
    } else if (left_from && !s->stopping) {
        serve_credit(s, left_from);
    }
    if (left_from && !s->stopping)
        reattach_window_record(&s->window, &s->ts->ledger);
    loop_del(s->loop, c->w);
    loop_del(s->loop, c->pw);
    for (unsigned i = 0; i < c->out_n; i++)
        free(c->out[(c->out_head + i) % SERVER_OUTQ_MAX]);
    conn_limits_remove(&s->limits, c->uid);
    drop_unread(c->fd);
    close(c->fd);
    if (c->pidfd >= 0)
        close(c->pidfd);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_conns--;
    free(c);
}

/* --- owners of ephemeral tenants --- */

static void owner_free(struct server *s, struct owner *o)
{
    for (struct owner **p = &s->owners; *p; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            break;
        }
    loop_del(s->loop, o->w);
    close(o->pidfd);
    free(o);
}

static void owner_gone(struct server *s, const char *tenant, uint32_t pid)
{
    struct ledger_tenant *t = ledger_tenant_find(&s->ts->ledger, tenant);
    if (t && t->owner_pid == pid) {
        t->owner_alive = false;
        if (tenants_after_leave(s->ts, t))
            compute_changed_later(s);
    }
}

static void on_owner_exit(void *ctx, int fd, uint32_t events)
{
    struct owner *o = ctx;
    struct server *s = o->srv;
    char tenant[KAIROS_NAME_MAX];
    uint32_t pid = o->pid;
    memcpy(tenant, o->tenant, sizeof tenant);
    owner_free(s, o);
    owner_gone(s, tenant, pid);
}

static void watch_owner(struct server *s, struct ledger_tenant *t)
{
    int fd = pidfd_open_compat(t->owner_pid);
    if (fd < 0) {
        /* gone already, or no pidfd: fall back to the members' departures */
        t->owner_alive = errno == ENOSYS;
        return;
    }
    struct owner *o = calloc(1, sizeof *o);
    if (!o) {
        close(fd);
        t->owner_alive = false;
        return;
    }
    o->srv = s;
    o->pidfd = fd;
    o->pid = t->owner_pid;
    memcpy(o->tenant, t->name, sizeof o->tenant);
    o->w = loop_add(s->loop, fd, EPOLLIN, on_owner_exit, o);
    if (!o->w) {
        close(fd);
        free(o);
        t->owner_alive = false;
        return;
    }
    t->owner_alive = true;
    o->next = s->owners;
    s->owners = o;
}

void server_watch_owners(struct server *s)
{
    for (size_t i = 0; i < s->ts->ledger.n_tenants; i++) {
        struct ledger_tenant *t = s->ts->ledger.tenants[i];
        if ((t->flags & LEDGER_TENANT_EPHEMERAL) && t->owner_pid)
            watch_owner(s, t);
    }
}

static void on_pidfd(void *ctx, int fd, uint32_t events);

/* --- requests --- */

static void describe_held(const struct ledger_tenant *t, unsigned gpu, char *out, size_t cap)
{
    char a[32], b[32];
    snprintf(out, cap, "holds %s of %s", tenants_size(t->held[gpu], a, sizeof a),
             tenants_size(t->quota[gpu], b, sizeof b));
}

static bool on_hello(struct conn *c, const struct proto_request *r)
{
    struct server *s = c->srv;
    const struct kairos_hello *h = &r->body.hello;
    char msg[KAIROS_MSG_MAX];
    if (c->member) {
        snprintf(msg, sizeof msg, "this connection is already registered as tenant %s",
                 c->member->tenant->name);
        return send_error(c, r->seq, KAIROS_ERR_INVALID, msg);
    }
    struct peer_cred peer = {.pid = c->pid, .uid = c->uid, .gid = c->gid, .cgroup = c->cgroup};
    uint32_t code = 0;
    struct ledger_tenant *t = membership_hello(&s->membership, &peer, h->tenant, &code, msg,
                                               sizeof msg);
    if (!t) /* kairosd decides the tenant (membership.h) */
        return send_error(c, r->seq, code, msg);
    bool reattach = h->flags & KAIROS_HELLO_REATTACH;
    /* a tenant the configuration removed takes no one new; its members of before a
     * restart come back while the reattach window holds */
    if (!(reattach && reattach_window_holds(&s->window, now_ms())) &&
        !tenants_joinable(t, s->cfg, msg, sizeof msg)) {
        log_about_warn(t->name, c->pid, -1, "pid %u (uid %u): refused: %s", c->pid, c->uid, msg);
        return send_error(c, r->seq, KAIROS_ERR_NO_TENANT, msg);
    }
    if (reattach) {
        struct ledger_member *other = ledger_find_pid(&s->ts->ledger, c->pid);
        if (other) {
            snprintf(msg, sizeof msg, "pid %u is already registered (tenant %s); a process "
                     "reattaches once, with one connection", c->pid, other->tenant->name);
            log_warn("pid %u: refused a second REATTACH", c->pid);
            return send_error(c, r->seq, KAIROS_ERR_INVALID, msg);
        }
    }
    uint64_t counted[KAIROS_MAX_GPUS] = {0};
    char bounded[KAIROS_MAX_GPUS][96];
    for (unsigned g = 0; reattach && g < s->ts->n_gpus; g++)
        counted[g] = reattach_bound(t, g, h->held[g], c->pid, s->gpu, bounded[g],
                                    sizeof bounded[g]);
    int rc = ledger_join(&s->ts->ledger, t, c->pid, reattach ? counted : NULL, &c->member);
    if (rc)
        return send_error(c, r->seq, KAIROS_ERR_INVALID, "kairosd is out of memory");
    c->member->cr.peer = c;
    reattach_window_joined(&s->window, c->pid, now_ms());
    reattach_window_record(&s->window, &s->ts->ledger);
    if (reattach_window_ended(&s->window, now_ms())) /* the last one is back */
        for (size_t i = 0; i < s->ts->ledger.n_tenants; i++)
            serve_credit(s, s->ts->ledger.tenants[i]);
    if (reattach) {
        char line[128];
        for (unsigned g = 0; g < s->ts->n_gpus; g++) {
            if (!h->held[g])
                continue;
            char a[32], b[32];
            if (bounded[g][0])
                log_warn("tenant %s: pid %u claimed %s on GPU %u when reattaching; %s counted "
                         "(%s)", t->name, c->pid, tenants_size(h->held[g], a, sizeof a), g,
                         tenants_size(counted[g], b, sizeof b), bounded[g]);
            describe_held(t, g, line, sizeof line);
            if (t->held[g] > t->quota[g])
                log_about_warn(t->name, c->pid, (int)g,
                         "tenant %s: pid %u reattached with %s on GPU %u; the tenant now %s, "
                         "over its quota: its allocations there are refused until it frees "
                         "memory", t->name, c->pid, tenants_size(counted[g], a, sizeof a), g,
                         line);
            else
                log_about_info(t->name, c->pid, (int)g,
                         "tenant %s: pid %u reattached with %s on GPU %u (tenant %s)", t->name,
                         c->pid, tenants_size(counted[g], a, sizeof a), g, line);
        }
    }
    if (reattach)
        c->reattached_ms = now_ms(); /* it tells its shares and imports again (imports.h) */
    if (reattach && s->heirs) { /* the children it forked before the restart */
        struct heir_owner o = {.tenant = t->id, .uid = c->uid};
        heirs_adopt_children(s->heirs, c->pid, &o);
    }
    log_about_info(t->name, c->pid, -1, "tenant %s: pid %u (uid %u) joined%s; %u process(es)",
                    t->name, c->pid, c->uid,
             reattach ? " again after a kairosd restart" : "", t->n_members);
    if (c->pidfd < 0) {
        c->pidfd = pidfd_open_compat(c->pid);
        if (c->pidfd >= 0)
            c->pw = loop_add(s->loop, c->pidfd, EPOLLIN, on_pidfd, c);
    }
    struct kairos_welcome w = {.tenant_id = t->id, .n_gpus = s->ts->n_gpus};
    for (unsigned g = 0; g < s->ts->n_gpus; g++)
        w.quota[g] = t->quota[g];
    if (!send_msg(c, KAIROS_MSG_WELCOME, r->seq, &w, sizeof w))
        return false;
    if ((r->body.hello.flags & KAIROS_HELLO_FORK_TICKETS) && s->heirs) {
        uint32_t ppid;
        c->wants_tickets = true;
        c->ticket_owner = (struct heir_owner){.tenant = t->id, .uid = c->uid};
        if (proc_stat_read(s->heirs->proc, c->pid, &ppid, &c->start) != 0)
            c->start = 0;
        if (!push_fork_tickets(c, FORK_TICKETS_AT_HELLO, 0))
            return false;
    }
    for (unsigned g = 0; g < s->ts->n_gpus; g++) { /* the time policies in force */
        struct kairos_time_policy p;
        if (timeshare_policy(s->timeshare, t->name, g, &p) &&
            !send_msg(c, KAIROS_MSG_TIME_POLICY, 0, &p, sizeof p))
            return false;
    }
    return true;
}

/* A managed range (cudaMallocManaged) in a tenant whose policy refuses it: the
 * shim fails the allocation and says what to do; logged once per interval. */
static bool refuse_managed(struct conn *c, const struct proto_request *r)
{
    const struct kairos_charge *ch = &r->body.charge;
    struct ledger_tenant *t = c->member->tenant;
    struct kairos_grant no = {.granted = 0, .reason = KAIROS_GRANT_MANAGED_REFUSED,
                              .quota = ch->gpu < KAIROS_MAX_GPUS ? t->quota[ch->gpu] : 0,
                              .held = ch->gpu < KAIROS_MAX_GPUS ? t->held[ch->gpu] : 0};
    uint64_t quiet;
    char a[32];
    if (ratelog_event(&t->refusal_log, now_ms(), RATELOG_INTERVAL_MS, &quiet))
        log_about_info(t->name, c->pid, (int)ch->gpu,
                       "tenant %s: refused managed memory (%s, cudaMallocManaged) on GPU %u for "
                       "pid %u: its policy is managed: refuse (set managed: charge for it to "
                       "allow managed memory, charged in full); %llu of the tenant's refusals "
                       "not logged since its last such line",
                       t->name, tenants_size(ch->bytes, a, sizeof a), ch->gpu, c->pid,
                       (unsigned long long)quiet);
    return send_msg(c, KAIROS_MSG_GRANT, r->seq, &no, sizeof no);
}

static bool on_charge(struct conn *c, const struct proto_request *r)
{
    struct server *s = c->srv;
    const struct kairos_charge *ch = &r->body.charge;
    char msg[KAIROS_MSG_MAX];
    if (!c->member)
        return send_error(c, r->seq, KAIROS_ERR_NOT_REGISTERED,
                          "send HELLO with your tenant's name before CHARGE");
    if (ch->bytes == 0 && ch->gpu < s->ts->n_gpus) { /* a query: what is held, what may be */
        const struct ledger_tenant *qt = c->member->tenant;
        struct kairos_grant q = {.granted = 1, .quota = qt->quota[ch->gpu],
                                 .held = qt->held[ch->gpu]};
        return send_msg(c, KAIROS_MSG_GRANT, r->seq, &q, sizeof q);
    }
    if (ch->gpu < KAIROS_MAX_GPUS)
        c->member->tenant->requests[ch->gpu]++;
    if ((ch->flags & KAIROS_CHARGE_MANAGED) && !c->member->tenant->managed_charge)
        return refuse_managed(c, r);
    if (credit_hold(s))
        return send_error(c, r->seq, KAIROS_ERR_BUSY,
                          "kairosd restarted and waits for its processes to reattach before it "
                          "grants memory (2 s at most); ask again");
    struct ledger_grant g;
    int rc = ledger_charge(&s->ts->ledger, c->member, ch->gpu, ch->bytes, ch->token, &g);
    if (rc == -EINVAL) {
        snprintf(msg, sizeof msg, "GPU %u does not exist on this node (it has %u)", ch->gpu,
                 s->ts->n_gpus);
        return send_error(c, r->seq, KAIROS_ERR_INVALID, msg);
    }
    if (rc) {
        snprintf(msg, sizeof msg, "%s", rc == -ENOSPC ? "too many CHARGEs awaiting their COMMIT "
                                                        "(send COMMIT after each allocation)"
                                                      : "kairosd is out of memory");
        return send_error(c, r->seq, KAIROS_ERR_INVALID, msg);
    }
    /* a managed range comes from a shim with credit: its reports count it from now
     * on, as held, and no COMMIT follows (proto.h) */
    if (g.granted && (ch->flags & KAIROS_CHARGE_MANAGED))
        ledger_commit(&s->ts->ledger, c->member, ch->gpu, ch->token, true, ch->bytes, NULL);
    struct ledger_tenant *t = c->member->tenant;
    char a[32], line[128];
    if (!g.granted) {
        uint64_t quiet;
        if (ratelog_event(&t->refusal_log, now_ms(), RATELOG_INTERVAL_MS, &quiet)) {
            describe_held(t, ch->gpu, line, sizeof line);
            log_about_info(t->name, c->pid, (int)ch->gpu,
                     "tenant %s: refused %s on GPU %u for pid %u (%s); %llu refusal(s) on "
                     "this GPU so far, %llu of the tenant's not logged since its last such "
                     "line (one every %d s)",
                     t->name, tenants_size(ch->bytes, a, sizeof a), ch->gpu, c->pid, line,
                     (unsigned long long)t->refusals[ch->gpu], (unsigned long long)quiet,
                     RATELOG_INTERVAL_MS / 1000);
        }
    } else if (log_current_level >= LOG_LEVEL_DEBUG) {
        describe_held(t, ch->gpu, line, sizeof line);
        log_debug("tenant %s: granted %s on GPU %u to pid %u (%s)", t->name,
                  tenants_size(ch->bytes, a, sizeof a), ch->gpu, c->pid, line);
    }
    struct kairos_grant reply = {.granted = g.granted, .quota = g.quota, .held = g.held};
    return send_msg(c, KAIROS_MSG_GRANT, r->seq, &reply, sizeof reply);
}

/* A member claimed more than kairosd granted it (what = the message and field, claim
 * what it said; beyond: what was not counted, issue 25, item 5): counted per tenant
 * and GPU (kairos_tenant_claims_beyond_grant_total), logged once per interval. */
static void claim_beyond(struct conn *c, unsigned gpu, const char *what, uint64_t claim,
                         uint64_t beyond)
{
    struct ledger_tenant *t = c->member->tenant;
    uint64_t quiet;
    char a[32], b[32];
    t->lies[gpu]++;
    if (!ratelog_event(&t->lie_log, now_ms(), RATELOG_INTERVAL_MS, &quiet))
        return;
    log_about_warn(t->name, c->pid, (int)gpu,
                   "tenant %s: pid %u (uid %u) claimed %s in a %s on GPU %u, %s beyond what "
                   "kairosd granted it and the tenant's quota leaves: not counted (a shim that "
                   "lies, or memory taken past it, which the audit compares with the grants); "
                   "%llu such claim(s) in the tenant on this GPU, %llu not logged since the "
                   "last such line", t->name, c->pid, c->uid, tenants_size(claim, a, sizeof a),
                   what, gpu, tenants_size(beyond, b, sizeof b),
                   (unsigned long long)t->lies[gpu], (unsigned long long)quiet);
}

static bool on_commit(struct conn *c, const struct proto_request *r)
{
    const struct kairos_commit *m = &r->body.commit;
    uint64_t beyond = 0;
    int rc = ledger_commit(&c->srv->ts->ledger, c->member, m->gpu, m->token, m->ok, m->actual,
                           &beyond);
    if (beyond)
        claim_beyond(c, m->gpu, "COMMIT's actual size", m->actual, beyond);
    if (rc == -ENOENT)
        log_warn("tenant %s: pid %u committed token %llu on GPU %u that no CHARGE reserved; "
                 "ignored", c->member->tenant->name, c->pid, (unsigned long long)m->token, m->gpu);
    else if (rc == -EINVAL)
        log_warn("tenant %s: pid %u committed on GPU %u, which does not exist; ignored",
                 c->member->tenant->name, c->pid, m->gpu);
    return true;
}

static bool on_release(struct conn *c, const struct proto_request *r)
{
    const struct kairos_release *m = &r->body.release;
    uint64_t done = 0;
    int rc = ledger_release(&c->srv->ts->ledger, c->member, m->gpu, m->bytes, &done);
    char a[32], b[32];
    if (rc == -ERANGE)
        log_warn("tenant %s: pid %u released %s on GPU %u but held only %s; counted as %s",
                 c->member->tenant->name, c->pid, tenants_size(m->bytes, a, sizeof a), m->gpu,
                 tenants_size(done, b, sizeof b), b);
    else if (rc)
        log_warn("tenant %s: pid %u released on GPU %u, which does not exist; ignored",
                 c->member->tenant->name, c->pid, m->gpu);
    else
        credit_notify(&c->srv->ts->ledger, c->member->tenant, m->gpu, &credit_io);
    return true;
}

/* CREDIT: a report taken at once; a request answered now or when room comes. */
static bool on_credit(struct conn *c, const struct proto_request *r)
{
    struct server *s = c->srv;
    const struct kairos_credit *m = &r->body.credit;
    if (m->gpu >= s->ts->n_gpus) {
        char msg[KAIROS_MSG_MAX];
        snprintf(msg, sizeof msg, "GPU %u does not exist on this node (it has %u)", m->gpu,
                 s->ts->n_gpus);
        return send_error(c, r->seq, KAIROS_ERR_INVALID, msg);
    }
    struct ledger_tenant *t = c->member->tenant;
    if (m->need || (m->flags & KAIROS_CREDIT_AHEAD))
        t->requests[m->gpu]++;
    uint64_t beyond = credit_take_report(c->member, m->gpu, m);
    if (beyond)
        claim_beyond(c, m->gpu, "CREDIT report's held", m->held, beyond);
    credit_request(&s->ts->ledger, c->member, m->gpu, r->seq, m, credit_hold(s), now_ms(),
                   &credit_io);
    credit_serve(&s->ts->ledger, t, m->gpu, credit_hold(s), now_ms(), &credit_io);
    return !c->broken;
}

/* A member's runnable time on one GPU: the scheduler's demand (timeshare.c). */
static bool on_runnable(struct conn *c, const struct proto_request *r)
{
    if (c->srv->timeshare)
        timeshare_runnable(c->srv->timeshare, c->member->tenant->name, c->pid, &r->body.runnable);
    return true;
}

/* Reserves up to want tickets for c in all, and pushes how many it holds
 * (FORK_TICKETS, spent echoing its ask). */
static bool push_fork_tickets(struct conn *c, uint32_t want, uint32_t spent)
{
    if (want > c->fork_tickets)
        c->fork_tickets += heirs_reserve(c->srv->heirs, &c->ticket_owner,
                                         want - c->fork_tickets, c->fork_tickets);
    struct kairos_fork_tickets m = {.want = want, .held = c->fork_tickets, .spent = spent};
    return send_msg(c, KAIROS_MSG_FORK_TICKETS, 0, &m, sizeof m);
}

static bool on_fork_tickets(struct conn *c, const struct proto_request *r)
{
    if (!c->member || !c->wants_tickets)
        return send_error(c, r->seq, KAIROS_ERR_NOT_REGISTERED,
                          "only a tenant's member whose HELLO asked for fork tickets "
                          "(KAIROS_HELLO_FORK_TICKETS) asks for more");
    return push_fork_tickets(c, r->body.fork_tickets.want, r->body.fork_tickets.spent);
}

/* FORKED with TICKET: no reply, whatever happens (the shim did not wait); a ticket
 * spent, an edge made as far as /proc can check the child. */
static bool on_forked_ticket(struct conn *c, const struct proto_request *r, char *why,
                             size_t why_len)
{
    struct heir_owner o = {.tenant = c->member->tenant->id, .uid = c->uid};
    bool had = c->fork_tickets > 0;
    if (had) {
        c->fork_tickets--;
        heirs_unreserve(c->srv->heirs, &c->ticket_owner, 1);
    }
    int code = heirs_forked_ticket(c->srv->heirs, c->pid, c->start, &o, &r->body.forked, why,
                                   why_len);
    uint64_t quiet;
    if ((code || !had) &&
        ratelog_event(&c->srv->handover_refusals, now_ms(), RATELOG_INTERVAL_MS, &quiet))
        log_warn("tenant %s: pid %u (uid %u): FORKED of pid %u with a ticket%s: %s; %llu such "
                 "refusals not logged since the last such line", c->member->tenant->name,
                 c->pid, c->uid, r->body.forked.child_pid, had ? "" : " it did not hold",
                 code ? why : "followed anyway", (unsigned long long)quiet);
    if (!code)
        log_debug("pid %u forked pid %u (a ticket spent), which shares its NVIDIA files",
                  c->pid, r->body.forked.child_pid);
    return true;
}

/* FORKED, INHERITED: another process holds the NVIDIA files of the sender (or the
 * sender holds another's), as /proc confirms (heirs.h). Only from a tenant's member:
 * an edge is its tenant's (and uid's), counted against their share of the table. */
static bool on_handover(struct conn *c, const struct proto_request *r)
{
    char why[KAIROS_MSG_MAX];
    if (!c->member) {
        uint64_t quiet;
        if (ratelog_event(&c->srv->handover_refusals, now_ms(), RATELOG_INTERVAL_MS, &quiet))
            log_warn("pid %u (uid %u): %s refused: not a tenant's member; %llu such refusals "
                     "not logged since the last such line", c->pid, c->uid,
                     proto_type_name(r->type), (unsigned long long)quiet);
        return send_error(c, r->seq, KAIROS_ERR_NOT_REGISTERED,
                          "this process is not a member of any tenant: only a tenant's member "
                          "reports hand-overs of NVIDIA files (send HELLO with your tenant's "
                          "name first)");
    }
    if (!c->srv->heirs)
        return send_error(c, r->seq, KAIROS_ERR_INVALID,
                          "this kairosd does not follow NVIDIA files across processes");
    struct heir_owner o = {.tenant = c->member->tenant->id, .uid = c->uid};
    bool forked = r->type == KAIROS_MSG_FORKED;
    if (forked && (r->body.forked.flags & KAIROS_FORKED_TICKET))
        return on_forked_ticket(c, r, why, sizeof why);
    int code = forked ? heirs_forked(c->srv->heirs, c->pid, &o, &r->body.forked, why, sizeof why)
                      : heirs_inherited(c->srv->heirs, c->pid, &o, &r->body.inherited, why,
                                        sizeof why);
    if (code) {
        uint64_t quiet;
        if (ratelog_event(&c->srv->handover_refusals, now_ms(), RATELOG_INTERVAL_MS, &quiet))
            log_warn("tenant %s: pid %u (uid %u): %s refused: %s; %llu such refusals not "
                     "logged since the last such line", c->member->tenant->name, c->pid, c->uid,
                     proto_type_name(r->type), why, (unsigned long long)quiet);
        return send_error(c, r->seq, (uint32_t)code, why);
    }
    if (forked) /* debug: a tenant may fork often; what lingers is logged at info */
        log_debug("pid %u forked pid %u, which shares its NVIDIA files", c->pid,
                  r->body.forked.child_pid);
    else
        log_info("pid %u holds NVIDIA files of pid %u (%s)", c->pid, r->body.inherited.from_pid,
                 r->body.inherited.flags & KAIROS_INHERITED_EXEC ? "inherited at exec"
                                                                 : "received");
    return send_msg(c, KAIROS_MSG_OK, r->seq, NULL, 0);
}

/* A member that reattached after a restart reports its imports again, maybe before
 * their exporters report their shares: imports.h keeps those a while. */
static bool just_reattached(const struct conn *c)
{
    return c->reattached_ms && now_ms() - c->reattached_ms < IMPORTS_PROVISIONAL_MS;
}

/* SHARED with KAIROS_SHARED_FREED: no reply (the freeing thread does not wait). */
static bool on_shared_freed(struct conn *c, const struct kairos_shared *m)
{
    char a[32];
    struct kairos_shared bounded = *m;
    if (m->gpu < KAIROS_MAX_GPUS) { /* it freed at most what it was granted (issue 25, 5) */
        const struct ledger_member *me = c->member;
        uint64_t granted = me->held[m->gpu] + me->credit[m->gpu];
        bounded.bytes = m->bytes < granted ? m->bytes : granted;
        if (bounded.bytes < m->bytes)
            claim_beyond(c, m->gpu, "SHARED FREED's bytes", m->bytes, m->bytes - bounded.bytes);
    }
    m = &bounded;
    size_t kept_before = c->srv->imports->n_kept;
    bool kept = imports_freed(c->srv->imports, c->pid, c->member->tenant, m);
    after_kept_released(c->srv, kept_before + kept); /* it may have ended others */
    if (kept)
        log_info("tenant %s: pid %u freed object 0x%x of client 0x%x while a CUDA IPC import "
                 "of it lives: its %s on GPU %u stay charged until the last import ends",
                 c->member->tenant->name, c->pid, m->h_object, m->h_client,
                 tenants_size(m->bytes, a, sizeof a), m->gpu);
    else
        log_debug("pid %u freed shared object 0x%x of client 0x%x: no import holds it",
                  c->pid, m->h_object, m->h_client);
    return true;
}

/* Member c as imports.h weighs its claims: its tenant, and what the ledger charges
 * it per GPU (what it may share). */
static void ipc_sender_of(const struct conn *c, struct ipc_sender *who)
{
    *who = (struct ipc_sender){.pid = c->pid, .uid = c->uid, .tenant = c->member->tenant->id};
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        uint64_t held = c->member->held[g], credit = c->member->credit[g];
        who->charged[g] = held > UINT64_MAX - credit ? UINT64_MAX : held + credit;
    }
}

/* SHARED, IMPORTED: legacy CUDA IPC (imports.h). Only members: a charge kept for
 * an import is a tenant's, and the claims are checked against members' reports. */
static bool on_ipc(struct conn *c, const struct proto_request *r)
{
    char why[KAIROS_MSG_MAX];
    if (r->type == KAIROS_MSG_SHARED && (r->body.shared.flags & KAIROS_SHARED_FREED)) {
        if (c->member && c->srv->imports)
            return on_shared_freed(c, &r->body.shared);
        log_debug("pid %u: SHARED FREED from no member ignored (it gets no reply)", c->pid);
        return true;
    }
    if (!c->member)
        return send_error(c, r->seq, KAIROS_ERR_NOT_REGISTERED,
                          "send HELLO with your tenant's name first: only a tenant's member "
                          "shares or imports memory");
    if (!c->srv->imports)
        return send_error(c, r->seq, KAIROS_ERR_INVALID,
                          "this kairosd does not follow CUDA IPC imports");
    uint32_t exporter = 0;
    size_t kept_before = c->srv->imports->n_kept;
    bool shared = r->type == KAIROS_MSG_SHARED;
    struct ipc_sender who;
    ipc_sender_of(c, &who);
    int code = shared ? imports_shared(c->srv->imports, &who, &r->body.shared, why, sizeof why)
                      : imports_imported(c->srv->imports, &who, &r->body.imported,
                                         just_reattached(c) ? IMPORTS_PROVISIONAL_MS : 0,
                                         &exporter, why, sizeof why);
    after_kept_released(c->srv, kept_before);
    if (code) {
        log_warn("pid %u (uid %u): %s refused: %s", c->pid, c->uid, proto_type_name(r->type),
                 why);
        return send_error(c, r->seq, (uint32_t)code, why);
    }
    if (shared)
        log_debug("pid %u shared object 0x%x of client 0x%x (scope %u)", c->pid,
                  r->body.shared.h_object, r->body.shared.h_client, r->body.shared.share_type);
    else if (r->body.imported.flags == KAIROS_IMPORT_BEGIN && !exporter)
        log_info("pid %u imports object 0x%x of client 0x%x (CUDA IPC), reported again after "
                 "a restart: kept while its exporter reattaches", c->pid,
                 r->body.imported.h_object_src, r->body.imported.h_client_src);
    else if (r->body.imported.flags == KAIROS_IMPORT_BEGIN)
        log_info("pid %u imports object 0x%x of client 0x%x shared by pid %u (CUDA IPC): "
                 "pid %u stays charged while it lives", c->pid, r->body.imported.h_object_src,
                 r->body.imported.h_client_src, exporter, exporter);
    else
        log_info("pid %u: its import of object 0x%x of client 0x%x ended", c->pid,
                 r->body.imported.h_object_src, r->body.imported.h_client_src);
    return send_msg(c, KAIROS_MSG_OK, r->seq, NULL, 0);
}

static bool admin_only(struct conn *c, const struct proto_request *r)
{
    if (config_is_admin(c->srv->cfg, c->uid, c->cgroup))
        return true;
    char msg[KAIROS_MSG_MAX];
    msgf(msg, sizeof msg, "permission denied: only root or an administrator listed under "
             "'admins:' in %s may create tenants or change quotas (you are uid %u)",
             c->srv->cfg->path[0] ? c->srv->cfg->path : "the configuration", c->uid);
    log_warn("uid %u (pid %u): %s refused: not an administrator", c->uid, c->pid,
             proto_type_name(r->type));
    send_error(c, r->seq, KAIROS_ERR_PERMISSION, msg);
    return false;
}

static bool on_tenant_set(struct conn *c, const struct proto_request *r)
{
    if (!admin_only(c, r))
        return true;
    struct server *s = c->srv;
    const struct kairos_tenant_set *m = &r->body.tenant_set;
    char msg[KAIROS_MSG_MAX];
    bool existed = ledger_tenant_find(&s->ts->ledger, m->tenant) != NULL, changed;
    int code = tenants_set(s->ts, s->cfg, m, c->uid, c->pid, &changed, msg, sizeof msg);
    if (code) {
        log_warn("uid %u (pid %u): TENANT_SET %s refused: %s", c->uid, c->pid, m->tenant, msg);
        return send_error(c, r->seq, (uint32_t)code, msg);
    }
    struct ledger_tenant *t = ledger_tenant_find(&s->ts->ledger, m->tenant);
    if (!existed && t && (t->flags & LEDGER_TENANT_EPHEMERAL) && t->owner_pid)
        watch_owner(s, t);
    if (changed)
        compute_changed(s);
    return send_msg(c, KAIROS_MSG_OK, r->seq, NULL, 0);
}

static bool on_tenant_del(struct conn *c, const struct proto_request *r)
{
    if (!admin_only(c, r))
        return true;
    char msg[KAIROS_MSG_MAX];
    int code = tenants_del(c->srv->ts, r->body.tenant_del.tenant, c->uid, msg, sizeof msg);
    if (code)
        return send_error(c, r->seq, (uint32_t)code, msg);
    membership_tenant_removed(&c->srv->membership, r->body.tenant_del.tenant);
    compute_changed(c->srv); /* its policies, if it had any, are gone */
    return send_msg(c, KAIROS_MSG_OK, r->seq, NULL, 0);
}

/* TENANT_MEMBERS and TENANT_ADMIT: membership.c decides, OK or its refusal. */
static bool on_membership(struct conn *c, const struct proto_request *r)
{
    if (r->type == KAIROS_MSG_TENANT_MEMBERS && !admin_only(c, r))
        return true;
    struct peer_cred p = {.pid = c->pid, .uid = c->uid, .gid = c->gid, .cgroup = c->cgroup};
    char msg[KAIROS_MSG_MAX];
    int code = r->type == KAIROS_MSG_TENANT_MEMBERS
                   ? membership_set_rules(&c->srv->membership, &p, &r->body.tenant_members, msg,
                                          sizeof msg)
                   : membership_admit(&c->srv->membership, &p, &r->body.tenant_admit, msg,
                                      sizeof msg);
    if (code)
        return send_error(c, r->seq, (uint32_t)code, msg);
    return send_msg(c, KAIROS_MSG_OK, r->seq, NULL, 0);
}

/* The first tenant whose id is at least id (ids grow in the ledger's order). */
static size_t tenant_from(const struct ledger *l, uint32_t id)
{
    size_t lo = 0, hi = l->n_tenants;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->tenants[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* One tenant's reply; its processes' pids only for administrators and for the
 * asker's own uid (others learn the count, not who). */
static void ps_fill(struct server *s, const struct ledger_tenant *t, struct kairos_ps_reply *p,
                    bool admin, uint32_t uid)
{
    const struct ledger *l = &s->ts->ledger;
    memcpy(p->tenant, t->name, sizeof p->tenant);
    if (t->flags & LEDGER_TENANT_REMOVED)
        p->flags |= KAIROS_PS_REMOVED;
    for (unsigned g = 0; g < l->n_gpus; g++) {
        p->quota[g] = t->quota[g];
        /* with what kairosd keeps charged for an import of memory it freed */
        p->held[g] = t->held[g] + (s->imports ? imports_kept(s->imports, t, g) : 0);
        p->refusals[g] = t->refusals[g];
    }
    timeshare_ps(s->timeshare, t->name, l->n_gpus, p);
    for (const struct conn *m = s->conns; m; m = m->next)
        if (m->member && m->member->tenant == t && (admin || m->uid == uid)) {
            if (p->n_pids < KAIROS_PS_MAX_PIDS)
                p->pids[p->n_pids] = m->pid;
            p->n_pids++;
        }
}

/* Sends the listing's next replies while the socket takes them, one tenant each,
 * from where it stopped (tenants added or removed meanwhile are seen or not, none
 * twice); false when the peer must be disconnected. */
static bool ps_pump(struct conn *c)
{
    struct server *s = c->srv;
    const struct ledger *l = &s->ts->ledger;
    bool admin = config_is_admin(s->cfg, c->uid, c->cgroup);
    while (c->ps_active && !c->out_n) {
        size_t i = tenant_from(l, c->ps_next_id);
        struct kairos_ps_reply p = {.n_gpus = l->n_gpus};
        if (i + 1 >= l->n_tenants)
            p.flags = KAIROS_PS_LAST;
        if (i < l->n_tenants) {
            ps_fill(s, l->tenants[i], &p, admin, c->uid);
            c->ps_next_id = l->tenants[i]->id + 1;
        }
        if (c->ps_size < sizeof p) /* the reply of before: no hold figures follow */
            for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
                p.compute_flags[g] &= ~KAIROS_PS_COMPUTE_HOLDS;
        c->ps_active = !(p.flags & KAIROS_PS_LAST);
        if (!send_msg(c, KAIROS_MSG_PS_REPLY, c->ps_seq, &p, c->ps_size))
            return false;
    }
    conn_watch(c);
    return true;
}

static bool on_ps(struct conn *c, const struct proto_request *r)
{
    c->ps_active = true;
    c->ps_seq = r->seq;
    /* a kairos of before (no body: flags 0) reads replies of the size it knows */
    c->ps_size = r->body.ps.flags & KAIROS_PS_HOLDS ? sizeof(struct kairos_ps_reply)
                                                   : KAIROS_PS_REPLY_SIZE_V1;
    c->ps_next_id = 0;
    return ps_pump(c);
}

/* Handles one datagram; false when the peer must be disconnected. */
static bool handle(struct conn *c, const unsigned char *buf, size_t len)
{
    struct proto_request r;
    char why[KAIROS_MSG_MAX];
    int code = proto_check(buf, len, &r, why, sizeof why);
    if (code) {
        log_warn("pid %u (uid %u): malformed message: %s; disconnecting it", c->pid, c->uid, why);
        send_error(c, r.seq, (uint32_t)code, why);
        return false;
    }
    switch (r.type) {
    case KAIROS_MSG_HELLO:
        return on_hello(c, &r);
    case KAIROS_MSG_CHARGE:
        return on_charge(c, &r);
    case KAIROS_MSG_COMMIT:
    case KAIROS_MSG_RELEASE:
    case KAIROS_MSG_RUNNABLE:
    case KAIROS_MSG_CREDIT:
        if (!c->member) {
            log_warn("pid %u: %s before HELLO; disconnecting it", c->pid,
                     proto_type_name(r.type));
            send_error(c, r.seq, KAIROS_ERR_NOT_REGISTERED,
                       "send HELLO with your tenant's name first");
            return false;
        }
        if (r.type == KAIROS_MSG_RUNNABLE)
            return on_runnable(c, &r);
        if (r.type == KAIROS_MSG_CREDIT)
            return on_credit(c, &r);
        return r.type == KAIROS_MSG_COMMIT ? on_commit(c, &r) : on_release(c, &r);
    case KAIROS_MSG_FORKED:
    case KAIROS_MSG_INHERITED:
        return on_handover(c, &r);
    case KAIROS_MSG_FORK_TICKETS:
        return on_fork_tickets(c, &r);
    case KAIROS_MSG_SHARED:
    case KAIROS_MSG_IMPORTED:
        return on_ipc(c, &r);
    case KAIROS_MSG_TENANT_SET:
    case KAIROS_MSG_TENANT_DEL:
        c->registered |= config_is_admin(c->srv->cfg, c->uid, c->cgroup);
        return r.type == KAIROS_MSG_TENANT_SET ? on_tenant_set(c, &r) : on_tenant_del(c, &r);
    case KAIROS_MSG_PS:
        return on_ps(c, &r);
    case KAIROS_MSG_TENANT_MEMBERS:
    case KAIROS_MSG_TENANT_ADMIT:
        return on_membership(c, &r);
    default:
        /* proto_check accepts requests only */
        fprintf(stderr, "%s:%d: impossible message type %u\n", __FILE__, __LINE__, r.type);
        abort();
    }
}

static void on_conn(void *ctx, int fd, uint32_t events)
{
    struct conn *c = ctx;
    unsigned char buf[PROTO_MSG_MAX];
    if ((events & EPOLLOUT) && (!flush_out(c) || !ps_pump(c))) {
        conn_close(c);
        return;
    }
    if ((events & (EPOLLERR | EPOLLHUP)) && (c->out_n || c->ps_active))
        conn_gone(c); /* gone without reading what it asked for: take what it sent */
    for (int i = 0; i < SERVER_BATCH && !c->out_n && !c->ps_active; i++) {
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
            log_warn("pid %u (uid %u): %s; disconnecting it", c->pid, c->uid, why);
            send_error(c, 0, KAIROS_ERR_PROTOCOL, why);
            conn_close(c);
            return;
        }
        c->last_active_ms = now_ms();
        if (!handle(c, buf, (size_t)n)) {
            conn_close(c);
            return;
        }
    }
    conn_watch(c);
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
        struct conn *still;
        for (still = s->conns; still && still != c; still = still->next)
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
        s->accept_resume_ms = now_ms() + SERVER_ACCEPT_PAUSE_MS;
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
        if (conn_limits_admit(&s->limits, s->cfg, cred.uid, cgroup, why, sizeof why)) {
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
        c->pid = (uint32_t)cred.pid;
        c->uid = cred.uid;
        c->gid = cred.gid;
        memcpy(c->cgroup, cgroup, sizeof c->cgroup);
        c->last_active_ms = now_ms();
        c->events = EPOLLIN | EPOLLRDHUP;
        c->w = loop_add(s->loop, cfd, c->events, on_conn, c);
        if (!c->w) {
            conn_limits_remove(&s->limits, cred.uid);
            close(cfd);
            free(c);
            continue;
        }
        c->next = s->conns;
        if (s->conns)
            s->conns->prev = c;
        s->conns = c;
        s->n_conns++;
        log_debug("pid %u (uid %u) connected", c->pid, c->uid);
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

/* Every SERVER_TICK_MS: closes the peers that neither registered (HELLO, or an
 * administrator's request) nor asked or read anything for register_timeout_ms (or
 * longer while replies wait for them: conn_limits_idle), and ends an accept pause. */
static void on_tick(void *ctx, int fd, uint32_t events)
{
    struct server *s = ctx;
    uint64_t expirations, now = now_ms();
    (void)!read(fd, &expirations, sizeof expirations);
    if (s->accept_paused && now >= s->accept_resume_ms &&
        loop_modify(s->loop, s->lw, EPOLLIN) == 0)
        s->accept_paused = false;
    credit_expire(&s->ts->ledger, credit_hold(s), now, &credit_io);
    /* quota changes, reloads and drained memory: refusals that may fit now */
    credit_notify(&s->ts->ledger, NULL, 0, &credit_io);
    if (s->imports && s->imports->n_kept) { /* an importer's heirs may have gone */
        size_t kept_before = s->imports->n_kept;
        imports_check(s->imports);
        after_kept_released(s, kept_before);
    }
    if (reattach_window_ended(&s->window, now))
        for (size_t i = 0; i < s->ts->ledger.n_tenants; i++)
            serve_credit(s, s->ts->ledger.tenants[i]);
    /* removed tenants whose memory drained (or whose members did not come back) */
    if (!reattach_window_holds(&s->window, now) && tenants_sweep_removed(s->ts))
        compute_changed_later(s);
    unsigned closed = 0;
    struct conn *next;
    for (struct conn *c = s->conns; c; c = next) {
        next = c->next;
        if (c->broken) {
            conn_close(c);
            continue;
        }
        if (c->member || c->registered)
            continue;
        bool waiting = c->out_n || c->ps_active;
        if (waiting)
            note_reading(c, now);
        if (!conn_limits_idle(s->cfg, now - c->last_active_ms, waiting))
            continue;
        char msg[KAIROS_MSG_MAX];
        msgf(msg, sizeof msg, "closed: no HELLO, request or read of a reply within %u ms "
             "(register_timeout_ms)", s->cfg->register_timeout_ms);
        if (!c->out_n)
            send_error(c, 0, KAIROS_ERR_BUSY, msg);
        conn_close(c);
        closed++;
    }
    if (closed)
        log_debug("closed %u idle connection(s) that did not register", closed);
}

static int make_dirs(const char *path)
{
    char dir[CONFIG_SOCKET_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *d = dirname(dir);
    for (char *p = d + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(d, 0755) && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    if (mkdir(d, 0755) && errno != EEXIST)
        return -errno;
    return 0;
}

int server_init(struct server **out, struct loop *loop, struct tenants *ts,
                const struct config *cfg, const char *socket_path)
{
    int rc = 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct server *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->loop = loop;
    s->ts = ts;
    s->cfg = cfg;
    s->listen_fd = -1;
    membership_init(&s->membership, ts, cfg);
    char warn[256];
    conn_limits_init(&s->limits, cfg, warn, sizeof warn);
    if (warn[0])
        log_warn("%s", warn);
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
    if ((rc = make_dirs(socket_path))) {
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
    if (bind(s->listen_fd, (struct sockaddr *)&sa, sizeof sa) || chmod(socket_path, 0666) ||
        listen(s->listen_fd, SOMAXCONN)) {
        rc = -errno;
        log_error("cannot listen on %s: %s", socket_path, strerror(errno));
        goto out;
    }
    s->lw = loop_add(loop, s->listen_fd, EPOLLIN, on_accept, s);
    if (!s->lw) {
        rc = -errno;
        goto out;
    }
    log_info("listening on %s", socket_path);
    size_t known = reattach_window_start(&s->window, socket_path, now_ms());
    if (known)
        log_info("%zu process(es) of before the restart are alive: no memory is granted "
                 "until they reattach (%d ms at most)", known, REATTACH_WINDOW_MS);
out:
    if (rc) {
        if (s->listen_fd >= 0)
            close(s->listen_fd);
        loop_del_close(loop, s->cw);
        membership_fini(&s->membership);
        loop_del_close(loop, s->tw);
        conn_limits_fini(&s->limits);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void server_set_timeshare(struct server *s, struct timeshare *t)
{
    s->timeshare = t;
}

void server_set_gpu(struct server *s, struct gpu_backend *gpu)
{
    s->gpu = gpu;
}

void server_send_time_policy(void *ctx, const char *tenant, const struct kairos_time_policy *p)
{
    struct server *s = ctx;
    struct conn *next;
    for (struct conn *c = s->conns; c; c = next) {
        next = c->next;
        if (c->member && !strcmp(c->member->tenant->name, tenant) &&
            !send_msg(c, KAIROS_MSG_TIME_POLICY, 0, p, sizeof *p))
            conn_close(c);
    }
}

void server_fini(struct server *s)
{
    if (!s)
        return;
    s->stopping = true;
    if (s->n_conns)
        log_info("%u connection(s) closed; their processes reattach when kairosd is back",
                 s->n_conns);
    while (s->conns)
        conn_close(s->conns);
    while (s->owners)
        owner_free(s, s->owners);
    loop_del(s->loop, s->lw);
    close(s->listen_fd);
    loop_del_close(s->loop, s->cw);
    loop_del_close(s->loop, s->tw);
    conn_limits_fini(&s->limits);
    unlink(s->path);
    membership_fini(&s->membership);
    reattach_window_fini(&s->window);
    free(s);
}

static void linger_removed_tenant(void *ctx)
{
    compute_changed_later(ctx);
}

void server_set_heirs(struct server *s, struct heirs *h)
{
    s->heirs = h;
}

void server_set_imports(struct server *s, struct imports *im)
{
    s->imports = im;
}

void server_set_linger(struct server *s, struct linger_set *lg)
{
    s->linger = lg;
    linger_set_removed_hook(lg, linger_removed_tenant, s);
}

unsigned server_connections(const struct server *s)
{
    return s ? s->n_conns : 0;
}
