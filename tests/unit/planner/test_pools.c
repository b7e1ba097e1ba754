/* test_pools.c - Kairos's joint plan of several GPU pools (pools.c): cases where the plan
 * pool by pool loses GPUs or workloads that the joint plan keeps (one only through its
 * local search), a case where the joint plan alone would lose to a plan made pool by pool,
 * and random clusters of three pools on which Kairos's default is never worse than pool by
 * pool, the joint plan alone or a baseline. Every plan passes the checker (check.c).
 * i330 and t32 were recorded with MIG time sharing and are planned so (mig_sharing);
 * the random clusters use the default, one workload per MIG instance. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kairos/plan.h"

static const char *data_dir = "data/planner";

/* Kairos (or algorithm a) with the given pools mode; the checker must accept the plan. */
static void solve_mode(const struct plan_input *in, int a, int mode, const char *what,
                       struct plan_metrics *m)
{
    struct plan_options o;
    struct plan p;
    char err[300];
    plan_options_default(&o);
    o.algo = a;
    o.pools = mode;
    assert_int_equal(plan_solve(in, &o, &p), 0);
    if (plan_check(in, &p, err, sizeof(err)))
        fail_msg("%s: %s (pools %s) fails the checker: %s", what, plan_algo_name(a),
                 plan_pools_name(mode), err);
    plan_metrics_compute(in, &p, m);
    plan_free(&p);
}

static void parse(const char *text, struct plan_input *in)
{
    char err[300];
    if (plan_input_parse(text, strlen(text), "pools.yaml", in, err, sizeof(err)))
        fail_msg("%s", err);
}

/* Two workloads that each need 60 % of an A100 and 30 % of an H200. Pool by pool the
 * A100s, listed first, take both: 2 GPUs (0.6 + 0.6 > 1). Jointly both share one H200. */
static void test_joint_fewer_gpus(void **state)
{
    static const char text[] =
        "gpus:\n"
        "  - {model: A100-40GB, count: 2}\n"
        "  - {model: H200-141GB, count: 2}\n"
        "workloads:\n"
        "  - {name: a, memory_mib: 1000, target: 60,\n"
        "     throughput: {A100-40GB: {whole: 100}, H200-141GB: {whole: 200}}}\n"
        "  - {name: b, memory_mib: 1000, target: 60,\n"
        "     throughput: {A100-40GB: {whole: 100}, H200-141GB: {whole: 200}}}\n";
    struct plan_input in;
    struct plan_metrics seq, joint, best;
    (void)state;
    parse(text, &in);
    solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_SEQUENTIAL, "fewer", &seq);
    solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_JOINT, "fewer", &joint);
    solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_BEST, "fewer", &best);
    assert_int_equal(seq.placed, 2);
    assert_int_equal(seq.gpus, 2);
    assert_int_equal(joint.placed, 2);
    assert_int_equal(joint.gpus, 1);
    assert_int_equal(best.placed, 2);
    assert_int_equal(best.gpus, 1);
    plan_input_free(&in);
}

/* One A100 (listed first) and one H200. x runs on both (60 % of the A100, 30 % of the
 * H200), y on the A100 only (60 %), z on the H200 only (60 %). Pool by pool the A100
 * keeps x, the first of two equal GPUs, and y, spilled to the H200, cannot run there: 2
 * placed, whatever the baselines do (each plans pool by pool). Jointly y goes to the
 * A100 (the only pool it can use) and x beside z on the H200: all 3. */
