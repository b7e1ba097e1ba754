/* sim_run.c - runs a scenario: each period the simulated GPU runs with the
 * decisions in force, the real scheduler (sched_tick) sees what each tenant got
 * and decides the next period, as kairosd's tick does with NVML. Judges every
 * window after a warm-up following any change of the active set, and prints per
 * window and per tenant (plain, with a legend of the columns, or one JSON document
 * written with jansson). */

const char sim_legend[] =
    "\n"
    "All figures are shares of the GPU's time (100 % is the whole GPU), over the judged\n"
    "windows: those of 100 ms in which the tenant competed for the GPU, after a warm-up\n"
    "following any arrival or departure (the scenario's warmup_s, 1 s unless set).\n"
    "  target    mean share the scheduler entitled the tenant to (its share, plus what\n"
    "            idle or capped tenants left it, never above its limit)\n"
    "  ran       mean share it ran; ran max: its largest share of one window (judged or not)\n"
    "  err p50, err p95  median and 95th percentile over the windows of |charged -\n"
    "            entitled| in percentage points (pp), both as parts of the time of the\n"
    "            tenants that competed in that window\n"
    "  ran p95   the same p95 with the time it really ran instead of the time charged\n"
    "  windows   how many windows were judged\n";
#include "daemon/time/sim.h"

#include <errno.h>
#include <jansson.h>
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

/* One window: per tenant present its target and what it ran, both in % of the
 * GPU's time (text), or into the JSON document's "windows". */
static void print_window(FILE *out, json_t *windows, size_t k, const struct sim_scenario *sc,
                         const struct sim_window *w)
{
    double t = (double)(k + 1) * SCHED_PERIOD_US / 1e6;
    if (windows) {
        json_t *split = json_object(), *gpu = json_object();
        for (size_t i = 0; i < sc->n; i++) {
            if (!w->present[i])
                continue;
            json_object_set_new(split, sc->tenants[i].name,
                                json_pack("[f, f]", w->tshare[i], w->ashare[i]));
            json_object_set_new(gpu, sc->tenants[i].name,
                                json_pack("[f, f]", w->target_gpu[i], w->ran_gpu[i]));
        }
        json_array_append_new(windows, json_pack("{s:f, s:f, s:o, s:o}", "t", t, "busy", w->busy,
                                                 "tenants", split, "gpu_time", gpu));
        return;
    }
    fprintf(out, "t=%5.1fs ", t);
    for (size_t i = 0; i < sc->n; i++)
        if (w->present[i])
            fprintf(out, " %s %4.1f/%4.1f", sc->tenants[i].name, w->target_gpu[i] * 100,
                    w->ran_gpu[i] * 100);
    fprintf(out, "  busy %5.1f%%\n", w->busy * 100);
}

static json_t *tenant_json(const struct gpu_sim_tenant_spec *sp, const struct sim_tenant_result *t)
{
    json_t *o = json_pack("{s:s, s:f, s:f, s:s, s:f, s:f, s:f, s:f, s:f}", "name", sp->name,
                          "share", sp->pol.share, "limit", sp->pol.limit, "priority",
                          sched_prio_name(sp->pol.prio), "target", t->target, "achieved",
                          t->achieved, "target_gpu", t->target_gpu, "gpu", t->gpu, "gpu_max",
                          t->gpu_max);
    json_t *more = json_pack("{s:f, s:f, s:f, s:I, s:I, s:I, s:I}", "err_p50_pp", t->err_p50,
                             "err_p95_pp", t->err_p95, "ran_err_p95_pp", t->used_err_p95,
                             "windows", (json_int_t)t->windows, "latency_solo_us",
                             (json_int_t)t->lat_solo_us, "latency_p50_us",
                             (json_int_t)t->lat_p50_us, "latency_p95_us",
                             (json_int_t)t->lat_p95_us);
    json_object_update(o, more);
    json_decref(more);
    return o;
}

