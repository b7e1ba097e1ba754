/* test_gpu_sim.c - the simulated GPU's model on its own (round robin in the
 * ratio of the timeslices for deep queues, equal shares for shallow ones, pause
 * costs), then the real scheduler against it: the stated bounds of
 * docs/scheduler.md for 2, 4 and 8 tenants, shallow queues, lending, a limit
 * next to an idle neighbour, arrivals and departures, a latency tenant. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "daemon/time/gpu_sim.h"
#include "daemon/time/sim.h"

/* Bounds stated in docs/scheduler.md (percentage points of the busy time). */
#define ERR_P95_PP 1.0      /* per window, p95, 2 and 8 tenants and shallow */
#define ERR_P95_4_PP 1.5    /* per window, p95, 3-4 deep tenants of unequal shares: the
                             * 1 pp goal is missed (1.1-1.2 pp), docs/scheduler.md says why */
#define ERR_MEAN_PP 0.5     /* the run's mean achieved share against the target */
/* In auto mode the shares' slices hold a share over a second and a run (issue 23:
 * 2 pp at p95 per 1 s window, 1 pp over a run), not in every 100 ms window, which
 * only windows do, at the cost of a pause per tenant per period; and auto tries
 * the native state again every hold. Its 100 ms windows are judged by these. */
