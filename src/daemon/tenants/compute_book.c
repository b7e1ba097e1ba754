/* compute_book.c - the tenants' compute policies by tenant id: an id book (id_book.h) of the
 * tenants that have one (see compute_book.h). */
#include "daemon/tenants/compute_book.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void compute_book_init(struct compute_book *b)
{
    id_book_init(&b->ids, sizeof(struct compute_entry), COMPUTE_BOOK_MAX);
}

void compute_book_fini(struct compute_book *b)
{
    id_book_fini(&b->ids);
}

const struct compute_policies *compute_book_find(const struct compute_book *b, uint32_t tenant)
{
    const struct compute_entry *e = id_book_find(&b->ids, tenant);
    return e ? &e->c : NULL;
}

bool compute_book_policy(const struct compute_book *b, uint32_t tenant, unsigned gpu,
                         struct sched_policy *out)
{
    const struct compute_entry *e = gpu < KAIROS_MAX_GPUS ? id_book_find(&b->ids, tenant)
                                                          : NULL;
    if (!e || !e->c.has[gpu])
        return false;
    *out = e->c.pol[gpu];
    return true;
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
    id_book_drop(&b->ids, tenant);
}

int compute_book_set(struct compute_book *b, uint32_t tenant, unsigned gpu,
                     const struct sched_policy *pol)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return -EINVAL;
    int rc = 0;
    struct compute_entry *e = pol ? id_book_get(&b->ids, tenant, &rc)
                                   : id_book_find(&b->ids, tenant);
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
    struct compute_policies copy = *c; /* c may be the entry itself, which id_book_get moves */
    struct compute_entry *e = id_book_get(&b->ids, tenant, &rc);
    if (!e)
        return rc;
    e->c = copy;
    return 0;
}
