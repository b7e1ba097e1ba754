/* sim.h - `kairosd --sim`: a scenario (sim_scenario.c: YAML with the same compute
 * policy fields as kairosd.yaml) run by the real scheduler (sched.c) period by
 * period against the simulated GPU (gpu_sim.c), with per-window and per-tenant
 * results (sim_run.c).
 *
 * Thread rules: no shared state.
 */
#ifndef KAIROS_DAEMON_SIM_H
#define KAIROS_DAEMON_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/time/gpu_sim.h"
#include "daemon/time/sched.h"

#define SIM_WARMUP_PERIODS 10 /* after a tenant arrives or leaves, not judged (by default:
                               * a scenario's warmup_s) */

/* measure: runnable - the simulator's exact knowledge of who waited;
 *          nvml     - use only, and whether a process lives (kairosd without reports);
 *          userd    - what kairosd gets on a GPU: the shims' USERD samples (gpu_sim.h)
 *                     as runnable time and NVML's coarse use (the mean of the last
 *                     second, SIM_NVML_PERIODS) as used time. */
#define SIM_NVML_PERIODS 10
enum sim_measure { SIM_MEASURE_RUNNABLE = 0, SIM_MEASURE_NVML, SIM_MEASURE_USERD };

struct sim_scenario {
    double seconds;
    enum sched_mode mode;     /* mode: auto | timeslices | windows */
    bool native;              /* mode: native - the decisions are never applied: the GPU
                               * as without Kairos, to judge the others against */
    enum sim_measure measure; /* what the scheduler is told of each tenant's demand */
    uint32_t latency_yield_us; /* latency_yield_us, as kairosd.yaml's (sched_set_yield) */
    size_t warmup_periods;    /* warmup_s: periods not judged after a change of who
                               * competes (SIM_WARMUP_PERIODS unless set) */
    struct gpu_sim_params gpu;
    struct gpu_sim_tenant_spec tenants[GPU_SIM_MAX_TENANTS];
    size_t n;
    bool trace;               /* sim_result.trace: each tenant's work per SIM_CHUNK_US */
};

/* The GPU runs in chunks of this between the scheduler's looks: a shim's wake
 * (gpu_sim.h) is acted on at the end of the chunk it was raised in, as kairosd
 * acts on a KAIROS_RUNNABLE_WAKE report at once. */
#define SIM_CHUNK_US 1000u

/* Parses a scenario; 0 or -EINVAL / -errno with "file:line:column: ..." in err. */
int sim_scenario_parse(const char *name, const char *text, size_t len, struct sim_scenario *sc,
                       char *err, size_t err_len);
int sim_scenario_load(const char *path, struct sim_scenario *sc, char *err, size_t err_len);
/* Sets sc's mode from its name: auto, timeslices, windows or native; false (sc
 * unchanged) for anything else. */
bool sim_scenario_set_mode(struct sim_scenario *sc, const char *name);

/* Per tenant results over the judged windows: after warm-up, while it competes
 * for the GPU (a tenant that got all it wanted is not judged: its target is its
 * demand; the others' targets are then shares of what it left). */
struct sim_tenant_result {
    double target;        /* mean target, part of the competing tenants' targets */
    double achieved;      /* mean part of the competing tenants' charged time (sched.h) */
    double target_gpu;    /* mean target, fraction of the GPU's time */
    double gpu;           /* mean fraction of the period it ran */
    double gpu_max;       /* largest fraction of one period */
    double err_p50, err_p95; /* |achieved - target| per window, percentage points */
    double used_err_p95;  /* the same with the time it really ran instead of charged */
    size_t windows;
    uint64_t lat_solo_us, lat_p50_us, lat_p95_us; /* requests tenants */
};

struct sim_result {
    size_t periods;
    /* with sc->trace: trace[k][i] is tenant i's work in [k, k + 1) x SIM_CHUNK_US;
     * trace_n chunks (the caller frees trace) */
    uint64_t (*trace)[GPU_SIM_MAX_TENANTS];
    size_t trace_n;
    size_t wakes;         /* wakes that made the scheduler plan again in mid-period */
    size_t idled;         /* idle reports that did (sched_idle_now) */
    size_t paused;        /* periods in which a tenant had a window shorter than the
                           * period (a pause), in a native scenario none */
    double busy;          /* mean fraction of the period the GPU did work */
    struct sim_tenant_result t[GPU_SIM_MAX_TENANTS];
};

/* One window as printed: per tenant present, its target and what it ran as
 * fractions of the GPU's time, and its split (target and achieved as parts of the
 * competing tenants' time, 0 when it did not compete). */
struct sim_window {
    double busy;
    bool present[GPU_SIM_MAX_TENANTS];
    double target_gpu[GPU_SIM_MAX_TENANTS], ran_gpu[GPU_SIM_MAX_TENANTS];
    double tshare[GPU_SIM_MAX_TENANTS], ashare[GPU_SIM_MAX_TENANTS];
};

/* What the final table's columns mean, printed under it. */
extern const char sim_legend[];

/* Runs the scenario. out (may be NULL) gets one line per window every
 * print_every windows (0: none) and the final table with its legend; json
 * selects one JSON document instead. 0, or -ENOMEM. */
int sim_run(const struct sim_scenario *sc, FILE *out, unsigned print_every, bool json,
            struct sim_result *res);

#endif /* KAIROS_DAEMON_SIM_H */
