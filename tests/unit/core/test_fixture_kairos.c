/* test_fixture_kairos.c - replays the recordings Kairos made on the H200 (a CUDA
 * program and a PyTorch training loop) and checks them against what the live
 * trace printed on the GPU and against what the programs did. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "test_helpers.h"

#define KSTREAM "h200-580.159.04-cuda13.0-kernel-stream"
#define TORCH "h200-580.159.04-cuda13.0-torch2.11-train"

struct sizes {
    uint64_t v[256];
    size_t n;
};

static void collect(const struct trace_event *ev, void *ctx)
{
    struct sizes *s = ctx;
    if (ev->op && ev->op->ok && ev->op->vidmem && s->n < 256)
        s->v[s->n++] = ev->op->bytes;
}

static bool has(const struct sizes *s, uint64_t bytes)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == bytes)
            return true;
    return false;
}

static json_int_t member(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);
    if (b)
        v = json_object_get(v, b);
    if (!json_is_integer(v))
        fail_msg("summary has no integer %s%s%s", a, b ? "." : "", b ? b : "");
    return json_integer_value(v);
}

static uint32_t calls_in(json_t *live, const char *node, const char *escape)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(live, "calls"), i, c)
        if (!strcmp(json_string_value(json_object_get(c, "node")), node) &&
            !strcmp(json_string_value(json_object_get(c, "escape")), escape))
            return (uint32_t)json_integer_value(json_object_get(c, "calls"));
    return 0;
}

static uint32_t calls(const struct trace_summary *sum, const char *node_name, const char *escape)
{
    for (size_t i = 0; i < sum->n_escapes; i++)
        if (!strcmp(rm_node_name(sum->escapes[i].node), node_name) &&
            !strcmp(sum->escapes[i].name, escape))
            return sum->escapes[i].calls;
    return 0;
}

/* The replay here must say what the live trace said there. */
static void replay_matches_live(const char *base, struct sizes *sizes, struct trace_summary *sum,
                                struct trace_session **out)
{
    char name[256];
    snprintf(name, sizeof name, "%s.nvtrace", base);
    struct trace_session *s = trace_session_new(collect, sizes);
    assert_int_equal(replay_file(s, fixture_path(name)), 0);
    trace_session_summary(s, sum);
    snprintf(name, sizeof name, "%s.summary.json", base);
    json_error_t jerr;
    json_t *live = json_load_file(fixture_path(name), 0, &jerr);
    if (!live)
        fail_msg("%s: %s", name, jerr.text);
    assert_int_equal(sum->ioctls, member(live, "ioctls", NULL));
    assert_int_equal(sum->mmaps, member(live, "mmaps", NULL));
    assert_int_equal(sum->vidmem_allocs, member(live, "vidmem", "allocations"));
    assert_int_equal(sum->vidmem_allocated, member(live, "vidmem", "allocated_bytes"));
    assert_int_equal(sum->vidmem_freed, member(live, "vidmem", "freed_bytes"));
    assert_int_equal(sum->vidmem_peak, member(live, "vidmem", "peak_bytes"));
    assert_int_equal(sum->channel_groups, member(live, "channel_groups", NULL));
    assert_int_equal(sum->channels, member(live, "channels", NULL));
    assert_int_equal(sum->doorbell_mappings, member(live, "doorbell_mappings", NULL));
    assert_int_equal(calls(sum, "nvidiactl", "RM_ALLOC"), calls_in(live, "nvidiactl", "RM_ALLOC"));
    assert_int_equal(sum->problems, 0);
    json_decref(live);
    *out = s;
}

static void test_cuda_program(void **state)
{
    (void)state;
    struct sizes sizes = {.n = 0};
    struct trace_summary sum;
    struct trace_session *s;
    replay_matches_live(KSTREAM, &sizes, &sum, &s);
    assert_true(has(&sizes, 0x40000000)); /* --alloc-mib 1024 */
    assert_true(has(&sizes, 0x19e00000)); /* the context's visible allocation */
    assert_true(has(&sizes, 0x200000));   /* the 8-byte counter takes a 2 MiB page */
    /* the program frees its two buffers; the context goes with the process */
    assert_int_equal(sum.vidmem_freed, 0x40000000ull + 0x200000ull);
    assert_int_equal(sum.channel_groups, 4);
    assert_int_equal(sum.channels, 20);
    assert_int_equal(sum.usermode, 2);
    trace_session_free(s);
}

