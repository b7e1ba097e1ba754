/* plan.h - the Kairos cluster planner's public API (issue 5), shared with the CLI.
 *
 * The planner decides, for a whole cluster, which MIG layout each GPU gets and which
 * IGPU(s, t, m) each workload gets, so that every workload meets its throughput target
 * on the fewest GPUs. Model: Thr(s, t) = Thr(s, 100 %) x t (KRYPTON, ATC'25), times
 * eff(k) when k workloads time-share an instance (enum plan_interference).
 *
 * Where a workload's profile table gives Thr(whole, t) measured at time shares below 100 %
 * (kairos profile --time-shares), the whole GPU's time share follows that curve instead
 * (curve.c).
 *
 * Vocabulary:
 *   option   a spatial choice on one GPU model: index 0 is the whole GPU (MIG off),
 *            1..n_profiles are the model's MIG profiles.
 *   instance one IGPU container: an option placed on a GPU (a MIG instance at a start
 *            slice, or the whole GPU), time-shared by its workloads.
 *   time     integer units, PLAN_TIME_UNITS per instance (0.1 % steps).
 *
 * Thread rules: no globals; every function works only on the objects it is given, so
 * distinct plans may be computed on distinct threads. No function prints anything.
 * Functions return 0 or -errno unless documented otherwise.
 */
#ifndef KAIROS_PLAN_H
#define KAIROS_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define PLAN_NAME_MAX 48
#define PLAN_MAX_PROFILES 8
#define PLAN_MAX_OPTIONS (PLAN_MAX_PROFILES + 1)
#define PLAN_OPTION_WHOLE 0
#define PLAN_TIME_UNITS 1000
#define PLAN_MEM_SLICES 8
#define PLAN_COMPUTE_SLICES 7
#define PLAN_MAX_LAYOUTS 128
#define PLAN_MAX_POOLS 8

/* ---- GPU models and MIG geometry (models.c, mig.c) ---- */

struct plan_profile {
    char name[PLAN_NAME_MAX];
    int compute_slices;      /* g of "<g>g.<mem>gb", 1..7 */
    int mem_slices;          /* memory slices taken, out of 8 */
    int sms;                 /* streaming multiprocessors */
    int64_t mem_mib;         /* usable memory */
    unsigned start_mask;     /* bit k set: may start at memory slice k */
};

struct plan_gpu_model {
    char name[PLAN_NAME_MAX];
    int whole_sms;           /* SMs with MIG off */
    int64_t whole_mem_mib;   /* memory with MIG off */
    int n_profiles;
    struct plan_profile profiles[PLAN_MAX_PROFILES];
};

/* A multiset of instances on one GPU: count of option o (1..n_profiles) in nibble o. */
typedef uint32_t plan_mix_t;

#define PLAN_LEGAL_HASH 4096

struct plan_layouts {
    int n_placements;                 /* maximal placement-layouts (sets of profile@start) */
    int n_mixes;                      /* distinct maximal multisets */
    plan_mix_t mixes[PLAN_MAX_LAYOUTS];
    int n_legal;                      /* distinct legal multisets, maximal or not */
    plan_mix_t legal[PLAN_LEGAL_HASH]; /* open-addressing set of legal multisets + 1 */
    uint16_t room[PLAN_LEGAL_HASH];   /* per legal multiset: bit o set if one more o fits */
};

/* Built-in models: "A100-40GB" (KRYPTON's five profiles), "A100-40GB+1g.10gb",
 * "H100-80GB", "H200-141GB". Returns 0 or -ENOENT. */
int plan_model_builtin(const char *name, struct plan_gpu_model *out);
/* Names of the built-in models, NULL-terminated. */
const char *const *plan_model_builtin_names(void);
/* Option helpers: option 0 is the whole GPU. */
int plan_option_count(const struct plan_gpu_model *m);
const char *plan_option_name(const struct plan_gpu_model *m, int option);
int plan_option_compute(const struct plan_gpu_model *m, int option);   /* 7 for whole */
int64_t plan_option_mem(const struct plan_gpu_model *m, int option);
int plan_option_sms(const struct plan_gpu_model *m, int option);
/* The option's SMs as an MPS active thread percentage of the whole GPU's:
 * ceil(100 x SMs / whole SMs), 1..100 (kairos profile's proxy, kairosd's sms:). */
