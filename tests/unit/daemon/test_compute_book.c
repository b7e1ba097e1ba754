/* test_compute_book.c - the tenants' compute policies by tenant id (compute_book.h):
 * each tenant's policies found by its id whatever the order they came in, a policy
 * set and cleared GPU by GPU, a tenant without any left having no entry, a tenant
 * dropped taking only its own, a whole entry put back as it was, and the bounds (a
 * GPU beyond KAIROS_MAX_GPUS, no more tenants than COMPUTE_BOOK_MAX). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon/tenants/compute_book.h"

static struct sched_policy pol_of(double share)
{
    return (struct sched_policy){.share = share, .limit = 0, .prio = SCHED_PRIO_NORMAL};
}

static void test_found_by_id(void **state)
{
    (void)state;
    struct compute_book b;
    struct sched_policy out;
    compute_book_init(&b);
    static const uint32_t ids[] = {7, 3, 12, 1, 9}; /* not in order */
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        struct sched_policy p = pol_of(0.01 * ids[i]);
        assert_int_equal(compute_book_set(&b, ids[i], ids[i] % KAIROS_MAX_GPUS, &p), 0);
    }
    assert_int_equal(b.ids.n, 5);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        unsigned g = ids[i] % KAIROS_MAX_GPUS;
        assert_true(compute_book_policy(&b, ids[i], g, &out));
        assert_float_equal(out.share, 0.01 * ids[i], 1e-12);
        assert_false(compute_book_policy(&b, ids[i], (g + 1) % KAIROS_MAX_GPUS, &out));
        const struct compute_policies *c = compute_book_find(&b, ids[i]);
        assert_non_null(c);
        assert_true(c->has[g]);
    }
    assert_null(compute_book_find(&b, 2));    /* no such tenant */
    assert_false(compute_book_policy(&b, 2, 0, &out));
    for (size_t i = 1; i < b.ids.n; i++)          /* sorted: the lookup's binary search holds */
        assert_true(((struct compute_entry *)id_book_at(&b.ids, i - 1))->tenant <
                    ((struct compute_entry *)id_book_at(&b.ids, i))->tenant);
    compute_book_fini(&b);
}

static void test_set_and_clear(void **state)
{
    (void)state;
    struct compute_book b;
    struct sched_policy p = pol_of(0.3), q = pol_of(0.6), out;
    compute_book_init(&b);
    assert_int_equal(compute_book_set(&b, 4, 0, &p), 0);
    assert_int_equal(compute_book_set(&b, 4, 1, &p), 0);
    assert_int_equal(compute_book_set(&b, 4, 1, &q), 0); /* replaced */
    assert_int_equal(b.ids.n, 1);
    assert_true(compute_book_policy(&b, 4, 1, &out));
    assert_float_equal(out.share, 0.6, 1e-12);
    assert_int_equal(compute_book_set(&b, 4, 0, NULL), 0);
    assert_false(compute_book_policy(&b, 4, 0, &out));
    assert_non_null(compute_book_find(&b, 4)); /* still one on GPU 1 */
    assert_int_equal(compute_book_set(&b, 4, 1, NULL), 0);
    assert_null(compute_book_find(&b, 4));     /* none left: no entry */
    assert_int_equal(b.ids.n, 0);
    assert_int_equal(compute_book_set(&b, 5, 0, NULL), 0); /* clearing none: nothing made */
    assert_int_equal(b.ids.n, 0);
    compute_book_fini(&b);
}

static void test_drop_takes_only_its_own(void **state)
{
    (void)state;
    struct compute_book b;
    struct sched_policy p = pol_of(0.2), out;
    compute_book_init(&b);
    for (uint32_t id = 1; id <= 3; id++)
        assert_int_equal(compute_book_set(&b, id, 0, &p), 0);
    compute_book_drop(&b, 2);
    assert_null(compute_book_find(&b, 2));
    assert_true(compute_book_policy(&b, 1, 0, &out));
    assert_true(compute_book_policy(&b, 3, 0, &out));
    compute_book_drop(&b, 2); /* gone already: nothing */
    compute_book_drop(&b, 99);
    assert_int_equal(b.ids.n, 2);
    compute_book_fini(&b);
}

static void test_put_back(void **state)
{
    (void)state;
    struct compute_book b;
    struct sched_policy p = pol_of(0.25), q = pol_of(0.5), out;
    compute_book_init(&b);
    assert_int_equal(compute_book_set(&b, 8, 2, &p), 0);
    struct compute_policies was = *compute_book_find(&b, 8);
    assert_int_equal(compute_book_set(&b, 8, 2, &q), 0);
    assert_int_equal(compute_book_set(&b, 8, 3, &q), 0);
    assert_int_equal(compute_book_put(&b, 8, &was), 0); /* an undo */
    assert_true(compute_book_policy(&b, 8, 2, &out));
    assert_float_equal(out.share, 0.25, 1e-12);
    assert_false(compute_book_policy(&b, 8, 3, &out));
    struct compute_policies none = {0};
    assert_int_equal(compute_book_put(&b, 8, &none), 0);
    assert_null(compute_book_find(&b, 8));
    assert_int_equal(compute_book_put(&b, 9, &was), 0); /* a new tenant's, whole */
    assert_true(compute_book_policy(&b, 9, 2, &out));
    assert_int_equal(compute_book_put(&b, 9, NULL), 0);
    assert_int_equal(b.ids.n, 0);
    compute_book_fini(&b);
}

static void test_bounds(void **state)
{
    (void)state;
    struct compute_book b;
    struct sched_policy p = pol_of(0.0001), out;
    compute_book_init(&b);
    assert_int_equal(compute_book_set(&b, 1, KAIROS_MAX_GPUS, &p), -EINVAL);
    assert_false(compute_book_policy(&b, 1, KAIROS_MAX_GPUS, &out));
    assert_int_equal(b.ids.n, 0);
    for (uint32_t id = 1; id <= COMPUTE_BOOK_MAX; id++)
        assert_int_equal(compute_book_set(&b, id, 0, &p), 0);
    assert_int_equal(compute_book_set(&b, COMPUTE_BOOK_MAX + 1, 0, &p), -ENOSPC);
    assert_int_equal(compute_book_put(&b, COMPUTE_BOOK_MAX + 1, compute_book_find(&b, 1)),
                     -ENOSPC);
    assert_int_equal(compute_book_set(&b, 1, 1, &p), 0); /* one already there: room */
    compute_book_drop(&b, 1);                            /* a tenant goes: room again */
    assert_int_equal(compute_book_set(&b, COMPUTE_BOOK_MAX + 1, 0, &p), 0);
    assert_true(compute_book_policy(&b, COMPUTE_BOOK_MAX, 0, &out));
    assert_int_equal(b.ids.n, COMPUTE_BOOK_MAX);
    compute_book_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_found_by_id),
        cmocka_unit_test(test_set_and_clear),
        cmocka_unit_test(test_drop_takes_only_its_own),
        cmocka_unit_test(test_put_back),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
