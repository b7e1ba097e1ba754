/* sched.c - the feedback time-share scheduler of one GPU (see sched.h and
 * docs/scheduler.md): its API, the demand, targets, timeslices, windows and their
 * feedback, and the plan; AUTO's ladder is sched_ladder.c's. Each period:
 *   1. demand: who wanted the GPU (runnable at least 2 % of the period, or used
 *      when use is exact; without runnable time, as from NVML: who has a live
 *      process);
 *   2. targets: weighted water-filling of the period over the active tenants,
 *      each capped by its limit and (when known) by what it wanted, so idle time
 *      is lent to whoever wants it;
 *   3. level (sched_level, by the mode): strict clock-aligned complementary
 *      windows while two or more tenants that are not latency-sensitive compete
 *      (WINDOWS); timeslices proportional to shares (TIMESLICES: work-conserving,
 *      for deep queues only; each trimmed by what its tenant got while the GPU
 *      was contended, slice_trim.h); or, in AUTO, do no harm: the driver's own
 *      timeslices and no pause until a tenant that waited is clearly short of
 *      its target, then the shares' timeslices, then windows, each held while
 *      it is needed (the ladder, sched_ladder.c). What a tenant
 *      ran is, with NVML's coarse use, its shims' progress time, read as its part
 *      of the sum. Latency tenants are never paused in any mode (only a limit
 *      pauses them) and never trigger windows;
 *   4. feedback, only from runnable time: in windows, a per-tenant debt
 *      (entitled minus charged, a tenant that does not fill its window is charged
 *      the whole window; with coarse use, as NVML's, charged is the time its
 *      channels were really enabled, as the shims measured it, never less than
 *      the window granted less SCHED_UNPAUSED_SLACK_US) corrects the next
 *      duties; a limit is a window of its own, shortened by overruns (the
 *      debt, and the overrun itself: how far the window ran past its duty, the
 *      pause landing late, charged to the next periods).
 * A tenant back from an idle spell (its shim's wake, sched_wake) is active again
 * at once and the GPU planned again in mid-period, its window rotated to start
 * then, instead of a period or two later when the reports show it; one whose
 * report shows a whole idle interval is idle at once (sched_idle_now), not at
 * the next tick, and so is one whose shim saw nothing queued for 20 ms
 * (sched_idle_early: a windowed tenant without a limit).
 */
#include "daemon/time/sched.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "daemon/time/sched_internal.h"
#include "kairos/proto.h"

#define ACTIVE_MIN 0.02      /* wanted at least 2 % of the period */
#define DEBT_MAX 0.05        /* of the period */
#define DEBT_GAIN 0.5
#define OVERRUN_KEEP 0.5     /* weight of the past in the overrun estimate */

const char *sched_level_name(enum sched_level l)
{
    return l == SCHED_LEVEL_WINDOWS ? "windows" : l == SCHED_LEVEL_SLICES ? "slices" : "native";
}

void sched_gpu_init(struct sched_gpu *g, uint32_t period_us)
{
    memset(g, 0, sizeof *g);
    g->period_us = period_us ? period_us : SCHED_PERIOD_US;
    g->yield_us = SCHED_YIELD_US;
}

void sched_set_yield(struct sched_gpu *g, uint32_t yield_us)
{
    g->yield_us = yield_us;
}

/* Whether the tenant takes a window of its own when the GPU is in windows. A
 * latency tenant never does, in WINDOWS and in AUTO mode alike: it is never
 * paused, and runs over the others' windows when its requests come (its long
 * timeslice against their short ones), its time taken from whichever window it
 * lands in. (AUTO used to window it once it drifted: on the H200 its p99 went to
 * 5.63x solo next to training; etc/sim/latency-auto.yaml shows the same.) */
bool sched_in_windows(const struct sched_gpu *g, const struct sched_tenant *t)
{
    (void)g;
    return t->present && t->active && t->pol.prio != SCHED_PRIO_LATENCY;
}

/* Windows can steer anything only between two or more active tenants that take
 * windows; a latency tenant next to one other is left to the timeslices. */
