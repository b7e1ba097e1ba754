/* test_curve.c - measured time-share curves (curve.c): a profile table's time_shares
 * written and read back; a concave curve lowers the whole-GPU time share a target needs
 * and the plan (fewer GPUs) still passes the checker, which refuses one unit less; the
 * same under interference; bad tables refused with what is wrong; without the table the
 * linear model is untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "kairos/plan.h"

static char dir[] = "/tmp/kairos-test-curve-XXXXXX";

/* A launch-bound workload on the whole H200: 1000/s alone, 500 at 25 %, 800 at 50 %. */
static const char concave[] = "model: H200-141GB\nworkload: inf\nmethod: mps\nmemory_mib: 100\n"
                              "throughput: {whole: 1000}\n"
                              "time_shares: {25: 500, 50: 800, 75: 950}\n";

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* n workloads of the table at `table` with target 400 on `gpus` H200s. */
static int load(const char *table, int n, int gpus, const char *extra, struct plan_input *in,
                char *err, size_t errlen)
{
    char path[256], cluster[1024];
    snprintf(path, sizeof(path), "%s/t.yaml", dir);
    write_file(path, table);
    snprintf(cluster, sizeof(cluster), "gpus: [{model: H200-141GB, count: %d}]\n%s"
             "workloads:\n  - {name: w, profile: %s, target: 400, count: %d}\n", gpus, extra,
             path, n);
    return plan_input_parse(cluster, strlen(cluster), "c.yaml", in, err, errlen);
}

static int gpus_used(const struct plan_input *in, const struct plan *p)
{
    struct plan_metrics m;
    plan_metrics_compute(in, p, &m);
    return m.gpus;
}

static void test_table_round_trip(void **state)
{
    struct plan_profile_table t = {.model = "H200-141GB", .workload = "w", .method = "mps",
                                   .note = "test", .mem_mib = 7, .n = 1, .option = {"whole"},
                                   .thr = {100}, .n_shares = 2, .share_pct = {25, 50},
                                   .share_thr = {40, 70.5}};
    char path[256], err[300];
    struct plan_profile_table back;
    (void)state;
    snprintf(path, sizeof(path), "%s/rt.yaml", dir);
    FILE *f = fopen(path, "w");
    assert_int_equal(plan_profile_write(&t, f), 0);
    fclose(f);
    assert_int_equal(plan_profile_load(path, &back, err, sizeof(err)), 0);
    assert_int_equal(back.n_shares, 2);
    assert_true(back.share_pct[1] == 50 && back.share_thr[1] == 70.5);
    unlink(path);
}

/* Target 400 of 1000: linear 40 %; on the curve 400 / 500 x 25 % = 20 %. */
static void test_concave_needs_less(void **state)
{
    struct plan_input in, lin;
    struct plan_gpu_model m;
    char err[512];
    (void)state;
    assert_int_equal(plan_model_builtin("H200-141GB", &m), 0);
    assert_int_equal(load(concave, 1, 1, "", &in, err, sizeof(err)), 0);
    assert_int_equal(load("model: H200-141GB\nmemory_mib: 100\nthroughput: {whole: 1000}\n", 1,
                          1, "", &lin, err, sizeof(err)), 0);
    assert_non_null(in.workloads[0].curve);
    assert_null(lin.workloads[0].curve);
    assert_int_equal(plan_time_needed(&in.workloads[0], 0, &m, PLAN_OPTION_WHOLE), 200);
    assert_int_equal(plan_time_needed(&lin.workloads[0], 0, &m, PLAN_OPTION_WHOLE), 400);
    /* the model itself: through (0, 0), the points and (1, whole) */
    assert_float_equal(plan_thr_at(&in.workloads[0], 0, 0, 100, 1.0), 200, 1e-9);
    assert_float_equal(plan_thr_at(&in.workloads[0], 0, 0, 625, 1.0), 875, 1e-9);
    assert_float_equal(plan_thr_at(&in.workloads[0], 0, 0, 1000, 1.0), 1000, 1e-9);
    assert_float_equal(plan_thr_at(&lin.workloads[0], 0, 0, 250, 1.0), 250, 1e-9);
    /* a MIG option keeps the linear model (the curve is the whole GPU's) */
    in.workloads[0].thr[0][1] = 1000;
    assert_int_equal(plan_time_needed(&in.workloads[0], 0, &m, 1), 400);
    in.workloads[0].thr[0][1] = 0;
    /* under interference: the curve at t x eff (kairos, 2 tenants: 0.986) */
    double eff = plan_interference_eff(PLAN_INTERF_KAIROS, 2);
    int t2 = plan_time_needed_shared(&in.workloads[0], 0, &m, 0, PLAN_INTERF_KAIROS, 2);
    assert_true(plan_thr_at(&in.workloads[0], 0, 0, t2, eff) >= 400 * (1 - 1e-9));
    assert_true(plan_thr_at(&in.workloads[0], 0, 0, t2 - 1, eff) < 400);
    assert_true(t2 <= 200 / eff + 1);
    plan_input_free(&in);
    plan_input_free(&lin);
}

