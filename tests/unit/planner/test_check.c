/* test_check.c - the independent checker accepts a valid plan and rejects every kind
 * of broken plan: time, memory, target, quota, placement, overlap, compute, whole-GPU
 * mode, coverage, false infeasibility claims, pool size; and, unless the input opts
 * into MIG time sharing, two workloads in one MIG instance (kairosd cannot enforce it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "kairos/plan.h"

static struct plan_workload wl(const char *name, double target)
{
    struct plan_workload w;
    static const double thr[] = {100, 20, 40, 60, 80, 95};
    memset(&w, 0, sizeof(w));
    snprintf(w.name, sizeof(w.name), "%s", name);
    w.mem_mib = 1000;
    w.target = target;
    memcpy(w.thr[0], thr, sizeof(thr));
    memcpy(w.thr[1], thr, sizeof(thr));
    return w;
}

static void setup_input(struct plan_input *in)
{
    memset(in, 0, sizeof(*in));
    plan_model_builtin("A100-40GB", &in->pools[0].model);
    in->pools[0].count = 2;
    /* a custom model where memory does not limit compute: profile 4g.tiny, 1 slice */
    struct plan_gpu_model *m = &in->pools[1].model;
    snprintf(m->name, sizeof(m->name), "Wide");
    m->whole_sms = 100;
    m->whole_mem_mib = 8000;
    m->n_profiles = 1;
    m->profiles[0] = (struct plan_profile){"4g.tiny", 4, 1, 50, 1000, 0xffu};
    in->pools[1].count = 1;
    in->n_pools = 2;
    in->mig_sharing = 1;   /* setup_plan time-shares a MIG instance; test_mig_one_workload */
    struct plan_workload a = wl("a", 10), b = wl("b", 10);
    plan_input_add_workload(in, &a);
    plan_input_add_workload(in, &b);
}

/* GPU 0 (A100, MIG): 2g.10gb@0 holding a and b at 25 % each (40 x 0.25 = 10). */
static void setup_plan(struct plan *p)
{
    plan_init(p);
    plan_add_gpu(p, 0, 1);
    plan_add_instance(p, 0, 2, 0);
    plan_add_assign(p, 0, 0, 250, 1000);
    plan_add_assign(p, 1, 0, 250, 1000);
}

static void expect_reject(const struct plan_input *in, const struct plan *p, const char *what)
{
    char err[300];
    if (plan_check(in, p, err, sizeof(err)) == 0)
        fail_msg("checker accepted a plan with %s", what);
    if (!strstr(err, what))
        fail_msg("for '%s' the checker said: %s", what, err);
}

static void test_valid(void **state)
{
    struct plan_input in;
    struct plan p;
    char err[300];
    (void)state;
    setup_input(&in);
    setup_plan(&p);
    assert_int_equal(plan_check(&in, &p, err, sizeof(err)), 0);
    plan_free(&p);
    plan_input_free(&in);
}

