/* timeshare.c - the daemon side of compute isolation around sched.c: tenants'
 * slots (one per tenant, the same on every GPU), the 100 ms timer, utilization per
 * tenant, decisions to TIME_POLICY (one epoch and period for all GPUs, and the
 * tenants with policies on several GPUs marked so that their windows line up
 * across them), and the figures kairos ps shows (time_stats.c keeps what each
 * tenant got), and the GPU time of the chargeback counters (usage.h): a tenant with a
 * policy on a GPU is charged what the scheduler charged it, the others their
 * processes' measured utilization, once a second. */
#include "daemon/time/timeshare.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/base/log.h"
#include "daemon/tenants/registry.h"
#include "core/policy.h"
#include "daemon/time/sched.h"
#include "daemon/time/time_stats.h"
#include "daemon/state/usage.h"

#define UNPLANNED_EVERY_TICKS 10          /* charge_unplanned: once a second */
#define UNPLANNED_EVERY_US 1000000ull
#define UNPLANNED_MAX_US 10000000ull      /* at most 10 s charged at once */

/* One tick's RUNNABLE reports of a tenant on a GPU (timeshare_runnable). */
#define RUN_PIDS 32
struct run_seen {
    uint32_t pid[RUN_PIDS];
    double frac[RUN_PIDS];  /* each process's runnable fraction of its interval */
    double open[RUN_PIDS];  /* each process's unpaused fraction of its interval */
    double prog[RUN_PIDS];  /* each process's progress fraction, -1: not measured */
    unsigned n;
    bool partial;           /* some process could not sense all its channels */
    double last;            /* the tenant's fraction as last complete, -1: unknown */
    double last_open;       /* the tenant's unpaused fraction (its processes' largest) */
    double last_prog;       /* the tenant's progress fraction (their sum), -1: unknown */
    unsigned late;          /* ticks it has stood in for missing reports */
};
#define RUN_LATE_MAX 2      /* a report a little late keeps the last figure this long */
#define IDLE_FRAC 0.02      /* under this runnable: idle, as sched.c's ACTIVE_MIN */

struct timeshare {
    struct loop *loop;
    struct gpu_backend *gpu;
    struct tenants *ts;
    const struct config *cfg;
    timeshare_send_fn send;
    void *ctx;
    struct loop_watch *w; /* the SCHED_PERIOD_US timer, or NULL without a loop */
    uint64_t epoch_ns;
    bool util_warned;
    unsigned ticks_logged;
    unsigned ticks;       /* since the start: every UNPLANNED_EVERY_TICKS, charge_unplanned */
    uint64_t charged_us;  /* CLOCK_REALTIME of charge_unplanned's last figures (0: none) */
    char slot_name[SCHED_MAX_TENANTS][KAIROS_NAME_MAX]; /* "" = free */
    struct sched_gpu g[KAIROS_MAX_GPUS];
    struct time_stats stats[KAIROS_MAX_GPUS][SCHED_MAX_TENANTS]; /* what each slot got */
    struct run_seen run[KAIROS_MAX_GPUS][SCHED_MAX_TENANTS];
};

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int slot_find(const struct timeshare *t, const char *name)
{
    for (int i = 0; i < SCHED_MAX_TENANTS; i++)
        if (t->slot_name[i][0] && !strcmp(t->slot_name[i], name))
            return i;
    return -1;
}

static void to_policy(const struct timeshare *t, unsigned gpu, const struct sched_decision *d,
                      struct kairos_time_policy *p)
{
    memset(p, 0, sizeof *p);
    p->gpu = gpu;
    p->flags = d->flags | KAIROS_TIME_REPORT; /* runnable time is the demand */
    p->seq = d->seq;
    p->timeslice_us = d->timeslice_us;
    p->epoch_ns = t->epoch_ns;
    p->period_us = d->period_us;
    p->phase_us = d->phase_us;
    p->duty_us = d->duty_us;
}

