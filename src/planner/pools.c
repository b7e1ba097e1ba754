/* pools.c - Kairos's joint plan of several GPU pools (issue 28): which pool each workload
 * goes to is decided with the whole cluster in view; each pool is then planned by
 * algo_kairos on its workloads.
 *
 * 1. Starting assignments. Regret: workloads ordered by how constrained they are (fewest
 *    pools that can run them, then the most lost on their second-best pool, then the
 *    largest), each put where it takes the least fraction of one GPU of that pool's model
 *    (compute slices x time share, or its memory share if larger, on its cheapest option)
 *    while the pool's estimated load stays within fill x its GPUs; three fills. Smallest
 *    first: the same rule with the least costly workloads first (the most workloads fit
 *    when GPUs are too few). And, when given, the best plan made pool by pool (Kairos's or
 *    a baseline's) itself.
 * 2. An assignment is evaluated by planning each pool on its workloads (capped to the
 *    pool's GPUs); what a pool cannot place is carried to the next pool, and what is left
 *    after the last is offered once more to each pool in turn.
 * 3. Local search (up to POOLS_SEARCH_MAX workloads) from the best start: move the
 *    workloads of one GPU, the least loaded first, to another pool; kept when the cluster's
 *    plan is better by (placed, GPUs, slices), i.e. solve_better(). When the plan pool by
 *    pool beats the result, the search runs again from it; so the plan with it is never
 *    worse than the plan without it, nor than it.
 * Ties go to the earlier plan.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/internal.h"

#define POOLS_SEARCH_MAX 400      /* workloads; beyond this one start and no search */
#define POOLS_SEARCH_TRIES 60     /* evaluations the local search may spend */

static const double pools_fills[] = {1.0, 0.85, 0.7};

struct pools {
    const struct plan_input *in;
    int n, n_pools;
    double *cost;        /* [w * n_pools + q]: fraction of one GPU of pool q, < 0: cannot */
    int *set, *carry;    /* scratch lists of workloads */
    struct plan part[PLAN_MAX_POOLS];
};

/* The least fraction of one GPU of pool q that w needs: over w's options, the larger of
 * compute slices x time share and memory over the GPU's memory. -1 if it cannot run. */
static double pools_cost_of(const struct plan_input *in, int w, int q)
{
    const struct plan_gpu_model *m = &in->pools[q].model;
    const struct plan_workload *wl = &in->workloads[w];
    double best = -1, mem = (double)wl->mem_mib / (double)m->whole_mem_mib;
    if (in->pools[q].count <= 0)
        return -1;
    for (int o = 0; o < plan_option_count(m); o++) {
        int t = plan_time_needed(wl, q, m, o);
        if (t < 0)
            continue;
        double c = (double)t * plan_option_compute(m, o) / (PLAN_TIME_UNITS * PLAN_COMPUTE_SLICES);
        c = c > mem ? c : mem;
        if (best < 0 || c < best)
            best = c;
    }
    return best;
}

static double pools_cost(const struct pools *P, int w, int q)
{
    return P->cost[(size_t)w * P->n_pools + q];
}

/* ---- 1. regret assignment ---- */

struct pools_key {
    int usable;          /* pools that can run the workload */
    double regret;       /* second-best cost minus best (large when only one pool) */
    double best;
    int w;
};

/* Smallest first: with too few GPUs, the most workloads fit when the least costly come
 * first. */
static int pools_key_small(const void *a, const void *b)
{
    const struct pools_key *x = a, *y = b;
    if (x->best != y->best)
        return x->best < y->best ? -1 : 1;
    return x->w - y->w;
}

static int pools_key_cmp(const void *a, const void *b)
{
    const struct pools_key *x = a, *y = b;
    if (x->usable != y->usable)
        return x->usable - y->usable;
    if (x->regret != y->regret)
        return x->regret < y->regret ? 1 : -1;
    if (x->best != y->best)
        return x->best < y->best ? 1 : -1;
    return x->w - y->w;
}

static struct pools_key pools_key_of(const struct pools *P, int w)
{
    struct pools_key k = {0, 0, -1, w};
    double second = -1;
    for (int q = 0; q < P->n_pools; q++) {
        double c = pools_cost(P, w, q);
        if (c < 0)
            continue;
        k.usable++;
        if (k.best < 0 || c < k.best) {
            second = k.best;
            k.best = c;
        } else if (second < 0 || c < second) {
            second = c;
        }
    }
    k.regret = second < 0 ? 1e9 : second - k.best;
    return k;
}

