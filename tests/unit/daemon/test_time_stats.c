/* test_time_stats.c - the per-tenant time figures: unknown before the first period,
 * the last period's share, the minute's rolling average forgetting periods older
 * than 600, paused periods counted, clamping and rounding. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/time_stats.h"

#define P 100000u /* a 100 ms period */

static void test_unknown_until_measured(void **state)
{
    (void)state;
    struct time_stats s;
    time_stats_reset(&s);
    assert_false(time_stats_measured(&s));
    assert_int_equal(time_stats_last_ppm(&s), 0);
    assert_int_equal(time_stats_minute_ppm(&s), 0);
    time_stats_period(&s, 50000, 0, true); /* a period of 0 us is no period */
    assert_false(time_stats_measured(&s));
    assert_int_equal(s.pauses, 0);
    time_stats_period(&s, 0, P, false); /* measured: an idle tenant is 0, and known */
    assert_true(time_stats_measured(&s));
    assert_int_equal(time_stats_last_ppm(&s), 0);
}

static void test_last_period_and_mean_so_far(void **state)
{
    (void)state;
    struct time_stats s;
    time_stats_reset(&s);
    time_stats_period(&s, 30000, P, false);
    assert_int_equal(time_stats_last_ppm(&s), 300000);
    assert_int_equal(time_stats_minute_ppm(&s), 300000);
    time_stats_period(&s, 10000, P, false);
    assert_int_equal(time_stats_last_ppm(&s), 100000);
    assert_int_equal(time_stats_minute_ppm(&s), 200000); /* mean of the two so far */
    time_stats_period(&s, 250000, P, false);             /* more than the period: all of it */
    assert_int_equal(time_stats_last_ppm(&s), 1000000);
    assert_int_equal(time_stats_minute_ppm(&s), 466667); /* 1.4 / 3, rounded */
    time_stats_period(&s, 1, 3, false);                  /* rounds to the nearest ppm */
    assert_int_equal(time_stats_last_ppm(&s), 333333);
}

static void test_minute_forgets_older_periods(void **state)
{
    (void)state;
    struct time_stats s;
    time_stats_reset(&s);
    for (unsigned i = 0; i < TIME_STATS_MINUTE; i++)
        time_stats_period(&s, 80000, P, false);
    assert_int_equal(time_stats_minute_ppm(&s), 800000);
    for (unsigned i = 0; i < TIME_STATS_MINUTE / 4; i++)
        time_stats_period(&s, 20000, P, false);
    /* 450 periods at 80 %, 150 at 20 % */
    assert_int_equal(time_stats_minute_ppm(&s), 650000);
    for (unsigned i = 0; i < 10 * TIME_STATS_MINUTE; i++)
        time_stats_period(&s, 20000, P, false);
    assert_int_equal(time_stats_minute_ppm(&s), 200000); /* no drift from the running sum */
    assert_int_equal(s.sum, 200000ull * TIME_STATS_MINUTE);
    assert_int_equal(s.periods, 11 * TIME_STATS_MINUTE + TIME_STATS_MINUTE / 4);
}

static void test_paused_periods_counted(void **state)
{
    (void)state;
    struct time_stats s;
    time_stats_reset(&s);
    time_stats_period(&s, 30000, P, true);
    time_stats_period(&s, 30000, P, false);
    time_stats_period(&s, 30000, P, true);
    assert_int_equal(s.pauses, 2);
    time_stats_reset(&s);
    assert_int_equal(s.pauses, 0);
    assert_false(time_stats_measured(&s));
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
        cmocka_unit_test(test_ppm_of_a_fraction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