bool sched_windows_possible(const struct sched_gpu *g)
{
    unsigned windowed = 0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        windowed += sched_in_windows(g, &g->t[i]);
    return windowed >= 2;
}

static bool in_windows_level(const struct sched_gpu *g)
{
    return g->level == SCHED_LEVEL_WINDOWS;
}

void sched_set_mode(struct sched_gpu *g, enum sched_mode mode)
{
    if (g->mode != mode) {
        g->mode = mode;
        sched_forget_levels(g);
    }
}

int sched_tenant_set(struct sched_gpu *g, unsigned slot, const struct sched_policy *p)
{
    if (slot >= SCHED_MAX_TENANTS || !(p->share >= 0 && p->share <= 1) ||
        !(p->limit >= 0 && p->limit <= 1) || p->prio > SCHED_PRIO_BATCH)
        return -EINVAL;
    struct sched_tenant *t = &g->t[slot];
    if (!t->present) {
        memset(t, 0, sizeof *t);
        t->present = true;
        t->active = true; /* a newcomer is assumed to want the GPU */
    }
    t->pol = *p;
    t->cap = p->limit > 0 ? p->limit : 1.0; /* until a period is measured */
    sched_forget_levels(g);
    return 0;
}

void sched_tenant_remove(struct sched_gpu *g, unsigned slot)
{
    if (slot < SCHED_MAX_TENANTS && g->t[slot].present) {
        memset(&g->t[slot], 0, sizeof g->t[slot]);
        sched_forget_levels(g);
    }
}

void sched_tenant_set_spans(struct sched_gpu *g, unsigned slot, bool spans)
{
    if (slot < SCHED_MAX_TENANTS && g->t[slot].present)
        g->t[slot].spans = spans;
}

void sched_tenant_set_domain(struct sched_gpu *g, unsigned slot, uint32_t domain)
{
    if (slot < SCHED_MAX_TENANTS && g->t[slot].present)
        g->t[slot].domain = domain;
}

static double weight(const struct sched_tenant *t)
{
    return t->pol.share > 0 ? t->pol.share : 0.01; /* best effort */
}

/* What the tenant wanted, as a fraction of the period (1 when unknown). With the
 * shims' runnable time and coarse use, the larger of the two: the shims miss a
 * running kernel with nothing queued behind it, so what NVML saw it use counts
 * as wanted too (it sizes an active tenant's demand cap; whether it is active at
 * all is the runnable time's alone, seen_active). */
static double wanted(const struct sched_gpu *g, const struct sched_usage *u)
{
    if (u->runnable_us == SCHED_RUNNABLE_UNKNOWN)
        return (double)u->used_us / g->period_us;
    double w = (double)u->runnable_us / g->period_us;
    if (u->used_coarse)
        w = fmax(w, (double)u->used_us / g->period_us);
    return fmin(w, 1.0);
}

/* The most a tenant may be given: its limit; and when it did not wait, what it
 * wanted (plus half a point to grow into). A tenant that waited wants more. */
static void measure_caps(struct sched_gpu *g, const struct sched_usage *use)
{
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        struct sched_tenant *t = &g->t[i];
        t->cap = t->pol.limit > 0 ? t->pol.limit : 1.0;
        if (!t->present || use[i].runnable_us == SCHED_RUNNABLE_UNKNOWN || t->woken)
            continue; /* a woken tenant's reports still cover its idle spell */
        double want = wanted(g, &use[i]);
        double ran = (double)use[i].used_us / g->period_us;
        if (want - ran < 0.05 && want < 0.9)
            t->cap = fmin(t->cap, want + 0.005);
    }
}

