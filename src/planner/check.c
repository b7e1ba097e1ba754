/* check.c - the independent plan checker.
 *
 * Recomputes everything from the input and the plan alone: it reads the profile
 * tables directly and does its own slice arithmetic, and uses none of the helpers the
 * algorithms use for feasibility (no layout list, no time rounding), so a bug shared
 * by planner and checker is unlikely. Checks: GPUs exist in their pools; MIG layouts
 * are legal (allowed starts, no overlap, <= 7 compute slices; whole mode holds one
 * instance); per instance the time shares sum to at most 100 % and the memory fits;
 * a MIG instance holds one workload unless the input allows MIG time sharing;
 * per workload Thr(s, t) >= target (plan_thr_at: Thr(s, 100 %) x t, or a measured
 * whole-GPU time-share curve) and m >= its memory; a p99 target against
 * the p99 model (its own choice of each shared GPU's latency tenant); every workload is
 * placed exactly once or reported infeasible with a true reason.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kairos/plan.h"

#define CHECK_TOL 1e-9

struct check_ctx {
    const struct plan_input *in;
    const struct plan *p;
    char *err;
    size_t errlen;
};

static int check_fail(struct check_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int check_fail(struct check_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static const struct plan_gpu_model *check_model(struct check_ctx *c, int gpu)
{
    return &c->in->pools[c->p->gpus[gpu].pool].model;
}

static int check_gpus(struct check_ctx *c)
{
    int used[PLAN_MAX_POOLS] = {0};
    for (int g = 0; g < c->p->n_gpus; g++) {
        int pool = c->p->gpus[g].pool;
        if (pool < 0 || pool >= c->in->n_pools)
            return check_fail(c, "gpu %d: pool %d does not exist", g, pool);
        if (++used[pool] > c->in->pools[pool].count)
            return check_fail(c, "pool %s: plan uses more than its %d GPUs",
                              c->in->pools[pool].model.name, c->in->pools[pool].count);
    }
    return 0;
}

static int check_instance_shape(struct check_ctx *c, int i, int *mem_slices, int *compute,
                                unsigned *starts)
{
    const struct plan_instance *pi = &c->p->instances[i];
    if (pi->gpu < 0 || pi->gpu >= c->p->n_gpus)
        return check_fail(c, "instance %d: gpu %d does not exist", i, pi->gpu);
    const struct plan_gpu_model *m = check_model(c, pi->gpu);
    if (!c->p->gpus[pi->gpu].mig) {
        if (pi->option != 0)
            return check_fail(c, "gpu %d has MIG off but holds a MIG instance", pi->gpu);
        return 0;
    }
    if (pi->option < 1 || pi->option > m->n_profiles)
        return check_fail(c, "instance %d on MIG gpu %d: option %d is not a MIG profile of %s",
                          i, pi->gpu, pi->option, m->name);
    const struct plan_profile *pr = &m->profiles[pi->option - 1];
    *mem_slices = pr->mem_slices;
    *compute = pr->compute_slices;
    *starts = pr->start_mask;
    return 0;
}

static int check_layouts(struct check_ctx *c)
{
    int n = c->p->n_gpus;
    unsigned *mem = calloc((size_t)n + 1, sizeof(unsigned));
    int *compute = calloc((size_t)n + 1, sizeof(int)), *count = calloc((size_t)n + 1, sizeof(int));
    int rc = mem && compute && count ? 0 : -ENOMEM;
    for (int i = 0; !rc && i < c->p->n_instances; i++) {
        const struct plan_instance *pi = &c->p->instances[i];
        int size = 0, g_slices = 0;
        unsigned allowed = 0;
        if ((rc = check_instance_shape(c, i, &size, &g_slices, &allowed)))
            break;
        count[pi->gpu]++;
        if (!c->p->gpus[pi->gpu].mig) {
            if (count[pi->gpu] > 1)
                rc = check_fail(c, "gpu %d has MIG off but holds %d instances", pi->gpu, count[pi->gpu]);
            continue;
        }
        if (pi->start < 0 || pi->start + size > 8 || !(allowed >> pi->start & 1u))
            rc = check_fail(c, "gpu %d: %s may not start at memory slice %d", pi->gpu,
                            check_model(c, pi->gpu)->profiles[pi->option - 1].name, pi->start);
        unsigned bits = 0;
        for (int k = 0; !rc && k < size; k++)
            bits |= 1u << (pi->start + k);
        if (!rc && (mem[pi->gpu] & bits))
            rc = check_fail(c, "gpu %d: instance %d overlaps another instance's memory slices",
                            pi->gpu, i);
        mem[pi->gpu] |= bits;
        compute[pi->gpu] += g_slices;
        if (!rc && compute[pi->gpu] > 7)
            rc = check_fail(c, "gpu %d: instances use more than 7 compute slices", pi->gpu);
    }
    free(mem);
    free(compute);
    free(count);
    return rc;
}

/* Thr(s, t) x eff of workload w at `time` in instance inst: the model's own function
 * (curve.c), so a measured time-share curve counts here as it does for the planner. */
