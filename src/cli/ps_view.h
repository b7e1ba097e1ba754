/* ps_view.h - kairosd's PS answer as kairos ps and kairos top show it: one fetch
 * (connect, PS, close; again without the hold figures for a kairosd of before),
 * the compute figures of a tenant on a GPU decoded from the reply with their valid
 * bits (what held it back included), and the cells both commands print, so that
 * the two never disagree on what a figure means.
 *
 * Thread rules: no state.
 */
#ifndef KAIROS_CLI_PS_VIEW_H
#define KAIROS_CLI_PS_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kairos/proto.h"

/* Every tenant kairosd reported (empty names dropped) and the node's GPU count. */
struct ps_snapshot {
    struct kairos_ps_reply *list;
    size_t n;
    unsigned n_gpus;
    bool holds; /* asked for the hold figures, and kairosd knows them */
    bool faults; /* the same for the fault domains and faults (KAIROS_PS_FAULTS) */
};

/* Connects to socket_path, asks PS, closes. holds: with the hold figures, the fault
 * domains and the faults (KAIROS_PS_HOLDS | KAIROS_PS_FAULTS); a kairosd of before
 * refuses that and is asked again without the faults, then without the holds
 * (s->faults, s->holds false then; a caller that asks again need not ask it for
 * them). 0 or -errno with err set. */
int ps_fetch(const char *socket_path, bool holds, struct ps_snapshot *s, char *err,
             size_t err_len);
void ps_snapshot_free(struct ps_snapshot *s);
/* Whether a tenant of s has a fault domain or a GPU fault. */
bool ps_any_space(const struct ps_snapshot *s);

/* What held a tenant back on one GPU from running as it would natively, by reason
 * (KAIROS_HOLD_*, the index of each array). */
struct ps_hold {
    bool known;           /* kairosd sent them (a kairosd of before does not) */
    bool measured;        /* the minute's figures are known */
    unsigned now;         /* the reason in force now */
    double periods[KAIROS_HOLD_REASONS]; /* part of the last minute's periods it held
                                          * ([KAIROS_HOLD_NONE]: nothing did) */
    double paused[KAIROS_HOLD_REASONS];  /* part of the last minute's time it paused */
    uint64_t periods_total[KAIROS_HOLD_REASONS]; /* since the tenant got its policy */
    double paused_seconds[KAIROS_HOLD_REASONS];  /* the same */
};

/* A tenant's compute figures on one GPU; fractions of the GPU's time in [0, 1]. */
struct ps_compute {
    double share;
    double limit;         /* 0: none */
    const char *priority; /* "normal", "latency", "batch" */
    double target;        /* what the scheduler entitles it to now */
    bool measured;        /* window and minute are known */
    double window;        /* used over the last period (100 ms) */
    double minute;        /* used over the last minute (600 periods) */
    uint32_t period_us;   /* 0: never paused; else it may run duty_us of period_us */
    uint32_t duty_us;
    uint64_t pauses;      /* periods spent with a window shorter than the period */
    struct ps_hold hold;
};

/* false when the tenant has no compute policy on GPU g. */
bool ps_compute_get(const struct kairos_ps_reply *r, unsigned g, struct ps_compute *out);
/* The tenant has memory (quota, holdings, refusals) or a compute policy on GPU g. */
bool ps_gpu_shown(const struct kairos_ps_reply *r, unsigned g);
/* The tenant has a compute policy on some GPU of [0, n_gpus). */
bool ps_tenant_has_compute(const struct kairos_ps_reply *r, unsigned n_gpus);
/* Some tenant of s has a compute policy on some GPU. */
bool ps_any_compute(const struct ps_snapshot *s);
const char *ps_prio_name(uint32_t priority);
/* "none", "share", "limit", "yield" (KAIROS_HOLD_*), or "unknown". */
const char *ps_hold_name(unsigned reason);
/* The part of the last minute's time the tenant was paused, all reasons together. */
double ps_hold_paused(const struct ps_hold *h);
/* Held back in some of the last minute's periods, but by timeslices alone (paused
 * in none of them). */
bool ps_hold_slices(const struct ps_hold *h);
/* The reason that held it back most over the last minute: the longest paused,
 * else the one of the most periods held; KAIROS_HOLD_NONE when nothing did. */
unsigned ps_hold_why(const struct ps_hold *h);

/* Cells: "30.0%", or "-" when !valid. */
const char *ps_cell_pct(double fraction, bool valid, char *out, size_t cap);
/* "30.0%", or "none" for a limit of 0. */
const char *ps_cell_limit(double limit, char *out, size_t cap);
/* The pause window "29.3/100ms", or "-" when never paused. */
const char *ps_cell_window(const struct ps_compute *c, char *out, size_t cap);
/* HOLD: the part of the last minute it was paused, "30.0%"; "slices" when held
 * back by timeslices alone; "-" when unknown. */
const char *ps_cell_hold(const struct ps_hold *h, char *out, size_t cap);
/* WHY: ps_hold_why's name, or "-" when unknown. */
const char *ps_cell_why(const struct ps_hold *h, char *out, size_t cap);
/* Memory "3.00 GiB/8.00 GiB" (held/quota). */
const char *ps_cell_memory(const struct kairos_ps_reply *r, unsigned g, char *out, size_t cap);

#endif /* KAIROS_CLI_PS_VIEW_H */
