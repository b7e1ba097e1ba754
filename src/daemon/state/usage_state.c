/* usage_state.c - every tenant's chargeback counters, by the ids of the ledger's
 * tenants: the memory integral, what a save publishes, and the state file's "usage"
 * section, read entry by entry (see usage_state.h). */
#include "daemon/state/usage_state.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Drops the counters of the tenants l no longer has (out of memory: kept, to be
 * dropped at a later tick). */
static void keep_live(struct usage_book *b, const struct ledger *l)
{
    uint32_t *live = malloc((l->n_tenants ? l->n_tenants : 1) * sizeof *live);
    if (!live)
        return;
    for (size_t i = 0; i < l->n_tenants; i++)
        live[i] = l->tenants[i]->id;
    usage_book_keep(b, live, l->n_tenants);
    free(live);
}

void usage_state_tick(struct usage_book *b, const struct ledger *l, double now, double dt_s)
{
    keep_live(b, l);
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct ledger_tenant *t = l->tenants[i];
        struct usage *u = usage_book_get(b, t->id);
        if (!u) /* out of memory: its counters begin at a later tick */
            continue;
        usage_begin(u, now);
        usage_add_memory(u, t->held, l->n_gpus, dt_s);
    }
}

void usage_state_published(struct usage_book *b)
{
    usage_book_publish(b);
}

json_t *usage_state_json(const struct usage_book *b, const struct ledger *l,
                         const struct ledger_tenant *skip)
{
    json_t *tenants = json_object();
    json_t *root = json_object();
    if (!tenants || !root) {
        json_decref(tenants);
        json_decref(root);
        return NULL;
    }
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct ledger_tenant *t = l->tenants[i];
        const struct usage *u = usage_book_find(b, t->id);
        if (t == skip || !u || u->since <= 0) /* not begun: nothing counted yet */
            continue;
        json_t *one = usage_json(u, t->refusals, l->n_gpus);
        if (!one || json_object_set_new(tenants, t->name, one)) {
            json_decref(tenants);
            json_decref(root);
            return NULL;
        }
    }
    json_object_set_new(root, "tenants", tenants);
    return root;
}

void usage_state_load(json_t *j, struct usage_book *b, struct ledger *l, double now,
                      void (*warn)(void *ctx, const char *msg), void *warn_ctx)
{
    if (!j)
        return;
    json_t *tenants = json_object_get(j, "tenants");
    if (!json_is_object(j) || !json_is_object(tenants)) {
        if (warn)
            warn(warn_ctx, "usage: the section is not {\"tenants\": {NAME: counters}}; the "
                 "counters begin again from 0");
        return;
    }
    const char *name;
    json_t *one;
    json_object_foreach(tenants, name, one) {
        struct ledger_tenant *t = ledger_tenant_find(l, name);
        if (!t)
            continue; /* a tenant gone since (removed, or its entry set aside) */
        char why[256], msg[512];
        struct usage u;
        uint64_t refusals[KAIROS_MAX_GPUS] = {0};
        memset(&u, 0, sizeof u);
        if (!usage_parse(one, l->n_gpus, now, &u, refusals, why, sizeof why)) {
            struct usage *kept = usage_book_get(b, t->id);
            if (kept) /* out of memory: its counters begin again, its refusals kept */
                *kept = u;
            memcpy(t->refusals, refusals, sizeof t->refusals);
        } else if (warn) { /* all or nothing: kept whole, or begun again with a new since */
            snprintf(msg, sizeof msg, "usage of tenant '%s': %s; its counters begin again from "
                     "0 (with a new creation time), the other tenants' are kept", t->name, why);
            warn(warn_ctx, msg);
        }
    }
}