int plan_option_sm_percent(const struct plan_gpu_model *m, int option);
int plan_option_find(const struct plan_gpu_model *m, const char *name); /* -1 if none */
/* Validate a (possibly user-described) model; on failure writes why into err. */
int plan_model_validate(const struct plan_gpu_model *m, char *err, size_t errlen);

/* mig.c: geometry. */
int plan_mix_count(plan_mix_t mix, int option);
plan_mix_t plan_mix_add(plan_mix_t mix, int option, int n);
int plan_mix_compute(const struct plan_gpu_model *m, plan_mix_t mix);
/* Enumerate maximal legal layouts of model m. */
int plan_layouts_enumerate(const struct plan_gpu_model *m, struct plan_layouts *out);
/* 1 if the multiset fits on one GPU (some legal placement exists), else 0. */
int plan_mix_fits(const struct plan_layouts *l, plan_mix_t mix);
/* Options o (bit o) of which one more instance fits beside a legal multiset; 0 when
 * the multiset is not legal or nothing fits. */
unsigned plan_mix_room(const struct plan_layouts *l, plan_mix_t mix);
/* The same answer by dominance over the maximal layouts (reference for tests). */
int plan_mix_fits_slow(const struct plan_layouts *l, plan_mix_t mix);
/* Place a multiset: starts[] gets one start slice per instance, in the order of
 * options ascending (count(o) entries for option o). Returns 0 or -ENOSPC. */
int plan_mix_place(const struct plan_gpu_model *m, plan_mix_t mix, int *starts, int max);

/* ---- Input (input.c) ---- */

struct plan_pool {
    struct plan_gpu_model model;
    int count;                         /* GPUs of this model available */
};

/* Solo p99 latency of one workload per option (ms; 0 = not given), from 'solo_p99_ms' or
 * the p99_ms of its profile table; owned by the plan_input that read it. */
struct plan_latency {
    double solo_p99_ms[PLAN_MAX_POOLS][PLAN_MAX_OPTIONS];
};

/* Thr(whole, t) measured at time shares t below 100 % (a profile table's time_shares, kairosd
 * capping the GPU time), per pool; owned by the plan_input that read it. The curve runs
 * piecewise-linearly through (0, 0), these points and (1, Thr(whole)). */
#define PLAN_MAX_SHARES 16
struct plan_time_curve {
    int n[PLAN_MAX_POOLS];                       /* 0: none for that pool (Thr(whole) x t) */
    double t[PLAN_MAX_POOLS][PLAN_MAX_SHARES];   /* fractions of the GPU's time, ascending */
    double thr[PLAN_MAX_POOLS][PLAN_MAX_SHARES]; /* non-decreasing, at most Thr(whole) */
};

struct plan_workload {
    char name[PLAN_NAME_MAX];
    int64_t mem_mib;
    double target;                     /* absolute throughput target */
    /* thr[p][o]: throughput at t = 100 % on option o of pool p; 0 = unknown/unusable */
    double thr[PLAN_MAX_POOLS][PLAN_MAX_OPTIONS];
    int line;                          /* where it was defined, for messages */
    double drain_s;                    /* seconds a move of it costs ('drain_seconds');
                                        * 0: the trace's default (traces only) */
    double p99_ms;                     /* p99 latency target ('p99_ms'), 0: none */
    const struct plan_latency *lat;    /* its solo p99 per option, NULL: none given */
    const struct plan_time_curve *curve; /* its whole-GPU time-share curve, NULL: none */
};

/* Time-sharing loss: k tenants time-sharing one instance each keep eff(k) of what
 * their time share alone would give (kairos, native: kernel streams on the H200,
 * bench/results/README.md; the -pairs modes: two real trainings, docs/planner.md). */