#define ERR_P95_AUTO_PP 4.0
#define ERR_MEAN_AUTO_PP 1.0

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void run_text(const char *yaml, struct sim_result *r, struct sim_scenario *sc)
{
    char err[512];
    if (sim_scenario_parse("test.yaml", yaml, strlen(yaml), sc, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(sim_run(sc, NULL, 0, false, r), 0);
}

/* A scenario with a key twice, or a second document, is refused like kairosd.yaml. */
static void test_scenario_duplicates_refused(void **state)
{
    (void)state;
    struct sim_scenario sc;
    char err[512] = "";
    static const char dup[] = "seconds: 5\nseconds: 50\n";
    assert_int_equal(sim_scenario_parse("s.yaml", dup, strlen(dup), &sc, err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "s.yaml:2:1: 'seconds' appears twice"));
    static const char two[] = "seconds: 5\n---\nseconds: 50\n";
    assert_int_equal(sim_scenario_parse("s.yaml", two, strlen(two), &sc, err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "a second YAML document"));
}

/* Each tenant's per-window error at p95 within charged_p95 as the scheduler
 * charged it and ran_p95 as it really ran, its run's mean within ERR_MEAN_PP. */
static void assert_converged_both(const struct sim_scenario *sc, const struct sim_result *r,
                                  double charged_p95, double ran_p95)
{
    bool slices = sc->mode == SCHED_MODE_AUTO; /* judged by the goals of auto, above */
    charged_p95 = slices ? fmax(charged_p95, ERR_P95_AUTO_PP) : charged_p95;
    ran_p95 = slices ? fmax(ran_p95, ERR_P95_AUTO_PP) : ran_p95;
    double mean = slices ? ERR_MEAN_AUTO_PP : ERR_MEAN_PP;
    for (size_t i = 0; i < sc->n; i++) {
        const struct sim_tenant_result *t = &r->t[i];
        print_message("  %s: target %.2f%% achieved %.2f%% ran %.2f%% err p50 %.2f p95 %.2f "
                      "ran p95 %.2f (%zu windows)\n", sc->tenants[i].name, t->target * 100,
                      t->achieved * 100, t->gpu * 100, t->err_p50, t->err_p95, t->used_err_p95,
                      t->windows);
        assert_true(t->windows > 0);
        assert_true(t->err_p95 <= charged_p95);
        assert_true(t->used_err_p95 <= ran_p95);
        assert_true(100 * (t->achieved > t->target ? t->achieved - t->target
                                                   : t->target - t->achieved) <= mean);
    }
}

static void assert_converged(const struct sim_scenario *sc, const struct sim_result *r,
                             double p95_bound)
{
    assert_converged_both(sc, r, p95_bound, p95_bound);
}

static void test_model_round_robin_ratio(void **state)
{
    (void)state;
    struct gpu_sim_tenant_spec sp[2] = {{.name = "a"}, {.name = "b"}};
    struct gpu_sim s;
    assert_int_equal(gpu_sim_init(&s, NULL, sp, 2), 0);
    struct sched_decision a = {.timeslice_us = 6000}, b = {.timeslice_us = 2000};
    gpu_sim_apply(&s, 0, &a);
    gpu_sim_apply(&s, 1, &b);
    struct sched_usage use[2];
    uint64_t busy = gpu_sim_run(&s, 1000000, use);
    double ratio = (double)use[0].used_us / (double)use[1].used_us;
    assert_true(ratio > 2.95 && ratio < 3.05);            /* the H200's 3.00 */
    /* two switches of 120 us per 8 ms round: the H200 kept 96.7-98.5 % so */
    assert_true(busy > 960000 && busy < 980000);
}

static void test_model_shallow_ignores_timeslices(void **state)
{
    (void)state;
    struct gpu_sim_tenant_spec sp[2] = {
        {.name = "a", .load = GPU_SIM_SHALLOW, .work_us = 500, .gap_us = 50},
        {.name = "b", .load = GPU_SIM_SHALLOW, .work_us = 500, .gap_us = 50}};
    struct gpu_sim s;
    gpu_sim_init(&s, NULL, sp, 2);
    struct sched_decision a = {.timeslice_us = 6000}, b = {.timeslice_us = 2000};
    gpu_sim_apply(&s, 0, &a);
    gpu_sim_apply(&s, 1, &b);
    struct sched_usage use[2];
    gpu_sim_run(&s, 1000000, use);
    double ratio = (double)use[0].used_us / (double)use[1].used_us;
    assert_true(ratio > 0.97 && ratio < 1.03); /* slices never expire: equal */
}

static void test_model_window_pause_costs(void **state)
{
    (void)state;
    struct gpu_sim_tenant_spec sp[1] = {{.name = "a"}};
    struct gpu_sim s;
    gpu_sim_init(&s, NULL, sp, 1);
    struct sched_decision w = {.period_us = 100000, .phase_us = 0, .duty_us = 50000};
    gpu_sim_apply(&s, 0, &w);
    struct sched_usage use[1];
    /* opens at once (never closed), closes 720 us late; a first switch of 120 us;
     * the pause of a tenant with work queued costs the GPU 600 us */
    gpu_sim_run(&s, 100000, use);
    assert_in_range(use[0].used_us, 50000 + 720 - 120 - 10, 50000 + 720 - 120 + 10);
    assert_int_equal(s.switch_us, 120 + 600);
    gpu_sim_run(&s, 100000, use); /* opens 400 us late, closes 720 us late */
    assert_in_range(use[0].used_us, 50000 - 400 + 720 - 20, 50000 - 400 + 720 + 20);
    assert_int_equal(use[0].runnable_us, 100000);
}

/* The scenario yaml natively, in auto and in windows mode: how busy the GPU was
 * and in how many periods a tenant was paused, in that order. */
static void native_auto_windows(const char *yaml, double busy[3], size_t paused[3])
{
    static const char *const modes[] = {"native", "auto", "windows"};
    for (size_t k = 0; k < 3; k++) {
        struct sim_scenario sc;
        struct sim_result r;
        char err[256];
        assert_int_equal(sim_scenario_parse("t.yaml", yaml, strlen(yaml), &sc, err, sizeof err),
                         0);
        assert_true(sim_scenario_set_mode(&sc, modes[k]));
        assert_int_equal(sim_run(&sc, NULL, 0, false, &r), 0);
        busy[k] = r.busy;
        paused[k] = r.paused;
        print_message("  %s: busy %.1f%%, %zu periods with a pause\n", modes[k], r.busy * 100,
                      r.paused);
    }
}

/* Four launch-bound inference processes at equal shares (etc/sim/four-inference.yaml),
 * in each mode against the GPU without Kairos: nobody is short, so auto never
 * pauses anyone and keeps the native throughput, where windows idle the GPU while
 * a window's owner is on the CPU (on the H200: 210 requests/s in windows against
 * 486 natively). */
static void test_no_pause_without_contention(void **state)
{
    (void)state;
    static const char yaml[] =
        "seconds: 20\nmeasure: userd\ntenants:\n"
        "  - { name: i1, compute: { share: 25% }, load: shallow, work_us: 50, gap_us: 100 }\n"
        "  - { name: i2, compute: { share: 25% }, load: shallow, work_us: 50, gap_us: 100 }\n"
        "  - { name: i3, compute: { share: 25% }, load: shallow, work_us: 50, gap_us: 100 }\n"
        "  - { name: i4, compute: { share: 25% }, load: shallow, work_us: 50, gap_us: 100 }\n";
    double busy[3];
    size_t paused[3];
    native_auto_windows(yaml, busy, paused);
    assert_int_equal(paused[1], 0);
    assert_true(busy[1] >= 0.99 * busy[0]);
    assert_true(paused[2] > 150);
    assert_true(busy[2] <= 0.7 * busy[0]); /* the harm auto avoids */
}

/* Three launch-bound tenants at 70/30/0: natively each gets a third, so the 70 %
 * one is short; neither the slices (it never fills one) nor windows (alone in its
 * window it idles the GPU while it is on the CPU) can give it more. Auto tries
 * the windows, sees the GPU much less busy in them, and goes back to the slices
 * for as long as the active set stays: no less than 0.95 of native, where windows
 * keep half. */
static void test_windows_that_idle_the_gpu_are_dropped(void **state)
{
    (void)state;
    static const char yaml[] =
        "seconds: 20\nmeasure: userd\ntenants:\n"
        "  - { name: a, compute: { share: 70% }, load: shallow, work_us: 50, gap_us: 100 }\n"
        "  - { name: b, compute: { share: 30% }, load: shallow, work_us: 50, gap_us: 100 }\n"
        "  - { name: c, load: shallow, work_us: 50, gap_us: 100 }\n";
    double busy[3];
    size_t paused[3];
    native_auto_windows(yaml, busy, paused);
    assert_true(paused[1] > 0 && paused[1] <= 20); /* one trial of the windows */
    assert_true(busy[1] >= 0.95 * busy[0]);
    assert_true(busy[2] <= 0.6 * busy[0]);
}

static void test_two_deep_75_25(void **state)
{
    (void)state;
    struct sim_scenario sc;
    struct sim_result r;
    run_text("seconds: 20\ntenants:\n"
             "  - { name: a, compute: { share: 75% }, load: deep }\n"
             "  - { name: b, compute: { share: 25% }, load: deep }\n", &r, &sc);
    assert_converged(&sc, &r, ERR_P95_PP);
    assert_true(r.busy > 0.965); /* the shares' slices, 6 / 2 ms; natively 94.0 % */
}

static void test_four_deep(void **state)
{
    (void)state;
    struct sim_scenario sc;
    struct sim_result r;
    run_text("seconds: 20\ntenants:\n"
             "  - { name: a, compute: { share: 40% }, load: deep }\n"
             "  - { name: b, compute: { share: 30% }, load: deep }\n"
             "  - { name: c, compute: { share: 20% }, load: deep }\n"
             "  - { name: d, compute: { share: 10% }, load: deep }\n", &r, &sc);
    assert_converged(&sc, &r, ERR_P95_4_PP);
}

/* kairosd's default on a real GPU: strict windows, and only use (no runnable time)
 * with whether each tenant's process lives, as NVML and the ledger give it. */
static void test_windows_as_kairosd_sees_the_gpu(void **state)
{
    (void)state;
    struct sim_scenario sc;
    struct sim_result r;
    run_text("seconds: 20\nmode: windows\nmeasure: nvml\ntenants:\n"
             "  - { name: a, compute: { share: 40% }, load: deep }\n"
             "  - { name: b, compute: { share: 30% }, load: deep }\n"
             "  - { name: c, compute: { share: 20% }, load: deep }\n"
             "  - { name: d, compute: { share: 10% }, load: deep }\n", &r, &sc);
    assert_converged(&sc, &r, ERR_P95_PP); /* the 1 pp goal, met in windows */
    assert_true(r.busy >= 0.97); /* four pauses per period; the H200 kept 97.7 % */
    /* arrivals and departures: the windows are laid out again for who is there */
    run_text("seconds: 30\nmode: windows\nmeasure: nvml\ntenants:\n"
             "  - { name: a, compute: { share: 50% }, load: deep }\n"
             "  - { name: b, compute: { share: 30% }, load: deep, arrive_s: 5, leave_s: 20 }\n"
             "  - { name: c, compute: { share: 20% }, load: deep, arrive_s: 10 }\n", &r, &sc);
    assert_converged(&sc, &r, ERR_P95_PP);
}

/* Windows as on a GPU with a latency tenant: its requests run over the others'
 * windows (it is never paused); the two others split the rest 2:1. */
static void test_windows_with_a_latency_tenant(void **state)
{
    (void)state;
    struct sim_scenario sc;
    struct sim_result r;
    run_text("seconds: 10\nmode: windows\nmeasure: nvml\ntenants:\n"
             "  - { name: infer, compute: { share: 25%, priority: latency }, load: requests, "
             "work_us: 2000, gap_us: 20000 }\n"
             "  - { name: a, compute: { share: 50% }, load: deep }\n"
             "  - { name: b, compute: { share: 25%, priority: batch }, load: deep }\n", &r, &sc);
    double ratio = r.t[1].gpu / r.t[2].gpu;
    print_message("  latency p95 %llu us (solo %llu); a %.2f%% b %.2f%% of the GPU (%.2f:1)\n",
                  (unsigned long long)r.t[0].lat_p95_us, (unsigned long long)r.t[0].lat_solo_us,
                  r.t[1].gpu * 100, r.t[2].gpu * 100, ratio);
    assert_true(ratio > 1.9 && ratio < 2.1);
    /* bound: solo + the longest other slice (a's 2 ms) + two switches + a step */
    assert_true(r.t[0].lat_p95_us <= r.t[0].lat_solo_us + 2000 + 2 * 120 + 10);
}

/* The same with the shims' runnable reports (measure: userd), in windows and in
 * auto mode: the two windowed tenants' windows fill the period between them
 * (their debts are shares of what the windows delivered among the windowed
 * tenants; counting the latency tenant's target left a hole of 5 ms per period,
 * 93.7 % busy) and the latency tenant is never paused in either mode. */
static void test_latency_tenant_with_reports(void **state)
{
    (void)state;
    static const char *const modes[] = {"windows", "auto"};
    for (size_t k = 0; k < 2; k++) {
        struct sim_scenario sc;
        struct sim_result r;
        char yaml[1024];
        snprintf(yaml, sizeof yaml,
                 "seconds: 10\nmode: %s\nmeasure: userd\ntenants:\n"
                 "  - { name: infer, compute: { share: 25%%, priority: latency }, load: requests, "
                 "work_us: 2000, gap_us: 20000 }\n"
                 "  - { name: a, compute: { share: 50%% }, load: deep }\n"
                 "  - { name: b, compute: { share: 25%%, priority: batch }, load: deep }\n",
                 modes[k]);
        run_text(yaml, &r, &sc);
        double ratio = r.t[1].gpu / r.t[2].gpu;
        print_message("  %s: latency p95 %llu us (solo %llu); a %.2f%% b %.2f%% (%.2f:1), "
                      "busy %.1f%%\n", modes[k], (unsigned long long)r.t[0].lat_p95_us,
                      (unsigned long long)r.t[0].lat_solo_us, r.t[1].gpu * 100, r.t[2].gpu * 100,
                      ratio, r.busy * 100);
        assert_true(ratio > 1.85 && ratio < 2.15);
        assert_true(r.busy >= 0.965);
        assert_true(r.t[0].lat_p95_us <= r.t[0].lat_solo_us + 2000 + 2 * 120 + 10);
    }
}

/* Auto mode next to saturating training (etc/sim/latency-auto.yaml): the latency
 * tenant waits behind each training timeslice, so it runs below what it wanted;
 * that must not window (pause) it: its latency stays what timeslices give. And
 * the training tenant's yield slice (latency_yield_us) is what a request waits:
 * with the rule off (0) it waits up to a whole batch slice (1 ms). */
static void test_auto_protects_a_latency_tenant(void **state)
{
    (void)state;
    static const char yaml[] =
        "seconds: 20\nmode: %s\nmeasure: userd\nlatency_yield_us: %u\ntenants:\n"
        "  - { name: infer, compute: { share: 50%%, priority: latency }, load: requests, "
        "work_us: 4000, gap_us: 10000 }\n"
        "  - { name: train, compute: { share: 50%%, priority: batch }, load: deep }\n";
    struct sim_result r[3];
    static const char *const modes[] = {"auto", "timeslices", "auto"};
    static const unsigned yield[] = {SCHED_YIELD_US, SCHED_YIELD_US, 0};
    for (size_t k = 0; k < 3; k++) {
        struct sim_scenario sc;
        char text[1024];
        snprintf(text, sizeof text, yaml, modes[k], yield[k]);
        run_text(text, &r[k], &sc);
        print_message("  %s, yield %u us: latency p50 %llu us p95 %llu us (solo %llu), "
                      "train %.1f%%, busy %.1f%%\n", modes[k], yield[k],
                      (unsigned long long)r[k].t[0].lat_p50_us,
                      (unsigned long long)r[k].t[0].lat_p95_us,
                      (unsigned long long)r[k].t[0].lat_solo_us, r[k].t[1].gpu * 100,
                      r[k].busy * 100);
    }
    /* solo + one yield slice + two switches + a step, as in timeslices */
    assert_true(r[0].t[0].lat_p95_us <= r[0].t[0].lat_solo_us + SCHED_YIELD_US + 2 * 120 + 10);
    assert_true(r[0].t[0].lat_p95_us <= r[1].t[0].lat_p95_us + 10);
    assert_true(r[0].t[1].gpu >= 0.55); /* training keeps what the requests leave */
    /* without the yield slice a request waits for most of a 1 ms batch slice */
    assert_true(r[2].t[0].lat_p95_us <= r[2].t[0].lat_solo_us + SCHED_TS_BATCH_US + 2 * 120 + 10);
    assert_true(r[2].t[0].lat_p95_us >= r[0].t[0].lat_p95_us + (SCHED_TS_BATCH_US - SCHED_YIELD_US) / 2);
}

/* A latency tenant that keeps the GPU busy (a deep queue, share 50 %) next to a
 * deep batch tenant: not yielded to, it gets what its 8 ms slice against the
 * batch tenant's 1 ms gives (8/9 less switches), not 8000/8050 of the GPU. */
static void test_busy_latency_tenant_not_yielded_to(void **state)
{
    (void)state;
    struct sim_scenario sc;
    struct sim_result r;
    run_text("seconds: 10\nmode: timeslices\nmeasure: userd\ntenants:\n"
             "  - { name: hog, compute: { share: 50%, priority: latency }, load: deep }\n"
             "  - { name: train, compute: { share: 50%, priority: batch }, load: deep }\n",
             &r, &sc);
    print_message("  hog %.1f%%, train %.1f%% of the GPU\n", r.t[0].gpu * 100, r.t[1].gpu * 100);
    assert_true(r.t[0].gpu < 0.90);
    assert_true(r.t[1].gpu > 0.08);
}

/* Deep tenants only, 2, 4 and 8 (75/25, 40/30/20/10, 8 x 12.5) in auto mode,
 * against the same GPU without Kairos: the unequal shares, which the driver
 * splits evenly, get the shares' slices (the smallest share 2048 us, as CUDA's
 * own) and keep them within the goals of auto, at least as busy as natively; the
 * equal ones stay native. When the scheduler knows who ran, and as kairosd sees a
 * GPU (measure: userd, NVML sampled five times a second as on the H200): what a
 * tenant ran is then its shims' progress time (judged by NVML's samples, the auto
 * of before moved to windows: on the H200 0.975 and 0.953 aggregate with 4 and 8
 * tenants). */
static void test_deep_tenants_no_less_busy_than_natively(void **state)
{
    (void)state;
    static const char *const shares[] = {"75 25", "40 30 20 10",
                                         "12.5 12.5 12.5 12.5 12.5 12.5 12.5 12.5"};
    for (size_t k = 0; k < 6; k++) {
        char yaml[2048];
        snprintf(yaml, sizeof yaml, "seconds: 20\nmode: auto\nmeasure: %s\ntenants:\n",
                 k < 3 ? "runnable" : "userd\ngpu: { nvml_sample_us: 200000 }");
        char list[64];
        snprintf(list, sizeof list, "%s", shares[k % 3]);
        int i = 0;
        for (char *save = NULL, *w = strtok_r(list, " ", &save); w;
             w = strtok_r(NULL, " ", &save), i++) {
            size_t len = strlen(yaml);
            snprintf(yaml + len, sizeof yaml - len,
                     "  - { name: t%d, compute: { share: %s%% }, load: deep }\n", i, w);
        }
        struct sim_scenario sc;
        struct sim_result r, native;
        run_text(yaml, &r, &sc);
        sim_scenario_set_mode(&sc, "native");
        assert_int_equal(sim_run(&sc, NULL, 0, false, &native), 0);
        sim_scenario_set_mode(&sc, "auto");
        print_message("  %d tenants, %s: busy %.2f%% (natively %.2f%%)\n", i,
                      k < 3 ? "exact use" : "NVML's samples and the shims' progress", r.busy * 100,
                      native.busy * 100);
        /* as charged by the shims' progress: off by up to a sample (1 ms) per slice
         * (40/30/20/10: 4.68 pp at p95 as charged, 3.14 as it ran) */
        assert_converged_both(&sc, &r, k < 3 ? ERR_P95_AUTO_PP : 5.0, ERR_P95_AUTO_PP);
        assert_true(r.busy >= native.busy - 0.002);
    }
}

/* Bursty inference (share 50 %: deep for 400 ms, idle for 300 ms, its process
 * alive) next to training (50 %), the GPU suite's bursty-50-train, in auto and
 * windows modes with what kairosd sees on a GPU (the shims' runnable time, NVML's
 * use of the last second): in every window of a spell but the first, infer's
 * part of the busy time within 1 pp of 50 % (p95), and training gets the whole
 * GPU in every window of an idle spell but the first. On the H200 (gpu-run-9)
 * NVML's stale use kept infer active and nothing was lent (training 0.491 of
 * solo while infer idled); so did this model before sched.c took activity from
 * the runnable time alone. Read from the per-window JSON. */
static void bursty_next_to_training(const char *mode)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "seconds: 21\nmode: %s\nmeasure: userd\ntenants:\n"
             "  - { name: infer, compute: { share: 50%% }, load: bursty, work_us: 400000, "
             "gap_us: 300000 }\n"
             "  - { name: train, compute: { share: 50%% }, load: deep }\n", mode);
    struct sim_scenario sc;
    struct sim_result r;
    char err[512], *doc = NULL;
    size_t len = 0;
    if (sim_scenario_parse("bursty.yaml", yaml, strlen(yaml), &sc, err, sizeof err))
        fail_msg("%s", err);
    FILE *f = open_memstream(&doc, &len);
    assert_non_null(f);
    assert_int_equal(sim_run(&sc, f, 1, true, &r), 0);
    fclose(f);
    json_t *root = json_loads(doc, 0, NULL);
    free(doc);
    assert_non_null(root);
    json_t *windows = json_object_get(root, "windows");
    double errs[256];
    size_t n = 0, lent = 0, idle = 0;
    for (size_t k = 0; k < json_array_size(windows); k++) {
        json_t *gt = json_object_get(json_array_get(windows, k), "gpu_time");
        double in = json_real_value(json_array_get(json_object_get(gt, "infer"), 1));
        double tr = json_real_value(json_array_get(json_object_get(gt, "train"), 1));
        unsigned at = (unsigned)(k % 7); /* 100 ms windows in a 700 ms cycle */
        if (at >= 1 && at <= 3 && n < 256 && in + tr > 0)
            errs[n++] = fabs(in / (in + tr) - 0.5) * 100;
        else if (at >= 5) {
            idle++;
            lent += tr >= 0.99;
        }
    }
    json_decref(root);
    qsort(errs, n, sizeof *errs, cmp_double);
    double p95 = errs[(size_t)(0.95 * (double)(n - 1) + 0.5)];
    print_message("  %s: infer's part of busy time: p95 err %.2f pp over %zu windows; training "
                  "alone at >= 99 %% in %zu of %zu idle windows; busy %.1f%%\n", mode, p95, n,
                  lent, idle, r.busy * 100);
    assert_true(n >= 80);
    assert_true(p95 <= 1.0);
    assert_int_equal(lent, idle);
}