/* Each channel's USERD as the shim will sample it: the recording's 20 channels put
 * theirs in one memory object (hUserdMemory[0]) at userdOffset 0x2000 + 0x3000 i,
 * mapped once at 0x200600000 (the probe on the H200 found GPGet/GPPut there). */
static void count_userds(const struct trace_event *ev, void *ctx)
{
    struct sizes *s = ctx;
    if (!ev->tree || ev->rec->kind != TREC_MMAP)
        return;
    struct objtree_userd u[32];
    size_t n = objtree_userds(ev->tree, u, 32);
    if (n < 20 || s->n)
        return;
    for (size_t i = 0; i < n && i < 32; i++)
        s->v[s->n++] = u[i].addr;
}

static void userds_of(const char *name, struct sizes *addrs)
{
    struct trace_session *s = trace_session_new(count_userds, addrs);
    assert_int_equal(replay_file(s, fixture_path(name)), 0);
    trace_session_free(s);
}

static void test_cuda_program_userd(void **state)
{
    (void)state;
    struct sizes addrs = {.n = 0};
    userds_of(KSTREAM ".nvtrace", &addrs);
    assert_int_equal(addrs.n, 20);
    for (uint64_t i = 0; i < 20; i++)
        assert_true(has(&addrs, 0x200600000ull + 0x2000 + 0x3000 * i));
    /* PyTorch's context puts them the same way (its own mapping address) */
    struct sizes torch = {.n = 0};
    userds_of(TORCH ".nvtrace", &torch);
    assert_int_equal(torch.n, 20);
    uint64_t lo = UINT64_MAX;
    for (size_t i = 0; i < torch.n; i++)
        lo = torch.v[i] < lo ? torch.v[i] : lo;
    assert_int_equal(lo % 0x1000, 0);
    for (uint64_t i = 0; i < 20; i++)
        assert_true(has(&torch, lo + 0x3000 * i));
}

static void test_pytorch_training(void **state)
{
    (void)state;
    struct sizes sizes = {.n = 0};
    struct trace_summary sum;
    struct trace_session *s;
    replay_matches_live(TORCH, &sizes, &sum, &s);
    assert_true(has(&sizes, 0x19e00000));
    assert_true(sum.vidmem_allocs > 19); /* the caching allocator's segments on top */
    assert_int_equal(sum.channel_groups, 4);
    trace_session_free(s);
}

/* Managed memory never crosses the driver boundary: the program's 1 GiB took
 * 1024 MiB of the GPU (its own output), yet the only device memory the calls show
 * is the context's, the same 518 MiB as in the CUDA program above. This is why a
 * quota at this boundary does not charge managed memory (docs/memory.md). */
static void test_managed_memory_is_invisible(void **state)
{
    (void)state;
    struct sizes sizes = {.n = 0};
    struct trace_summary sum;
    struct trace_session *s;
    replay_matches_live("h200-580.159.04-cuda13.0-managed-1g", &sizes, &sum, &s);
    for (size_t i = 0; i < sizes.n; i++)
        assert_true(sizes.v[i] < 0x40000000);
    assert_int_equal(sum.vidmem_allocated, 543162368); /* 518 MiB: the context only */
    FILE *f = fopen(fixture_path("h200-580.159.04-cuda13.0-managed-1g.stdout"), "r");
    assert_non_null(f);
    char line[256];
    assert_non_null(fgets(line, sizeof line, f));
    assert_non_null(strstr(line, "free_drop_after_touch_mib=1024.0"));
    fclose(f);
    trace_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_program),
        cmocka_unit_test(test_cuda_program_userd),
        cmocka_unit_test(test_pytorch_training),
        cmocka_unit_test(test_managed_memory_is_invisible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
