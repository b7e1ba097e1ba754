/* metrics.c - the exposition text (see metrics.h): tables of the per-tenant-and-GPU
 * metrics over the figures kairos ps shows (one sample each, a label's value, one
 * per reason that held the tenant back), then the per-tenant, per-GPU and
 * kairosd's own. Every family is written whole (HELP, TYPE, its samples) before
 * the next, as the format requires; a figure the daemon does not know (no
 * measurement yet, a GPU that cannot tell its temperature) has no sample rather
 * than a 0. */
#include "daemon/observe/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config/config.h"
#include "daemon/gpu/driver_release.h"
#include "daemon/gpu/gpu.h"
#include "daemon/space/faults.h"
#include "daemon/space/mps_clients.h"
#include "daemon/transport/server.h"
#include "daemon/tenants/tenants.h"
#include "daemon/time/timeshare.h"

/* Which GPUs of a tenant a metric has a sample for. */
enum when {
    WHEN_SHOWN,    /* those kairos ps shows: a quota, holdings, refusals or a policy */
    WHEN_POLICY,   /* a compute policy */
    WHEN_LIMIT,    /* a compute policy with a limit */
    WHEN_MEASURED, /* a compute policy and a measurement of what it got */
    WHEN_HOLDS,    /* a compute policy and the figures of what held it back */
};

struct sample {
    bool whole;  /* u, printed exactly; else d */
    uint64_t u;
    double d;
};

struct tenant_gpu_metric {
    const char *name, *type, *help;
    enum when when;
    struct sample (*value)(const struct kairos_ps_reply *r, unsigned g);
};

static struct sample whole(uint64_t u)
{
    return (struct sample){.whole = true, .u = u};
}

static struct sample real(double d)
{
    return (struct sample){.d = d};
}

static struct sample held(const struct kairos_ps_reply *r, unsigned g)
{
    return whole(r->held[g]);
}

static struct sample quota(const struct kairos_ps_reply *r, unsigned g)
{
    return whole(r->quota[g]);
}

static struct sample refusals(const struct kairos_ps_reply *r, unsigned g)
{
    return whole(r->refusals[g]);
}

static struct sample share(const struct kairos_ps_reply *r, unsigned g)
{
    return real(r->share_ppm[g] / 1e6);
}

static struct sample limit(const struct kairos_ps_reply *r, unsigned g)
{
    return real(r->limit_ppm[g] / 1e6);
}

static struct sample target(const struct kairos_ps_reply *r, unsigned g)
{
    return real(r->target_ppm[g] / 1e6);
}

static struct sample achieved(const struct kairos_ps_reply *r, unsigned g)
{
    return real(r->window_ppm[g] / 1e6);
}

static struct sample achieved_minute(const struct kairos_ps_reply *r, unsigned g)
{
    return real(r->minute_ppm[g] / 1e6);
}

static struct sample pauses(const struct kairos_ps_reply *r, unsigned g)
{
    return whole(r->pauses[g]);
}

static struct sample window_period(const struct kairos_ps_reply *r, unsigned g)
{
    return real(r->period_us[g] / 1e6);
}

static struct sample window_duty(const struct kairos_ps_reply *r, unsigned g)
{
    return real((r->period_us[g] ? r->duty_us[g] : 0) / 1e6);
}

static const struct tenant_gpu_metric tenant_gpu_metrics[] = {
    {"kairos_tenant_memory_held_bytes", "gauge",
     "Device memory the tenant's processes hold on the GPU (allocations granted and not freed).",
     WHEN_SHOWN, held},
    {"kairos_tenant_memory_quota_bytes", "gauge",
     "The tenant's device-memory quota on the GPU (0: no access).", WHEN_SHOWN, quota},
    {"kairos_tenant_allocations_refused_total", "counter",
     "Allocations refused because they would have taken the tenant beyond its quota.",
     WHEN_SHOWN, refusals},
    {"kairos_tenant_compute_share_ratio", "gauge",
     "The tenant's guaranteed share of the GPU's time while others compete (0: best effort).",
     WHEN_POLICY, share},
    {"kairos_tenant_compute_limit_ratio", "gauge",
     "The most of the GPU's time the tenant may use, even on an idle GPU (absent: no limit).",
     WHEN_LIMIT, limit},
    {"kairos_tenant_compute_target_ratio", "gauge",
     "The share of the GPU's time the scheduler entitles the tenant to now (0 while idle).",
     WHEN_POLICY, target},
    {"kairos_tenant_compute_achieved_ratio", "gauge",
     "The share of the GPU's time the tenant used over the last period (100 ms).",
     WHEN_MEASURED, achieved},
    {"kairos_tenant_compute_achieved_minute_ratio", "gauge",
     "The share of the GPU's time the tenant used, averaged over the last minute.",
     WHEN_MEASURED, achieved_minute},
    {"kairos_tenant_pauses_total", "counter",
     "Periods (100 ms) in which the tenant had a window shorter than the period.",
     WHEN_POLICY, pauses},
    {"kairos_tenant_window_period_seconds", "gauge",
     "The period of the tenant's run window (0: never paused).", WHEN_POLICY, window_period},
    {"kairos_tenant_window_duty_seconds", "gauge",
     "How much of each window period the tenant may run (0 when never paused).", WHEN_POLICY,
     window_duty},
};