static void push_changed(struct timeshare *t, unsigned gpu)
{
    struct sched_gpu *g = &t->g[gpu];
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        if (!g->t[i].present || !g->t[i].changed)
            continue;
        struct kairos_time_policy p;
        to_policy(t, gpu, &g->t[i].dec, &p);
        log_debug("tenant %s, GPU %u: timeslice %llu us, window %u/%u us at %u", t->slot_name[i],
                  gpu, (unsigned long long)p.timeslice_us, p.duty_us, p.period_us, p.phase_us);
        t->send(t->ctx, t->slot_name[i], &p);
        g->t[i].changed = false;
    }
}

/* A slot taken by a tenant starts with its runnable time unknown. */
static void forget_runnable(struct timeshare *t, unsigned slot)
{
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
        t->run[g][slot] = (struct run_seen){.last = -1, .last_open = -1, .last_prog = -1};
}

/* Tenant name's compute policy on gpu, from the registry (whatever set it). */
static bool policy_of(const struct timeshare *t, const char *name, unsigned gpu,
                      struct sched_policy *out)
{
    return registry_policy(&t->ts->compute, ledger_tenant_find(&t->ts->ledger, name), gpu,
                           out);
}

/* The members of a tenant whose policy on gpu is gone are released: never paused,
 * and timeslice 0, the application's own (the shim puts back what CUDA set where
 * Kairos had set another). */
static void release(struct timeshare *t, unsigned gpu, unsigned slot)
{
    struct kairos_time_policy p = {.gpu = gpu, .seq = ++t->g[gpu].seq, .epoch_ns = t->epoch_ns};
    log_debug("tenant %s, GPU %u: no compute policy any more; released", t->slot_name[slot], gpu);
    t->send(t->ctx, t->slot_name[slot], &p);
}

/* Removes from the scheduler the policies no tenant has any more (releasing their
 * members), and frees the slots left without one, so that newcomers find room. */
static void drop_gone(struct timeshare *t)
{
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        if (!t->slot_name[i][0])
            continue;
        bool used = false;
        for (unsigned g = 0; g < t->ts->n_gpus; g++) {
            struct sched_policy pol;
            if (t->g[g].t[i].present && !policy_of(t, t->slot_name[i], g, &pol)) {
                release(t, g, i);
                sched_tenant_remove(&t->g[g], i);
            }
            used |= t->g[g].t[i].present;
        }
        if (!used)
            t->slot_name[i][0] = 0;
    }
}

/* What held a tenant back in the period just ended (sched_tenant's hold and
 * held_us of the decisions in force before the tick). A hold by timeslices alone
 * (another's share, the yield slice) has held_us 0: the period counts as held by
 * that reason with no time paused. */
struct hold_seen {
    enum sched_hold hold;
    uint32_t held_us;
};

static void holds_in_force(const struct sched_gpu *g, struct hold_seen seen[SCHED_MAX_TENANTS])
{
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        seen[i] = (struct hold_seen){.hold = g->t[i].hold, .held_us = g->t[i].held_us};
}

/* Adds the period just measured to each tenant's figures: what it was charged
 * (sched.c: what it used, and at least its whole window when it had one, since
 * the GPU was its alone then; NVML's figures alone under-report a windowed
 * tenant, see docs/scheduler.md), and what held it back. */
static void record_period(struct timeshare *t, unsigned gpu,
                          const struct hold_seen seen[SCHED_MAX_TENANTS])
{
    const struct sched_gpu *g = &t->g[gpu];
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        if (!g->t[i].present)
            continue;
        time_stats_period(&t->stats[gpu][i], (uint64_t)g->t[i].charged_us, g->period_us,
                          seen[i].hold, seen[i].held_us);
        struct ledger_tenant *lt = ledger_tenant_find(&t->ts->ledger, t->slot_name[i]);
        double us = g->t[i].charged_us;
        struct usage *cu = lt && us > 0 ? usage_book_get(&t->ts->usage, lt->id) : NULL;
        if (cu) /* the chargeback counter: what kairos ps shows it got */
            usage_add_gpu(cu, gpu, (uint64_t)(us < g->period_us ? us : g->period_us));
    }
}

