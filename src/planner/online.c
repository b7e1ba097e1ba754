/* online.c - online changes against an existing plan: add or remove workloads while
 * moving as few placed workloads as possible, and report every move.
 *
 * Existing MIG instances are never re-placed (that would disturb their tenants);
 * new instances are carved only from free slices. Adding tries, in order: idle time in
 * an existing instance (0 moves), a new instance in free slices (0 moves), making room
 * by moving one workload (1 move), a new GPU from a pool with spare GPUs (0 moves).
 * Removing drops the workloads, then releases GPUs, least loaded first, whose workloads
 * fit elsewhere, all within one budget of max_moves moves for the whole command; a GPU
 * emptied in the command never receives a workload, and no workload moves twice.
 * plan_online_add_list adds only the workloads it is given (trace replay, trace.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kairos/plan.h"

struct online {
    const struct plan_input *in;
    struct plan *p;
    long *time;          /* per instance: used time */
    int64_t *mem;        /* per instance: used memory */
    int cap;
    struct plan_moves *mv;
    char *closed;        /* per GPU (remove only): emptied in this command, takes nothing */
};

static int online_grow(struct online *o)
{
    if (o->p->n_instances < o->cap)
        return 0;
    int cap = o->cap ? o->cap * 2 : 64;
    while (cap <= o->p->n_instances)
        cap *= 2;
    long *t = realloc(o->time, (size_t)cap * sizeof(long));
    if (t)
        o->time = t;
    int64_t *m = realloc(o->mem, (size_t)cap * sizeof(int64_t));
    if (m)
        o->mem = m;
    if (!t || !m)
        return -ENOMEM;
    for (int i = o->cap; i < cap; i++)
        o->time[i] = o->mem[i] = 0;
    o->cap = cap;
    return 0;
}

static int online_init(struct online *o, const struct plan_input *in, const struct plan *old,
                       struct plan *out, struct plan_moves *mv)
{
    memset(o, 0, sizeof(*o));
    memset(mv, 0, sizeof(*mv));
    o->in = in;
    o->p = out;
    o->mv = mv;
    int rc = plan_copy(out, old);
    rc = rc ? rc : online_grow(o);
    for (int a = 0; !rc && a < out->n_assigns; a++) {
        o->time[out->assigns[a].instance] += out->assigns[a].time;
        o->mem[out->assigns[a].instance] += out->assigns[a].mem_mib;
    }
    out->n_infeasible = 0;
    snprintf(out->algo, sizeof(out->algo), "online");
    return rc;
}

static const struct plan_gpu_model *online_model(const struct online *o, int gpu)
{
    return &o->in->pools[o->p->gpus[gpu].pool].model;
}

static int online_need(const struct online *o, int w, int gpu, int option)
{
    return plan_time_needed(&o->in->workloads[w], o->p->gpus[gpu].pool, online_model(o, gpu), option);
}

static int online_record(struct online *o, int w, int from_gpu, int from_opt, int to_gpu, int to_opt)
{
    struct plan_moves *mv = o->mv;
    if (mv->n == mv->cap) {
        int cap = mv->cap ? mv->cap * 2 : 8;
        struct plan_move *nm = realloc(mv->moves, (size_t)cap * sizeof(*nm));
        if (!nm)
            return -ENOMEM;
        mv->moves = nm;
        mv->cap = cap;
    }
    mv->moves[mv->n++] = (struct plan_move){w, from_gpu, from_opt, to_gpu, to_opt};
    return 0;
}

/* Whether instance i holds a workload with a p99 target (besides assignment skip_a). */
static int online_has_lat(const struct online *o, int i, int skip_a)
{
    for (int a = 0; a < o->p->n_assigns; a++) {
        const struct plan_assign *as = &o->p->assigns[a];
        if (a != skip_a && as->workload >= 0 && as->instance == i &&
            o->in->workloads[as->workload].p99_ms > 0)
            return 1;
    }
    return 0;
}

/* Time w would take joining instance i (with assignment skip_a gone, -1: none), or -1
 * when it does not fit. Under interference every tenant then needs the share for one
 * more tenant, so the instance's members are summed again. A workload with a p99 target
 * joins no instance that has one (one latency tenant per GPU). */