/* Weighted water-filling: targets of the active tenants sum to at most 1. */
static void fill_targets(struct sched_gpu *g)
{
    double cap[SCHED_MAX_TENANTS];
    bool open[SCHED_MAX_TENANTS];
    double left = 1.0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        struct sched_tenant *t = &g->t[i];
        t->target = 0;
        open[i] = t->present && t->active;
        cap[i] = t->cap;
    }
    for (;;) {
        double wsum = 0;
        for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
            if (open[i])
                wsum += weight(&g->t[i]);
        if (wsum <= 0 || left <= 1e-9)
            break;
        bool capped = false;
        for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
            if (open[i] && left * weight(&g->t[i]) / wsum >= cap[i]) {
                g->t[i].target = cap[i];
                left -= cap[i];
                open[i] = false;
                capped = true;
            }
        }
        if (capped)
            continue;
        for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
            if (open[i])
                g->t[i].target = left * weight(&g->t[i]) / wsum;
        break;
    }
}

bool sched_latency_present(const struct sched_gpu *g)
{
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (g->t[i].present && g->t[i].pol.prio == SCHED_PRIO_LATENCY)
            return true;
    return false;
}

/* Whether every latency tenant of the GPU wanted at most its share (plus
 * SCHED_YIELD_OVER) of the last period: one that keeps the GPU busy is not
 * yielded to (it would take 8 ms against every 50 us of the others'). */
static bool latency_within_shares(const struct sched_gpu *g)
{
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        const struct sched_tenant *t = &g->t[i];
        if (t->present && t->pol.prio == SCHED_PRIO_LATENCY &&
            t->demand > t->pol.share + SCHED_YIELD_OVER)
            return false;
    }
    return true;
}

/* Beside a latency tenant, another tenant's slice is how long a request that
 * arrives while it runs waits (on the H200 next to ResNet-50 training, request
 * p99 2.38x solo with the batch tenant's 1 ms slice, 1.16x with 50 us, training
 * 0.82 and 0.81 of solo: bench/results/2026-12-03-h200-latency-yield): the yield
 * slice, unless the others share the GPU among themselves by timeslices (two or
 * more active outside windows), where a slice this short would cost a switch
 * between them every yield_us. 0: no rule. */
static uint64_t yield_slice(const struct sched_gpu *g, const struct sched_tenant *t)
{
    if (!g->yield_us || t->pol.prio == SCHED_PRIO_LATENCY || !sched_latency_present(g) ||
        !latency_within_shares(g))
        return 0;
    return in_windows_level(g) || !sched_windows_possible(g) ? g->yield_us : 0;
}

/* Whether another tenant of the GPU takes the yield slice now: a latency tenant
 * then keeps its long slice even in the native state. */
static bool others_yield(const struct sched_gpu *g, const struct sched_tenant *t)
{
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (&g->t[i] != t && g->t[i].present && yield_slice(g, &g->t[i]))
            return true;
    return false;
}

/* Timeslices proportional to shares, the smallest share on the GPU getting 1 ms,
 * best-effort tenants 1 ms. They depend on the policies only, not on who was
 * active in the last period: on the H200, NVML's samples (every ~200 ms) made the
 * active set flicker, and slices recomputed from it swung between 250 us and 3 ms,
 * each switch costing throughput. */
static uint64_t timeslice(const struct sched_gpu *g, const struct sched_tenant *t)
{
    uint64_t yield = yield_slice(g, t);
    if (yield)
        return yield;
    if (g->level == SCHED_LEVEL_NATIVE) /* the driver's own, but for a latency tenant's
                                         * long slice against the others' yield */
        return t->pol.prio == SCHED_PRIO_LATENCY && others_yield(g, t) ? SCHED_TS_LATENCY_US
                                                                         : 0;
    double wmin = 1.0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (g->t[i].present && g->t[i].pol.share > 0)
            wmin = fmin(wmin, g->t[i].pol.share);
    double unit = g->mode == SCHED_MODE_AUTO ? SCHED_TS_AUTO_UNIT_US : SCHED_TS_UNIT_US;
    double ts = t->pol.share > 0 ? unit * t->pol.share / wmin : unit;
    ts = (double)slice_trim_apply(&t->slice, ts);
    if (ts > SCHED_TS_MAX_US)
        ts = SCHED_TS_MAX_US;
    if (t->pol.prio == SCHED_PRIO_LATENCY && ts < SCHED_TS_LATENCY_US)
        ts = SCHED_TS_LATENCY_US;
    if (t->pol.prio == SCHED_PRIO_BATCH && ts > SCHED_TS_BATCH_US)
        ts = SCHED_TS_BATCH_US;
    return (uint64_t)llround(ts);
}

