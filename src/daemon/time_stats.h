/* time_stats.h - what one tenant got of one GPU, period after period: the share of
 * the last period (100 ms), the rolling average over the last minute (600 periods),
 * and how many periods it spent with a pause window (a window shorter than the
 * period). kairosd's tick (timeshare.c) feeds it; kairos ps and kairos top show it.
 *
 * Pure: no I/O, no clock, no globals. Shares are in parts per million of a period.
 * Thread rules: a struct time_stats belongs to one thread.
 */
#ifndef KAIROS_DAEMON_TIME_STATS_H
#define KAIROS_DAEMON_TIME_STATS_H

#include <stdbool.h>
#include <stdint.h>

#define TIME_STATS_PPM 1000000u
#define TIME_STATS_MINUTE 600u /* periods in the rolling average (a minute of 100 ms) */

struct time_stats {
    uint32_t ring[TIME_STATS_MINUTE]; /* ppm of each recorded period, oldest overwritten */
    uint32_t next;                    /* slot of the next period */
    uint32_t filled;                  /* periods in the ring, <= TIME_STATS_MINUTE */
    uint64_t sum;                     /* of the filled slots */
    uint64_t periods;                 /* recorded since the reset */
    uint64_t pauses;                  /* of them, periods with a window shorter than the period */
};

/* Forgets everything (a tenant new to this slot). */
void time_stats_reset(struct time_stats *s);
/* One period of period_us for which the tenant was charged used_us (clamped to the
 * period; timeshare.c passes sched.c's charge: what it used, at least its window);
 * paused: it had a window shorter than the period. period_us 0 is ignored. */
void time_stats_period(struct time_stats *s, uint64_t used_us, uint32_t period_us, bool paused);
/* false until a first period was recorded: the shares below are then unknown, not 0. */
bool time_stats_measured(const struct time_stats *s);
/* The last period's share, and the mean over the last TIME_STATS_MINUTE periods (or
 * over those recorded so far), in ppm; 0 when none was recorded. */
uint32_t time_stats_last_ppm(const struct time_stats *s);
uint32_t time_stats_minute_ppm(const struct time_stats *s);
/* A fraction as ppm, clamped to [0, 1] and rounded (NaN: 0). */
uint32_t time_stats_ppm(double fraction);

#endif /* KAIROS_DAEMON_TIME_STATS_H */