static int online_fits(const struct online *o, int i, int w, int skip_a)
{
    const struct plan_instance *pi = &o->p->instances[i];
    const struct plan_gpu_model *m = online_model(o, pi->gpu);
    int mode = o->in->interference, pool = o->p->gpus[pi->gpu].pool;
    int64_t mem = o->mem[i] + o->in->workloads[w].mem_mib
                  - (skip_a >= 0 ? o->p->assigns[skip_a].mem_mib : 0);
    if (mem > plan_option_mem(m, pi->option))
        return -1;
    /* every tenant's time is >= 1, so time left by others means another tenant */
    long others = o->time[i] - (skip_a >= 0 ? o->p->assigns[skip_a].time : 0);
    if (others > 0 && !plan_may_share(o->in, pi->option, 2))
        return -1;
    if (others > 0 && o->in->workloads[w].p99_ms > 0 && online_has_lat(o, i, skip_a))
        return -1;
    if (mode == PLAN_INTERF_NONE) {
        int t = online_need(o, w, pi->gpu, pi->option);
        return t < 0 || others + t > PLAN_TIME_UNITS ? -1 : t;
    }
    int k = 1;
    for (int a = 0; a < o->p->n_assigns; a++)
        k += a != skip_a && o->p->assigns[a].workload >= 0 && o->p->assigns[a].instance == i;
    int t = plan_time_needed_shared(&o->in->workloads[w], pool, m, pi->option, mode, k);
    long sum = t;
    for (int a = 0; t >= 0 && a < o->p->n_assigns; a++) {
        const struct plan_assign *as = &o->p->assigns[a];
        if (a == skip_a || as->workload < 0 || as->instance != i)
            continue;
        int tm = plan_time_needed_shared(&o->in->workloads[as->workload], pool, m, pi->option,
                                         mode, k);
        sum = tm < 0 ? PLAN_TIME_UNITS + 1 : sum + tm;
    }
    return t < 0 || sum > PLAN_TIME_UNITS ? -1 : t;
}

/* Under interference: give every tenant of instance i the share it needs with the
 * instance's tenant count now. */
static void online_reshare(struct online *o, int i)
{
    const struct plan_instance *pi = &o->p->instances[i];
    int mode = o->in->interference, k = 0;
    if (mode == PLAN_INTERF_NONE)
        return;
    for (int a = 0; a < o->p->n_assigns; a++)
        k += o->p->assigns[a].workload >= 0 && o->p->assigns[a].instance == i;
    o->time[i] = 0;
    for (int a = 0; a < o->p->n_assigns; a++) {
        struct plan_assign *as = &o->p->assigns[a];
        if (as->workload < 0 || as->instance != i)
            continue;
        if (k > 1)
            as->time = plan_time_needed_shared(&o->in->workloads[as->workload],
                                               o->p->gpus[pi->gpu].pool, online_model(o, pi->gpu),
                                               pi->option, mode, k);
        o->time[i] += as->time;
    }
}

/* Best existing instance for w (least time left afterwards), not on skip_gpu. */
static int online_existing(const struct online *o, int w, int skip_gpu, int skip_inst, int *t_out)
{
    int best = -1;
    long best_left = PLAN_TIME_UNITS + 1;
    for (int i = 0; i < o->p->n_instances; i++) {
        const struct plan_instance *pi = &o->p->instances[i];
        if (pi->gpu < 0 || pi->gpu == skip_gpu || i == skip_inst || (o->closed && o->closed[pi->gpu]))
            continue;
        int t = online_fits(o, i, w, -1);
        if (t < 0)
            continue;
        if (PLAN_TIME_UNITS - o->time[i] - t < best_left) {
            best_left = PLAN_TIME_UNITS - o->time[i] - t;
            best = i;
            *t_out = t;
        }
    }
    return best;
}

static void online_gpu_usage(const struct online *o, int g, unsigned *mem, int *compute, int *n)
{
    *mem = 0;
    *compute = 0;
    *n = 0;
    for (int i = 0; i < o->p->n_instances; i++) {
        const struct plan_instance *pi = &o->p->instances[i];
        if (pi->gpu != g)
            continue;
        (*n)++;
        if (pi->option == PLAN_OPTION_WHOLE)
            continue;
        const struct plan_profile *pr = &online_model(o, g)->profiles[pi->option - 1];
        *mem |= ((1u << pr->mem_slices) - 1u) << pi->start;
        *compute += pr->compute_slices;
    }
}

/* A free start for profile `option` on MIG gpu g, or -1. */
static int online_free_start(const struct online *o, int g, int option)
{
    unsigned used;
    int compute, n;
    if (!o->p->gpus[g].mig)
        return -1;
    online_gpu_usage(o, g, &used, &compute, &n);
    const struct plan_profile *pr = &online_model(o, g)->profiles[option - 1];
    if (compute + pr->compute_slices > PLAN_COMPUTE_SLICES)
        return -1;
    for (int s = 0; s + pr->mem_slices <= PLAN_MEM_SLICES; s++) {
        unsigned bits = ((1u << pr->mem_slices) - 1u) << s;
        if ((pr->start_mask >> s & 1u) && !(bits & used))
            return s;
    }
    return -1;
}

