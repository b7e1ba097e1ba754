/* test_key_rate.c - events per key and window: a key held to its rate within its
 * window and let through again after it, keys independent, and a flood of other keys
 * that cannot reset a key's window while a slot is free or over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "daemon/base/key_rate.h"

static void test_a_key_is_held_to_its_rate_then_let_through(void **state)
{
    (void)state;
    struct key_rate_slot s[4] = {0};
    unsigned taken = 0;
    for (uint64_t t = 1000; t < 1900; t += 10)
        taken += key_rate_take(s, 4, "greedy", t, 1000, 16);
    assert_int_equal(taken, 16);
    assert_true(key_rate_take(s, 4, "calm", 1500, 1000, 16)); /* keys are independent */
    assert_false(key_rate_take(s, 4, "greedy", 1999, 1000, 16));
    assert_true(key_rate_take(s, 4, "greedy", 2000, 1000, 16)); /* a new window */
}

static void test_other_keys_do_not_reset_a_held_key(void **state)
{
    (void)state;
    struct key_rate_slot s[4] = {0};
    for (int i = 0; i < 2; i++)
        assert_true(key_rate_take(s, 4, "greedy", 100, 1000, 2));
    /* three others fill the rest; one more finds every window open and takes the
     * oldest, which is greedy's: the only way a key's window restarts early */
    char name[16];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "t%d", i);
        assert_true(key_rate_take(s, 4, name, 200 + (uint64_t)i, 1000, 2));
    }
    assert_false(key_rate_take(s, 4, "greedy", 300, 1000, 2));
    /* once a window is over, its slot goes before any open one: t0 keeps its count */
    assert_true(key_rate_take(s, 4, "late", 1150, 1000, 2));
    assert_true(key_rate_take(s, 4, "t0", 1151, 1000, 2));
    assert_false(key_rate_take(s, 4, "t0", 1152, 1000, 2));
}

static void test_a_clock_that_goes_back_opens_a_window(void **state)
{
    (void)state;
    struct key_rate_slot s[1] = {0};
    assert_true(key_rate_take(s, 1, "a", 5000, 1000, 1));
    assert_false(key_rate_take(s, 1, "a", 5001, 1000, 1));
    assert_true(key_rate_take(s, 1, "a", 10, 1000, 1));
}

static void test_no_slots_takes_nothing(void **state)
{
    (void)state;
    assert_false(key_rate_take(NULL, 0, "a", 1, 1000, 5));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_key_is_held_to_its_rate_then_let_through),
        cmocka_unit_test(test_other_keys_do_not_reset_a_held_key),
        cmocka_unit_test(test_a_clock_that_goes_back_opens_a_window),
        cmocka_unit_test(test_no_slots_takes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
