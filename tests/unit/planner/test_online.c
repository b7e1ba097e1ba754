/* test_online.c - online changes: adding a workload that fits in idle time moves
 * nobody; adding beyond the free room opens a GPU or moves one workload; removing
 * can release a GPU within the move budget; every changed plan checks; idle time in a
 * MIG instance is taken only with MIG time sharing (mig_sharing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "kairos/plan.h"

static struct plan_workload workload(const char *name, int64_t mem, double target)
{
    struct plan_workload w;
    memset(&w, 0, sizeof(w));
    snprintf(w.name, sizeof(w.name), "%s", name);
    w.mem_mib = mem;
    w.target = target;
    return w;
}

/* A workload whose throughput on each option of pool 0 is its share of the SMs. */
static void add_wl(struct plan_input *in, const char *name, double target, int64_t mem)
{
    struct plan_workload w = workload(name, mem, target);
    const struct plan_gpu_model *m = &in->pools[0].model;
    for (int o = 0; o < plan_option_count(m); o++)
        w.thr[0][o] = 100.0 * plan_option_sms(m, o) / m->whole_sms;
    plan_input_add_workload(in, &w);
}

/* An input of one pool of count A100-40GB and no workloads yet. */
static void a100_pool(struct plan_input *in, int count)
{
    memset(in, 0, sizeof(*in));
    plan_model_builtin("A100-40GB", &in->pools[0].model);
    in->pools[0].count = count;
    in->n_pools = 1;
}

/* A workload that runs on whole GPUs only. */
static void add_whole(struct plan_input *in, const char *name, int64_t mem, double target)
{
    struct plan_workload w = workload(name, mem, target);
    w.thr[0][PLAN_OPTION_WHOLE] = 100.0;
    plan_input_add_workload(in, &w);
}

static void free_all(struct plan_input *in, struct plan *p, struct plan *q, struct plan_moves *mv)
{
    plan_moves_free(mv);
    plan_free(q);
    plan_free(p);
    plan_input_free(in);
}

static void setup(struct plan_input *in, struct plan *p)
{
    struct plan_options o;
    a100_pool(in, 8);
    add_wl(in, "a", 40, 1000);
    add_wl(in, "b", 30, 1000);
    add_wl(in, "c", 5, 1000);
    plan_options_default(&o);
    assert_int_equal(plan_solve(in, &o, p), 0);
}

static void assert_checks(const struct plan_input *in, const struct plan *p)
{
    char err[300];
    if (plan_check(in, p, err, sizeof(err)))
        fail_msg("changed plan fails the checker: %s", err);
}

/* The checker with removed workloads counted as gone. */
static void assert_checks_removed(const struct plan_input *in, const struct plan *p, const int *ws,
                                  int n)
{
    struct plan q;
    assert_int_equal(plan_copy(&q, p), 0);
    for (int k = 0; k < n; k++)
        plan_add_infeasible(&q, ws[k], PLAN_NO_CAPACITY);
    assert_checks(in, &q);
    plan_free(&q);
}

static void test_add_into_idle_time(void **state)
{
    struct plan_input in;
    struct plan p, q;
    struct plan_moves mv;
    struct plan_metrics before, after;
    (void)state;
    setup(&in, &p);
    plan_metrics_compute(&in, &p, &before);
    add_wl(&in, "d", 2, 500);
    assert_int_equal(plan_online_add(&in, &p, 3, &q, &mv), 0);
    assert_checks(&in, &q);
    plan_metrics_compute(&in, &q, &after);
    assert_int_equal(after.gpus, before.gpus);
    assert_int_equal(mv.n, 1);                    /* only the new workload */
    assert_int_equal(mv.moves[0].from_gpu, -1);
    free_all(&in, &p, &q, &mv);
}

/* One A100 as a 7g.40gb holding a at about 50 %; d fits in the idle time. By default
 * (one workload per MIG instance) d does not join a, and with one GPU and no free slice
 * it cannot be placed; with mig_sharing it joins a's instance without a move. */
static int add_beside_mig_tenant(int mig_sharing)
{
    struct plan_input in;
    struct plan p, q;
    struct plan_moves mv;
    a100_pool(&in, 1);
    in.mig_sharing = mig_sharing;
    add_wl(&in, "a", 45, 1000);
    plan_init(&p);
    plan_add_gpu(&p, 0, 1);
    plan_add_instance(&p, 0, 5, 0);
    plan_add_assign(&p, 0, 0, plan_time_needed(&in.workloads[0], 0, &in.pools[0].model, 5),
                    1000);
    add_wl(&in, "d", 20, 500);
    assert_int_equal(plan_online_add(&in, &p, 1, &q, &mv), 0);
    assert_checks(&in, &q);
    int d_inst = -1;
    for (int a = 0; a < q.n_assigns; a++)
        if (q.assigns[a].workload == 1)
            d_inst = q.assigns[a].instance;
    free_all(&in, &p, &q, &mv);
    return d_inst;
}

static void test_add_mig_alone(void **state)
{
    (void)state;
    assert_int_equal(add_beside_mig_tenant(0), -1);
    assert_int_equal(add_beside_mig_tenant(1), 0);
}