void metrics_write_label_value(FILE *f, const char *value)
{
    for (const char *c = value; *c; c++) {
        if (*c == '\\')
            fputs("\\\\", f);
        else if (*c == '"')
            fputs("\\\"", f);
        else if (*c == '\n')
            fputs("\\n", f);
        else
            fputc(*c, f);
    }
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void write_sample(FILE *f, struct sample s)
{
    if (s.whole)
        fprintf(f, " %" PRIu64 "\n", s.u);
    else
        fprintf(f, " %.9g\n", s.d);
}

/* name{tenant="...",gpu="g"}, or with label name{tenant="...",gpu="g",label="value"}
 * (value one of our own words, nothing to escape) */
static void tenant_gpu_series(FILE *f, const char *name, const char *tenant, unsigned g,
                              const char *label, const char *value)
{
    fprintf(f, "%s{tenant=\"", name);
    metrics_write_label_value(f, tenant);
    fprintf(f, "\",gpu=\"%u\"", g);
    if (label)
        fprintf(f, ",%s=\"%s\"", label, value);
    fputc('}', f);
}

/* The figures of tenant t as kairos ps gets them (handle_ps.c). */
static void tenant_figures(const struct metrics_sources *src, const struct ledger_tenant *t,
                           struct kairos_ps_reply *r)
{
    unsigned n = src->ts->ledger.n_gpus;
    memset(r, 0, sizeof *r);
    r->n_gpus = n;
    memcpy(r->tenant, t->name, sizeof r->tenant);
    for (unsigned g = 0; g < n && g < KAIROS_MAX_GPUS; g++) {
        r->quota[g] = t->quota[g];
        r->held[g] = t->held[g];
        r->refusals[g] = t->refusals[g];
    }
    timeshare_ps(src->timeshare, t->name, n, r);
}

static bool applies(enum when when, const struct kairos_ps_reply *r, unsigned g)
{
    bool policy = r->compute_flags[g] & KAIROS_PS_COMPUTE_POLICY;
    switch (when) {
    case WHEN_SHOWN:
        return r->quota[g] || r->held[g] || r->refusals[g] || policy;
    case WHEN_POLICY:
        return policy;
    case WHEN_LIMIT:
        return policy && r->limit_ppm[g];
    case WHEN_MEASURED:
        return policy && (r->compute_flags[g] & KAIROS_PS_COMPUTE_MEASURED);
    case WHEN_HOLDS:
        return policy && (r->compute_flags[g] & KAIROS_PS_COMPUTE_HOLDS);
    }
    return false;
}

/* The tenants' figures, as kairos ps has them, and the node's GPU count. */
struct figures {
    const struct kairos_ps_reply *r;
    size_t n;
    unsigned n_gpus;
};

/* Calls each(f, metric, r, g) for every tenant r and GPU g where when applies. */
typedef void (*series_fn)(FILE *f, const void *metric, const struct kairos_ps_reply *r,
                          unsigned g);
static void each_tenant_gpu(FILE *f, const struct figures *figs, enum when when, series_fn each,
                            const void *metric)
{
    for (size_t i = 0; i < figs->n; i++)
        for (unsigned g = 0; g < figs->n_gpus && g < KAIROS_MAX_GPUS; g++)
            if (applies(when, &figs->r[i], g))
                each(f, metric, &figs->r[i], g);
}

static void gpu_series(FILE *f, const void *metric, const struct kairos_ps_reply *r, unsigned g)
{
    const struct tenant_gpu_metric *tm = metric;
    tenant_gpu_series(f, tm->name, r->tenant, g, NULL, NULL);
    write_sample(f, tm->value(r, g));
}

static void write_tenant_gpu(FILE *f, const struct figures *figs)
{
    for (size_t m = 0; m < sizeof tenant_gpu_metrics / sizeof *tenant_gpu_metrics; m++) {
        const struct tenant_gpu_metric *tm = &tenant_gpu_metrics[m];
        family(f, tm->name, tm->type, tm->help);
        each_tenant_gpu(f, figs, tm->when, gpu_series, tm);
    }
}

static const char *prio_name(const struct kairos_ps_reply *r, unsigned g)
{
    uint32_t p = r->priority[g];
    return p == KAIROS_PRIO_LATENCY ? "latency" : p == KAIROS_PRIO_BATCH ? "batch" : "normal";
}

static const char *hold_name(unsigned reason)
{
    static const char *const names[KAIROS_HOLD_REASONS] = {"none", "share", "limit", "yield"};
    return reason < KAIROS_HOLD_REASONS ? names[reason] : "none";
}

static const char *hold_now(const struct kairos_ps_reply *r, unsigned g)
{
    return hold_name(r->hold[g]);
}

/* Families of one series per tenant and GPU whose figure is a label's value (the
 * sample is always 1). */
static const struct tenant_gpu_info {
    const char *name, *help, *label;
    enum when when;
    const char *(*value)(const struct kairos_ps_reply *r, unsigned g);
} tenant_gpu_infos[] = {
    {"kairos_tenant_compute_priority_info",
     "The priority of the tenant's compute policy on the GPU (the label), always 1.", "priority",
     WHEN_POLICY, prio_name},
    {"kairos_tenant_compute_hold_info",
     "What holds the tenant back on the GPU now (the label: none, share, limit, yield), "
     "always 1.",
     "reason", WHEN_HOLDS, hold_now},
};

static struct sample held_seconds(const struct kairos_ps_reply *r, unsigned g, unsigned reason)
{
    return real(r->hold_time_us[g][reason] / 1e6);
}

static struct sample hold_periods(const struct kairos_ps_reply *r, unsigned g, unsigned reason)
{
    return whole(r->hold_periods[g][reason]);
}

/* Counters of one series per tenant, GPU and reason that held it back (label
 * reason), from the reason first on (paused time is not for none). */
static const struct tenant_reason_metric {
    const char *name, *help;
    unsigned first;
    struct sample (*value)(const struct kairos_ps_reply *r, unsigned g, unsigned reason);
} tenant_reason_metrics[] = {
    {"kairos_tenant_compute_held_seconds_total",
     "Time the tenant's window kept it paused on the GPU since it got its policy, by what held "
     "it back (share, limit, yield).",
     KAIROS_HOLD_SHARE, held_seconds},
    {"kairos_tenant_compute_periods_total",
     "Periods (100 ms) of the tenant on the GPU since it got its policy, by what held it back "
     "in them (none, share, limit, yield; by timeslices too, with no time paused).",
     KAIROS_HOLD_NONE, hold_periods},
};

static void info_series(FILE *f, const void *metric, const struct kairos_ps_reply *r, unsigned g)
{
    const struct tenant_gpu_info *ti = metric;
    tenant_gpu_series(f, ti->name, r->tenant, g, ti->label, ti->value(r, g));
    fputs(" 1\n", f);
}

static void write_infos(FILE *f, const struct figures *figs)
{
    for (size_t m = 0; m < sizeof tenant_gpu_infos / sizeof *tenant_gpu_infos; m++) {
        const struct tenant_gpu_info *ti = &tenant_gpu_infos[m];
        family(f, ti->name, "gauge", ti->help);
        each_tenant_gpu(f, figs, ti->when, info_series, ti);
    }
}

/* One series per reason. */
static void reason_series(FILE *f, const void *metric, const struct kairos_ps_reply *r,
                          unsigned g)
{
    const struct tenant_reason_metric *tr = metric;
    for (unsigned k = tr->first; k < KAIROS_HOLD_REASONS; k++) {
        tenant_gpu_series(f, tr->name, r->tenant, g, "reason", hold_name(k));
        write_sample(f, tr->value(r, g, k));
    }
}

static void write_reasons(FILE *f, const struct figures *figs)
{
    for (size_t m = 0; m < sizeof tenant_reason_metrics / sizeof *tenant_reason_metrics; m++) {
        const struct tenant_reason_metric *tr = &tenant_reason_metrics[m];
        family(f, tr->name, "counter", tr->help);
        each_tenant_gpu(f, figs, WHEN_HOLDS, reason_series, tr);
    }
}

/* A tenant's chargeback counters on g are shown where kairos ps shows it, or where
 * they count anything. */
static bool usage_shown(const struct usage *u, const struct kairos_ps_reply *r, unsigned g)
{
    return applies(WHEN_SHOWN, r, g) || u->shown_gpu_us[g] || u->shown_mem_byte_s[g];
}

/* Tenant t's counters in b: all 0 (not begun) when it has none yet. */
static const struct usage *usage_of(const struct usage_book *b, const struct ledger_tenant *t)
{
    static const struct usage none;
    const struct usage *u = usage_book_find(b, t->id);
    return u ? u : &none;
}

/* The chargeback counters as of the last save of the state file (usage.h), and when
 * they began. */
static void write_usage(FILE *f, const struct ledger *l, const struct usage_book *b,
                        const struct kairos_ps_reply *figs)
{
    family(f, "kairos_tenant_gpu_seconds_total", "counter",
           "GPU time charged to the tenant's work on the GPU (as of kairosd's last save; "
           "kept across restarts).");
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct usage *u = usage_of(b, l->tenants[i]);
        for (unsigned g = 0; g < l->n_gpus && g < KAIROS_MAX_GPUS; g++)
            if (usage_shown(u, &figs[i], g)) {
                tenant_gpu_series(f, "kairos_tenant_gpu_seconds_total", figs[i].tenant, g,
                                  NULL, NULL);
                uint64_t us = u->shown_gpu_us[g]; /* exact, in seconds */
                fprintf(f, " %" PRIu64 ".%06" PRIu64 "\n", us / 1000000, us % 1000000);
            }
    }
    family(f, "kairos_tenant_memory_held_byte_seconds_total", "counter",
           "Device memory the tenant held on the GPU, integrated over time (as of kairosd's "
           "last save; kept across restarts).");
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct usage *u = usage_of(b, l->tenants[i]);
        for (unsigned g = 0; g < l->n_gpus && g < KAIROS_MAX_GPUS; g++)
            if (usage_shown(u, &figs[i], g)) {
                tenant_gpu_series(f, "kairos_tenant_memory_held_byte_seconds_total",
                                  figs[i].tenant, g, NULL, NULL);
                /* whole byte-seconds, every digit (%.9g would hide a month's growth) */
                fprintf(f, " %.0f\n", u->shown_mem_byte_s[g]);
            }
    }
    family(f, "kairos_tenant_usage_created_seconds", "gauge",
           "When the tenant's chargeback counters began, in seconds since the Unix epoch "
           "(a new value: they began again from 0).");
    for (size_t i = 0; i < l->n_tenants; i++)
        if (usage_of(b, l->tenants[i])->since > 0) {
            fputs("kairos_tenant_usage_created_seconds{tenant=\"", f);
            metrics_write_label_value(f, l->tenants[i]->name);
            fprintf(f, "\"} %.3f\n", usage_of(b, l->tenants[i])->since);
        }
}