/* What the tenant ran in the period, as far as it can be told: with coarse use
 * (NVML), its shims' progress time where they measure it. On the H200 NVML's
 * samples, about five a second, each name the one process on the GPU: of eight
 * deep tenants in 12.4 ms timeslices three or more read 0 % in every second, and
 * auto mode took that for starvation and paused all eight in windows. */
uint64_t sched_ran_us(const struct sched_gpu *g, const struct sched_usage *u)
{
    if (!u->used_coarse || !u->progress_known)
        return u->used_us;
    return (uint64_t)llround((double)u->progress_us * g->progress_scale);
}

/* The tenants' progress times are read as parts of their sum, the time the GPU
 * spent on them (as exact use is judged by its part of the busy time): a sample
 * marks its whole interval when the channels moved at any instant of it, so two
 * tenants that take turns within a millisecond (shallow queues, a sync after each
 * batch) both read busy all the time, and the switches between slices belong to
 * nobody (eight a period: 1 % of it, which read 75 % as 74 %). */
static double progress_scale(const struct sched_gpu *g, const struct sched_usage use[])
{
    double sum = 0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (g->t[i].present && use[i].used_coarse && use[i].progress_known)
            sum += (double)use[i].progress_us;
    return sum > 0 ? g->period_us / sum : 1.0;
}

static int prio_rank(enum sched_prio p)
{
    return p == SCHED_PRIO_LATENCY ? 0 : p == SCHED_PRIO_NORMAL ? 1 : 2;
}

/* Whether decision d's window is open pos_us into the period (a phase may wrap). */
static bool window_open_at(const struct sched_decision *d, uint32_t pos_us)
{
    if (!d->period_us || d->duty_us >= d->period_us)
        return true;
    uint32_t P = d->period_us;
    return (pos_us % P + P - d->phase_us % P) % P < d->duty_us;
}

static double slice_of(const struct sched_tenant *t)
{
    return (double)(t->dec.timeslice_us ? t->dec.timeslice_us : SCHED_TS_UNIT_US);
}

/* Whether tenant o, with work, has a window that opens at end_us (where another's
 * closes). */
static bool opens_at(const struct sched_tenant *o, uint32_t end_us)
{
    const struct sched_decision *d = &o->dec;
    return o->present && o->active && d->period_us && d->duty_us < d->period_us &&
           d->phase_us % d->period_us == end_us;
}

/* The overruns shared, under the decisions in force: a tenant whose pause landed
 * late (its channels enabled past its window: over = unpaused - duty, from its
 * shims' figures) ran then beside every tenant with work whose window had opened
 * (or that is never paused), and the hardware shared those milliseconds in the
 * ratio of the timeslices (the H200: 6000/2000 us -> 3.00), less a switch per
 * slice, once the late one's slice (running at the window's end) ran out: half a
 * slice on average. charged[] (the enabled times) keeps of each overrun only each
 * tenant's part: the late one's, and the next window's owner's (whose enabled
 * time counted all of it too), who also lost the late one's preemption
 * (SCHED_PREEMPT_US) inside its window. Charged whole, a pause 5 ms late next to a deep tenant held
 * a 30 % limit at 27.0 % in the simulator. */
