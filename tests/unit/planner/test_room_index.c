/* test_room_index.c - the room index (room_index.c) against the pass over the GPUs it
 * replaced: after every random change to random GPUs (instances added and removed,
 * GPUs emptied for good), for every option and GPU skipped, the fullest live MIG GPU
 * with room for the option, ties to the lowest index, is the one a linear pass finds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "planner/internal.h"

#define N_GPU 300
#define N_OPTIONS 6

static unsigned next_rand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

/* What the local search's pass over the GPUs used to return. */
static int linear_best(const struct state *s, int o, int skip_gpu)
{
    int best = -1, best_c = -1;
    for (int g = 0; g < s->n_gpu; g++) {
        const struct st_gpu *gpu = &s->gpu[g];
        if (g == skip_gpu || !gpu->alive || gpu->whole || !(gpu->room >> o & 1u))
            continue;
        if (gpu->compute > best_c) {
            best = g;
            best_c = gpu->compute;
        }
    }
    return best;
}

/* A GPU's instances changed: a new compute in use and the options that still fit. */
static void change(struct state *s, int g, unsigned *seed)
{
    struct st_gpu *gpu = &s->gpu[g];
    gpu->compute = (int)(next_rand(seed) % (PLAN_COMPUTE_SLICES + 1));
    gpu->room = gpu->compute == PLAN_COMPUTE_SLICES ? 0
                                                    : next_rand(seed) & ((1u << N_OPTIONS) - 2);
    if (next_rand(seed) % 20 == 0)
        gpu->alive = 0; /* emptied: never comes back while the index lives */
}

static void test_same_answers_as_the_linear_pass(void **state)
{
    (void)state;
    unsigned seed = 11;
    struct st_gpu gpus[N_GPU];
    struct state s;
    memset(&s, 0, sizeof s);
    s.gpu = gpus;
    s.n_gpu = N_GPU;
    s.n_options = N_OPTIONS;
    int listed[N_GPU], n = 0;
    for (int g = 0; g < N_GPU; g++) {
        gpus[g] = (struct st_gpu){.alive = 1, .whole = g % 17 == 0};
        change(&s, g, &seed);
        gpus[g].alive = 1;
        if (gpus[g].whole)
            gpus[g].room = 0, gpus[g].compute = PLAN_COMPUTE_SLICES;
        if (!gpus[g].whole && gpus[g].compute < PLAN_COMPUTE_SLICES)
            listed[n++] = g;
    }
    struct room_index x = {0};
    for (int q = 0; q < n; q++)
        assert_int_equal(room_index_note(&x, &s, listed[q]), 0);
    for (int round = 0; round < 2000; round++) {
        int g = listed[next_rand(&seed) % (unsigned)n];
        if (gpus[g].alive) {
            change(&s, g, &seed);
            assert_int_equal(room_index_note(&x, &s, g), 0);
        }
        int skip = (int)(next_rand(&seed) % (N_GPU + 1)) - 1; /* -1: none skipped */
        for (int o = 1; o < N_OPTIONS; o++)
            assert_int_equal(room_index_best(&x, &s, o, skip), linear_best(&s, o, skip));
    }
    room_index_free(&x);
}

/* A GPU skipped in one search is still found by the next. */
static void test_a_skipped_gpu_stays_in_the_index(void **state)
{
    (void)state;
    struct st_gpu gpus[3] = {{.alive = 1, .compute = 3, .room = 1u << 2},
                             {.alive = 1, .compute = 5, .room = 1u << 2},
                             {.alive = 1, .compute = 5, .room = 1u << 2}};
    struct state s;
    memset(&s, 0, sizeof s);
    s.gpu = gpus;
    s.n_gpu = 3;
    s.n_options = 3;
    struct room_index x = {0};
    for (int g = 0; g < 3; g++)
        assert_int_equal(room_index_note(&x, &s, g), 0);
    assert_int_equal(room_index_best(&x, &s, 2, -1), 1); /* fullest, then lowest */
    assert_int_equal(room_index_best(&x, &s, 2, 1), 2);
    assert_int_equal(room_index_best(&x, &s, 2, 1), 2);
    assert_int_equal(room_index_best(&x, &s, 2, -1), 1);
    assert_int_equal(room_index_best(&x, &s, 1, -1), -1); /* nobody has room for 1 */
    gpus[1].room = 0;                                   /* filled up */
    assert_int_equal(room_index_note(&x, &s, 1), 0);
    assert_int_equal(room_index_best(&x, &s, 2, -1), 2);
    gpus[1].compute = 2;                                /* an instance undone */
    gpus[1].room = 1u << 2;
    assert_int_equal(room_index_note(&x, &s, 1), 0);
    assert_int_equal(room_index_best(&x, &s, 2, 2), 0);
    room_index_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_answers_as_the_linear_pass),
        cmocka_unit_test(test_a_skipped_gpu_stays_in_the_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