static void test_bursty_inference_next_to_training(void **state)
{
    (void)state;
    bursty_next_to_training("auto");
    bursty_next_to_training("windows");
}

/* The same mix as the GPU runs it: the spells start at an instant of kairosd's
 * period of their own (37 ms in), each shim reports at its own instant (30 and
 * 60 ms into each period: kairosd's tick sees a report that ends up to a period
 * before it), and the 100 ms windows judged are the spells' own, as the GPU
 * suite's bursty case cuts them (from the trace of each tenant's work per 1 ms).
 * Judged from 1.5 s on, as on the GPU. *first: p95 over the spells of the error
 * of infer's part of the busy time in the first 100 ms of each spell; *rest: in
 * the later windows of the spells; *lent: training's mean fraction of the GPU in
 * the windows of the idle spells but the first. */
static void spells_as_on_the_gpu(const char *mode, double *first, double *rest, double *lent,
                                 double *lent_late, size_t *wakes)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "seconds: 21\nmode: %s\nmeasure: userd\ngpu: { report_phase_us: 30000 }\n"
             "tenants:\n"
             "  - { name: infer, compute: { share: 50%% }, load: bursty, work_us: 400000, "
             "gap_us: 300000, arrive_s: 0.037 }\n"
             "  - { name: train, compute: { share: 50%% }, load: deep }\n", mode);
    struct sim_scenario sc;
    struct sim_result r;
    char err[512];
    if (sim_scenario_parse("spells.yaml", yaml, strlen(yaml), &sc, err, sizeof err))
        fail_msg("%s", err);
    sc.trace = true;
    assert_int_equal(sim_run(&sc, NULL, 0, false, &r), 0);
    assert_non_null(r.trace);
    const size_t W = SCHED_PERIOD_US / SIM_CHUNK_US, cycle = 7 * W, at0 = 37;
    double e0[64], e1[256], idle_sum = 0, late_min = 1;
    size_t n0 = 0, n1 = 0, n_idle = 0;
    for (size_t s0 = at0; s0 + cycle <= r.trace_n; s0 += cycle) {
        if (s0 < 15 * W)
            continue; /* the first 1.5 s */
        for (size_t j = 0; j < 7; j++) {
            double in = 0, tr = 0;
            for (size_t c = s0 + j * W; c < s0 + (j + 1) * W; c++) {
                in += (double)r.trace[c][0];
                tr += (double)r.trace[c][1];
            }
            if (j < 4 && in + tr > 0) {
                double e = fabs(in / (in + tr) - 0.5) * 100;
                if (j == 0 && n0 < 64)
                    e0[n0++] = e;
                else if (j > 0 && n1 < 256)
                    e1[n1++] = e;
            } else if (j >= 5) {
                idle_sum += tr / SCHED_PERIOD_US;
                n_idle++;
                if (j == 6 && tr / SCHED_PERIOD_US < late_min)
                    late_min = tr / SCHED_PERIOD_US;
            }
        }
    }
    free(r.trace);
    assert_true(n0 >= 20 && n1 >= 60 && n_idle >= 40);
    qsort(e0, n0, sizeof *e0, cmp_double);
    qsort(e1, n1, sizeof *e1, cmp_double);
    *first = e0[(size_t)(0.95 * (double)(n0 - 1) + 0.5)];
    *rest = e1[(size_t)(0.95 * (double)(n1 - 1) + 0.5)];
    *lent = idle_sum / (double)n_idle;
    *lent_late = late_min;
    *wakes = r.wakes;
    print_message("  %s: infer's part of busy time, p95 err: first window of a spell %.2f pp "
                  "(%zu), the others %.2f pp (%zu); training %.3f of the GPU in idle windows "
                  "but the first, at least %.3f in the last (200-300 ms idle); %zu wakes, %zu "
                  "idle reports acted on; busy %.1f%%\n", mode, *first, n0, *rest, n1, *lent,
                  *lent_late, *wakes, r.idled, r.busy * 100);
}

