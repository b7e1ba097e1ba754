/* ps_view.c - fetching PS and decoding its figures for kairos ps and kairos top
 * (see ps_view.h). */
#include "cli/ps_view.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli/client.h"
#include "core/units.h"

int ps_fetch(const char *socket_path, struct ps_snapshot *s, char *err, size_t err_len)
{
    struct client cl;
    s->list = NULL;
    s->n = 0;
    s->n_gpus = 0;
    int rc = client_connect(&cl, socket_path, err, err_len);
    if (rc)
        return rc;
    rc = client_ps(&cl, &s->list, &s->n, &s->n_gpus, err, err_len);
    client_close(&cl);
    return rc;
}

void ps_snapshot_free(struct ps_snapshot *s)
{
    free(s->list);
    s->list = NULL;
    s->n = 0;
}

static double from_ppm(uint32_t ppm)
{
    return ppm / 1e6;
}

bool ps_compute_get(const struct kairos_ps_reply *r, unsigned g, struct ps_compute *out)
{
    if (g >= KAIROS_MAX_GPUS || !(r->compute_flags[g] & KAIROS_PS_COMPUTE_POLICY))
        return false;
    *out = (struct ps_compute){
        .share = from_ppm(r->share_ppm[g]),
        .limit = from_ppm(r->limit_ppm[g]),
        .priority = ps_prio_name(r->priority[g]),
        .target = from_ppm(r->target_ppm[g]),
        .measured = r->compute_flags[g] & KAIROS_PS_COMPUTE_MEASURED,
        .window = from_ppm(r->window_ppm[g]),
        .minute = from_ppm(r->minute_ppm[g]),
        .period_us = r->period_us[g],
        .duty_us = r->duty_us[g],
        .pauses = r->pauses[g],
    };
    return true;
}

bool ps_gpu_shown(const struct kairos_ps_reply *r, unsigned g)
{
    return r->quota[g] || r->held[g] || r->refusals[g] ||
           (r->compute_flags[g] & KAIROS_PS_COMPUTE_POLICY);
}

bool ps_tenant_has_compute(const struct kairos_ps_reply *r, unsigned n_gpus)
{
    for (unsigned g = 0; g < n_gpus && g < KAIROS_MAX_GPUS; g++)
        if (r->compute_flags[g] & KAIROS_PS_COMPUTE_POLICY)
            return true;
    return false;
}

bool ps_any_compute(const struct ps_snapshot *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (ps_tenant_has_compute(&s->list[i], s->n_gpus))
            return true;
    return false;
}

const char *ps_prio_name(uint32_t priority)
{
    switch (priority) {
    case KAIROS_PRIO_NORMAL:
        return "normal";
    case KAIROS_PRIO_LATENCY:
        return "latency";
    case KAIROS_PRIO_BATCH:
        return "batch";
    default:
        return "unknown";
    }
}

const char *ps_cell_pct(double fraction, bool valid, char *out, size_t cap)
{
    if (valid)
        snprintf(out, cap, "%.1f%%", fraction * 100);
    else
        snprintf(out, cap, "-");
    return out;
}

const char *ps_cell_limit(double limit, char *out, size_t cap)
{
    if (limit > 0)
        return ps_cell_pct(limit, true, out, cap);
    snprintf(out, cap, "none");
    return out;
}

const char *ps_cell_window(const struct ps_compute *c, char *out, size_t cap)
{
    if (!c->period_us)
        snprintf(out, cap, "-");
    else
        snprintf(out, cap, "%.1f/%.0fms", c->duty_us / 1000.0, c->period_us / 1000.0);
    return out;
}

const char *ps_cell_memory(const struct kairos_ps_reply *r, unsigned g, char *out, size_t cap)
{
    char held[32], quota[32];
    snprintf(out, cap, "%s/%s", units_format_size(r->held[g], held, sizeof held),
             units_format_size(r->quota[g], quota, sizeof quota));
    return out;
}
