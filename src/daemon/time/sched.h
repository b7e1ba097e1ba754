/* sched.h - the time-share scheduler core of one GPU: tenants' compute policies
 * (share, limit, priority) and what each got in the last period in, one
 * TIME_POLICY-like decision per tenant out. No I/O, no clock, no globals: the
 * caller (kairosd's tick or the simulator) feeds it a period's usage and sends the
 * decisions that changed. docs/scheduler.md describes the algorithm and its bound.
 *
 * Thread rules: a struct sched_gpu belongs to one thread.
 */
#ifndef KAIROS_DAEMON_SCHED_H
#define KAIROS_DAEMON_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "core/policy.h"
#include "daemon/time/slice_trim.h"

#define SCHED_MAX_TENANTS 64
#define SCHED_PERIOD_US 100000u  /* one feedback period = one window period */
#define SCHED_TS_UNIT_US 1000u   /* timeslice of the smallest weight */
_Static_assert(SCHED_YIELD_MAX_US == SCHED_TS_UNIT_US, "the others' yield is at most a unit");
#define SCHED_TS_AUTO_UNIT_US 2048u /* the same in auto: CUDA's own first slice, so that the
                                     * shares' slices keep no request of the smallest
                                     * share waiting longer than natively */
#define SCHED_TS_MAX_US 14000u   /* largest timeslice: the H200 ran 18.6 and 19.8 ms slices
                                  * as about 15 ms (2026-12-03), 10 ms ones as set */
#define SCHED_TS_LATENCY_US 8000u /* a latency tenant's slice is at least this */
#define SCHED_TS_BATCH_US 1000u  /* a batch tenant's slice is at most this */
#define SCHED_YIELD_OVER 0.10    /* a latency tenant that wanted more than its share plus
                                  * this loses the others' yield (sched_set_yield) */
#define SCHED_SWITCH_US 120u     /* GPU time a timeslice switch costs (the H200) */
#define SCHED_PREEMPT_US 600u    /* GPU time a pause of a running tenant costs (the H200) */
#define SCHED_DUTY_MIN_US 1000u  /* no window is shorter (pause costs ~1.1 ms) */
#define SCHED_UNPAUSED_SLACK_US 1000u /* a tenant's enabled time is believed down to its
                                       * window less this (1 % of the period): what a
                                       * lie about it can gain (sched.c unpaused_charge) */

/* How shares are enforced when tenants compete: enum sched_mode (core/policy.h). */

/* What the scheduler does to the shares of a GPU now (sched_gpu.level). AUTO climbs
 * from NATIVE one step at a time while a tenant stays short, and comes down after
 * a hold; TIMESLICES stays at SLICES, WINDOWS at WINDOWS (each while windows can
 * steer anything: two or more active tenants that take windows). */
enum sched_level {
    SCHED_LEVEL_NATIVE = 0, /* the driver's timeslices (timeslice_us 0), no window */
    SCHED_LEVEL_SLICES,     /* timeslices in the ratio of the shares, no window */
    SCHED_LEVEL_WINDOWS,    /* strict clock-aligned complementary windows */
};
#define SCHED_HOLD_MIN_PERIODS 100u /* a level that was needed is kept 10 s at first, */
#define SCHED_HOLD_MAX_PERIODS 600u /* doubling while the native state keeps failing, to 60 s */
#define SCHED_PROBE_PERIODS 10u     /* a step down that sees a tenant short this soon failed */

/* What the backend saw of one tenant (all its processes) in the last period.
 * runnable_us: time it had work queued (ran or waited); the simulator knows it,
 * NVML does not: pass SCHED_RUNNABLE_UNKNOWN and used_us stands in for demand. */