/* The fault domains and the GPU faults attributed to tenants (faults.h). */
static void write_faults(FILE *f, const struct tenants *ts, const struct faults *fs)
{
    const struct ledger *l = &ts->ledger;
    family(f, "kairos_tenant_fault_domain_info", "gauge",
           "The fault domain (space mode) the tenant's processes share an MPS server in, "
           "always 1.");
    for (size_t i = 0; i < l->n_tenants; i++)
        if (tenants_settings_of(ts, l->tenants[i])->fault_domain[0]) {
            fputs("kairos_tenant_fault_domain_info{tenant=\"", f);
            metrics_write_label_value(f, l->tenants[i]->name);
            fputs("\",domain=\"", f);
            metrics_write_label_value(f,
                                      tenants_settings_of(ts, l->tenants[i])->fault_domain);
            fputs("\"} 1\n", f);
        }
    family(f, "kairos_tenant_sm_percent", "gauge",
           "The share of the GPU's SMs the tenant's MPS clients may run on in its fault "
           "domain, in % (its sms:, else 100).");
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct tenant_settings *s = tenants_settings_of(ts, l->tenants[i]);
        if (s->fault_domain[0]) {
            fputs("kairos_tenant_sm_percent{tenant=\"", f);
            metrics_write_label_value(f, l->tenants[i]->name);
            fprintf(f, "\"} %u\n", s->sms_pct ? s->sms_pct : 100u);
        }
    }
    family(f, "kairos_tenant_gpu_faults_total", "counter",
           "GPU faults (the driver's Xid reports) of the tenant: caused by one of its "
           "processes, or lost_work: another's in its fault domain ended its work.");
    for (size_t i = 0; fs && i < l->n_tenants; i++) {
        const struct fault_record *r = faults_find(fs, l->tenants[i]->name);
        for (int role = 0; r && role < 2; role++) {
            fputs("kairos_tenant_gpu_faults_total{tenant=\"", f);
            metrics_write_label_value(f, r->tenant);
            fprintf(f, "\",role=\"%s\"} %" PRIu64 "\n", role ? "lost_work" : "caused",
                    role ? r->lost : r->caused);
        }
    }
    family(f, "kairos_gpu_faults_total", "counter",
           "Xid reports of the driver kairosd read, and of them those of no tenant's process "
           "(outside: no process named, or one outside every tenant).");
    if (fs) {
        fprintf(f, "kairos_gpu_faults_total{of=\"all\"} %" PRIu64 "\n", fs->total);
        fprintf(f, "kairos_gpu_faults_total{of=\"outside\"} %" PRIu64 "\n", fs->outside);
    }
}

