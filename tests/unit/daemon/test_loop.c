/* test_loop.c - the loop's timers and wake-ups: a periodic timer fires again and
 * again until stopped, a one-shot fires once, a wake-up runs its callback once per
 * loop_wake, and loop_del_close closes the descriptor the watch owned. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/base/loop.h"

struct seen {
    struct loop *loop;
    int calls, stop_at, fd;
    uint64_t count; /* what the descriptor said: expirations, or wake-ups */
};

static void on_timer(void *ctx, int fd, uint32_t events)
{
    (void)events;
    struct seen *s = ctx;
    uint64_t n = 0;
    assert_int_equal(read(fd, &n, sizeof n), sizeof n);
    s->count += n;
    s->fd = fd;
    if (++s->calls == s->stop_at)
        loop_stop(s->loop);
}

static void on_wake(void *ctx, int fd, uint32_t events)
{
    (void)events;
    struct seen *s = ctx;
    eventfd_t n = 0;
    assert_int_equal(eventfd_read(fd, &n), 0);
    s->count += n;
    s->fd = fd;
    if (++s->calls == s->stop_at)
        loop_stop(s->loop);
}

/* Stops the loop after ms through a one-shot timer of its own. */
static void on_deadline(void *ctx, int fd, uint32_t events)
{
    (void)fd;
    (void)events;
    loop_stop(ctx);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void periodic_fires_until_stopped(void **state)
{
    (void)state;
    struct loop *l;
    assert_int_equal(loop_init(&l), 0);
    struct seen s = {.loop = l, .stop_at = 3};
    struct loop_watch *w = loop_add_timer(l, 20000, on_timer, &s); /* every 20 ms */
    assert_non_null(w);
    uint64_t t0 = now_ms();
    assert_int_equal(loop_run(l), 0);
    assert_int_equal(s.calls, 3);
    assert_true(now_ms() - t0 >= 55); /* three periods of 20 ms, not at once */
    /* stopped: nothing more within 100 ms */
    assert_int_equal(loop_timer_set(w, 0), 0);
    struct loop_watch *deadline = loop_add_timer(l, 0, on_deadline, l);
    assert_non_null(deadline);
    assert_int_equal(loop_timer_after_ms(deadline, 100), 0);
    assert_int_equal(loop_run(l), 0);
    assert_int_equal(s.calls, 3);
    int fd = s.fd;
    loop_del_close(l, w);
    assert_int_equal(fcntl(fd, F_GETFD), -1); /* closed with its watch */
    assert_int_equal(errno, EBADF);
    loop_del_close(l, deadline);
    loop_del_close(l, NULL); /* nothing */
    loop_fini(l);
}

static void created_stopped_then_once(void **state)
{
    (void)state;
    struct loop *l;
    assert_int_equal(loop_init(&l), 0);
    struct seen s = {.loop = l};
    struct loop_watch *w = loop_add_timer(l, 0, on_timer, &s);
    assert_non_null(w);
    assert_int_equal(loop_timer_after_ms(w, 0), 0); /* at once, once */
    struct loop_watch *deadline = loop_add_timer(l, 0, on_deadline, l);
    assert_int_equal(loop_timer_after_ms(deadline, 100), 0);
    assert_int_equal(loop_run(l), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.count, 1);
    loop_del_close(l, w);
    loop_del_close(l, deadline);
    loop_fini(l);
}

static void wakeup_runs_once_per_batch_of_wakes(void **state)
{
    (void)state;
    struct loop *l;
    assert_int_equal(loop_init(&l), 0);
    struct seen s = {.loop = l, .stop_at = 1};
    struct loop_watch *w = loop_add_wakeup(l, on_wake, &s);
    assert_non_null(w);
    assert_int_equal(loop_wake(w), 0);
    assert_int_equal(loop_wake(w), 0);
    assert_int_equal(loop_run(l), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.count, 2); /* both wakes, read at once */
    loop_del_close(l, w);
    loop_fini(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(periodic_fires_until_stopped),
        cmocka_unit_test(created_stopped_then_once),
        cmocka_unit_test(wakeup_runs_once_per_batch_of_wakes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
