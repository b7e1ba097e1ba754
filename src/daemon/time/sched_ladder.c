/* sched_ladder.c - AUTO mode's ladder in the scheduler of one GPU (sched.c, sched.h,
 * docs/scheduler.md): once a period (sched_judge, from sched_tick), who is short of
 * its target, and the level. Do no harm: the driver's own timeslices and no pause
 * until a tenant that waited is clearly short of its target (NATIVE: its shortfall,
 * smoothed, above 3 points and a fifth of its target for 3 periods; or its part of
 * what ran 4 points below its part of the targets over ~2 s); then timeslices in the
 * ratio of the shares, the smallest CUDA's own 2048 us, each trimmed by what its
 * tenant got while the GPU was contended (SLICES; trim_slices, slice_trim.h); then,
 * if one stays short under those with its slice trimmed up as far as it may go,
 * windows (WINDOWS), kept only if the GPU stays at least 0.9 as busy as before them
 * (a launch-bound tenant alone in its window idles the GPU), else not tried again
 * for 60 s.
 * A level that was needed is held for 10 s, then the native state is tried again,
 * the hold doubling (to 60 s) each time a tenant is short again at once (beside a
 * latency tenant, windows at once, as before); an active set that needed the slices
 * and is back within 60 s takes them up at once (recall_level). Latency tenants never
 * trigger windows. Also the GPUs that one tenant spans, their levels coupled
 * (sched_couple_levels). Pure, like sched.c: no I/O, no clock, no globals.
 */
#include "daemon/time/sched.h"

#include <assert.h>
#include <math.h>

#include "daemon/time/sched_internal.h"
#include "kairos/proto.h"

#define LAG_GAIN 0.3         /* the weight of the last period in a tenant's shortfall */
#define SWING_ERR 0.03       /* natively: 3 points short in one period, at least */
#define DRIFT_PERIODS 3
#define PROBE_DRIFT_PERIODS 2 /* short this many periods on probation: back up at once */
#define WINDOWS_TRIAL_PERIODS 12 /* judged periods of windows before windows_helped() */
#define WINDOWS_BUSY_KEEP 0.9  /* windows keep at least this part of the GPU's use */
#define SETTLE_PERIODS 2
#define NATIVE_REL 0.2       /* in the native state, short by at least this part of
                              * its target too (and SWING_ERR) */
#define RECALL_CONFIRM 20     /* periods a set keeps a level taken up again before its
                              * next reset renews it (remember_level) */
#define SLOW_LAG_GAIN 0.05   /* the weight of the last period in lag_slow */
#define SLOW_LAG_ERR 0.04    /* in the native state, 4 points short for ~2 s is short too:
                              * on the H200 a training at 70 % next to one at 30 % ran
                              * 7-10 points short, under NATIVE_REL of its target, for
                              * whole runs (bench/results/2026-12-05-harm-3) */

/* The level the mode starts from for the active set, and the lowest AUTO comes
 * down to: strict windows in WINDOWS mode; in AUTO also beside a latency tenant,
 * where the others' short yield slice holds only while each is alone in its
 * window (in the simulator, next to requests, two deep tenants in 1-2 ms slices
 * kept the GPU 92.2 % busy and a request's p95 at 5.23 ms; in windows 97.1 % and
 * 2.76 ms, solo 2 ms); otherwise the driver's own timeslices in AUTO, the shares'
 * in TIMESLICES (and in WINDOWS while windows cannot steer anything). */
static enum sched_level floor_level(const struct sched_gpu *g)
{
    bool windows = sched_windows_possible(g);
    if (g->mode == SCHED_MODE_WINDOWS || (g->mode == SCHED_MODE_AUTO && sched_latency_present(g)))
        return windows ? SCHED_LEVEL_WINDOWS : SCHED_LEVEL_SLICES;
    return g->mode == SCHED_MODE_AUTO ? SCHED_LEVEL_NATIVE : SCHED_LEVEL_SLICES;
}

static void forget_misses(struct sched_gpu *g)
{
    g->drift = 0;
    g->settle = SETTLE_PERIODS;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        g->t[i].lag = g->t[i].lag_slow = 0;
        g->t[i].missed = 0;
    }
}

