/* metrics_http.c - /metrics over HTTP with libmicrohttpd, inside kairosd's loop.
 *
 * libmicrohttpd runs in its "external select" mode with epoll: no threads, its
 * epoll descriptor watched by the loop, MHD_run when it is readable, and a timerfd
 * armed with MHD_get_timeout after every run (for its connection timeouts and for
 * work it has pending without a readable descriptor). Every figure a scrape shows
 * is changed by the loop thread alone, without locks, which is why HTTP lives here.
 *
 * The text is not rendered here: a scrape of /metrics is suspended while a forked
 * child renders the daemon's state (metrics_snapshot.h), and resumed with that
 * render, served from its memfd; every scrape waiting at that time gets the same
 * one. So a flood of scrapes costs the loop a fork every METRICS_RENDER_GAP_MS and
 * the bytes it sends, never the formatting of megabytes of text.
 *
 * libmicrohttpd's timeout counts idle time only; the lifetime bound is ours: each
 * connection's socket and start are noted when it starts, and one past its lifetime
 * is shut down (shutdown(2), so libmicrohttpd sees the end and closes it itself). */
#include "daemon/observe/metrics_http.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "daemon/base/log.h"
#include "daemon/observe/metrics_snapshot.h"
#include "daemon/base/ratelog.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* A connection libmicrohttpd serves now: its socket, and when it started. */
struct http_conn {
    int fd;              /* -1: a free slot */
    uint64_t started_ms;
    bool shut;           /* past its lifetime, shut down */
};

/* A scrape of /metrics, from its first call of on_request (*con_cls) to its end. */
struct scrape {
    struct MHD_Connection *c;
    bool waiting;        /* suspended until the render under way ends */
    unsigned generation; /* the render it waits for: the one after this many */
};

struct metrics_http {
    struct loop *loop;
    struct metrics_sources src;
    struct metrics_snapshot *snap;
    struct MHD_Response *latest; /* the last render (NULL: it failed, or none yet) */
    unsigned generation;         /* renders ended so far */
    struct scrape *waiting[METRICS_HTTP_MAX_CONNECTIONS];
    struct MHD_Daemon *mhd;
    struct loop_watch *ew, *tw;
    unsigned port;
    struct ratelog log_limit; /* libmicrohttpd's messages: a flood logs one line per 10 s */
    struct http_conn conns[METRICS_HTTP_MAX_CONNECTIONS];
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* libmicrohttpd's own messages (refused connections at the limits, errors). */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct metrics_http *m = cls;
    char line[256];
    uint64_t quiet;
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = 0;
    if (!ratelog_event(&m->log_limit, now_ms(), RATELOG_INTERVAL_MS, &quiet))
        return;
    if (quiet)
        log_warn("metrics endpoint: %s (and %llu message(s) not logged in the last %d s)", line,
                 (unsigned long long)quiet, RATELOG_INTERVAL_MS / 1000);
    else
        log_warn("metrics endpoint: %s", line);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *body, size_t len,
                             enum MHD_ResponseMemoryMode mode, const char *allow)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            status == MHD_HTTP_OK ? CONTENT_TYPE : "text/plain; charset=utf-8");
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result text_reply(struct MHD_Connection *c, unsigned status, const char *text,
                                  const char *allow)
{
    return reply(c, status, (char *)text, strlen(text), MHD_RESPMEM_PERSISTENT, allow);
}

/* Queues the render a scrape waited for: the latest, or 503 when it failed. */
static enum MHD_Result send_latest(struct metrics_http *m, struct MHD_Connection *c)
{
    if (!m->latest)
        return text_reply(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                          "kairosd: the metrics could not be rendered; see its log\n", NULL);
    return MHD_queue_response(c, MHD_HTTP_OK, m->latest);
}

/* A scrape of /metrics: the first call asks for a render and suspends the
 * connection; the call after its resumption sends that render. */