/* The cheapest pool where w fits within fill x GPUs, else the one it overflows least. */
static int pools_pick(const struct pools *P, int w, const double *load, double fill)
{
    int fit = -1, over = -1;
    double fit_c = 0, over_slack = 0;
    for (int q = 0; q < P->n_pools; q++) {
        double c = pools_cost(P, w, q), cap = fill * P->in->pools[q].count;
        if (c < 0)
            continue;
        if (load[q] + c <= cap + 1e-9 && (fit < 0 || c < fit_c)) {
            fit = q;
            fit_c = c;
        }
        if (over < 0 || cap - load[q] - c > over_slack) {
            over = q;
            over_slack = cap - load[q] - c;
        }
    }
    return fit >= 0 ? fit : over;
}

static int pools_regret(const struct pools *P, double fill, int small, int *assign)
{
    struct pools_key *k = malloc(((size_t)P->n + 1) * sizeof(*k));
    double load[PLAN_MAX_POOLS] = {0};
    if (!k)
        return -ENOMEM;
    for (int w = 0; w < P->n; w++)
        k[w] = pools_key_of(P, w);
    qsort(k, (size_t)P->n, sizeof(*k), small ? pools_key_small : pools_key_cmp);
    for (int j = 0; j < P->n; j++) {
        int w = k[j].w, q = pools_pick(P, w, load, fill);
        assign[w] = q;
        if (q >= 0)
            load[q] += pools_cost(P, w, q);
    }
    free(k);
    return 0;
}

/* The pools of a plan; workloads it left out go to their cheapest pool. */
static void pools_from_plan(const struct pools *P, const struct plan *p, int *assign)
{
    for (int w = 0; w < P->n; w++) {
        struct pools_key k = pools_key_of(P, w);
        assign[w] = -1;
        for (int q = 0; k.usable && q < P->n_pools; q++)
            if (pools_cost(P, w, q) == k.best) {
                assign[w] = q;
                break;
            }
    }
    for (int a = 0; a < p->n_assigns; a++)
        assign[p->assigns[a].workload] = p->gpus[p->instances[p->assigns[a].instance].gpu].pool;
}

/* ---- 2. evaluation ---- */

static void pools_parts_free(struct pools *P)
{
    for (int q = 0; q < P->n_pools; q++)
        plan_free(&P->part[q]);
}

/* Pool q planned on the workloads assigned to it (assign[w] == q, ascending); its plan
 * replaces part[q] when it places more than part[q] did (always on the first round).
 * Workloads it leaves out get assign -1 and go to carry. */
static int pools_plan_one(struct pools *P, int q, int *assign, int *n_carry, int first)
{
    struct plan tmp;
    int n = 0, rc;
    for (int w = 0; w < P->n; w++)
        if (assign[w] == q)
            P->set[n++] = w;
    if (!n)
        return 0;   /* nothing for this pool (part[q] is empty on the first round) */
    plan_init(&tmp);
    if ((rc = solve_pool(P->in, q, algo_kairos, P->set, &n, &tmp))) {
        plan_free(&tmp);
        return rc;
    }
    if (!first && tmp.n_assigns <= P->part[q].n_assigns) {
        for (int j = 0; j < *n_carry; j++)
            assign[P->carry[j]] = -1;       /* back out: part[q] stays */
        plan_free(&tmp);
        return 0;
    }
    plan_free(&P->part[q]);
    P->part[q] = tmp;
    for (int j = 0; j < n; j++)
        assign[P->set[j]] = -1;
    memcpy(P->carry, P->set, (size_t)n * sizeof(int));
    *n_carry = n;
    return 0;
}

/* Plan every pool for assign[] (changed to where each workload ended, -1: nowhere). */
static int pools_eval(struct pools *P, int *assign)
{
    int n_carry = 0, rc = 0;
    pools_parts_free(P);
    for (int q = 0; q < P->n_pools && !rc; q++) {
        for (int j = 0; j < n_carry; j++)
            assign[P->carry[j]] = q;
        n_carry = 0;
        rc = pools_plan_one(P, q, assign, &n_carry, 1);
    }
    for (int q = 0; q < P->n_pools && n_carry && !rc; q++) {
        for (int j = 0; j < n_carry; j++)   /* what part[q] holds (assign q), plus the carry */
            assign[P->carry[j]] = q;
        rc = pools_plan_one(P, q, assign, &n_carry, 0);
    }
    for (int w = 0; w < P->n; w++)
        assign[w] = -1;
    for (int q = 0; q < P->n_pools; q++)
        for (int a = 0; a < P->part[q].n_assigns; a++)
            assign[P->part[q].assigns[a].workload] = q;
    return rc;
}