enum plan_interference {
    PLAN_INTERF_NONE,        /* KRYPTON's model: Thr(s, t) = Thr(s) x t exactly */
    PLAN_INTERF_KAIROS,      /* kairosd's windows: 0.986 / 0.977 / 0.948 at 2 / 4 / 8 */
    PLAN_INTERF_NATIVE,      /* the driver's time-slicing: 0.927 / 0.926 / 0.925 */
    PLAN_INTERF_KAIROS_PAIRS, /* kairosd, train-pair: 0.9333 at 2, then kairos's slope */
    PLAN_INTERF_NATIVE_PAIRS, /* the driver, train-pair: 0.8965 at 2, then native's slope */
    PLAN_INTERF_COUNT
};
/* The modes' names as messages list them (one list; a test compares it with the names). */
#define PLAN_INTERF_LIST "none, kairos, native, kairos-pairs or native-pairs"

enum plan_reader {
    PLAN_READER_DOCUMENT,    /* libyaml's document API: the whole file as one tree */
    PLAN_READER_BLOCK,       /* the block-style workload list read item by item */
};

struct plan_input {
    int interference;                  /* enum plan_interference (YAML 'interference') */
    /* 0 (default): a MIG instance holds at most one workload, since kairosd enforces time
     * shares per GPU only; 1 (--mig-time-sharing): several, shares left unenforced */
    int mig_sharing;
    int reader;                        /* enum plan_reader: how the file was read */
    int n_pools;
    struct plan_pool pools[PLAN_MAX_POOLS];
    int n_workloads;
    struct plan_workload *workloads;   /* replicas already expanded */
    int n_lat;
    struct plan_latency **lat;         /* the workloads' solo p99 tables (freed with it) */
    int n_curves;
    struct plan_time_curve **curves;   /* the workloads' time-share curves (freed with it) */
};

/* Parse a YAML cluster description. On error returns -EINVAL (or -ENOMEM/-errno) and
 * writes "file:line:column: what was expected" into err. */
int plan_input_load(const char *path, struct plan_input *in, char *err, size_t errlen);
int plan_input_parse(const char *text, size_t len, const char *name, struct plan_input *in,
                     char *err, size_t errlen);
/* The same with libyaml's document API only (the reference the tests compare the
 * block reader with). */
int plan_input_parse_document(const char *text, size_t len, const char *name,
                              struct plan_input *in, char *err, size_t errlen);
void plan_input_free(struct plan_input *in);
int plan_input_add_workload(struct plan_input *in, const struct plan_workload *w);
/* Load workloads to add to `base`: the file may omit 'gpus' (then its throughput keys
 * name base's GPU models). */
int plan_input_load_extra(const char *path, const struct plan_input *base,
                          struct plan_input *extra, char *err, size_t errlen);
/* Append extra's workloads to in (pools matched by model name); -EINVAL with err when a
 * name is already in `in`. */
int plan_input_merge(struct plan_input *in, const struct plan_input *extra, const char *path,
                     char *err, size_t errlen);
/* Index of the workload called name, or -1. */
int plan_input_find(const struct plan_input *in, const char *name);

/* ---- Plans ---- */

struct plan_gpu {
    int pool;
    int mig;                           /* 0: whole GPU (MIG off), 1: MIG layout */
};

struct plan_instance {
    int gpu;
    int option;                        /* 0 whole, else profile index + 1 */
    int start;                         /* memory slice the instance starts at (0 if whole) */
};

struct plan_assign {
    int workload;
    int instance;
    int time;                          /* time share in PLAN_TIME_UNITS */
    int64_t mem_mib;                   /* memory quota m */
};

enum plan_reason {
    PLAN_OK = 0,
    PLAN_NO_DATA,        /* no throughput given for any option of any pool */
    PLAN_TOO_BIG_MEM,    /* memory exceeds every option */
    PLAN_TOO_SLOW,       /* no option reaches the target at t = 100 % */
    PLAN_NO_CAPACITY,    /* feasible, but the cluster has too few GPUs */
    PLAN_P99_TOO_SLOW,   /* no option meets its p99 target, even alone */
};

