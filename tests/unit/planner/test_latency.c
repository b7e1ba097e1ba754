/* test_latency.c - p99 latency targets: parsing (p99_ms, solo_p99_ms flat or per model,
 * p99_ms in a profile table) and its refusals (a target without a solo p99 on an option
 * it could run on names the workload and what to add); the model's factors; the time a
 * p99 workload needs (unusable where solo misses, alone where even the latency tenant
 * would miss); every algorithm keeps one p99 workload per shared GPU and meets every
 * target; the checker refuses two latency tenants, a missed target and a false reason;
 * the writer of cluster files keeps the new keys. */
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

static int parse(const char *text, struct plan_input *in, char *err, size_t len)
{
    return plan_input_parse(text, strlen(text), "c.yaml", in, err, len);
}

static void test_parse(void **state)
{
    struct plan_input in;
    char err[512];
    (void)state;
    assert_int_equal(parse("gpus: [{model: H200-141GB, count: 2}, {model: A100-40GB, count: 1}]\n"
                           "workloads:\n  - {name: a, memory_mib: 10, target: 1, count: 2,\n"
                           "     throughput: {H200-141GB: {whole: 100, 1g.18gb: 20}},\n"
                           "     p99_ms: 8, solo_p99_ms: {H200-141GB: {whole: 2, 1g.18gb: 7}}}\n"
                           "  - {name: b, memory_mib: 10, target: 1, throughput: {whole: 10}}\n",
                           &in, err, sizeof(err)), 0);
    assert_int_equal(in.n_workloads, 3);
    assert_true(in.workloads[0].p99_ms == 8);
    assert_ptr_equal(in.workloads[0].lat, in.workloads[1].lat);   /* replicas share it */
    assert_true(plan_solo_p99(&in.workloads[1], 0, 0) == 2);
    assert_true(plan_solo_p99(&in.workloads[1], 0, 1) == 7);
    assert_true(plan_solo_p99(&in.workloads[1], 1, 0) == 0);
    assert_null(in.workloads[2].lat);
    assert_true(in.workloads[2].p99_ms == 0);
    assert_int_equal(plan_input_has_p99(&in), 1);
    plan_input_free(&in);
}

static void test_refusals(void **state)
{
    struct plan_input in;
    char err[512];
    (void)state;
    assert_int_equal(parse("gpus: [{model: H200-141GB, count: 2}]\nworkloads:\n"
                           "  - {name: lat, memory_mib: 10, target: 1, p99_ms: 5,\n"
                           "     throughput: {whole: 100, 3g.71gb: 40}, solo_p99_ms: {whole: 2}}\n",
                           &in, err, sizeof(err)), -22);
    assert_non_null(strstr(err, "c.yaml:3:5: workload 'lat' has a p99 target (p99_ms) but no "
                           "solo p99 on 3g.71gb of H200-141GB"));
    assert_non_null(strstr(err, "add it under 'solo_p99_ms' (or as 'p99_ms' in its profile "
                           "table)"));
    assert_int_equal(parse("gpus: [{model: H200-141GB, count: 2}]\nworkloads:\n"
                           "  - {name: x, memory_mib: 10, target: 1, p99_ms: 0,\n"
                           "     throughput: {whole: 100}}\n", &in, err, sizeof(err)), -22);
    assert_non_null(strstr(err, "'p99_ms' must be greater than 0"));
    assert_int_equal(parse("gpus: [{model: H200-141GB, count: 2}]\nworkloads:\n"
                           "  - {name: x, memory_mib: 10, target: 1, p99_ms: 3,\n"
                           "     throughput: {whole: 100}, solo_p99_ms: {2g.99gb: 1}}\n",
                           &in, err, sizeof(err)), -22);
    assert_non_null(strstr(err, "'2g.99gb' is not 'whole' or a MIG profile"));
}

/* A profile table written by kairos profile has no p99: refused with what to add; one
 * with p99_ms (before or after its throughput) is read. */
