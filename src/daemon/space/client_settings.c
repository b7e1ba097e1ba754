/* client_settings.c - an MPS client's priority from its domain's tenants and its
 * thread percentage from its tenant's (see client_settings.h). */
#include "daemon/space/client_settings.h"

#include <string.h>

/* latency 2, normal 1, batch 0: higher runs first. */
static int rank(const struct compute_book *cb, const struct ledger_tenant *t)
{
    const struct compute_policies *c = compute_book_find(cb, t->id);
    for (unsigned g = 0; c && g < KAIROS_MAX_GPUS; g++) {
        if (!c->has[g])
            continue;
        switch (c->pol[g].prio) {
        case SCHED_PRIO_LATENCY: return 2;
        case SCHED_PRIO_BATCH: return 0;
        default: return 1;
        }
    }
    return 1;
}

unsigned space_client_threads(const struct settings_book *sb, const struct ledger_tenant *t)
{
    unsigned pct = settings_book_of(sb, t->id)->sms_pct;
    return pct >= 1 && pct <= 100 ? pct : SPACE_THREAD_PCT;
}

unsigned space_client_priority(const struct ledger *l, const struct compute_book *cb,
                               const struct settings_book *sb, const struct ledger_tenant *t)
{
    int own = rank(cb, t), top = own;
    const char *domain = settings_book_of(sb, t->id)->fault_domain;
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct ledger_tenant *o = l->tenants[i];
        const char *theirs = settings_book_of(sb, o->id)->fault_domain;
        if (theirs[0] && !strcmp(theirs, domain) && rank(cb, o) > top)
            top = rank(cb, o);
    }
    return own < top ? 1u : 0u;
}