struct plan_infeasible {
    int workload;
    enum plan_reason reason;
};

struct plan {
    int n_gpus, n_instances, n_assigns, n_infeasible;
    int cap_gpus, cap_instances, cap_assigns, cap_infeasible;
    struct plan_gpu *gpus;
    struct plan_instance *instances;
    struct plan_assign *assigns;
    struct plan_infeasible *infeasible;
    char algo[24];
    int exact_status;                  /* exact solver: PLAN_EXACT_* */
    double exact_bound;                /* exact solver: lower bound on GPUs */
};

#define PLAN_EXACT_NA (-1)        /* not the exact solver */
#define PLAN_EXACT_NOT_SOLVED 0   /* time limit, size limit or several pools: Kairos's plan */
#define PLAN_EXACT_OPTIMAL 1      /* proven optimal */
#define PLAN_EXACT_CAPPED 2       /* too few GPUs for every workload: nothing proven */
#define PLAN_EXACT_NO_MODEL 3     /* an interference model the integer program lacks */
#define PLAN_EXACT_NO_LATENCY 4   /* p99 targets, which the integer program does not model */

void plan_init(struct plan *p);
void plan_free(struct plan *p);
int plan_copy(struct plan *dst, const struct plan *src);
int plan_add_gpu(struct plan *p, int pool, int mig);
int plan_add_instance(struct plan *p, int gpu, int option, int start);
int plan_add_assign(struct plan *p, int workload, int instance, int time, int64_t mem);
int plan_add_infeasible(struct plan *p, int workload, enum plan_reason r);
const char *plan_reason_text(enum plan_reason r);
const char *plan_exact_status_text(int status);
/* Why workload w cannot be placed on any GPU of the input (PLAN_NO_CAPACITY when it
 * could be, given GPUs enough). */
enum plan_reason plan_reason_of(const struct plan_input *in, int w);
/* Thr(s, t) under the interference factor eff (curve.c), the one throughput model the
 * algorithms and the checker share: Thr(s) x t x eff, or where w has a time-share curve
 * for the whole GPU of pool, the curve at t x eff (interference taken as time lost).
 * time in PLAN_TIME_UNITS. */
double plan_thr_at(const struct plan_workload *w, int pool, int option, int time, double eff);
/* Where that curve applies (whole GPU, w has one for pool): the least time share whose
 * plan_thr_at meets w's target, or -1 when even 100 % does not; -1 elsewhere too. */
int plan_curve_time(const struct plan_workload *w, int pool, int option, double eff);
/* Minimal t (PLAN_TIME_UNITS) for workload w on option o of pool: -1 if infeasible. */
int plan_time_needed(const struct plan_workload *w, int pool, const struct plan_gpu_model *m,
                     int option);
/* The same with `tenants` workloads time-sharing the instance under interference mode. */
int plan_time_needed_shared(const struct plan_workload *w, int pool, const struct plan_gpu_model *m,
                            int option, int mode, int tenants);
/* eff(k) of the mode (1 for one tenant or PLAN_INTERF_NONE): linear between the measured
 * tenant counts, the last slope beyond 8 tenants, never below 0.5. */
double plan_interference_eff(int mode, int tenants);
/* Sum of interference-free time shares that k tenants may hold in one instance so that
 * their shares under the mode, each rounded up, still fit: PLAN_TIME_UNITS for one
 * tenant or no interference, else floor(eff(k) x (PLAN_TIME_UNITS - k)). */
int plan_instance_capacity(int mode, int tenants);
/* p99 latency under time sharing (docs/planner.md, "p99 latency targets"): alone in its
 * instance a workload keeps its solo p99; time-sharing a whole GPU as its one tenant at
 * kairosd's `priority: latency` its p99 is solo x PLAN_P99_LATENCY; any other tenant of
 * k (latency priority elsewhere, or none, or a shared MIG instance, which has no
 * priority) gets solo x plan_p99_factor(0, k). */
