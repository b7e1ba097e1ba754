/* test_gpumap.c - device instance -> GPU index from the driver's answers: the
 * probed gpuIds sorted into PCI order whatever order the driver lists them in,
 * invalid entries skipped, GET_ID_INFO and GET_ID_INFO_V2 both read, and the
 * instance kept as the index whenever something is missing or malformed. */
#include <setjmp.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_instances_follow_pci_order, setup),
        cmocka_unit_test_setup(test_unknown_stays_the_instance, setup),
        cmocka_unit_test_setup(test_malformed_answers_ignored, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
