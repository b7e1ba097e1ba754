/* time_stats.h - what one tenant got of one GPU, period after period: the share of
 * the last period (100 ms), the rolling average over the last minute (600 periods),
 * how many periods it spent with a pause window (a window shorter than the period),
 * and what held it back from running as it would natively (sched.h's enum
 * sched_hold: another tenant's share, its limit, the yield beside a latency
 * tenant): per reason, the periods it held and the time its window kept the tenant
 * paused, over the last minute and since the reset (the metrics' counters).
 * kairosd's tick (timeshare.c) feeds it; kairos ps, kairos top and the metrics
 * show it.
 *
 * Pure: no I/O, no clock, no globals. Shares are in parts per million of a period.
 * Thread rules: a struct time_stats belongs to one thread.
 */
#ifndef KAIROS_DAEMON_TIME_STATS_H
#define KAIROS_DAEMON_TIME_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/time/sched.h"

#define TIME_STATS_PPM 1000000u
#define TIME_STATS_MINUTE 600u /* periods in the rolling average (a minute of 100 ms) */

/* One recorded period. */
struct time_stats_entry {
    uint32_t used_ppm;      /* what it was charged */
    uint32_t held_ppm : 24; /* how long its window kept it paused (<= TIME_STATS_PPM) */
    uint32_t hold : 8;      /* enum sched_hold: why it was held back */
};

struct time_stats {
    struct time_stats_entry ring[TIME_STATS_MINUTE]; /* oldest overwritten */
    uint32_t next;                    /* slot of the next period */
    uint32_t filled;                  /* periods in the ring, <= TIME_STATS_MINUTE */
    uint64_t sum;                     /* used_ppm of the filled slots */
    uint64_t periods;                 /* recorded since the reset */
    uint64_t pauses;                  /* of them, periods with a window shorter than the period */
    /* per enum sched_hold: in the ring, the periods of that hold and the sum of their
     * held_ppm; since the reset, the same periods and the time paused in us */
    uint32_t hold_periods[SCHED_HOLD_REASONS];
    uint64_t held_sum[SCHED_HOLD_REASONS];
    uint64_t hold_periods_total[SCHED_HOLD_REASONS];
    uint64_t held_us_total[SCHED_HOLD_REASONS];
};

/* Forgets everything (a tenant new to this slot). */
void time_stats_reset(struct time_stats *s);
/* One period of period_us for which the tenant was charged used_us (clamped to the
 * period; timeshare.c passes sched.c's charge: what it used, at least its window),
 * held back by hold (SCHED_HOLD_NONE: not; a value beyond the enum counts as none)
 * with held_us of the period paused by its window (clamped to the period; 0 when a
 * hold works by timeslices alone; above 0 the period counts as a pause). The
 * decision in force during the period: sched_tenant's hold and held_us before the
 * tick. period_us 0 is ignored. */
void time_stats_period(struct time_stats *s, uint64_t used_us, uint32_t period_us,
                       enum sched_hold hold, uint32_t held_us);
/* false until a first period was recorded: the shares below are then unknown, not 0. */
bool time_stats_measured(const struct time_stats *s);
/* The last period's share, and the mean over the last TIME_STATS_MINUTE periods (or
 * over those recorded so far), in ppm; 0 when none was recorded. */
uint32_t time_stats_last_ppm(const struct time_stats *s);
uint32_t time_stats_minute_ppm(const struct time_stats *s);
/* Over the same minute: the part of its periods that hold applied to (for
 * SCHED_HOLD_NONE, those in which nothing held it back), and the part of its time
 * that hold kept it paused, in ppm; 0 when none was recorded. */
uint32_t time_stats_hold_periods_ppm(const struct time_stats *s, enum sched_hold hold);
uint32_t time_stats_held_ppm(const struct time_stats *s, enum sched_hold hold);
/* What held it back in the last period recorded (SCHED_HOLD_NONE before any). */
enum sched_hold time_stats_last_hold(const struct time_stats *s);
/* A fraction as ppm, clamped to [0, 1] and rounded (NaN: 0). */
uint32_t time_stats_ppm(double fraction);

#endif /* KAIROS_DAEMON_TIME_STATS_H */
