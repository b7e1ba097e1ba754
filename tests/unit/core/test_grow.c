/* test_grow.c - grow_for_one: no move while there is room, doubling from the first
 * capacity, contents kept, and a refusal that leaves the array and its capacity. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/grow.h"

static void doubles_from_first_and_keeps_contents(void **state)
{
    (void)state;
    int *v = NULL;
    size_t cap = 0, caps[6];
    for (size_t n = 0; n < 40; n++) {
        int *g = grow_for_one(v, &cap, n, sizeof *v, 8);
        assert_non_null(g);
        v = g;
        v[n] = (int)n * 3;
        if (n < 6)
            caps[n] = cap;
    }
    assert_int_equal(caps[0], 8);
    assert_int_equal(caps[5], 8);
    assert_int_equal(cap, 64); /* 8, 16, 32, 64 */
    for (size_t n = 0; n < 40; n++)
        assert_int_equal(v[n], (int)n * 3);
    free(v);
}

static void room_left_returns_the_same_array(void **state)
{
    (void)state;
    size_t cap = 4;
    char *v = malloc(cap);
    assert_non_null(v);
    assert_ptr_equal(grow_for_one(v, &cap, 3, 1, 8), v);
    assert_int_equal(cap, 4);
    free(v);
}

static void too_large_is_refused_and_leaves_the_array(void **state)
{
    (void)state;
    size_t cap = SIZE_MAX / 16 + 1; /* doubling would not fit a size_t of 8-byte elements */
    char *v = malloc(16);
    assert_non_null(v);
    assert_null(grow_for_one(v, &cap, cap, 8, 8));
    assert_int_equal(cap, SIZE_MAX / 16 + 1);
    free(v); /* still the caller's: ASan would report a double free otherwise */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(doubles_from_first_and_keeps_contents),
        cmocka_unit_test(room_left_returns_the_same_array),
        cmocka_unit_test(too_large_is_refused_and_leaves_the_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
