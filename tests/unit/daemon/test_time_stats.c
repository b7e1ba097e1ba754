/* test_time_stats.c - the per-tenant time figures: unknown before the first period,
 * the last period's share, the minute's rolling average forgetting periods older
 * than 600, paused periods counted, clamping and rounding; what held the tenant
 * back per reason (periods and paused time over the minute, forgotten with it;
 * totals since the reset that never go down), a hold by timeslices alone (periods
 * held, no time paused) and an unknown reason counted as none. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/time/time_stats.h"

#define P 100000u /* a 100 ms period */
#define NONE SCHED_HOLD_NONE

static void test_unknown_until_measured(void **state)
{
    (void)state;
    struct time_stats s;
    time_stats_reset(&s);
    assert_false(time_stats_measured(&s));
    assert_int_equal(time_stats_last_ppm(&s), 0);
    assert_int_equal(time_stats_minute_ppm(&s), 0);
    time_stats_period(&s, 50000, 0, SCHED_HOLD_LIMIT, 70000); /* no period */
    assert_false(time_stats_measured(&s));
    assert_int_equal(s.pauses, 0);
    assert_int_equal(s.hold_periods_total[SCHED_HOLD_LIMIT], 0);
    assert_int_equal(time_stats_hold_periods_ppm(&s, NONE), 0);
    assert_int_equal(time_stats_last_hold(&s), NONE);
    time_stats_period(&s, 0, P, NONE, 0); /* measured: an idle tenant is 0, and known */
    assert_true(time_stats_measured(&s));
    assert_int_equal(time_stats_last_ppm(&s), 0);
}

static void test_last_period_and_mean_so_far(void **state)
{
    (void)state;
    struct time_stats s;
    time_stats_reset(&s);
    time_stats_period(&s, 30000, P, NONE, 0);
    assert_int_equal(time_stats_last_ppm(&s), 300000);
    assert_int_equal(time_stats_minute_ppm(&s), 300000);
    time_stats_period(&s, 10000, P, NONE, 0);
    assert_int_equal(time_stats_last_ppm(&s), 100000);
    assert_int_equal(time_stats_minute_ppm(&s), 200000); /* mean of the two so far */
    time_stats_period(&s, 250000, P, NONE, 0);          /* more than the period: all of it */
    assert_int_equal(time_stats_last_ppm(&s), 1000000);
    assert_int_equal(time_stats_minute_ppm(&s), 466667); /* 1.4 / 3, rounded */
    time_stats_period(&s, 1, 3, NONE, 0);                /* rounds to the nearest ppm */
    assert_int_equal(time_stats_last_ppm(&s), 333333);
}

static void test_minute_forgets_older_periods(void **state)
{
    (void)state;
    struct time_stats s;
    time_stats_reset(&s);
    for (unsigned i = 0; i < TIME_STATS_MINUTE; i++)
        time_stats_period(&s, 80000, P, NONE, 0);
    assert_int_equal(time_stats_minute_ppm(&s), 800000);
    for (unsigned i = 0; i < TIME_STATS_MINUTE / 4; i++)
        time_stats_period(&s, 20000, P, NONE, 0);
    /* 450 periods at 80 %, 150 at 20 % */
    assert_int_equal(time_stats_minute_ppm(&s), 650000);
    for (unsigned i = 0; i < 10 * TIME_STATS_MINUTE; i++)
        time_stats_period(&s, 20000, P, NONE, 0);
    assert_int_equal(time_stats_minute_ppm(&s), 200000); /* no drift from the running sum */
    assert_int_equal(s.sum, 200000ull * TIME_STATS_MINUTE);
    assert_int_equal(s.periods, 11 * TIME_STATS_MINUTE + TIME_STATS_MINUTE / 4);
}

static void test_paused_periods_counted(void **state)
{
    (void)state;
    struct time_stats s;
    time_stats_reset(&s);
    time_stats_period(&s, 30000, P, SCHED_HOLD_LIMIT, 70000);
    time_stats_period(&s, 30000, P, SCHED_HOLD_SHARE, 0); /* timeslices: not paused */
    time_stats_period(&s, 30000, P, SCHED_HOLD_SHARE, 50000);
    assert_int_equal(s.pauses, 2); /* the periods with time paused, not the slices */
    time_stats_reset(&s);
    assert_int_equal(s.pauses, 0);
    assert_false(time_stats_measured(&s));
}

/* A limit of 30 %: held back in every period it is windowed, 70 % of its time;
 * the minute's figures per reason, then forgotten as the minute moves on, the
 * totals kept. */