/* A tenant back from an idle spell has its share from its first window: its
 * shim's wake makes kairosd plan again at once, its window rotated to start then
 * (before, the share came back only when a report showed the work, up to two
 * periods later: the windows began inside a judged window, 19.60 pp at p95 here
 * in windows mode; on the H200 windows missed by 16.04 pp and auto by 3.55 pp).
 * Auto no longer windows it for NVML's second of stale use (it lent nothing in
 * the idle windows once windowed), and now leaves the two to the driver: nobody
 * is short of its share, so a wake has no window to move (none is counted). */
static void test_bursty_spells_as_on_the_gpu(void **state)
{
    (void)state;
    static const char *const modes[] = {"windows", "auto"};
    for (size_t k = 0; k < 2; k++) {
        double first, rest, lent, lent_late;
        size_t wakes;
        spells_as_on_the_gpu(modes[k], &first, &rest, &lent, &lent_late, &wakes);
        assert_true(k == 1 ? wakes == 0 : wakes >= 25); /* windows: one per spell */
        assert_true(first <= 1.0);
        assert_true(rest <= 1.0);
        /* while infer idles: auto lends it all, and so do windows since the
         * shim says so 20 ms into an idle spell (KAIROS_RUNNABLE_IDLE); before,
         * windows lent only once a report showed a whole idle interval, half-way
         * through the idle windows judged here: 0.752 (the H200: 0.745) */
        assert_true(lent >= 0.99);
        /* the goal: idle, its window lent (>= 95 %) within 2 periods */
        assert_true(lent_late >= 0.95);
    }
}

