/* test_ps_view.c - the compute figures of a PS reply as kairos ps and kairos top
 * read them: present only with a policy, unknown (not 0) until measured, parts per
 * million to fractions, and the cells printed for them; what held a tenant back:
 * unknown from a kairosd of before or until measured, the part of the minute it
 * was paused, "slices" for a hold by timeslices alone, and the main reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli/ps_view.h"

static void test_compute_only_with_a_policy(void **state)
{
    (void)state;
    struct kairos_ps_reply r;
    memset(&r, 0, sizeof r);
    struct ps_compute c;
    r.quota[0] = 1 << 20;
    assert_false(ps_compute_get(&r, 0, &c));
    assert_true(ps_gpu_shown(&r, 0));
    assert_false(ps_gpu_shown(&r, 1));
    assert_false(ps_tenant_has_compute(&r, 2));
    r.compute_flags[1] = KAIROS_PS_COMPUTE_POLICY;
    assert_true(ps_gpu_shown(&r, 1)); /* a policy without memory still shows */
    assert_true(ps_tenant_has_compute(&r, 2));
    assert_false(ps_tenant_has_compute(&r, 1)); /* GPU 1 is beyond the node's count */
    assert_false(ps_compute_get(&r, KAIROS_MAX_GPUS, &c));
}

static void test_fractions_and_valid_bits(void **state)
{
    (void)state;
    struct kairos_ps_reply r;
    memset(&r, 0, sizeof r);
    r.compute_flags[0] = KAIROS_PS_COMPUTE_POLICY;
    r.share_ppm[0] = 300000;
    r.limit_ppm[0] = 500000;
    r.priority[0] = KAIROS_PRIO_BATCH;
    r.target_ppm[0] = 412345;
    r.window_ppm[0] = 250000;
    r.minute_ppm[0] = 200000;
    r.period_us[0] = 100000;
    r.duty_us[0] = 29280;
    r.pauses[0] = 57;
    struct ps_compute c;
    assert_true(ps_compute_get(&r, 0, &c));
    assert_false(c.measured);
    assert_true(c.share == 0.3 && c.limit == 0.5 && c.target == 0.412345);
    assert_string_equal(c.priority, "batch");
    assert_int_equal(c.pauses, 57);
    char buf[32];
    assert_string_equal(ps_cell_pct(c.window, c.measured, buf, sizeof buf), "-");
    r.compute_flags[0] |= KAIROS_PS_COMPUTE_MEASURED;
    assert_true(ps_compute_get(&r, 0, &c));
    assert_true(c.measured);
    assert_string_equal(ps_cell_pct(c.window, c.measured, buf, sizeof buf), "25.0%");
    assert_string_equal(ps_cell_pct(c.target, true, buf, sizeof buf), "41.2%");
    assert_string_equal(ps_cell_limit(c.limit, buf, sizeof buf), "50.0%");
    assert_string_equal(ps_cell_limit(0, buf, sizeof buf), "none");
    assert_string_equal(ps_cell_window(&c, buf, sizeof buf), "29.3/100ms");
    c.period_us = 0;
    assert_string_equal(ps_cell_window(&c, buf, sizeof buf), "-");
    assert_string_equal(ps_prio_name(KAIROS_PRIO_LATENCY), "latency");
    assert_string_equal(ps_prio_name(7), "unknown");
}

/* A tenant with a policy on GPU 0, measured, with the hold figures. */
static void held_tenant(struct kairos_ps_reply *r)
{
    memset(r, 0, sizeof *r);
    r->compute_flags[0] =
        KAIROS_PS_COMPUTE_POLICY | KAIROS_PS_COMPUTE_MEASURED | KAIROS_PS_COMPUTE_HOLDS;
    r->hold_period_ppm[0][KAIROS_HOLD_NONE] = KAIROS_PPM;
}

static void cells(const struct kairos_ps_reply *r, const char *hold, const char *why)
{
    struct ps_compute c;
    char buf[32];
    assert_true(ps_compute_get(r, 0, &c));
    assert_string_equal(ps_cell_hold(&c.hold, buf, sizeof buf), hold);
    assert_string_equal(ps_cell_why(&c.hold, buf, sizeof buf), why);
}

