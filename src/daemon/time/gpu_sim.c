/* gpu_sim.c - the simulated GPU (see gpu_sim.h): synthetic tenants' demand, the
 * pause gate each tenant's windows drive, and the hardware round robin. */
#include "daemon/time/gpu_sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int gpu_sim_init(struct gpu_sim *s, const struct gpu_sim_params *p,
                 const struct gpu_sim_tenant_spec *specs, size_t n)
{
    if (n > GPU_SIM_MAX_TENANTS)
        return -EINVAL;
    memset(s, 0, sizeof *s);
    if (p)
        s->p = *p;
    if (!s->p.step_us)
        s->p.step_us = 10;
    if (!s->p.ctx_switch_us)
        s->p.ctx_switch_us = 120;
    if (!s->p.idle_switch_us)
        s->p.idle_switch_us = 20;
    if (!s->p.disable_us)
        s->p.disable_us = 720;
    if (!s->p.enable_us)
        s->p.enable_us = 400;
    if (!s->p.preempt_us)
        s->p.preempt_us = 600;
    if (!s->p.default_ts_us)
        s->p.default_ts_us = 2048;
    if (!s->p.sense_us)
        s->p.sense_us = 1000;
    s->n = n;
    s->cur = -1;
    for (size_t i = 0; i < n; i++) {
        s->t[i].spec = specs[i];
        s->t[i].gate_open = true;
        s->t[i].sense_rng = 0x9E3779B97F4A7C15ull * (i + 1);
    }
    return 0;
}

void gpu_sim_apply(struct gpu_sim *s, size_t i, const struct sched_decision *d)
{
    if (i < s->n)
        s->t[i].dec = *d;
}

/* As the shim's timectl_window_paused: a window may wrap past the period's end
 * (a phase rotated to a returning tenant, sched_wake). */
static bool window_allows(const struct gpu_sim_tenant *t, uint64_t now)
{
    const struct sched_decision *d = &t->dec;
    if (!d->period_us || d->duty_us >= d->period_us)
        return true;
    uint64_t pos = (now % d->period_us + d->period_us - d->phase_us % d->period_us) %
                   d->period_us;
    return pos < d->duty_us;
}

/* The pause gate lags the window by the disable/enable costs; pausing a tenant
 * with work queued costs the GPU preempt_us (calibrated on the H200). */
static void step_gate(struct gpu_sim *s, struct gpu_sim_tenant *t, bool has_work)
{
    bool want_open = window_allows(t, s->now_us);
    if (want_open == t->gate_open) {
        t->gate_timer = 0;
        return;
    }
    if (!t->gate_timer) {
        t->gate_timer = want_open ? s->p.enable_us : s->p.disable_us;
        return;
    }
    if (t->gate_timer <= s->p.step_us) {
        t->gate_timer = 0;
        t->gate_open = want_open;
        if (!want_open && has_work)
            s->switch_left += s->p.preempt_us;
    } else {
        t->gate_timer -= s->p.step_us;
    }
}

/* Advances the tenant's own demand; true when it has work queued. */
static bool step_demand(struct gpu_sim *s, struct gpu_sim_tenant *t)
{
    const struct gpu_sim_tenant_spec *sp = &t->spec;
    uint64_t now = s->now_us;
    t->present = now >= sp->arrive_us && (!sp->leave_us || now < sp->leave_us);
    if (!t->present)
        return false;
    switch (sp->load) {
    case GPU_SIM_DEEP:
        return true;
    case GPU_SIM_SHALLOW:
        if (t->gap_left) {
            t->gap_left = t->gap_left > s->p.step_us ? t->gap_left - s->p.step_us : 0;
            return false;
        }
        if (!t->work_left)
            t->work_left = sp->work_us ? sp->work_us : s->p.step_us;
        return true;
    case GPU_SIM_BURSTY: {
        uint64_t cycle = (uint64_t)sp->work_us + sp->gap_us;
        return !cycle || (now - sp->arrive_us) % cycle < sp->work_us;
    }
    case GPU_SIM_REQUESTS:
        if (!t->next_req_us)
            t->next_req_us = now + 1;
        if (now + 1 >= t->next_req_us) {
            if (t->req_n < 64) {
                t->req_arrival[(t->req_head + t->req_n) % 64] = now;
                if (!t->req_n)
                    t->work_left = sp->work_us;
                t->req_n++;
            }
            t->next_req_us += sp->gap_us ? sp->gap_us : 1000;
        }
        return t->req_n > 0;
    }
    return false;
}

static void run_tenant(struct gpu_sim *s, struct gpu_sim_tenant *t)
{
    uint64_t st = s->p.step_us;
    t->used_us += st;
    s->busy_us += st;
    if (t->spec.load == GPU_SIM_SHALLOW) {
        t->work_left = t->work_left > st ? t->work_left - st : 0;
        if (!t->work_left)
            t->gap_left = t->spec.gap_us;
    } else if (t->spec.load == GPU_SIM_REQUESTS && t->req_n) {
        t->work_left = t->work_left > st ? t->work_left - st : 0;
        if (!t->work_left) {
            uint64_t lat = s->now_us + st - t->req_arrival[t->req_head];
            if (t->n_lat < GPU_SIM_LAT_MAX)
                t->lat_us[t->n_lat++] = lat;
            t->req_head = (t->req_head + 1) % 64;
            if (--t->req_n)
                t->work_left = t->spec.work_us;
        }
    }
}