static void test_eight_equal(void **state)
{
    (void)state;
    struct sim_scenario sc;
    struct sim_result r;
    char yaml[2048] = "seconds: 20\ntenants:\n";
    for (int i = 0; i < 8; i++) {
        size_t len = strlen(yaml);
        snprintf(yaml + len, sizeof yaml - len,
                 "  - { name: t%d, compute: { share: 12.5%% }, load: deep }\n", i);
    }
    run_text(yaml, &r, &sc);
    assert_converged(&sc, &r, ERR_P95_PP);
    assert_true(r.busy > 0.87); /* 1 ms slices, 120 us switches; the H200: 86.5 % */
}

/* Two shallow queues at 70/30 alternate batch for batch: the slices cannot help a
 * (it never uses one up), so auto moves them to windows once a's slice is trimmed
 * up as far as it may go, within 2.5 s (2.0; 0.8 s before the slices were given
 * that time, sched_ladder.c slices_can_help), and the windows hold from then on (judged
 * after a warm-up of 2.5 s). */
static void test_shallow_70_30(void **state)
{
    (void)state;
    struct sim_scenario sc;
    struct sim_result r;
    run_text("seconds: 20\nwarmup_s: 2.5\ntenants:\n"
             "  - { name: a, compute: { share: 70% }, load: shallow, work_us: 500, gap_us: 50 }\n"
             "  - { name: b, compute: { share: 30% }, load: shallow, work_us: 500, gap_us: 50 }\n",
             &r, &sc);
    assert_converged(&sc, &r, ERR_P95_PP);
    assert_true(r.paused >= r.periods - 25); /* windows within 2.5 s, kept */
    /* as on a GPU (the shims' runnable time, coarse use): the same */
    run_text("seconds: 20\nwarmup_s: 2.5\nmeasure: userd\ntenants:\n"
             "  - { name: a, compute: { share: 70% }, load: shallow, work_us: 500, gap_us: 50 }\n"
             "  - { name: b, compute: { share: 30% }, load: shallow, work_us: 500, gap_us: 50 }\n",
             &r, &sc);
    assert_converged(&sc, &r, ERR_P95_PP);
    assert_true(r.t[0].gpu > 0.6); /* windows: 63 %, not the ~45 % of alternating */
}

