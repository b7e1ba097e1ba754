/* test_objtree.c - the object tree frees what the driver frees, and counts device
 * memory once: subtree frees, client frees, descriptor closes, duplicates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/objtree.h"
#include "core/rm_abi.h"

#define MIB (1ull << 20)
#define CTL_FILE 1
#define CTL_FILE2 2

static struct rm_op alloc_op(uint32_t client, uint32_t parent, uint32_t handle, uint32_t h_class,
                             uint64_t vidmem_bytes)
{
    struct rm_op op = {.kind = RM_OP_ALLOC, .ok = true, .h_client = client, .h_parent = parent,
                       .h_object = handle, .h_class = h_class, .map_fd = -1, .device_id = -1};
    if (vidmem_bytes) {
        op.vidmem = true;
        op.bytes = vidmem_bytes;
    }
    return op;
}

static struct rm_op free_op(uint32_t client, uint32_t handle)
{
    return (struct rm_op){.kind = RM_OP_FREE, .ok = true, .h_client = client, .h_object = handle,
                          .map_fd = -1};
}

static void apply(struct objtree *t, uint64_t file, struct rm_op op, struct objtree_effect *e)
{
    assert_int_equal(objtree_apply(t, file, 0, &op, e), 0);
}

/* client C, device D under it, subdevice S under D, memory M1 (2 MiB) under D and
 * M2 (4 MiB) under S */
static void build_tree(struct objtree *t, uint64_t file, uint32_t c)
{
    struct objtree_effect e;
    apply(t, file, alloc_op(0, 0, c, RM_CLASS_NV01_ROOT_CLIENT, 0), &e);
    apply(t, file, alloc_op(c, c, c + 1, RM_CLASS_NV01_DEVICE_0, 0), &e);
    apply(t, file, alloc_op(c, c + 1, c + 2, RM_CLASS_NV20_SUBDEVICE_0, 0), &e);
    apply(t, file, alloc_op(c, c + 1, c + 3, RM_CLASS_NV01_MEMORY_LOCAL_USER, 2 * MIB), &e);
    assert_int_equal(e.vidmem_delta, 2 * MIB);
    apply(t, file, alloc_op(c, c + 2, c + 4, RM_CLASS_NV01_MEMORY_LOCAL_USER, 4 * MIB), &e);
}

static uint64_t held(const struct objtree *t)
{
    struct objtree_stats s;
    objtree_stats(t, &s);
    return s.vidmem_now;
}

static void test_free_releases_the_subtree(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    build_tree(t, CTL_FILE, 0x100);
    assert_int_equal(held(t), 6 * MIB);
    struct objtree_effect e;
    apply(t, CTL_FILE, free_op(0x100, 0x102), &e); /* the subdevice and M2 */
    assert_int_equal(e.objects_freed, 2);
    assert_int_equal(e.vidmem_delta, -(int64_t)(4 * MIB));
    assert_int_equal(held(t), 2 * MIB);
    assert_true(objtree_lookup(t, 0x100, 0x103, NULL));
    assert_false(objtree_lookup(t, 0x100, 0x104, NULL));
    objtree_free(t);
}

static void test_freeing_the_client_frees_everything(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    build_tree(t, CTL_FILE, 0x100);
    build_tree(t, CTL_FILE, 0x200);
    struct objtree_effect e;
    apply(t, CTL_FILE, free_op(0x100, 0x100), &e);
    assert_int_equal(e.objects_freed, 5);
    assert_int_equal(held(t), 6 * MIB); /* the other client keeps its memory */
    struct objtree_stats s;
    objtree_stats(t, &s);
    assert_int_equal(s.live_clients, 1);
    objtree_free(t);
}

