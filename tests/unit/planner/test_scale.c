/* test_scale.c - the indexes that made the planner scale (fit_index.c, hashed names)
 * changed no result: the seed and the three baselines give, bit for bit, the plans
 * they gave with the linear scans (fingerprints recorded on commit 7b66ce1 with the
 * same generated inputs), and the duplicate-name check still refuses duplicates.
 * The fingerprints predate one workload per MIG instance, so the plans are made with
 * --mig-time-sharing (mig_sharing): this also checks that the opt-out restores the old
 * packing bit for bit. Kairos's own plans in the default (one workload per MIG
 * instance) are checked the same way against fingerprints recorded on c2903ba, before
 * the room index (room_index.c) replaced the local search's pass over the GPUs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kairos/plan.h"

static unsigned long long fingerprint(const struct plan *p)
{
    unsigned long long h = 1469598103934665603ull;
#define MIX(x) (h = (h ^ (unsigned long long)(x)) * 1099511628211ull)
    for (int g = 0; g < p->n_gpus; g++) {
        MIX(p->gpus[g].pool);
        MIX(p->gpus[g].mig);
    }
    for (int i = 0; i < p->n_instances; i++) {
        MIX(p->instances[i].gpu);
        MIX(p->instances[i].option);
        MIX(p->instances[i].start);
    }
    for (int a = 0; a < p->n_assigns; a++) {
        MIX(p->assigns[a].workload);
        MIX(p->assigns[a].instance);
        MIX(p->assigns[a].time);
    }
    for (int f = 0; f < p->n_infeasible; f++)
        MIX(p->infeasible[f].workload);
#undef MIX
    return h;
}

/* {seed, algorithm, fingerprint on 7b66ce1}; inputs: see gen_of(). */
static const struct {
    int seed, algo;
    unsigned long long fp;
} golden[] = {
    {1, 1, 0xd1d145106216ceaaull},
    {1, 2, 0xe89edbb890d55ddbull},
    {1, 3, 0xb533ab25d8540efdull},
    {1, 4, 0x4823ddc67737fd30ull},
    {2, 1, 0xeb1d13fbe86a6885ull},
    {2, 2, 0x174ee1020b58be90ull},
    {2, 3, 0xf999092d67abada4ull},
    {2, 4, 0x174ee1020b58be90ull},
    {3, 1, 0xe5f22f9768c87d10ull},
    {3, 2, 0x7d510aadefd57189ull},
    {3, 3, 0x275cf8f1a382851cull},
    {3, 4, 0x8643a7da37dda139ull},
    {4, 1, 0xbc01038b26ee2d5eull},
    {4, 2, 0x1f48a2755f51e785ull},
    {4, 3, 0x0dd5ce36ecc7c614ull},
    {4, 4, 0x0aa8049991459bacull},
    {5, 1, 0x1b65223c607ab8b2ull},
    {5, 2, 0x1a46fe43c9fd47a8ull},
    {5, 3, 0xaecd0f286d30674bull},
    {5, 4, 0xcbe7dc7e1174b9b7ull},
    {6, 1, 0xcf7688f085caacb2ull},
    {6, 2, 0xcd7206f318ef70efull},
    {6, 3, 0x95869acdad7107efull},
    {6, 4, 0xcd7206f318ef70efull},
    {7, 1, 0x4425a854aec6527cull},
    {7, 2, 0x6d2b91c856cba418ull},
    {7, 3, 0x837cb819f2b4df35ull},
    {7, 4, 0x9dca634e8e7ae930ull},
};

/* {seed, fingerprint on c2903ba} of Kairos's plan, default options. */
static const struct {
    int seed;
    unsigned long long fp;
} golden_kairos[] = {
    {1, 0x6f4ac3cf58d8d2afull}, {2, 0x174ee1020b58be90ull}, {3, 0x95b8ebc4bf85747dull},
    {4, 0x1f48a2755f51e785ull}, {5, 0x730f977e2d283193ull}, {6, 0xcd7206f318ef70efull},
    {7, 0x1ce9f2319061d7b7ull},
};

static struct plan_gen_params gen_of(int s)
{
    static const char *const models[] = {"A100-40GB", "H200-141GB", "A100-40GB+1g.10gb"};
    return (struct plan_gen_params){(uint64_t)s, s == 7 ? 20000 : s <= 3 ? 3000 : 500, 100000,
                                    models[s % 3], s % 2 ? 0.7 : 1.0};
}

/* The fingerprint of the plan algo makes of gen_of(seed) (mig_sharing: the opt-out). */
static unsigned long long plan_fingerprint(int seed, int algo, int mig_sharing)
{
    struct plan_gen_params g = gen_of(seed);
    struct plan_input in;
    struct plan_options o;
    struct plan p;
    assert_int_equal(plan_gen(&g, &in), 0);
    in.mig_sharing = mig_sharing;
    plan_options_default(&o);
    if (algo >= 0)
        o.algo = algo;
    assert_int_equal(plan_solve(&in, &o, &p), 0);
    unsigned long long fp = fingerprint(&p);
    plan_free(&p);
    plan_input_free(&in);
    return fp;
}

static void test_same_plans_as_linear_scans(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(golden) / sizeof(golden[0]); k++)
        if (plan_fingerprint(golden[k].seed, golden[k].algo, 1) != golden[k].fp)
            fail_msg("seed %d, %s: the plan differs from the one before the indexes",
                     golden[k].seed, plan_algo_name(golden[k].algo));
}

static void test_kairos_plans_unchanged_by_the_room_index(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(golden_kairos) / sizeof(golden_kairos[0]); k++)
        if (plan_fingerprint(golden_kairos[k].seed, -1, 0) != golden_kairos[k].fp)
            fail_msg("seed %d: Kairos's plan differs from the one before the room index",
                     golden_kairos[k].seed);
}

static void test_duplicate_names_still_refused(void **state)
{
    struct plan_input in;
    char err[300], *text = malloc(5000 * 80 + 200);
    size_t len = (size_t)sprintf(text, "gpus: [{model: H200-141GB, count: 10}]\nworkloads:\n");
    (void)state;
    for (int i = 0; i < 5000; i++)
        len += (size_t)sprintf(text + len, "  - {name: w%d, memory_mib: 10, target: 1, "
                               "throughput: {whole: 10}}\n", i == 4321 ? 17 : i);
    assert_int_equal(plan_input_parse(text, len, "big.yaml", &in, err, sizeof(err)), -22);
    assert_non_null(strstr(err, "'w17' is used twice (first on line 20)"));
    /* and 5000 distinct names are fine, each found again by name */
    len = (size_t)sprintf(text, "gpus: [{model: H200-141GB, count: 10}]\nworkloads:\n");
    for (int i = 0; i < 5000; i++)
        len += (size_t)sprintf(text + len, "  - {name: w%d, memory_mib: 10, target: 1, "
                               "throughput: {whole: 10}}\n", i);
    assert_int_equal(plan_input_parse(text, len, "big.yaml", &in, err, sizeof(err)), 0);
    assert_int_equal(plan_input_find(&in, "w4321"), 4321);
    assert_int_equal(plan_input_find(&in, "w5000"), -1);
    plan_input_free(&in);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_plans_as_linear_scans),
        cmocka_unit_test(test_kairos_plans_unchanged_by_the_room_index),
        cmocka_unit_test(test_duplicate_names_still_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