static void share_overruns(const struct sched_gpu *g, const struct sched_usage *use,
                           double charged[SCHED_MAX_TENANTS])
{
    double less[SCHED_MAX_TENANTS] = {0};
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        const struct sched_tenant *t = &g->t[i];
        const struct sched_decision *d = &t->dec;
        if (!t->present || !d->period_us || d->duty_us >= d->period_us || !use[i].used_coarse ||
            use[i].unpaused_us == SCHED_RUNNABLE_UNKNOWN)
            continue;
        double over = (double)use[i].unpaused_us - d->duty_us;
        uint32_t end = (d->phase_us + d->duty_us) % d->period_us;
        double all = slice_of(t), sharers = 1;
        for (unsigned j = 0; j < SCHED_MAX_TENANTS; j++)
            if (j != i && g->t[j].present && g->t[j].active &&
                window_open_at(&g->t[j].dec, end)) {
                all += slice_of(&g->t[j]);
                sharers++;
            }
        if (over <= 0 || all <= slice_of(t))
            continue; /* on time, or it ran alone past its window: all of it its own */
        /* it runs on through what is left of its slice (half of one, on average),
         * then the slices alternate, a switch each */
        double kept = fmin(over, slice_of(t) / 2), rest = over - kept;
        double useful = fmax(0, rest - rest / all * sharers * SCHED_SWITCH_US);
        less[i] += rest - useful * slice_of(t) / all;
        for (unsigned j = 0; j < SCHED_MAX_TENANTS; j++)
            if (j != i && opens_at(&g->t[j], end))
                less[j] += fmin(over, over - useful * slice_of(&g->t[j]) / all + SCHED_PREEMPT_US);
    }
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        charged[i] = charged[i] - less[i] > 0 ? charged[i] - less[i] : 0;
}

/* What a windowed tenant is charged by its shims' enabled time: that time, but
 * never less than the window kairosd granted it less SCHED_UNPAUSED_SLACK_US. The
 * figure is the tenant's own word: a preloaded library that zeroed it had a 30 %
 * limit run 1.00 of the time (its overrun estimate went ever more negative, its
 * window grew to the period) and a share's window grow 0.300 -> 0.325 next to a
 * 70 % neighbour. A late pause (more time) is believed: it only costs the tenant;
 * a window shorter than granted can be no more than the resume's lateness. */
static double unpaused_charge(const struct sched_tenant *t, const struct sched_usage *u)
{
    double floor = (double)t->dec.duty_us - SCHED_UNPAUSED_SLACK_US;
    return fmax((double)u->unpaused_us, floor);
}

/* Feedback of the windows: debt = entitled minus charged, bounded. */
static void charge_windows(struct sched_gpu *g, const struct sched_usage *use)
{
    double P = g->period_us, charged[SCHED_MAX_TENANTS], sum = 0, tsum = 0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        struct sched_tenant *t = &g->t[i];
        charged[i] = 0;
        if (t->present && t->dec.period_us && sched_in_windows(g, t))
            tsum += t->target;
        if (!t->present || !t->dec.period_us)
            continue;
        charged[i] = (double)use[i].used_us;
        if (charged[i] < t->dec.duty_us) /* alone in its window: the whole window */
            charged[i] = t->dec.duty_us;
        if (use[i].used_coarse && use[i].unpaused_us != SCHED_RUNNABLE_UNKNOWN)
            charged[i] = unpaused_charge(t, &use[i]); /* its window as it really was */
    }
    share_overruns(g, use, charged);
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        sum += charged[i];
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        g->t[i].charged_us = g->t[i].dec.period_us ? charged[i] : (double)sched_ran_us(g, &use[i]);
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        struct sched_tenant *t = &g->t[i];
        if (!t->present || !t->dec.period_us)
            continue;
        if (use[i].runnable_us == SCHED_RUNNABLE_UNKNOWN ||
            (use[i].used_coarse && use[i].unpaused_us == SCHED_RUNNABLE_UNKNOWN))
            continue; /* coarse use (NVML) alone: the windows alone are the shares */
        if (g->fresh)
            continue; /* the reports straddle a re-plan in mid-period (sched_wake) */
        double entitled = in_windows_level(g) ? t->target * P : t->pol.limit * P;
        /* shares of what the windows delivered, among the tenants that take windows */
        if (in_windows_level(g) && sum > 0 && tsum > 0)
            entitled = t->target / tsum * sum;
        t->debt_us = fmax(-DEBT_MAX * P, fmin(DEBT_MAX * P, t->debt_us + entitled - charged[i]));
        if (t->dec.duty_us < t->dec.period_us) /* paused at the end of its window */
            t->overrun_us = OVERRUN_KEEP * t->overrun_us +
                            (1 - OVERRUN_KEEP) * (charged[i] - t->dec.duty_us);
    }
}