static void test_closing_the_file_frees_its_clients_only(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    build_tree(t, CTL_FILE, 0x100);
    build_tree(t, CTL_FILE2, 0x200);
    struct objtree_effect e;
    objtree_close_file(t, CTL_FILE, &e);
    assert_int_equal(e.objects_freed, 5);
    assert_int_equal(e.vidmem_delta, -(int64_t)(6 * MIB));
    assert_false(objtree_lookup(t, 0x100, 0x100, NULL));
    assert_true(objtree_lookup(t, 0x200, 0x204, NULL));
    objtree_close_file(t, CTL_FILE2, &e);
    assert_int_equal(held(t), 0);
    objtree_free(t);
}

static void test_duplicates_share_memory(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    build_tree(t, CTL_FILE, 0x100);
    build_tree(t, CTL_FILE, 0x200);
    struct rm_op dup = {.kind = RM_OP_DUP, .ok = true, .h_client = 0x200, .h_parent = 0x201,
                        .h_object = 0x2ff, .h_client_src = 0x100, .h_object_src = 0x103};
    struct objtree_effect e;
    apply(t, CTL_FILE, dup, &e);
    assert_int_equal(e.vidmem_delta, 0);
    assert_int_equal(held(t), 12 * MIB);
    apply(t, CTL_FILE, free_op(0x100, 0x103), &e); /* the original goes, the dup holds it */
    assert_int_equal(e.vidmem_delta, 0);
    assert_int_equal(held(t), 12 * MIB);
    apply(t, CTL_FILE, free_op(0x200, 0x2ff), &e); /* last reference */
    assert_int_equal(e.vidmem_delta, -(int64_t)(2 * MIB));
    assert_int_equal(held(t), 10 * MIB);
    objtree_free(t);
}

/* An export file holds the exported objects' memory: freeing them releases nothing
 * until the file's last close; the file holds nothing of an object without memory,
 * nor of one that does not exist. */
static void test_an_export_file_holds_memory(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    build_tree(t, CTL_FILE, 0x100);
    const uint64_t export_file = 7;
    assert_int_equal(objtree_hold_in_file(t, export_file, 0x100, 0x103), 1);
    assert_int_equal(objtree_hold_in_file(t, export_file, 0x100, 0x101), 0); /* a device */
    assert_int_equal(objtree_hold_in_file(t, export_file, 0x100, 0x1ff), 0); /* unknown */
    assert_int_equal(objtree_hold_in_file(t, 0, 0x100, 0x104), 0);           /* no file */
    struct objtree_effect e;
    apply(t, CTL_FILE, free_op(0x100, 0x103), &e);
    assert_int_equal(e.vidmem_delta, 0);
    assert_int_equal(held(t), 6 * MIB);
    objtree_close_file(t, CTL_FILE, &e); /* the client goes; M1 still held by the file */
    assert_int_equal(e.vidmem_delta, -(int64_t)(4 * MIB));
    assert_int_equal(held(t), 2 * MIB);
    objtree_close_file(t, export_file, &e);
    assert_int_equal(e.vidmem_delta, -(int64_t)(2 * MIB));
    assert_int_equal(held(t), 0);
    /* still held when the tree goes: freed with it, no leak (ASan) */
    build_tree(t, CTL_FILE, 0x300);
    assert_int_equal(objtree_hold_in_file(t, export_file, 0x300, 0x304), 1);
    objtree_free(t);
}

/* A shared object's hold (legacy CUDA IPC): once the object is freed the hold says
 * what releasing it would free, and releasing it frees that; while the object (or a
 * new one under its handle) lives, or another reference keeps the block, nothing. */