static enum MHD_Result serve_metrics(struct metrics_http *m, struct MHD_Connection *c,
                                     struct scrape **slot)
{
    struct scrape *sc = *slot;
    if (sc && !sc->waiting && sc->generation != m->generation)
        return send_latest(m, c);
    if (sc)
        return MHD_YES; /* a spurious call while suspended */
    size_t i = 0;
    while (i < METRICS_HTTP_MAX_CONNECTIONS && m->waiting[i])
        i++;
    if (i == METRICS_HTTP_MAX_CONNECTIONS || !(sc = calloc(1, sizeof *sc)))
        return text_reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "kairosd: too busy\n", NULL);
    *sc = (struct scrape){.c = c, .waiting = true, .generation = m->generation};
    *slot = sc;
    m->waiting[i] = sc;
    MHD_suspend_connection(c);
    metrics_snapshot_request(m->snap);
    return MHD_YES;
}

static void run(struct metrics_http *m);

/* A render ended: it becomes the latest, and every scrape waiting is resumed. */
static void on_render_done(void *ctx, int fd, size_t len, int err)
{
    struct metrics_http *m = ctx;
    if (m->latest)
        MHD_destroy_response(m->latest);
    m->latest = fd >= 0 ? MHD_create_response_from_fd(len, fd) : NULL;
    if (fd >= 0 && !m->latest)
        close(fd);
    if (m->latest)
        MHD_add_response_header(m->latest, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
    else
        log_warn("metrics: a render failed (%s)", strerror(err ? -err : ENOMEM));
    m->generation++;
    for (size_t i = 0; i < METRICS_HTTP_MAX_CONNECTIONS; i++) {
        struct scrape *sc = m->waiting[i];
        if (!sc)
            continue;
        m->waiting[i] = NULL;
        sc->waiting = false;
        MHD_resume_connection(sc->c);
    }
    run(m);
}

/* A connection's end: its scrape record goes (a suspended one is never ended). */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    free(*con_cls);
    *con_cls = NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct metrics_http *m = cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
        return text_reply(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                          "kairosd's metrics endpoint answers GET and HEAD only\n", "GET, HEAD");
    if (strcmp(url, "/metrics")) {
        if (!strcmp(url, "/"))
            return text_reply(c, MHD_HTTP_OK, "kairosd: Prometheus metrics at /metrics\n", NULL);
        return text_reply(c, MHD_HTTP_NOT_FOUND,
                          "not found: kairosd serves its metrics at /metrics\n", NULL);
    }
    return serve_metrics(m, c, (struct scrape **)con_cls);
}

/* Notes each connection's socket and start, and forgets it when it closes. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct metrics_http *m = cls;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!info)
        return;
    int fd = info->connect_fd;
    for (size_t i = 0; i < METRICS_HTTP_MAX_CONNECTIONS; i++) {
        struct http_conn *h = &m->conns[i];
        if (toe == MHD_CONNECTION_NOTIFY_STARTED && h->fd < 0) {
            *h = (struct http_conn){.fd = fd, .started_ms = now_ms()};
            return;
        }
        if (toe == MHD_CONNECTION_NOTIFY_CLOSED && h->fd == fd) {
            h->fd = -1;
            return;
        }
    }
}

/* Shuts down the connections past their lifetime; returns the ms until the next
 * one's, or UINT64_MAX when none is open. */
static uint64_t end_old_connections(struct metrics_http *m)
{
    uint64_t now = now_ms(), next = UINT64_MAX;
    const uint64_t life = METRICS_HTTP_LIFETIME_S * 1000u;
    for (size_t i = 0; i < METRICS_HTTP_MAX_CONNECTIONS; i++) {
        struct http_conn *h = &m->conns[i];
        if (h->fd < 0 || h->shut)
            continue;
        if (now - h->started_ms >= life) {
            shutdown(h->fd, SHUT_RDWR);
            h->shut = true;
            log_debug("metrics endpoint: a connection open for %d s was closed",
                      METRICS_HTTP_LIFETIME_S);
        } else if (h->started_ms + life - now < next) {
            next = h->started_ms + life - now;
        }
    }
    return next;
}