static void print_json(FILE *out, json_t *windows, const struct sim_scenario *sc,
                       const struct sim_result *r)
{
    json_t *tenants = json_array();
    for (size_t i = 0; i < sc->n; i++)
        json_array_append_new(tenants, tenant_json(&sc->tenants[i], &r->t[i]));
    json_t *root = json_pack("{s:O, s:f, s:I, s:o}", "windows", windows, "busy", r->busy,
                             "periods", (json_int_t)r->periods, "tenants", tenants);
    json_dumpf(root, out, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    fputc('\n', out);
    json_decref(root);
}

static void print_table(FILE *out, const struct sim_scenario *sc, const struct sim_result *r)
{
    fprintf(out, "\n%-10s %-26s %7s %7s %7s %8s %8s %8s %7s\n", "tenant", "policy", "target",
            "ran", "ran max", "err p50", "err p95", "ran p95", "windows");
    for (size_t i = 0; i < sc->n; i++) {
        const struct sim_tenant_result *t = &r->t[i];
        char pol[64];
        policy_text(&sc->tenants[i].pol, pol, sizeof pol);
        if (!t->windows)
            fprintf(out, "%-10s %-26s %7s %7s %6.1f%% %8s %8s %8s %7s\n", sc->tenants[i].name,
                    pol, "-", "-", t->gpu_max * 100, "-", "-", "-", "0");
        else
            fprintf(out, "%-10s %-26s %6.1f%% %6.1f%% %6.1f%% %6.2fpp %6.2fpp %6.2fpp %7zu\n",
                    sc->tenants[i].name, pol, t->target_gpu * 100, t->gpu * 100,
                    t->gpu_max * 100, t->err_p50, t->err_p95, t->used_err_p95, t->windows);
        if (t->lat_solo_us)
            fprintf(out, "%-10s requests: latency p50 %.2f ms, p95 %.2f ms (solo %.2f ms)\n", "",
                    t->lat_p50_us / 1e3, t->lat_p95_us / 1e3, t->lat_solo_us / 1e3);
    }
    fprintf(out, "aggregate: GPU busy %.1f%% of the time over %zu periods of %u ms\n",
            r->busy * 100, r->periods, SCHED_PERIOD_US / 1000);
    fprintf(out, "%s", sim_legend);
}

struct run {
    json_t *windows; /* --json: the windows so far */
    struct gpu_sim sim;
    struct sched_gpu g;
    struct sched_usage use[SCHED_MAX_TENANTS];
    bool present[GPU_SIM_MAX_TENANTS];
    double *err[GPU_SIM_MAX_TENANTS], *uerr[GPU_SIM_MAX_TENANTS];
    double sum_t[GPU_SIM_MAX_TENANTS], sum_a[GPU_SIM_MAX_TENANTS], sum_g[GPU_SIM_MAX_TENANTS];
    double sum_tg[GPU_SIM_MAX_TENANTS];
    /* measure: userd - NVML's coarse use: each tenant's use in the last
     * SIM_NVML_PERIODS periods (kairosd reads the samples of the last second) */
    uint64_t nvml_ring[GPU_SIM_MAX_TENANTS][SIM_NVML_PERIODS];
    uint32_t nvml_hits[GPU_SIM_MAX_TENANTS]; /* this period's, with gpu nvml_sample_us */
    struct sched_usage seen[SCHED_MAX_TENANTS]; /* what the scheduler is told */
    size_t trace_cap;
};

/* NVML's figure for tenant i as kairosd reads it each tick: its use over the
 * last second, the period just ended included (on the H200 a tenant that stopped
 * reads busy for up to a second). With gpu nvml_sample_us, as on the H200: each of
 * the second's samples that named it counts nvml_sample_us of use (five a second:
 * 20 % each); else the mean of its exact use. */
static uint64_t nvml_use(struct run *r, const struct sim_scenario *sc, size_t i, size_t k)
{
    uint64_t *ring = r->nvml_ring[i], sum = 0;
    ring[k % SIM_NVML_PERIODS] = sc->gpu.nvml_sample_us
                                     ? (uint64_t)r->nvml_hits[i] * sc->gpu.nvml_sample_us
                                     : r->use[i].used_us;
    for (size_t j = 0; j < SIM_NVML_PERIODS; j++)
        sum += ring[j];
    return sum / SIM_NVML_PERIODS;
}

/* What kairosd's tick is told of tenant i with measure: userd: its shim's last
 * report (runnable and unpaused time, scaled to the period; unknown before the
 * first) and NVML's use of the last second. */
static void seen_userd(struct run *r, const struct sim_scenario *sc, size_t i, size_t k)
{
    const struct gpu_sim_report *rep = &r->sim.t[i].report;
    double scale =
        rep->have && rep->interval_us ? (double)SCHED_PERIOD_US / (double)rep->interval_us : 0;
    uint64_t sensed = (uint64_t)llround((double)rep->sensed_us * scale);
    uint64_t open = (uint64_t)llround((double)rep->open_us * scale);
    uint64_t progress = (uint64_t)llround((double)rep->progress_us * scale);
    r->seen[i].used_us = nvml_use(r, sc, i, k);
    r->seen[i].progress_known = rep->have;
    r->seen[i].progress_us = progress < SCHED_PERIOD_US ? progress : SCHED_PERIOD_US;
    r->seen[i].runnable_us = !rep->have ? SCHED_RUNNABLE_UNKNOWN
                             : sensed < SCHED_PERIOD_US ? sensed : SCHED_PERIOD_US;
    r->seen[i].no_process = !r->present[i];
    r->seen[i].used_coarse = true; /* windows charged by the shims' figures */
    r->seen[i].unpaused_us = !rep->have ? SCHED_RUNNABLE_UNKNOWN
                             : open < SCHED_PERIOD_US ? open : SCHED_PERIOD_US;
}

/* Whether a tenant of g has a window shorter than the period: it is paused. */
static bool any_window(const struct sched_gpu *g)
{
    for (unsigned i = 0; i < SCHED_MAX_TENANTS; i++) {
        const struct sched_decision *d = &g->t[i].dec;
        if (g->t[i].present && d->period_us && d->duty_us < d->period_us)
            return true;
    }
    return false;
}

/* Sends tenant i's decision to its simulated shim; in a native scenario none
 * (the driver's own timeslices, never paused). */
static void apply_decision(struct run *r, const struct sim_scenario *sc, size_t i,
                           const struct sched_decision *d)
{
    static const struct sched_decision none;
    gpu_sim_apply(&r->sim, i, sc->native ? &none : d);
}

/* Sends the decisions that changed in mid-period to the simulated shims. */
static void apply_changed(struct run *r, const struct sim_scenario *sc)
{
    for (size_t j = 0; j < sc->n; j++)
        if (r->g.t[j].changed) {
            apply_decision(r, sc, j, &r->g.t[j].dec);
            r->g.t[j].changed = false;
        }
}

/* What the shims said in the chunk just run (measure: userd), acted on at once as
 * kairosd does: a wake (KAIROS_RUNNABLE_WAKE) plans the tenant in, a report of a
 * whole idle interval lends its window (timeshare.c). */
static void take_events(struct run *r, const struct sim_scenario *sc, struct sim_result *res)
{
    for (size_t i = 0; i < sc->n; i++) {
        bool woke = gpu_sim_take_wake(&r->sim, i), reported = gpu_sim_take_report(&r->sim, i);
        bool quiet = gpu_sim_take_idle(&r->sim, i);
        if (sc->measure != SIM_MEASURE_USERD || !r->present[i])
            continue;
        uint32_t pos = (uint32_t)(r->sim.now_us % SCHED_PERIOD_US);
        if (woke && sched_wake(&r->g, (unsigned)i, pos)) {
            res->wakes++;
            apply_changed(r, sc);
        }
        const struct gpu_sim_report *rep = &r->sim.t[i].report;
        bool idle = reported && (double)rep->sensed_us < 0.02 * (double)rep->interval_us;
        if (((quiet && sched_idle_early(&r->g, (unsigned)i)) ||
             (idle && sched_idle_now(&r->g, (unsigned)i)))) {
            res->idled++;
            apply_changed(r, sc);
        }
    }
}

/* One period of the GPU in chunks (wakes acted on between them, the trace
 * recorded); r->use gets each tenant's usage over it. The busy time in us. */
static double run_period(struct run *r, const struct sim_scenario *sc, struct sim_result *res)
{
    uint64_t busy = 0;
    memset(r->use, 0, sizeof r->use);
    memset(r->nvml_hits, 0, sizeof r->nvml_hits);
    /* only the shims' events (measure: userd) and a trace need the chunks */
    uint64_t chunk = sc->measure == SIM_MEASURE_USERD || res->trace ? SIM_CHUNK_US
                                                                     : SCHED_PERIOD_US;
    for (uint64_t done = 0; done < SCHED_PERIOD_US; done += chunk) {
        struct sched_usage part[GPU_SIM_MAX_TENANTS];
        busy += gpu_sim_run(&r->sim, chunk, part);
        for (size_t i = 0; i < sc->n; i++) {
            r->use[i].used_us += part[i].used_us;
            r->use[i].runnable_us += part[i].runnable_us;
            r->nvml_hits[i] += gpu_sim_nvml_hits(&r->sim, i);
            if (res->trace && res->trace_n < r->trace_cap)
                res->trace[res->trace_n][i] = part[i].used_us;
        }
        if (res->trace && res->trace_n < r->trace_cap)
            res->trace_n++;
        take_events(r, sc, res);
    }
    return (double)busy;
}

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
            apply_decision(r, sc, i, &r->g.t[i].dec);
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
    rc = -ENOMEM;
    r->trace_cap = periods * (SCHED_PERIOD_US / SIM_CHUNK_US);
    if (sc->trace && !(res->trace = calloc(r->trace_cap ? r->trace_cap : 1, sizeof *res->trace)))
        goto out;
    sched_gpu_init(&r->g, SCHED_PERIOD_US);
    sched_set_mode(&r->g, sc->mode);
    sched_set_yield(&r->g, sc->latency_yield_us);
    if (out && json && !(r->windows = json_array()))
        goto out;
    size_t judge_from = sc->warmup_periods;
    uint64_t mask = 0;
    double busy_sum = 0;
    for (size_t k = 0; k < periods; k++) {
        if (membership(r, sc, k))
            judge_from = k + sc->warmup_periods;
        double target[GPU_SIM_MAX_TENANTS], tsum = 0, usum = 0, rsum = 0;
        bool greedy[GPU_SIM_MAX_TENANTS];
        for (size_t i = 0; i < sc->n; i++) {
            const struct sched_tenant *t = &r->g.t[i];
            target[i] = r->present[i] ? t->target : 0;
            greedy[i] = target[i] > 0 && t->cap >= (t->pol.limit > 0 ? t->pol.limit : 1.0);
        }
        double busy = run_period(r, sc, res) / SCHED_PERIOD_US;
        busy_sum += busy;
        memcpy(r->seen, r->use, sizeof r->seen);
        if (sc->measure == SIM_MEASURE_USERD) /* the shims' reports, NVML's use (timeshare.c) */
            for (size_t i = 0; i < sc->n; i++)
                seen_userd(r, sc, i, k);
        if (sc->measure == SIM_MEASURE_NVML) /* as kairosd sees it: use, and whether a process lives */
            for (size_t i = 0; i < sc->n; i++) {
                /* the judge still knows who competed: who wanted at least its
                 * target (ran or waited that long) */
                greedy[i] = greedy[i] && (double)r->use[i].runnable_us >=
                                             target[i] * SCHED_PERIOD_US;
                r->seen[i].runnable_us = SCHED_RUNNABLE_UNKNOWN;
                r->seen[i].no_process = !r->present[i];
                r->seen[i].used_coarse = true;
                r->seen[i].unpaused_us = SCHED_RUNNABLE_UNKNOWN;
            }
        for (size_t i = 0; i < sc->n; i++)
            tsum += greedy[i] ? target[i] : 0;
        sched_tick(&r->g, r->seen);
        for (size_t i = 0; i < sc->n; i++) {
            usum += greedy[i] ? r->g.t[i].charged_us : 0;
            rsum += greedy[i] ? (double)r->use[i].used_us : 0;
        }
        if (r->g.active_mask != mask) {
            mask = r->g.active_mask;
            if (k + sc->warmup_periods > judge_from)
                judge_from = k + sc->warmup_periods;
        }
        for (size_t i = 0; i < sc->n; i++)
            if (r->g.t[i].changed)
                apply_decision(r, sc, i, &r->g.t[i].dec);
        res->paused += !sc->native && any_window(&r->g);
        struct sim_window w = {.busy = busy};
        double *tshare = w.tshare, *ashare = w.ashare;
        for (size_t i = 0; i < sc->n; i++) {
            w.present[i] = r->present[i];
            w.target_gpu[i] = target[i];
            tshare[i] = tsum > 0 && greedy[i] ? target[i] / tsum : 0;
            ashare[i] = usum > 0 && greedy[i] ? r->g.t[i].charged_us / usum : 0;
            double ushare = rsum > 0 && greedy[i] ? (double)r->use[i].used_us / rsum : 0;
            double gpu = w.ran_gpu[i] = (double)r->use[i].used_us / SCHED_PERIOD_US;
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
            r->sum_tg[i] += target[i];
        }
        if (out && print_every && (k + 1) % print_every == 0)
            print_window(out, r->windows, k, sc, &w);
    }
    res->periods = periods;
    res->busy = periods ? busy_sum / (double)periods : 0;
    for (size_t i = 0; i < sc->n; i++) {
        struct sim_tenant_result *t = &res->t[i];
        if (t->windows) {
            t->target = r->sum_t[i] / (double)t->windows;
            t->achieved = r->sum_a[i] / (double)t->windows;
            t->gpu = r->sum_g[i] / (double)t->windows;
            t->target_gpu = r->sum_tg[i] / (double)t->windows;
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
    if (out && json)
        print_json(out, r->windows, sc, res);
    else if (out)
        print_table(out, sc, res);
    rc = 0;
out:
    json_decref(r->windows);
    for (size_t i = 0; i < sc->n; i++) {
        free(r->err[i]);
        free(r->uerr[i]);
    }
    free(r);
    return rc;
}