static uint64_t slice_of(const struct gpu_sim *s, int i)
{
    uint64_t ts = s->t[i].dec.timeslice_us;
    return ts ? ts : s->p.default_ts_us;
}

/* The hardware round robin for one step over the runnable set (work: who has work
 * queued, paused or not). A switch away from a group that ran out of work costs
 * idle_switch_us, one that preempts a group with work (its slice over, or paused)
 * ctx_switch_us. */
static void step_hw(struct gpu_sim *s, const bool *runnable, const bool *work)
{
    if (s->switch_left) {
        s->switch_left = s->switch_left > s->p.step_us ? s->switch_left - s->p.step_us : 0;
        s->switch_us += s->p.step_us;
        return;
    }
    int cur = s->cur;
    if (cur >= 0 && runnable[cur] && s->slice_left > 0) {
        run_tenant(s, &s->t[cur]);
        s->slice_left = s->slice_left > s->p.step_us ? s->slice_left - s->p.step_us : 0;
        return;
    }
    int n = (int)s->n, next = -1;
    for (int k = 1; k <= n; k++) {
        int j = ((cur < 0 ? -1 : cur) + k + n) % n;
        if (runnable[j]) {
            next = j;
            break;
        }
    }
    if (next < 0)
        return; /* idle */
    s->slice_left = slice_of(s, next);
    if (next != cur) {
        s->switch_left = cur >= 0 && !work[cur] ? s->p.idle_switch_us : s->p.ctx_switch_us;
        s->cur = next;
        if (s->switch_left)
            return;
    }
    run_tenant(s, &s->t[cur]);
    s->slice_left -= s->slice_left > s->p.step_us ? s->p.step_us : s->slice_left;
}

/* What the shim's USERD sample sees of tenant t: work queued and not fetched or
 * not launched (waiting or paused, or more queued behind what runs: on the H200,
 * with the pushbuffer words, every kernel of a queued batch but the last), or
 * GPGet moved since the last sample (a unit started running: the host fetched its
 * entry; a unit that runs on with nothing behind it is not seen again). */
static bool sensed_pending(const struct gpu_sim_tenant *t, bool work, bool ran)
{
    if (t->fetched_since_sense || (work && !ran))
        return true;
    return work && (t->spec.load == GPU_SIM_DEEP || t->spec.load == GPU_SIM_BURSTY ||
                    (t->spec.load == GPU_SIM_REQUESTS && t->req_n > 1));
}

/* Whether a step in which tenant t ran moves its channels' Get words: a unit
 * starts (the host fetches it), or the short kernels of a deep or bursty queue
 * go by (each start moves them). */
static bool moves(const struct gpu_sim_tenant *t, bool ran)
{
    return ran && (!t->ran_last_step || t->spec.load == GPU_SIM_DEEP ||
                   t->spec.load == GPU_SIM_BURSTY);
}

/* After a sample: a shim whose last report was busy and that has seen nothing
 * queued for KAIROS_IDLE_EARLY_MS says so at once (KAIROS_RUNNABLE_IDLE: an event,
 * its interval goes on; tc_sense.c). */
static void early_idle_step(struct gpu_sim *s, struct gpu_sim_tenant *t)
{
    if (!t->early_armed || !t->quiet_since_us ||
        s->now_us + 1 - t->quiet_since_us < KAIROS_IDLE_EARLY_MS * 1000ull)
        return;
    t->idle_early = true;
    t->early_armed = false;
    t->wake_armed = true;
}

/* One step of tenant t's shim: a sample when it is due, the next one at a
 * pseudo-random instant of the next interval. */
static void sense_step(struct gpu_sim *s, struct gpu_sim_tenant *t, bool work, bool ran)
{
    t->moved_since_sense |= moves(t, ran);
    t->fetched_since_sense |= ran && !t->ran_last_step;
    t->ran_last_step = ran;
    if (s->now_us < t->next_sense_us)
        return;
    bool pending = sensed_pending(t, work, ran);
    if (t->moved_since_sense && t->progress_before) /* a run counts from its second */
        t->rep_progress_us += s->p.sense_us;
    t->progress_before = t->moved_since_sense;
    t->moved_since_sense = false;
    if (pending) {
        t->sensed_us += s->p.sense_us;
        t->rep_sensed_us += s->p.sense_us;
    }
    if (pending && t->wake_armed) { /* back from an idle report: tell kairosd at once */
        t->wake = true;
        t->wake_armed = false;
    }
    if (pending)
        t->quiet_since_us = 0;
    else if (!t->quiet_since_us)
        t->quiet_since_us = s->now_us + 1; /* + 1: 0 means "not quiet" */
    early_idle_step(s, t);
    t->fetched_since_sense = false;
    t->sense_rng ^= t->sense_rng << 13;
    t->sense_rng ^= t->sense_rng >> 7;
    t->sense_rng ^= t->sense_rng << 17;
    uint64_t interval = s->now_us / s->p.sense_us + 1;
    t->next_sense_us = interval * s->p.sense_us + t->sense_rng % s->p.sense_us;
}