static double check_thr(struct check_ctx *c, const struct plan_workload *w, int inst, int time,
                        double eff)
{
    const struct plan_instance *pi = &c->p->instances[inst];
    return plan_thr_at(w, c->p->gpus[pi->gpu].pool, pi->option, time, eff);
}

static int64_t check_option_mem(struct check_ctx *c, int inst)
{
    const struct plan_instance *pi = &c->p->instances[inst];
    const struct plan_gpu_model *m = check_model(c, pi->gpu);
    return pi->option == 0 ? m->whole_mem_mib : m->profiles[pi->option - 1].mem_mib;
}

static int check_assign(struct check_ctx *c, const struct plan_assign *a, const int *tenants,
                        long *time, int64_t *mem)
{
    if (a->workload < 0 || a->workload >= c->in->n_workloads)
        return check_fail(c, "assignment to unknown workload %d", a->workload);
    const struct plan_workload *w = &c->in->workloads[a->workload];
    if (a->instance < 0 || a->instance >= c->p->n_instances)
        return check_fail(c, "workload %s: instance %d does not exist", w->name, a->instance);
    if (a->time < 1 || a->time > PLAN_TIME_UNITS)
        return check_fail(c, "workload %s: time share %d is outside 1..%d", w->name, a->time,
                          PLAN_TIME_UNITS);
    if (a->mem_mib < w->mem_mib)
        return check_fail(c, "workload %s: memory quota %lld MiB below its %lld MiB", w->name,
                          (long long)a->mem_mib, (long long)w->mem_mib);
    int k = tenants[a->instance];
    double eff = plan_interference_eff(c->in->interference, k);
    double thr = check_thr(c, w, a->instance, a->time, eff);
    if (thr < w->target * (1 - CHECK_TOL))
        return check_fail(c, "workload %s: Thr(s, t) = %.4g (x %.3f for %d tenants, "
                          "interference %s) misses its target %.4g", w->name, thr, eff, k,
                          plan_interference_name(c->in->interference), w->target);
    time[a->instance] += a->time;
    mem[a->instance] += a->mem_mib;
    return 0;
}

static int check_capacity(struct check_ctx *c, const long *time, const int64_t *mem)
{
    for (int i = 0; i < c->p->n_instances; i++) {
        if (time[i] > PLAN_TIME_UNITS)
            return check_fail(c, "instance %d on gpu %d: time shares sum to %.1f %%", i,
                              c->p->instances[i].gpu, time[i] * 100.0 / PLAN_TIME_UNITS);
        if (mem[i] > check_option_mem(c, i))
            return check_fail(c, "instance %d on gpu %d: memory quotas sum to %lld MiB, more than "
                              "its %lld MiB", i, c->p->instances[i].gpu, (long long)mem[i],
                              (long long)check_option_mem(c, i));
    }
    return 0;
}