static void test_the_hold_of_a_freed_object_is_released_on_demand(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    build_tree(t, CTL_FILE, 0x100);
    uint64_t bytes = 1;
    int gpu = -1;
    assert_int_equal(objtree_hold_in_file(t, CTL_FILE, 0x100, 0x103), 1);
    assert_false(objtree_hold_left(t, 0x100, 0x103, &bytes, &gpu)); /* it lives */
    struct objtree_effect e;
    apply(t, CTL_FILE, free_op(0x100, 0x103), &e);
    assert_int_equal(e.vidmem_delta, 0);
    assert_true(objtree_hold_left(t, 0x100, 0x103, &bytes, &gpu));
    assert_int_equal(bytes, 2 * MIB);
    assert_int_equal(gpu, 0);
    objtree_release_hold(t, 0x100, 0x103, &e);
    assert_int_equal(e.vidmem_delta, -(int64_t)(2 * MIB));
    assert_int_equal(held(t), 4 * MIB);
    assert_false(objtree_hold_left(t, 0x100, 0x103, &bytes, &gpu));
    objtree_release_hold(t, 0x100, 0x103, &e); /* twice: nothing */
    assert_int_equal(e.vidmem_delta, 0);
    /* a dup of our own keeps the block: releasing the hold frees nothing yet */
    assert_int_equal(objtree_hold_in_file(t, CTL_FILE, 0x100, 0x104), 1);
    struct rm_op dup = {.kind = RM_OP_DUP, .ok = true, .h_client = 0x100, .h_parent = 0x101,
                        .h_object = 0x1ff, .h_client_src = 0x100, .h_object_src = 0x104};
    apply(t, CTL_FILE, dup, &e);
    apply(t, CTL_FILE, free_op(0x100, 0x104), &e);
    assert_true(objtree_hold_left(t, 0x100, 0x104, &bytes, &gpu));
    assert_int_equal(bytes, 0);
    objtree_release_hold(t, 0x100, 0x104, &e);
    assert_int_equal(e.vidmem_delta, 0);
    apply(t, CTL_FILE, free_op(0x100, 0x1ff), &e);
    assert_int_equal(e.vidmem_delta, -(int64_t)(4 * MIB));
    assert_int_equal(held(t), 0);
    objtree_free(t);
}

static void test_failed_calls_change_nothing(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    build_tree(t, CTL_FILE, 0x100);
    struct rm_op op = alloc_op(0x100, 0x101, 0x150, RM_CLASS_NV01_MEMORY_LOCAL_USER, 8 * MIB);
    op.ok = false; /* NV_ERR_NO_MEMORY */
    struct objtree_effect e;
    apply(t, CTL_FILE, op, &e);
    assert_int_equal(held(t), 6 * MIB);
    struct rm_op f = free_op(0x100, 0x100);
    f.ok = false;
    apply(t, CTL_FILE, f, &e);
    assert_int_equal(held(t), 6 * MIB);
    objtree_free(t);
}

static void test_deep_chain_frees_without_recursion(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    struct objtree_effect e;
    apply(t, CTL_FILE, alloc_op(0, 0, 1, RM_CLASS_NV01_ROOT_CLIENT, 0), &e);
    for (uint32_t h = 2; h < 200000; h++)
        apply(t, CTL_FILE, alloc_op(1, h - 1, h, RM_CLASS_NV01_MEMORY_LOCAL_USER, 4096), &e);
    assert_int_equal(held(t), 4096ull * 199998);
    apply(t, CTL_FILE, free_op(1, 2), &e);
    assert_int_equal(e.objects_freed, 199998);
    assert_int_equal(held(t), 0);
    objtree_free(t);
}

static void test_doorbell_mapping_is_recognised(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    build_tree(t, CTL_FILE, 0x100);
    struct objtree_effect e;
    apply(t, CTL_FILE, alloc_op(0x100, 0x102, 0x110, RM_CLASS_HOPPER_USERMODE_A, 0), &e);
    struct rm_op map = {.kind = RM_OP_MAP, .ok = true, .h_client = 0x100, .h_parent = 0x102,
                        .h_memory = 0x110, .h_object = 0x110, .map_fd = 7};
    const uint64_t map_file = 42;
    assert_int_equal(objtree_apply(t, CTL_FILE, map_file, &map, &e), 0);
    assert_int_equal(objtree_mmap(t, 43, 0x7000, 0x10000), OBJTREE_MAP_NONE);
    assert_int_equal(objtree_mmap(t, map_file, 0x7000, 0x10000), OBJTREE_MAP_DOORBELL);
    uint64_t addr[4], len[4];
    assert_int_equal(objtree_doorbells(t, addr, len, 4), 1);
    assert_int_equal(addr[0], 0x7000);
    assert_true(objtree_munmap(t, 0x7000, 0x10000));
    assert_int_equal(objtree_doorbells(t, addr, len, 4), 0);
    assert_false(objtree_munmap(t, 0x7000, 0x10000));
    objtree_free(t);
}

