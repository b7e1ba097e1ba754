/* test_timeshare.c - timeshare.c through its public API, with fakes only at its
 * boundary: the clock (clock_gettime, wrapped at link time: meson.build), the GPU
 * backend's utilization, and the sender of TIME_POLICY (recorded). What each
 * reconfiguration sends and to whom (the config's tenants first, a release when a
 * policy goes, no one past the slots, nothing for a GPU the node lacks), windows
 * that line up for a tenant on several GPUs, what a tick charges (planned tenants
 * by the scheduler, the others by their measured use once a second, at most 10 s),
 * the RUNNABLE reports (ignored when bad, a wake and an idle acted on at once), a
 * tenant whose processes left, no feedback without utilization, and kairos ps. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "daemon/config/config.h"
#include "daemon/memory/ledger.h"
#include "daemon/tenants/registry.h"
#include "daemon/time/sched.h"
#include "daemon/tenants/tenants.h"
#include "daemon/time/timeshare.h"
#include "kairos/proto.h"

/* --- the clock: fake while fake_clock is on (both clocks timeshare.c reads) --- */

int __real_clock_gettime(clockid_t id, struct timespec *ts);
int __wrap_clock_gettime(clockid_t id, struct timespec *ts);

static bool fake_clock;
static uint64_t mono_ns, real_ns;

int __wrap_clock_gettime(clockid_t id, struct timespec *ts)
{
    if (!fake_clock || (id != CLOCK_MONOTONIC && id != CLOCK_REALTIME))
        return __real_clock_gettime(id, ts);
    uint64_t ns = id == CLOCK_MONOTONIC ? mono_ns : real_ns;
    ts->tv_sec = (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
    return 0;
}

static void advance_ms(uint64_t ms)
{
    mono_ns += ms * 1000000ull;
    real_ns += ms * 1000000ull;
}

/* --- the GPU backend: per GPU, the processes' utilization; or a failure --- */

#define FAKE_PROCS 8
struct fake_gpu {
    struct gpu_util u[KAIROS_MAX_GPUS][FAKE_PROCS];
    size_t n[KAIROS_MAX_GPUS];
    int fail; /* -errno returned by utilization(), 0: none */
    unsigned calls;
};

static struct fake_gpu fake;

static int fake_utilization(struct gpu_backend *b, unsigned index, uint64_t since_us,
                            struct gpu_util *out, size_t cap, size_t *n)
{
    (void)b;
    (void)since_us;
    fake.calls++;
    if (fake.fail)
        return fake.fail;
    *n = fake.n[index] < cap ? fake.n[index] : cap;
    memcpy(out, fake.u[index], *n * sizeof *out);
    return 0;
}

static void fake_use(unsigned gpu, uint32_t pid, unsigned percent)
{
    fake.u[gpu][fake.n[gpu]++] = (struct gpu_util){.pid = pid, .sm_percent = percent};
}

static const struct gpu_ops fake_ops = {.name = "fake", .utilization = fake_utilization};

/* --- the sender: every TIME_POLICY, in order --- */

#define SENT_MAX 256
struct sent {
    char tenant[KAIROS_NAME_MAX];
    struct kairos_time_policy p;
};

struct fx {
    struct tenants ts;
    struct config cfg;
    struct gpu_backend gpu;
    struct timeshare *t;
    struct sent sent[SENT_MAX];
    size_t n_sent;
};

static void record_send(void *ctx, const char *tenant, const struct kairos_time_policy *p)
{
    struct fx *f = ctx;
    assert_true(f->n_sent < SENT_MAX);
    snprintf(f->sent[f->n_sent].tenant, KAIROS_NAME_MAX, "%s", tenant);
    f->sent[f->n_sent++].p = *p;
}

/* How many policies went to tenant (on gpu; -1: any) since the last clear. */
static size_t sent_to(const struct fx *f, const char *tenant, int gpu)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_sent; i++)
        n += !strcmp(f->sent[i].tenant, tenant) && (gpu < 0 || f->sent[i].p.gpu == (unsigned)gpu);
    return n;
}

