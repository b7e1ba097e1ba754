/* time_stats.c - per tenant and GPU, the last period's share, the minute's rolling
 * average and the count of paused periods (see time_stats.h). */
#include "daemon/time_stats.h"

#include <math.h>
#include <string.h>

void time_stats_reset(struct time_stats *s)
{
    memset(s, 0, sizeof *s);
}

void time_stats_period(struct time_stats *s, uint64_t used_us, uint32_t period_us, bool paused)
{
    if (!period_us)
        return;
    if (used_us > period_us)
        used_us = period_us;
    uint32_t ppm = (uint32_t)((used_us * TIME_STATS_PPM + period_us / 2) / period_us);
    if (s->filled == TIME_STATS_MINUTE)
        s->sum -= s->ring[s->next];
    else
        s->filled++;
    s->ring[s->next] = ppm;
    s->sum += ppm;
    s->next = (s->next + 1) % TIME_STATS_MINUTE;
    s->periods++;
    if (paused)
        s->pauses++;
}

bool time_stats_measured(const struct time_stats *s)
{
    return s->filled > 0;
}

uint32_t time_stats_last_ppm(const struct time_stats *s)
{
    if (!s->filled)
        return 0;
    return s->ring[(s->next + TIME_STATS_MINUTE - 1) % TIME_STATS_MINUTE];
}

uint32_t time_stats_minute_ppm(const struct time_stats *s)
{
    if (!s->filled)
        return 0;
    return (uint32_t)((s->sum + s->filled / 2) / s->filled);
}

uint32_t time_stats_ppm(double fraction)
{
    if (!(fraction > 0)) /* also NaN */
        return 0;
    if (fraction >= 1)
        return TIME_STATS_PPM;
    return (uint32_t)lround(fraction * TIME_STATS_PPM);
}