#define PLAN_P99_LATENCY 1.305
#define PLAN_P99_NATIVE_2 6.086
double plan_p99_factor(int latency_tenant, int tenants);
/* The workload's solo p99 on option o of pool (0 when not given). */
double plan_solo_p99(const struct plan_workload *w, int pool, int option);
/* Per instance: the workload that gets `priority: latency` (the p99 workload of a shared
 * whole GPU with the tightest target over solo p99, ties to the lowest index), or -1.
 * The caller frees it; NULL when out of memory. */
int *plan_latency_tenants(const struct plan_input *in, const struct plan *p);
/* 1 if a workload of the input has a p99 target. */
int plan_input_has_p99(const struct plan_input *in);
/* Whether `tenants` workloads may share an instance of option: always on the whole GPU
 * (kairosd enforces the shares), on a MIG instance only with in->mig_sharing. */
int plan_may_share(const struct plan_input *in, int option, int tenants);
const char *plan_interference_name(int mode);
int plan_interference_from_name(const char *name);   /* -1 if unknown */

/* ---- Algorithms ---- */

enum plan_algo {
    PLAN_ALGO_KAIROS,    /* ours: seed + portfolio + local search */
    PLAN_ALGO_SEED,      /* the KRYPTON paper's four steps as reconstructed */
    PLAN_ALGO_TEMPORAL,
    PLAN_ALGO_BESTFIT,
    PLAN_ALGO_GPULET,
    PLAN_ALGO_EXACT,
    PLAN_ALGO_COUNT
};

/* How Kairos plans several pools (one pool: always the same plan). */
enum plan_pools_mode {
    PLAN_POOLS_BEST,         /* joint, also started from the best plan pool by pool (default) */
    PLAN_POOLS_JOINT,        /* joint from its own starts only (to measure it) */
    PLAN_POOLS_SEQUENTIAL,   /* pool by pool with spill-over, the best of Kairos and each
                              * baseline (the planner before joint planning) */
    PLAN_POOLS_COUNT
};

struct plan_options {
    enum plan_algo algo;
    double exact_time_limit_s;         /* exact: give up after this (default 10) */
    int exact_max_workloads;           /* exact: refuse beyond this (default 40) */
    int pools;                         /* enum plan_pools_mode, for Kairos with several pools */
};

const char *plan_algo_name(enum plan_algo a);
const char *plan_pools_name(int mode);
int plan_pools_from_name(const char *name);  /* -1 if unknown */
int plan_algo_from_name(const char *name);   /* -1 if unknown */
void plan_options_default(struct plan_options *o);
/* Compute a plan for the whole input. Infeasible workloads are listed in p, not an error. */
int plan_solve(const struct plan_input *in, const struct plan_options *opt, struct plan *p);

/* ---- Checker (check.c): independent of the algorithms ---- */

/* Returns 0 if the plan is valid for the input, else -EINVAL with the first violation
 * described in err. Every feasible workload must be placed exactly once. */
int plan_check(const struct plan_input *in, const struct plan *p, char *err, size_t errlen);

/* ---- Metrics ---- */

struct plan_metrics {
    int gpus;                          /* GPUs with anything on them */
    double slices;                     /* sum of used compute slices / 7, whole GPU = 1 */
    double mean_norm_thr;              /* mean of Thr(s,t)/target over placed workloads */
    int placed, infeasible;
};
void plan_metrics_compute(const struct plan_input *in, const struct plan *p,
                          struct plan_metrics *out);
/* Tenants per instance (the caller frees it; NULL when out of memory). */
int *plan_tenants(const struct plan *p);
/* Thr(s, t) x eff(tenants) / target of one assignment. */
double plan_norm_thr(const struct plan_input *in, const struct plan *p, const struct plan_assign *a,
                     int tenants);

