/* service.c - the sd_notify(3) messages kairosd sends its service manager, and the
 * watchdog timer (a timerfd in the event loop, so the pings stop when the loop
 * does). libsystemd does the protocol; with no NOTIFY_SOCKET it sends nothing. */
#include "daemon/base/service.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "daemon/base/log.h"
#include "daemon/base/loop.h"

struct service {
    struct loop *loop;
    struct loop_watch *watch; /* the watchdog timer, or NULL */
};

static void on_watchdog_tick(void *ctx, int fd, uint32_t events)
{
    uint64_t expirations;
    (void)ctx;
    if (read(fd, &expirations, sizeof expirations) != (ssize_t)sizeof expirations)
        return;
    sd_notify(0, "WATCHDOG=1");
}

/* Pings every half of the watchdog interval, as sd_watchdog_enabled(3) advises. */
static int start_watchdog(struct service *s, uint64_t usec)
{
    uint64_t every = usec / 2 ? usec / 2 : 1;
    s->watch = loop_add_timer(s->loop, every, on_watchdog_tick, s);
    if (!s->watch)
        return -errno;
    log_info("systemd watchdog: a ping every %llu ms", (unsigned long long)(every / 1000));
    return 0;
}

int service_init(struct service **out, struct loop *loop)
{
    *out = NULL;
    struct service *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->loop = loop;
    uint64_t usec = 0;
    int rc = sd_watchdog_enabled(0, &usec);
    if (rc < 0)
        log_warn("WATCHDOG_USEC is not understood (%s); no watchdog pings", strerror(-rc));
    if (rc > 0 && (rc = start_watchdog(s, usec))) {
        service_fini(s);
        return rc;
    }
    *out = s;
    return 0;
}

void service_fini(struct service *s)
{
    if (!s)
        return;
    loop_del_close(s->loop, s->watch);
    free(s);
}

void service_ready(struct service *s, const char *status)
{
    (void)s;
    sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void service_stopping(struct service *s)
{
    (void)s;
    sd_notify(0, "STOPPING=1");
}

void service_reloading(struct service *s, int done)
{
    (void)s;
    sd_notify(0, done ? "READY=1" : "RELOADING=1");
}