/* Space mode's strangers (mps_clients.h): found among a domain's MPS clients, ended;
 * no sample where the clients are not checked. */
static void write_strangers(FILE *f, const struct mps_clients *c)
{
    struct mps_clients_counts n = mps_clients_counts(c);
    family(f, "kairos_space_strangers_total", "counter",
           "Clients of a fault domain's MPS server that were no member of the domain: found "
           "(each process once), and ended (their MPS client, with terminate_client).");
    if (!c)
        return;
    fprintf(f, "kairos_space_strangers_total{event=\"found\"} %" PRIu64 "\n", n.found);
    fprintf(f, "kairos_space_strangers_total{event=\"ended\"} %" PRIu64 "\n", n.ended);
}

/* Space mode's recoveries (fault_recovery.h): the MPS clients a fault left without their
 * work that were ended; no sample where the clients are not checked. */
static void write_fault_recoveries(FILE *f, const struct mps_clients *c)
{
    family(f, "kairos_space_fault_clients_ended_total", "counter",
           "MPS clients that a fault of their fault domain's server left without their work, "
           "ended (terminate_client) because they had not exited within "
           "space: fault_recovery_ms.");
    if (c)
        fprintf(f, "kairos_space_fault_clients_ended_total %" PRIu64 "\n",
                mps_clients_counts(c).fault_ended);
}

