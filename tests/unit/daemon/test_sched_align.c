/* test_sched_align.c - windows aligned across GPUs (sched_tenant_set_spans) and
 * levels coupled across them (sched_couple_levels): the real scheduler (sched.c)
 * on two simulated GPUs (gpu_sim.c), as kairosd runs it (windows mode with
 * NVML-like use; auto with the shims' runnable reports), with a data-parallel
 * tenant "both" (a share on GPU 0 and GPU 1) next to a single-GPU tenant on each,
 * declared before it so that
 * slot order alone would put its windows at different phases. Per 10 us step the
 * test records whether "both" ran on each GPU and reports the overlap: the time it
 * ran on both GPUs at once over the time it ran on either. Each GPU's windows must
 * also stay in the ratio of that GPU's own shares. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/time/gpu_sim.h"
#include "daemon/time/sched.h"

#define STEP_US 10u
#define PERIODS 50u /* 5 s simulated */
#define WARMUP  10u /* periods before measuring */

/* slots of the node, shared by the GPUs as in timeshare.c */
enum { SLOT_SOLO0 = 0, SLOT_BOTH = 1, SLOT_SOLO1 = 2 };

struct one_gpu {
    struct sched_gpu g;
    struct gpu_sim sim;
    unsigned slot_of[2]; /* sim tenant index -> slot */
    uint64_t ran_us[SCHED_MAX_TENANTS];
    bool shims; /* the shims report runnable time (auto needs it to see who waits) */
};

struct result {
    double overlap;  /* ran on both / ran on either, for "both" */
    double ratio[2]; /* per GPU: both's run time / the other tenant's */
};

static void setup_gpu(struct one_gpu *o, enum sched_mode mode, unsigned solo_slot,
                      double solo_share, double both_share, bool align)
{
    memset(o, 0, sizeof *o);
    sched_gpu_init(&o->g, SCHED_PERIOD_US);
    sched_set_mode(&o->g, mode);
    o->shims = mode == SCHED_MODE_AUTO;
    struct sched_policy solo = {.share = solo_share}, both = {.share = both_share};
    assert_int_equal(sched_tenant_set(&o->g, solo_slot, &solo), 0);
    assert_int_equal(sched_tenant_set(&o->g, SLOT_BOTH, &both), 0);
    sched_tenant_set_spans(&o->g, SLOT_BOTH, align); /* what timeshare.c marks */
    struct gpu_sim_tenant_spec specs[2] = {{.name = "solo", .pol = solo, .load = GPU_SIM_DEEP},
                                           {.name = "both", .pol = both, .load = GPU_SIM_DEEP}};
    assert_int_equal(gpu_sim_init(&o->sim, NULL, specs, 2), 0);
    o->slot_of[0] = solo_slot;
    o->slot_of[1] = SLOT_BOTH;
    sched_plan(&o->g);
    for (size_t i = 0; i < 2; i++)
        gpu_sim_apply(&o->sim, i, &o->g.t[o->slot_of[i]].dec);
}

/* One step of one GPU; true when "both" (sim tenant 1) ran in it. */
static bool step(struct one_gpu *o, struct sched_usage period_use[SCHED_MAX_TENANTS])
{
    struct sched_usage use[2] = {{0}};
    gpu_sim_run(&o->sim, STEP_US, use);
    for (size_t i = 0; i < 2; i++)
        period_use[o->slot_of[i]].used_us += use[i].used_us;
    return use[1].used_us > 0;
}

static void end_period(struct one_gpu *o, struct sched_usage use[SCHED_MAX_TENANTS], bool measure)
{
    for (size_t i = 0; i < 2; i++) {
        unsigned s = o->slot_of[i];
        /* deep: runnable all period; without shims NVML's use only, as kairosd */
        use[s].runnable_us = o->shims ? SCHED_PERIOD_US : SCHED_RUNNABLE_UNKNOWN;
        if (measure)
            o->ran_us[s] += use[s].used_us;
    }
    sched_tick(&o->g, use);
    memset(use, 0, sizeof(struct sched_usage) * SCHED_MAX_TENANTS);
}

static void apply(struct one_gpu *o)
{
    for (size_t i = 0; i < 2; i++)
        gpu_sim_apply(&o->sim, i, &o->g.t[o->slot_of[i]].dec);
}

/* As kairosd: each GPU's period, then their levels coupled (sched_couple_levels),
 * GPU g in mode g; "both" marked as spanning GPUs when align. */
