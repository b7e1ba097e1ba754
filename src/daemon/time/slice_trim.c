/* slice_trim.c - the trim of a tenant's timeslice under the shares' slices: an
 * integral controller on the smoothed gap between the tenant's part of the targets
 * and its part of what ran (slice_trim.h says why the slices need one).
 */
#include "daemon/time/slice_trim.h"

#include <math.h>

#define ERR_GAIN 0.1   /* the weight of the last period in the smoothed gap: the shims'
                        * progress is off by up to a sample per slice (1 ms), and a
                        * faster filter passed that noise on to the slices (the
                        * simulator's 40/30/20/10 under NVML: 4.1 pp at p95 per window
                        * against 3.1 without trims, at ERR_GAIN 0.3) */
#define TRIM_GAIN 0.3  /* a gap of 10 % of the tenant's part moves its trim 3 % a period */
#define DEADBAND 0.005 /* a smoothed gap within half a point moves nothing */
#define VAR_GAIN 0.05  /* the weight of the last period in the gap's variance */
#define NOISE_SIGMAS 4.0 /* nor one within this many of its own standard deviations: an
                          * integral controller on noise is a random walk. On an H100,
                          * eight launch-bound inference processes at equal shares read
                          * 1.8-3.2 points (sd) off their 12.5 % from period to period
                          * with no lasting gap, and the trims wandered over 1.1-2.6 ms
                          * within 9 s (bench/results/2026-12-06-harm-3). Replayed, those
                          * 89 periods left every trim at 1 at 4 sd (0.76-1.16 at 3,
                          * 0.50-2.00 with no such bound); white noise of 2.5 points
                          * over 3000 periods, at 1 (0.66-1.55 at 3) */
#define SLOW_GAIN 0.02 /* the weight of the last period in the long mean of the gap: a
                        * lasting gap smaller than the fast gap's noise bound still
                        * moves the trim once this mean, whose noise is sqrt(5) times
                        * smaller, clears the same number of its own sds. On an H100
                        * four deep streams at 40/30/20/10 read 2-4 points (sd 4) off
                        * for whole rounds with every trim at 1: 2.47 points off the
                        * shares over a round (bench/results/2026-12-07-harm-2) */
#define WANT_MIN 0.05  /* the gap is read relative to at least this part */

static double trim_of(const struct slice_trim *s)
{
    return s->trim > 0 ? s->trim : 1.0;
}

static double bounded(double trim)
{
    return fmin(fmax(trim, SLICE_TRIM_MIN), SLICE_TRIM_MAX);
}

void slice_trim_reset(struct slice_trim *s)
{
    s->trim = 1.0;
    s->err = s->slow = s->var = 0;
}

/* The least gap, averaged with weight gain, that moves the trim: DEADBAND, or
 * NOISE_SIGMAS standard deviations of that average where the period's gaps scatter
 * (an exponential average of white noise of variance v has variance v * g / (2 - g)). */
static double moving_gap(const struct slice_trim *s, double gain)
{
    return fmax(DEADBAND, NOISE_SIGMAS * sqrt(s->var * gain / (2.0 - gain)));
}

/* The gap the trim follows: the smoothed one where it clears its noise, else the long
 * mean where that clears its own, else none (0). */
static double lasting_gap(const struct slice_trim *s)
{
    if (fabs(s->err) > moving_gap(s, ERR_GAIN))
        return s->err;
    if (fabs(s->slow) > moving_gap(s, SLOW_GAIN))
        return s->slow;
    return 0;
}

void slice_trim_observe(struct slice_trim *s, double want, double got)
{
    double gap = want - got, off = gap - s->err;
    s->var += VAR_GAIN * (off * off - s->var);
    s->err += ERR_GAIN * off;
    s->slow += SLOW_GAIN * (gap - s->slow);
    s->trim = bounded(trim_of(s) * exp(TRIM_GAIN * lasting_gap(s) / fmax(want, WANT_MIN)));
}

void slice_trim_normalize(struct slice_trim *const trims[], unsigned n)
{
    if (!n)
        return;
    double log_sum = 0;
    for (unsigned i = 0; i < n; i++)
        log_sum += log(trim_of(trims[i]));
    double scale = exp(-log_sum / n);
    for (unsigned i = 0; i < n; i++)
        trims[i]->trim = bounded(trim_of(trims[i]) * scale);
}

bool slice_trim_at_most(const struct slice_trim *s)
{
    return trim_of(s) >= SLICE_TRIM_MAX - 0.5 / SLICE_TRIM_STEPS;
}

bool slice_trim_at_least(const struct slice_trim *s)
{
    return trim_of(s) <= SLICE_TRIM_MIN + 0.5 / SLICE_TRIM_STEPS;
}

bool slice_trim_wants_more(const struct slice_trim *s)
{
    return s->err > 0;
}

uint64_t slice_trim_apply(const struct slice_trim *s, double base_us)
{
    double stepped = round(trim_of(s) * SLICE_TRIM_STEPS) / SLICE_TRIM_STEPS;
    return (uint64_t)llround(base_us * stepped);
}