static bool spans_any(const struct sched_gpu *g)
{
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (g->t[i].present && g->t[i].spans)
            return true;
    return false;
}

/* Phases from the layout's start (base) to the period: a woken tenant's window
 * starts where it woke (sched_wake), the others follow it in their order; the
 * rotation is kept until the next wake. A window may then wrap past the period's
 * end (the shim and the simulator take the phase modulo the period). */
static void rotate_windows(struct sched_gpu *g, struct sched_decision *next,
                           const uint32_t base[SCHED_MAX_TENANTS])
{
    uint32_t P = g->period_us;
    if (spans_any(g)) {
        g->rotate_us = 0;
    } else if (g->wake_slot) {
        unsigned w = g->wake_slot - 1;
        if (next[w].period_us && next[w].duty_us < P)
            g->rotate_us = (g->wake_pos_us % P + P - base[w]) % P;
    }
    g->wake_slot = 0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (next[i].period_us)
            next[i].phase_us = (base[i] + g->rotate_us) % P;
}

static void plan_windows(struct sched_gpu *g, struct sched_decision *next)
{
    double P = g->period_us, duty[SCHED_MAX_TENANTS], sum = 0, share = 0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (sched_in_windows(g, &g->t[i]))
            share += g->t[i].target;
    /* the windows fill the period when latency tenants (never paused) take none */
    double stretch = share > 0 ? 1.0 / share : 1.0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        struct sched_tenant *t = &g->t[i];
        duty[i] = 0;
        if (!sched_in_windows(g, t) || t->target <= 0)
            continue;
        duty[i] = fmax(SCHED_DUTY_MIN_US, t->target * stretch * P + DEBT_GAIN * t->debt_us);
        if (t->pol.limit > 0)
            duty[i] = fmin(duty[i], fmax(SCHED_DUTY_MIN_US, t->pol.limit * P - t->overrun_us));
        sum += duty[i];
    }
    double scale = sum > P ? P / sum : 1.0;
    uint32_t phase = 0, base[SCHED_MAX_TENANTS] = {0};
    /* by priority; within one, the tenants that span GPUs first (aligned across them) */
    for (int pass = 0; pass < 6; pass++) {
        int rank = pass / 2;
        bool spanning = pass % 2 == 0;
        for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
            if (duty[i] <= 0 || prio_rank(g->t[i].pol.prio) != rank ||
                g->t[i].spans != spanning)
                continue;
            uint32_t d = (uint32_t)llround(duty[i] * scale);
            if (phase + d > g->period_us)
                d = g->period_us - phase;
            next[i].period_us = g->period_us;
            base[i] = phase;
            next[i].duty_us = d;
            phase += d;
        }
    }
    rotate_windows(g, next, base);
}

/* Timeslice mode: a limited tenant still gets its window at phase 0. */
static void plan_limits(struct sched_gpu *g, struct sched_decision *next)
{
    double P = g->period_us;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        struct sched_tenant *t = &g->t[i];
        if (!t->present || t->pol.limit <= 0 || t->pol.limit >= 1 || next[i].period_us)
            continue;
        double d = t->pol.limit * P - t->overrun_us + fmin(0, DEBT_GAIN * t->debt_us);
        next[i].period_us = g->period_us;
        next[i].phase_us = 0;
        next[i].duty_us = (uint32_t)llround(fmax(SCHED_DUTY_MIN_US, d));
    }
}

