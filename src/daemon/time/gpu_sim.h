/* gpu_sim.h - a simulated GPU: a discrete-time (10 us steps) model of the
 * hardware scheduler the H200 measurements describe, to run the real scheduler
 * (sched.c) against without a GPU, faster than real time.
 *
 * Model: round robin over the runnable channel groups (one per tenant: all of a
 * tenant's processes are one), each running up to its timeslice and then
 * yielding if another is runnable; a context switch costs ctx_switch_us of GPU
 * time nobody gets (idle_switch_us where the group it leaves ran out of work); a window (TIME_POLICY period/phase/duty) pauses a tenant
 * disable_us after its window closes (work keeps running meanwhile, as the
 * preemption RPC completes), which costs the GPU preempt_us if the tenant had
 * work queued, and resumes it enable_us after it opens. The costs are calibrated on the H200
 * (docs/scheduler.md): 120 us per timeslice switch and 600 us per pause of a
 * running tenant reproduce the throughput lost by native time-slicing and by
 * windows there.
 * The shim's runnable sensor is modelled too (sensed_us): every sense_us it
 * samples whether the tenant has work queued that the GPU has not fetched - work
 * waiting (its group not running, or paused), or more work queued behind what
 * runs (a deep queue, a burst, a second request) - or started a unit since the
 * last sample (GPGet moved when the host fetched it; a unit that runs on is not
 * seen again, as one long kernel on the H200) - and counts
 * sense_us per pending sample, at a pseudo-random instant of each interval (a
 * real shim's samples are not in phase with the work): sampling error of up to
 * sense_us per change, unbiased on average. The shim reports once a period, at
 * its own instant (report_phase_us, a different one per tenant: a process's
 * period starts at its first policy, not at kairosd's tick), so kairosd's tick
 * sees the last report, which may end up to a period before the tick; and a shim
 * whose last report was idle (less than 2 % runnable) raises a wake (the
 * KAIROS_RUNNABLE_WAKE report, sent at once) at the first sample that sees work
 * pending; one whose last report was busy says so at once (KAIROS_RUNNABLE_IDLE)
 * when its samples have seen nothing queued for KAIROS_IDLE_EARLY_MS. kairosd
 * acts on all three at once (sim_run.c). A sample that finds the
 * tenant's channels moved since the one before (a unit started; a deep or
 * bursty queue, whose kernels are short, ran at all) counts sense_us of progress
 * (the shim's progress_us, its time on the GPU) if the sample before it did too
 * (tc_sense.c: a run of moving samples counts from its second).
 * NVML's per-process samples can be modelled as on the H200 (nvml_sample_us):
 * one every nvml_sample_us, naming the tenant on the GPU at that instant.
 * Synthetic tenants: deep queue (always runnable), shallow queue (work W then a
 * sync gap G), bursty (deep for on_us, idle for off_us), requests (W of work
 * every gap_us, per-request latency recorded); each present in [arrive, leave).
 *
 * Thread rules: a struct gpu_sim belongs to one thread.
 */
#ifndef KAIROS_DAEMON_GPU_SIM_H
#define KAIROS_DAEMON_GPU_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/time/sched.h"

#define GPU_SIM_MAX_TENANTS 16
#define GPU_SIM_LAT_MAX 8192

enum gpu_sim_load { GPU_SIM_DEEP = 0, GPU_SIM_SHALLOW, GPU_SIM_BURSTY, GPU_SIM_REQUESTS };

struct gpu_sim_tenant_spec {
    char name[64];
    struct sched_policy pol;
    enum gpu_sim_load load;
    uint32_t work_us;   /* shallow: work per sync; bursty: on time; requests: per request */
    uint32_t gap_us;    /* shallow: sync gap; bursty: off time; requests: interval */
    uint64_t arrive_us;
    uint64_t leave_us;  /* 0: stays */
};

struct gpu_sim_params {
    uint32_t step_us;        /* 10 */
    uint32_t ctx_switch_us;  /* 120: a timeslice switch */
    uint32_t idle_switch_us; /* 20: a switch away from a group that ran out of work (no
                              * preemption; an estimate: 4 launch-bound processes ran
                              * at ~2-3x one alone on the H200, windows at 0.43x that) */
    uint32_t disable_us;     /* 720 */
    uint32_t enable_us;      /* 400 */
    uint32_t preempt_us;     /* 600: GPU time lost when a tenant with work is paused */
    uint32_t default_ts_us;  /* 2048: CUDA's own */
    uint32_t sense_us;       /* 1000: the shim's USERD sampling interval */
    uint32_t report_phase_us; /* 0: each shim reports at the period's end; else tenant i
                               * reports at (i + 1) x this within each period */
    uint32_t nvml_sample_us; /* 0: NVML's use is exact (sim_run.c averages it); else one
                              * sample every this, naming the tenant on the GPU then
                              * (the H200: about five a second) */
};