/* Once a second, the GPU time of the processes of tenants with no compute policy on
 * a GPU (the others are charged period by period, record_period): their measured
 * utilization since the last time, for the chargeback counters (usage.h). */
static void charge_unplanned(struct timeshare *t, uint64_t now_us)
{
    uint64_t since = t->charged_us ? t->charged_us : now_us - UNPLANNED_EVERY_US;
    uint64_t dt = now_us > since ? now_us - since : 0;
    t->charged_us = now_us;
    if (dt > UNPLANNED_MAX_US) /* the loop was held back: no more than the samples kept */
        dt = UNPLANNED_MAX_US;
    if (!dt || !t->gpu || !t->gpu->ops || !t->gpu->ops->utilization)
        return;
    for (unsigned g = 0; g < t->ts->n_gpus; g++) {
        struct gpu_util u[GPU_MAX_PROCS];
        size_t n = 0;
        if (t->gpu->ops->utilization(t->gpu, g, since, u, GPU_MAX_PROCS, &n))
            continue;
        for (size_t k = 0; k < n; k++) {
            struct ledger_member *m = ledger_find_pid(&t->ts->ledger, u[k].pid);
            int s = m ? slot_find(t, m->tenant->name) : -1;
            struct usage *cu = m && (s < 0 || !t->g[g].t[s].present) ?
                               usage_book_get(&t->ts->usage, m->tenant->id) : NULL;
            if (cu)
                usage_add_gpu(cu, g, (uint64_t)u[k].sm_percent * dt / 100);
        }
    }
}

/* Puts tenant name's policy on gpu into the scheduler (its slot, or a free one). */
static void place(struct timeshare *t, const char *name, unsigned gpu,
                  const struct sched_policy *pol)
{
    if (gpu >= t->ts->n_gpus)
        return;
    int s = slot_find(t, name);
    for (int i = 0; s < 0 && i < SCHED_MAX_TENANTS; i++)
        if (!t->slot_name[i][0]) {
            snprintf(t->slot_name[i], KAIROS_NAME_MAX, "%s", name);
            forget_runnable(t, i);
            s = i;
        }
    if (s < 0) {
        log_warn("more than %d tenants with compute policies: '%s' gets none", SCHED_MAX_TENANTS,
                 name);
        return;
    }
    struct sched_tenant *st = &t->g[gpu].t[s];
    if (!st->present)
        time_stats_reset(&t->stats[gpu][s]);
    if (!st->present || !policy_equal(&st->pol, pol))
        sched_tenant_set(&t->g[gpu], (unsigned)s, pol);
}

/* Tells each GPU's scheduler which tenants have policies on several GPUs, so their
 * windows line up across them (sched_tenant_set_spans). */
static void mark_spans(struct timeshare *t)
{
    for (unsigned s = 0; s < SCHED_MAX_TENANTS; s++) {
        unsigned on = 0;
        for (unsigned g = 0; g < t->ts->n_gpus; g++)
            on += t->g[g].t[s].present;
        for (unsigned g = 0; g < t->ts->n_gpus; g++)
            sched_tenant_set_spans(&t->g[g], s, on >= 2);
    }
}

/* The fault domain of the tenant in slot s ("" for none, or no such tenant). */
static const char *slot_domain(const struct timeshare *t, unsigned s)
{
    const struct ledger_tenant *lt =
        t->slot_name[s][0] ? ledger_tenant_find(&t->ts->ledger, t->slot_name[s]) : NULL;
    return lt ? tenants_settings_of(t->ts, lt)->fault_domain : "";
}

/* Tells each GPU's scheduler the fault domain of each slot's tenant
 * (sched_tenant_set_domain): 1 + the first slot of the same domain, so that two
 * domains never share an id; 0 for none. */