static int pools_append(struct plan *dst, const struct plan *src)
{
    int g0 = dst->n_gpus, i0 = dst->n_instances, rc = 0;
    for (int g = 0; g < src->n_gpus && rc >= 0; g++)
        rc = plan_add_gpu(dst, src->gpus[g].pool, src->gpus[g].mig);
    for (int i = 0; i < src->n_instances && rc >= 0; i++)
        rc = plan_add_instance(dst, g0 + src->instances[i].gpu, src->instances[i].option,
                               src->instances[i].start);
    for (int a = 0; a < src->n_assigns && rc >= 0; a++)
        rc = plan_add_assign(dst, src->assigns[a].workload, i0 + src->assigns[a].instance,
                             src->assigns[a].time, src->assigns[a].mem_mib);
    return rc < 0 ? rc : 0;
}

/* The cluster's plan from the parts; workloads nowhere are infeasible, with the reason. */
static int pools_build(const struct pools *P, const int *assign, const char *algo,
                       struct plan *out)
{
    int rc = 0;
    plan_init(out);
    snprintf(out->algo, sizeof(out->algo), "%s", algo);
    for (int q = 0; q < P->n_pools && !rc; q++)
        rc = pools_append(out, &P->part[q]);
    for (int w = 0; w < P->n && !rc; w++)
        if (assign[w] < 0 && (rc = plan_add_infeasible(out, w, solve_reason_of(P->in, w))) > 0)
            rc = 0;
    if (rc)
        plan_free(out);
    return rc;
}

/* Keep cand (consumed) in *best, with its assignment, when it is better or the first. */
static void pools_keep(const struct pools *P, struct plan *cand, const int *assign,
                       int *best_assign, struct plan *best, int *have, int *taken)
{
    char algo[sizeof(best->algo)];
    *taken = 0;
    if (*have && !solve_better(P->in, cand, best)) {
        plan_free(cand);
        return;
    }
    memcpy(algo, best->algo, sizeof(algo));
    plan_free(best);
    *best = *cand;
    memcpy(best->algo, algo, sizeof(algo));
    memcpy(best_assign, assign, (size_t)P->n * sizeof(int));
    *have = *taken = 1;
}

/* Evaluate assign and keep the plan in *best (with best_assign) when it is better. */
static int pools_offer(struct pools *P, int *assign, int *best_assign, struct plan *best,
                       int *have, int *taken)
{
    struct plan cand;
    int rc = pools_eval(P, assign);
    rc = rc ? rc : pools_build(P, assign, best->algo, &cand);
    *taken = 0;
    if (!rc)
        pools_keep(P, &cand, assign, best_assign, best, have, taken);
    return rc;
}

/* ---- 3. local search ---- */

struct pools_gpu {
    long load;           /* workloads x 8 + compute slices: least loaded first */
    int gpu;
};

static int pools_gpu_cmp(const void *a, const void *b)
{
    const struct pools_gpu *x = a, *y = b;
    return x->load != y->load ? (x->load > y->load) - (x->load < y->load) : x->gpu - y->gpu;
}

/* best's GPUs, least loaded first (NULL when out of memory). */
static struct pools_gpu *pools_gpus(const struct plan_input *in, const struct plan *best)
{
    struct pools_gpu *g = calloc((size_t)best->n_gpus + 1, sizeof(*g));
    for (int i = 0; g && i < best->n_gpus; i++)
        g[i].gpu = i;
    for (int i = 0; g && i < best->n_instances; i++) {
        const struct plan_instance *pi = &best->instances[i];
        g[pi->gpu].load += plan_option_compute(&in->pools[best->gpus[pi->gpu].pool].model,
                                               pi->option);
    }
    for (int a = 0; g && a < best->n_assigns; a++)
        g[best->instances[best->assigns[a].instance].gpu].load += 8;
    if (g)
        qsort(g, (size_t)best->n_gpus, sizeof(*g), pools_gpu_cmp);
    return g;
}