/* Four such workloads: linear two per GPU (2 GPUs), on the curve four on one; every
 * algorithm's plan passes the checker, which refuses a share one unit short. */
static void test_plans_fewer_gpus_and_check(void **state)
{
    static const char *const modes[] = {"", "interference: kairos\n"};
    (void)state;
    for (size_t md = 0; md < 2; md++) {
        struct plan_input in, lin;
        struct plan_options o;
        char err[512];
        assert_int_equal(load(concave, 4, 4, modes[md], &in, err, sizeof(err)), 0);
        assert_int_equal(load("model: H200-141GB\nmemory_mib: 100\nthroughput: {whole: 1000}\n",
                              4, 4, modes[md], &lin, err, sizeof(err)), 0);
        for (int a = 0; a < PLAN_ALGO_COUNT; a++) {
            struct plan p, q;
            plan_options_default(&o);
            o.algo = (enum plan_algo)a;
            plan_init(&p);
            plan_init(&q);
            assert_int_equal(plan_solve(&in, &o, &p), 0);
            assert_int_equal(plan_solve(&lin, &o, &q), 0);
            if (plan_check(&in, &p, err, sizeof(err)))
                fail_msg("%s: %s", plan_algo_name(o.algo), err);
            assert_int_equal(p.n_assigns, 4);
            if (o.algo == PLAN_ALGO_KAIROS || o.algo == PLAN_ALGO_TEMPORAL) {
                assert_int_equal(gpus_used(&in, &p), 1);
                assert_int_equal(gpus_used(&lin, &q), 2);
            }
            /* the linear plan's shares still pass on the curve: it is only over-provisioned */
            assert_int_equal(plan_check(&in, &q, err, sizeof(err)), 0);
            /* one unit less than the planner gave misses the target (Best-fit gives
             * each workload a whole GPU's time, more than it needs: not checked there) */
            int a0 = 0;
            while (a0 < p.n_assigns - 1 && p.assigns[a0].time == PLAN_TIME_UNITS)
                a0++;
            if (p.assigns[a0].time-- < PLAN_TIME_UNITS &&
                (plan_check(&in, &p, err, sizeof(err)) != -22 || !strstr(err, "misses its")))
                fail_msg("%s, mode %zu: time %d passes", plan_algo_name(o.algo), md,
                         p.assigns[a0].time);
            plan_free(&p);
            plan_free(&q);
        }
        plan_input_free(&in);
        plan_input_free(&lin);
    }
}

/* Within the tolerance a point above Thr(whole) counts as Thr(whole); beyond it, or a
 * decreasing or out-of-range share, or no whole throughput: refused, saying why. */
static void test_bad_tables(void **state)
{
    static const char *const bad[][2] = {
        {"time_shares: {25: 500, 50: 400}\n", "must not decrease"},
        {"time_shares: {25: 500, 75: 1060}\n", "by more than 5 %"},
        {"time_shares: {0: 100}\n", "above 0 and below 100"},
        {"time_shares: {100: 1000}\n", "above 0 and below 100"},
        {"time_shares: {50: 500, 25: 400}\n", "ascending"},
        {"time_shares: {50: lots}\n", "two numbers"},
        {"time_shares: {50: 0}\n", "a number > 0"},
    };
    struct plan_input in;
    char err[512], table[512];
    (void)state;
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        snprintf(table, sizeof(table), "model: H200-141GB\nmemory_mib: 100\nthroughput: "
                 "{whole: 1000}\n%s", bad[k][0]);
        assert_int_equal(load(table, 1, 1, "", &in, err, sizeof(err)), -22);
        if (!strstr(err, bad[k][1]))
            fail_msg("table %zu: '%s' lacks '%s'", k, err, bad[k][1]);
    }
    assert_int_equal(load("model: H200-141GB\nmemory_mib: 100\nthroughput: {1g.18gb: 100}\n"
                          "time_shares: {50: 60}\n", 1, 1, "", &in, err, sizeof(err)), -22);
    assert_non_null(strstr(err, "needs the whole GPU's throughput"));
    assert_int_equal(load("model: H200-141GB\nmemory_mib: 100\nthroughput: {whole: 1000}\n"
                          "time_shares: {50: 700, 75: 1040}\n", 1, 1, "", &in, err,
                          sizeof(err)), 0);
    assert_true(in.workloads[0].curve->thr[0][1] == 1000);
    plan_input_free(&in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_round_trip),
        cmocka_unit_test(test_concave_needs_less),
        cmocka_unit_test(test_plans_fewer_gpus_and_check),
        cmocka_unit_test(test_bad_tables),
    };
    if (!mkdtemp(dir))
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char path[256];
    snprintf(path, sizeof(path), "%s/t.yaml", dir);
    unlink(path);
    rmdir(dir);
    return rc;
}
