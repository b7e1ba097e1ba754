/* solve.c - plan_solve(): runs one algorithm pool by pool and assembles the plan.
 *
 * Pools are tried in input order: each pool's algorithm sees the workloads not yet
 * placed; when it needs more GPUs than the pool has, the least-used GPUs are dropped
 * and their workloads spill to the next pool. What is left at the end is reported
 * infeasible with the reason (no data, memory, speed, or capacity). With several pools,
 * Kairos's joint plan (pools.c) competes with its plan pool by pool and with each
 * baseline's plan of the whole cluster.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/internal.h"


typedef int (*solve_algo_fn)(struct state *s);

static const solve_algo_fn solve_algos[PLAN_ALGO_COUNT] = {
    [PLAN_ALGO_KAIROS] = algo_kairos,
    [PLAN_ALGO_SEED] = algo_seed,
    [PLAN_ALGO_TEMPORAL] = algo_temporal,
    [PLAN_ALGO_BESTFIT] = algo_bestfit,
    [PLAN_ALGO_GPULET] = algo_gpulet,
};

static int solve_cmp_desc(const void *a, const void *b)
{
    const long *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? 1 : -1) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* Keep the `count` GPUs that hold the most workloads (then the most used slices), so
 * that as many workloads as possible stay placed; unplace the workloads of the others. */
static int solve_cap(struct state *s, int count)
{
    long (*k)[2] = malloc(((size_t)s->n_gpu + 1) * sizeof(*k));
    long *members = calloc((size_t)s->n_gpu + 1, sizeof(long));
    int n = 0;
    if (!k || !members) {
        free(k);
        free(members);
        return -ENOMEM;
    }
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].gpu >= 0)
            members[s->inst[i].gpu] += s->inst[i].n;
    for (int g = 0; g < s->n_gpu; g++)
        if (s->gpu[g].alive) {
            k[n][0] = members[g] * (PLAN_COMPUTE_SLICES + 1) + st_gpu_compute(s, g);
            k[n++][1] = g;
        }
    qsort(k, (size_t)n, sizeof(*k), solve_cmp_desc);
    for (int g = 0; g < s->n_gpu; g++)
        members[g] = 0;
    for (int q = count; q < n; q++)
        members[k[q][1]] = 1;   /* now: GPU dropped */
    for (int i = 0; i < s->n_inst; i++) {
        if (s->inst[i].gpu < 0 || !members[s->inst[i].gpu])
            continue;
        while (s->inst[i].n)
            st_take(s, s->inst[i].head);
        st_gpu_detach(s, i);
    }
    free(k);
    free(members);
    return 0;
}

enum plan_reason solve_reason_of(const struct plan_input *in, int w)
{
    const struct plan_workload *wl = &in->workloads[w];
    struct plan_workload thr_only = *wl;
    int data = 0, mem = 0, fast = 0, lat = 0;
    thr_only.p99_ms = 0;
    for (int p = 0; p < in->n_pools; p++) {
        const struct plan_gpu_model *m = &in->pools[p].model;
        for (int o = 0; o < plan_option_count(m); o++) {
            if (!(wl->thr[p][o] > 0))
                continue;
            data = 1;
            mem |= wl->mem_mib <= plan_option_mem(m, o);
            fast |= plan_time_needed(&thr_only, p, m, o) >= 0;
            lat |= plan_time_needed(wl, p, m, o) >= 0;
        }
    }
    if (!data)
        return PLAN_NO_DATA;
    if (!mem)
        return PLAN_TOO_BIG_MEM;
    if (!fast)
        return PLAN_TOO_SLOW;
    if (!lat)
        return PLAN_P99_TOO_SLOW;
    return PLAN_NO_CAPACITY;
}

int solve_pool(const struct plan_input *in, int pool, int (*fn)(struct state *s), int *pending,
               int *n_pending, struct plan *p)
{
    struct plan_layouts lay;
    struct state s;
    int rc = plan_layouts_enumerate(&in->pools[pool].model, &lay);
    rc = rc ? rc : st_init(&s, in, pool, &lay, pending, *n_pending);
    if (rc)
        return rc;
    rc = fn(&s);
    rc = rc ? rc : solve_cap(&s, in->pools[pool].count);
    rc = rc ? rc : st_emit(&s, p);
    if (!rc) {
        int n = 0;
        for (int i = 0; i < *n_pending; i++)
            if (s.where[pending[i]] < 0)
                pending[n++] = pending[i];
        *n_pending = n;
    }
    st_free(&s);
    return rc;
}