#define SCHED_RUNNABLE_UNKNOWN UINT64_MAX
struct sched_usage {
    uint64_t used_us;
    uint64_t runnable_us;
    bool no_process;      /* the tenant has no live process: idle, whatever was seen */
    /* used_us is coarse (NVML's samples of the last second on a real GPU): with
     * runnable_us known, activity and the time wanted are then runnable_us
     * alone (a tenant idle for 300 ms still reads busy), windows are charged
     * by unpaused_us, the time the tenant's channels were enabled as its shims
     * measured it (a pause that landed late is an overrun charged to the next
     * periods), and not moved at all when that is unknown (SCHED_RUNNABLE_UNKNOWN). */
    bool used_coarse;
    uint64_t unpaused_us;
    /* with progress_known: the time the tenant's shims saw its channels move (the
     * host fetching or processing its work: its time on the GPU, less kernels
     * longer than a sample). What a tenant ran, where used_us is coarse: NVML's
     * few samples a second each name one process, so with many tenants most read
     * 0 % whatever they got (docs/scheduler.md, "Judging timeslices on a GPU"). */
    bool progress_known;
    uint64_t progress_us;
};

/* The decision, field for field what struct kairos_time_policy carries. */
struct sched_decision {
    uint64_t timeslice_us;
    uint32_t period_us;  /* 0: never paused */
    uint32_t phase_us;
    uint32_t duty_us;
    uint32_t flags;      /* KAIROS_TIME_LATENCY */
    uint64_t seq;
};

/* Why a tenant is held back from running as it would natively (sched_tenant.hold):
 * the operator's view of what Kairos did to it (kairos ps, top, the metrics). */
enum sched_hold {
    SCHED_HOLD_NONE = 0, /* runs as it would natively: no window, the driver's timeslices */
    SCHED_HOLD_SHARE,    /* another tenant below its share waited behind it: weighted
                          * timeslices or a window of its share */
    SCHED_HOLD_LIMIT,    /* its limit's window */
    SCHED_HOLD_YIELD,    /* the short yield slice beside a latency tenant's requests */
};
#define SCHED_HOLD_REASONS 4

struct sched_tenant {
    bool present;
    bool active;          /* wanted the GPU in the last period */
    struct sched_policy pol;
    double target;        /* fraction of the period it is entitled to now */
    double achieved;      /* fraction of the GPU's busy time it got last period */
    double debt_us;       /* window feedback: entitled minus charged, bounded */
    double cap;           /* most it may be given: its limit, or what it wanted */
    double charged_us;    /* last period: used, or at least its whole window (it
                           * had the GPU to itself there) */
    double overrun_us;    /* how far what it got of its window (its enabled time, of
                           * an overrun shared with a neighbour only its part, less
                           * what a neighbour's late pause took at its start) passed
                           * its duty lately: a limit's next windows are shortened
                           * by it, or lengthened when negative */
    struct sched_decision dec;
    enum sched_hold hold; /* why dec holds it back (SCHED_HOLD_NONE: it does not) */
    uint32_t held_us;     /* of each period, how long dec keeps it paused (period - duty
                           * while it has a window shorter than the period, else 0) */
    bool changed;         /* dec changed in the last sched_tick */
    bool spans;           /* has a policy on other GPUs too: its window comes first */
    uint32_t domain;      /* its fault domain (space mode: an MPS client beside the
                           * domain's others), as a nonzero id; 0 for none */
    unsigned woken;       /* ticks left since sched_wake: active, its cap not cut by the
                           * reports that still cover its idle spell */
    double demand;        /* last period: its runnable time (without the shims' reports,
                           * its use) as a fraction of the period */
    unsigned quiet;       /* ticks left since sched_idle_early: idle, whatever the
                           * reports that still cover its busy part, until a wake */
    double lag;           /* its shortfall below target while it waits, smoothed
                           * (sched_ladder.c misses_target) */
    double lag_slow;      /* the same shortfall smoothed over ~2 s: a small one that
                           * lasts also takes the native state to the slices */
    unsigned missed;      /* consecutive periods it missed its target (misses_target) */
    struct slice_trim slice; /* its slice's trim under the shares' slices (trim_slices) */
    unsigned use_stale;   /* ticks left since sched_wake in which coarse use (NVML's
                           * last second) still covers its idle spell: its "ran" says
                           * nothing, so it does not count as falling behind (unless
                           * its shims' progress tells what it ran) */
};