static void mark_domains(struct timeshare *t)
{
    for (unsigned s = 0; s < SCHED_MAX_TENANTS; s++) {
        const char *d = slot_domain(t, s);
        uint32_t id = 0;
        for (unsigned f = 0; d[0] && f <= s && !id; f++)
            if (!strcmp(slot_domain(t, f), d))
                id = f + 1;
        for (unsigned g = 0; g < t->ts->n_gpus; g++)
            sched_tenant_set_domain(&t->g[g], s, id);
    }
}

void timeshare_reconfigure(struct timeshare *t)
{
    drop_gone(t);
    const struct config *c = t->cfg;
    /* the configuration's policies first (their tenants take the first slots, in
     * their order in the file), then those set at run time (registry.h's order) */
    for (int pass = SETTING_CONFIG; pass <= SETTING_RUNTIME; pass++)
        for (size_t k = 0; k < t->ts->ledger.n_tenants; k++) {
            const struct ledger_tenant *lt = t->ts->ledger.tenants[k];
            struct sched_policy pol;
            for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
                if (tenants_settings_of(t->ts, lt)->src.compute[g] == pass &&
                    registry_policy(&t->ts->compute, lt, g, &pol))
                    place(t, lt->name, g, &pol);
        }
    mark_spans(t);
    mark_domains(t);
    for (unsigned g = 0; g < t->ts->n_gpus; g++) {
        sched_set_mode(&t->g[g], c->time_mode);
        sched_set_yield(&t->g[g], c->latency_yield_us);
        sched_plan(&t->g[g]);
        push_changed(t, g);
    }
}

static void log_samples(unsigned gpu, const struct gpu_util *u, size_t n)
{
    char seen[256] = "";
    size_t len = 0;
    for (size_t k = 0; k < n && len < sizeof seen; k++)
        len += (size_t)snprintf(seen + len, sizeof seen - len, " %d=%u%%", (int)u[k].pid,
                                u[k].sm_percent);
    log_debug("GPU %u utilization:%s", gpu, n ? seen : " no samples");
}

/* Every period, at debug level: each tenant's runnable and progress time of the
 * last period as its shims reported them, and its smoothed shortfall below its
 * target after that period (sched.c's lag), with the GPU's level: what the auto
 * ladder judged, period by period, for reading a run's decisions afterwards (in
 * percent of the period; ? unknown). */
static void log_shims(const struct timeshare *t, unsigned gpu,
                      const struct sched_usage use[SCHED_MAX_TENANTS])
{
    char seen[1024] = "";
    size_t len = 0;
    const struct sched_gpu *g = &t->g[gpu];
    double P = g->period_us;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS && len < sizeof seen; i++) {
        if (!g->t[i].present)
            continue;
        const struct sched_usage *u = &use[i];
        char run[16] = "?", prog[16] = "?";
        if (u->runnable_us != SCHED_RUNNABLE_UNKNOWN)
            snprintf(run, sizeof run, "%.0f", 100 * (double)u->runnable_us / P);
        if (u->runnable_us != SCHED_RUNNABLE_UNKNOWN && u->progress_known)
            snprintf(prog, sizeof prog, "%.0f", 100 * (double)u->progress_us / P);
        len += (size_t)snprintf(seen + len, sizeof seen - len, " %s=%s/%s/%+.1f",
                                t->slot_name[i], run, prog, 100 * g->t[i].lag);
    }
    log_debug("GPU %u runnable/progress/lag %% (%s):%s", gpu, sched_level_name(g->level), seen);
}

/* One GPU's use per tenant since since_us, from the backend. 0 or -errno. */
static int measure(struct timeshare *t, unsigned gpu, uint64_t since_us,
                   struct sched_usage use[SCHED_MAX_TENANTS])
{
    struct gpu_util u[GPU_MAX_PROCS];
    size_t n = 0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        use[i] = (struct sched_usage){.runnable_us = SCHED_RUNNABLE_UNKNOWN};
    if (!t->gpu || !t->gpu->ops || !t->gpu->ops->utilization)
        return -ENOTSUP;
    int rc = t->gpu->ops->utilization(t->gpu, gpu, since_us, u, GPU_MAX_PROCS, &n);
    if (rc)
        return rc;
    for (size_t k = 0; k < n; k++) {
        struct ledger_member *m = ledger_find_pid(&t->ts->ledger, u[k].pid);
        int s = m ? slot_find(t, m->tenant->name) : -1;
        if (s >= 0) /* all processes of a tenant are one */
            use[s].used_us += (uint64_t)u[k].sm_percent * t->g[gpu].period_us / 100;
    }
    if (++t->ticks_logged % 10 == 0) /* once a second, what the figures are made of */
        log_samples(gpu, u, n);
    return 0;
}

