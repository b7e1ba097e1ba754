/* test_settings_book.c - the tenants' settings records by tenant id (settings_book.h):
 * each record found by its id whatever the order they came in, a tenant without one
 * reading the defaults, a record made once and kept where it is while others come and
 * go, a tenant dropped taking only its own, and the bound (no more records than
 * SETTINGS_BOOK_MAX). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/tenants/settings_book.h"

/* tenant's record, made if need be, in the domain named "d<tenant>". */
static struct tenant_settings *put(struct settings_book *b, uint32_t tenant)
{
    struct tenant_settings *r;
    assert_int_equal(settings_book_get(b, tenant, &r), 0);
    assert_non_null(r);
    assert_int_equal(r->tenant, tenant);
    snprintf(r->fault_domain, sizeof r->fault_domain, "d%u", tenant);
    return r;
}

static void test_found_by_id(void **state)
{
    (void)state;
    struct settings_book b;
    settings_book_init(&b);
    static const uint32_t ids[] = {7, 3, 12, 1, 9}; /* not in order */
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        put(&b, ids[i]);
    assert_int_equal(b.ids.n, 5);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char want[16];
        snprintf(want, sizeof want, "d%u", ids[i]);
        assert_string_equal(settings_book_of(&b, ids[i])->fault_domain, want);
        assert_ptr_equal(settings_book_entry(&b, ids[i]), settings_book_of(&b, ids[i]));
    }
    for (size_t i = 1; i < b.ids.n; i++) /* sorted: the lookup's binary search holds */
        assert_true(((struct settings_entry *)id_book_at(&b.ids, i - 1))->tenant <
                    ((struct settings_entry *)id_book_at(&b.ids, i))->tenant);
    settings_book_fini(&b);
    assert_int_equal(b.ids.n, 0);
}

static void test_defaults_without_a_record(void **state)
{
    (void)state;
    struct settings_book b;
    settings_book_init(&b);
    const struct tenant_settings *d = settings_book_of(&b, 4); /* an empty book */
    assert_non_null(d);
    assert_string_equal(d->fault_domain, "");
    assert_false(d->managed_charge);
    assert_int_equal(d->members.n_users + d->members.n_groups + d->members.n_cgroups, 0);
    assert_int_equal(d->src.members, SETTING_UNSET);
    assert_int_equal(d->src.quota[0], SETTING_UNSET);
    assert_int_equal(d->owner_pid, 0);
    assert_false(d->owner_alive);
    assert_null(settings_book_entry(&b, 4));
    put(&b, 5);
    assert_string_equal(settings_book_of(&b, 4)->fault_domain, ""); /* a neighbour's: not */
    assert_string_equal(settings_book_of(&b, 6)->fault_domain, "");
    assert_null(settings_book_entry(&b, 6));
    assert_int_equal(b.ids.n, 1);                                         /* reads make none */
    settings_book_fini(&b);
}

static void test_made_once_and_kept_in_place(void **state)
{
    (void)state;
    struct settings_book b;
    settings_book_init(&b);
    struct tenant_settings *r = put(&b, 50), *again;
    r->managed_charge = true;
    r->owner_pid = 4242;
    for (uint32_t id = 1; id < 50; id++) /* many before it: the array grows and shifts */
        put(&b, id);
    assert_int_equal(settings_book_get(&b, 50, &again), 0);
    assert_ptr_equal(again, r);          /* the same record, where it was */
    assert_true(again->managed_charge);  /* and what it held */
    assert_int_equal(again->owner_pid, 4242);
    assert_int_equal(b.ids.n, 50);
    settings_book_fini(&b);
}

static void test_drop_takes_only_its_own(void **state)
{
    (void)state;
    struct settings_book b;
    settings_book_init(&b);
    for (uint32_t id = 1; id <= 5; id++)
        put(&b, id);
    settings_book_drop(&b, 3);
    assert_int_equal(b.ids.n, 4);
    assert_null(settings_book_entry(&b, 3));
    assert_string_equal(settings_book_of(&b, 3)->fault_domain, ""); /* the defaults again */
    for (uint32_t id = 1; id <= 5; id++)
        if (id != 3)
            assert_non_null(settings_book_entry(&b, id));
    settings_book_drop(&b, 3);  /* gone already: nothing */
    settings_book_drop(&b, 99); /* never there: nothing */
    assert_int_equal(b.ids.n, 4);
    put(&b, 3);                 /* made again: from the defaults */
    assert_false(settings_book_of(&b, 3)->managed_charge);
    settings_book_fini(&b);
}

static void test_bounds(void **state)
{
    (void)state;
    struct settings_book b;
    struct tenant_settings *r;
    settings_book_init(&b);
    for (uint32_t id = 1; id <= SETTINGS_BOOK_MAX; id++)
        assert_int_equal(settings_book_get(&b, id, &r), 0);
    assert_int_equal(b.ids.n, SETTINGS_BOOK_MAX);
    assert_int_equal(settings_book_get(&b, SETTINGS_BOOK_MAX + 1, &r), -ENOSPC);
    assert_null(r);
    assert_int_equal(b.ids.n, SETTINGS_BOOK_MAX);
    assert_int_equal(settings_book_get(&b, 1, &r), 0); /* one it has: found, not made */
    settings_book_drop(&b, 1);
    assert_int_equal(settings_book_get(&b, SETTINGS_BOOK_MAX + 1, &r), 0); /* room again */
    settings_book_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_found_by_id),
        cmocka_unit_test(test_defaults_without_a_record),
        cmocka_unit_test(test_made_once_and_kept_in_place),
        cmocka_unit_test(test_drop_takes_only_its_own),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
