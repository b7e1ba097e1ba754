/* test_gpumap.c - device instance -> GPU index from the driver's answers: the
 * probed gpuIds sorted into PCI order whatever order the driver lists them in,
 * invalid entries skipped, GET_ID_INFO and GET_ID_INFO_V2 both read, and the
 * instance kept as the index whenever something is missing or malformed. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/rm_abi.h"
#include "shim/gpumap.h"

static void probed(const uint32_t *ids, unsigned n)
{
    uint32_t p[96];
    memset(p, 0xff, sizeof p);
    memcpy(p, ids, n * sizeof *ids);
    gpumap_observe(RM_CTRL_NV0000_GPU_GET_PROBED_IDS, (const uint8_t *)p, sizeof p);
}

static void id_info(uint32_t cmd, uint32_t gpu_id, uint32_t inst)
{
    uint32_t p[10] = {gpu_id, 1, inst};
    gpumap_observe(cmd, (const uint8_t *)p, cmd == RM_CTRL_NV0000_GPU_GET_ID_INFO ? 40 : 32);
}

static int setup(void **state)
{
    (void)state;
    gpumap_reset();
    return 0;
}

static void test_instances_follow_pci_order(void **state)
{
    (void)state;
    const uint32_t ids[] = {0x4100, 0xffffffffu, 0x1900, 0x3b00}; /* driver's order */
    probed(ids, 4);
    id_info(RM_CTRL_NV0000_GPU_GET_ID_INFO_V2, 0x3b00, 0); /* initialised first */
    id_info(RM_CTRL_NV0000_GPU_GET_ID_INFO_V2, 0x1900, 1);
    id_info(RM_CTRL_NV0000_GPU_GET_ID_INFO, 0x4100, 2); /* the older control */
    assert_int_equal(gpumap_index(0), 1);               /* bus 0x3b: second in PCI order */
    assert_int_equal(gpumap_index(1), 0);
    assert_int_equal(gpumap_index(2), 2);
}

static void test_unknown_stays_the_instance(void **state)
{
    (void)state;
    assert_int_equal(gpumap_index(3), 3); /* nothing seen */
    id_info(RM_CTRL_NV0000_GPU_GET_ID_INFO_V2, 0x1900, 3);
    assert_int_equal(gpumap_index(3), 3); /* no probed table yet */
    const uint32_t ids[] = {0x4100};
    probed(ids, 1);
    assert_int_equal(gpumap_index(3), 3); /* its gpuId was not probed */
    assert_int_equal(gpumap_index(-1), -1);
    assert_int_equal(gpumap_index(40), 40); /* beyond the driver's table */
}

static void test_malformed_answers_ignored(void **state)
{
    (void)state;
    const uint32_t ids[] = {0x3b00, 0x1900};
    probed(ids, 2);
    uint32_t shorter[2] = {0x1900, 0};
    gpumap_observe(RM_CTRL_NV0000_GPU_GET_ID_INFO_V2, (const uint8_t *)shorter, sizeof shorter);
    gpumap_observe(RM_CTRL_NV0000_GPU_GET_PROBED_IDS, (const uint8_t *)shorter, sizeof shorter);
    id_info(RM_CTRL_NV0000_GPU_GET_ID_INFO_V2, 0x1900, 999);    /* no such instance */
    id_info(RM_CTRL_NV0000_GPU_GET_ID_INFO_V2, 0xffffffffu, 1); /* invalid gpuId */
    id_info(RM_CTRL_NV2080_FB_GET_INFO_V2, 0x1900, 1);          /* not ours */
    gpumap_observe(RM_CTRL_NV0000_GPU_GET_ID_INFO_V2, NULL, 32);
    assert_int_equal(gpumap_index(1), 1);
    id_info(RM_CTRL_NV0000_GPU_GET_ID_INFO_V2, 0x3b00, 1);
    assert_int_equal(gpumap_index(1), 1); /* 0x3b00 sorts after 0x1900: index 1 */
    id_info(RM_CTRL_NV0000_GPU_GET_ID_INFO_V2, 0x1900, 1);
    assert_int_equal(gpumap_index(1), 0);
}

static atomic_bool hammering;

static void *hammer(void *unused)
{
    (void)unused;
    const uint32_t ids[] = {0x4100, 0x1900, 0x3b00};
    while (atomic_load(&hammering)) {
        probed(ids, 3);
        id_info(RM_CTRL_NV0000_GPU_GET_ID_INFO_V2, 0x1900, 0);
        (void)gpumap_index(0);
    }
    return NULL;
}

/* Whether child exits within 2 s (killed otherwise). */
static bool exits_in_time(pid_t child)
{
    struct timespec nap = {0, 1000 * 1000};
    for (int i = 0; i < 2000; i++) {
        if (waitpid(child, NULL, WNOHANG) == child)
            return true;
        nanosleep(&nap, NULL);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return false;
}

/* Issue 25, item 11 (a): a fork while another thread holds gm_mu left the child's
 * copy locked, and the child's first GPU-index lookup hung for ever (before the fix
 * a few hundred forks met it). Every child must finish. */
static void test_fork_while_another_thread_maps(void **state)
{
    (void)state;
    pthread_t t;
    atomic_store(&hammering, true);
    assert_int_equal(pthread_create(&t, NULL, hammer, NULL), 0);
    int hung = 0;
    for (int i = 0; i < 400 && !hung; i++) {
        pid_t c = fork();
        if (c == 0)
            _exit(gpumap_index(0) == 1 || gpumap_index(0) == 0 ? 0 : 1);
        assert_true(c > 0);
        hung += !exits_in_time(c);
    }
    atomic_store(&hammering, false);
    pthread_join(t, NULL);
    assert_int_equal(hung, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_instances_follow_pci_order, setup),
        cmocka_unit_test_setup(test_unknown_stays_the_instance, setup),
        cmocka_unit_test_setup(test_malformed_answers_ignored, setup),
        cmocka_unit_test_setup(test_fork_while_another_thread_maps, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