/* ---- Lower bound (bound.c) ---- */

#define PLAN_BOUND_MAX_WORKLOADS 20000
/* LP relaxation of a compute-time and memory-slice model: no plan of the input uses
 * fewer than ceil(*gpus) GPUs to place every workload that fits somewhere. -E2BIG
 * beyond PLAN_BOUND_MAX_WORKLOADS, -EDOM if GLPK fails. */
int plan_lower_bound(const struct plan_input *in, double *gpus);

/* ---- Online changes (online.c) ---- */

struct plan_move {
    int workload;
    int from_gpu, from_option;         /* in the old plan; -1 for a new workload */
    int to_gpu, to_option;             /* in the new plan; -1 when removed */
};

struct plan_moves {
    int n, cap;
    struct plan_move *moves;
};

void plan_moves_free(struct plan_moves *m);
/* Place workloads [first_new, in->n_workloads) into `old` (which covers the others),
 * moving as few placed workloads as possible. Result in out. */
int plan_online_add(const struct plan_input *in, const struct plan *old, int first_new,
                    struct plan *out, struct plan_moves *moves);
/* Drop workloads ws[0..n_ws) from the plan (-ENOENT if one is not placed); then release
 * GPUs, least loaded first, whose workloads fit elsewhere, spending at most max_moves
 * moves in all. A GPU emptied here receives nothing; no workload moves twice. Workload
 * indices in `out` stay those of `in` (the removed ones are simply unplaced). */
int plan_online_remove(const struct plan_input *in, const struct plan *old, const int *ws,
                       int n_ws, int max_moves, struct plan *out, struct plan_moves *moves);
/* Place only workloads ws[0..n_ws) (not in `old`) the way plan_online_add does; the
 * others of `in` that `old` does not place are left out (neither placed nor infeasible). */
int plan_online_add_list(const struct plan_input *in, const struct plan *old, const int *ws,
                         int n_ws, struct plan *out, struct plan_moves *moves);

/* ---- Arrival and departure traces (input.c reads them, trace.c replays them) ---- */

enum plan_trace_kind { PLAN_TRACE_ARRIVE, PLAN_TRACE_DEPART };

struct plan_trace_event {
    double at;                         /* seconds from the start of the trace */
    int kind;                          /* enum plan_trace_kind */
    int workload;                      /* index in the cluster input (arrivals appended) */
    int line;                          /* where the event is, for messages */
};

struct plan_trace {
    double drain_s;                    /* default seconds a moved workload drains */
    double end_s;                      /* GPU-hours are counted up to here */
    int n_initial;                     /* the cluster file's own workloads: [0, n_initial) */
    int n_events;
    struct plan_trace_event *events;
};

#define PLAN_TRACE_DRAIN_DEFAULT 60.0
/* Reads a trace file: its arriving workloads are appended to `cluster` (same fields as
 * the cluster file's workloads, throughput keys naming the cluster's GPU models), its
 * departures must name a workload present at that time. -EINVAL with file:line: what. */
int plan_trace_load(const char *path, struct plan_input *cluster, struct plan_trace *t,
                    char *err, size_t errlen);
int plan_trace_parse(const char *text, size_t len, const char *name, struct plan_input *cluster,
                     struct plan_trace *t, char *err, size_t errlen);
void plan_trace_free(struct plan_trace *t);

enum plan_trace_policy {
    PLAN_TRACE_ONLINE,                 /* online adds and removes only, never a replan */
    PLAN_TRACE_REPLAN,                 /* a plan from scratch at every event, drains ignored */
    PLAN_TRACE_DRAIN_AWARE,            /* online, and a replan where GPU-seconds saved until
                                        * the horizon exceed the drain seconds it adds */
    PLAN_TRACE_POLICIES
};

struct plan_trace_options {
    int policy;                        /* enum plan_trace_policy */
    int max_moves;                     /* a departure's move budget (plan_online_remove) */
    double horizon_s;                  /* how long a replan's saving counts; 0: until the
                                        * next event */
    struct plan_options plan;          /* the replans' algorithm */
};