/* Before the active set's level is reset: where AUTO had needed the shares' slices
 * (or more) for it, that set and its trims are kept for SCHED_HOLD_MAX_PERIODS. A
 * level only taken up again counts as needed once the set kept it RECALL_CONFIRM
 * periods (two trainings do, between their idle spells); a set that changes faster
 * (inference idling between requests) does not renew it, so a climb it once made
 * is forgotten 60 s later instead of being taken up again at every spell. */
static void remember_level(struct sched_gpu *g)
{
    if (g->mode != SCHED_MODE_AUTO || g->level < SCHED_LEVEL_SLICES || !g->level_mask ||
        (g->recalled && g->level_periods < RECALL_CONFIRM))
        return;
    g->recall.mask = g->level_mask;
    g->recall.ttl = SCHED_HOLD_MAX_PERIODS;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        g->recall.trim[i] = g->t[i].slice;
}

/* After a reset: the same active set as the one remembered (two trainings back from
 * an idle spell, an evaluation, a checkpoint) takes the shares' slices up again at
 * once, with their trims and the first hold, instead of running natively until its
 * shortfall shows again (on the H200 ~1 s of every 8 s round of two trainings at
 * 70/30); the hold's end tries the native state as always. Never windows: whether
 * they help is judged afresh. */
static void recall_level(struct sched_gpu *g)
{
    if (g->mode != SCHED_MODE_AUTO || !g->recall.ttl || g->recall.mask != g->active_mask ||
        g->level >= SCHED_LEVEL_SLICES)
        return;
    g->level = g->held = SCHED_LEVEL_SLICES;
    g->hold = g->hold_periods;
    g->recalled = true;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        g->t[i].slice = g->recall.trim[i];
}

/* A new active set (sched_tick, a wake, an idle report): the mode's floor, or the
 * level it needed lately (recall_level); its misses, debts and trims start afresh. */
void sched_reset_mode(struct sched_gpu *g)
{
    remember_level(g);
    g->level = g->held = floor_level(g);
    g->hold = g->probe = g->trial = 0; /* windows_cooldown outlives the active set */
    g->hold_periods = SCHED_HOLD_MIN_PERIODS;
    g->drift = 0;
    g->settle = SETTLE_PERIODS;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        g->t[i].debt_us = g->t[i].lag = g->t[i].lag_slow = 0;
        g->t[i].missed = 0;
        slice_trim_reset(&g->t[i].slice);
    }
    g->level_mask = g->active_mask;
    g->level_periods = 0;
    g->recalled = false;
    recall_level(g);
}

/* A new mode or policy: what an active set needed before says nothing now. */
void sched_forget_levels(struct sched_gpu *g)
{
    g->recall.ttl = 0;
    g->level_mask = 0;
    sched_reset_mode(g);
}

/* The targets of the tenants that take windows, summed. */
static double windowed_targets(const struct sched_gpu *g)
{
    double sum = 0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (sched_in_windows(g, &g->t[i]))
            sum += g->t[i].target;
    return sum;
}

/* Whether the tenant waited in the last period (more than 5 % of it) and misses
 * its target: its shortfall (target - ran), smoothed over a few periods
 * (LAG_GAIN), is above SWING_ERR and NATIVE_REL of its target, in the native
 * state and under the shares' slices alike; ladder() climbs when that holds
 * DRIFT_PERIODS in a row. On probation after a step down, one period's
 * shortfall above the same bound counts (PROBE_DRIFT_PERIODS in a row): the
 * level before was needed. The bound is above the noise of the shims' progress
 * between symmetric tenants, mostly: on the H200 four launch-bound inference
 * processes read 14-37 % of their sum from one period to the next, and this
 * still took that for a shortfall in 3 of 6 runs (docs/scheduler.md). */
/* Whether t is in a fault domain and every other tenant that takes windows now is of
 * the same domain: clients of one MPS server, which run side by side, not in turns. */
static bool among_its_domain(const struct sched_gpu *g, const struct sched_tenant *t)
{
    if (!t->domain)
        return false;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        const struct sched_tenant *u = &g->t[i];
        if (u != t && sched_in_windows(g, u) && u->domain != t->domain)
            return false;
    }
    return true;
}