struct sched_gpu {
    uint32_t period_us;
    enum sched_mode mode;
    enum sched_level level; /* what the shares get now (windows: strict complementary
                             * windows for every active tenant) */
    enum sched_level held;  /* AUTO: the highest level that was needed since the
                             * active set changed (a failed step down returns to it) */
    unsigned hold;          /* AUTO: periods left before trying one level lower */
    unsigned hold_periods;  /* AUTO: the current hold (doubles when a step down fails) */
    unsigned probe;         /* AUTO: periods left in which a step down may still fail */
    unsigned trial;         /* AUTO: judged periods left before windows are judged */
    unsigned windows_cooldown; /* AUTO: periods left in which no windows are tried: a
                                * trial left the GPU much less busy (the tenants'
                                * nature outlives their idle spells and the active
                                * set: launch-bound inference idles between requests) */
    double busy_avg;        /* the tenants' use summed, smoothed (sched_ladder.c note_busy) */
    double busy_before;     /* busy_avg when the windows began */
    unsigned drift;       /* the most consecutive periods one tenant missed its target */
    unsigned settle;      /* periods to wait after a change before judging drift */
    uint64_t active_mask; /* the active set of the last period */
    uint64_t seq;
    uint32_t yield_us;    /* beside a latency tenant, the others' slice (0: no rule) */
    uint32_t rotate_us;   /* the windows' layout starts here in the period (sched_wake) */
    unsigned wake_slot;   /* slot + 1 of a tenant woken since the last plan, 0: none */
    uint32_t wake_pos_us; /* where in the period it woke */
    unsigned fresh;       /* ticks left whose reports straddle a re-plan in mid-period:
                           * window debts are not moved by them */
    double progress_scale; /* the last tick's: the period over the sum of the tenants'
                            * progress times (sched.c progress_scale) */
    uint64_t level_mask;    /* the active set the level belongs to (set at each reset) */
    uint32_t level_periods; /* periods since that reset */
    bool recalled;          /* the level was taken up again (recall_level), not climbed */
    struct {                /* AUTO: the shares' slices an active set needed, with its
                             * trims, taken up again at once when the same set is
                             * active again within ttl periods (sched_ladder.c recall_level) */
        uint64_t mask;
        unsigned ttl;
        struct slice_trim trim[SCHED_MAX_TENANTS];
    } recall;
    struct sched_tenant t[SCHED_MAX_TENANTS];
};

void sched_gpu_init(struct sched_gpu *g, uint32_t period_us);
void sched_set_mode(struct sched_gpu *g, enum sched_mode mode);
/* "native", "slices" or "windows". */
const char *sched_level_name(enum sched_level l);
/* How soon the other tenants of a GPU with a latency tenant give the GPU up to its
 * requests: their timeslice, yield_us (0: the slices of the shares, a batch
 * tenant's at most SCHED_TS_BATCH_US). A request that arrives while another
 * tenant runs waits for the end of that tenant's slice, so the slice is the
 * request's added latency; it applies while the others do not share the GPU
 * among themselves by timeslices (each alone in its window, or one active), where
 * a slice this short would cost a switch every yield_us; and while every latency
 * tenant of the GPU wanted at most its share plus SCHED_YIELD_OVER of the last
 * period, so that one that keeps the GPU busy takes no more than its long slice
 * against the others' usual ones gives it. Takes effect at the next sched_plan.
 * Defaults to SCHED_YIELD_US. */