/* A tree with channel group 0x120 (client 0x100, device 0x101) and its channel
 * 0x121. */
static void channel_group_with_a_channel(struct objtree *t)
{
    struct objtree_effect e;
    build_tree(t, CTL_FILE, 0x100);
    apply(t, CTL_FILE, alloc_op(0x100, 0x101, 0x120, RM_CLASS_KEPLER_CHANNEL_GROUP_A, 0), &e);
    apply(t, CTL_FILE, alloc_op(0x100, 0x120, 0x121, RM_CLASS_HOPPER_CHANNEL_GPFIFO_A, 0), &e);
}

static void test_listing_channel_groups(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    struct objtree_effect e;
    channel_group_with_a_channel(t);
    apply(t, CTL_FILE, alloc_op(0x100, 0x120, 0x122, RM_CLASS_HOPPER_CHANNEL_GPFIFO_A, 0), &e);
    struct objtree_ref refs[4];
    assert_int_equal(objtree_list(t, RM_KIND_CHANNEL_GROUP, refs, 4), 1);
    assert_int_equal(refs[0].h_object, 0x120);
    assert_int_equal(refs[0].file_id, CTL_FILE);
    assert_int_equal(objtree_list(t, RM_KIND_CHANNEL, refs, 4), 2);
    apply(t, CTL_FILE, free_op(0x100, 0x120), &e);
    assert_int_equal(objtree_list(t, RM_KIND_CHANNEL, refs, 4), 0);
    objtree_free(t);
}

/* The application's own timeslice is an attribute of its channel group: kept
 * for a group only, gone with it, so a handle the driver hands out again starts
 * with none. */
static void test_a_channel_group_keeps_the_applications_timeslice(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    struct objtree_effect e;
    channel_group_with_a_channel(t);
    assert_int_equal(objtree_timeslice(t, 0x100, 0x120), 0); /* none set yet */
    assert_true(objtree_set_timeslice(t, 0x100, 0x120, 2048));
    assert_int_equal(objtree_timeslice(t, 0x100, 0x120), 2048);
    assert_false(objtree_set_timeslice(t, 0x100, 0x121, 1024)); /* a channel: no */
    assert_false(objtree_set_timeslice(t, 0x100, 0x130, 1024)); /* no such object */
    assert_int_equal(objtree_timeslice(t, 0x100, 0x121), 0);
    apply(t, CTL_FILE, free_op(0x100, 0x120), &e);
    assert_int_equal(objtree_timeslice(t, 0x100, 0x120), 0);
    apply(t, CTL_FILE, alloc_op(0x100, 0x101, 0x120, RM_CLASS_KEPLER_CHANNEL_GROUP_A, 0), &e);
    assert_int_equal(objtree_timeslice(t, 0x100, 0x120), 0); /* the handle again: a new group */
    objtree_free(t);
}