/* Whether the tenant wanted the GPU in the last period. Without runnable time
 * (NVML) use says nothing reliable: on the H200 a process's samples come at NVML's
 * own pace and mostly name the process that had the GPU at that instant (one of a
 * 75/25 pair read 99 % and the other nothing for seconds), so a tenant with a live
 * process is active and one without is idle. With the shims' runnable time and
 * coarse use, the runnable time alone: NVML's figure is the last second's, so an
 * inference tenant idle for 300 ms still read 79-94 % used on the H200 and never
 * lent its window (gpu-run-9, bursty-50-train). Exact use (the simulator's
 * `measure: runnable`) still counts: a tenant that ran wanted the GPU. */
static bool seen_active(const struct sched_gpu *g, const struct sched_usage *u)
{
    if (u->no_process)
        return false;
    if (u->runnable_us == SCHED_RUNNABLE_UNKNOWN)
        return true;
    if (u->used_coarse)
        return (double)u->runnable_us / g->period_us >= ACTIVE_MIN;
    return wanted(g, u) >= ACTIVE_MIN || (double)u->used_us / g->period_us >= ACTIVE_MIN;
}

/* The fraction of the period a tenant wanted by its shims' runnable time (NVML's
 * coarse use names whoever held the GPU at its instants: a latency tenant between
 * requests could read 80 %), by its use when there are no reports. */
static double demand_of(const struct sched_gpu *g, const struct sched_usage *u)
{
    uint64_t us = u->runnable_us == SCHED_RUNNABLE_UNKNOWN ? u->used_us : u->runnable_us;
    return fmin((double)us / g->period_us, 1.0);
}

void sched_tick(struct sched_gpu *g, const struct sched_usage use[SCHED_MAX_TENANTS])
{
    double busy = 0;
    uint64_t mask = 0;
    g->progress_scale = progress_scale(g, use);
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        struct sched_tenant *t = &g->t[i];
        if (!t->present)
            continue;
        busy += (double)sched_ran_us(g, &use[i]);
        t->active = (seen_active(g, &use[i]) && !t->quiet) || t->woken;
        if (t->active)
            mask |= 1ull << i;
    }
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (g->t[i].present) {
            g->t[i].achieved = busy > 0 ? (double)sched_ran_us(g, &use[i]) / busy : 0;
            g->t[i].demand = demand_of(g, &use[i]);
        }
    if (mask != g->active_mask) {
        g->active_mask = mask;
        sched_reset_mode(g);
    }
    charge_windows(g, use);
    measure_caps(g, use);
    fill_targets(g);

    sched_judge(g, use, busy);

    sched_plan(g);
    g->windows_cooldown -= g->windows_cooldown > 0;
    g->recall.ttl -= g->recall.ttl > 0;
    g->level_periods += g->level_periods < UINT32_MAX;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        g->t[i].woken -= g->t[i].woken > 0;
        g->t[i].quiet -= g->t[i].quiet > 0;
        g->t[i].use_stale -= g->t[i].use_stale > 0;
    }
    if (g->fresh)
        g->fresh--;
}

/* The active set changed in mid-period: plan again now; true when decisions
 * changed (those changed before and not sent yet stay marked). */
static bool replan_now(struct sched_gpu *g)
{
    sched_reset_mode(g);
    g->fresh = SCHED_WAKE_TICKS;
    bool was[SCHED_MAX_TENANTS], any = false;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        was[i] = g->t[i].changed;
    sched_plan(g);
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        g->t[i].changed |= was[i];
        any |= g->t[i].changed;
    }
    return any;
}

bool sched_wake(struct sched_gpu *g, unsigned slot, uint32_t pos_us)
{
    if (slot >= SCHED_MAX_TENANTS || !g->t[slot].present || g->t[slot].active)
        return false;
    struct sched_tenant *t = &g->t[slot];
    t->active = true;
    t->woken = SCHED_WAKE_TICKS;
    t->quiet = 0;
    t->use_stale = SCHED_COARSE_TICKS;
    t->cap = t->pol.limit > 0 ? t->pol.limit : 1.0; /* what it wanted idle says nothing now */
    g->active_mask |= 1ull << slot;
    g->wake_slot = slot + 1;
    g->wake_pos_us = pos_us;
    return replan_now(g);
}