static void test_joint_places_more(void **state)
{
    static const char text[] =
        "gpus:\n"
        "  - {model: A100-40GB, count: 1}\n"
        "  - {model: H200-141GB, count: 1}\n"
        "workloads:\n"
        "  - {name: x, memory_mib: 1000, target: 60,\n"
        "     throughput: {A100-40GB: {whole: 100}, H200-141GB: {whole: 200}}}\n"
        "  - {name: y, memory_mib: 1000, target: 60, throughput: {A100-40GB: {whole: 100}}}\n"
        "  - {name: z, memory_mib: 1000, target: 60, throughput: {H200-141GB: {whole: 100}}}\n";
    struct plan_input in;
    struct plan_metrics seq, best;
    (void)state;
    parse(text, &in);
    solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_SEQUENTIAL, "more", &seq);
    solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_BEST, "more", &best);
    assert_int_equal(seq.placed, 2);
    assert_int_equal(best.placed, 3);
    assert_int_equal(best.gpus, 2);
    assert_int_equal(best.infeasible, 0);
    plan_input_free(&in);
}

/* Kairos by default (joint, also started from the best plan pool by pool) against Kairos
 * pool by pool and every baseline on a cluster file of data/planner/pools/: never fewer
 * workloads placed, never more GPUs for as many. */
static void assert_default_not_worse(const char *file, int placed, int gpus)
{
    static const int others[] = {PLAN_ALGO_SEED, PLAN_ALGO_TEMPORAL, PLAN_ALGO_BESTFIT,
                                 PLAN_ALGO_GPULET};
    char path[1024], err[300];
    struct plan_input in;
    struct plan_metrics seq, best, m;
    snprintf(path, sizeof(path), "%s/pools/%s", data_dir, file);
    if (plan_input_load(path, &in, err, sizeof(err)))
        fail_msg("%s", err);
    in.mig_sharing = 1;   /* recorded with MIG time sharing (--mig-time-sharing) */
    solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_SEQUENTIAL, file, &seq);
    solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_BEST, file, &best);
    assert_int_equal(seq.placed, placed);
    assert_int_equal(seq.gpus, gpus);
    assert_int_equal(best.placed, placed);
    assert_true(best.gpus <= gpus);
    for (size_t k = 0; k < sizeof(others) / sizeof(others[0]); k++) {
        solve_mode(&in, others[k], PLAN_POOLS_BEST, file, &m);
        if (m.placed > best.placed || (m.placed == best.placed && m.gpus < best.gpus))
            fail_msg("%s: %s places %d on %d GPUs, kairos %d on %d", file,
                     plan_algo_name(others[k]), m.placed, m.gpus, best.placed, best.gpus);
    }
    plan_input_free(&in);
}

/* i330 (scripts/plan-two-pools, instance 330): 25 workloads, 2 GPUs. Kairos pool by pool
 * and GPUlet-MIG place 12, the joint plan from its own starts fewer (11 when written). */
static void test_joint_not_worse_i330(void **state)
{
    (void)state;
    assert_default_not_worse("i330.yaml", 12, 2);
}

/* t32 (scripts/plan-two-pools --three, instance 32): pool by pool 16 workloads on 4 GPUs;
 * the joint starts also need 4, and the local search, moving one GPU's workloads to
 * another pool, gets them onto 3. */
static void test_joint_search_t32(void **state)
{
    char path[1024], err[300];
    struct plan_input in;
    struct plan_metrics seq, joint, best;
    (void)state;
    snprintf(path, sizeof(path), "%s/pools/t32.yaml", data_dir);
    if (plan_input_load(path, &in, err, sizeof(err)))
        fail_msg("%s", err);
    in.mig_sharing = 1;   /* recorded with MIG time sharing (--mig-time-sharing) */
    solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_SEQUENTIAL, "t32", &seq);
    solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_JOINT, "t32", &joint);
    solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_BEST, "t32", &best);
    assert_int_equal(seq.placed, 16);
    assert_int_equal(seq.gpus, 4);
    assert_int_equal(joint.placed, 16);
    assert_int_equal(joint.gpus, 3);
    assert_int_equal(best.placed, 16);
    assert_int_equal(best.gpus, 3);
    plan_input_free(&in);
}