/* The last policy sent to tenant on gpu (fails the test when none was). */
static struct kairos_time_policy last_to(const struct fx *f, const char *tenant, unsigned gpu)
{
    for (size_t i = f->n_sent; i-- > 0;)
        if (!strcmp(f->sent[i].tenant, tenant) && f->sent[i].p.gpu == gpu)
            return f->sent[i].p;
    fail_msg("nothing sent to %s on GPU %u", tenant, gpu);
    return (struct kairos_time_policy){0};
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    memset(&fake, 0, sizeof fake);
    fake_clock = true;
    mono_ns = 5000000000ull;           /* 5 s after boot */
    real_ns = 1800000000000000000ull;  /* a wall clock in 2027 */
    assert_int_equal(tenants_init(&f->ts, 2, "/nonexistent/state.json"), 0);
    config_defaults(&f->cfg);
    f->cfg.time_mode = SCHED_MODE_WINDOWS; /* windows while two tenants are active */
    f->gpu.ops = &fake_ops;
    *state = f;
    return 0;
}

static void start(struct fx *f, struct gpu_backend *gpu)
{
    assert_int_equal(timeshare_init(&f->t, NULL, gpu, &f->ts, &f->cfg, record_send, f), 0);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    timeshare_fini(f->t);
    while (f->ts.ledger.members)
        ledger_leave(&f->ts.ledger, f->ts.ledger.members, NULL);
    tenants_fini(&f->ts);
    config_free(&f->cfg);
    fake_clock = false;
    free(f);
    return 0;
}

static struct ledger_tenant *tenant(struct fx *f, const char *name)
{
    struct ledger_tenant *t;
    assert_int_equal(ledger_tenant_add(&f->ts.ledger, name, NULL, 0, &t), 0);
    return t;
}

/* The GPU time charged to t on gpu (its chargeback counter, usage.h; 0 when none). */
static uint64_t charged(struct fx *f, const struct ledger_tenant *t, unsigned gpu)
{
    const struct usage *u = usage_book_find(&f->ts.usage, t->id);
    return u ? u->gpu_us[gpu] : 0;
}

/* limit 0: none */
static void policy(struct fx *f, struct ledger_tenant *t, unsigned gpu, double share,
                   double limit, enum sched_prio prio, enum setting_source src)
{
    struct sched_policy p = {.share = share, .limit = limit, .prio = prio};
    assert_int_equal(registry_set_compute(&f->ts.compute, &f->ts.settings, t, gpu, &p, src), 0);
}

static void member(struct fx *f, struct ledger_tenant *t, uint32_t pid)
{
    struct ledger_member *m;
    assert_int_equal(ledger_join(&f->ts.ledger, t, pid, NULL, &m), 0);
}

static void ticks(struct fx *f, int n)
{
    for (int i = 0; i < n; i++) {
        advance_ms(SCHED_PERIOD_US / 1000);
        timeshare_tick(f->t);
    }
}

/* A RUNNABLE report of pid in tenant on gpu: runnable for pct % of a period. */
static void report(struct fx *f, const char *name, uint32_t pid, unsigned gpu, unsigned pct,
                   uint32_t flags)
{
    struct kairos_runnable r = {.gpu = gpu, .flags = flags, .interval_us = SCHED_PERIOD_US,
                                .runnable_us = SCHED_PERIOD_US * pct / 100,
                                .unpaused_us = SCHED_PERIOD_US};
    timeshare_runnable(f->t, name, pid, &r);
}

/* --- reconfiguration --- */

/* Every tenant's policy on every GPU it has one goes out once, asking for RUNNABLE
 * reports, with the time-share's epoch (the monotonic clock at init); nothing for a
 * tenant without one; nothing again when nothing changed. */