bool sched_idle_now(struct sched_gpu *g, unsigned slot)
{
    if (slot >= SCHED_MAX_TENANTS || !g->t[slot].present || !g->t[slot].active ||
        g->t[slot].woken)
        return false;
    g->t[slot].active = false;
    g->active_mask &= ~(1ull << slot);
    return replan_now(g);
}

bool sched_idle_early(struct sched_gpu *g, unsigned slot)
{
    if (slot >= SCHED_MAX_TENANTS || g->t[slot].pol.limit > 0)
        return false;
    const struct sched_decision *d = &g->t[slot].dec;
    if (!d->period_us || d->duty_us >= d->period_us)
        return false; /* no window to lend: timeslices give its time away already */
    if (!sched_idle_now(g, slot))
        return false;
    g->t[slot].quiet = SCHED_WAKE_TICKS; /* the reports in flight cover its busy part */
    return true;
}

/* Why decision d holds tenant t back (sched_tenant.hold), and how long of each
 * period it keeps it paused. A limit's window counts as the limit's even where the
 * shares' windows would have been shorter. */
static void classify_hold(const struct sched_gpu *g, struct sched_tenant *t,
                          const struct sched_decision *d)
{
    bool windowed = d->period_us && d->duty_us < d->period_us;
    t->held_us = windowed ? d->period_us - d->duty_us : 0;
    if (windowed)
        t->hold = t->pol.limit > 0 && !in_windows_level(g) ? SCHED_HOLD_LIMIT
                  : t->pol.limit > 0 && d->duty_us <= t->pol.limit * d->period_us + 0.5
                      ? SCHED_HOLD_LIMIT
                      : SCHED_HOLD_SHARE;
    else if (yield_slice(g, t) && d->timeslice_us == yield_slice(g, t))
        t->hold = SCHED_HOLD_YIELD;
    else /* a latency tenant's long slice holds nobody back: it is its priority */
        t->hold = d->timeslice_us && t->pol.prio != SCHED_PRIO_LATENCY ? SCHED_HOLD_SHARE
                                                                        : SCHED_HOLD_NONE;
}

/* Whether a wake of t changes anything at once (sched_wake plans again): in
 * windows mode (its window, rotated to start now; with one tenant active the GPU
 * is in the slices until it wakes), in windows (the others unpaused), beside a
 * latency tenant (the others' yield), under a limit (its window). Otherwise nobody
 * is paused, and its next report marks it active soon enough; its shims then
 * sample it at rest once a report period, not every 20 ms (KAIROS_TIME_QUICK_WAKE). */
static bool wake_counts(const struct sched_gpu *g, const struct sched_tenant *t)
{
    return g->mode == SCHED_MODE_WINDOWS || in_windows_level(g) || sched_latency_present(g) ||
           t->pol.limit > 0;
}

void sched_plan(struct sched_gpu *g)
{
    struct sched_decision next[SCHED_MAX_TENANTS];
    memset(next, 0, sizeof next);
    fill_targets(g);
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        struct sched_tenant *t = &g->t[i];
        if (!t->present)
            continue;
        next[i].timeslice_us = timeslice(g, t);
        next[i].flags = t->pol.prio == SCHED_PRIO_LATENCY ? KAIROS_TIME_LATENCY : 0;
        if (wake_counts(g, t))
            next[i].flags |= KAIROS_TIME_QUICK_WAKE;
    }
    if (in_windows_level(g))
        plan_windows(g, next);
    plan_limits(g, next);
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        struct sched_tenant *t = &g->t[i];
        t->changed = false;
        if (!t->present)
            continue;
        classify_hold(g, t, &next[i]);
        next[i].seq = t->dec.seq;
        if (memcmp(&next[i], &t->dec, sizeof next[i]) || !t->dec.seq) {
            next[i].seq = ++g->seq;
            t->dec = next[i];
            t->changed = true;
        }
    }
    g->wake_slot = 0; /* a rotation is for the plan right after the wake */
}
