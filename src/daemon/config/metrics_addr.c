/* metrics_addr.c - "HOST:PORT" to a socket address, numeric only (see
 * metrics_addr.h). */
#include "daemon/config/metrics_addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECTED "an address such as 127.0.0.1:9494, [::1]:9494, 0.0.0.0:9494 or off"

static int fail(char *why, size_t why_len, const char *text)
{
    snprintf(why, why_len, "metrics address '%.64s' is not %s", text, EXPECTED);
    return -EINVAL;
}

/* "9494" into *port; false unless it is a whole number from 0 to 65535. */
static bool parse_port(const char *s, unsigned *port)
{
    char *end;
    if (!*s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || errno || v > 65535)
        return false;
    *port = (unsigned)v;
    return true;
}

/* Splits text into host and port text: "[v6]:port", "[v6]", "v4:port", "v4". */
static bool split(const char *text, char *host, size_t cap, const char **port, bool *v6)
{
    const char *end;
    *v6 = text[0] == '[';
    if (*v6) {
        end = strchr(text, ']');
        if (!end || (end[1] && end[1] != ':'))
            return false;
        *port = end[1] ? end + 2 : NULL;
        text++;
    } else {
        end = strchr(text, ':');
        *port = end ? end + 1 : NULL;
        if (!end)
            end = text + strlen(text);
    }
    size_t n = (size_t)(end - text);
    if (!n || n >= cap)
        return false;
    memcpy(host, text, n);
    host[n] = 0;
    return true;
}

int metrics_addr_parse(const char *text, struct metrics_addr *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    if (!text || strlen(text) >= sizeof out->text)
        return fail(why, why_len, text ? text : "");
    if (!strcmp(text, "off"))
        return 0;
    char host[INET6_ADDRSTRLEN];
    const char *port_text;
    bool v6;
    unsigned port = METRICS_DEFAULT_PORT;
    if (!split(text, host, sizeof host, &port_text, &v6) ||
        (port_text && !parse_port(port_text, &port)))
        return fail(why, why_len, text);
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&out->ss;
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
            return fail(why, why_len, text);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        out->len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&out->ss;
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
            return fail(why, why_len, text);
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        out->len = sizeof *a;
    }
    out->on = true;
    snprintf(out->text, sizeof out->text, "%s", text);
    return 0;
}

const char *metrics_addr_format(const struct metrics_addr *a, unsigned port, char *buf,
                                size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (a->ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->ss)->sin6_addr, host, sizeof host);
        snprintf(buf, cap, "[%s]:%u", host, port);
    } else {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->ss)->sin_addr, host, sizeof host);
        snprintf(buf, cap, "%s:%u", host, port);
    }
    return buf;
}
