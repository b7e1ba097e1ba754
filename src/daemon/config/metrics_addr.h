/* metrics_addr.h - the address the metrics endpoint listens on, as the operator
 * writes it in kairosd.conf ('metrics: 127.0.0.1:9494') or on kairosd's command
 * line (--metrics): a numeric IPv4 address, or an IPv6 one in brackets, and a
 * port (METRICS_DEFAULT_PORT when left out); "off" for none. Numeric only, so
 * that starting kairosd never waits on a name service.
 *
 * Pure: no I/O, no globals. Thread rules: none shared.
 */
#ifndef KAIROS_DAEMON_METRICS_ADDR_H
#define KAIROS_DAEMON_METRICS_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* In the range Prometheus keeps for exporters; not dcgm-exporter's 9400,
 * node_exporter's 9100 nor HAMi's 31992/31993. */
#define METRICS_DEFAULT_PORT 9494
#define METRICS_ADDR_MAX 64 /* the text, NUL included */

struct metrics_addr {
    bool on;
    struct sockaddr_storage ss;
    socklen_t len;
    char text[METRICS_ADDR_MAX]; /* as given, for the log */
};

/* Parses text into out: "off" (out->on false), "127.0.0.1:9494", "0.0.0.0:9494",
 * "[::1]:9494", "127.0.0.1" (the default port). Port 0: any free port.
 * 0, or -EINVAL with what is expected in why. */
int metrics_addr_parse(const char *text, struct metrics_addr *out, char *why, size_t why_len);

/* "127.0.0.1:9494" or "[::1]:9494" for a's host and the given port, into buf. */
const char *metrics_addr_format(const struct metrics_addr *a, unsigned port, char *buf,
                                size_t cap);

#endif /* KAIROS_DAEMON_METRICS_ADDR_H */