/* NVML keeps a process's utilization samples at its own pace (on the H200 most
 * 100 ms ticks found none newer than the last tick), so each tick reads the samples
 * of the last second. They feed the figures of kairos ps/top and sched.c's "ran";
 * activity comes from the ledger and, when the shims report, their runnable time
 * alone (docs/scheduler.md says why). */
#define UTIL_HORIZON_US 1000000ull

/* Tenants without any process are idle, whatever the samples said. */
static void mark_absent(struct timeshare *t, struct sched_usage use[SCHED_MAX_TENANTS])
{
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        if (!t->slot_name[i][0])
            continue;
        const struct ledger_tenant *lt = ledger_tenant_find(&t->ts->ledger, t->slot_name[i]);
        use[i].no_process = !lt || lt->n_members == 0;
    }
}

/* A member of the tenant in slot saw work queued after an idle report: if the
 * scheduler has the tenant idle on gpu, it plans again now (sched_wake: the
 * tenant's window from now on, rotated to where in the period it woke) and the
 * decisions that changed go out at once, not at the next tick. */
static void wake(struct timeshare *t, unsigned gpu, unsigned slot)
{
    struct sched_gpu *g = &t->g[gpu];
    uint64_t now = clock_ns(CLOCK_MONOTONIC);
    uint64_t since_us = now > t->epoch_ns ? (now - t->epoch_ns) / 1000 : 0;
    if (!sched_wake(g, slot, (uint32_t)(since_us % g->period_us)))
        return;
    log_debug("tenant %s, GPU %u: back from an idle spell; planned again", t->slot_name[slot],
              gpu);
    push_changed(t, gpu);
}

/* Every member of the tenant in slot reported in this tick, none partial, and
 * together they were runnable under 2 % of the period: the tenant is idle now
 * (sched_idle_now: its window lent from now, not from the next tick). */
static void idle_now(struct timeshare *t, unsigned gpu, unsigned slot)
{
    const struct run_seen *rs = &t->run[gpu][slot];
    const struct ledger_tenant *lt = ledger_tenant_find(&t->ts->ledger, t->slot_name[slot]);
    if (rs->partial || !lt || lt->n_members == 0 || rs->n < lt->n_members)
        return;
    double f = 0;
    for (unsigned k = 0; k < rs->n; k++)
        f += rs->frac[k];
    if (f >= IDLE_FRAC || !sched_idle_now(&t->g[gpu], slot))
        return;
    log_debug("tenant %s, GPU %u: idle; its window lent from now", t->slot_name[slot], gpu);
    push_changed(t, gpu);
}

/* The only member of the tenant in slot has had nothing queued for 20 ms
 * (KAIROS_RUNNABLE_IDLE): the tenant is idle now, its window lent from now
 * (sched_idle_early; not for a tenant with a limit). A tenant of several
 * processes waits for their regular reports (idle_now). */
static void idle_early(struct timeshare *t, unsigned gpu, unsigned slot)
{
    const struct ledger_tenant *lt = ledger_tenant_find(&t->ts->ledger, t->slot_name[slot]);
    if (!lt || lt->n_members != 1 || !sched_idle_early(&t->g[gpu], slot))
        return;
    log_debug("tenant %s, GPU %u: nothing queued for %u ms; its window lent from now",
              t->slot_name[slot], gpu, KAIROS_IDLE_EARLY_MS);
    push_changed(t, gpu);
}