/* A cluster of three pools (A100-40GB, H100-80GB, H200-141GB, their order rotated by the
 * seed, 1-4 GPUs each) from plan_gen's A100 workloads: on the others each workload is
 * 1.5x (H100) or 1.8x (H200) as fast, with the same exponent per MIG profile. */
static void three_pools(uint64_t seed, struct plan_input *in)
{
    static const char *const models[] = {"A100-40GB", "H100-80GB", "H200-141GB"};
    static const double speed[] = {1.0, 1.5, 1.8};
    double e = seed % 2 ? 0.7 : 1.0;
    struct plan_gen_params g = {seed, 6 + (int)(seed % 19), 1, "A100-40GB", e};
    assert_int_equal(plan_gen(&g, in), 0);
    double *base = malloc((size_t)in->n_workloads * sizeof(double));
    assert_non_null(base);
    for (int w = 0; w < in->n_workloads; w++)
        base[w] = in->workloads[w].thr[0][PLAN_OPTION_WHOLE];
    in->n_pools = 3;
    for (int k = 0; k < 3; k++) {
        int q = (int)((k + seed) % 3);
        struct plan_gpu_model *m = &in->pools[q].model;
        assert_int_equal(plan_model_builtin(models[k], m), 0);
        in->pools[q].count = 1 + (int)((seed / 3 + (uint64_t)k) % 4);
        for (int w = 0; w < in->n_workloads; w++)
            for (int o = 0; o < plan_option_count(m); o++)
                in->workloads[w].thr[q][o] = base[w] * speed[k]
                    * pow((double)plan_option_sms(m, o) / m->whole_sms, e);
    }
    free(base);
}

/* -1 if a is better than b (more placed, then fewer GPUs), 0 equal, 1 worse. */
static int cmp(const struct plan_metrics *a, const struct plan_metrics *b)
{
    if (a->placed != b->placed)
        return a->placed > b->placed ? -1 : 1;
    return (a->gpus > b->gpus) - (a->gpus < b->gpus);
}

static void test_joint_never_worse(void **state)
{
    static const int baselines[] = {PLAN_ALGO_SEED, PLAN_ALGO_TEMPORAL, PLAN_ALGO_BESTFIT,
                                    PLAN_ALGO_GPULET};
    int better = 0;
    (void)state;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        struct plan_input in;
        struct plan_metrics seq, joint, best, base;
        char what[64];
        snprintf(what, sizeof(what), "three pools, seed %llu", (unsigned long long)seed);
        three_pools(seed, &in);
        solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_SEQUENTIAL, what, &seq);
        solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_JOINT, what, &joint);
        solve_mode(&in, PLAN_ALGO_KAIROS, PLAN_POOLS_BEST, what, &best);
        if (cmp(&best, &seq) > 0 || cmp(&best, &joint) > 0)
            fail_msg("%s: kairos %d placed / %d GPUs worse than pool by pool %d / %d or "
                     "joint alone %d / %d", what, best.placed, best.gpus, seq.placed, seq.gpus,
                     joint.placed, joint.gpus);
        better += cmp(&best, &seq) < 0;
        for (size_t k = 0; k < sizeof(baselines) / sizeof(baselines[0]); k++) {
            solve_mode(&in, baselines[k], PLAN_POOLS_BEST, what, &base);
            if (cmp(&best, &base) > 0)
                fail_msg("%s: kairos %d placed / %d GPUs worse than %s %d / %d", what,
                         best.placed, best.gpus, plan_algo_name(baselines[k]), base.placed,
                         base.gpus);
        }
        plan_input_free(&in);
    }
    /* the joint plan is not just the plan pool by pool under another name */
    assert_true(better >= 6);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        data_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_joint_fewer_gpus),
        cmocka_unit_test(test_joint_places_more),
        cmocka_unit_test(test_joint_not_worse_i330),
        cmocka_unit_test(test_joint_search_t32),
        cmocka_unit_test(test_joint_never_worse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