static int check_reason(struct check_ctx *c, const struct plan_infeasible *f)
{
    const struct plan_workload *w = &c->in->workloads[f->workload];
    int data = 0, mem = 0, fast = 0, lat = 0;
    for (int p = 0; p < c->in->n_pools; p++) {
        const struct plan_gpu_model *m = &c->in->pools[p].model;
        for (int o = 0; o <= m->n_profiles; o++) {
            int64_t om = o == 0 ? m->whole_mem_mib : m->profiles[o - 1].mem_mib;
            double solo = w->lat ? w->lat->solo_p99_ms[p][o] : 0;
            if (!(w->thr[p][o] > 0))
                continue;
            data = 1;
            mem |= w->mem_mib <= om;
            int ok = w->mem_mib <= om && w->thr[p][o] >= w->target * (1 - CHECK_TOL);
            fast |= ok;
            lat |= ok && (!(w->p99_ms > 0) || (solo > 0 && solo <= w->p99_ms * (1 + CHECK_TOL)));
        }
    }
    int ok = f->reason == PLAN_NO_DATA ? !data
           : f->reason == PLAN_TOO_BIG_MEM ? data && !mem
           : f->reason == PLAN_TOO_SLOW ? mem && !fast
           : f->reason == PLAN_P99_TOO_SLOW ? fast && !lat
           : f->reason == PLAN_NO_CAPACITY ? lat : 0;
    if (!ok)
        return check_fail(c, "workload %s is reported infeasible (%s), which is not true", w->name,
                          plan_reason_text(f->reason));
    return 0;
}

static int check_coverage(struct check_ctx *c)
{
    int *seen = calloc((size_t)c->in->n_workloads + 1, sizeof(int));
    int rc = seen ? 0 : -ENOMEM;
    for (int a = 0; !rc && a < c->p->n_assigns; a++)
        seen[c->p->assigns[a].workload]++;
    for (int f = 0; !rc && f < c->p->n_infeasible; f++) {
        const struct plan_infeasible *inf = &c->p->infeasible[f];
        if (inf->workload < 0 || inf->workload >= c->in->n_workloads)
            rc = check_fail(c, "infeasible entry for unknown workload %d", inf->workload);
        else if (!(rc = check_reason(c, inf)))
            seen[inf->workload]++;
    }
    for (int w = 0; !rc && w < c->in->n_workloads; w++)
        if (seen[w] != 1)
            rc = check_fail(c, "workload %s is %s", c->in->workloads[w].name,
                            seen[w] ? "placed more than once" : "neither placed nor reported infeasible");
    free(seen);
    return rc;
}

/* kairosd enforces time shares per GPU, so a MIG instance holds one workload unless the
 * input opted out (mig_sharing). */
static int check_sharing(struct check_ctx *c, const int *tenants)
{
    for (int i = 0; !c->in->mig_sharing && i < c->p->n_instances; i++)
        if (c->p->instances[i].option != 0 && tenants[i] > 1)
            return check_fail(c, "instance %d on gpu %d: %d workloads share a MIG instance, whose "
                              "time shares kairosd cannot enforce (--mig-time-sharing allows it)",
                              i, c->p->instances[i].gpu, tenants[i]);
    return 0;
}

/* Solo p99 of the workload of assignment a on its instance's option (0: none given). */
static double check_solo_p99(struct check_ctx *c, const struct plan_assign *a)
{
    const struct plan_workload *w = &c->in->workloads[a->workload];
    const struct plan_instance *pi = &c->p->instances[a->instance];
    return w->lat ? w->lat->solo_p99_ms[c->p->gpus[pi->gpu].pool][pi->option] : 0;
}

/* Per instance: the assignment whose workload gets `priority: latency` (a shared whole
 * GPU's p99 workload with the least target over solo p99, ties to the lower workload
 * index), or -1. */
