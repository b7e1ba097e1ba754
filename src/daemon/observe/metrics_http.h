/* metrics_http.h - the HTTP endpoint that serves metrics.c's text on /metrics
 * (libmicrohttpd), when the configuration or --metrics gives it an address.
 *
 * It runs in kairosd's loop thread: libmicrohttpd without threads of its own,
 * its epoll descriptor and a timer watched by the loop (metrics_http.c says why);
 * the text is rendered by a forked child (metrics_snapshot.h), never in the loop.
 * The endpoint is open to whoever reaches the address (any local user at
 * 127.0.0.1), so connections, connections per client address, the time a
 * connection may stay idle, the time it may last at all (a client dripping a
 * byte at a time is never idle) and the memory of each are bounded; a flood of
 * connections costs metrics, never the tenants' service.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_METRICS_HTTP_H
#define KAIROS_DAEMON_METRICS_HTTP_H

#include "daemon/base/loop.h"
#include "daemon/observe/metrics.h"
#include "daemon/config/metrics_addr.h"

#define METRICS_HTTP_MAX_CONNECTIONS 32 /* at once, all clients */
#define METRICS_HTTP_MAX_PER_IP 8       /* at once, from one client address */
#define METRICS_HTTP_TIMEOUT_S 5        /* a connection idle this long is closed */
#define METRICS_HTTP_LIFETIME_S 10      /* and any connection this old, busy or not */
#define METRICS_HTTP_MEMORY (16 * 1024) /* per connection: request line and headers */

struct metrics_http;

/* Listens on addr (addr->on) and serves src's figures from the loop. src is copied;
 * what it points to must outlive the endpoint. 0, or -errno (the address cannot be
 * bound: in use, not an address of this node...). */
int metrics_http_start(struct metrics_http **out, struct loop *loop, const struct metrics_addr *addr,
                       const struct metrics_sources *src);
/* Closes the endpoint and every connection. NULL is fine. */
void metrics_http_stop(struct metrics_http *m);
/* The port it listens on (the one the system chose when addr said 0). */
unsigned metrics_http_port(const struct metrics_http *m);

#endif /* KAIROS_DAEMON_METRICS_HTTP_H */
