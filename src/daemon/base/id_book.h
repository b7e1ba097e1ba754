/* id_book.h - records kept apart from a tenant's other records and joined to them by
 * the tenant's id (ledger_tenant.id, never reused by a kairosd): an array of entries
 * of one size, each beginning with its uint32_t id, sorted by id, so that a lookup is
 * a binary search. The books of the chargeback counters (state/usage.h), of the
 * compute policies (tenants/compute_book.h) and of the tenants' settings
 * (tenants/settings_book.h) are typed wrappers of one.
 *
 * Pure: no I/O, no globals. Thread rules: a book belongs to one thread.
 */
#ifndef KAIROS_DAEMON_ID_BOOK_H
#define KAIROS_DAEMON_ID_BOOK_H

#include <stddef.h>
#include <stdint.h>

struct id_book {
    unsigned char *v;
    size_t n, cap;
    size_t size; /* of an entry, whose first member is its uint32_t id */
    size_t max;  /* entries at most */
};

/* An empty book of entries of size bytes (at least a uint32_t), max at most. */
void id_book_init(struct id_book *b, size_t size, size_t max);
void id_book_fini(struct id_book *b);

/* The entry of id, or NULL. */
void *id_book_find(const struct id_book *b, uint32_t id);
/* The entry of id, made (zeroed, its id set) when there is none; NULL with *rc
 * -ENOSPC (max entries already) or -ENOMEM. A new entry moves those after it: a
 * pointer from the book is good until the next id_book_get or drop. */
void *id_book_get(struct id_book *b, uint32_t id, int *rc);
/* Forgets id's entry, if any. */
void id_book_drop(struct id_book *b, uint32_t id);
/* Drops every entry whose id is not among the n ids of live (any order). 0, or
 * -ENOMEM (nothing dropped). */
int id_book_keep(struct id_book *b, const uint32_t *live, size_t n);

/* The i-th entry in id order (i < b->n). */
void *id_book_at(const struct id_book *b, size_t i);

#endif /* KAIROS_DAEMON_ID_BOOK_H */
