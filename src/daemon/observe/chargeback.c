/* chargeback.c - the chargeback counters' clock: the memory integral every second,
 * a save of the state file every usage_save_interval_ms and at the stop (see
 * chargeback.h). */
#include "daemon/observe/chargeback.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "daemon/state/usage_state.h"

struct chargeback {
    struct loop *loop;
    struct loop_watch *w;
    struct tenants *ts;
    const struct config *cfg;
    uint64_t last_ms;  /* CLOCK_MONOTONIC of the last count */
    uint64_t saved_ms; /* of the last periodic save */
};

static uint64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static double real_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* The memory held since the last count, counted for the time that passed. */
static void count(struct chargeback *cb, uint64_t now)
{
    double dt = (double)(now - cb->last_ms) / 1000.0;
    cb->last_ms = now;
    usage_state_tick(&cb->ts->usage, &cb->ts->ledger, real_now(), dt);
}

void chargeback_tick(struct chargeback *cb)
{
    uint64_t now = mono_ms();
    count(cb, now);
    if (now - cb->saved_ms < cb->cfg->usage_save_interval_ms)
        return;
    char err[512];
    cb->saved_ms = now; /* a failure (logged) is tried again an interval later */
    tenants_save_state(cb->ts, NULL, err, sizeof err);
}

static void on_timer(void *ctx, int fd, uint32_t events)
{
    (void)events;
    uint64_t expirations;
    if (read(fd, &expirations, sizeof expirations) == (ssize_t)sizeof expirations)
        chargeback_tick(ctx);
}

int chargeback_init(struct chargeback **out, struct loop *loop, struct tenants *ts,
                    const struct config *cfg)
{
    struct chargeback *cb = calloc(1, sizeof *cb);
    if (!cb)
        return -ENOMEM;
    *cb = (struct chargeback){.loop = loop, .ts = ts, .cfg = cfg};
    cb->last_ms = cb->saved_ms = mono_ms();
    /* the counters of new tenants begin */
    usage_state_tick(&ts->usage, &ts->ledger, real_now(), 0);
    if (loop && !(cb->w = loop_add_timer(loop, CHARGEBACK_TICK_MS * 1000ull, on_timer, cb))) {
        int rc = errno ? -errno : -ENOMEM;
        free(cb);
        return rc;
    }
    *out = cb;
    return 0;
}

void chargeback_fini(struct chargeback *cb)
{
    if (!cb)
        return;
    char err[512];
    count(cb, mono_ms());
    tenants_save_state(cb->ts, NULL, err, sizeof err); /* a failure is logged there */
    loop_del_close(cb->loop, cb->w);
    free(cb);
}
