/* settings_book.c - the tenants' settings and owners by tenant id: an id book
 * (id_book.h) of records allocated one by one (see settings_book.h). */
#include "daemon/tenants/settings_book.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct tenant_settings defaults; /* all zero: see settings_book.h */

void settings_book_init(struct settings_book *b)
{
    id_book_init(&b->ids, sizeof(struct settings_entry), SETTINGS_BOOK_MAX);
}

void settings_book_fini(struct settings_book *b)
{
    for (size_t i = 0; i < b->ids.n; i++)
        free(((struct settings_entry *)id_book_at(&b->ids, i))->rec);
    id_book_fini(&b->ids);
}

struct tenant_settings *settings_book_entry(struct settings_book *b, uint32_t tenant)
{
    struct settings_entry *e = id_book_find(&b->ids, tenant);
    return e ? e->rec : NULL;
}

const struct tenant_settings *settings_book_of(const struct settings_book *b, uint32_t tenant)
{
    const struct settings_entry *e = id_book_find(&b->ids, tenant);
    return e ? e->rec : &defaults;
}

int settings_book_get(struct settings_book *b, uint32_t tenant, struct tenant_settings **out)
{
    *out = settings_book_entry(b, tenant);
    if (*out)
        return 0;
    struct tenant_settings *rec = calloc(1, sizeof *rec);
    if (!rec)
        return -ENOMEM;
    int rc = -ENOMEM;
    struct settings_entry *e = id_book_get(&b->ids, tenant, &rc);
    if (!e) {
        free(rec);
        return rc;
    }
    rec->tenant = tenant;
    e->rec = *out = rec;
    return 0;
}

void settings_book_drop(struct settings_book *b, uint32_t tenant)
{
    struct settings_entry *e = id_book_find(&b->ids, tenant);
    if (!e)
        return;
    free(e->rec);
    id_book_drop(&b->ids, tenant);
}