/* The end of tenant t's step at end_us: its shim reports when its period is over
 * (at its own instant in the period, report_phase_us). */
static void report_step(struct gpu_sim *s, size_t i, uint64_t end_us)
{
    struct gpu_sim_tenant *t = &s->t[i];
    uint64_t P = SCHED_PERIOD_US, at = (uint64_t)s->p.report_phase_us * (i + 1) % P;
    if (end_us % P != at || end_us <= t->rep_since_us)
        return;
    uint64_t interval = end_us - t->rep_since_us;
    t->report = (struct gpu_sim_report){true, interval, t->rep_sensed_us, t->rep_open_us,
                                        t->rep_progress_us};
    bool idle = (double)t->rep_sensed_us < 0.02 * (double)interval;
    idle |= t->wake_armed && t->quiet_since_us; /* still quiet since an early idle report */
    t->wake_armed = idle;
    t->early_armed = !idle;
    t->reported = true;
    t->rep_since_us = end_us;
    t->rep_sensed_us = t->rep_open_us = t->rep_progress_us = 0;
}

/* NVML's sample at this step, if one is due: it names the tenant that ran in
 * the step (none while the GPU switches or idles). */
static void nvml_step(struct gpu_sim *s, const uint64_t used_before[])
{
    if (!s->p.nvml_sample_us || s->now_us % s->p.nvml_sample_us >= s->p.step_us)
        return;
    for (size_t i = 0; i < s->n; i++)
        if (s->t[i].used_us > used_before[i])
            s->t[i].nvml_hits++;
}

uint32_t gpu_sim_nvml_hits(const struct gpu_sim *s, size_t i)
{
    return i < s->n ? s->t[i].nvml_hits : 0;
}

bool gpu_sim_take_idle(struct gpu_sim *s, size_t i)
{
    bool idle = i < s->n && s->t[i].idle_early;
    if (idle)
        s->t[i].idle_early = false;
    return idle;
}

bool gpu_sim_take_wake(struct gpu_sim *s, size_t i)
{
    bool w = i < s->n && s->t[i].wake;
    if (w)
        s->t[i].wake = false;
    return w;
}

bool gpu_sim_take_report(struct gpu_sim *s, size_t i)
{
    bool rep = i < s->n && s->t[i].reported;
    if (rep)
        s->t[i].reported = false;
    return rep;
}

uint64_t gpu_sim_run(struct gpu_sim *s, uint64_t len_us, struct sched_usage *use)
{
    bool runnable[GPU_SIM_MAX_TENANTS];
    s->busy_us = s->switch_us = 0;
    bool work[GPU_SIM_MAX_TENANTS];
    uint64_t used_before[GPU_SIM_MAX_TENANTS];
    for (size_t i = 0; i < s->n; i++) {
        s->t[i].used_us = s->t[i].runnable_us = s->t[i].sensed_us = s->t[i].open_us = 0;
        s->t[i].nvml_hits = 0;
    }
    for (uint64_t end = s->now_us + len_us; s->now_us < end; s->now_us += s->p.step_us) {
        for (size_t i = 0; i < s->n; i++) {
            struct gpu_sim_tenant *t = &s->t[i];
            work[i] = step_demand(s, t);
            step_gate(s, t, work[i]);
            if (work[i])
                t->runnable_us += s->p.step_us;
            runnable[i] = work[i] && t->gate_open;
            used_before[i] = t->used_us;
            if (t->present && t->gate_open) {
                t->open_us += s->p.step_us;
                t->rep_open_us += s->p.step_us;
            }
        }
        step_hw(s, runnable, work);
        nvml_step(s, used_before);
        for (size_t i = 0; i < s->n; i++) { /* the shims' samples and reports */
            sense_step(s, &s->t[i], work[i], s->t[i].used_us > used_before[i]);
            report_step(s, i, s->now_us + s->p.step_us);
        }
    }
    for (size_t i = 0; i < s->n && use; i++) {
        use[i].used_us = s->t[i].used_us;
        use[i].runnable_us = s->t[i].runnable_us;
    }
    return s->busy_us;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint64_t gpu_sim_latency(const struct gpu_sim *s, size_t i, double q)
{
    if (i >= s->n || !s->t[i].n_lat)
        return 0;
    size_t n = s->t[i].n_lat;
    uint64_t *v = malloc(n * sizeof *v);
    if (!v)
        return 0;
    memcpy(v, s->t[i].lat_us, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_u64);
    size_t k = (size_t)(q * (double)(n - 1) + 0.5);
    uint64_t r = v[k < n ? k : n - 1];
    free(v);
    return r;
}
