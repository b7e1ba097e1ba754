/* internal.h - the algorithms' shared working state for one GPU pool (not public).
 *
 * A state holds instances (an option, a GPU or -1 before packing, used time and
 * memory, a member list) and GPUs (whole mode or a MIG multiset). Every heuristic
 * builds instances here, packs them onto GPUs and emits a struct plan. The checker
 * (check.c) deliberately does not include this header.
 */
#ifndef KAIROS_PLANNER_INTERNAL_H
#define KAIROS_PLANNER_INTERNAL_H

#include "kairos/plan.h"

struct st_inst {
    int option;
    int gpu;                 /* -1 until packed */
    int time;                /* used time units */
    int64_t mem;             /* used memory */
    int head;                /* first member workload, -1 if empty */
    int n;                   /* members */
    int lat;                 /* members with a p99 target: at most one shares (latency) */
};

struct st_gpu {
    int whole;               /* 1: MIG off, holds exactly one whole instance */
    plan_mix_t mix;          /* MIG instances on it */
    int alive;
    int compute;             /* compute slices used (7 when whole) */
    unsigned room;           /* options of which one more instance fits (0 when whole) */
};

struct state {
    const struct plan_input *in;
    int pool;
    const struct plan_gpu_model *m;
    const struct plan_layouts *lay;
    int n_options;
    int order[PLAN_MAX_OPTIONS];   /* options by size ascending (whole last) */
    int rank[PLAN_MAX_OPTIONS];    /* position of an option in order[] */
    int *wl, n_wl;                 /* global ids of the workloads to plan here */
    int *need;                     /* [global id * PLAN_MAX_OPTIONS + option]: time or -1;
                                    * read-only after st_init, shared by copies */
    int need_owner;                /* 1: st_free frees need (the state st_init made) */
    int *where, *time, *next;      /* per global id */
    struct st_inst *inst;
    int n_inst, cap_inst;
    struct st_gpu *gpu;
    int n_gpu, cap_gpu;
    struct bf_index *bf;           /* best-fit index while attached (fit_index.c), else NULL */
};

/* fit_index.c: first fit in a fixed slot order (leftmost slot with time >= t,
 * memory >= m and the bit set) and best fit by (option, free time) buckets. */
struct fit_tree {
    int size;                /* leaves, a power of two */
    int *time;
    int64_t *mem;
    unsigned *mask;
};
int fit_tree_init(struct fit_tree *t, int n);
void fit_tree_free(struct fit_tree *t);
void fit_tree_set(struct fit_tree *t, int slot, int time, int64_t mem, unsigned mask);
int fit_tree_first(const struct fit_tree *t, int time, int64_t mem, unsigned bit);
/* room_index.c: the live MIG GPUs that can take a new instance, by option and compute
 * in use (each bucket a min-heap of GPU indices, stale entries dropped lazily). */
struct room_heap {
    int *v;
    int n, cap;
};
struct room_index {
    struct room_heap b[PLAN_MAX_OPTIONS][PLAN_COMPUTE_SLICES + 1];
};
void room_index_free(struct room_index *x);
/* GPU g in the index (a zeroed index is empty), or again after a change to its
 * instances. */
int room_index_note(struct room_index *x, const struct state *s, int g);
/* The fullest current GPU with room for option o other than skip_gpu, ties to the
 * lowest index; -1 if none, -ENOMEM. */
int room_index_best(struct room_index *x, const struct state *s, int o, int skip_gpu);
int bf_attach(struct state *s);
void bf_detach(struct state *s);
int bf_update(struct state *s, int inst);
/* Best existing instance for w: least time left after it, ties to the lowest index;
 * options of rank >= min_rank, not skip_inst, not on skip_gpu (>= 0). -1 if none. */
int bf_best(const struct state *s, int w, int min_rank, int skip_inst, int skip_gpu, int *best_t);

int st_init(struct state *s, const struct plan_input *in, int pool,
            const struct plan_layouts *lay, const int *wl, int n_wl);
void st_free(struct state *s);
/* A copy shares src's read-only need table: src (or whoever takes need_owner from it)
 * must outlive it. */
int st_copy(struct state *dst, const struct state *src);
static inline int st_need(const struct state *s, int w, int option)
{
    return s->need[(size_t)w * PLAN_MAX_OPTIONS + option];
}
/* Interference-free time that `tenants` workloads may hold together in one instance. */
static inline int st_cap(const struct state *s, int tenants)
{
    return plan_instance_capacity(s->in->interference, tenants);
}
/* The same for an instance of `option`: 0 where the tenants may not share it (a MIG
 * instance unless in->mig_sharing), so that no workload (t >= 1) joins one. */
