/* test_id_book.c - entries kept by tenant id (base/id_book.h): found again whatever the
 * order they were made in, their contents moved whole when others come and go, dropped
 * and kept as told, and no entry beyond the book's bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>

#include "daemon/base/id_book.h"

struct entry {
    uint32_t id;
    uint64_t payload[3];
};

static struct entry *get(struct id_book *b, uint32_t id)
{
    int rc = 0;
    struct entry *e = id_book_get(b, id, &rc);
    assert_non_null(e);
    assert_int_equal(rc, 0);
    return e;
}

static void test_found_sorted_and_whole(void **state)
{
    (void)state;
    struct id_book b;
    id_book_init(&b, sizeof(struct entry), 100);
    static const uint32_t ids[] = {40, 7, 99, 1, 23, 7};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        struct entry *e = get(&b, ids[i]);
        assert_int_equal(e->id, ids[i]);
        e->payload[2] += ids[i]; /* 7 twice: the same entry */
    }
    assert_int_equal(b.n, 5);
    for (size_t i = 1; i < b.n; i++)
        assert_true(((struct entry *)id_book_at(&b, i - 1))->id <
                    ((struct entry *)id_book_at(&b, i))->id);
    assert_int_equal(((struct entry *)id_book_find(&b, 7))->payload[2], 14);
    assert_int_equal(((struct entry *)id_book_find(&b, 99))->payload[2], 99);
    assert_null(id_book_find(&b, 8));
    id_book_drop(&b, 23);
    id_book_drop(&b, 23); /* gone already: nothing */
    assert_null(id_book_find(&b, 23));
    assert_int_equal(((struct entry *)id_book_find(&b, 40))->payload[2], 40);
    static const uint32_t live[] = {99, 1, 5};
    assert_int_equal(id_book_keep(&b, live, 3), 0);
    assert_int_equal(b.n, 2);
    assert_int_equal(((struct entry *)id_book_find(&b, 1))->payload[2], 1);
    assert_int_equal(((struct entry *)id_book_find(&b, 99))->payload[2], 99);
    id_book_fini(&b);
    assert_int_equal(b.n, 0);
}

static void test_no_entry_beyond_the_bound(void **state)
{
    (void)state;
    struct id_book b;
    id_book_init(&b, sizeof(struct entry), 20);
    for (uint32_t id = 1; id <= 20; id++)
        get(&b, id * 3);
    int rc = 0;
    assert_null(id_book_get(&b, 1000, &rc));
    assert_int_equal(rc, -ENOSPC);
    assert_non_null(id_book_get(&b, 30, &rc)); /* one it has: found, not made */
    id_book_drop(&b, 3);
    get(&b, 1000); /* room again */
    assert_int_equal(b.n, 20);
    id_book_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_found_sorted_and_whole),
        cmocka_unit_test(test_no_entry_beyond_the_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