static void test_profile_table(void **state)
{
    char dir[] = "/tmp/kairos-test-latency-XXXXXX", path[256], err[512];
    struct plan_input in;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/t.yaml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("model: H200-141GB\nworkload: w\nmethod: mps\nmemory_mib: 100\n"
          "throughput: {whole: 50, 1g.18gb: 10}\n", f);
    fclose(f);
    char cluster[512];
    snprintf(cluster, sizeof(cluster), "gpus: [{model: H200-141GB, count: 1}]\nworkloads:\n"
             "  - {name: p, profile: %s, target: 5, p99_ms: 9}\n", path);
    assert_int_equal(parse(cluster, &in, err, sizeof(err)), -22);
    assert_non_null(strstr(err, "workload 'p' has a p99 target (p99_ms) but no solo p99 on "
                            "whole of H200-141GB"));
    f = fopen(path, "w");
    fputs("model: H200-141GB\nworkload: w\np99_ms: {1g.18gb: 6, whole: 2}\nmemory_mib: 100\n"
          "throughput: {whole: 50, 1g.18gb: 10}\n", f);
    fclose(f);
    assert_int_equal(parse(cluster, &in, err, sizeof(err)), 0);
    assert_true(in.workloads[0].thr[0][0] == 50);
    assert_true(plan_solo_p99(&in.workloads[0], 0, 0) == 2);
    assert_true(plan_solo_p99(&in.workloads[0], 0, 1) == 6);
    plan_input_free(&in);
    unlink(path);
    rmdir(dir);
}

static void test_model(void **state)
{
    (void)state;
    assert_true(plan_p99_factor(0, 1) == 1 && plan_p99_factor(1, 1) == 1);
    assert_true(plan_p99_factor(1, 2) == PLAN_P99_LATENCY);
    assert_true(plan_p99_factor(1, 8) == PLAN_P99_LATENCY);
    assert_true(plan_p99_factor(0, 2) == PLAN_P99_NATIVE_2);
    assert_true(plan_p99_factor(0, 3) > 11.17 && plan_p99_factor(0, 3) < 11.18);
    struct plan_gpu_model m;
    struct plan_latency lat = {0};
    struct plan_workload w = {.mem_mib = 10, .target = 20, .p99_ms = 10, .lat = &lat};
    assert_int_equal(plan_model_builtin("H200-141GB", &m), 0);
    w.thr[0][0] = 100;
    w.thr[0][1] = 25;
    lat.solo_p99_ms[0][0] = 7;    /* x 1.305 = 9.1 <= 10: may share as the latency tenant */
    lat.solo_p99_ms[0][1] = 11;   /* misses even alone */
    assert_int_equal(plan_time_needed(&w, 0, &m, 0), 200);
    assert_int_equal(plan_time_needed_shared(&w, 0, &m, 0, PLAN_INTERF_NONE, 2), 200);
    assert_int_equal(plan_time_needed(&w, 0, &m, 1), -1);
    lat.solo_p99_ms[0][0] = 8;    /* x 1.305 = 10.4 > 10: the whole GPU, alone */
    assert_int_equal(plan_time_needed(&w, 0, &m, 0), PLAN_TIME_UNITS);
    assert_int_equal(plan_time_needed_shared(&w, 0, &m, 0, PLAN_INTERF_NONE, 2), -1);
    lat.solo_p99_ms[0][1] = 9;    /* a MIG instance: held alone */
    assert_int_equal(plan_time_needed(&w, 0, &m, 1), PLAN_TIME_UNITS);
}

/* 12 whole-GPU workloads of 20 % each on H200s, n of them with a p99 target they can meet
 * as a shared GPU's latency tenant: every algorithm's plan checks, and no GPU holds two. */