static void test_holds_over_the_minute(void **state)
{
    (void)state;
    struct time_stats s;
    time_stats_reset(&s);
    for (unsigned i = 0; i < TIME_STATS_MINUTE; i++) /* 180 periods alone, then 420 capped */
        time_stats_period(&s, 30000, P, i < 180 ? NONE : SCHED_HOLD_LIMIT, i < 180 ? 0 : 70000);
    assert_int_equal(time_stats_last_hold(&s), SCHED_HOLD_LIMIT);
    assert_int_equal(time_stats_hold_periods_ppm(&s, SCHED_HOLD_LIMIT), 700000);
    assert_int_equal(time_stats_hold_periods_ppm(&s, NONE), 300000);
    assert_int_equal(time_stats_held_ppm(&s, SCHED_HOLD_LIMIT), 490000); /* 0.7 x 0.7 */
    assert_int_equal(time_stats_held_ppm(&s, NONE), 0);
    assert_int_equal(time_stats_held_ppm(&s, SCHED_HOLD_SHARE), 0);
    assert_int_equal(s.pauses, 420);
    /* a minute of another tenant's share by timeslices: periods held, no time paused */
    for (unsigned i = 0; i < TIME_STATS_MINUTE; i++)
        time_stats_period(&s, 50000, P, SCHED_HOLD_SHARE, 0);
    assert_int_equal(time_stats_last_hold(&s), SCHED_HOLD_SHARE);
    assert_int_equal(time_stats_hold_periods_ppm(&s, SCHED_HOLD_SHARE), TIME_STATS_PPM);
    assert_int_equal(time_stats_held_ppm(&s, SCHED_HOLD_SHARE), 0);
    assert_int_equal(time_stats_hold_periods_ppm(&s, SCHED_HOLD_LIMIT), 0);
    assert_int_equal(time_stats_held_ppm(&s, SCHED_HOLD_LIMIT), 0);
    assert_int_equal(time_stats_hold_periods_ppm(&s, NONE), 0);
    /* the totals since the reset keep everything */
    assert_int_equal(s.hold_periods_total[NONE], 180);
    assert_int_equal(s.hold_periods_total[SCHED_HOLD_LIMIT], 420);
    assert_int_equal(s.hold_periods_total[SCHED_HOLD_SHARE], TIME_STATS_MINUTE);
    assert_int_equal(s.held_us_total[SCHED_HOLD_LIMIT], 420ull * 70000);
    assert_int_equal(s.held_us_total[SCHED_HOLD_SHARE], 0);
    assert_int_equal(s.pauses, 420);
}

/* Reasons mixed period by period over many minutes: the minute's sums follow the
 * ring exactly (no drift), held time is clamped to the period, an unknown reason
 * counts as none. */
static void test_holds_mixed_and_clamped(void **state)
{
    (void)state;
    struct time_stats s;
    time_stats_reset(&s);
    static const enum sched_hold cycle[] = {SCHED_HOLD_SHARE, SCHED_HOLD_LIMIT, SCHED_HOLD_YIELD};
    for (unsigned i = 0; i < 7 * TIME_STATS_MINUTE + 3; i++)
        time_stats_period(&s, 10000, P, cycle[i % 3], (i % 3) * 20000); /* 0, 20, 40 ms */
    static const uint32_t held[] = {0, 66667, 133333}; /* a third of 0, 20 and 40 % */
    for (unsigned k = 0; k < 3; k++) {
        assert_int_equal(time_stats_hold_periods_ppm(&s, cycle[k]), 333333);
        assert_int_equal(time_stats_held_ppm(&s, cycle[k]), held[k]);
    }
    assert_int_equal(s.held_us_total[SCHED_HOLD_YIELD], 1401ull * 40000);
    time_stats_reset(&s);
    time_stats_period(&s, 10000, P, SCHED_HOLD_LIMIT, 2 * P); /* more than the period */
    assert_int_equal(time_stats_held_ppm(&s, SCHED_HOLD_LIMIT), TIME_STATS_PPM);
    assert_int_equal(s.held_us_total[SCHED_HOLD_LIMIT], P);
    time_stats_period(&s, 10000, P, (enum sched_hold)7, 0); /* not a reason: none */
    assert_int_equal(time_stats_last_hold(&s), NONE);
    assert_int_equal(s.hold_periods_total[NONE], 1);
    assert_int_equal(time_stats_hold_periods_ppm(&s, (enum sched_hold)7), 0);
    assert_int_equal(time_stats_held_ppm(&s, (enum sched_hold)SCHED_HOLD_REASONS), 0);
}

static void test_ppm_of_a_fraction(void **state)
{
    (void)state;
    assert_int_equal(time_stats_ppm(0.3), 300000);
    assert_int_equal(time_stats_ppm(0.1234567), 123457);
    assert_int_equal(time_stats_ppm(1.5), 1000000);
    assert_int_equal(time_stats_ppm(-0.2), 0);
    assert_int_equal(time_stats_ppm(NAN), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_until_measured),
        cmocka_unit_test(test_last_period_and_mean_so_far),
        cmocka_unit_test(test_minute_forgets_older_periods),
        cmocka_unit_test(test_paused_periods_counted),
        cmocka_unit_test(test_holds_over_the_minute),
        cmocka_unit_test(test_holds_mixed_and_clamped),
        cmocka_unit_test(test_ppm_of_a_fraction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
