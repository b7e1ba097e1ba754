/* time_stats.c - per tenant and GPU, the last period's share, the minute's rolling
 * average, the count of paused periods and what held the tenant back, per reason
 * (see time_stats.h). */
#include "daemon/time/time_stats.h"

#include <math.h>
#include <string.h>

void time_stats_reset(struct time_stats *s)
{
    memset(s, 0, sizeof *s);
}

static uint32_t ppm_of(uint64_t us, uint32_t period_us)
{
    if (us > period_us)
        us = period_us;
    return (uint32_t)((us * TIME_STATS_PPM + period_us / 2) / period_us);
}

/* Takes the ring's slot e out of the minute's sums (it is about to be overwritten). */
static void forget(struct time_stats *s, const struct time_stats_entry *e)
{
    s->sum -= e->used_ppm;
    s->hold_periods[e->hold]--;
    s->held_sum[e->hold] -= e->held_ppm;
}

void time_stats_period(struct time_stats *s, uint64_t used_us, uint32_t period_us,
                       enum sched_hold hold, uint32_t held_us)
{
    if (!period_us)
        return;
    unsigned why = (unsigned)hold < SCHED_HOLD_REASONS ? (unsigned)hold : SCHED_HOLD_NONE;
    if (held_us > period_us)
        held_us = period_us;
    struct time_stats_entry *e = &s->ring[s->next];
    if (s->filled == TIME_STATS_MINUTE)
        forget(s, e);
    else
        s->filled++;
    *e = (struct time_stats_entry){.used_ppm = ppm_of(used_us, period_us),
                                   .held_ppm = ppm_of(held_us, period_us),
                                   .hold = why};
    s->sum += e->used_ppm;
    s->hold_periods[why]++;
    s->held_sum[why] += e->held_ppm;
    s->hold_periods_total[why]++;
    s->held_us_total[why] += held_us;
    s->next = (s->next + 1) % TIME_STATS_MINUTE;
    s->periods++;
    if (held_us)
        s->pauses++;
}

bool time_stats_measured(const struct time_stats *s)
{
    return s->filled > 0;
}

static const struct time_stats_entry *last(const struct time_stats *s)
{
    return &s->ring[(s->next + TIME_STATS_MINUTE - 1) % TIME_STATS_MINUTE];
}

uint32_t time_stats_last_ppm(const struct time_stats *s)
{
    return s->filled ? last(s)->used_ppm : 0;
}

/* The mean of a sum over the filled slots, rounded. */
static uint32_t mean(const struct time_stats *s, uint64_t sum)
{
    if (!s->filled)
        return 0;
    return (uint32_t)((sum + s->filled / 2) / s->filled);
}

uint32_t time_stats_minute_ppm(const struct time_stats *s)
{
    return mean(s, s->sum);
}

uint32_t time_stats_hold_periods_ppm(const struct time_stats *s, enum sched_hold hold)
{
    if ((unsigned)hold >= SCHED_HOLD_REASONS)
        return 0;
    return mean(s, (uint64_t)s->hold_periods[hold] * TIME_STATS_PPM);
}

uint32_t time_stats_held_ppm(const struct time_stats *s, enum sched_hold hold)
{
    if ((unsigned)hold >= SCHED_HOLD_REASONS)
        return 0;
    return mean(s, s->held_sum[hold]);
}

enum sched_hold time_stats_last_hold(const struct time_stats *s)
{
    return s->filled ? (enum sched_hold)last(s)->hold : SCHED_HOLD_NONE;
}

uint32_t time_stats_ppm(double fraction)
{
    if (!(fraction > 0)) /* also NaN */
        return 0;
    if (fraction >= 1)
        return TIME_STATS_PPM;
    return (uint32_t)lround(fraction * TIME_STATS_PPM);
}
