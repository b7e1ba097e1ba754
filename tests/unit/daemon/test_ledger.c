/* test_ledger.c - the memory ledger: refusal exactly at the byte, one quota shared
 * by a tenant's processes, commit and undo, process exit, reattach, lowered quota. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/memory/ledger.h"
#include "ledger_fixture.h"

#define GiB (1ull << 30)

static struct ledger L;
static struct ledger_tenant *T;

static int setup(void **state)
{
    uint64_t quota[KAIROS_MAX_GPUS] = {8 * GiB, 4 * GiB};
    ledger_fixture_begin(state, &L, 2, "alice", quota, &T);
    return 0;
}

static bool charge(struct ledger_member *m, unsigned gpu, uint64_t bytes, uint64_t token)
{
    struct ledger_grant g;
    assert_int_equal(ledger_charge(&L, m, gpu, bytes, token, &g), 0);
    return g.granted;
}

static void test_exact_byte(void **state)
{
    (void)state;
    struct ledger_member *m;
    assert_int_equal(ledger_join(&L, T, 100, NULL, &m), 0);
    assert_true(charge(m, 0, 8 * GiB - 1, 1));
    assert_false(charge(m, 0, 2, 2));
    assert_true(charge(m, 0, 1, 3));
    assert_int_equal(T->held[0], 8 * GiB);
    assert_false(charge(m, 0, 1, 4));
    assert_int_equal(T->refusals[0], 2);
    assert_int_equal(T->refusals[1], 0);
    /* the other GPU has its own quota */
    assert_true(charge(m, 1, 4 * GiB, 5));
    assert_false(charge(m, 1, 1, 6));
    /* absurd sizes never overflow into a grant */
    assert_false(charge(m, 1, UINT64_MAX, 7));
    struct ledger_grant g;
    assert_int_equal(ledger_charge(&L, m, 2, 1, 8, &g), -EINVAL);
    assert_int_equal(ledger_charge(&L, m, 0, 0, 8, &g), -EINVAL);
}

static void test_shared_quota(void **state)
{
    (void)state;
    struct ledger_member *a, *b, *c;
    assert_int_equal(ledger_join(&L, T, 1, NULL, &a), 0);
    assert_int_equal(ledger_join(&L, T, 2, NULL, &b), 0);
    assert_int_equal(ledger_join(&L, T, 3, NULL, &c), 0);
    assert_true(charge(a, 0, 3 * GiB, 1));
    assert_true(charge(b, 0, 3 * GiB, 1));
    assert_false(charge(c, 0, 2 * GiB + 1, 1));
    assert_true(charge(c, 0, 2 * GiB, 1));
    assert_int_equal(T->held[0], 8 * GiB);
    assert_int_equal(T->n_members, 3);
    assert_int_equal(ledger_check(&L), 0);
}

static void test_commit_actual_and_undo(void **state)
{
    (void)state;
    struct ledger_member *m;
    assert_int_equal(ledger_join(&L, T, 7, NULL, &m), 0);
    assert_true(charge(m, 0, 1 * GiB, 11));
    assert_true(charge(m, 0, 1 * GiB, 12));
    /* the driver rounded up: the actual size counts */
    assert_int_equal(ledger_commit(&L, m, 0, 11, true, GiB + 4096, NULL), 0);
    assert_int_equal(T->held[0], 2 * GiB + 4096);
    /* the driver refused: undone */
    assert_int_equal(ledger_commit(&L, m, 0, 12, false, 0, NULL), 0);
    assert_int_equal(T->held[0], GiB + 4096);
    /* a token settled twice, or never charged, changes nothing */
    assert_int_equal(ledger_commit(&L, m, 0, 12, true, 5 * GiB, NULL), -ENOENT);
    assert_int_equal(ledger_commit(&L, m, 0, 99, true, 5 * GiB, NULL), -ENOENT);
    assert_int_equal(T->held[0], GiB + 4096);
    uint64_t released;
    assert_int_equal(ledger_release(&L, m, 0, GiB, &released), 0);
    assert_int_equal(T->held[0], 4096);
    /* releasing more than held stops at zero */
    assert_int_equal(ledger_release(&L, m, 0, GiB, &released), -ERANGE);
    assert_int_equal(released, 4096);
    assert_int_equal(T->held[0], 0);
}

/* issue 25, item 5: a COMMIT's actual size above the reservation counts only as far
 * as the quota has room; the rest is said to be beyond and is not counted. */
static void test_commit_above_the_room_is_bounded(void **state)
{
    (void)state;
    struct ledger_member *m;
    uint64_t beyond = 7;
    assert_int_equal(ledger_join(&L, T, 7, NULL, &m), 0);
    assert_true(charge(m, 0, 2 * GiB, 1));
    assert_int_equal(ledger_commit(&L, m, 0, 1, true, 1ull << 50, &beyond), 0);
    assert_int_equal(T->held[0], T->quota[0]);
    assert_int_equal(beyond, (1ull << 50) - T->quota[0]);
    assert_true(charge(m, 1, GiB, 2));
    assert_int_equal(ledger_commit(&L, m, 1, 2, true, GiB + 4096, &beyond), 0);
    assert_int_equal(beyond, 0); /* rounded up within the room: counted */
    assert_int_equal(T->held[1], GiB + 4096);
    assert_int_equal(ledger_check(&L), 0);
}