/* One algorithm over every pool in input order; p is initialised by the caller. */
static int solve_pools(const struct plan_input *in, solve_algo_fn fn, struct plan *p)
{
    int n = in->n_workloads, rc = 0;
    int *pending = malloc(((size_t)n + 1) * sizeof(int));
    if (!pending) {
        rc = -ENOMEM;
        goto out;
    }
    for (int w = 0; w < n; w++)
        pending[w] = w;
    for (int pool = 0; pool < in->n_pools && n > 0 && !rc; pool++)
        rc = solve_pool(in, pool, fn, pending, &n, p);
    for (int i = 0; i < n && !rc; i++)
        if ((rc = plan_add_infeasible(p, pending[i], solve_reason_of(in, pending[i]))) > 0)
            rc = 0;
out:
    free(pending);
    if (rc)
        plan_free(p);
    return rc;
}

/* More workloads placed, then fewer GPUs, then fewer slices. */
int solve_better(const struct plan_input *in, const struct plan *a, const struct plan *b)
{
    struct plan_metrics ma, mb;
    plan_metrics_compute(in, a, &ma);
    plan_metrics_compute(in, b, &mb);
    if (ma.placed != mb.placed)
        return ma.placed > mb.placed;
    if (ma.gpus != mb.gpus)
        return ma.gpus < mb.gpus;
    return ma.slices < mb.slices - 1e-9;
}

/* Keep cand in *p if it is better; cand is consumed. */
static void solve_keep_better(const struct plan_input *in, struct plan *cand, struct plan *p)
{
    if (solve_better(in, cand, p)) {
        plan_free(p);
        *p = *cand;
    } else {
        plan_free(cand);
    }
}

/* Kairos with several pools. Pool by pool, which workloads a pool leaves to the next
 * decides how many are placed in all, so Kairos's per-pool guarantee (never fewer placed,
 * never more GPUs than a baseline in that pool) says nothing about the cluster: each
 * baseline's plan of the whole cluster competes with Kairos's (sequential mode). The joint
 * plan (pools.c) chooses each workload's pool with the whole cluster in view; by default
 * it also starts from the best plan pool by pool, so it is never worse than that plan.
 * Joint mode: the joint plan from its own starts only (to measure it). */
static int solve_kairos_pools(const struct plan_input *in, int mode, struct plan *p)
{
    static const enum plan_algo others[] = {PLAN_ALGO_SEED, PLAN_ALGO_TEMPORAL,
                                            PLAN_ALGO_BESTFIT, PLAN_ALGO_GPULET};
    struct plan cand;
    int rc = mode == PLAN_POOLS_JOINT ? 0 : solve_pools(in, algo_kairos, p);
    for (size_t k = 0; mode != PLAN_POOLS_JOINT && k < sizeof(others) / sizeof(others[0])
                       && !rc; k++) {
        plan_init(&cand);
        snprintf(cand.algo, sizeof(cand.algo), "%s", p->algo);
        if ((rc = solve_pools(in, solve_algos[others[k]], &cand)))
            break;   /* solve_pools freed cand */
        solve_keep_better(in, &cand, p);
    }
    if (rc)
        plan_free(p);
    if (rc || mode == PLAN_POOLS_SEQUENTIAL)
        return rc;
    plan_init(&cand);
    snprintf(cand.algo, sizeof(cand.algo), "%s", p->algo);
    /* pools_joint frees cand on failure */
    rc = pools_joint(in, mode == PLAN_POOLS_JOINT ? NULL : p, &cand);
    plan_free(p);
    if (!rc)
        *p = cand;
    return rc;
}

int plan_solve(const struct plan_input *in, const struct plan_options *opt, struct plan *p)
{
    plan_init(p);
    snprintf(p->algo, sizeof(p->algo), "%s", plan_algo_name(opt->algo));
    if (opt->algo == PLAN_ALGO_EXACT)
        return exact_solve(in, opt, p);
    if ((unsigned)opt->algo >= PLAN_ALGO_COUNT || !solve_algos[opt->algo])
        return -EINVAL;
    if (opt->algo == PLAN_ALGO_KAIROS && in->n_pools > 1)
        return solve_kairos_pools(in, opt->pools, p);
    return solve_pools(in, solve_algos[opt->algo], p);
}

enum plan_reason plan_reason_of(const struct plan_input *in, int w)
{
    return solve_reason_of(in, w);
}
