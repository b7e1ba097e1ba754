/* test_ipc.c - the exporter's side of legacy CUDA IPC in the shim, against a 64 MiB
 * quota (KAIROS_MEM) on the fake driver: once RM_SHARE or NV0000
 * CLIENT_SHARE_OBJECT made an object importable, the process's own free of it
 * releases nothing (an importer's dup may keep the memory, and a standalone
 * process has no kairosd to tell it whether one does) until the file its client
 * lives on closes; a revocation widens nothing; and an attacker that
 * rewrites RM_SHARE's arguments at the ioctl's return (a signal handler) cannot
 * make the shim hold another object than the one the driver shared. (The
 * importer's side needs kairosd: tests/system/test_ipc.py.) */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim/ipc.h"
#include "shim_fake.h"

#define MIB (1ull << 20)

static struct fk_forger fx; /* the 64 MiB quota and the context on fx.ctl */
static struct rm_share_args *volatile victim;
static volatile uint32_t forged_object;

static void on_sigusr1(int sig)
{
    (void)sig;
    if (victim)
        victim->h_object = forged_object;
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
    victim = NULL;
    fk_forger_end();
    return 0;
}

static uint32_t vidmem(uint64_t size)
{
    uint32_t h = 0;
    assert_int_equal(fk_vidmem(fx.real, fx.ctl, fx.client, fx.device, &h, size, false), 0);
    return h;
}

static uint32_t rm_share(uint32_t object, uint8_t action)
{
    struct rm_share_args a = {.h_client = fx.client, .h_object = object, .target = fx.client,
                              .access_mask = 1, .type = 1 /* ALL, as CUDA 13 */,
                              .action = action};
    victim = &a;
    int ret = shim_ioctl(fx.real, fx.ctl, RM_IOWR(RM_NR_SHARE, sizeof a), &a);
    victim = NULL;
    return ret == 0 ? a.status : 0xffffffffu;
}

static uint32_t share_control(uint32_t object)
{
    uint8_t params[16] = {0};
    uint16_t type = 1;
    memcpy(params, &object, 4);
    memcpy(params + 12, &type, 2);
    struct rm_control_args c = {.h_client = fx.client, .h_object = fx.client,
                                .cmd = IPC_SHARE_CONTROL, .params = (uintptr_t)params,
                                .params_size = IPC_SHARE_CONTROL_SIZE};
    int ret = shim_ioctl(fx.real, fx.ctl, RM_IOWR(RM_NR_CONTROL, sizeof c), &c);
    return ret == 0 ? c.status : 0xffffffffu;
}

/* The exporter frees what it shared: still charged, so the quota still counts it,
 * until the file closes. */
static void check_held_until_close(uint32_t shared, uint64_t size)
{
    assert_int_equal(fk_free(fx.real, fx.ctl, fx.client, shared), 0);
    assert_int_equal(fk_driver_holds(), 0); /* no importer here: the driver freed it */
    assert_int_equal(fk_shim_charged(), size);
    uint32_t h = 0;
    assert_int_not_equal(
        fk_vidmem(fx.real, fx.ctl, fx.client, fx.device, &h, 64 * MIB - size + 2 * MIB, false),
        0); /* the quota still counts it */
    shim_close(fx.real, fx.ctl);
    assert_int_equal(fk_shim_charged(), 0);
}

static void test_a_shared_object_stays_charged_until_its_file_closes(void **state)
{
    (void)state;
    uint32_t a = vidmem(16 * MIB);
    assert_int_equal(rm_share(a, 0), 0);
    assert_int_equal(rm_share(a, 0), 0); /* twice: held once */
    check_held_until_close(a, 16 * MIB);
}

static void test_the_share_control_is_followed_too(void **state)
{
    (void)state;
    uint32_t a = vidmem(8 * MIB);
    assert_int_equal(share_control(a), 0);
    check_held_until_close(a, 8 * MIB);
}

static void test_a_revocation_or_an_unshared_object_is_released_at_its_free(void **state)
{
    (void)state;
    uint32_t a = vidmem(8 * MIB), b = vidmem(8 * MIB);
    assert_int_equal(rm_share(a, 1 /* RS_SHARE_ACTION_FLAG_REVOKE */), 0);
    assert_int_equal(fk_free(fx.real, fx.ctl, fx.client, a), 0);
    assert_int_equal(fk_free(fx.real, fx.ctl, fx.client, b), 0);
    assert_int_equal(fk_shim_charged(), 0);
    shim_close(fx.real, fx.ctl);
}

static void test_a_share_rewritten_at_return_holds_what_the_driver_shared(void **state)
{
    (void)state;
    uint32_t a = vidmem(16 * MIB), b = vidmem(8 * MIB);
    forged_object = b;
    fakedrv_set_reply_hook(fk_raise_at_return, NULL);
    assert_int_equal(rm_share(a, 0), 0);
    fakedrv_set_reply_hook(NULL, NULL);
    assert_int_equal(fk_free(fx.real, fx.ctl, fx.client, b), 0); /* never shared: released */
    assert_int_equal(fk_shim_charged(), 16 * MIB);
    check_held_until_close(a, 16 * MIB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_shared_object_stays_charged_until_its_file_closes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_share_control_is_followed_too, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_revocation_or_an_unshared_object_is_released_at_its_free, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_share_rewritten_at_return_holds_what_the_driver_shared, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