static void test_exit_releases_everything(void **state)
{
    (void)state;
    struct ledger_member *a, *b;
    assert_int_equal(ledger_join(&L, T, 1, NULL, &a), 0);
    assert_int_equal(ledger_join(&L, T, 2, NULL, &b), 0);
    assert_true(charge(a, 0, 3 * GiB, 1));
    assert_int_equal(ledger_commit(&L, a, 0, 1, true, 3 * GiB, NULL), 0);
    assert_true(charge(a, 0, 1 * GiB, 2)); /* a reservation never committed */
    assert_true(charge(a, 1, 2 * GiB, 3));
    assert_true(charge(b, 0, 1 * GiB, 1));
    uint64_t freed[KAIROS_MAX_GPUS];
    assert_ptr_equal(ledger_leave(&L, a, freed), T);
    assert_int_equal(freed[0], 4 * GiB);
    assert_int_equal(freed[1], 2 * GiB);
    assert_int_equal(T->held[0], 1 * GiB);
    assert_int_equal(T->held[1], 0);
    assert_int_equal(T->n_members, 1);
    assert_null(ledger_find_pid(&L, 1));
    assert_ptr_equal(ledger_find_pid(&L, 2), b);
    ledger_leave(&L, b, NULL);
    assert_int_equal(T->held[0], 0);
    assert_int_equal(ledger_tenant_remove(&L, T), 0);
    assert_null(ledger_tenant_find(&L, "alice"));
}

static void test_reattach_no_double_count(void **state)
{
    (void)state;
    /* before the restart: two processes hold 5 GiB and 2 GiB */
    uint64_t held_a[KAIROS_MAX_GPUS] = {5 * GiB};
    uint64_t held_b[KAIROS_MAX_GPUS] = {2 * GiB, 1 * GiB};
    /* a fresh ledger (the restarted daemon) gets them back from the reattaching shims */
    struct ledger_member *a, *b;
    assert_int_equal(ledger_join(&L, T, 1, held_a, &a), 0);
    assert_int_equal(ledger_join(&L, T, 2, held_b, &b), 0);
    assert_int_equal(T->held[0], 7 * GiB);
    assert_int_equal(T->held[1], 1 * GiB);
    assert_true(charge(a, 0, 1 * GiB, 1));
    assert_false(charge(b, 0, 1, 2));
    /* held above quota is accepted (the memory is already taken), charges refused */
    uint64_t big[KAIROS_MAX_GPUS] = {0, 6 * GiB};
    struct ledger_member *c;
    assert_int_equal(ledger_join(&L, T, 3, big, &c), 0);
    assert_int_equal(T->held[1], 7 * GiB);
    assert_false(charge(c, 1, 1, 1));
    ledger_leave(&L, c, NULL);
    assert_int_equal(T->held[1], 1 * GiB);
    assert_int_equal(ledger_check(&L), 0);
}

static void test_lowered_quota(void **state)
{
    (void)state;
    struct ledger_member *m;
    assert_int_equal(ledger_join(&L, T, 1, NULL, &m), 0);
    assert_true(charge(m, 0, 6 * GiB, 1));
    assert_int_equal(ledger_tenant_set_quota(&L, T, 0, 4 * GiB), 1);
    assert_false(charge(m, 0, 1, 2));
    assert_int_equal(ledger_commit(&L, m, 0, 1, true, 6 * GiB, NULL), 0);
    assert_int_equal(ledger_release(&L, m, 0, 3 * GiB, NULL), 0);
    assert_true(charge(m, 0, 1 * GiB, 3));
    assert_false(charge(m, 0, 1, 4));
    assert_int_equal(ledger_tenant_set_quota(&L, T, 0, 8 * GiB), 0);
    assert_int_equal(ledger_tenant_set_quota(&L, T, 5, 8 * GiB), -EINVAL);
    /* a tenant with members cannot be removed */
    assert_int_equal(ledger_tenant_remove(&L, T), -EBUSY);
}

static void test_names_and_limits(void **state)
{
    (void)state;
    assert_true(ledger_name_valid("job-1.a_b"));
    assert_false(ledger_name_valid(""));
    assert_false(ledger_name_valid("-x"));
    assert_false(ledger_name_valid("a b"));
    assert_false(ledger_name_valid("a/b"));
    char longname[KAIROS_NAME_MAX + 1];
    memset(longname, 'a', sizeof longname - 1);
    longname[KAIROS_NAME_MAX] = 0;
    assert_false(ledger_name_valid(longname));
    assert_int_equal(ledger_tenant_add(&L, "alice", NULL, 0, NULL), -EEXIST);
    assert_int_equal(ledger_tenant_add(&L, "bad name", NULL, 0, NULL), -EINVAL);
    struct ledger_member *m;
    assert_int_equal(ledger_join(&L, T, 1, NULL, &m), 0);
    for (unsigned i = 0; i < LEDGER_MAX_RESERVATIONS; i++)
        assert_true(charge(m, 0, 1, i));
    struct ledger_grant g;
    assert_int_equal(ledger_charge(&L, m, 0, 1, 9999, &g), -ENOSPC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exact_byte, setup, ledger_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_shared_quota, setup, ledger_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_commit_actual_and_undo, setup,
                                        ledger_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_commit_above_the_room_is_bounded, setup,
                                        ledger_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_exit_releases_everything, setup,
                                        ledger_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reattach_no_double_count, setup,
                                        ledger_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_lowered_quota, setup, ledger_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_names_and_limits, setup, ledger_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