void timeshare_runnable(struct timeshare *t, const char *tenant, uint32_t pid,
                        const struct kairos_runnable *r)
{
    int s = slot_find(t, tenant);
    if (s < 0 || r->gpu >= t->ts->n_gpus || !r->interval_us)
        return;
    if (r->flags & KAIROS_RUNNABLE_WAKE) {
        wake(t, r->gpu, (unsigned)s);
        return; /* not a report: the next regular one covers this interval again */
    }
    if (r->flags & KAIROS_RUNNABLE_IDLE) {
        idle_early(t, r->gpu, (unsigned)s);
        return; /* the same */
    }
    struct run_seen *rs = &t->run[r->gpu][s];
    double f = (double)r->runnable_us / (double)r->interval_us;
    rs->partial |= (r->flags & KAIROS_RUNNABLE_PARTIAL) != 0;
    double open = (double)r->unpaused_us / (double)r->interval_us;
    double prog = r->flags & KAIROS_RUNNABLE_PROGRESS
                      ? (double)r->progress_us / (double)r->interval_us : -1;
    for (unsigned k = 0; k < rs->n; k++)
        if (rs->pid[k] == pid) { /* two reports in one tick: runnable if either was */
            rs->frac[k] = f > rs->frac[k] ? f : rs->frac[k];
            rs->open[k] = open > rs->open[k] ? open : rs->open[k];
            rs->prog[k] = rs->prog[k] < 0 || prog < 0 ? -1 : prog > rs->prog[k] ? prog : rs->prog[k];
            return;
        }
    if (rs->n < RUN_PIDS) {
        rs->pid[rs->n] = pid;
        rs->open[rs->n] = open;
        rs->prog[rs->n] = prog;
        rs->frac[rs->n++] = f;
    } else {
        rs->partial = true; /* more processes than tracked: unknown */
    }
    idle_now(t, r->gpu, (unsigned)s);
}

/* The tenant's runnable time over the period just ended, from its processes'
 * reports: known when every member reported (a report up to RUN_LATE_MAX ticks
 * late keeps the last figure) and none was partial; then the sum of their
 * fractions (processes of one tenant may wait at the same time: the sum is an
 * upper bound, the largest a lower one), at most the whole period. */
static void apply_runnable(struct timeshare *t, unsigned gpu, unsigned slot,
                           struct sched_usage *u)
{
    struct run_seen *rs = &t->run[gpu][slot];
    const struct ledger_tenant *lt = ledger_tenant_find(&t->ts->ledger, t->slot_name[slot]);
    size_t members = lt ? lt->n_members : 0;
    if (rs->partial || members == 0) {
        rs->last = -1;
    } else if (rs->n >= members) {
        double f = 0, open = 0, prog = 0;
        for (unsigned k = 0; k < rs->n; k++) {
            f += rs->frac[k];
            open = rs->open[k] > open ? rs->open[k] : open;
            prog = prog < 0 || rs->prog[k] < 0 ? -1 : prog + rs->prog[k];
        }
        rs->last = f < 1 ? f : 1;
        rs->last_open = open;
        rs->last_prog = prog < 1 ? prog : 1;
        rs->late = 0;
    } else if (rs->last >= 0 && rs->late < RUN_LATE_MAX) {
        rs->late++;
    } else {
        rs->last = -1;
    }
    u->used_coarse = true; /* NVML */
    u->unpaused_us = SCHED_RUNNABLE_UNKNOWN;
    if (rs->last >= 0 && !u->no_process) {
        u->unpaused_us = (uint64_t)llround(rs->last_open * t->g[gpu].period_us);
        /* the samples alone (sched.c adds NVML's use to an active tenant's demand;
         * folded in here it kept an inference tenant idle for 300 ms active on
         * the H200: gpu-run-9, bursty-50-train, nothing lent) */
        uint64_t seen = (uint64_t)llround(rs->last * t->g[gpu].period_us);
        u->runnable_us = seen < t->g[gpu].period_us ? seen : t->g[gpu].period_us;
        u->progress_known = rs->last_prog >= 0;
        if (u->progress_known)
            u->progress_us = (uint64_t)llround(rs->last_prog * t->g[gpu].period_us);
    }
    rs->n = 0;
    rs->partial = false;
}