static bool misses_target(const struct sched_gpu *g, struct sched_tenant *t,
                          const struct sched_usage *u, double busy, double targets)
{
    if (among_its_domain(g, t)) { /* sched.h, sched_tenant_set_domain */
        t->lag = t->lag_slow = 0;
        return false;
    }
    /* windows would not help a latency tenant that waited; back from an idle spell,
     * NVML's second still holds it (on the H200 auto windowed a bursty tenant so,
     * and lent nothing), unless its shims' progress says what it ran: then it is
     * judged at once (two trainings at 70/30 back from an idle spell ran natively
     * 50/50 for the 1 s of NVML's staleness first, 1.4 s of an 8 s run on the H200) */
    if (!sched_in_windows(g, t) || u->runnable_us == SCHED_RUNNABLE_UNKNOWN || busy <= 0 ||
        (u->used_coarse && !u->progress_known && t->use_stale)) {
        t->lag = 0;
        return false;
    }
    uint64_t used = sched_ran_us(g, u);
    double waited = (double)(u->runnable_us - (used < u->runnable_us ? used : u->runnable_us)) /
                    g->period_us;
    if (waited <= 0.05) {
        t->lag = t->lag_slow = 0;
        return false;
    }
    double shortfall = t->target - (double)used / g->period_us;
    t->lag += LAG_GAIN * (shortfall - t->lag);
    /* parts of what ran and of the targets: a GPU short of busy (switches, a
     * shallow queue) is no tenant's shortfall */
    double part_short = (targets > 0 ? t->target / targets : 0) - (double)used / busy;
    t->lag_slow += SLOW_LAG_GAIN * (part_short - t->lag_slow);
    double clear = fmax(SWING_ERR, NATIVE_REL * t->target);
    if (g->probe) /* back in the native state after a needed level: in each period */
        return shortfall > clear;
    if (g->level == SCHED_LEVEL_NATIVE && t->lag_slow > SLOW_LAG_ERR)
        return true; /* a small shortfall that lasts */
    return t->lag > clear; /* smoothed over a few periods */
}

/* Whether the slices' trims are spent: no tenant that took more than its part of
 * what ran can have its slice shortened further, or the short tenant t's can grow
 * no longer (slice_trim.h). Two short tenants beside one over its part share the
 * room the latter's shortest slice leaves (the trims keep a geometric mean of 1),
 * so neither need reach the longest slice. */
static bool slices_spent(const struct sched_gpu *g, const struct sched_tenant *t)
{
    if (slice_trim_at_most(&t->slice))
        return true;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        const struct sched_tenant *u = &g->t[i];
        if (u != t && sched_in_windows(g, u) && !slice_trim_wants_more(&u->slice) &&
            !slice_trim_at_least(&u->slice))
            return false;
    }
    return true;
}

/* Whether the shares' slices can still do more for a tenant short under them: the
 * trims are not yet spent (slices_spent). Until they are, its shortfall does not
 * climb to windows: the slices are given the time to act (~1-2 s for a lasting
 * shortfall), and a short dip of one launch-bound tenant among symmetric ones (on
 * an H100 one of four inference processes read 11-19 % of the four's progress for
 * 0.6 s where 25 % was its part) moves the trims a little and passes, where it
 * used to start a windows trial that held every process's p99 at 77 ms for the
 * trial's 1.2 s (bench/results/2026-12-06-harm, infer4). The price: a shallow
 * queue that the slices cannot help (it never uses one up) gets its windows ~1.2 s
 * later (2.0 s into etc/sim/two-shallow-70-30.yaml, not 0.8). */
static bool slices_can_help(const struct sched_gpu *g, const struct sched_tenant *t)
{
    if (g->mode != SCHED_MODE_AUTO || g->level != SCHED_LEVEL_SLICES || g->probe)
        return false;
    /* a tenant held to its limit's window meets the others' slices in it: only
     * windows give it that window whole */
    bool limited = t->pol.limit > 0 && t->pol.limit < 1;
    return !limited && !slices_spent(g, t);
}

/* Whether a tenant waited (more than 5 % of the last period): the GPU was contended,
 * and how it ran the slices says how they divide it. */
static bool contended(const struct sched_gpu *g, const struct sched_usage use[])
{
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        const struct sched_tenant *t = &g->t[i];
        if (sched_in_windows(g, t) && use[i].runnable_us != SCHED_RUNNABLE_UNKNOWN &&
            use[i].runnable_us > sched_ran_us(g, &use[i]) + g->period_us / 20)
            return true;
    }
    return false;
}