static void write_tenant(FILE *f, const struct ledger *l, const struct kairos_ps_reply *figs)
{
    family(f, "kairos_tenant_members", "gauge",
           "Processes that are members of the tenant now (connected shims).");
    for (size_t i = 0; i < l->n_tenants; i++) {
        fputs("kairos_tenant_members{tenant=\"", f);
        metrics_write_label_value(f, l->tenants[i]->name);
        fprintf(f, "\"} %u\n", l->tenants[i]->n_members);
    }
    family(f, "kairos_tenant_memory_draining_bytes", "gauge",
           "Memory of departed members the GPU still shows, held back from the quota.");
    for (size_t i = 0; i < l->n_tenants; i++)
        for (unsigned g = 0; g < l->n_gpus && g < KAIROS_MAX_GPUS; g++)
            if (applies(WHEN_SHOWN, &figs[i], g) || l->tenants[i]->draining[g]) {
                tenant_gpu_series(f, "kairos_tenant_memory_draining_bytes", figs[i].tenant, g,
                                  NULL, NULL);
                fprintf(f, " %" PRIu64 "\n", l->tenants[i]->draining[g]);
            }
    family(f, "kairos_tenant_claims_beyond_grant_total", "counter",
           "Claims of the tenant's processes to hold more than kairosd granted them and the "
           "quota leaves (not counted: a lying shim, or memory taken past it).");
    for (size_t i = 0; i < l->n_tenants; i++)
        for (unsigned g = 0; g < l->n_gpus && g < KAIROS_MAX_GPUS; g++)
            if (applies(WHEN_SHOWN, &figs[i], g) || l->tenants[i]->lies[g]) {
                tenant_gpu_series(f, "kairos_tenant_claims_beyond_grant_total", figs[i].tenant,
                                  g, NULL, NULL);
                fprintf(f, " %" PRIu64 "\n", l->tenants[i]->lies[g]);
            }
    family(f, "kairos_tenant_grant_requests_total", "counter",
           "Requests for memory the tenant's processes sent kairosd (CREDIT requests and "
           "CHARGEs); allocations served from credit, or refused again by the shim, send none.");
    for (size_t i = 0; i < l->n_tenants; i++)
        for (unsigned g = 0; g < l->n_gpus && g < KAIROS_MAX_GPUS; g++)
            if (applies(WHEN_SHOWN, &figs[i], g) || l->tenants[i]->requests[g]) {
                tenant_gpu_series(f, "kairos_tenant_grant_requests_total", figs[i].tenant, g,
                                  NULL, NULL);
                fprintf(f, " %" PRIu64 "\n", l->tenants[i]->requests[g]);
            }
    write_infos(f, &(struct figures){figs, l->n_tenants, l->n_gpus});
}

