/* sim_run.c - runs a scenario: each period the simulated GPU runs with the
 * decisions in force, the real scheduler (sched_tick) sees what each tenant got
 * and decides the next period, as kairosd's tick does with NVML. Judges every
 * window after a warm-up following any change of the active set, and prints per
 * window and per tenant (plain or JSON). */
#include "daemon/sim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile(double *v, size_t n, double q)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t k = (size_t)(q * (double)(n - 1) + 0.5);
    return v[k < n ? k : n - 1];
}

static void policy_text(const struct sched_policy *p, char *buf, size_t len)
{
    int w = snprintf(buf, len, "share %g%%", p->share * 100);
    if (p->limit > 0 && w > 0 && (size_t)w < len)
        w += snprintf(buf + w, len - (size_t)w, " limit %g%%", p->limit * 100);
    if (p->prio != SCHED_PRIO_NORMAL && w > 0 && (size_t)w < len)
        snprintf(buf + w, len - (size_t)w, " %s", sched_prio_name(p->prio));
}

static void print_window(FILE *out, bool json, bool first, size_t k, const struct sim_scenario *sc,
                         const double *tshare, const double *ashare, const bool *present,
                         double busy)
{
    double t = (double)(k + 1) * SCHED_PERIOD_US / 1e6;
    if (json) {
        fprintf(out, "%s\n    {\"t\": %.1f, \"busy\": %.4f, \"tenants\": {", first ? "" : ",", t,
                busy);
        bool any = false;
        for (size_t i = 0; i < sc->n; i++) {
            if (!present[i])
                continue;
            fprintf(out, "%s\"%s\": [%.4f, %.4f]", any ? ", " : "", sc->tenants[i].name,
                    tshare[i], ashare[i]);
            any = true;
        }
        fprintf(out, "}}");
        return;
    }
    fprintf(out, "t=%5.1fs ", t);
    for (size_t i = 0; i < sc->n; i++)
        if (present[i])
            fprintf(out, " %s %4.1f/%4.1f", sc->tenants[i].name, tshare[i] * 100, ashare[i] * 100);
    fprintf(out, "  busy %5.1f%%\n", busy * 100);
}

static void print_table(FILE *out, bool json, const struct sim_scenario *sc,
                        const struct sim_result *r)
{
    if (json) {
        fprintf(out, "\n  ],\n  \"busy\": %.4f,\n  \"tenants\": [", r->busy);
        for (size_t i = 0; i < sc->n; i++) {
            const struct sim_tenant_result *t = &r->t[i];
            fprintf(out,
                    "%s\n    {\"name\": \"%s\", \"share\": %.4f, \"limit\": %.4f, "
                    "\"priority\": \"%s\", \"target\": %.4f, \"achieved\": %.4f, \"gpu\": %.4f, "
                    "\"gpu_max\": %.4f, \"err_p50_pp\": %.3f, \"err_p95_pp\": %.3f, "
                    "\"ran_err_p95_pp\": %.3f, "
                    "\"windows\": %zu, \"latency_solo_us\": %llu, \"latency_p50_us\": %llu, "
                    "\"latency_p95_us\": %llu}",
                    i ? "," : "", sc->tenants[i].name, sc->tenants[i].pol.share,
                    sc->tenants[i].pol.limit, sched_prio_name(sc->tenants[i].pol.prio), t->target,
                    t->achieved, t->gpu, t->gpu_max, t->err_p50, t->err_p95, t->used_err_p95, t->windows,
                    (unsigned long long)t->lat_solo_us, (unsigned long long)t->lat_p50_us,
                    (unsigned long long)t->lat_p95_us);
        }
        fprintf(out, "\n  ]\n}\n");
        return;
    }
    fprintf(out, "\n%-10s %-26s %7s %8s %7s %7s %8s %8s %8s %7s\n", "tenant", "policy", "target",
            "achieved", "gpu", "gpu max", "err p50", "err p95", "ran p95", "windows");
    for (size_t i = 0; i < sc->n; i++) {
        const struct sim_tenant_result *t = &r->t[i];
        char pol[64];
        policy_text(&sc->tenants[i].pol, pol, sizeof pol);
        if (!t->windows)
            fprintf(out, "%-10s %-26s %7s %8s %7s %6.1f%% %8s %8s %8s %7s\n", sc->tenants[i].name,
                    pol, "-", "-", "-", t->gpu_max * 100, "-", "-", "-", "0");
        else
            fprintf(out,
                    "%-10s %-26s %6.1f%% %7.1f%% %6.1f%% %6.1f%% %6.2fpp %6.2fpp %6.2fpp %7zu\n",
                    sc->tenants[i].name, pol, t->target * 100, t->achieved * 100, t->gpu * 100,
                    t->gpu_max * 100, t->err_p50, t->err_p95, t->used_err_p95, t->windows);
        if (t->lat_solo_us)
            fprintf(out, "%-10s requests: latency p50 %.2f ms, p95 %.2f ms (solo %.2f ms)\n", "",
                    t->lat_p50_us / 1e3, t->lat_p95_us / 1e3, t->lat_solo_us / 1e3);
    }
    fprintf(out, "aggregate: GPU busy %.1f%% of the time over %zu periods of %u ms\n",
            r->busy * 100, r->periods, SCHED_PERIOD_US / 1000);
}

