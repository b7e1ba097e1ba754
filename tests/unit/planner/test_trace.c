/* test_trace.c - arrival and departure traces: the trace file's rules and refusals, and
 * the replay: online moves only, a plan from scratch at every event, and the drain-aware
 * choice, which replans exactly when the GPU-seconds saved until the horizon exceed the
 * drain seconds of the workloads moved (per-workload drain_seconds over the default);
 * a replan keeps the workloads it can in place; an arrival without room is counted and
 * waits until room is made or its departure comes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "kairos/plan.h"

/* Whole-GPU workloads a (50 %), b (40 %), c (50 %), d (40 %) of an A100 pool: planned as
 * {a, c} and {b, d}; c and d leave, and {a}, {b} fit on one GPU. */
static const char cluster_text[] =
    "gpus:\n  - model: A100-40GB\n    count: COUNT\nworkloads:\n"
    "  - {name: a, memory_mib: 1000, target: 50, throughput: {whole: 100}DRAIN}\n"
    "  - {name: b, memory_mib: 1000, target: 40, throughput: {whole: 100}DRAIN}\n"
    "  - {name: c, memory_mib: 1000, target: 50, throughput: {whole: 100}}\n"
    "  - {name: d, memory_mib: 1000, target: 40, throughput: {whole: 100}}\n";

static const char trace_text[] =
    "drain_seconds: 100\nend: 1020\nevents:\n"
    "  - {at: 10, depart: c}\n"
    "  - {at: 20, depart: d}\n";

static void replace(char *s, size_t len, const char *what, const char *with)
{
    char *at, out[2048];
    while ((at = strstr(s, what))) {
        snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - s), s, with, at + strlen(what));
        snprintf(s, len, "%s", out);
    }
}

static void load(struct plan_input *in, struct plan_trace *t, const char *count, const char *drain,
                 const char *trace)
{
    char text[2048], err[512];
    snprintf(text, sizeof(text), "%s", cluster_text);
    replace(text, sizeof(text), "COUNT", count);
    replace(text, sizeof(text), "DRAIN", drain);
    if (plan_input_parse(text, strlen(text), "cluster.yaml", in, err, sizeof(err)))
        fail_msg("cluster: %s", err);
    if (plan_trace_parse(trace, strlen(trace), "trace.yaml", in, t, err, sizeof(err)))
        fail_msg("trace: %s", err);
}

static void replay(const struct plan_input *in, const struct plan_trace *t, int policy,
                   struct plan_trace_result *r)
{
    struct plan_trace_options o;
    char err[512];
    plan_trace_options_default(&o);
    o.policy = policy;
    o.max_moves = 0;   /* departures release nothing: only a replan saves the GPU */
    if (plan_trace_replay(in, t, &o, r, err, sizeof(err)))
        fail_msg("replay: %s", err);
}

static void test_parse(void **state)
{
    struct plan_input in;
    struct plan_trace t;
    (void)state;
    load(&in, &t, "4", "", "events:\n  - at: 5\n    arrive:\n      name: e\n"
         "      memory_mib: 10\n      target: 1\n      throughput: {whole: 100}\n"
         "      drain_seconds: 30\n      count: 2\n  - {at: 7, depart: e#1}\n"
         "  - {at: 7, depart: a}\n");
    assert_int_equal(t.n_initial, 4);
    assert_int_equal(in.n_workloads, 6);
    assert_int_equal(t.n_events, 4);
    assert_true(t.drain_s == PLAN_TRACE_DRAIN_DEFAULT);
    assert_true(t.end_s == 7);   /* no 'end': the last event */
    assert_int_equal(t.events[0].kind, PLAN_TRACE_ARRIVE);
    assert_int_equal(t.events[1].workload, 5);
    assert_string_equal(in.workloads[5].name, "e#1");
    assert_true(in.workloads[5].drain_s == 30);
    assert_int_equal(t.events[2].kind, PLAN_TRACE_DEPART);
    assert_int_equal(t.events[2].workload, 5);
    assert_int_equal(t.events[3].workload, 0);
    plan_trace_free(&t);
    plan_input_free(&in);
}

static void expect_refusal(const char *trace, const char *what)
{
    struct plan_input in;
    struct plan_trace t;
    char text[2048], err[512];
    snprintf(text, sizeof(text), "%s", cluster_text);
    replace(text, sizeof(text), "COUNT", "4");
    replace(text, sizeof(text), "DRAIN", "");
    assert_int_equal(plan_input_parse(text, strlen(text), "c.yaml", &in, err, sizeof(err)), 0);
    assert_int_equal(plan_trace_parse(trace, strlen(trace), "t.yaml", &in, &t, err, sizeof(err)),
                     -22);
    if (!strstr(err, what))
        fail_msg("expected '%s' in: %s", what, err);
    plan_input_free(&in);
}

