/* slice_trim.h - the shares' timeslices tuned by what each tenant got. Under the
 * shares' slices (sched.h, SCHED_LEVEL_SLICES) a GPU does not divide its time in
 * the ratio of the slices: each switch costs, and a tenant whose queue runs dry
 * gives the rest of its slice up (on the H200, four deep kernel streams in slices
 * of 8192/6144/4096/2048 us got 34/29/20/11 % where 40/30/20/10 was asked:
 * bench/results/2026-12-05-harm-3). Each tenant's slice is scaled by a trim that
 * follows the gap between its part of the targets and its part of what ran, the
 * trims of a GPU kept at a geometric mean of 1 so that the slices stay as long on
 * average as the shares' own. A gap within the noise of the tenants' progress moves
 * nothing (launch-bound tenants' parts scatter by points from one period to the
 * next; chasing that spread their slices apart); a smaller gap that lasts does, once
 * its long mean clears that mean's own noise.
 *
 * Pure: no I/O, no clock, no globals.
 */
#ifndef KAIROS_DAEMON_SLICE_TRIM_H
#define KAIROS_DAEMON_SLICE_TRIM_H

#include <stdbool.h>
#include <stdint.h>

#define SLICE_TRIM_MIN 0.5     /* a slice is at least half its share's, and at most */
#define SLICE_TRIM_MAX 2.0     /* twice it: a launch-bound tenant reads as waiting (its
                                * queue never empties for the sensor) and longer slices
                                * do not help it, so the bound is what keeps its
                                * neighbour's slices from shrinking into switches (120
                                * us each on the H200); the H200's deep streams needed
                                * 0.9-1.2 */
#define SLICE_TRIM_STEPS 32.0 /* a trim is applied in steps of 1/32 of the share's slice:
                               * no new policy for a few microseconds' difference */

struct slice_trim {
    double trim; /* the factor on the tenant's slice (0: not yet set, read as 1) */
    double err;  /* its part of the targets less its part of what ran, smoothed */
    double slow; /* the same gap's long mean: a lasting gap within err's noise */
    double var;  /* how that gap scatters from period to period (its variance around
                  * err, smoothed): a smoothed gap within its noise moves no trim */
};

/* Back to the shares' own slice. */
void slice_trim_reset(struct slice_trim *s);

/* One period in which the GPU was contended (a tenant that waited got less than its
 * target): want is the tenant's part of the active tenants' targets, got its part
 * of the time they ran, both in [0, 1]. */
void slice_trim_observe(struct slice_trim *s, double want, double got);

/* Scales the n trims together so that their geometric mean is 1, within the bounds. */
void slice_trim_normalize(struct slice_trim *const trims[], unsigned n);

/* Whether the trim is as long as a slice may be, or as short (within half a step
 * of SLICE_TRIM_MAX, of SLICE_TRIM_MIN). */
bool slice_trim_at_most(const struct slice_trim *s);
bool slice_trim_at_least(const struct slice_trim *s);

/* Whether the trim moves for its tenant's part of what ran (its smoothed gap says
 * it got less than its part of the targets) or against it (more). */
bool slice_trim_wants_more(const struct slice_trim *s);

/* The tenant's slice: base_us times its trim taken in steps of 1/SLICE_TRIM_STEPS
 * (base_us itself while the trim is within half a step of 1). */
uint64_t slice_trim_apply(const struct slice_trim *s, double base_us);

#endif /* KAIROS_DAEMON_SLICE_TRIM_H */