/* Shallow tenants cannot fill their windows: the charged shares (whole windows)
 * are held to the bound, the time they really ran is reported, not asserted. */
static void test_three_shallow_and_mixed(void **state)
{
    (void)state;
    static const char *const yaml[] = { /* windows once the slices are spent (2.5 s) */
        "seconds: 20\nwarmup_s: 2.5\ntenants:\n"
        "  - { name: a, compute: { share: 50% }, load: shallow, work_us: 400, gap_us: 40 }\n"
        "  - { name: b, compute: { share: 30% }, load: shallow, work_us: 800, gap_us: 40 }\n"
        "  - { name: c, compute: { share: 20% }, load: shallow, work_us: 200, gap_us: 40 }\n",
        "seconds: 20\nwarmup_s: 2.5\ntenants:\n"
        "  - { name: deep, compute: { share: 60% }, load: deep }\n"
        "  - { name: shal, compute: { share: 40% }, load: shallow, work_us: 500, gap_us: 50 }\n",
    };
    for (size_t k = 0; k < 2; k++) {
        struct sim_scenario sc;
        struct sim_result r;
        run_text(yaml[k], &r, &sc);
        for (size_t i = 0; i < sc.n; i++) {
            const struct sim_tenant_result *t = &r.t[i];
            print_message("  %s: target %.2f%% charged %.2f%% ran %.2f%% of the GPU, err p95 "
                          "%.2f, ran p95 %.2f\n", sc.tenants[i].name, t->target * 100,
                          t->achieved * 100, t->gpu * 100, t->err_p95, t->used_err_p95);
            assert_true(t->windows > 0);
            assert_true(t->err_p95 <= ERR_P95_PP);
        }
    }
}

