/* test_sizerace.c - the attacker who rewrites an allocation's arguments while it
 * is in the driver, against a 64 MiB quota (KAIROS_MEM) on the fake driver.
 *
 * A signal handler run at the ioctl's return to user space (the fake driver's
 * reply hook raises SIGUSR1) and a second thread writing all the time rewrite
 * the application's `size` (to 0, 1, 2^40, 2^63, 2^64-1, ...), the handle of a
 * free, or the class, between the driver's reply and anything the shim could
 * read. Each asserts that the driver never holds more than the quota and that
 * what the shim charged equals what the driver holds, after every call.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim/state.h"
#include "shim_fake.h"

#define MIB (1ull << 20)
#define QUOTA (64 * MIB)
#define ASK (32 * MIB)
#define ROUNDS 300

static struct fk_forger fx; /* the 64 MiB quota and the context on fx.ctl */

/* What the attacker rewrites, in the application's memory. */
static struct rm_memory_alloc_params *volatile victim_params;
static struct rm_alloc64_args *volatile victim_args;
static struct rm_free_args *volatile victim_free;
static volatile uint64_t forged_size;
static volatile uint32_t forged_handle, forged_class;

static void on_sigusr1(int sig)
{
    (void)sig;
    if (victim_params)
        victim_params->size = forged_size;
    if (victim_args && forged_class)
        victim_args->h_class = forged_class;
    if (victim_free && forged_handle)
        victim_free->h_object = forged_handle;
}

static int setup(void **state)
{
    (void)state;
    fk_forger_setup(on_sigusr1, &fx);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    victim_params = NULL;
    victim_args = NULL;
    victim_free = NULL;
    forged_class = forged_handle = 0;
    shim_close(fx.real, fx.ctl);
    assert_int_equal(fk_driver_holds(), 0);
    assert_int_equal(fk_shim_charged(), 0);
    fk_forger_end();
    return 0;
}

/* One allocation of `size` as CUDA makes it (NVOS64, or wrapped in XFER), with
 * the attacker's pointers aimed at its argument and parameters. */
static uint32_t alloc_exposed(uint64_t size, bool xfer, uint32_t *handle)
{
    struct rm_memory_alloc_params mp;
    memset(&mp, 0, sizeof mp);
    mp.size = size;
    struct rm_alloc64_args a = {.h_client = fx.client, .h_parent = fx.device,
                                .h_class = RM_CLASS_NV01_MEMORY_LOCAL_USER,
                                .params = (uintptr_t)&mp};
    victim_params = &mp;
    victim_args = &a;
    int ret;
    if (xfer) {
        struct rm_xfer_args x = {.cmd = RM_NR_ALLOC, .size = sizeof a, .ptr = (uintptr_t)&a};
        ret = shim_ioctl(fx.real, fx.ctl, RM_IOWR(RM_NR_XFER, sizeof x), &x);
    } else {
        ret = shim_ioctl(fx.real, fx.ctl, RM_IOWR(RM_NR_ALLOC, sizeof a), &a);
    }
    victim_params = NULL;
    victim_args = NULL;
    *handle = a.h_object;
    return ret == 0 ? a.status : 0xffffffffu;
}

static void signal_rewrites_size(uint64_t forged)
{
    forged_size = forged;
    fakedrv_set_reply_hook(fk_raise_at_return, NULL);
    int granted = 0;
    for (int i = 0; i < ROUNDS; i++) {
        uint32_t h = 0;
        if (alloc_exposed(ASK, i % 2 == 1, &h) == 0)
            granted++;
        assert_true(fk_driver_holds() <= QUOTA);
        assert_int_equal(fk_shim_charged(), fk_driver_holds());
    }
    assert_int_equal(granted, QUOTA / ASK);
}

static void test_signal_size_zero(void **state)
{
    (void)state;
    signal_rewrites_size(0);
}

static void test_signal_size_one(void **state)
{
    (void)state;
    signal_rewrites_size(1);
}

static void test_signal_size_2_40(void **state)
{
    (void)state;
    signal_rewrites_size(1ull << 40);
}

static void test_signal_size_2_63(void **state)
{
    (void)state;
    signal_rewrites_size(1ull << 63);
}

static void test_signal_size_2_63_plus(void **state)
{
    (void)state;
    signal_rewrites_size((1ull << 63) + ASK);
}

