/* test_ratelog.c - one line per key per interval: the first event logged, a flood
 * within the interval only counted, the next line after it carrying the count, and
 * two keys independent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon/base/ratelog.h"

static void test_flood_gives_one_line_then_the_count(void **state)
{
    (void)state;
    struct ratelog a = {0}, b = {0};
    uint64_t n = 99, lines = 0;
    assert_true(ratelog_event(&a, 5000, 10000, &n));
    assert_int_equal(n, 0);
    for (uint64_t t = 5001; t < 15000; t += 10)
        lines += ratelog_event(&a, t, 10000, &n);
    assert_int_equal(lines, 0);
    /* another key is not held back by the first */
    assert_true(ratelog_event(&b, 6000, 10000, &n));
    assert_int_equal(n, 0);
    /* the interval is over: a line, with what was not logged */
    assert_true(ratelog_event(&a, 15000, 10000, &n));
    assert_int_equal(n, 1000);
    assert_false(ratelog_event(&a, 15001, 10000, &n));
    assert_true(ratelog_event(&a, 60000, 10000, &n));
    assert_int_equal(n, 1);
}

static void test_first_event_at_time_zero(void **state)
{
    (void)state;
    struct ratelog a = {0};
    uint64_t n;
    assert_true(ratelog_event(&a, 0, 10000, &n));
    assert_false(ratelog_event(&a, 0, 10000, &n));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flood_gives_one_line_then_the_count),
        cmocka_unit_test(test_first_event_at_time_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