struct run {
    struct gpu_sim sim;
    struct sched_gpu g;
    struct sched_usage use[SCHED_MAX_TENANTS];
    bool present[GPU_SIM_MAX_TENANTS];
    double *err[GPU_SIM_MAX_TENANTS], *uerr[GPU_SIM_MAX_TENANTS];
    double sum_t[GPU_SIM_MAX_TENANTS], sum_a[GPU_SIM_MAX_TENANTS], sum_g[GPU_SIM_MAX_TENANTS];
};

/* Arrivals and departures at the start of period k; true when the set changed. */
static bool membership(struct run *r, const struct sim_scenario *sc, size_t k)
{
    uint64_t t0 = (uint64_t)k * SCHED_PERIOD_US;
    bool changed = false;
    for (size_t i = 0; i < sc->n; i++) {
        const struct gpu_sim_tenant_spec *sp = &sc->tenants[i];
        bool now = t0 >= sp->arrive_us && (!sp->leave_us || t0 < sp->leave_us);
        if (now == r->present[i])
            continue;
        changed = true;
        r->present[i] = now;
        if (now) {
            sched_tenant_set(&r->g, (unsigned)i, &sp->pol);
            sched_plan(&r->g);
        } else {
            struct sched_decision none = {0};
            sched_tenant_remove(&r->g, (unsigned)i);
            gpu_sim_apply(&r->sim, i, &none);
            sched_plan(&r->g);
        }
    }
    for (size_t i = 0; changed && i < sc->n; i++)
        if (r->present[i])
            gpu_sim_apply(&r->sim, i, &r->g.t[i].dec);
    return changed;
}