static void mix_n(struct plan_input *in, int n, int n_lat, double p99)
{
    char text[8192] = "gpus: [{model: H200-141GB, count: 12}]\nworkloads:\n";
    for (int k = 0; k < n; k++) {
        size_t len = strlen(text);
        snprintf(text + len, sizeof(text) - len, "  - {name: w%d, memory_mib: 100, target: 20, "
                 "throughput: {whole: 100}%s}\n", k, k < n_lat ? ", solo_p99_ms: {whole: 4}, "
                 "p99_ms: P99" : "");
    }
    char *at, num[32];
    snprintf(num, sizeof(num), "%g", p99);
    while ((at = strstr(text, "P99"))) {
        char rest[8192];
        snprintf(rest, sizeof(rest), "%s%s", num, at + 3);
        snprintf(at, sizeof(text) - (size_t)(at - text), "%s", rest);
    }
    char err[512];
    if (parse(text, in, err, sizeof(err)))
        fail_msg("%s", err);
}

static void mix(struct plan_input *in, int n_lat, double p99)
{
    mix_n(in, 12, n_lat, p99);
}

static int most_p99_per_gpu(const struct plan_input *in, const struct plan *p)
{
    int *count = calloc((size_t)p->n_instances + 1, sizeof(int)), most = 0;
    for (int a = 0; a < p->n_assigns; a++)
        if (in->workloads[p->assigns[a].workload].p99_ms > 0)
            count[p->assigns[a].instance]++;
    for (int i = 0; i < p->n_instances; i++)
        most = count[i] > most ? count[i] : most;
    free(count);
    return most;
}

static void test_algorithms_respect_targets(void **state)
{
    (void)state;
    for (int mode = 0; mode < PLAN_INTERF_COUNT; mode++) {
        for (int algo = 0; algo < PLAN_ALGO_COUNT; algo++) {
            struct plan_input in;
            struct plan p;
            struct plan_options o;
            struct plan_metrics met;
            char err[512];
            mix(&in, 6, 6);   /* 4 ms x 1.305 = 5.2 <= 6: shares as the latency tenant */
            in.interference = mode;
            plan_options_default(&o);
            o.algo = algo;
            assert_int_equal(plan_solve(&in, &o, &p), 0);
            if (plan_check(&in, &p, err, sizeof(err)))
                fail_msg("%s, interference %d: %s", plan_algo_name(algo), mode, err);
            plan_metrics_compute(&in, &p, &met);
            assert_int_equal(met.placed, 12);
            assert_true(most_p99_per_gpu(&in, &p) <= 1);
            if (algo == PLAN_ALGO_KAIROS && mode == PLAN_INTERF_NONE)
                assert_int_equal(met.gpus, 6);   /* one latency tenant per GPU */
            if (algo == PLAN_ALGO_EXACT)
                assert_int_equal(p.exact_status, mode ? PLAN_EXACT_NO_MODEL
                                                      : PLAN_EXACT_NO_LATENCY);
            plan_free(&p);
            plan_input_free(&in);
        }
    }
}

/* A target of 5 ms (4 x 1.305 = 5.2 > 5): each p99 workload holds a GPU alone. */
static void test_tight_targets_hold_a_gpu(void **state)
{
    struct plan_input in;
    struct plan p;
    struct plan_options o;
    struct plan_metrics met;
    char err[512];
    (void)state;
    mix(&in, 3, 5);
    plan_options_default(&o);
    assert_int_equal(plan_solve(&in, &o, &p), 0);
    assert_int_equal(plan_check(&in, &p, err, sizeof(err)), 0);
    plan_metrics_compute(&in, &p, &met);
    assert_int_equal(met.gpus, 3 + 2);   /* 3 alone, 9 x 20 % on two more */
    plan_free(&p);
    plan_input_free(&in);
    mix(&in, 0, 0);
    assert_int_equal(plan_solve(&in, &o, &p), 0);
    plan_metrics_compute(&in, &p, &met);
    assert_int_equal(met.gpus, 3);       /* without targets: 12 x 20 % on three */
    plan_free(&p);
    plan_input_free(&in);
}