static void test_reconfigure_sends_each_policy_once(void **state)
{
    struct fx *f = *state;
    struct ledger_tenant *a = tenant(f, "a"), *b = tenant(f, "b");
    tenant(f, "plain");
    policy(f, a, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    policy(f, b, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    policy(f, b, 1, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    start(f, &f->gpu);
    advance_ms(1000); /* the epoch is init's, not the reconfiguration's */
    timeshare_reconfigure(f->t);
    assert_int_equal(f->n_sent, 3);
    assert_int_equal(sent_to(f, "a", 0), 1);
    assert_int_equal(sent_to(f, "b", 0), 1);
    assert_int_equal(sent_to(f, "b", 1), 1);
    assert_int_equal(sent_to(f, "plain", -1), 0);
    for (size_t i = 0; i < f->n_sent; i++) {
        assert_true(f->sent[i].p.flags & KAIROS_TIME_REPORT);
        assert_int_equal(f->sent[i].p.epoch_ns, 5000000000ull);
    }
    struct kairos_time_policy p;
    assert_true(timeshare_policy(f->t, "a", 0, &p));
    assert_int_equal(p.gpu, 0);
    assert_memory_equal(&p, &f->sent[0].p, sizeof p); /* what was sent is in force */
    assert_false(timeshare_policy(f->t, "a", 1, &p));
    assert_false(timeshare_policy(f->t, "plain", 0, &p));
    assert_false(timeshare_policy(f->t, "nobody", 0, &p));
    assert_false(timeshare_policy(f->t, "a", KAIROS_MAX_GPUS, &p));
    assert_false(timeshare_policy(NULL, "a", 0, &p));
    f->n_sent = 0;
    timeshare_reconfigure(f->t);
    assert_int_equal(f->n_sent, 0);
}

/* The configuration's tenants take the first slots whatever the ledger's order:
 * their decisions go out first. */
static void test_config_tenants_first(void **state)
{
    struct fx *f = *state;
    struct ledger_tenant *run = tenant(f, "runtime"), *conf = tenant(f, "configured");
    policy(f, run, 0, 0.3, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    policy(f, conf, 0, 0.3, 0, SCHED_PRIO_NORMAL, SETTING_CONFIG);
    start(f, &f->gpu);
    timeshare_reconfigure(f->t);
    assert_int_equal(f->n_sent, 2);
    assert_string_equal(f->sent[0].tenant, "configured");
    assert_string_equal(f->sent[1].tenant, "runtime");
}

/* A policy that went away releases the tenant's processes on that GPU (never
 * paused, the application's own timeslice, no reports asked), with a newer seq;
 * its policy on the other GPU stays and is not sent again. */
static void test_removed_policy_releases(void **state)
{
    struct fx *f = *state;
    struct ledger_tenant *a = tenant(f, "a");
    policy(f, a, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    policy(f, a, 1, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    start(f, &f->gpu);
    timeshare_reconfigure(f->t);
    struct kairos_time_policy before = last_to(f, "a", 1);
    f->n_sent = 0;
    registry_set_compute(&f->ts.compute, &f->ts.settings, a, 1, NULL, SETTING_RUNTIME);
    timeshare_reconfigure(f->t);
    assert_int_equal(f->n_sent, 1);
    const struct kairos_time_policy *rel = &f->sent[0].p;
    assert_string_equal(f->sent[0].tenant, "a");
    assert_int_equal(rel->gpu, 1);
    assert_int_equal(rel->flags, 0);
    assert_int_equal(rel->timeslice_us, 0);
    assert_int_equal(rel->period_us, 0);
    assert_int_equal(rel->duty_us, 0);
    assert_int_equal(rel->epoch_ns, before.epoch_ns);
    assert_true(rel->seq > before.seq);
    struct kairos_time_policy p;
    assert_false(timeshare_policy(f->t, "a", 1, &p));
    assert_true(timeshare_policy(f->t, "a", 0, &p));
}

/* SCHED_MAX_TENANTS tenants with policies take every slot: one more gets none
 * (nothing sent); once one of them lost its policy, its slot is free and the
 * newcomer gets it at the next reconfiguration. */
static void test_slots_full_then_freed(void **state)
{
    struct fx *f = *state;
    struct ledger_tenant *t[SCHED_MAX_TENANTS + 1];
    for (unsigned i = 0; i <= SCHED_MAX_TENANTS; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%u", i);
        t[i] = tenant(f, name);
        policy(f, t[i], 0, 0.01, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    }
    start(f, &f->gpu);
    timeshare_reconfigure(f->t);
    assert_int_equal(f->n_sent, SCHED_MAX_TENANTS);
    struct kairos_time_policy p;
    char last[16];
    snprintf(last, sizeof last, "t%u", SCHED_MAX_TENANTS);
    assert_int_equal(sent_to(f, last, -1), 0);
    assert_false(timeshare_policy(f->t, last, 0, &p));
    f->n_sent = 0;
    registry_set_compute(&f->ts.compute, &f->ts.settings, t[3], 0, NULL, SETTING_RUNTIME);
    timeshare_reconfigure(f->t);
    assert_int_equal(sent_to(f, "t3", 0), 1); /* its release */
    assert_int_equal(last_to(f, "t3", 0).period_us, 0);
    assert_int_equal(sent_to(f, last, 0), 1);
    assert_true(timeshare_policy(f->t, last, 0, &p));
    assert_false(timeshare_policy(f->t, "t3", 0, &p));
}

/* A policy on a GPU the node does not have is never placed. */
static void test_gpu_beyond_node_ignored(void **state)
{
    struct fx *f = *state;
    struct ledger_tenant *a = tenant(f, "a");
    policy(f, a, 2, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME); /* the node has GPUs 0, 1 */
    start(f, &f->gpu);
    timeshare_reconfigure(f->t);
    ticks(f, 3);
    assert_int_equal(f->n_sent, 0);
    struct kairos_time_policy p;
    assert_false(timeshare_policy(f->t, "a", 2, &p));
}

/* A tenant with policies on both GPUs has its window at the same phase on each,
 * though on GPU 1 a tenant of an earlier slot would otherwise come first. */
static void test_spanning_tenant_windows_line_up(void **state)
{
    struct fx *f = *state;
    struct ledger_tenant *one = tenant(f, "gpu1only"), *both = tenant(f, "both"),
                         *zero = tenant(f, "gpu0only");
    policy(f, one, 1, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    policy(f, both, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    policy(f, both, 1, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    policy(f, zero, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    member(f, one, 101);
    member(f, both, 102);
    member(f, zero, 103);
    fake_use(0, 102, 50);
    fake_use(0, 103, 50);
    fake_use(1, 101, 50);
    fake_use(1, 102, 50);
    start(f, &f->gpu);
    timeshare_reconfigure(f->t);
    ticks(f, 5);
    struct kairos_time_policy b0, b1, o1, z0;
    assert_true(timeshare_policy(f->t, "both", 0, &b0));
    assert_true(timeshare_policy(f->t, "both", 1, &b1));
    assert_true(timeshare_policy(f->t, "gpu1only", 1, &o1));
    assert_true(timeshare_policy(f->t, "gpu0only", 0, &z0));
    assert_int_equal(b0.period_us, SCHED_PERIOD_US);
    assert_true(b0.duty_us > 0 && b0.duty_us < SCHED_PERIOD_US);
    assert_int_equal(b1.period_us, b0.period_us);
    assert_int_equal(b1.phase_us, b0.phase_us);
    assert_int_equal(b1.duty_us, b0.duty_us);
    assert_true(o1.phase_us != b1.phase_us);
}

/* --- ticks: what is charged --- */

/* A tenant with a policy is charged what the scheduler charged it each period (its
 * whole use here: 100 ms of 100 ms), and not once more by the once-a-second charge
 * of the others. */
static void test_planned_tenant_charged_by_period(void **state)
{
    struct fx *f = *state;
    struct ledger_tenant *a = tenant(f, "a");
    policy(f, a, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    member(f, a, 201);
    fake_use(0, 201, 100);
    start(f, &f->gpu);
    timeshare_reconfigure(f->t);
    ticks(f, 1);
    assert_int_equal(charged(f, a, 0), SCHED_PERIOD_US);
    ticks(f, 9); /* the 10th tick also charges the tenants without a policy */
    assert_int_equal(charged(f, a, 0), 10 * SCHED_PERIOD_US);
    assert_int_equal(charged(f, a, 1), 0);
}

/* A tenant without a policy on a GPU is charged its processes' measured use there
 * once every 10 ticks: the first time for one second, then for the time since the
 * last charge, at most 10 s (a loop held back); a pid of no tenant costs no one. */
static void test_unplanned_tenant_charged_once_a_second(void **state)
{
    struct fx *f = *state;
    struct ledger_tenant *u = tenant(f, "u"), *half = tenant(f, "half");
    policy(f, half, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME); /* none on GPU 1 */
    member(f, u, 301);
    member(f, half, 302);
    fake_use(0, 301, 40);
    fake_use(1, 302, 25);
    fake_use(1, 999, 90); /* not a member */
    start(f, &f->gpu);
    timeshare_reconfigure(f->t);
    ticks(f, 9);
    assert_int_equal(charged(f, u, 0), 0);
    ticks(f, 1);
    assert_int_equal(charged(f, u, 0), 400000);    /* 40 % of 1 s */
    assert_int_equal(charged(f, half, 1), 250000); /* 25 % of 1 s, on its unplanned GPU */
    advance_ms(1000);                                 /* 2 s between this charge and the next */
    ticks(f, 10);
    assert_int_equal(charged(f, u, 0), 400000 + 800000);
    advance_ms(60000); /* a minute without ticks: 10 s at most */
    ticks(f, 10);
    assert_int_equal(charged(f, u, 0), 400000 + 800000 + 4000000);
}

/* Without a backend, or one that cannot measure, the policies still go out but
 * ticks measure nothing: no feedback, nothing more sent, nothing charged. */
static void test_no_utilization_no_feedback(void **state)
{
    struct fx *f = *state;
    struct ledger_tenant *a = tenant(f, "a"), *b = tenant(f, "b");
    policy(f, a, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    policy(f, b, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    member(f, a, 401);
    fake.fail = -ENOTSUP;
    start(f, &f->gpu);
    timeshare_reconfigure(f->t);
    assert_int_equal(f->n_sent, 2);
    f->n_sent = 0;
    ticks(f, 20);
    assert_int_equal(f->n_sent, 0);
    assert_int_equal(charged(f, a, 0), 0);
    struct kairos_ps_reply ps = {0};
    timeshare_ps(f->t, "a", 2, &ps);
    assert_int_equal(ps.compute_flags[0] & KAIROS_PS_COMPUTE_MEASURED, 0);
    timeshare_fini(f->t);
    f->t = NULL;
    start(f, NULL); /* no backend at all */
    timeshare_reconfigure(f->t);
    assert_int_equal(f->n_sent, 2);
    ticks(f, 20);
    assert_int_equal(f->n_sent, 2);
}

/* --- RUNNABLE reports --- */

/* Tenants a and b, half each on GPU 0, with processes (a: pids a_pids), reporting
 * busy for three ticks: each has a window of half the period. */
static void busy_pair(struct fx *f, unsigned a_pids)
{
    struct ledger_tenant *a = tenant(f, "a"), *b = tenant(f, "b");
    policy(f, a, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    policy(f, b, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    for (unsigned i = 0; i < a_pids; i++)
        member(f, a, 500 + i);
    member(f, b, 600);
    start(f, &f->gpu);
    timeshare_reconfigure(f->t);
    for (int k = 0; k < 3; k++) {
        for (unsigned i = 0; i < a_pids; i++)
            report(f, "a", 500 + i, 0, 90, 0);
        report(f, "b", 600, 0, 90, 0);
        ticks(f, 1);
    }
    struct kairos_time_policy p;
    assert_true(timeshare_policy(f->t, "a", 0, &p));
    assert_int_equal(p.duty_us, SCHED_PERIOD_US / 2);
    assert_true(timeshare_policy(f->t, "b", 0, &p));
    assert_int_equal(p.duty_us, SCHED_PERIOD_US / 2);
    f->n_sent = 0;
}

/* Reports that cannot be taken change nothing: a tenant without a slot, a GPU
 * beyond the node (beyond the arrays: ASan would see it read), an empty interval
 * (0/0 would read as idle and lend a's window). */
static void test_bad_reports_ignored(void **state)
{
    struct fx *f = *state;
    busy_pair(f, 1);
    report(f, "nobody", 500, 0, 0, 0);
    report(f, "a", 500, KAIROS_MAX_GPUS, 0, 0);
    report(f, "a", 500, 2, 0, KAIROS_RUNNABLE_IDLE);
    struct kairos_runnable empty = {.gpu = 0};
    timeshare_runnable(f->t, "a", 500, &empty);
    empty.flags = KAIROS_RUNNABLE_IDLE;
    timeshare_runnable(f->t, "a", 500, &empty);
    assert_int_equal(f->n_sent, 0);
}

/* The only process of a reports nothing queued for 20 ms (KAIROS_RUNNABLE_IDLE):
 * its window is lent at once, without waiting for a tick (b alone: never paused);
 * its wake (KAIROS_RUNNABLE_WAKE) plans it in again at once. */
static void test_idle_early_and_wake_act_at_once(void **state)
{
    struct fx *f = *state;
    busy_pair(f, 1);
    report(f, "a", 500, 0, 0, KAIROS_RUNNABLE_IDLE);
    assert_int_equal(sent_to(f, "b", 0), 1);
    assert_int_equal(last_to(f, "b", 0).period_us, 0);
    f->n_sent = 0;
    advance_ms(30);
    report(f, "a", 500, 0, 30, KAIROS_RUNNABLE_WAKE);
    assert_true(sent_to(f, "a", 0) >= 1);
    struct kairos_time_policy a = last_to(f, "a", 0), b = last_to(f, "b", 0);
    assert_int_equal(a.period_us, SCHED_PERIOD_US);
    assert_true(a.duty_us > 0 && a.duty_us < SCHED_PERIOD_US);
    assert_int_equal(b.period_us, SCHED_PERIOD_US);
    /* a wake of a tenant already planned in changes nothing */
    f->n_sent = 0;
    report(f, "a", 500, 0, 30, KAIROS_RUNNABLE_WAKE);
    assert_int_equal(f->n_sent, 0);
}

/* A tenant of two processes waits for both: an early idle of one is no idle of the
 * tenant, and a regular idle report lends its window only once every process
 * reported idle (none partial). */
static void test_idle_needs_every_process(void **state)
{
    struct fx *f = *state;
    busy_pair(f, 2);
    report(f, "a", 500, 0, 0, KAIROS_RUNNABLE_IDLE);
    assert_int_equal(f->n_sent, 0);
    report(f, "a", 500, 0, 1, 0);
    assert_int_equal(f->n_sent, 0);
    report(f, "a", 501, 0, 0, KAIROS_RUNNABLE_PARTIAL); /* it could not see every channel */
    assert_int_equal(f->n_sent, 0);
    ticks(f, 1); /* a new period: the partial report is forgotten */
    f->n_sent = 0;
    report(f, "a", 500, 0, 1, 0);
    assert_int_equal(f->n_sent, 0);
    report(f, "a", 501, 0, 0, 0);
    assert_int_equal(sent_to(f, "b", 0), 1);
    assert_int_equal(last_to(f, "b", 0).period_us, 0);
}

/* The last process of b left: at the next tick b is idle and a, alone, is never
 * paused. */
static void test_tenant_without_processes_idle(void **state)
{
    struct fx *f = *state;
    busy_pair(f, 1);
    struct ledger_member *m = ledger_find_pid(&f->ts.ledger, 600);
    assert_non_null(m);
    ledger_leave(&f->ts.ledger, m, NULL);
    report(f, "a", 500, 0, 90, 0);
    ticks(f, 1);
    assert_int_equal(sent_to(f, "a", 0), 1);
    assert_int_equal(last_to(f, "a", 0).period_us, 0);
}

/* --- kairos ps --- */

/* The figures of a GPU where the tenant has a policy; the others left as they were;
 * nothing for an unknown tenant or without a time-share; measured once ticks ran. */
static void test_ps_figures(void **state)
{
    struct fx *f = *state;
    struct ledger_tenant *a = tenant(f, "a"), *b = tenant(f, "b");
    policy(f, a, 0, 0.25, 0.3, SCHED_PRIO_LATENCY, SETTING_RUNTIME);
    policy(f, a, 1, 0.5, 0, SCHED_PRIO_BATCH, SETTING_RUNTIME);
    policy(f, b, 0, 0.5, 0, SCHED_PRIO_NORMAL, SETTING_RUNTIME);
    member(f, a, 701);
    member(f, b, 702);
    fake_use(0, 701, 30);
    fake_use(0, 702, 60);
    start(f, &f->gpu);
    timeshare_reconfigure(f->t);
    struct kairos_ps_reply ps, untouched;
    memset(&ps, 0x5a, sizeof ps);
    untouched = ps;
    timeshare_ps(NULL, "a", 2, &ps);
    timeshare_ps(f->t, "nobody", 2, &ps);
    assert_memory_equal(&ps, &untouched, sizeof ps);
    timeshare_ps(f->t, "a", 1, &ps); /* GPU 0 only */
    assert_int_equal(ps.compute_flags[0], KAIROS_PS_COMPUTE_POLICY | KAIROS_PS_COMPUTE_HOLDS);
    assert_int_equal(ps.share_ppm[0], 250000);
    assert_int_equal(ps.limit_ppm[0], 300000);
    assert_int_equal(ps.priority[0], KAIROS_PRIO_LATENCY);
    struct kairos_time_policy p;
    assert_true(timeshare_policy(f->t, "a", 0, &p));
    assert_int_equal(ps.period_us[0], p.period_us);
    assert_int_equal(ps.duty_us[0], p.duty_us);
    assert_int_equal(ps.compute_flags[1], untouched.compute_flags[1]);
    assert_int_equal(ps.share_ppm[1], untouched.share_ppm[1]);
    ticks(f, 20);
    memset(&ps, 0, sizeof ps);
    timeshare_ps(f->t, "a", 2, &ps);
    assert_true(ps.compute_flags[0] & KAIROS_PS_COMPUTE_MEASURED);
    assert_int_equal(ps.priority[1], KAIROS_PRIO_BATCH);
    assert_int_equal(ps.hold_periods[0][KAIROS_HOLD_LIMIT], 20); /* its 30 % limit held it */
    assert_true(ps.pauses[0] > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reconfigure_sends_each_policy_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_config_tenants_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removed_policy_releases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slots_full_then_freed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_beyond_node_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spanning_tenant_windows_line_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_planned_tenant_charged_by_period, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unplanned_tenant_charged_once_a_second, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_utilization_no_feedback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_reports_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_early_and_wake_act_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_needs_every_process, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenant_without_processes_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ps_figures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