/* Per-GPU figures: false when the GPU did not tell. */
static bool gpu_total(const struct gpu_status *s, struct sample *out)
{
    *out = whole(s->memory_total);
    return s->memory_valid;
}

static bool gpu_used(const struct gpu_status *s, struct sample *out)
{
    *out = whole(s->memory_used);
    return s->memory_valid;
}

static bool gpu_util(const struct gpu_status *s, struct sample *out)
{
    *out = real(s->util_percent / 100.0);
    return s->util_valid;
}

static bool gpu_mem_util(const struct gpu_status *s, struct sample *out)
{
    *out = real(s->memory_util_percent / 100.0);
    return s->util_valid;
}

static bool gpu_temperature(const struct gpu_status *s, struct sample *out)
{
    *out = whole(s->temperature_c);
    return s->temperature_valid;
}

static bool gpu_power(const struct gpu_status *s, struct sample *out)
{
    *out = real(s->power_mw / 1000.0);
    return s->power_valid;
}

static const struct gpu_metric {
    const char *name, *help;
    bool (*value)(const struct gpu_status *s, struct sample *out);
} gpu_metrics[] = {
    {"kairos_gpu_memory_total_bytes", "Device memory of the GPU, as the GPU backend reports it.",
     gpu_total},
    {"kairos_gpu_memory_used_bytes",
     "Device memory in use on the GPU, by every process, as the GPU backend reports it.",
     gpu_used},
    {"kairos_gpu_utilization_ratio",
     "Fraction of the last sample period in which a kernel ran on the GPU.", gpu_util},
    {"kairos_gpu_memory_utilization_ratio",
     "Fraction of the last sample period in which device memory was read or written.",
     gpu_mem_util},
    {"kairos_gpu_temperature_celsius", "The GPU's temperature.", gpu_temperature},
    {"kairos_gpu_power_watts", "The GPU's power draw.", gpu_power},
};

void metrics_read_gpus(const struct metrics_sources *src, struct metrics_gpus *out)
{
    const struct tenants *ts = src->ts;
    out->n = ts->n_gpus < KAIROS_MAX_GPUS ? ts->n_gpus : KAIROS_MAX_GPUS;
    for (unsigned g = 0; g < out->n; g++)
        out->ok[g] = src->gpu && src->gpu->ops && src->gpu->ops->status &&
                     src->gpu->ops->status(src->gpu, g, &out->st[g]) == 0;
}