static void test_refusals(void **state)
{
    (void)state;
    expect_refusal("events:\n  - {at: 9, depart: a}\n  - {at: 3, depart: b}\n",
                   "t.yaml:3:10: events must be in time order: at 3 comes after 9");
    expect_refusal("events:\n  - {at: 1, depart: zz}\n", "t.yaml:2: 'zz' departs at 1 s but no "
                   "workload of the cluster file or the trace has that name");
    expect_refusal("events:\n  - {at: 1, depart: a}\n  - {at: 2, depart: a}\n",
                   "'a' departs at 2 s but is not there then");
    expect_refusal("events:\n  - {at: 1, depart: a, arrive: {name: x}}\n",
                   "exactly one of 'arrive'");
    expect_refusal("events:\n  - {at: 1, arrive: {name: a, memory_mib: 1, target: 1, "
                   "throughput: {whole: 1}}}\n", "workload 'a' is already in the cluster");
    expect_refusal("end: 5\nevents:\n  - {at: 9, depart: a}\n",
                   "'end' (5) comes before the last event (at 9)");
    expect_refusal("drain_seconds: 0\nevents: []\n", "'drain_seconds' must be greater than 0");
    expect_refusal("events:\n  - {at: -1, depart: a}\n", "'at' must be 0 or more seconds");
    expect_refusal("evens: []\n", "unknown key 'evens'");
}

/* Online keeps two GPUs; a replan at 20 s saves one for the 1000 s left, for 100 s of
 * drain (one workload moves: the other stays where it was). */
static void test_drain_aware_replans_when_worth_it(void **state)
{
    struct plan_input in;
    struct plan_trace t;
    struct plan_trace_result on, re, da;
    (void)state;
    load(&in, &t, "4", "", trace_text);
    replay(&in, &t, PLAN_TRACE_ONLINE, &on);
    replay(&in, &t, PLAN_TRACE_REPLAN, &re);
    replay(&in, &t, PLAN_TRACE_DRAIN_AWARE, &da);
    assert_int_equal(on.n_steps, 3);
    assert_int_equal(on.steps[2].gpus, 2);
    assert_int_equal(on.moves, 0);
    assert_int_equal(on.replans, 0);
    assert_true(on.gpu_hours * 3600 > 2 * 1020 - 1e-6 && on.gpu_hours * 3600 < 2 * 1020 + 1e-6);
    assert_int_equal(da.steps[2].gpus, 1);
    assert_int_equal(da.steps[2].replanned, 1);
    assert_int_equal(da.steps[1].replanned, 0);   /* nothing to save at 10 s */
    assert_int_equal(da.moves, 1);
    assert_true(da.drain_s == 100);
    assert_true(da.gpu_hours * 3600 > 2 * 20 + 1000 - 1e-6);
    assert_true(da.gpu_hours * 3600 < 2 * 20 + 1000 + 1e-6);
    assert_int_equal(re.steps[2].gpus, 1);
    assert_true(re.replans >= 1);
    assert_true(re.drain_s >= da.drain_s);
    plan_trace_result_free(&on);
    plan_trace_result_free(&re);
    plan_trace_result_free(&da);
    plan_trace_free(&t);
    plan_input_free(&in);
}

/* The same with a and b draining 5,000 s each (their own drain_seconds): not worth it;
 * the default's own drain (--drain) applies only to the workloads without one. */
static void test_drain_aware_keeps_when_drains_cost_more(void **state)
{
    struct plan_input in;
    struct plan_trace t;
    struct plan_trace_result da;
    (void)state;
    load(&in, &t, "4", ", drain_seconds: 5000", trace_text);
    replay(&in, &t, PLAN_TRACE_DRAIN_AWARE, &da);
    assert_int_equal(da.replans, 0);
    assert_int_equal(da.steps[2].gpus, 2);
    assert_int_equal(da.steps[2].replan_gpus, 1);
    assert_true(da.steps[2].replan_drain_s == 5000);
    plan_trace_result_free(&da);
    t.drain_s = 1;   /* the default does not override a workload's own */
    replay(&in, &t, PLAN_TRACE_DRAIN_AWARE, &da);
    assert_int_equal(da.replans, 0);
    plan_trace_result_free(&da);
    plan_trace_free(&t);
    plan_input_free(&in);
}

