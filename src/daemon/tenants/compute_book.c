/* compute_book.c - the tenants' compute policies by tenant id: a sorted array of the
 * tenants that have one, found by binary search (see compute_book.h). */
#include "daemon/tenants/compute_book.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void compute_book_init(struct compute_book *b)
{
    memset(b, 0, sizeof *b);
}

void compute_book_fini(struct compute_book *b)
{
    free(b->v);
    memset(b, 0, sizeof *b);
}

/* Where tenant's entry is, or would be put to keep the book sorted. */
static size_t book_place(const struct compute_book *b, uint32_t tenant)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->v[mid].tenant < tenant)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct compute_entry *book_entry(const struct compute_book *b, uint32_t tenant)
{
    size_t i = book_place(b, tenant);
    return i < b->n && b->v[i].tenant == tenant ? &b->v[i] : NULL;
}

const struct compute_policies *compute_book_find(const struct compute_book *b, uint32_t tenant)
{
    const struct compute_entry *e = book_entry(b, tenant);
    return e ? &e->c : NULL;
}

bool compute_book_policy(const struct compute_book *b, uint32_t tenant, unsigned gpu,
                         struct sched_policy *out)
{
    const struct compute_entry *e = gpu < KAIROS_MAX_GPUS ? book_entry(b, tenant) : NULL;
    if (!e || !e->c.has[gpu])
        return false;
    *out = e->c.pol[gpu];
    return true;
}

/* tenant's entry, made (without policies) when it has none; NULL with *rc set. */
static struct compute_entry *book_get(struct compute_book *b, uint32_t tenant, int *rc)
{
    size_t i = book_place(b, tenant);
    if (i < b->n && b->v[i].tenant == tenant)
        return &b->v[i];
    if (b->n >= COMPUTE_BOOK_MAX) {
        *rc = -ENOSPC;
        return NULL;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 16;
        struct compute_entry *v = realloc(b->v, cap * sizeof *v);
        if (!v) {
            *rc = -ENOMEM;
            return NULL;
        }
        b->v = v;
        b->cap = cap;
    }
    memmove(&b->v[i + 1], &b->v[i], (b->n - i) * sizeof *b->v);
    b->n++;
    memset(&b->v[i], 0, sizeof b->v[i]);
    b->v[i].tenant = tenant;
    return &b->v[i];
}

static bool has_any(const struct compute_policies *c)
{
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
        if (c->has[g])
            return true;
    return false;
}

void compute_book_drop(struct compute_book *b, uint32_t tenant)
{
    size_t i = book_place(b, tenant);
    if (i >= b->n || b->v[i].tenant != tenant)
        return;
    memmove(&b->v[i], &b->v[i + 1], (b->n - i - 1) * sizeof *b->v);
    b->n--;
}

int compute_book_set(struct compute_book *b, uint32_t tenant, unsigned gpu,
                     const struct sched_policy *pol)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return -EINVAL;
    int rc = 0;
    struct compute_entry *e = pol ? book_get(b, tenant, &rc) : book_entry(b, tenant);
    if (!e)
        return rc;
    e->c.has[gpu] = pol != NULL;
    e->c.pol[gpu] = pol ? *pol : (struct sched_policy){0};
    if (!pol && !has_any(&e->c))
        compute_book_drop(b, tenant);
    return 0;
}

int compute_book_put(struct compute_book *b, uint32_t tenant, const struct compute_policies *c)
{
    if (!c || !has_any(c)) {
        compute_book_drop(b, tenant);
        return 0;
    }
    int rc = 0;
    struct compute_policies copy = *c; /* c may be the entry itself, which book_get moves */
    struct compute_entry *e = book_get(b, tenant, &rc);
    if (!e)
        return rc;
    e->c = copy;
    return 0;
}