static void write_gpus(FILE *f, const struct metrics_sources *src, const struct metrics_gpus *gs)
{
    const struct tenants *ts = src->ts;
    unsigned n = gs->n;
    family(f, "kairos_gpus", "gauge", "GPUs kairosd manages.");
    fprintf(f, "kairos_gpus %u\n", ts->n_gpus);
    family(f, "kairos_gpu_info", "gauge",
           "A GPU kairosd manages: its UUID and the backend that reports on it, always 1.");
    for (unsigned g = 0; g < n; g++) {
        fprintf(f, "kairos_gpu_info{gpu=\"%u\",uuid=\"", g);
        metrics_write_label_value(f, ts->gpu_uuid[g]);
        fputs("\",backend=\"", f);
        metrics_write_label_value(f, src->gpu && src->gpu->ops ? src->gpu->ops->name : "none");
        fputs("\"} 1\n", f);
    }
    for (size_t m = 0; m < sizeof gpu_metrics / sizeof *gpu_metrics; m++) {
        family(f, gpu_metrics[m].name, "gauge", gpu_metrics[m].help);
        struct sample v;
        for (unsigned g = 0; g < n; g++)
            if (gs->ok[g] && gpu_metrics[m].value(&gs->st[g], &v)) {
                fprintf(f, "%s{gpu=\"%u\"}", gpu_metrics[m].name, g);
                write_sample(f, v);
            }
    }
}

static void write_daemon(FILE *f, const struct metrics_sources *src)
{
    family(f, "kairos_build_info", "gauge", "kairosd's version (the label), always 1.");
    fputs("kairos_build_info{version=\"", f);
    metrics_write_label_value(f, src->version ? src->version : "unknown");
    fputs("\"} 1\n", f);
    if (src->driver && src->driver->known) {
        family(f, "kairos_driver_supported", "gauge",
               "1 when the NVIDIA driver (the label) is a branch Kairos reads; 0 when tenant "
               "processes are refused GPU use, or run with no quota (shim.conf "
               "unsupported_driver).");
        fputs("kairos_driver_supported{version=\"", f);
        metrics_write_label_value(f, src->driver->version.text);
        fprintf(f, "\"} %d\n", src->driver->supported ? 1 : 0);
    }
    family(f, "kairos_up", "gauge", "1 while kairosd serves tenants (it answers this scrape).");
    fputs("kairos_up 1\n", f);
    family(f, "kairos_start_time_seconds", "gauge",
           "When kairosd started, in seconds since the Unix epoch.");
    fprintf(f, "kairos_start_time_seconds %.3f\n", src->start_time);
    family(f, "kairos_connections", "gauge",
           "Connections open on kairosd's socket (tenant processes and kairos commands).");
    fprintf(f, "kairos_connections %u\n", server_connections(src->server));
    if (src->cfg) {
        family(f, "kairos_connections_limit", "gauge",
               "The most connections kairosd accepts (max_connections).");
        fprintf(f, "kairos_connections_limit %u\n", src->cfg->max_connections);
    }
    family(f, "kairos_tenants", "gauge", "Tenants kairosd knows (configured and created at run time).");
    fprintf(f, "kairos_tenants %zu\n", src->ts->ledger.n_tenants);
}

int metrics_render(const struct metrics_sources *src, char **text, size_t *len)
{
    struct metrics_gpus gs;
    metrics_read_gpus(src, &gs);
    return metrics_render_gpus(src, &gs, text, len);
}

int metrics_render_gpus(const struct metrics_sources *src, const struct metrics_gpus *gs,
                        char **text, size_t *len)
{
    const struct ledger *l = &src->ts->ledger;
    *text = NULL;
    *len = 0;
    struct kairos_ps_reply *figs = calloc(l->n_tenants ? l->n_tenants : 1, sizeof *figs);
    if (!figs)
        return -ENOMEM;
    for (size_t i = 0; i < l->n_tenants; i++)
        tenant_figures(src, l->tenants[i], &figs[i]);
    FILE *f = open_memstream(text, len);
    if (!f) {
        free(figs);
        return -ENOMEM;
    }
    write_daemon(f, src);
    write_gpus(f, src, gs);
    write_tenant(f, l, figs);
    write_usage(f, l, &src->ts->usage, figs);
    write_faults(f, src->ts, src->faults);
    write_strangers(f, src->mps_clients);
    write_fault_recoveries(f, src->mps_clients);
    const struct figures all = {figs, l->n_tenants, l->n_gpus};
    write_tenant_gpu(f, &all);
    write_reasons(f, &all);
    bool failed = ferror(f);
    if (fclose(f) || failed) {
        free(*text);
        *text = NULL;
        *len = 0;
        free(figs);
        return -ENOMEM;
    }
    free(figs);
    return 0;
}