/* Under the shares' slices, in a contended period, each active tenant's slice is
 * trimmed by how its part of what ran compares with its part of the targets
 * (slice_trim.h); latency tenants keep theirs. */
static void trim_slices(struct sched_gpu *g, const struct sched_usage use[])
{
    if (g->level != SCHED_LEVEL_SLICES || !contended(g, use))
        return;
    double targets = windowed_targets(g), ran = 0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (sched_in_windows(g, &g->t[i]))
            ran += (double)sched_ran_us(g, &use[i]);
    if (targets <= 0 || ran <= 0)
        return;
    struct slice_trim *trims[SCHED_MAX_TENANTS];
    unsigned n = 0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        struct sched_tenant *t = &g->t[i];
        if (!sched_in_windows(g, t))
            continue;
        slice_trim_observe(&t->slice, t->target / targets, (double)sched_ran_us(g, &use[i]) / ran);
        trims[n++] = &t->slice;
    }
    slice_trim_normalize(trims, n);
}

/* How busy the GPU was, smoothed (LAG_GAIN): the tenants' use summed (NVML's, of
 * the last second, on a GPU; exact in the simulator). */
static void note_busy(struct sched_gpu *g, const struct sched_usage use[SCHED_MAX_TENANTS])
{
    double sum = 0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (g->t[i].present)
            sum += (double)use[i].used_us / g->period_us;
    g->busy_avg += LAG_GAIN * (fmin(sum, 1.0) - g->busy_avg);
}

/* Windows help a short tenant only if it can use a window: a launch-bound one
 * alone in its window idles the GPU while it is on the CPU (on the H200 four such
 * inference processes served 210 requests/s in windows against 486 natively;
 * eight, 78 per process against 107 natively), where a shallow queue next to a
 * deep one loses a few points (etc/sim/two-shallow-70-30.yaml: 89.8 % busy in
 * windows, 94.3 % natively). The tenants' own figures cannot tell the two apart
 * (a launch-bound tenant alone in its window moves its channels in most samples
 * of it), the GPU's use can: windows that leave it busy less than
 * WINDOWS_BUSY_KEEP of what it was before, WINDOWS_TRIAL_PERIODS after they
 * began (NVML's figure is the last second's), are left for the slices. */
static void start_windows_trial(struct sched_gpu *g)
{
    g->busy_before = g->busy_avg;
    g->trial = WINDOWS_TRIAL_PERIODS;
}

static bool windows_helped(const struct sched_gpu *g)
{
    return g->busy_avg >= WINDOWS_BUSY_KEEP * g->busy_before;
}

/* AUTO's ladder, once a period outside a settling spell: a tenant short for
 * DRIFT_PERIODS in a row raises the level by one (or, on probation: within
 * SCHED_PROBE_PERIODS of a step down, PROBE_DRIFT_PERIODS in a row, back to the
 * level that was needed, the hold doubled); a level
 * above the floor comes down to the floor, on probation, once held for its hold
 * (a tenant's own figures cannot tell that contention is gone: under windows
 * every tenant with work waits while paused, and a short tenant waits alone
 * behind a greedy one that never does). Windows that left the GPU much less busy
 * are left for the slices (start_windows_trial). */
static void ladder(struct sched_gpu *g, unsigned missed)
{
    enum sched_level floor = floor_level(g);
    g->drift = missed;
    if (g->probe && --g->probe == 0) { /* the step down held: contention is gone */
        g->held = g->level;
        g->hold_periods = SCHED_HOLD_MIN_PERIODS;
    }
    if (missed >= (g->probe ? PROBE_DRIFT_PERIODS : DRIFT_PERIODS) &&
        g->level < SCHED_LEVEL_WINDOWS &&
        (g->level < SCHED_LEVEL_SLICES || sched_windows_possible(g))) {
        enum sched_level next = g->level + 1;
        if (g->probe) { /* the step down failed: back, held longer */
            next = g->held > next ? g->held : next;
            g->hold_periods = g->hold_periods * 2 < SCHED_HOLD_MAX_PERIODS
                                  ? g->hold_periods * 2
                                  : SCHED_HOLD_MAX_PERIODS;
        }
        if (next == SCHED_LEVEL_WINDOWS && g->windows_cooldown)
            next = SCHED_LEVEL_SLICES;
        if (next == g->level)
            return;
        if (next == SCHED_LEVEL_WINDOWS)
            start_windows_trial(g);
        g->level = next;
        g->recalled = false; /* needed again: no longer only taken up */
        g->held = next > g->held ? next : g->held;
        g->hold = g->hold_periods;
        g->probe = 0;
        forget_misses(g);
    } else if (g->level == SCHED_LEVEL_WINDOWS && g->trial && --g->trial == 0 &&
               !windows_helped(g)) {
        g->level = g->held = SCHED_LEVEL_SLICES; /* and no windows for a while */
        g->windows_cooldown = SCHED_HOLD_MAX_PERIODS;
        forget_misses(g);
        g->settle = 1;
    } else if (g->level > floor && g->hold && --g->hold == 0) {
        g->level = floor;
        g->probe = SCHED_PROBE_PERIODS;
        forget_misses(g);
        g->settle = 1; /* a report that straddles the step can only hide a shortfall */
    }
}