/* What the shares of a GPU get, when it changes (the auto mode's ladder: native,
 * the shares' timeslices, windows), with the tenants held back now. */
static void log_level_change(const struct timeshare *t, unsigned gpu, enum sched_level was)
{
    const struct sched_gpu *g = &t->g[gpu];
    if (g->level == was)
        return;
    char held[256] = "";
    size_t len = 0;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS && len < sizeof held; i++)
        if (g->t[i].present && g->t[i].hold == SCHED_HOLD_SHARE)
            len += (size_t)snprintf(held + len, sizeof held - len, " %s", t->slot_name[i]);
    log_info("GPU %u: shares %s -> %s (next try of native in %.1f s); held back:%s", gpu,
             sched_level_name(was), sched_level_name(g->level),
             g->hold * (double)g->period_us / 1e6, len ? held : " none");
}

/* One GPU's period: its measurements into sched_tick; false when it has no
 * tenant or no figures (nothing to send). */
static bool tick_gpu(struct timeshare *t, unsigned g, uint64_t now_us)
{
    bool any = false;
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        any |= t->g[g].t[i].present;
    if (!any)
        return false;
    struct sched_usage use[SCHED_MAX_TENANTS];
    int rc = measure(t, g, now_us - UTIL_HORIZON_US, use);
    if (rc) {
        if (!t->util_warned)
            log_warn("GPU %u: no per-process utilization (%s): compute policies are sent "
                     "but not corrected by feedback", g, strerror(-rc));
        t->util_warned = true;
        return false;
    }
    mark_absent(t, use);
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        if (t->g[g].t[i].present)
            apply_runnable(t, g, i, &use[i]);
    sched_tick(&t->g[g], use);
    log_shims(t, g, use);
    return true;
}

void timeshare_tick(struct timeshare *t)
{
    uint64_t now_us = clock_ns(CLOCK_REALTIME) / 1000;
    bool ticked[KAIROS_MAX_GPUS];
    enum sched_level was[KAIROS_MAX_GPUS];
    struct hold_seen seen[KAIROS_MAX_GPUS][SCHED_MAX_TENANTS];
    for (unsigned g = 0; g < t->ts->n_gpus; g++) {
        holds_in_force(&t->g[g], seen[g]);
        was[g] = t->g[g].level;
        ticked[g] = tick_gpu(t, g, now_us);
    }
    if (++t->ticks % UNPLANNED_EVERY_TICKS == 0)
        charge_unplanned(t, now_us);
    sched_couple_levels(t->g, t->ts->n_gpus);
    for (unsigned g = 0; g < t->ts->n_gpus; g++) {
        if (!ticked[g])
            continue;
        log_level_change(t, g, was[g]);
        record_period(t, g, seen[g]);
        push_changed(t, g);
    }
}

static void on_timer(void *ctx, int fd, uint32_t events)
{
    uint64_t expirations;
    if (read(fd, &expirations, sizeof expirations) == (ssize_t)sizeof expirations)
        timeshare_tick(ctx);
}

bool timeshare_policy(const struct timeshare *t, const char *tenant, unsigned gpu,
                      struct kairos_time_policy *out)
{
    int s = t ? slot_find(t, tenant) : -1;
    if (gpu >= KAIROS_MAX_GPUS || s < 0 || !t->g[gpu].t[s].present)
        return false;
    to_policy(t, gpu, &t->g[gpu].t[s].dec, out);
    return true;
}

static uint32_t prio_code(enum sched_prio p)
{
    switch (p) {
    case SCHED_PRIO_LATENCY:
        return KAIROS_PRIO_LATENCY;
    case SCHED_PRIO_BATCH:
        return KAIROS_PRIO_BATCH;
    case SCHED_PRIO_NORMAL:
        break;
    }
    return KAIROS_PRIO_NORMAL;
}

