/* test_handles.c - the accounting race on handle reuse (issue 25, item 11), under a
 * 64 MiB quota (KAIROS_MEM) on the fake driver.
 *
 * One thread frees a 16 MiB block; while its free is done in the driver but not yet
 * recorded by the shim (the fake driver's reply hook), an allocation of 32 MiB gets
 * the same handle: RM's choice (the fake hands out the lowest free handle), or the
 * client's, from another thread or from a signal handler on the same thread. Before
 * the fix the free's record destroyed the new object: the shim charged 0 while the
 * driver held 32 MiB, and 64 MiB more were granted past the quota. Each case asserts
 * that what the shim charged equals what the driver holds, and that the quota holds.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim/inflight.h"
#include "shim_fake.h"

#define MIB (1ull << 20)
#define QUOTA (64 * MIB)
#define CHOSEN 0x5000u /* a handle the client chooses */

static const struct shim_real *real;
static int ctl;
static uint32_t client, device, subdevice;

/* The racing allocation. */
struct racer {
    uint32_t handle; /* in: 0 (RM chooses) or the client's; out: what it got */
    uint32_t status;
    atomic_bool done;
};
static struct racer racer;
static atomic_bool armed;        /* the next reply is the free's: race there */
static bool racer_on_thread;     /* from another thread (else: this one, a handler) */

static void *racer_main(void *unused)
{
    (void)unused;
    racer.status = fk_vidmem(real, ctl, client, device, &racer.handle, 32 * MIB, false);
    atomic_store(&racer.done, true);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The free is done in the driver: the allocation runs before the shim records it,
 * until it is recorded, or (fixed shim) until it waits for the free's record. */
static void race_at_free_reply(void *ctx)
{
    pthread_t *t = ctx;
    if (!atomic_exchange(&armed, false))
        return;
    if (!racer_on_thread) {
        racer_main(NULL);
        return;
    }
    unsigned long waits = inflight_waits();
    assert_int_equal(pthread_create(t, NULL, racer_main, NULL), 0);
    double deadline = now_s() + 30;
    while (!atomic_load(&racer.done) && inflight_waits() == waits) {
        assert_true(now_s() < deadline);
        sched_yield();
    }
}

static int setup(void **state)
{
    (void)state;
    real = fk_quota_setup("64M");
    ctl = shim_open(real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    assert_true(ctl >= 0);
    fk_context(real, ctl, &client, &device, &subdevice);
    memset(&racer, 0, sizeof racer);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fakedrv_set_reply_hook(NULL, NULL);
    fakedrv_set_handle_reuse(false);
    shim_close(real, ctl);
    assert_int_equal(fk_driver_holds(), 0);
    assert_int_equal(fk_shim_charged(), 0);
    fk_quota_end();
    return 0;
}

/* 16 MiB under handle `first` (0: RM's choice) freed while 32 MiB is allocated under
 * racer.handle; then the ledger must be exact and the quota hold. */
static void free_races_alloc(uint32_t first, bool on_thread)
{
    uint32_t old = first;
    assert_int_equal(fk_vidmem(real, ctl, client, device, &old, 16 * MIB, false), 0);
    assert_int_equal(fk_shim_charged(), 16 * MIB);
    pthread_t t;
    racer_on_thread = on_thread;
    fakedrv_set_reply_hook(race_at_free_reply, &t);
    atomic_store(&armed, true);
    assert_int_equal(fk_free(real, ctl, client, old), 0);
    if (on_thread)
        assert_int_equal(pthread_join(t, NULL), 0);
    fakedrv_set_reply_hook(NULL, NULL);
    assert_int_equal(racer.status, 0);
    assert_int_equal(racer.handle, old); /* the same handle, reused */
    assert_int_equal(fk_driver_holds(), 32 * MIB);
    assert_int_equal(fk_shim_charged(), fk_driver_holds());
    /* 48 MiB more would pass the quota: refused, whatever the race recorded */
    uint32_t more = 0;
    assert_int_not_equal(fk_vidmem(real, ctl, client, device, &more, 48 * MIB, false), 0);
    assert_true(fk_driver_holds() <= QUOTA);
    assert_int_equal(fk_shim_charged(), fk_driver_holds());
    assert_int_equal(fk_free(real, ctl, client, racer.handle), 0);
    assert_int_equal(fk_shim_charged(), 0);
}

/* RM hands the freed handle to another thread's allocation (no handle named). */
static void test_rm_reuses_handle_for_other_thread(void **state)
{
    (void)state;
    fakedrv_set_handle_reuse(true);
    racer.handle = 0;
    free_races_alloc(0, true);
}

/* Another thread names the handle being freed. */
static void test_other_thread_names_freed_handle(void **state)
{
    (void)state;
    racer.handle = CHOSEN;
    free_races_alloc(CHOSEN, true);
}

/* A signal handler on the freeing thread names the handle being freed. */
static void test_handler_names_freed_handle(void **state)
{
    (void)state;
    racer.handle = CHOSEN;
    free_races_alloc(CHOSEN, false);
}

/* RM hands the freed handle to an allocation in a signal handler on the same thread. */
static void test_rm_reuses_handle_in_handler(void **state)
{
    (void)state;
    fakedrv_set_handle_reuse(true);
    racer.handle = 0;
    free_races_alloc(0, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rm_reuses_handle_for_other_thread, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_other_thread_names_freed_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handler_names_freed_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rm_reuses_handle_in_handler, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