/* After every MHD_run: wake the loop again when libmicrohttpd wants it (a
 * connection's timeout, or work pending now: then at once, after the loop's other
 * events) or when a connection reaches its lifetime, never otherwise. */
static void rearm(struct metrics_http *m)
{
    MHD_UNSIGNED_LONG_LONG ms;
    uint64_t old = end_old_connections(m);
    if (MHD_get_timeout(m->mhd, &ms) != MHD_YES || ms > old)
        ms = old;
    int rc = loop_timer_after_ms(m->tw, ms);
    if (rc)
        log_warn("metrics endpoint: cannot arm its timer (%s)", strerror(-rc));
}

static void run(struct metrics_http *m)
{
    end_old_connections(m);
    if (MHD_run(m->mhd) != MHD_YES)
        log_debug("metrics endpoint: MHD_run reported an error");
    rearm(m);
}

static void on_ready(void *ctx, int fd, uint32_t events)
{
    run(ctx);
}

static void on_timer(void *ctx, int fd, uint32_t events)
{
    uint64_t expirations;
    if (read(fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        log_debug("metrics endpoint: timer read: %s", strerror(errno));
    run(ctx);
}

static struct MHD_Daemon *start_mhd(struct metrics_http *m, const struct metrics_addr *addr)
{
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    if (addr->ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, m,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, m,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, m,
        MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)&addr->ss,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_HTTP_MAX_CONNECTIONS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)METRICS_HTTP_MAX_PER_IP,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_HTTP_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_HTTP_MEMORY,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)METRICS_HTTP_MAX_CONNECTIONS,
        MHD_OPTION_END);
}

int metrics_http_start(struct metrics_http **out, struct loop *loop, const struct metrics_addr *addr,
                       const struct metrics_sources *src)
{
    struct metrics_http *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->loop = loop;
    m->src = *src;
    for (size_t i = 0; i < METRICS_HTTP_MAX_CONNECTIONS; i++)
        m->conns[i].fd = -1;
    int rc = metrics_snapshot_init(&m->snap, loop, src, on_render_done, m);
    if (rc) {
        free(m);
        return rc;
    }
    errno = 0;
    m->mhd = start_mhd(m, addr);
    if (!m->mhd) {
        rc = errno ? -errno : -EADDRNOTAVAIL;
        metrics_snapshot_fini(m->snap);
        free(m);
        return rc;
    }
    const union MHD_DaemonInfo *epoll_fd = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    const union MHD_DaemonInfo *port = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_BIND_PORT);
    m->port = port ? port->port : 0;
    if (!epoll_fd || !(m->ew = loop_add(loop, epoll_fd->epoll_fd, EPOLLIN, on_ready, m)) ||
        !(m->tw = loop_add_timer(loop, 0, on_timer, m))) {
        rc = errno ? -errno : -EIO;
        metrics_http_stop(m);
        return rc;
    }
    rearm(m);
    *out = m;
    return 0;
}

void metrics_http_stop(struct metrics_http *m)
{
    if (!m)
        return;
    loop_del(m->loop, m->ew);
    loop_del_close(m->loop, m->tw);
    metrics_snapshot_fini(m->snap);
    for (size_t i = 0; i < METRICS_HTTP_MAX_CONNECTIONS; i++)
        if (m->waiting[i]) /* libmicrohttpd closes only resumed connections */
            MHD_resume_connection(m->waiting[i]->c);
    if (m->mhd)
        MHD_stop_daemon(m->mhd);
    if (m->latest)
        MHD_destroy_response(m->latest);
    free(m);
}

unsigned metrics_http_port(const struct metrics_http *m)
{
    return m ? m->port : 0;
}