/* With a horizon of 50 s the saving (50 GPU-seconds) no longer pays 100 s of drain. */
static void test_horizon(void **state)
{
    struct plan_input in;
    struct plan_trace t;
    struct plan_trace_result da;
    struct plan_trace_options o;
    char err[512];
    (void)state;
    load(&in, &t, "4", "", trace_text);
    plan_trace_options_default(&o);
    o.max_moves = 0;
    o.horizon_s = 50;
    assert_int_equal(plan_trace_replay(&in, &t, &o, &da, err, sizeof(err)), 0);
    assert_int_equal(da.replans, 0);
    plan_trace_result_free(&da);
    o.horizon_s = 500;
    assert_int_equal(plan_trace_replay(&in, &t, &o, &da, err, sizeof(err)), 0);
    assert_int_equal(da.replans, 1);
    plan_trace_result_free(&da);
    plan_trace_free(&t);
    plan_input_free(&in);
}

/* Two GPUs, full: an arrival that needs a whole GPU is not placed; it waits, and its
 * departure, which comes first, changes nothing but the queue (it gave up). */
static void test_unplaced_arrival(void **state)
{
    struct plan_input in;
    struct plan_trace t;
    struct plan_trace_result r;
    (void)state;
    load(&in, &t, "2", "", "end: 100\nevents:\n  - {at: 1, arrive: {name: big, memory_mib: 1, "
         "target: 90, throughput: {whole: 100}}}\n  - {at: 50, depart: big}\n");
    for (int p = 0; p < PLAN_TRACE_POLICIES; p++) {
        replay(&in, &t, p, &r);
        assert_int_equal(r.unplaced, 1);
        assert_int_equal(r.steps[1].unplaced, 1);
        assert_int_equal(r.steps[2].unplaced, 0);
        assert_int_equal(r.max_gpus, 2);
        assert_int_equal(r.steps[1].waiting, 1);
        assert_int_equal(r.steps[2].waiting, 0);
        assert_int_equal(r.gave_up, 1);
        assert_int_equal(r.waited, 0);
        assert_int_equal(r.waiting_at_end, 0);
        plan_trace_result_free(&r);
    }
    plan_trace_free(&t);
    plan_input_free(&in);
}

/* The same arrival waits until c and d have left: then a and b fit on one GPU and the
 * waiting workload takes the other, 19 s after it came, under every policy (online
 * moves by an add's fewest moves, the others by a plan from scratch, taken because it
 * places more). With d staying, no plan has room: it still waits at the end. */
static void test_waiting_arrival_starts_when_room_is_made(void **state)
{
    static const char arrive[] = "end: 100\nevents:\n  - {at: 1, arrive: {name: big, "
                                 "memory_mib: 1, target: 90, throughput: {whole: 100}}}\n"
                                 "  - {at: 10, depart: c}\n";
    char text[512];
    struct plan_input in;
    struct plan_trace t;
    struct plan_trace_result r;
    (void)state;
    snprintf(text, sizeof(text), "%s  - {at: 20, depart: d}\n", arrive);
    load(&in, &t, "2", "", text);
    for (int p = 0; p < PLAN_TRACE_POLICIES; p++) {
        replay(&in, &t, p, &r);
        assert_int_equal(r.n_steps, 4);
        assert_int_equal(r.unplaced, 1);
        assert_int_equal(r.steps[1].waiting, 1);
        assert_int_equal(r.steps[2].waiting, 1); /* a + {b, d} + big: three GPUs */
        assert_int_equal(r.steps[2].started, 0);
        assert_int_equal(r.steps[3].started, 1);
        assert_int_equal(r.steps[3].waiting, 0);
        assert_int_equal(r.steps[3].gpus, 2);
        assert_int_equal(r.waited, 1);
        assert_true(r.wait_s == 19.0 && r.max_wait_s == 19.0);
        assert_int_equal(r.gave_up, 0);
        assert_int_equal(r.waiting_at_end, 0);
        plan_trace_result_free(&r);
    }
    plan_trace_free(&t);
    plan_input_free(&in);
    load(&in, &t, "2", "", arrive);
    for (int p = 0; p < PLAN_TRACE_POLICIES; p++) {
        replay(&in, &t, p, &r);
        assert_int_equal(r.waited, 0);
        assert_int_equal(r.gave_up, 0);
        assert_int_equal(r.waiting_at_end, 1);
        assert_int_equal(r.steps[2].waiting, 1);
        plan_trace_result_free(&r);
    }
    plan_trace_free(&t);
    plan_input_free(&in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_drain_aware_replans_when_worth_it),
        cmocka_unit_test(test_drain_aware_keeps_when_drains_cost_more),
        cmocka_unit_test(test_horizon),
        cmocka_unit_test(test_unplaced_arrival),
        cmocka_unit_test(test_waiting_arrival_starts_when_room_is_made),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