static void test_memory_is_counted_per_gpu(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    struct objtree_effect e;
    apply(t, CTL_FILE, alloc_op(0, 0, 0x100, RM_CLASS_NV01_ROOT_CLIENT, 0), &e);
    for (int gpu = 0; gpu < 2; gpu++) {
        struct rm_op dev = alloc_op(0x100, 0x100, 0x110 + (uint32_t)gpu, RM_CLASS_NV01_DEVICE_0, 0);
        dev.device_id = gpu;
        apply(t, CTL_FILE, dev, &e);
    }
    apply(t, CTL_FILE, alloc_op(0x100, 0x110, 0x120, RM_CLASS_NV01_MEMORY_LOCAL_USER, 2 * MIB), &e);
    assert_int_equal(e.vidmem_delta_gpu[0], 2 * MIB);
    apply(t, CTL_FILE, alloc_op(0x100, 0x111, 0x121, RM_CLASS_NV01_MEMORY_LOCAL_USER, 8 * MIB), &e);
    assert_int_equal(e.vidmem_delta_gpu[1], 8 * MIB);
    assert_int_equal(e.vidmem_delta_gpu[0], 0);
    assert_int_equal(objtree_gpu_of(t, 0x100, 0x121), 1);
    assert_int_equal(objtree_gpu_of(t, 0x100, 0x100), -1);
    struct objtree_stats st;
    objtree_stats(t, &st);
    assert_int_equal(st.vidmem_gpu[0], 2 * MIB);
    assert_int_equal(st.vidmem_gpu[1], 8 * MIB);
    objtree_close_file(t, CTL_FILE, &e);
    assert_int_equal(e.vidmem_delta_gpu[0], -(int64_t)(2 * MIB));
    assert_int_equal(e.vidmem_delta_gpu[1], -(int64_t)(8 * MIB));
    objtree_free(t);
}

/* Sizes from a reply beyond any GPU are bounded: one block counts at most
 * OBJTREE_MAX_BYTES, and a close of many of them sums without overflow (the
 * sanitizer build fails on signed overflow). */
static void test_huge_sizes_are_bounded(void **state)
{
    (void)state;
    struct objtree *t = objtree_new();
    assert_non_null(t);
    struct objtree_effect e;
    apply(t, CTL_FILE, alloc_op(0, 0, 1, RM_CLASS_NV01_ROOT_CLIENT, 0), &e);
    apply(t, CTL_FILE, alloc_op(1, 1, 2, RM_CLASS_NV01_DEVICE_0, 0), &e);
    const uint64_t sizes[] = {UINT64_MAX, 1ull << 63, (1ull << 63) + 1, OBJTREE_MAX_BYTES + 1};
    for (uint32_t i = 0; i < 4096; i++) {
        apply(t, CTL_FILE, alloc_op(1, 2, 100 + i, RM_CLASS_NV01_MEMORY_LOCAL_USER, sizes[i % 4]),
              &e);
        assert_int_equal(e.vidmem_delta, (int64_t)OBJTREE_MAX_BYTES);
    }
    objtree_close_file(t, CTL_FILE, &e);
    assert_true(e.vidmem_delta < 0);
    assert_true(e.vidmem_delta >= -INT64_MAX);
    assert_int_equal(e.vidmem_delta, -INT64_MAX); /* 4096 x 2^52 = 2^64: saturated */
    assert_int_equal(e.vidmem_delta_gpu[0], -INT64_MAX);
    objtree_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_releases_the_subtree),
        cmocka_unit_test(test_freeing_the_client_frees_everything),
        cmocka_unit_test(test_closing_the_file_frees_its_clients_only),
        cmocka_unit_test(test_duplicates_share_memory),
        cmocka_unit_test(test_an_export_file_holds_memory),
        cmocka_unit_test(test_failed_calls_change_nothing),
        cmocka_unit_test(test_the_hold_of_a_freed_object_is_released_on_demand),
        cmocka_unit_test(test_deep_chain_frees_without_recursion),
        cmocka_unit_test(test_doorbell_mapping_is_recognised),
        cmocka_unit_test(test_listing_channel_groups),
        cmocka_unit_test(test_a_channel_group_keeps_the_applications_timeslice),
        cmocka_unit_test(test_memory_is_counted_per_gpu),
        cmocka_unit_test(test_huge_sizes_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