static void test_hold_cells(void **state)
{
    (void)state;
    struct kairos_ps_reply r;
    held_tenant(&r);
    cells(&r, "0.0%", "none"); /* nothing held it back */
    /* a 30 % limit's window in 80 % of the periods, 70 % of each */
    r.hold[0] = KAIROS_HOLD_LIMIT;
    r.hold_period_ppm[0][KAIROS_HOLD_NONE] = 200000;
    r.hold_period_ppm[0][KAIROS_HOLD_LIMIT] = 800000;
    r.hold_time_ppm[0][KAIROS_HOLD_LIMIT] = 560000;
    cells(&r, "56.0%", "limit");
    /* another's share by timeslices in more periods, paused in none: still the limit */
    r.hold_period_ppm[0][KAIROS_HOLD_LIMIT] = 100000;
    r.hold_time_ppm[0][KAIROS_HOLD_LIMIT] = 70000;
    r.hold_period_ppm[0][KAIROS_HOLD_SHARE] = 700000;
    cells(&r, "7.0%", "limit");
    /* timeslices alone: held back, never paused */
    r.hold_period_ppm[0][KAIROS_HOLD_LIMIT] = r.hold_time_ppm[0][KAIROS_HOLD_LIMIT] = 0;
    cells(&r, "slices", "share");
    r.hold_period_ppm[0][KAIROS_HOLD_YIELD] = 800000; /* the most periods: the yield */
    cells(&r, "slices", "yield");
    struct ps_compute c;
    assert_true(ps_compute_get(&r, 0, &c));
    assert_true(c.hold.known && ps_hold_slices(&c.hold));
    assert_int_equal(c.hold.now, KAIROS_HOLD_LIMIT);
    /* paused by two reasons: the sum, the longest named */
    r.hold_time_ppm[0][KAIROS_HOLD_SHARE] = 100000;
    r.hold_time_ppm[0][KAIROS_HOLD_YIELD] = 50000;
    cells(&r, "15.0%", "share");
    /* unknown: not measured yet, or a kairosd of before (no hold figures) */
    r.compute_flags[0] &= ~KAIROS_PS_COMPUTE_MEASURED;
    cells(&r, "-", "-");
    r.compute_flags[0] = KAIROS_PS_COMPUTE_POLICY | KAIROS_PS_COMPUTE_MEASURED;
    cells(&r, "-", "-");
    assert_true(ps_compute_get(&r, 0, &c));
    assert_false(c.hold.known);
    assert_string_equal(ps_hold_name(KAIROS_HOLD_YIELD), "yield");
    assert_string_equal(ps_hold_name(KAIROS_HOLD_REASONS), "unknown");
}

/* The totals since the policy, as fractions of a second. */
static void test_hold_totals(void **state)
{
    (void)state;
    struct kairos_ps_reply r;
    held_tenant(&r);
    r.hold_periods[0][KAIROS_HOLD_LIMIT] = 600;
    r.hold_time_us[0][KAIROS_HOLD_LIMIT] = 42000000;
    struct ps_compute c;
    assert_true(ps_compute_get(&r, 0, &c));
    assert_int_equal(c.hold.periods_total[KAIROS_HOLD_LIMIT], 600);
    assert_true(c.hold.paused_seconds[KAIROS_HOLD_LIMIT] == 42.0);
    assert_true(c.hold.periods[KAIROS_HOLD_NONE] == 1.0);
}

static void test_memory_cell(void **state)
{
    (void)state;
    struct kairos_ps_reply r;
    memset(&r, 0, sizeof r);
    r.held[1] = 3ull << 30;
    r.quota[1] = 8ull << 30;
    char buf[64];
    assert_string_equal(ps_cell_memory(&r, 1, buf, sizeof buf), "3.00 GiB/8.00 GiB");
}

static void test_any_compute(void **state)
{
    (void)state;
    struct kairos_ps_reply list[2];
    memset(list, 0, sizeof list);
    struct ps_snapshot s = {.list = list, .n = 2, .n_gpus = 2};
    assert_false(ps_any_compute(&s));
    list[1].compute_flags[1] = KAIROS_PS_COMPUTE_POLICY;
    assert_true(ps_any_compute(&s));
    s.n_gpus = 1;
    assert_false(ps_any_compute(&s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compute_only_with_a_policy),
        cmocka_unit_test(test_fractions_and_valid_bits),
        cmocka_unit_test(test_hold_cells),
        cmocka_unit_test(test_hold_totals),
        cmocka_unit_test(test_memory_cell),
        cmocka_unit_test(test_any_compute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