/* One event's outcome (event -1: the plan of the cluster file's workloads at time 0). */
struct plan_trace_step {
    double at;
    int event;
    int gpus;                          /* GPUs in use after it */
    int moves;                         /* placed workloads that had to move (drain) */
    double drain_s;                    /* their drain seconds */
    int unplaced;                      /* workloads this event could not place: they wait */
    int started;                       /* waiting workloads placed at this event */
    int waiting;                       /* workloads waiting for room after it */
    int replanned;                     /* 1: the plan from scratch was taken */
    int replan_gpus;                   /* GPUs of the plan from scratch considered, or -1 */
    double replan_drain_s;             /* its drain seconds, -1 if none was considered */
};

struct plan_trace_result {
    int n_steps;
    struct plan_trace_step *steps;
    double gpu_hours;                  /* sum of GPUs in use x time, up to the trace's end */
    double drain_s;
    int moves, unplaced, replans, max_gpus;
    /* A workload that finds no room waits (in arrival order, each placed as soon as it
     * fits) until room is made or its departure comes first. */
    int waited;                        /* waiting workloads placed later */
    double wait_s, max_wait_s;         /* their waits: in all, and the longest */
    int gave_up;                       /* waiting workloads whose departure came first */
    int waiting_at_end;                /* still waiting when the trace ends */
};

void plan_trace_options_default(struct plan_trace_options *o);
const char *plan_trace_policy_name(int policy);
/* Replays t against `in` (the cluster with the trace's arrivals appended by
 * plan_trace_load) under one policy; every plan taken is verified by plan_check.
 * -EINVAL with the checker's message in err if one fails, -ENOMEM. */
int plan_trace_replay(const struct plan_input *in, const struct plan_trace *t,
                      const struct plan_trace_options *o, struct plan_trace_result *r,
                      char *err, size_t errlen);
void plan_trace_result_free(struct plan_trace_result *r);

/* ---- Output (output.c) ---- */

enum plan_format { PLAN_FMT_TABLE, PLAN_FMT_JSON, PLAN_FMT_YAML };
/* Write the plan to a stream (FILE *). Returns 0 or -EIO. */
int plan_write(const struct plan_input *in, const struct plan *p,
               const struct plan_moves *moves, enum plan_format fmt, void *stream);
/* The JSON of plan_write through jansson's tree (the YAML writer's source): the tests
 * check it is the same text as plan_write's direct JSON. */
int plan_write_json_tree(const struct plan_input *in, const struct plan *p,
                         const struct plan_moves *moves, void *stream);
/* --explain: the model, the LP lower bound next to the plan, idle capacity per GPU,
 * and why each workload sits where it sits (text). */
int plan_write_explain(const struct plan_input *in, const struct plan *p, void *stream);
/* Read back a plan written with PLAN_FMT_JSON against the same input. */
int plan_read_json(const char *path, const struct plan_input *in, struct plan *p,
                   char *err, size_t errlen);

/* ---- Configuration for the cluster (emit.c) ---- */

#define KAIROS_PLAN_TENANT_MAX 64       /* kairosd tenant names: 63 characters */
/* How a GPU the plan slices is cut (--slices): into MIG instances (mig-parted makes
 * them), or, MIG left off, into SM shares of one NVIDIA MPS server per GPU that kairosd
 * runs (space mode: the GPU's tenants in one fault domain, each capped at its option's
 * SM percentage with sms:). */
enum plan_slices { PLAN_SLICES_MIG = 0, PLAN_SLICES_MPS };
struct plan_emit_to {
    int gpus_per_node;       /* GPU g of the plan is device g % this of node g / this */
    enum plan_slices slices;
};
int plan_emit_nodes(const struct plan *p, int gpus_per_node);
/* mig-parted's configuration (version: v1, mig-configs: kairos-node<N>); with MPS
 * slices every GPU of the plan has MIG off. */
