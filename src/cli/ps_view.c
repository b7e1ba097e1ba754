/* ps_view.c - fetching PS and decoding its figures for kairos ps and kairos top
 * (see ps_view.h). */
#include "cli/ps_view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/client.h"
#include "core/units.h"

/* One connection, one PS with flags. */
static int fetch_once(const char *socket_path, uint32_t flags, struct ps_snapshot *s, char *err,
                      size_t err_len)
{
    struct client cl;
    int rc = client_connect(&cl, socket_path, err, err_len);
    if (rc)
        return rc;
    rc = client_ps(&cl, flags, &s->list, &s->n, &s->n_gpus, err, err_len);
    client_close(&cl);
    return rc;
}

int ps_fetch(const char *socket_path, bool holds, struct ps_snapshot *s, char *err,
             size_t err_len)
{
    s->list = NULL;
    s->n = 0;
    s->n_gpus = 0;
    s->holds = holds;
    s->faults = holds;
    int rc = fetch_once(socket_path, holds ? KAIROS_PS_HOLDS | KAIROS_PS_FAULTS : 0, s, err,
                        err_len);
    if (!rc)
        return 0;
    s->faults = false;
    if (rc == -ENOPROTOOPT) /* a kairosd of before the faults: it refused the flag */
        rc = fetch_once(socket_path, KAIROS_PS_HOLDS, s, err, err_len);
    if (rc != -ENOTSUP)
        return rc;
    s->holds = false; /* a kairosd of before the holds: it closed that connection */
    return fetch_once(socket_path, 0, s, err, err_len);
}

bool ps_any_space(const struct ps_snapshot *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->list[i].fault_domain[0] || s->list[i].faults_caused || s->list[i].faults_lost)
            return true;
    return false;
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

static struct ps_hold hold_get(const struct kairos_ps_reply *r, unsigned g)
{
    struct ps_hold h = {.known = r->compute_flags[g] & KAIROS_PS_COMPUTE_HOLDS};
    if (!h.known)
        return h;
    h.measured = r->compute_flags[g] & KAIROS_PS_COMPUTE_MEASURED;
    h.now = r->hold[g];
    for (unsigned k = 0; k < KAIROS_HOLD_REASONS; k++) {
        h.periods[k] = from_ppm(r->hold_period_ppm[g][k]);
        h.paused[k] = from_ppm(r->hold_time_ppm[g][k]);
        h.periods_total[k] = r->hold_periods[g][k];
        h.paused_seconds[k] = r->hold_time_us[g][k] / 1e6;
    }
    return h;
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
        .hold = hold_get(r, g),
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

const char *ps_hold_name(unsigned reason)
{
    static const char *const names[KAIROS_HOLD_REASONS] = {"none", "share", "limit", "yield"};
    return reason < KAIROS_HOLD_REASONS ? names[reason] : "unknown";
}

double ps_hold_paused(const struct ps_hold *h)
{
    double sum = 0;
    for (unsigned k = KAIROS_HOLD_NONE + 1; k < KAIROS_HOLD_REASONS; k++)
        sum += h->paused[k];
    return sum < 1 ? sum : 1;
}

unsigned ps_hold_why(const struct ps_hold *h)
{
    unsigned most = KAIROS_HOLD_NONE;
    for (unsigned k = KAIROS_HOLD_NONE + 1; k < KAIROS_HOLD_REASONS; k++) {
        if (!(h->periods[k] > 0))
            continue;
        if (most == KAIROS_HOLD_NONE || h->paused[k] > h->paused[most] ||
            (h->paused[k] == h->paused[most] && h->periods[k] > h->periods[most]))
            most = k;
    }
    return most;
}

bool ps_hold_slices(const struct ps_hold *h)
{
    return ps_hold_why(h) != KAIROS_HOLD_NONE && ps_hold_paused(h) == 0;
}

const char *ps_cell_hold(const struct ps_hold *h, char *out, size_t cap)
{
    if (h->known && h->measured && ps_hold_slices(h))
        snprintf(out, cap, "slices");
    else
        ps_cell_pct(ps_hold_paused(h), h->known && h->measured, out, cap);
    return out;
}

const char *ps_cell_why(const struct ps_hold *h, char *out, size_t cap)
{
    snprintf(out, cap, "%s", h->known && h->measured ? ps_hold_name(ps_hold_why(h)) : "-");
    return out;
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
