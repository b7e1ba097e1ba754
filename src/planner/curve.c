/* curve.c - Thr(s, t): the one throughput model the algorithms and the checker share.
 *
 * Without a measured curve it is KRYPTON's linear model, Thr(s) x t x eff(k), computed in
 * the order the planner always computed it (so plans and fingerprints stay the same).
 * With a profile table's time_shares (kairos profile --time-shares: the whole GPU with
 * its GPU time capped by kairosd), Thr(whole, t) runs piecewise-linearly through (0, 0),
 * the measured points and (1, Thr(whole)); a launch-bound workload keeps more than t of
 * its throughput at t, so it needs a smaller share than the linear model says. There
 * interference counts as lost time: Thr(whole, t x eff), which for a linear curve is the
 * same as Thr x t x eff and keeps plan_instance_capacity's sum valid (each tenant's share
 * is at most its interference-free share / eff, plus the rounding).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kairos/plan.h"

/* Segment k (0..n) of w's curve on pool: from (t0, y0) to (t1, y1); the first starts at
 * (0, 0), the last ends at (1, Thr(whole)). */
struct curve_seg {
    double t0, y0, t1, y1;
};

static struct curve_seg curve_segment(const struct plan_workload *w, int pool, int k)
{
    const struct plan_time_curve *c = w->curve;
    int n = c->n[pool];
    struct curve_seg s = {0, 0, 1, w->thr[pool][PLAN_OPTION_WHOLE]};
    if (k > 0) {
        s.t0 = c->t[pool][k - 1];
        s.y0 = c->thr[pool][k - 1];
    }
    if (k < n) {
        s.t1 = c->t[pool][k];
        s.y1 = c->thr[pool][k];
    }
    return s;
}

/* The curve of w on pool's whole GPU at fraction u of its time (u >= 0). */
static double curve_at(const struct plan_workload *w, int pool, double u)
{
    for (int k = 0; k <= w->curve->n[pool]; k++) {
        struct curve_seg s = curve_segment(w, pool, k);
        if (u <= s.t1)
            return s.y0 + (s.y1 - s.y0) * (u - s.t0) / (s.t1 - s.t0);
    }
    return w->thr[pool][PLAN_OPTION_WHOLE];
}

/* The least fraction u with curve_at(u) >= y (y <= Thr(whole)). */
static double curve_inverse(const struct plan_workload *w, int pool, double y)
{
    for (int k = 0; k <= w->curve->n[pool]; k++) {
        struct curve_seg s = curve_segment(w, pool, k);
        if (y <= s.y1 && s.y1 > s.y0)
            return s.t0 + (s.t1 - s.t0) * (y - s.y0) / (s.y1 - s.y0);
    }
    return 1;
}

static int curve_applies(const struct plan_workload *w, int pool, int option)
{
    return option == PLAN_OPTION_WHOLE && w->curve && w->curve->n[pool] > 0;
}

double plan_thr_at(const struct plan_workload *w, int pool, int option, int time, double eff)
{
    if (!curve_applies(w, pool, option))
        return w->thr[pool][option] * time / PLAN_TIME_UNITS * eff;
    return curve_at(w, pool, (double)time / PLAN_TIME_UNITS * eff);
}

/* The least time (PLAN_TIME_UNITS, at least 1) whose plan_thr_at meets w's target, or
 * -1 when even the whole time does not. What the checker will compute is what decides:
 * the inverse gives the start, a rounding short of the target takes the next unit. */
int plan_curve_time(const struct plan_workload *w, int pool, int option, double eff)
{
    double need = w->target * (1 - 1e-9);
    if (!curve_applies(w, pool, option) ||
        plan_thr_at(w, pool, option, PLAN_TIME_UNITS, eff) < need)
        return -1;
    double u = curve_inverse(w, pool, w->target);
    int t = (int)ceil(u * PLAN_TIME_UNITS / eff - 1e-9);
    t = t < 1 ? 1 : t > PLAN_TIME_UNITS ? PLAN_TIME_UNITS : t;
    while (t < PLAN_TIME_UNITS && plan_thr_at(w, pool, option, t, eff) < need)
        t++;
    return t;
}

int plan_profile_check_shares(const struct plan_profile_table *t, char *err, size_t errlen)
{
    double whole = 0;
    for (int k = 0; k < t->n; k++)
        if (!strcmp(t->option[k], "whole"))
            whole = t->thr[k];
    if (t->n_shares && !(whole > 0)) {
        snprintf(err, errlen, "time_shares needs the whole GPU's throughput ('whole' under "
                 "throughput): the curve ends at (100 %%, Thr(whole))");
        return -EINVAL;
    }
    for (int k = 0; k < t->n_shares; k++) {
        double p = t->share_pct[k], y = t->share_thr[k];
        const char *why = !(p > 0 && p < 100) ? "a time share must be above 0 and below 100 %"
                        : k && !(p > t->share_pct[k - 1]) ? "time shares must be listed "
                          "ascending, each once"
                        : !(y > 0) || !isfinite(y) ? "a throughput must be a number > 0"
                        : k && y < t->share_thr[k - 1] ? "throughput must not decrease as the "
                          "time share grows (rerun kairos profile --time-shares: noise?)"
                        : y > whole * (1 + PLAN_SHARES_TOLERANCE) ? "throughput above the whole "
                          "GPU's by more than 5 % (PLAN_SHARES_TOLERANCE)" : NULL;
        if (why) {
            snprintf(err, errlen, "time_shares %g: %g: %s (whole: %g)", p, y, why, whole);
            return -EINVAL;
        }
    }
    return 0;
}
