/* client_settings.c - an MPS client's priority from its domain's tenants (see
 * client_settings.h). */
#include "daemon/space/client_settings.h"

#include <string.h>

/* latency 2, normal 1, batch 0: higher runs first. */
static int rank(const struct ledger_tenant *t)
{
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        if (!t->has_compute[g])
            continue;
        switch (t->compute[g].prio) {
        case SCHED_PRIO_LATENCY: return 2;
        case SCHED_PRIO_BATCH: return 0;
        default: return 1;
        }
    }
    return 1;
}

unsigned space_client_priority(const struct ledger *l, const struct ledger_tenant *t)
{
    int top = rank(t);
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct ledger_tenant *o = l->tenants[i];
        if (o->fault_domain[0] && !strcmp(o->fault_domain, t->fault_domain) && rank(o) > top)
            top = rank(o);
    }
    return rank(t) < top ? 1u : 0u;
}