static void test_add_many(void **state)
{
    struct plan_input in;
    struct plan p, q;
    struct plan_moves mv;
    (void)state;
    setup(&in, &p);
    for (int i = 0; i < 12; i++) {
        char name[16];
        snprintf(name, sizeof(name), "n%d", i);
        add_wl(&in, name, 20 + i, 3000);
    }
    assert_int_equal(plan_online_add(&in, &p, 3, &q, &mv), 0);
    assert_checks(&in, &q);
    int moved = 0;
    for (int k = 0; k < mv.n; k++)
        moved += mv.moves[k].from_gpu >= 0;
    assert_true(moved <= 12);                     /* at most one move per addition */
    free_all(&in, &p, &q, &mv);
}

static void test_remove_releases_gpu(void **state)
{
    struct plan_input in;
    struct plan p, q;
    struct plan_moves mv;
    struct plan_metrics before, after;
    (void)state;
    setup(&in, &p);
    plan_metrics_compute(&in, &p, &before);
    assert_int_equal(plan_online_remove(&in, &p, (int[]){0}, 1, 2, &q, &mv), 0);
    plan_metrics_compute(&in, &q, &after);
    assert_true(after.gpus <= before.gpus);
    assert_int_equal(after.placed, 2);
    assert_true(mv.n >= 1 && mv.n <= 3);
    assert_int_equal(mv.moves[0].to_gpu, -1);     /* the removal itself */
    plan_moves_free(&mv);
    plan_free(&q);
    assert_int_equal(plan_online_remove(&in, &p, (int[]){1}, 1, 0, &q, &mv), 0);
    assert_int_equal(mv.n, 1);                    /* budget 0: nothing else moves */
    free_all(&in, &p, &q, &mv);
}

/* Whole GPUs only (MIG off): workloads named x<i>, each needing `share` of a GPU. */
static void setup_whole(struct plan_input *in, struct plan *p, int n, double share)
{
    struct plan_options o;
    a100_pool(in, 16);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "x%d", i);
        add_whole(in, name, 1000, 100.0 * share);
    }
    plan_options_default(&o);
    o.algo = PLAN_ALGO_TEMPORAL;
    assert_int_equal(plan_solve(in, &o, p), 0);
}

static int relocations(const struct plan_moves *mv)
{
    int n = 0;
    for (int k = 0; k < mv->n; k++)
        n += mv->moves[k].from_gpu >= 0 && mv->moves[k].to_gpu >= 0;
    return n;
}

/* x0 and x1 each fill 60 % of a GPU: removing x0 empties its GPU, and moving x1 there
 * would be a migration that releases nothing. */
static void test_remove_never_refills_emptied_gpu(void **state)
{
    struct plan_input in;
    struct plan p, q;
    struct plan_moves mv;
    struct plan_metrics m;
    (void)state;
    setup_whole(&in, &p, 2, 0.6);
    assert_int_equal(p.n_gpus, 2);
    assert_int_equal(plan_online_remove(&in, &p, (int[]){0}, 1, 5, &q, &mv), 0);
    assert_int_equal(relocations(&mv), 0);
    plan_metrics_compute(&in, &q, &m);
    assert_int_equal(m.gpus, 1);
    free_all(&in, &p, &q, &mv);
}

/* Eight GPUs of 30 % + 30 %... : removing two workloads with --max-moves 1 may move
 * one workload in all, not one per removed name. */
static void test_remove_one_budget_per_command(void **state)
{
    struct plan_input in;
    struct plan p, q;
    struct plan_moves mv;
    (void)state;
    setup_whole(&in, &p, 9, 0.3);   /* 3 GPUs x 3 workloads */
    assert_int_equal(p.n_gpus, 3);
    int ws[2] = {0, 3};             /* one from each of two GPUs */
    assert_int_equal(plan_online_remove(&in, &p, ws, 2, 1, &q, &mv), 0);
    assert_true(relocations(&mv) <= 1);
    assert_checks_removed(&in, &q, ws, 2);
    plan_moves_free(&mv);
    plan_free(&q);
    assert_int_equal(plan_online_remove(&in, &p, ws, 2, 0, &q, &mv), 0);
    assert_int_equal(relocations(&mv), 0);
    free_all(&in, &p, &q, &mv);
}

/* Under interference a workload joining an instance raises every tenant's share. */
static void test_add_with_interference(void **state)
{
    struct plan_input in;
    struct plan p, q;
    struct plan_moves mv;
    (void)state;
    setup_whole(&in, &p, 2, 0.45);
    in.interference = PLAN_INTERF_KAIROS;
    plan_free(&p);
    struct plan_options o;
    plan_options_default(&o);
    o.algo = PLAN_ALGO_TEMPORAL;
    assert_int_equal(plan_solve(&in, &o, &p), 0);
    assert_checks(&in, &p);
    for (int i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof(name), "y%d", i);
        add_whole(&in, name, 100, 1.0 + i);
    }
    assert_int_equal(plan_online_add(&in, &p, 2, &q, &mv), 0);
    assert_checks(&in, &q);
    free_all(&in, &p, &q, &mv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_into_idle_time),
        cmocka_unit_test(test_add_mig_alone),
        cmocka_unit_test(test_add_many),
        cmocka_unit_test(test_remove_releases_gpu),
        cmocka_unit_test(test_remove_never_refills_emptied_gpu),
        cmocka_unit_test(test_remove_one_budget_per_command),
        cmocka_unit_test(test_add_with_interference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