int sim_run(const struct sim_scenario *sc, FILE *out, unsigned print_every, bool json,
            struct sim_result *res)
{
    struct run *r = calloc(1, sizeof *r);
    struct sim_result local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    int rc = -ENOMEM;
    size_t periods = (size_t)(sc->seconds * 1e6 / SCHED_PERIOD_US);
    if (!r)
        return rc;
    for (size_t i = 0; i < sc->n; i++)
        if (!(r->err[i] = calloc(periods ? periods : 1, sizeof(double))) ||
            !(r->uerr[i] = calloc(periods ? periods : 1, sizeof(double))))
            goto out;
    if ((rc = gpu_sim_init(&r->sim, &sc->gpu, sc->tenants, sc->n)))
        goto out;
    sched_gpu_init(&r->g, SCHED_PERIOD_US);
    sched_set_mode(&r->g, sc->mode);
    if (out && json)
        fprintf(out, "{\n  \"windows\": [");
    size_t judge_from = SIM_WARMUP_PERIODS;
    uint64_t mask = 0;
    double busy_sum = 0;
    bool first = true;
    for (size_t k = 0; k < periods; k++) {
        if (membership(r, sc, k))
            judge_from = k + SIM_WARMUP_PERIODS;
        double target[GPU_SIM_MAX_TENANTS], tsum = 0, usum = 0, rsum = 0;
        bool greedy[GPU_SIM_MAX_TENANTS];
        for (size_t i = 0; i < sc->n; i++) {
            const struct sched_tenant *t = &r->g.t[i];
            target[i] = r->present[i] ? t->target : 0;
            greedy[i] = target[i] > 0 && t->cap >= (t->pol.limit > 0 ? t->pol.limit : 1.0);
        }
        double busy = (double)gpu_sim_run(&r->sim, SCHED_PERIOD_US, r->use) / SCHED_PERIOD_US;
        busy_sum += busy;
        if (sc->hide_runnable) /* as kairosd sees it: use, and whether a process lives */
            for (size_t i = 0; i < sc->n; i++) {
                /* the judge still knows who competed: who wanted at least its
                 * target (ran or waited that long) */
                greedy[i] = greedy[i] && (double)r->use[i].runnable_us >=
                                             target[i] * SCHED_PERIOD_US;
                r->use[i].runnable_us = SCHED_RUNNABLE_UNKNOWN;
                r->use[i].no_process = !r->present[i];
            }
        for (size_t i = 0; i < sc->n; i++)
            tsum += greedy[i] ? target[i] : 0;
        sched_tick(&r->g, r->use);
        for (size_t i = 0; i < sc->n; i++) {
            usum += greedy[i] ? r->g.t[i].charged_us : 0;
            rsum += greedy[i] ? (double)r->use[i].used_us : 0;
        }
        if (r->g.active_mask != mask) {
            mask = r->g.active_mask;
            if (k + SIM_WARMUP_PERIODS > judge_from)
                judge_from = k + SIM_WARMUP_PERIODS;
        }
        for (size_t i = 0; i < sc->n; i++)
            if (r->g.t[i].changed)
                gpu_sim_apply(&r->sim, i, &r->g.t[i].dec);
        double tshare[GPU_SIM_MAX_TENANTS], ashare[GPU_SIM_MAX_TENANTS];
        for (size_t i = 0; i < sc->n; i++) {
            tshare[i] = tsum > 0 && greedy[i] ? target[i] / tsum : 0;
            ashare[i] = usum > 0 && greedy[i] ? r->g.t[i].charged_us / usum : 0;
            double ushare = rsum > 0 && greedy[i] ? (double)r->use[i].used_us / rsum : 0;
            double gpu = (double)r->use[i].used_us / SCHED_PERIOD_US;
            if (gpu > res->t[i].gpu_max)
                res->t[i].gpu_max = gpu;
            if (k < judge_from || !r->present[i] || !greedy[i])
                continue;
            struct sim_tenant_result *t = &res->t[i];
            r->uerr[i][t->windows] = fabs(ushare - tshare[i]) * 100;
            r->err[i][t->windows++] = fabs(ashare[i] - tshare[i]) * 100;
            r->sum_t[i] += tshare[i];
            r->sum_a[i] += ashare[i];
            r->sum_g[i] += gpu;
        }
        if (out && print_every && (k + 1) % print_every == 0) {
            print_window(out, json, first, k, sc, tshare, ashare, r->present, busy);
            first = false;
        }
    }
    res->periods = periods;
    res->busy = periods ? busy_sum / (double)periods : 0;
    for (size_t i = 0; i < sc->n; i++) {
        struct sim_tenant_result *t = &res->t[i];
        if (t->windows) {
            t->target = r->sum_t[i] / (double)t->windows;
            t->achieved = r->sum_a[i] / (double)t->windows;
            t->gpu = r->sum_g[i] / (double)t->windows;
            t->err_p50 = quantile(r->err[i], t->windows, 0.5);
            t->err_p95 = quantile(r->err[i], t->windows, 0.95);
            t->used_err_p95 = quantile(r->uerr[i], t->windows, 0.95);
        }
        if (sc->tenants[i].load == GPU_SIM_REQUESTS) {
            t->lat_solo_us = sc->tenants[i].work_us;
            t->lat_p50_us = gpu_sim_latency(&r->sim, i, 0.5);
            t->lat_p95_us = gpu_sim_latency(&r->sim, i, 0.95);
        }
    }
    if (out)
        print_table(out, json, sc, res);
    rc = 0;
out:
    for (size_t i = 0; i < sc->n; i++) {
        free(r->err[i]);
        free(r->uerr[i]);
    }
    free(r);
    return rc;
}