static_assert(SCHED_HOLD_NONE == KAIROS_HOLD_NONE && SCHED_HOLD_SHARE == KAIROS_HOLD_SHARE &&
                  SCHED_HOLD_LIMIT == KAIROS_HOLD_LIMIT && SCHED_HOLD_YIELD == KAIROS_HOLD_YIELD &&
                  SCHED_HOLD_REASONS == KAIROS_HOLD_REASONS,
              "the wire's hold reasons are sched.h's");

/* What held slot s back on gpu (now, over the minute, since its policy) into p. */
static void ps_holds(const struct timeshare *t, unsigned gpu, int s, struct kairos_ps_reply *p)
{
    const struct time_stats *ts = &t->stats[gpu][s];
    p->compute_flags[gpu] |= KAIROS_PS_COMPUTE_HOLDS;
    p->hold[gpu] = t->g[gpu].t[s].hold;
    for (unsigned r = 0; r < KAIROS_HOLD_REASONS; r++) {
        p->hold_period_ppm[gpu][r] = time_stats_hold_periods_ppm(ts, (enum sched_hold)r);
        p->hold_time_ppm[gpu][r] = time_stats_held_ppm(ts, (enum sched_hold)r);
        p->hold_periods[gpu][r] = ts->hold_periods_total[r];
        p->hold_time_us[gpu][r] = ts->held_us_total[r];
    }
}

/* The compute figures of slot s on gpu into p's arrays. */
static void ps_gpu(const struct timeshare *t, unsigned gpu, int s, struct kairos_ps_reply *p)
{
    const struct sched_tenant *st = &t->g[gpu].t[s];
    const struct time_stats *ts = &t->stats[gpu][s];
    p->compute_flags[gpu] = KAIROS_PS_COMPUTE_POLICY;
    if (time_stats_measured(ts))
        p->compute_flags[gpu] |= KAIROS_PS_COMPUTE_MEASURED;
    ps_holds(t, gpu, s, p);
    p->share_ppm[gpu] = time_stats_ppm(st->pol.share);
    p->limit_ppm[gpu] = time_stats_ppm(st->pol.limit);
    p->priority[gpu] = prio_code(st->pol.prio);
    p->target_ppm[gpu] = time_stats_ppm(st->target);
    p->window_ppm[gpu] = time_stats_last_ppm(ts);
    p->minute_ppm[gpu] = time_stats_minute_ppm(ts);
    p->period_us[gpu] = st->dec.period_us;
    p->duty_us[gpu] = st->dec.duty_us;
    p->pauses[gpu] = ts->pauses;
}

void timeshare_ps(const struct timeshare *t, const char *tenant, unsigned n_gpus,
                  struct kairos_ps_reply *p)
{
    int s = t ? slot_find(t, tenant) : -1;
    for (unsigned g = 0; s >= 0 && g < n_gpus && g < KAIROS_MAX_GPUS; g++)
        if (t->g[g].t[s].present)
            ps_gpu(t, g, s, p);
}

int timeshare_init(struct timeshare **out, struct loop *loop, struct gpu_backend *gpu,
                   struct tenants *ts, const struct config *cfg, timeshare_send_fn send,
                   void *ctx)
{
    struct timeshare *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->loop = loop;
    t->gpu = gpu;
    t->ts = ts;
    t->cfg = cfg;
    t->send = send;
    t->ctx = ctx;
    t->epoch_ns = clock_ns(CLOCK_MONOTONIC);
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
        sched_gpu_init(&t->g[g], SCHED_PERIOD_US);
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++)
        forget_runnable(t, i);
    if (loop && !(t->w = loop_add_timer(loop, SCHED_PERIOD_US, on_timer, t))) {
        int rc = -errno;
        timeshare_fini(t);
        return rc ? rc : -EIO;
    }
    *out = t;
    return 0;
}

void timeshare_fini(struct timeshare *t)
{
    if (!t)
        return;
    loop_del_close(t->loop, t->w);
    free(t);
}
