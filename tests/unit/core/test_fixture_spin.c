/* test_fixture_spin.c - decodes the H200 recording of a CUDA 13 program (context
 * creation, cudaMalloc of 1 GiB + 8 B, a kernel stream, frees) and checks the
 * counts its README states: these are facts of the real driver boundary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/rm_abi.h"
#include "core/rm_names.h"
#include "test_helpers.h"

#define FIXTURE "h200-580.159.04-cuda13.0-spin.nvtrace"

struct seen {
    uint64_t vidmem_sizes[64];
    size_t n_vidmem;
    unsigned doorbell_mmaps;
    unsigned problems;
};

static void on_event(const struct trace_event *ev, void *ctx)
{
    struct seen *seen = ctx;
    if (ev->op && ev->op->ok && ev->op->vidmem && ev->op->kind == RM_OP_ALLOC &&
        seen->n_vidmem < 64)
        seen->vidmem_sizes[seen->n_vidmem++] = ev->op->bytes;
    if (ev->op && ev->op->problem != RM_PROBLEM_NONE && ev->op->problem != RM_PROBLEM_TRUNCATED)
        seen->problems++;
    if (ev->map_kind == OBJTREE_MAP_DOORBELL)
        seen->doorbell_mmaps++;
}

static uint32_t calls(const struct trace_summary *sum, enum rm_node node, const char *name)
{
    for (size_t i = 0; i < sum->n_escapes; i++)
        if (sum->escapes[i].node == node && !strcmp(sum->escapes[i].name, name))
            return sum->escapes[i].calls;
    return 0;
}

static uint32_t created(const struct trace_summary *sum, uint32_t h_class)
{
    for (size_t i = 0; i < sum->n_classes; i++)
        if (sum->classes[i].h_class == h_class)
            return sum->classes[i].created;
    return 0;
}

static bool has_size(const struct seen *seen, uint64_t bytes)
{
    for (size_t i = 0; i < seen->n_vidmem; i++)
        if (seen->vidmem_sizes[i] == bytes)
            return true;
    return false;
}

static void test_counts_match_the_recording(void **state)
{
    (void)state;
    struct seen seen = {0};
    struct trace_session *s = trace_session_new(on_event, &seen);
    assert_non_null(s);
    assert_int_equal(replay_file(s, fixture_path(FIXTURE)), 0);
    struct trace_summary sum;
    trace_session_summary(s, &sum);

    assert_int_equal(calls(&sum, RM_NODE_CTL, "RM_ALLOC"), 113);
    assert_int_equal(calls(&sum, RM_NODE_DEV, "RM_ALLOC"), 8);
    assert_int_equal(calls(&sum, RM_NODE_CTL, "RM_CONTROL"), 196);
    assert_int_equal(calls(&sum, RM_NODE_CTL, "RM_MAP_MEMORY"), 30);
    assert_int_equal(sum.ioctls, 476);
    assert_int_equal(sum.vidmem_allocs, 19);
    assert_int_equal(seen.n_vidmem, 19);
    assert_true(has_size(&seen, 0x19e00000)); /* the context's 414 MiB */
    assert_true(has_size(&seen, 0x40000000)); /* cudaMalloc(1 GiB) */
    assert_int_equal(sum.channel_groups, 4);
    assert_int_equal(sum.channels, 20);
    assert_int_equal(sum.usermode, 2);
    assert_int_equal(created(&sum, RM_CLASS_HOPPER_USERMODE_A), 2);
    assert_int_equal(created(&sum, RM_CLASS_KEPLER_CHANNEL_GROUP_A), 4);
    assert_int_equal(sum.doorbell_mappings, 2);
    assert_int_equal(seen.doorbell_mmaps, 2);
    assert_int_equal(seen.problems, 0);
    assert_int_equal(sum.problems, 0);
    trace_session_free(s);
}

/* The program frees its memory and closes its descriptors: at exit nothing is held,
 * whether it was freed by RM_FREE or by closing the file its client lives on. */
static void test_everything_released_at_exit(void **state)
{
    (void)state;
    struct trace_session *s = trace_session_new(NULL, NULL);
    assert_int_equal(replay_file(s, fixture_path(FIXTURE)), 0);
    struct trace_summary sum;
    trace_session_summary(s, &sum);
    assert_true(sum.vidmem_peak >= 0x19e00000ull + 0x40000000ull);
    assert_int_equal(sum.vidmem_allocated, sum.vidmem_freed + sum.vidmem_now);
    trace_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_match_the_recording),
        cmocka_unit_test(test_everything_released_at_exit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