static void test_broken(void **state)
{
    struct plan_input in;
    struct plan p;
    (void)state;
    setup_input(&in);

    setup_plan(&p); p.assigns[0].time = 600; p.assigns[1].time = 600;
    expect_reject(&in, &p, "time shares sum to");
    plan_free(&p);
    setup_plan(&p); p.assigns[0].mem_mib = 9000; p.assigns[1].mem_mib = 2000;
    expect_reject(&in, &p, "memory quotas sum to");
    plan_free(&p);
    setup_plan(&p); p.assigns[0].time = 200;
    expect_reject(&in, &p, "misses its target");
    plan_free(&p);
    setup_plan(&p); p.assigns[0].mem_mib = 500;
    expect_reject(&in, &p, "below its");
    plan_free(&p);
    setup_plan(&p); p.assigns[0].time = 0;
    expect_reject(&in, &p, "outside 1..");
    plan_free(&p);
    setup_plan(&p); p.instances[0].start = 1;
    expect_reject(&in, &p, "may not start at memory slice 1");
    plan_free(&p);
    setup_plan(&p); plan_add_instance(&p, 0, 1, 1);
    expect_reject(&in, &p, "overlaps");
    plan_free(&p);
    setup_plan(&p); p.instances[0].option = 0;
    expect_reject(&in, &p, "is not a MIG profile");
    plan_free(&p);
    setup_plan(&p); p.gpus[0].mig = 0;
    expect_reject(&in, &p, "MIG off but holds a MIG instance");
    plan_free(&p);
    setup_plan(&p); p.gpus[0].mig = 0; p.instances[0].option = 0; plan_add_instance(&p, 0, 0, 0);
    expect_reject(&in, &p, "holds 2 instances");
    plan_free(&p);
    setup_plan(&p); p.n_assigns = 1;
    expect_reject(&in, &p, "neither placed nor reported infeasible");
    plan_free(&p);
    setup_plan(&p); plan_add_assign(&p, 1, 0, 250, 1000);
    expect_reject(&in, &p, "placed more than once");
    plan_free(&p);
    setup_plan(&p); p.n_assigns = 1; plan_add_infeasible(&p, 1, PLAN_TOO_BIG_MEM);
    expect_reject(&in, &p, "which is not true");
    plan_free(&p);
    setup_plan(&p); plan_add_gpu(&p, 0, 1); plan_add_gpu(&p, 0, 1);
    expect_reject(&in, &p, "more than its 2 GPUs");
    plan_free(&p);
    setup_plan(&p); p.assigns[1].instance = 7;
    expect_reject(&in, &p, "instance 7 does not exist");
    plan_free(&p);
    setup_plan(&p); p.gpus[0].pool = 5;
    expect_reject(&in, &p, "pool 5 does not exist");
    plan_free(&p);
    /* compute: two 4-slice instances on the Wide model fit in memory but not in SMs */
    setup_plan(&p); p.gpus[0].pool = 1; p.instances[0].option = 1; p.instances[0].start = 0;
    plan_add_instance(&p, 0, 1, 1);
    expect_reject(&in, &p, "more than 7 compute slices");
    plan_free(&p);
    plan_input_free(&in);
}

/* Without mig_sharing (the default) a MIG instance holds one workload; sharing a whole
 * GPU, or each workload alone in its MIG instance, is accepted. */
static void test_mig_one_workload(void **state)
{
    struct plan_input in;
    struct plan p;
    char err[300];
    (void)state;
    setup_input(&in);
    in.mig_sharing = 0;
    setup_plan(&p);
    expect_reject(&in, &p, "2 workloads share a MIG instance");
    plan_free(&p);
    plan_init(&p);   /* a and b time-share a MIG-off GPU */
    plan_add_gpu(&p, 0, 0);
    plan_add_instance(&p, 0, PLAN_OPTION_WHOLE, 0);
    plan_add_assign(&p, 0, 0, 250, 1000);
    plan_add_assign(&p, 1, 0, 250, 1000);
    assert_int_equal(plan_check(&in, &p, err, sizeof(err)), 0);
    plan_free(&p);
    plan_init(&p);   /* each alone in a 2g.10gb */
    plan_add_gpu(&p, 0, 1);
    plan_add_instance(&p, 0, 2, 0);
    plan_add_instance(&p, 0, 2, 2);
    plan_add_assign(&p, 0, 0, 250, 1000);
    plan_add_assign(&p, 1, 1, 250, 1000);
    assert_int_equal(plan_check(&in, &p, err, sizeof(err)), 0);
    plan_free(&p);
    plan_input_free(&in);
}

static void test_true_infeasible(void **state)
{
    struct plan_input in;
    struct plan p;
    char err[300];
    (void)state;
    setup_input(&in);
    in.workloads[1].mem_mib = 1 << 20;
    setup_plan(&p);
    p.n_assigns = 1;
    plan_add_infeasible(&p, 1, PLAN_TOO_BIG_MEM);
    assert_int_equal(plan_check(&in, &p, err, sizeof(err)), 0);
    p.infeasible[0].reason = PLAN_TOO_SLOW;
    expect_reject(&in, &p, "which is not true");
    plan_free(&p);
    plan_input_free(&in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_broken),
        cmocka_unit_test(test_true_infeasible),
        cmocka_unit_test(test_mig_one_workload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
