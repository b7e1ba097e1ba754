/* peer.c - a handler's answer handed to the transport, and the handlers' clock (see
 * peer.h). */
#include "daemon/transport/peer.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

bool peer_send(struct peer *p, uint16_t type, uint32_t seq, const void *body, size_t len)
{
    return p->sv->io->send(p, type, seq, body, len);
}

bool peer_error(struct peer *p, uint32_t seq, uint32_t code, const char *message)
{
    struct kairos_error e = {.code = code};
    snprintf(e.message, sizeof e.message, "%s", message);
    return peer_send(p, KAIROS_MSG_ERROR, seq, &e, sizeof e);
}

bool peer_ok(struct peer *p, uint32_t seq)
{
    return peer_send(p, KAIROS_MSG_OK, seq, NULL, 0);
}

void peer_msgf(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

uint64_t peer_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