void sched_set_yield(struct sched_gpu *g, uint32_t yield_us);
/* A tenant arrives or changes policy; slot < SCHED_MAX_TENANTS. 0 or -EINVAL. */
int sched_tenant_set(struct sched_gpu *g, unsigned slot, const struct sched_policy *p);
void sched_tenant_remove(struct sched_gpu *g, unsigned slot);
/* Whether the tenant in slot has a policy on other GPUs of the node too. Within a
 * priority, the windows of such tenants are laid out first, in slot order, so a
 * tenant that spans GPUs (a data-parallel job) gets its window at the same phase
 * on each (the same period and epoch everywhere: timeshare.c), wherever the
 * tenants before it have the same windows; single-GPU tenants fill the rest. */
void sched_tenant_set_spans(struct sched_gpu *g, unsigned slot, bool spans);
/* The fault domain of the tenant in slot (a nonzero id; 0: none). Clients of one
 * domain run side by side in one MPS server: a tenant whose active neighbours are
 * all of its own domain is never short for the ladder, so nobody is paused or
 * windowed for it (on the H100, windows between two such clients at 75/25 cut their
 * work to 0.37 of plain MPS's: bench/results/2026-12-07-harm). */
void sched_tenant_set_domain(struct sched_gpu *g, unsigned slot, uint32_t domain);
/* One period: use[slot] for every slot (absent ones ignored). Afterwards
 * t[slot].dec holds the decision for the next period, t[slot].changed says
 * whether to send it. */
void sched_tick(struct sched_gpu *g, const struct sched_usage use[SCHED_MAX_TENANTS]);
/* After every GPU's sched_tick (slots are the same tenants on every GPU): the
 * GPUs where one tenant that spans GPUs is active take the highest level among
 * them (unless windows were just seen to idle one: its windows_cooldown), held
 * while that GPU holds it, windows as a trial of their own on each (dropped where
 * they idle it), and are planned again. A rank of a data-parallel job
 * whose peer is paused on another GPU only waits for it, spinning in its
 * collectives, so it is held back on every GPU together, in windows at the same
 * phase, and the others use that time. */
void sched_couple_levels(struct sched_gpu *gpus, unsigned n_gpus);
/* Tenant slot's shim saw work queued after an idle report (KAIROS_RUNNABLE_WAKE),
 * pos_us into the current period (counted from the windows' epoch). If the
 * scheduler had it idle: it is active again at once (and for the next
 * SCHED_WAKE_TICKS ticks, whatever the reports that still cover its idle spell
 * say), the GPU is planned again now, and when that gives it a window the layout
 * is rotated so that its window starts at pos_us: it has its share from now, not
 * from the next period. Not rotated while a tenant of the GPU spans GPUs (their
 * windows stay aligned across GPUs). true when decisions changed (send them). */
#define SCHED_WAKE_TICKS 2
#define SCHED_COARSE_TICKS 10 /* NVML's use is the last second's */
bool sched_wake(struct sched_gpu *g, unsigned slot, uint32_t pos_us);
/* A report just received says the tenant in slot idled a whole interval (under
 * 2 % runnable, every member): if the scheduler has it active (and not just
 * woken), it is idle at once and the GPU planned again now, its window lent from
 * now rather than from the next tick (up to a period later). true when decisions
 * changed (send them). */
bool sched_idle_now(struct sched_gpu *g, unsigned slot);
/* The same on an early idle report (KAIROS_RUNNABLE_IDLE: nothing queued for
 * 20 ms), and idle for SCHED_WAKE_TICKS ticks whatever the reports that still
 * cover its busy part say, unless it wakes; only for a tenant that has a window
 * (in timeslices an idle tenant holds nothing), and not for one with a limit: a lone
 * long kernel reads quiet too, and each early idle and the wake after it plan the
 * GPU again (debts reset, the woken tenant's window rotated to start then), which
 * let 200 ms kernels under a 30 % limit run 31.5 % of the GPU in the simulator. */
bool sched_idle_early(struct sched_gpu *g, unsigned slot);
/* Decides again from the last measurements (after sched_tenant_set or
 * sched_tenant_remove, so that a newcomer gets a policy at once). */
void sched_plan(struct sched_gpu *g);

#endif /* KAIROS_DAEMON_SCHED_H */