static void check_latency_tenants(struct check_ctx *c, const int *tenants, int *lat)
{
    for (int i = 0; i < c->p->n_instances; i++)
        lat[i] = -1;
    for (int a = 0; a < c->p->n_assigns; a++) {
        const struct plan_assign *as = &c->p->assigns[a];
        const struct plan_workload *w = &c->in->workloads[as->workload];
        double solo = check_solo_p99(c, as);
        int i = as->instance, b = lat[i];
        if (!(w->p99_ms > 0) || !(solo > 0) || tenants[i] < 2 || c->p->instances[i].option)
            continue;
        if (b >= 0) {
            const struct plan_assign *bs = &c->p->assigns[b];
            double rb = c->in->workloads[bs->workload].p99_ms / check_solo_p99(c, bs);
            double ra = w->p99_ms / solo;
            if (ra > rb || (ra == rb && as->workload > bs->workload))
                continue;
        }
        lat[i] = a;
    }
}

/* Every p99 target against the model (plan_p99_factor): solo alone, x 1.305 for the
 * latency tenant of a shared whole GPU, x the native factor for any other tenant. */
static int check_latency(struct check_ctx *c, const int *tenants)
{
    int *lat = malloc(((size_t)c->p->n_instances + 1) * sizeof(int)), rc = lat ? 0 : -ENOMEM;
    if (!rc)
        check_latency_tenants(c, tenants, lat);
    for (int a = 0; !rc && a < c->p->n_assigns; a++) {
        const struct plan_assign *as = &c->p->assigns[a];
        const struct plan_workload *w = &c->in->workloads[as->workload];
        const struct plan_instance *pi = &c->p->instances[as->instance];
        int k = tenants[as->instance], first = lat[as->instance] == a;
        double solo = check_solo_p99(c, as), f = plan_p99_factor(first, k);
        if (!(w->p99_ms > 0))
            continue;
        if (!(solo > 0))
            rc = check_fail(c, "workload %s has a p99 target but no solo p99 on %s, so it cannot "
                            "be checked", w->name, plan_option_name(check_model(c, pi->gpu),
                                                                    pi->option));
        else if (solo * f > w->p99_ms * (1 + CHECK_TOL))
            rc = check_fail(c, "workload %s: modelled p99 %.4g ms (solo %.4g ms on %s x %.3f, %s "
                            "of %d tenants) misses its p99 target %.4g ms", w->name, solo * f,
                            solo, plan_option_name(check_model(c, pi->gpu), pi->option), f,
                            k < 2 ? "alone" : first ? "the latency tenant" : "a tenant without "
                            "latency priority", k, w->p99_ms);
    }
    free(lat);
    return rc;
}

static int check_assigns(struct check_ctx *c)
{
    long *time = calloc((size_t)c->p->n_instances + 1, sizeof(long));
    int64_t *mem = calloc((size_t)c->p->n_instances + 1, sizeof(int64_t));
    int *tenants = calloc((size_t)c->p->n_instances + 1, sizeof(int));
    int rc = time && mem && tenants ? 0 : -ENOMEM;
    for (int a = 0; !rc && a < c->p->n_assigns; a++) {
        int i = c->p->assigns[a].instance;
        if (i >= 0 && i < c->p->n_instances)
            tenants[i]++;
    }
    rc = rc ? rc : check_sharing(c, tenants);
    for (int a = 0; !rc && a < c->p->n_assigns; a++)
        rc = check_assign(c, &c->p->assigns[a], tenants, time, mem);
    rc = rc ? rc : check_latency(c, tenants);
    free(tenants);
    rc = rc ? rc : check_capacity(c, time, mem);
    free(time);
    free(mem);
    return rc;
}

int plan_check(const struct plan_input *in, const struct plan *p, char *err, size_t errlen)
{
    struct check_ctx c = {in, p, err, errlen};
    int rc = check_gpus(&c);
    rc = rc ? rc : check_layouts(&c);
    rc = rc ? rc : check_assigns(&c);
    rc = rc ? rc : check_coverage(&c);
    if (!rc && errlen)
        err[0] = '\0';
    return rc;
}
