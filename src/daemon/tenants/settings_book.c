/* settings_book.c - the tenants' settings and owners by tenant id: a sorted array of
 * records allocated one by one, found by binary search (see settings_book.h). */
#include "daemon/tenants/settings_book.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct tenant_settings defaults; /* all zero: see settings_book.h */

void settings_book_init(struct settings_book *b)
{
    memset(b, 0, sizeof *b);
}

void settings_book_fini(struct settings_book *b)
{
    for (size_t i = 0; i < b->n; i++)
        free(b->v[i]);
    free(b->v);
    memset(b, 0, sizeof *b);
}

/* Where tenant's record is, or would be put to keep the book sorted. */
static size_t book_place(const struct settings_book *b, uint32_t tenant)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->v[mid]->tenant < tenant)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

struct tenant_settings *settings_book_entry(struct settings_book *b, uint32_t tenant)
{
    size_t i = book_place(b, tenant);
    return i < b->n && b->v[i]->tenant == tenant ? b->v[i] : NULL;
}

const struct tenant_settings *settings_book_of(const struct settings_book *b, uint32_t tenant)
{
    size_t i = book_place(b, tenant);
    return i < b->n && b->v[i]->tenant == tenant ? b->v[i] : &defaults;
}

/* Room for one more record pointer: 0 or -ENOMEM. */
static int book_grow(struct settings_book *b)
{
    if (b->n < b->cap)
        return 0;
    size_t cap = b->cap ? 2 * b->cap : 16;
    struct tenant_settings **v = realloc(b->v, cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    b->v = v;
    b->cap = cap;
    return 0;
}

int settings_book_get(struct settings_book *b, uint32_t tenant, struct tenant_settings **out)
{
    size_t i = book_place(b, tenant);
    *out = NULL;
    if (i < b->n && b->v[i]->tenant == tenant) {
        *out = b->v[i];
        return 0;
    }
    if (b->n >= SETTINGS_BOOK_MAX)
        return -ENOSPC;
    int rc = book_grow(b);
    struct tenant_settings *s = rc ? NULL : calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->tenant = tenant;
    memmove(&b->v[i + 1], &b->v[i], (b->n - i) * sizeof *b->v);
    b->v[i] = s;
    b->n++;
    *out = s;
    return 0;
}

void settings_book_drop(struct settings_book *b, uint32_t tenant)
{
    size_t i = book_place(b, tenant);
    if (i >= b->n || b->v[i]->tenant != tenant)
        return;
    free(b->v[i]);
    memmove(&b->v[i], &b->v[i + 1], (b->n - i - 1) * sizeof *b->v);
    b->n--;
}
