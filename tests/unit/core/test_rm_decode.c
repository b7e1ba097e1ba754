/* test_rm_decode.c - the decoder reads each layout at the driver's offsets and
 * reports bad calls (wrong size, wrong node, unknown escape, short bytes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/rm_decode.h"
#include "core/rm_names.h"

static void put32(uint8_t *b, size_t off, uint32_t v)
{
    memcpy(b + off, &v, sizeof v);
}

static void put64(uint8_t *b, size_t off, uint64_t v)
{
    memcpy(b + off, &v, sizeof v);
}

static struct rm_call call_of(enum rm_node node, uint32_t nr, const uint8_t *arg, size_t size)
{
    return (struct rm_call){.node = node, .fd = 3, .request = RM_IOWR(nr, size), .arg = arg,
                            .arg_len = size};
}

static void test_vidmem_alloc_nvos64(void **state)
{
    (void)state;
    uint8_t arg[48] = {0}, params[128] = {0};
    put32(arg, 0, 0xc1d00001);
    put32(arg, 4, 0x5c000002);
    put32(arg, 8, 0x5c000010);
    put32(arg, 12, 0x40);
    put32(arg, 32, sizeof params);
    put64(params, 64, 0x40000000);
    struct rm_call call = call_of(RM_NODE_CTL, RM_NR_ALLOC, arg, sizeof arg);
    call.params = params;
    call.params_len = sizeof params;
    struct rm_op op;
    assert_int_equal(rm_decode(&call, &op), RM_PROBLEM_NONE);
    assert_int_equal(op.kind, RM_OP_ALLOC);
    assert_string_equal(op.name, "RM_ALLOC");
    assert_true(op.ok);
    assert_true(op.vidmem);
    assert_int_equal(op.bytes, 0x40000000);
    assert_int_equal(op.h_client, 0xc1d00001);
    assert_int_equal(op.h_parent, 0x5c000002);
    assert_int_equal(op.h_object, 0x5c000010);

    put32(arg, 40, RM_NV_ERR_NO_MEMORY); /* refused: not ok */
    rm_decode(&call, &op);
    assert_true(op.has_status);
    assert_int_equal(op.status, 0x51);
    assert_false(op.ok);
}

static void test_sysmem_alloc_nvos21_is_not_vidmem(void **state)
{
    (void)state;
    uint8_t arg[32] = {0}, params[128] = {0};
    put32(arg, 12, 0x3e);
    put64(params, 64, 1 << 20);
    struct rm_call call = call_of(RM_NODE_CTL, RM_NR_ALLOC, arg, sizeof arg);
    call.params = params;
    call.params_len = sizeof params;
    struct rm_op op;
    assert_int_equal(rm_decode(&call, &op), RM_PROBLEM_NONE);
    assert_false(op.vidmem);
    assert_true(op.ok);
}

static void test_vidheap_alloc_in_vidmem(void **state)
{
    (void)state;
    uint8_t arg[184] = {0};
    put32(arg, 8, 2);        /* ALLOC_SIZE */
    put32(arg, 44, 0xbeef);  /* hMemory */
    put32(arg, 56, 0);       /* attr: LOCATION = VIDMEM */
    put64(arg, 88, 6 << 20); /* size */
    struct rm_call call = call_of(RM_NODE_CTL, RM_NR_VID_HEAP_CONTROL, arg, sizeof arg);
    struct rm_op op;
    assert_int_equal(rm_decode(&call, &op), RM_PROBLEM_NONE);
    assert_int_equal(op.kind, RM_OP_VIDHEAP_ALLOC);
    assert_true(op.vidmem);
    assert_int_equal(op.bytes, 6 << 20);
    assert_int_equal(op.h_object, 0xbeef);
    put32(arg, 56, 1u << 25); /* LOCATION = PCI: system memory */
    rm_decode(&call, &op);
    assert_false(op.vidmem);
    assert_int_equal(op.h_class, 0x3e);
    put32(arg, 8, 3); /* FREE */
    rm_decode(&call, &op);
    assert_int_equal(op.kind, RM_OP_VIDHEAP_FREE);
    assert_int_equal(op.h_object, 0xbeef);
}

static void test_control_fields(void **state)
{
    (void)state;
    uint8_t arg[32] = {0};
    put32(arg, 0, 0xc1d00001);
    put32(arg, 4, 0x5c000003);
    put32(arg, 8, 0x20801303);
    put32(arg, 24, 1028);
    struct rm_call call = call_of(RM_NODE_CTL, RM_NR_CONTROL, arg, sizeof arg);
    struct rm_op op;
    assert_int_equal(rm_decode(&call, &op), RM_PROBLEM_NONE);
    assert_int_equal(op.cmd, 0x20801303);
    assert_string_equal(rm_control_name(op.cmd), "NV2080_FB_GET_INFO_V2");
    assert_int_equal(op.params_size, 1028);
}