static inline int st_inst_cap(const struct state *s, int option, int tenants)
{
    return plan_may_share(s->in, option, tenants) ? st_cap(s, tenants) : 0;
}
/* Time one more workload may take in instance i (may be negative when it is full). */
static inline int st_free_time(const struct state *s, int i)
{
    return st_inst_cap(s, s->inst[i].option, s->inst[i].n + 1) - s->inst[i].time;
}
/* Whether w has a p99 target: it joins only an instance without such a member, since
 * kairosd gives one tenant per GPU the latency priority (plan_p99_factor). */
static inline int st_is_lat(const struct state *s, int w)
{
    return s->in->workloads[w].p99_ms > 0;
}
int st_new_inst(struct state *s, int option);
int st_new_gpu(struct state *s, int whole);
void st_put(struct state *s, int w, int inst, int time);
void st_take(struct state *s, int w);
/* Time w would need in instance i, or -1 if it does not fit there now. */
int st_fits(const struct state *s, int w, int i);
int st_alive_gpus(const struct state *s);
static inline int st_gpu_compute(const struct state *s, int g)
{
    return s->gpu[g].compute;
}
void st_gpu_attach(struct state *s, int i, int g);
void st_gpu_detach(struct state *s, int i);
/* Score: GPUs * 7 * 8 + used compute slices (lower is better). */
long st_score(const struct state *s);

/* Building blocks shared by the heuristics (algo_common.c). */
int algo_smallest_option(const struct state *s, int w);      /* -1 if none */
int algo_bestfit_option(const struct state *s, int w);       /* smallest at t = 100 % */
int algo_area_option(const struct state *s, int w);          /* min compute x time */
int algo_held_area_option(const struct state *s, int w);     /* ... x time it holds */
int algo_whole_option(const struct state *s, int w);         /* the whole GPU, or -1 */
/* One option per workload chosen by pick (-1 for workloads outside this pool); the
 * caller frees it. NULL when out of memory. */
int *algo_choose(const struct state *s, int (*pick)(const struct state *s, int w));
/* Put each workload alone on its chosen option (choice[w] by global id, -1: skip). */
/* FFD in time per option; equal times in input order, or larger memory first (mem_ties) */
int algo_fuse(struct state *s, const int *choice, int mem_ties);
/* One option per workload by pick, fused in time, packed first-fit decreasing. */
int algo_fuse_pack(struct state *s, int (*pick)(const struct state *s, int w));
int algo_alone(struct state *s, const int *choice, int full_time);
int algo_migrate_up(struct state *s);                         /* the seed's step 3 */
int algo_pack_ffd(struct state *s);                           /* the seed's step 4 */
int algo_pack_cover(struct state *s);                         /* layout-cover packing */
int algo_retype(struct state *s);                             /* change instance types */
int algo_improve(struct state *s, int budget, int passes);    /* local search */

/* One per algorithm; each fills an empty state for its pool. */
int algo_kairos(struct state *s);
int algo_seed(struct state *s);
int algo_temporal(struct state *s);
int algo_bestfit(struct state *s);
int algo_gpulet(struct state *s);

/* solve.c: why a workload could not be placed anywhere; exact.c: the ILP. */
enum plan_reason solve_reason_of(const struct plan_input *in, int w);
/* Plan pending[0..*n_pending) on pool `pool` with fn, capped to the pool's GPUs; appends
 * to p and leaves the workloads it could not place in pending (input order kept). */
int solve_pool(const struct plan_input *in, int pool, int (*fn)(struct state *s), int *pending,
               int *n_pending, struct plan *p);
/* 1 if a places more workloads than b, or as many on fewer GPUs, then fewer slices. */
int solve_better(const struct plan_input *in, const struct plan *a, const struct plan *b);
/* pools.c: Kairos's joint plan of several pools into an empty plan p; `seq` (a plan made
 * pool by pool, or NULL) is one of its starting points, so p is never worse than seq. */
int pools_joint(const struct plan_input *in, const struct plan *seq, struct plan *p);
int exact_solve(const struct plan_input *in, const struct plan_options *opt, struct plan *p);

/* Emit a packed state into a plan (appends). */
int st_emit(const struct state *s, struct plan *p);

#endif /* KAIROS_PLANNER_INTERNAL_H */
