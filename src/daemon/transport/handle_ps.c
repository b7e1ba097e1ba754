/* handle_ps.c - PS: the listing of every tenant, one PS_REPLY each, paged while the
 * peer reads (see handle_ps.h). */
#include "daemon/transport/handle_ps.h"

#include <string.h>

#include "daemon/memory/imports.h"
#include "daemon/space/faults.h"
#include "daemon/time/timeshare.h"

/* The first tenant whose id is at least id (ids grow in the ledger's order). */
static size_t tenant_from(const struct ledger *l, uint32_t id)
{
    size_t lo = 0, hi = l->n_tenants;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->tenants[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The tenant's fault domain, its part of the SMs and the GPU faults kairosd
 * attributed to it. */
static void ps_fill_faults(const struct services *sv, const struct ledger_tenant *t,
                           struct kairos_ps_reply *p)
{
    const struct tenant_settings *s = tenants_settings_of(sv->ts, t);
    memcpy(p->fault_domain, s->fault_domain, sizeof p->fault_domain);
    p->sm_percent = s->sms_pct;
    const struct fault_record *r = sv->faults ? faults_find(sv->faults, t->name) : NULL;
    if (!r)
        return;
    p->faults_caused = r->caused;
    p->faults_lost = r->lost;
    p->last_fault_xid = r->last_xid;
    p->last_fault_gpu = r->last_gpu;
    p->last_fault_unix_ms = r->last_unix_ms;
    p->last_fault_caused = r->last_caused;
}

/* One tenant's reply; its processes' pids only for administrators and for the
 * asker's own uid (others learn the count, not who). */
static void ps_fill(struct services *sv, const struct ledger_tenant *t,
                    struct kairos_ps_reply *p, bool admin, uint32_t uid)
{
    const struct ledger *l = &sv->ts->ledger;
    memcpy(p->tenant, t->name, sizeof p->tenant);
    if (t->flags & LEDGER_TENANT_REMOVED)
        p->flags |= KAIROS_PS_REMOVED;
    for (unsigned g = 0; g < l->n_gpus; g++) {
        p->quota[g] = t->quota[g];
        /* with what kairosd keeps charged for an import of memory it freed */
        p->held[g] = t->held[g] + (sv->imports ? imports_kept(sv->imports, t, g) : 0);
        p->refusals[g] = t->refusals[g];
    }
    timeshare_ps(sv->timeshare, t->name, l->n_gpus, p);
    ps_fill_faults(sv, t, p);
    for (const struct peer *m = sv->peers; m; m = m->next)
        if (m->member && m->member->tenant == t && (admin || m->uid == uid)) {
            if (p->n_pids < KAIROS_PS_MAX_PIDS)
                p->pids[p->n_pids] = m->pid;
            p->n_pids++;
        }
}

bool handle_ps_pump(struct peer *c)
{
    struct services *sv = c->sv;
    const struct ledger *l = &sv->ts->ledger;
    bool admin = members_is_admin(sv->cfg, c->uid, c->cgroup);
    while (c->ps_active && !sv->io->waiting(c)) {
        size_t i = tenant_from(l, c->ps_next_id);
        struct kairos_ps_reply p = {.n_gpus = l->n_gpus};
        if (i + 1 >= l->n_tenants)
            p.flags = KAIROS_PS_LAST;
        if (i < l->n_tenants) {
            ps_fill(sv, l->tenants[i], &p, admin, c->uid);
            c->ps_next_id = l->tenants[i]->id + 1;
        }
        if (c->ps_size < KAIROS_PS_REPLY_SIZE_V2) /* the reply of before: no holds follow */
            for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
                p.compute_flags[g] &= ~KAIROS_PS_COMPUTE_HOLDS;
        c->ps_active = !(p.flags & KAIROS_PS_LAST);
        if (!peer_send(c, KAIROS_MSG_PS_REPLY, c->ps_seq, &p, c->ps_size))
            return false;
    }
    return true;
}

bool handle_ps(struct peer *c, const struct proto_request *r)
{
    c->ps_active = true;
    c->ps_seq = r->seq;
    /* a kairos of before (no body: flags 0; HOLDS alone) reads replies of the size it
     * knows */
    uint32_t flags = r->body.ps.flags;
    c->ps_size = !(flags & KAIROS_PS_HOLDS)  ? KAIROS_PS_REPLY_SIZE_V1
                 : !(flags & KAIROS_PS_FAULTS) ? KAIROS_PS_REPLY_SIZE_V2
                                               : sizeof(struct kairos_ps_reply);
    c->ps_next_id = 0;
    return handle_ps_pump(c);
}