static struct result run_in(enum sched_mode mode0, enum sched_mode mode1, double solo0,
                            double both0, double both1, double solo1, bool align)
{
    static struct one_gpu gpu[2]; /* large: not on the stack */
    struct sched_gpu *couple = malloc(2 * sizeof *couple);
    assert_non_null(couple);
    setup_gpu(&gpu[0], mode0, SLOT_SOLO0, solo0, both0, align);
    setup_gpu(&gpu[1], mode1, SLOT_SOLO1, solo1, both1, align);
    struct sched_usage use[2][SCHED_MAX_TENANTS];
    memset(use, 0, sizeof use);
    uint64_t on_both = 0, on_either = 0;
    for (unsigned p = 0; p < PERIODS; p++) {
        bool measure = p >= WARMUP;
        for (uint32_t t = 0; t < SCHED_PERIOD_US; t += STEP_US) {
            bool r0 = step(&gpu[0], use[0]), r1 = step(&gpu[1], use[1]);
            if (measure) {
                on_both += r0 && r1;
                on_either += r0 || r1;
            }
        }
        end_period(&gpu[0], use[0], measure);
        end_period(&gpu[1], use[1], measure);
        couple[0] = gpu[0].g; /* sched_couple_levels takes the GPUs as one array */
        couple[1] = gpu[1].g;
        sched_couple_levels(couple, 2);
        gpu[0].g = couple[0];
        gpu[1].g = couple[1];
        apply(&gpu[0]);
        apply(&gpu[1]);
    }
    free(couple);
    struct result r = {.overlap = on_either ? (double)on_both / (double)on_either : 0};
    r.ratio[0] = (double)gpu[0].ran_us[SLOT_BOTH] / (double)gpu[0].ran_us[SLOT_SOLO0];
    r.ratio[1] = (double)gpu[1].ran_us[SLOT_BOTH] / (double)gpu[1].ran_us[SLOT_SOLO1];
    return r;
}

static struct result run(double solo0, double both0, double both1, double solo1, bool align)
{
    return run_in(SCHED_MODE_WINDOWS, SCHED_MODE_WINDOWS, solo0, both0, both1, solo1, align);
}

static void report(const char *what, const struct result *r)
{
    printf("# %s: overlap %.1f %%, GPU 0 both/solo0 %.3f, GPU 1 both/solo1 %.3f\n", what,
           100 * r->overlap, r->ratio[0], r->ratio[1]);
}

/* 50 % on both GPUs next to a 50 % tenant on each: without alignment slot order puts
 * "both" second on GPU 0 and first on GPU 1 - never at the same time; aligned, always. */
static void test_equal_shares_align_fully(void **state)
{
    (void)state;
    struct result before = run(0.5, 0.5, 0.5, 0.5, false);
    struct result after = run(0.5, 0.5, 0.5, 0.5, true);
    report("50/50 on both GPUs, slot order", &before);
    report("50/50 on both GPUs, aligned", &after);
    assert_true(before.overlap < 0.05);
    assert_true(after.overlap > 0.95);
    for (int g = 0; g < 2; g++) /* each GPU's shares hold: 1:1 within 3 % */
        assert_true(after.ratio[g] > 0.97 && after.ratio[g] < 1.03);
}

/* Different shares on the two GPUs (60 % next to 40 % on GPU 0, 30 % next to 70 % on
 * GPU 1): the windows start together, so the shorter one lies inside the longer. */
static void test_unequal_shares_start_together(void **state)
{
    (void)state;
    struct result before = run(0.4, 0.6, 0.3, 0.7, false);
    struct result after = run(0.4, 0.6, 0.3, 0.7, true);
    report("60 % / 30 % on GPUs 0/1, slot order", &before);
    report("60 % / 30 % on GPUs 0/1, aligned", &after);
    /* aligned: both at phase 0; it runs on both for min(60,30) of max(60,30) */
    assert_true(after.overlap > 0.45 && after.overlap < 0.55);
    assert_true(after.overlap > before.overlap + 0.2);
    assert_true(after.ratio[0] > 1.5 * 0.97 && after.ratio[0] < 1.5 * 1.03);
    assert_true(after.ratio[1] > (0.3 / 0.7) * 0.97 && after.ratio[1] < (0.3 / 0.7) * 1.03);
}

/* GPU 0 in windows ("both" at 70 % next to 30 %: where auto goes when the slices do
 * not make the shares; set here as its mode, since the simulated driver's slices
 * always do), GPU 1 in auto with 50 % next to 50 %: nobody short there, native.
 * Coupled, GPU 1 takes the windows too, "both" first: its windows on the two GPUs
 * start together (overlap near 50/70); by itself GPU 1 runs it in the driver's
 * timeslices across the whole period, half of that beside GPU 0's window. */
static void test_auto_raises_the_gpus_a_spanning_tenant_shares(void **state)
{
    (void)state;
    struct result alone =
        run_in(SCHED_MODE_WINDOWS, SCHED_MODE_AUTO, 0.3, 0.7, 0.5, 0.5, false);
    struct result coupled =
        run_in(SCHED_MODE_WINDOWS, SCHED_MODE_AUTO, 0.3, 0.7, 0.5, 0.5, true);
    report("70 % in windows / 50 % in auto on GPUs 0/1, each GPU by itself", &alone);
    report("70 % in windows / 50 % in auto on GPUs 0/1, coupled", &coupled);
    assert_true(coupled.overlap > 0.6);
    assert_true(coupled.overlap > alone.overlap + 0.15);
    assert_true(coupled.ratio[0] > (0.7 / 0.3) * 0.9); /* GPU 0's shares still hold */
    assert_true(coupled.ratio[1] > 0.9 && coupled.ratio[1] < 1.1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_raises_the_gpus_a_spanning_tenant_shares),
        cmocka_unit_test(test_equal_shares_align_fully),
        cmocka_unit_test(test_unequal_shares_start_together),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
