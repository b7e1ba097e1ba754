/* test_mps_clients.c - an MPS server's client list read against the fault domain's
 * members (space/mps_clients.h): a member of a tenant of the domain is no stranger; a
 * member of another domain's tenant, of a tenant of no domain, or no member at all is
 * one; lines that are no pid are skipped, and the count goes on past the room given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "daemon/memory/ledger.h"
#include "daemon/space/mps_clients.h"
#include "daemon/tenants/settings_book.h"

static struct ledger l;
static struct settings_book sb; /* the tenants' fault domains */

static void member(const char *tenant, const char *domain, uint32_t pid)
{
    uint64_t quota[KAIROS_MAX_GPUS] = {1 << 20};
    struct ledger_tenant *t = ledger_tenant_find(&l, tenant);
    if (!t) {
        assert_int_equal(ledger_tenant_add(&l, tenant, quota, 0, &t), 0);
        struct tenant_settings *r;
        assert_int_equal(settings_book_get(&sb, t->id, &r), 0);
        snprintf(r->fault_domain, sizeof r->fault_domain, "%s", domain);
    }
    struct ledger_member *m;
    assert_int_equal(ledger_join(&l, t, pid, NULL, &m), 0);
}

static int setup(void **state)
{
    (void)state;
    assert_int_equal(ledger_init(&l, 1), 0);
    settings_book_init(&sb);
    member("a", "infer", 10);
    member("b", "infer", 11);
    member("other", "batch", 20);
    member("plain", "", 30);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    while (l.members)
        ledger_leave(&l, l.members, NULL);
    ledger_fini(&l);
    settings_book_fini(&sb);
    return 0;
}

/* The strangers of a client list's text, as mps_clients.c reads an answer. */
static size_t strangers(const char *domain, const char *answer, uint32_t *out, size_t cap)
{
    uint32_t pids[16];
    size_t n = mps_clients_pids(answer, pids, 16);
    return mps_clients_strangers(&l, &sb, domain, pids, n, out, cap);
}

static void test_members_of_the_domain_only(void **state)
{
    (void)state;
    uint32_t out[8];
    size_t n = strangers("infer", "10\n11\n20\n30\n40\n", out, 8);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 20); /* another domain's */
    assert_int_equal(out[1], 30); /* no domain's */
    assert_int_equal(out[2], 40); /* no member */
    assert_int_equal(strangers("batch", "20\n", out, 8), 0);
    assert_int_equal(strangers("infer", "", out, 8), 0);
}

static void test_what_is_no_pid_is_skipped(void **state)
{
    (void)state;
    uint32_t out[8];
    size_t n = strangers("infer", "x\n-5\n0\n12abc\n99999999999\n 41\n42", out, 8);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 42); /* the last line needs no newline */
}

static void test_the_count_goes_on_past_the_room(void **state)
{
    (void)state;
    uint32_t out[2];
    assert_int_equal(strangers("infer", "40\n41\n42\n43\n", out, 2), 4);
    assert_int_equal(out[1], 41);
}

/* The pids read from an answer stop at the room given (the answer is bounded too). */
static void test_the_pids_read_stop_at_the_room(void **state)
{
    (void)state;
    uint32_t pids[2];
    assert_int_equal(mps_clients_pids("40\nx\n41\n42\n", pids, 2), 2);
    assert_int_equal(pids[0], 40);
    assert_int_equal(pids[1], 41);
    assert_int_equal(mps_clients_pids("", pids, 2), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_members_of_the_domain_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_what_is_no_pid_is_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_count_goes_on_past_the_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_pids_read_stop_at_the_room, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