/* One period's judgement, once its targets are filled (sched_tick): who missed its
 * target, AUTO's ladder outside a settling spell, the slices' trims, and how busy the
 * GPU was. busy: what the tenants ran in the period, summed (sched_ran_us). */
void sched_judge(struct sched_gpu *g, const struct sched_usage use[], double busy)
{
    unsigned missed = 0; /* the most periods in a row one tenant has missed its target */
    double targets = windowed_targets(g);
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        struct sched_tenant *t = &g->t[i];
        if (!t->present)
            continue;
        t->missed = misses_target(g, t, &use[i], busy, targets) && !g->settle ? t->missed + 1
                                                                             : 0;
        unsigned counts = slices_can_help(g, t) ? 0 : t->missed;
        missed = counts > missed ? counts : missed;
    }
    if (g->settle)
        g->settle--;
    else if (g->mode == SCHED_MODE_AUTO)
        ladder(g, missed);
    if (!g->settle)
        trim_slices(g, use);
    note_busy(g, use);
}

/* Whether a tenant that spans GPUs is active on both a and b. */
static bool tied(const struct sched_gpu *a, const struct sched_gpu *b)
{
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (a->t[i].present && a->t[i].spans && a->t[i].active && b->t[i].present &&
            b->t[i].active)
            return true;
    return false;
}

/* Whether f can take lead's level: a higher one, and windows only where they are
 * possible and were not just seen to idle f. */
static bool may_follow(const struct sched_gpu *f, const struct sched_gpu *lead)
{
    if (f->mode != SCHED_MODE_AUTO || lead->level <= f->level)
        return false;
    return lead->level < SCHED_LEVEL_WINDOWS || (sched_windows_possible(f) && !f->windows_cooldown);
}

/* f takes lead's level as if it had climbed there itself, held as long as lead
 * holds it. Windows are a trial on f too: if they idle f's GPU (its own tenants
 * launch-bound), f leaves them for the slices and takes none for a while, whatever
 * lead does (may_follow). */
static void follow(struct sched_gpu *f, const struct sched_gpu *lead)
{
    if (lead->level == SCHED_LEVEL_WINDOWS)
        start_windows_trial(f);
    f->level = lead->level;
    f->held = lead->level > f->held ? lead->level : f->held;
    f->hold = lead->hold > f->hold ? lead->hold : f->hold;
    f->hold_periods =
        lead->hold_periods > f->hold_periods ? lead->hold_periods : f->hold_periods;
    f->probe = 0;
}

void sched_couple_levels(struct sched_gpu *gpus, unsigned n_gpus)
{
    bool raised[KAIROS_MAX_GPUS] = {false};
    assert(n_gpus <= KAIROS_MAX_GPUS);
    for (bool again = true; again;) { /* a chain of GPUs: until nothing rises */
        again = false;
        for (unsigned a = 0; a < n_gpus; a++)
            for (unsigned b = 0; b < n_gpus; b++)
                if (a != b && may_follow(&gpus[b], &gpus[a]) && tied(&gpus[a], &gpus[b])) {
                    follow(&gpus[b], &gpus[a]);
                    raised[b] = again = true;
                }
    }
    for (unsigned g = 0; g < n_gpus; g++)
        if (raised[g])
            sched_plan(&gpus[g]);
}