static void test_map_memory_reads_the_fd(void **state)
{
    (void)state;
    uint8_t arg[56] = {0};
    put32(arg, 8, 0x5c000005);
    put64(arg, 24, 0x10000);
    put32(arg, 48, 16);
    struct rm_call call = call_of(RM_NODE_CTL, RM_NR_MAP_MEMORY, arg, sizeof arg);
    struct rm_op op;
    rm_decode(&call, &op);
    assert_int_equal(op.kind, RM_OP_MAP);
    assert_int_equal(op.map_fd, 16);
    assert_int_equal(op.bytes, 0x10000);
    assert_int_equal(op.h_memory, 0x5c000005);
}

static void test_bad_calls_are_flagged(void **state)
{
    (void)state;
    uint8_t arg[64] = {0};
    struct rm_op op;
    struct rm_call call = call_of(RM_NODE_CTL, RM_NR_FREE, arg, 20); /* NVOS00 is 16 */
    assert_int_equal(rm_decode(&call, &op), RM_PROBLEM_WRONG_SIZE);
    call = call_of(RM_NODE_DEV, RM_NR_CONTROL, arg, 32); /* controls go to nvidiactl */
    assert_int_equal(rm_decode(&call, &op), RM_PROBLEM_WRONG_NODE);
    call = call_of(RM_NODE_CTL, 0x7e, arg, 8);
    assert_int_equal(rm_decode(&call, &op), RM_PROBLEM_UNKNOWN);
    assert_string_equal(op.name, "UNKNOWN_ESCAPE");
    call = call_of(RM_NODE_CTL, RM_NR_ALLOC, arg, 48);
    call.arg_len = 20; /* a recording kept only a prefix */
    assert_int_equal(rm_decode(&call, &op), RM_PROBLEM_TRUNCATED);
    assert_false(op.has_status);
    call.request = 0x12345678; /* not an 'F' request at all */
    assert_int_equal(rm_decode(&call, &op), RM_PROBLEM_UNKNOWN);
    call = call_of(RM_NODE_CTL, 0xc8, arg, 72 * 3); /* CARD_INFO takes any count */
    call.arg_len = 64;
    assert_int_not_equal(rm_decode(&call, &op), RM_PROBLEM_WRONG_SIZE);
}

static void test_uvm_commands(void **state)
{
    (void)state;
    uint8_t arg[16] = {0};
    struct rm_call call = {.node = RM_NODE_UVM, .request = 0x30000001, .arg = arg,
                           .arg_len = sizeof arg};
    struct rm_op op;
    assert_int_equal(rm_decode(&call, &op), RM_PROBLEM_NONE);
    assert_string_equal(op.name, "UVM_INITIALIZE");
    assert_true(op.ok);
    put32(arg, 8, 0x56);
    rm_decode(&call, &op);
    assert_false(op.ok);
    call.request = 999;
    assert_int_equal(rm_decode(&call, &op), RM_PROBLEM_UNKNOWN);
}

/* Every escape in the list has a name, no two share a number, and sizes agree
 * with the request words documented in the ABI notes for a few of them. */
static void test_escape_table_is_consistent(void **state)
{
    (void)state;
    for (unsigned i = 0; i < rm_escape_count(); i++) {
        const struct rm_escape_info *a = rm_escape_at(i);
        assert_non_null(a->name);
        for (unsigned j = i + 1; j < rm_escape_count(); j++)
            assert_int_not_equal(a->nr, rm_escape_at(j)->nr);
    }
    assert_int_equal(RM_IOWR(0x2B, 48), 0xC030462B);
    assert_int_equal(RM_IOWR(0x4A, 184), 0xC0B8464A);
    assert_int_equal(RM_IOWR(0xD3, 16), 0xC01046D3);
    assert_int_equal(rm_escape_info(0x4A)->size, 184);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vidmem_alloc_nvos64),
        cmocka_unit_test(test_sysmem_alloc_nvos21_is_not_vidmem),
        cmocka_unit_test(test_vidheap_alloc_in_vidmem),
        cmocka_unit_test(test_control_fields),
        cmocka_unit_test(test_map_memory_reads_the_fd),
        cmocka_unit_test(test_bad_calls_are_flagged),
        cmocka_unit_test(test_uvm_commands),
        cmocka_unit_test(test_escape_table_is_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