static int online_put(struct online *o, int w, int inst, int t, int from_gpu, int from_opt)
{
    int a = -1;
    for (int k = 0; k < o->p->n_assigns && a < 0; k++)
        if (o->p->assigns[k].workload == w)
            a = k;
    if (a < 0 && (a = plan_add_assign(o->p, w, inst, t, o->in->workloads[w].mem_mib)) < 0)
        return a;
    o->p->assigns[a].instance = inst;
    o->p->assigns[a].time = t;
    o->time[inst] += t;
    o->mem[inst] += o->in->workloads[w].mem_mib;
    online_reshare(o, inst);
    return online_record(o, w, from_gpu, from_opt, o->p->instances[inst].gpu,
                         o->p->instances[inst].option);
}

static int online_new_instance(struct online *o, int g, int option, int start)
{
    int i = plan_add_instance(o->p, g, option, start);
    int rc = i < 0 ? i : online_grow(o);
    return rc ? rc : i;
}

/* New instance in free slices of an existing GPU (not skip_gpu); returns instance. */
static int online_carve(struct online *o, int w, int skip_gpu, int *t_out)
{
    int best_g = -1, best_o = -1, best_s = -1, best_key = 1 << 30;
    for (int g = 0; g < o->p->n_gpus; g++) {
        const struct plan_gpu_model *m = online_model(o, g);
        int shut = g == skip_gpu || (o->closed && o->closed[g]);
        for (int opt = 1; !shut && opt <= m->n_profiles; opt++) {
            int t = online_need(o, w, g, opt), s;
            if (t < 0 || (s = online_free_start(o, g, opt)) < 0)
                continue;
            int key = m->profiles[opt - 1].compute_slices * 16 + m->profiles[opt - 1].mem_slices;
            if (key < best_key) {
                best_key = key;
                best_g = g;
                best_o = opt;
                best_s = s;
                *t_out = t;
            }
        }
    }
    return best_g < 0 ? -1 : online_new_instance(o, best_g, best_o, best_s);
}

static int online_pool_spare(const struct online *o, int pool)
{
    int used = 0;
    for (int g = 0; g < o->p->n_gpus; g++)
        used += o->p->gpus[g].pool == pool;
    return o->in->pools[pool].count - used;
}

/* A new GPU: smallest option that serves w in the first pool with a spare GPU. */
static int online_new_gpu(struct online *o, int w, int *t_out)
{
    for (int pool = 0; pool < o->in->n_pools; pool++) {
        const struct plan_gpu_model *m = &o->in->pools[pool].model;
        int best = -1, best_key = 1 << 30;
        for (int opt = 0; online_pool_spare(o, pool) > 0 && opt <= m->n_profiles; opt++) {
            int t = plan_time_needed(&o->in->workloads[w], pool, m, opt);
            int key = opt ? m->profiles[opt - 1].compute_slices * 16 + m->profiles[opt - 1].mem_slices : 1 << 20;
            if (t >= 0 && key < best_key) {
                best_key = key;
                best = opt;
                *t_out = t;
            }
        }
        if (best < 0)
            continue;
        int g = plan_add_gpu(o->p, pool, best != PLAN_OPTION_WHOLE);
        if (g < 0)
            return g;
        int start = 0;
        while (best && !(m->profiles[best - 1].start_mask >> start & 1u))
            start++;
        return online_new_instance(o, g, best, start);
    }
    return -1;
}

static int online_assign_of(const struct online *o, int w)
{
    for (int a = 0; a < o->p->n_assigns; a++)
        if (o->p->assigns[a].workload == w)
            return a;
    return -1;
}

static void online_unput(struct online *o, int a)
{
    struct plan_assign *as = &o->p->assigns[a];
    o->time[as->instance] -= as->time;
    o->mem[as->instance] -= as->mem_mib;
}

/* Place w without moving anyone, avoiding skip_gpu/skip_inst; 1 if placed. */
static int online_place_free(struct online *o, int w, int skip_gpu, int skip_inst, int from_gpu,
                             int from_opt)
{
    int t = 0, i = online_existing(o, w, skip_gpu, skip_inst, &t);
    if (i < 0)
        i = online_carve(o, w, skip_gpu, &t);
    if (i < 0)
        return i == -1 ? 0 : i;
    int rc = online_put(o, w, i, t, from_gpu, from_opt);
    return rc ? rc : 1;
}