static void test_signal_size_max(void **state)
{
    (void)state;
    signal_rewrites_size(UINT64_MAX);
}

/* The class rewritten to a plain object after the reply: the shim must not
 * forget the memory (and so never release it later as something else). */
static void test_signal_rewrites_class(void **state)
{
    (void)state;
    forged_size = ASK;
    forged_class = RM_CLASS_NV01_DEVICE_0;
    fakedrv_set_reply_hook(fk_raise_at_return, NULL);
    for (int i = 0; i < 10; i++) {
        uint32_t h = 0;
        (void)alloc_exposed(ASK, i % 2 == 1, &h);
        assert_true(fk_driver_holds() <= QUOTA);
        assert_int_equal(fk_shim_charged(), fk_driver_holds());
    }
    assert_int_equal(fk_driver_holds(), QUOTA);
}

/* A free of a small block whose handle becomes a big block's after the reply:
 * the shim must release the small one, not the big one the driver still holds. */
static void test_signal_rewrites_freed_handle(void **state)
{
    (void)state;
    uint32_t small = 0, big = 0;
    assert_int_equal(fk_vidmem(fx.real, fx.ctl, fx.client, fx.device, &small, 2 * MIB, false), 0);
    assert_int_equal(fk_vidmem(fx.real, fx.ctl, fx.client, fx.device, &big, 60 * MIB, false), 0);
    struct rm_free_args fa = {.h_client = fx.client, .h_object = small};
    forged_handle = big;
    victim_free = &fa;
    fakedrv_set_reply_hook(fk_raise_at_return, NULL);
    assert_int_equal(shim_ioctl(fx.real, fx.ctl, RM_IOWR(RM_NR_FREE, sizeof fa), &fa), 0);
    fakedrv_set_reply_hook(NULL, NULL);
    victim_free = NULL;
    assert_int_equal(fa.status, 0);
    assert_int_equal(fk_driver_holds(), 60 * MIB);
    assert_int_equal(fk_shim_charged(), 60 * MIB);
    uint32_t more = 0;
    assert_int_not_equal(fk_vidmem(fx.real, fx.ctl, fx.client, fx.device, &more, 32 * MIB, false),
                         0);
    assert_true(fk_driver_holds() <= QUOTA);
}

/* A second thread flips the size between a small and a huge value all the time,
 * before, during and after each call. */
static atomic_bool flipping;
static struct rm_memory_alloc_params *_Atomic flip_target;

static void *flipper(void *unused)
{
    (void)unused;
    static const uint64_t values[] = {2 * MIB, 1ull << 63, UINT64_MAX, 0, 1ull << 40, ASK};
    unsigned i = 0;
    while (atomic_load(&flipping)) {
        struct rm_memory_alloc_params *p = atomic_load(&flip_target);
        if (p)
            ((volatile struct rm_memory_alloc_params *)p)->size = values[i++ % 6];
    }
    return NULL;
}

static void test_second_thread_rewrites_size(void **state)
{
    (void)state;
    /* The parameters live where the flipper can always write them. */
    static struct rm_memory_alloc_params shared;
    atomic_store(&flipping, true);
    atomic_store(&flip_target, &shared);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, flipper, NULL), 0);
    uint32_t handles[64];
    int held = 0;
    for (int i = 0; i < 2000; i++) {
        struct rm_alloc64_args a = {.h_client = fx.client, .h_parent = fx.device,
                                    .h_class = RM_CLASS_NV01_MEMORY_LOCAL_USER,
                                    .params = (uintptr_t)&shared};
        int ret = shim_ioctl(fx.real, fx.ctl, RM_IOWR(RM_NR_ALLOC, sizeof a), &a);
        if (ret == 0 && a.status == 0 && held < 64)
            handles[held++] = a.h_object;
        assert_true(fk_driver_holds() <= QUOTA);
        assert_int_equal(fk_shim_charged(), fk_driver_holds());
        if (i % 16 == 15) {
            while (held > 0)
                assert_int_equal(fk_free(fx.real, fx.ctl, fx.client, handles[--held]), 0);
            assert_int_equal(fk_shim_charged(), fk_driver_holds());
        }
    }
    atomic_store(&flipping, false);
    pthread_join(t, NULL);
    atomic_store(&flip_target, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_signal_size_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_size_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_size_2_40, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_size_2_63, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_size_2_63_plus, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_size_max, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_rewrites_class, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_rewrites_freed_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_thread_rewrites_size, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