int plan_emit_mig_parted(const struct plan_input *in, const struct plan *p,
                         const struct plan_emit_to *to, void *stream);
/* The tenants of one node's kairosd.yaml (kairosd.conf(5)); -ENOTSUP for a plan with
 * several workloads in one MIG instance (kairosd could not enforce their shares). */
int plan_emit_kairosd(const struct plan_input *in, const struct plan *p,
                      const struct plan_emit_to *to, int node, void *stream);
/* How many of the time shares plan_emit_kairosd writes come from the linear model (the
 * workload's profile has no time_shares for that GPU's pool): a share of the GPU's time
 * equal to the target's part of its solo throughput, which kairosd enforces as GPU time
 * and which a workload that leaves the GPU idle part of the time alone does not need
 * (docs/planner.md). Each such line says so in a comment. -ENOMEM. */
int plan_emit_linear_shares(const struct plan_input *in, const struct plan *p);
/* Slurm gres.conf lines (and each node's slurm.conf Gres= as a comment). */
int plan_emit_slurm(const struct plan_input *in, const struct plan *p,
                    const struct plan_emit_to *to, void *stream);

/* ---- Throughput tables (profile.c) ---- */

struct plan_profile_table {
    char model[PLAN_NAME_MAX];         /* GPU model the table was measured on */
    char workload[PLAN_NAME_MAX];
    char method[PLAN_NAME_MAX];        /* "mps" (active-thread percentage) or "mig" */
    char note[256];                    /* written as a comment: how and where measured */
    int64_t mem_mib;                   /* peak memory, 0 if unknown */
    int n;
    char option[PLAN_MAX_OPTIONS][PLAN_NAME_MAX];
    double thr[PLAN_MAX_OPTIONS];      /* at t = 100 % */
    double p99_ms[PLAN_MAX_OPTIONS];   /* solo p99 latency per option, 0: not measured */
    int n_shares;                      /* time_shares: whole GPU at a time share (kairosd) */
    double share_pct[PLAN_MAX_SHARES]; /* the share, in (0, 100) % */
    double share_thr[PLAN_MAX_SHARES]; /* the throughput measured there */
};

/* How far a time_shares throughput may exceed Thr(whole) (measurement noise) before the
 * table is refused; within it the point counts as Thr(whole). */
#define PLAN_SHARES_TOLERANCE 0.05

/* MPS active-thread percentages to measure for model m (one per distinct SM share);
 * point_of[o] = index in percent[] of option o. Returns the number of points. */
int plan_profile_points(const struct plan_gpu_model *m, int *percent, int *point_of);
/* Reads "throughput=<n>" and "memory_mib=<n>" lines of a workload's output (the last of
 * each counts; others are ignored); leaves *thr / *mem_mib alone when absent. */
void plan_profile_scan(const char *text, double *thr, double *mem_mib);
int plan_profile_write(const struct plan_profile_table *t, void *stream);
/* Whether t's time_shares are usable (curve.c): shares in (0, 100) % ascending and
 * distinct, throughputs > 0 and non-decreasing, none above Thr(whole) by more than
 * PLAN_SHARES_TOLERANCE, 'whole' measured. 0, or -EINVAL with what is wrong in err. */
int plan_profile_check_shares(const struct plan_profile_table *t, char *err, size_t errlen);
/* Reads a table file; -EINVAL with "path:line: what" in err. */
int plan_profile_load(const char *path, struct plan_profile_table *t, char *err, size_t errlen);

/* ---- Generator (gen.c) ---- */

struct plan_gen_params {
    uint64_t seed;
    int n_workloads;
    int n_gpus;
    const char *model;                 /* built-in model name */
    double concave_exponent;           /* per-profile throughput: (SM/SM_whole)^e */
};
int plan_gen(const struct plan_gen_params *g, struct plan_input *in);
/* Write an input back as a cluster file that plan_input_load() reads (stream: FILE *). */
int plan_input_write_yaml(const struct plan_input *in, void *stream);

#endif /* KAIROS_PLAN_H */
