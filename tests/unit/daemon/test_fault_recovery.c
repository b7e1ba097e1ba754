/* test_fault_recovery.c - the clients a fault of their domain's server left (space/
 * fault_recovery.h): none is due before the grace ends; after it, those the server
 * still lists are, each once, only for its own domain, and with the start time the
 * fault saw (so a reused pid is told apart); an event ends with its window; a ninth
 * event takes the oldest's place; a long list keeps FAULT_RECOVERY_CLIENTS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "daemon/space/fault_recovery.h"

static struct fault_recovery r;
static struct fault_recovery_end out[FAULT_RECOVERY_CLIENTS];

static int setup(void **state)
{
    (void)state;
    memset(&r, 0, sizeof r);
    return 0;
}

/* A fault of domain "infer" on GPU 1 at t=1000 ms that cost pids 10 and 11 their work. */
static void note_infer(unsigned grace_ms)
{
    struct fault_recovery_client c[] = {{.pid = 10, .start = 500}, {.pid = 11, .start = 501}};
    fault_recovery_note(&r, "infer", 1, 1000, grace_ms, c, 2);
}

static void test_due_after_the_grace_each_once(void **state)
{
    (void)state;
    note_infer(3000);
    const uint32_t listed[] = {10, 11, 12};
    assert_int_equal(fault_recovery_due(&r, "infer", listed, 3, 3999, out, 8), 0);
    assert_int_equal(fault_recovery_due(&r, "infer", listed, 3, 4000, out, 8), 2);
    assert_int_equal(out[0].pid, 10);
    assert_int_equal(out[0].start, 500);
    assert_int_equal(out[0].gpu, 1);
    assert_int_equal(out[1].pid, 11);
    assert_int_equal(fault_recovery_due(&r, "infer", listed, 3, 9000, out, 8), 0); /* once */
}

/* Only those the server still lists: one that exited (or was never its client) is
 * nobody's to end; another domain's list ends nothing of this one. */
static void test_only_those_still_listed_and_of_the_domain(void **state)
{
    (void)state;
    note_infer(0);
    const uint32_t listed[] = {11, 30};
    assert_int_equal(fault_recovery_due(&r, "batch", listed, 2, 5000, out, 8), 0);
    assert_int_equal(fault_recovery_due(&r, "infer", listed, 2, 5000, out, 8), 1);
    assert_int_equal(out[0].pid, 11);
    const uint32_t later[] = {10};
    assert_int_equal(fault_recovery_due(&r, "infer", later, 1, 6000, out, 8), 1);
    assert_int_equal(out[0].pid, 10);
}

static void test_an_event_ends_with_its_window(void **state)
{
    (void)state;
    note_infer(1000);
    assert_int_equal(fault_recovery_pending(&r), 1);
    const uint32_t listed[] = {10};
    assert_int_equal(fault_recovery_due(&r, "infer", listed, 1,
                                        2000 + FAULT_RECOVERY_WINDOW_MS, out, 8), 0);
    assert_int_equal(fault_recovery_pending(&r), 0);
}

/* The room given bounds what one call returns; the rest stay due for the next. */
static void test_the_rest_waits_for_the_next_call(void **state)
{
    (void)state;
    note_infer(0);
    const uint32_t listed[] = {10, 11};
    assert_int_equal(fault_recovery_due(&r, "infer", listed, 2, 1000, out, 1), 1);
    assert_int_equal(out[0].pid, 10);
    assert_int_equal(fault_recovery_due(&r, "infer", listed, 2, 1000, out, 1), 1);
    assert_int_equal(out[0].pid, 11);
}

static void test_bounds(void **state)
{
    (void)state;
    struct fault_recovery_client many[FAULT_RECOVERY_CLIENTS + 5];
    uint32_t listed[FAULT_RECOVERY_CLIENTS + 5];
    for (uint32_t i = 0; i < FAULT_RECOVERY_CLIENTS + 5; i++) {
        many[i] = (struct fault_recovery_client){.pid = 100 + i, .start = i};
        listed[i] = 100 + i;
    }
    fault_recovery_note(&r, "big", 0, 0, 0, many, FAULT_RECOVERY_CLIENTS + 5);
    assert_int_equal(fault_recovery_due(&r, "big", listed, FAULT_RECOVERY_CLIENTS + 5, 10, out,
                                        FAULT_RECOVERY_CLIENTS), FAULT_RECOVERY_CLIENTS);
    /* FAULT_RECOVERY_EVENTS more events: the oldest ("big", due at 0) gives its place */
    for (unsigned i = 0; i < FAULT_RECOVERY_EVENTS; i++) {
        struct fault_recovery_client c = {.pid = 7, .start = 1};
        fault_recovery_note(&r, "d", i, 100 + i, 0, &c, 1);
    }
    assert_int_equal(fault_recovery_pending(&r), FAULT_RECOVERY_EVENTS);
    const uint32_t seven[] = {7};
    assert_int_equal(fault_recovery_due(&r, "d", seven, 1, 1000, out, 16), FAULT_RECOVERY_EVENTS);
    /* a tenth takes the place of the oldest "d" (GPU 0), not of a newer one */
    struct fault_recovery_client c = {.pid = 8, .start = 1};
    fault_recovery_note(&r, "e", 9, 2000, 0, &c, 1);
    for (size_t i = 0; i < FAULT_RECOVERY_EVENTS; i++)
        assert_false(!strcmp(r.v[i].domain, "d") && r.v[i].gpu == 0);
    assert_int_equal(fault_recovery_pending(&r), FAULT_RECOVERY_EVENTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_due_after_the_grace_each_once, setup),
        cmocka_unit_test_setup(test_only_those_still_listed_and_of_the_domain, setup),
        cmocka_unit_test_setup(test_an_event_ends_with_its_window, setup),
        cmocka_unit_test_setup(test_the_rest_waits_for_the_next_call, setup),
        cmocka_unit_test_setup(test_bounds, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