/* Move GPU g's workloads to pool r in trial (a copy of best_assign); 0 if one cannot run
 * there. */
static int pools_move_gpu(const struct pools *P, const struct plan *best, const int *best_assign,
                          int g, int r, int *trial)
{
    memcpy(trial, best_assign, (size_t)P->n * sizeof(int));
    for (int a = 0; a < best->n_assigns; a++) {
        int w = best->assigns[a].workload;
        if (best->instances[best->assigns[a].instance].gpu != g)
            continue;
        if (pools_cost(P, w, r) < 0)
            return 0;
        trial[w] = r;
    }
    return 1;
}

/* First improvement, restarted after each; at most POOLS_SEARCH_TRIES evaluations. */
static int pools_search(struct pools *P, int *best_assign, struct plan *best, int *trial)
{
    int tries = 0, improved = 1, have = 1, rc = 0;
    while (improved && tries < POOLS_SEARCH_TRIES && !rc) {
        struct pools_gpu *order = pools_gpus(P->in, best);
        int n_gpus = best->n_gpus;
        improved = 0;
        if (!order)
            return -ENOMEM;
        for (int k = 0; k < n_gpus && !improved && !rc && tries < POOLS_SEARCH_TRIES; k++) {
            int g = order[k].gpu, from = best->gpus[g].pool;
            for (int r = 0; r < P->n_pools && !improved && !rc; r++) {
                if (r == from || !pools_move_gpu(P, best, best_assign, g, r, trial))
                    continue;
                tries++;
                rc = pools_offer(P, trial, best_assign, best, &have, &improved);
            }
        }
        free(order);
    }
    return rc;
}

/* ---- entry ---- */

static int pools_init(struct pools *P, const struct plan_input *in)
{
    size_t n = (size_t)in->n_workloads + 1;
    memset(P, 0, sizeof(*P));
    P->in = in;
    P->n = in->n_workloads;
    P->n_pools = in->n_pools;
    P->cost = malloc(n * (size_t)in->n_pools * sizeof(double));
    P->set = malloc(n * sizeof(int));
    P->carry = malloc(n * sizeof(int));
    for (int q = 0; q < PLAN_MAX_POOLS; q++)
        plan_init(&P->part[q]);
    if (!P->cost || !P->set || !P->carry)
        return -ENOMEM;
    for (int w = 0; w < P->n; w++)
        for (int q = 0; q < P->n_pools; q++)
            P->cost[(size_t)w * P->n_pools + q] = pools_cost_of(in, w, q);
    return 0;
}

static void pools_fini(struct pools *P)
{
    pools_parts_free(P);
    free(P->cost);
    free(P->set);
    free(P->carry);
}

int pools_joint(const struct plan_input *in, const struct plan *seq, struct plan *p)
{
    struct pools P;
    int small = in->n_workloads <= POOLS_SEARCH_MAX, have = 0, taken = 0;
    size_t n = (size_t)in->n_workloads + 1;
    int *assign = malloc(n * sizeof(int)), *best_assign = malloc(n * sizeof(int));
    int *trial = malloc(n * sizeof(int));
    int rc = pools_init(&P, in);
    if (!rc && (!assign || !best_assign || !trial))
        rc = -ENOMEM;
    for (size_t f = 0; !rc && f < sizeof(pools_fills) / sizeof(pools_fills[0]); f++) {
        if (f && !small)
            break;
        rc = pools_regret(&P, pools_fills[f], 0, assign);
        rc = rc ? rc : pools_offer(&P, assign, best_assign, p, &have, &taken);
    }
    if (!rc && small) {
        rc = pools_regret(&P, 1.0, 1, assign);
        rc = rc ? rc : pools_offer(&P, assign, best_assign, p, &have, &taken);
    }
    if (!rc && small)
        rc = pools_search(&P, best_assign, p, trial);
    if (!rc && seq) {   /* the plan pool by pool itself, searched again from there if better */
        struct plan cand;
        plan_init(&cand);
        rc = plan_copy(&cand, seq);
        pools_from_plan(&P, seq, assign);
        if (!rc)
            pools_keep(&P, &cand, assign, best_assign, p, &have, &taken);
        if (!rc && small && taken)
            rc = pools_search(&P, best_assign, p, trial);
    }
    pools_fini(&P);
    free(assign);
    free(best_assign);
    free(trial);
    if (rc)
        plan_free(p);
    return rc;
}