/* Make room for w in some instance by moving one of its workloads elsewhere. */
static int online_place_one_move(struct online *o, int w)
{
    for (int a = 0; a < o->p->n_assigns; a++) {
        struct plan_assign *as = &o->p->assigns[a];
        int v = as->workload, i = as->instance, g = o->p->instances[i].gpu;
        int t = v == w ? -1 : online_fits(o, i, w, a);
        if (t < 0)
            continue;
        online_unput(o, a);
        int rc = online_place_free(o, v, -1, i, g, o->p->instances[i].option);
        if (rc > 0)
            return online_put(o, w, i, t, -1, -1) ? -ENOMEM : 1;
        o->time[i] += as->time;
        o->mem[i] += as->mem_mib;
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int online_add_one(struct online *o, int w)
{
    int rc = online_place_free(o, w, -1, -1, -1, -1);
    if (!rc)
        rc = online_place_one_move(o, w);
    if (!rc) {
        int t = 0, i = online_new_gpu(o, w, &t);
        rc = i >= 0 ? online_put(o, w, i, t, -1, -1) : i == -1 ? 0 : i;
        rc = i >= 0 && !rc ? 1 : rc;
    }
    if (!rc)
        rc = plan_add_infeasible(o->p, w, PLAN_NO_CAPACITY) < 0 ? -ENOMEM : 0;
    return rc < 0 ? rc : 0;
}

/* Renumber after removals: drop unassigned entries, empty instances and empty GPUs. */
static int online_compact(struct online *o)
{
    struct plan *p = o->p;
    int *imap = malloc(((size_t)p->n_instances + 1) * sizeof(int));
    int *gmap = malloc(((size_t)p->n_gpus + 1) * sizeof(int));
    int n = 0;
    if (!imap || !gmap) {
        free(imap);
        free(gmap);
        return -ENOMEM;
    }
    for (int a = 0; a < p->n_assigns; a++)
        if (p->assigns[a].workload >= 0)
            p->assigns[n++] = p->assigns[a];
    p->n_assigns = n;
    for (int g = 0; g < p->n_gpus; g++)
        gmap[g] = -1;
    for (int i = 0; i < p->n_instances; i++)
        imap[i] = -1;
    for (int a = 0; a < p->n_assigns; a++) {
        imap[p->assigns[a].instance] = 0;
        gmap[p->instances[p->assigns[a].instance].gpu] = 0;
    }
    n = 0;
    for (int g = 0; g < p->n_gpus; g++)
        if (!gmap[g]) {
            p->gpus[n] = p->gpus[g];
            gmap[g] = n++;
        }
    p->n_gpus = n;
    n = 0;
    for (int i = 0; i < p->n_instances; i++)
        if (!imap[i]) {
            p->instances[n] = p->instances[i];
            p->instances[n].gpu = gmap[p->instances[n].gpu];
            imap[i] = n++;
        }
    p->n_instances = n;
    for (int a = 0; a < p->n_assigns; a++)
        p->assigns[a].instance = imap[p->assigns[a].instance];
    for (int k = 0; k < o->mv->n; k++)
        if (o->mv->moves[k].to_gpu >= 0)
            o->mv->moves[k].to_gpu = gmap[o->mv->moves[k].to_gpu];
    free(imap);
    free(gmap);
    return 0;
}

static void online_free(struct online *o)
{
    free(o->time);
    free(o->mem);
}

int plan_online_add(const struct plan_input *in, const struct plan *old, int first_new,
                    struct plan *out, struct plan_moves *moves)
{
    struct online o;
    int rc = online_init(&o, in, old, out, moves);
    char *placed = calloc((size_t)in->n_workloads + 1, 1);
    if (!placed)
        rc = -ENOMEM;
    for (int a = 0; !rc && a < old->n_assigns; a++)
        placed[old->assigns[a].workload] = 1;
    (void)first_new;
    for (int w = 0; !rc && w < in->n_workloads; w++)
        if (!placed[w])
            rc = online_add_one(&o, w);
    rc = rc ? rc : online_compact(&o);
    free(placed);
    online_free(&o);
    return rc;
}

int plan_online_add_list(const struct plan_input *in, const struct plan *old, const int *ws,
                         int n_ws, struct plan *out, struct plan_moves *moves)
{
    struct online o;
    int rc = online_init(&o, in, old, out, moves);
    for (int k = 0; !rc && k < n_ws; k++)
        rc = online_add_one(&o, ws[k]);
    rc = rc ? rc : online_compact(&o);
    online_free(&o);
    return rc;
}

/* Move every workload off GPU g into free room elsewhere; all or nothing. */
static int online_evacuate(struct online *o, int g)
{
    struct plan saved;
    int saved_moves = o->mv->n, rc = 0;
    long *st = malloc(((size_t)o->cap + 1) * sizeof(long));
    int64_t *sm = malloc(((size_t)o->cap + 1) * sizeof(int64_t));
    int cap = o->cap;
    if (!st || !sm || plan_copy(&saved, o->p)) {
        free(st);
        free(sm);
        return -ENOMEM;
    }
    memcpy(st, o->time, (size_t)cap * sizeof(long));
    memcpy(sm, o->mem, (size_t)cap * sizeof(int64_t));
    for (int a = 0; a < o->p->n_assigns && rc >= 0; a++) {
        struct plan_assign *as = &o->p->assigns[a];
        const struct plan_instance *pi = &o->p->instances[as->instance];
        if (as->workload < 0 || pi->gpu != g)
            continue;
        online_unput(o, a);
        rc = online_place_free(o, as->workload, g, -1, g, pi->option);
        if (rc == 0)
            rc = -EAGAIN;
    }
    if (rc == -EAGAIN) {
        plan_free(o->p);
        *o->p = saved;
        memcpy(o->time, st, (size_t)cap * sizeof(long));
        memcpy(o->mem, sm, (size_t)cap * sizeof(int64_t));
        for (int i = cap; i < o->cap; i++)
            o->time[i] = o->mem[i] = 0;
        o->mv->n = saved_moves;
        rc = 0;
    } else {
        plan_free(&saved);
        rc = rc < 0 ? rc : 1;
    }
    free(st);
    free(sm);
    return rc;
}

/* Workloads per GPU now. The caller frees the array. */
static int *online_loads(const struct online *o)
{
    int *load = calloc((size_t)o->p->n_gpus + 1, sizeof(int));
    for (int a = 0; load && a < o->p->n_assigns; a++)
        if (o->p->assigns[a].workload >= 0)
            load[o->p->instances[o->p->assigns[a].instance].gpu]++;
    return load;
}

static int online_drop(struct online *o, int w)
{
    int a = online_assign_of(o, w);
    if (a < 0)
        return -ENOENT;
    const struct plan_instance *pi = &o->p->instances[o->p->assigns[a].instance];
    online_unput(o, a);
    o->p->assigns[a].workload = -1;
    return online_record(o, w, pi->gpu, pi->option, -1, -1);
}

static int online_cmp_load(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return x[0] != y[0] ? x[0] - y[0] : x[1] - y[1];
}

/* Release GPUs, least loaded first, while their workloads fit elsewhere within the one
 * budget of moves; a released GPU takes nothing afterwards, and a GPU that took moved
 * workloads is not emptied again (no workload moves twice). */
static int online_release(struct online *o, int max_moves)
{
    int n = o->p->n_gpus, left = max_moves, rc = 0, k = 0;
    int *load = online_loads(o), (*order)[2] = malloc(((size_t)n + 1) * sizeof(*order));
    char *took = calloc((size_t)n + 1, 1);
    if (!load || !order || !took) {
        rc = -ENOMEM;
        goto out;
    }
    for (int g = 0; g < n; g++) {
        o->closed[g] = load[g] == 0;
        if (load[g] > 0) {
            order[k][0] = load[g];
            order[k++][1] = g;
        }
    }
    qsort(order, (size_t)k, sizeof(*order), online_cmp_load);
    for (int q = 0; q < k && rc >= 0; q++) {
        int g = order[q][1], before = o->mv->n;
        if (order[q][0] > left || took[g])
            continue;
        rc = online_evacuate(o, g);
        if (rc <= 0)
            continue;
        o->closed[g] = 1;
        left -= o->mv->n - before;
        for (int m = before; m < o->mv->n; m++)
            took[o->mv->moves[m].to_gpu] = 1;
    }
out:
    free(load);
    free(order);
    free(took);
    return rc < 0 ? rc : 0;
}

int plan_online_remove(const struct plan_input *in, const struct plan *old, const int *ws,
                       int n_ws, int max_moves, struct plan *out, struct plan_moves *moves)
{
    struct online o;
    int rc = online_init(&o, in, old, out, moves);
    for (int k = 0; !rc && k < n_ws; k++)
        rc = online_drop(&o, ws[k]);
    if (!rc && !(o.closed = calloc((size_t)out->n_gpus + 1, 1)))
        rc = -ENOMEM;
    rc = rc ? rc : online_release(&o, max_moves);
    rc = rc ? rc : online_compact(&o);
    free(o.closed);
    online_free(&o);
    return rc;
}

void plan_moves_free(struct plan_moves *m)
{
    free(m->moves);
    memset(m, 0, sizeof(*m));
}