/* One whole GPU with the given workloads of the mix, 20 % each. */
static void one_gpu(struct plan *p, const int *ws, int n)
{
    plan_init(p);
    plan_add_gpu(p, 0, 0);
    plan_add_instance(p, 0, PLAN_OPTION_WHOLE, 0);
    for (int k = 0; k < n; k++)
        plan_add_assign(p, ws[k], 0, 200, 100);
}

static void test_checker_refusals(void **state)
{
    struct plan_input in;
    struct plan p;
    char err[512];
    (void)state;
    mix_n(&in, 3, 1, 6);
    int two[] = {0, 1}, ok[] = {0, 1, 2};
    one_gpu(&p, ok, 3);
    assert_int_equal(plan_check(&in, &p, err, sizeof(err)), 0);   /* w0 the latency tenant */
    plan_free(&p);
    plan_input_free(&in);
    mix_n(&in, 2, 2, 6);
    one_gpu(&p, two, 2);
    assert_int_equal(plan_check(&in, &p, err, sizeof(err)), -22);
    /* w1 is not the latency tenant: 4 ms x 6.086 = 24.3 > 6 */
    assert_non_null(strstr(err, "workload w1: modelled p99 24.34 ms (solo 4 ms on whole x "
                            "6.086, a tenant without latency priority of 2 tenants) misses its "
                            "p99 target 6 ms"));
    plan_free(&p);
    plan_input_free(&in);
    /* a false reason: w0 could run alone, so "p99" is not why it is left out */
    mix_n(&in, 1, 1, 6);
    plan_init(&p);
    plan_add_infeasible(&p, 0, PLAN_P99_TOO_SLOW);
    assert_int_equal(plan_check(&in, &p, err, sizeof(err)), -22);
    assert_non_null(strstr(err, "w0 is reported infeasible (no spatial option meets its p99 "
                            "target"));
    plan_free(&p);
    plan_input_free(&in);
    mix_n(&in, 1, 1, 3);   /* solo 4 ms > 3 ms everywhere: infeasible for its p99 */
    struct plan_options o;
    plan_options_default(&o);
    assert_int_equal(plan_solve(&in, &o, &p), 0);
    assert_int_equal(p.n_infeasible, 1);
    assert_int_equal(p.infeasible[0].reason, PLAN_P99_TOO_SLOW);
    assert_int_equal(plan_check(&in, &p, err, sizeof(err)), 0);
    plan_free(&p);
    plan_input_free(&in);
}

/* plan_input_write_yaml writes p99_ms, solo_p99_ms and drain_seconds back. */
static void test_write_back(void **state)
{
    struct plan_input in, again;
    char err[512], *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(parse("gpus: [{model: H200-141GB, count: 2}]\nworkloads:\n"
                           "  - {name: a, memory_mib: 10, target: 1, drain_seconds: 30,\n"
                           "     throughput: {whole: 100, 1g.18gb: 20}, p99_ms: 8,\n"
                           "     solo_p99_ms: {whole: 2, 1g.18gb: 7}}\n", &in, err, sizeof(err)),
                     0);
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(plan_input_write_yaml(&in, f), 0);
    fclose(f);
    if (plan_input_parse(buf, len, "again.yaml", &again, err, sizeof(err)))
        fail_msg("%s\n%s", err, buf);
    assert_true(again.workloads[0].p99_ms == 8 && again.workloads[0].drain_s == 30);
    assert_true(plan_solo_p99(&again.workloads[0], 0, 1) == 7);
    plan_input_free(&again);
    plan_input_free(&in);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_profile_table),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_algorithms_respect_targets),
        cmocka_unit_test(test_tight_targets_hold_a_gpu),
        cmocka_unit_test(test_checker_refusals),
        cmocka_unit_test(test_write_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