static void test_idle_time_lent(void **state)
{
    (void)state;
    struct sim_scenario sc;
    struct sim_result r;
    run_text("seconds: 12\ntenants:\n"
             "  - { name: a, compute: { share: 25% }, load: deep }\n"
             "  - { name: b, compute: { share: 75% }, load: bursty, work_us: 3000000, "
             "gap_us: 3000000 }\n", &r, &sc);
    assert_true(r.t[0].gpu_max >= 0.99); /* alone: the whole GPU */
    assert_converged(&sc, &r, ERR_P95_PP);
}

static void test_limit_with_idle_neighbour(void **state)
{
    (void)state;
    struct sim_scenario sc;
    struct sim_result r;
    run_text("seconds: 10\ntenants:\n"
             "  - { name: capped, compute: { share: 30%, limit: 30% }, load: deep }\n"
             "  - { name: idle, compute: { share: 70% }, load: deep, arrive_s: 5 }\n", &r, &sc);
    print_message("  capped: mean %.2f%% of the GPU, largest window %.2f%%\n", r.t[0].gpu * 100,
                  r.t[0].gpu_max * 100);
    assert_true(r.t[0].gpu_max <= 0.30 + 0.01);
    assert_true(r.t[0].gpu >= 0.30 - 0.01); /* the pause's cost; the H200: 29.80 % */
}

/* Kernels longer than a window (200 ms, 8 queued then a sync: the GPU suite's
 * long-kernels-30) under a 30 % limit, with the shims' reports: alone, alone with
 * a pause that lands 5 ms late, next to a deep neighbour, and next to it with
 * pauses 5 ms late. The pause preempts
 * a running kernel (as on the H200: bench/results/2026-12-02-h200-probe) and the
 * overrun is charged to the next periods once: the limit holds within 1 pp (the
 * H200's 0.219 of solo is not the scheduler's accounting). */