/* A shim's last report (KAIROS_MSG_RUNNABLE), as kairosd's tick takes it. */
struct gpu_sim_report {
    bool have;
    uint64_t interval_us, sensed_us, open_us, progress_us;
};

struct gpu_sim_tenant {
    struct gpu_sim_tenant_spec spec;
    struct sched_decision dec;
    bool present, gate_open;
    uint32_t gate_timer;     /* pending open/close */
    uint64_t work_left, gap_left;
    uint64_t req_arrival[64]; /* queued requests' arrival times */
    unsigned req_head, req_n;
    uint64_t next_req_us;
    uint64_t used_us, runnable_us; /* this window */
    uint64_t open_us;        /* this window: time its channels were enabled */
    uint64_t sensed_us;      /* this window: runnable time as the shim's USERD samples see it */
    uint64_t next_sense_us;  /* when its shim samples next */
    bool ran_last_step;
    bool fetched_since_sense; /* a unit started since its shim's last sample (GPGet moved) */
    bool moved_since_sense;  /* its channels' Get words moved since the last sample */
    bool progress_before;    /* its shim's last sample saw them move */
    uint64_t sense_rng;      /* where in each interval: the shim's clock is not the work's */
    uint64_t rep_since_us, rep_sensed_us, rep_open_us, rep_progress_us; /* the shim's
                                                                         * interval so far */
    uint32_t nvml_hits;      /* this window: NVML samples that named it */
    struct gpu_sim_report report; /* its last report */
    bool wake_armed;         /* its last report was idle: the next pending sample wakes */
    bool wake;               /* a wake was raised (gpu_sim_take_wake clears it) */
    uint64_t quiet_since_us; /* 1 + when its shim's samples stopped seeing work, 0: work */
    bool early_armed;        /* its last report was busy: an early idle report may go */
    bool idle_early;         /* an early idle report was made (gpu_sim_take_idle clears it) */
    bool reported;           /* a report was made (gpu_sim_take_report clears it) */
    uint64_t lat_us[GPU_SIM_LAT_MAX];
    size_t n_lat;
};

struct gpu_sim {
    struct gpu_sim_params p;
    uint64_t now_us;
    size_t n;
    int cur;                 /* channel group on the GPU, -1 none */
    uint64_t slice_left;
    uint32_t switch_left;
    uint64_t busy_us, switch_us; /* this window */
    struct gpu_sim_tenant t[GPU_SIM_MAX_TENANTS];
};

/* Zero params take the defaults above. 0 or -EINVAL (too many tenants). */
int gpu_sim_init(struct gpu_sim *s, const struct gpu_sim_params *p,
                 const struct gpu_sim_tenant_spec *specs, size_t n);
/* The decision a tenant's shim would apply from the next step on. */
void gpu_sim_apply(struct gpu_sim *s, size_t i, const struct sched_decision *d);
/* Runs len_us; use[i] gets tenant i's usage over it; returns the busy time
 * (work done by any tenant) in us. */
uint64_t gpu_sim_run(struct gpu_sim *s, uint64_t len_us, struct sched_usage *use);
/* How many of NVML's samples named tenant i in the last gpu_sim_run (0 unless
 * nvml_sample_us). */
uint32_t gpu_sim_nvml_hits(const struct gpu_sim *s, size_t i);
/* Whether tenant i's shim raised a wake since the last call (and clears it). */
bool gpu_sim_take_wake(struct gpu_sim *s, size_t i);
/* Whether tenant i's shim made an early idle report since the last call (and
 * clears it). */
bool gpu_sim_take_idle(struct gpu_sim *s, size_t i);
/* Whether tenant i's shim made a report since the last call (and clears it). */
bool gpu_sim_take_report(struct gpu_sim *s, size_t i);
/* The p-quantile (0..1) of tenant i's request latencies, 0 when none. */
uint64_t gpu_sim_latency(const struct gpu_sim *s, size_t i, double q);

#endif /* KAIROS_DAEMON_GPU_SIM_H */