static void test_long_kernels_under_a_limit(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "seconds: 20\nmode: windows\nmeasure: userd\ntenants:\n"
        "  - { name: capped, compute: { limit: 30% }, load: shallow, work_us: 1600000, "
        "gap_us: 100 }\n",
        "seconds: 20\nmode: windows\nmeasure: userd\ngpu: { disable_us: 5000 }\ntenants:\n"
        "  - { name: capped, compute: { limit: 30% }, load: shallow, work_us: 1600000, "
        "gap_us: 100 }\n",
        "seconds: 20\nmode: auto\nmeasure: userd\ntenants:\n"
        "  - { name: capped, compute: { share: 30%, limit: 30% }, load: shallow, "
        "work_us: 1600000, gap_us: 100 }\n"
        "  - { name: other, compute: { share: 70% }, load: deep }\n",
        "seconds: 20\nmode: windows\nmeasure: userd\ngpu: { disable_us: 5000 }\ntenants:\n"
        "  - { name: capped, compute: { share: 30%, limit: 30% }, load: shallow, "
        "work_us: 1600000, gap_us: 100 }\n"
        "  - { name: other, compute: { share: 70% }, load: deep }\n",
    };
    for (size_t k = 0; k < 4; k++) {
        struct sim_scenario sc;
        struct sim_result r;
        run_text(cases[k], &r, &sc);
        print_message("  case %zu: capped at %.3f%% of the GPU (largest window %.2f%%)\n", k,
                      r.t[0].gpu * 100, r.t[0].gpu_max * 100);
        if (k < 3) {
            assert_true(fabs(r.t[0].gpu - 0.30) <= 0.01);
            continue;
        }
        /* next to a deep tenant with pauses 5 ms late (both overrun): each overrun
         * is charged only as the part of it each tenant got (the timeslices share
         * it); charged whole, capped ran 27.0 % (28.0 % of the busy time). Its part
         * of the busy time is its share; of the GPU's time it loses its part of
         * the two late pauses' cost too. */
        double part = r.t[0].gpu / (r.t[0].gpu + r.t[1].gpu);
        print_message("  case 3: %.2f%% of the busy time\n", part * 100);
        assert_true(fabs(part - 0.30) <= 0.01);
        assert_true(r.t[0].gpu >= 0.285 && r.t[0].gpu <= 0.31);
    }
}

static void test_arrivals_and_departures(void **state)
{
    (void)state;
    struct sim_scenario sc;
    struct sim_result r;
    /* every window from SIM_WARMUP_PERIODS after a change is judged */
    run_text("seconds: 30\ntenants:\n"
             "  - { name: a, compute: { share: 50% }, load: deep }\n"
             "  - { name: b, compute: { share: 30% }, load: deep, arrive_s: 5, leave_s: 20 }\n"
             "  - { name: c, compute: { share: 20% }, load: deep, arrive_s: 10 }\n", &r, &sc);
    assert_converged(&sc, &r, ERR_P95_4_PP);
}

static void test_latency_tenant_first(void **state)
{
    (void)state;
    struct sim_scenario sc;
    struct sim_result r;
    run_text("seconds: 10\ntenants:\n"
             "  - { name: infer, compute: { share: 50%, priority: latency }, load: requests, "
             "work_us: 2000, gap_us: 20000 }\n"
             "  - { name: train, compute: { share: 50%, priority: batch }, load: deep }\n", &r,
             &sc);
    print_message("  latency p50 %llu us p95 %llu us, solo %llu us\n",
                  (unsigned long long)r.t[0].lat_p50_us, (unsigned long long)r.t[0].lat_p95_us,
                  (unsigned long long)r.t[0].lat_solo_us);
    /* bound: solo + the batch tenant's yield slice + two context switches (120 us,
     * the simulator's default) + a step */
    assert_true(r.t[0].lat_p95_us <= r.t[0].lat_solo_us + SCHED_YIELD_US + 2 * 120 + 10);
    assert_true(r.busy > 0.98); /* the batch tenant fills the rest */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scenario_duplicates_refused),
        cmocka_unit_test(test_model_round_robin_ratio),
        cmocka_unit_test(test_model_shallow_ignores_timeslices),
        cmocka_unit_test(test_model_window_pause_costs),
        cmocka_unit_test(test_no_pause_without_contention),
        cmocka_unit_test(test_windows_that_idle_the_gpu_are_dropped),
        cmocka_unit_test(test_two_deep_75_25),
        cmocka_unit_test(test_four_deep),
        cmocka_unit_test(test_windows_as_kairosd_sees_the_gpu),
        cmocka_unit_test(test_windows_with_a_latency_tenant),
        cmocka_unit_test(test_latency_tenant_with_reports),
        cmocka_unit_test(test_auto_protects_a_latency_tenant),
        cmocka_unit_test(test_deep_tenants_no_less_busy_than_natively),
        cmocka_unit_test(test_bursty_inference_next_to_training),
        cmocka_unit_test(test_bursty_spells_as_on_the_gpu),
        cmocka_unit_test(test_eight_equal),
        cmocka_unit_test(test_shallow_70_30),
        cmocka_unit_test(test_three_shallow_and_mixed),
        cmocka_unit_test(test_idle_time_lent),
        cmocka_unit_test(test_limit_with_idle_neighbour),
        cmocka_unit_test(test_long_kernels_under_a_limit),
        cmocka_unit_test(test_arrivals_and_departures),
        cmocka_unit_test(test_latency_tenant_first),
        cmocka_unit_test(test_busy_latency_tenant_not_yielded_to),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
