/* handle_members.c - the requests on membership: HELLO (joining a tenant, or
 * reattaching after a restart), the administrators' TENANT_SET, TENANT_DEL and
 * TENANT_MEMBERS, TENANT_ADMIT; and what a member's departure releases. See
 * handle_members.h. */
#include "daemon/transport/handle_members.h"

#include <stdio.h>
#include <string.h>

#include "daemon/base/log.h"
#include "daemon/base/proc_stat.h"
#include "daemon/memory/credit.h"
#include "daemon/memory/heirs.h"
#include "daemon/memory/imports.h"
#include "daemon/memory/linger.h"
#include "daemon/space/mps_domains.h"
#include "daemon/time/timeshare.h"
#include "daemon/transport/handle_handovers.h"
#include "daemon/transport/handle_memory.h"
#include "daemon/transport/handle_time.h"
#include "daemon/transport/owners.h"

#define FORK_TICKETS_AT_HELLO 8 /* fork tickets reserved for a member that asks at HELLO */

void handle_members_tenants_changed(struct services *sv)
{
    if (sv->timeshare)
        timeshare_reconfigure(sv->timeshare);
    if (sv->mps)
        mps_domains_retire_unnamed(sv->mps, &sv->ts->ledger, &sv->ts->settings);
}

/* What a reattaching process claimed on each GPU and what was counted (logged). */
static void log_reattached(const struct peer *p, const struct ledger_tenant *t,
                           const struct kairos_hello *h, const uint64_t *counted,
                           char (*bounded)[96])
{
    char line[128];
    for (unsigned g = 0; g < p->sv->ts->n_gpus; g++) {
        if (!h->held[g])
            continue;
        char a[32], b[32];
        if (bounded[g][0])
            log_warn("tenant %s: pid %u claimed %s on GPU %u when reattaching; %s counted "
                     "(%s)", t->name, p->pid, tenants_size(h->held[g], a, sizeof a), g,
                     tenants_size(counted[g], b, sizeof b), bounded[g]);
        handle_memory_describe_held(t, g, line, sizeof line);
        if (t->held[g] > t->quota[g])
            log_about_warn(t->name, p->pid, (int)g,
                           "tenant %s: pid %u reattached with %s on GPU %u; the tenant now %s, "
                           "over its quota: its allocations there are refused until it frees "
                           "memory", t->name, p->pid, tenants_size(counted[g], a, sizeof a), g,
                           line);
        else
            log_about_info(t->name, p->pid, (int)g,
                           "tenant %s: pid %u reattached with %s on GPU %u (tenant %s)",
                           t->name, p->pid, tenants_size(counted[g], a, sizeof a), g, line);
    }
}

bool handle_members_hello(struct peer *p, const struct proto_request *r)
{
    struct services *sv = p->sv;
    const struct kairos_hello *h = &r->body.hello;
    char msg[KAIROS_MSG_MAX];
    if (p->member) {
        snprintf(msg, sizeof msg, "this connection is already registered as tenant %s",
                 p->member->tenant->name);
        return peer_error(p, r->seq, KAIROS_ERR_INVALID, msg);
    }
    struct peer_cred peer = {.pid = p->pid, .uid = p->uid, .gid = p->gid, .cgroup = p->cgroup};
    uint32_t code = 0;
    struct ledger_tenant *t = membership_hello(&sv->membership, &peer, h->tenant, &code, msg,
                                               sizeof msg);
    if (!t) /* kairosd decides the tenant (membership.h) */
        return peer_error(p, r->seq, code, msg);
    bool reattach = h->flags & KAIROS_HELLO_REATTACH;
    /* a tenant the configuration removed takes no one new; its members of before a
     * restart come back while the reattach window holds */
    if (!(reattach && reattach_window_holds(&sv->window, peer_now_ms())) &&
        !tenants_joinable(t, sv->cfg, msg, sizeof msg)) {
        log_about_warn(t->name, p->pid, -1, "pid %u (uid %u): refused: %s", p->pid, p->uid, msg);
        return peer_error(p, r->seq, KAIROS_ERR_NO_TENANT, msg);
    }
    if (reattach) {
        struct ledger_member *other = ledger_find_pid(&sv->ts->ledger, p->pid);
        if (other) {
            snprintf(msg, sizeof msg, "pid %u is already registered (tenant %s); a process "
                     "reattaches once, with one connection", p->pid, other->tenant->name);
            log_warn("pid %u: refused a second REATTACH", p->pid);
            return peer_error(p, r->seq, KAIROS_ERR_INVALID, msg);
        }
    }
    uint64_t counted[KAIROS_MAX_GPUS] = {0};
    char bounded[KAIROS_MAX_GPUS][96];
    for (unsigned g = 0; reattach && g < sv->ts->n_gpus; g++)
        counted[g] = reattach_bound(t, g, h->held[g], p->pid, sv->gpu, bounded[g],
                                    sizeof bounded[g]);
    int rc = ledger_join(&sv->ts->ledger, t, p->pid, reattach ? counted : NULL, &p->member);
    if (rc)
        return peer_error(p, r->seq, KAIROS_ERR_INVALID, "kairosd is out of memory");
    p->member->cr.peer = p;
    reattach_window_joined(&sv->window, p->pid, peer_now_ms());
    reattach_window_record(&sv->window, &sv->ts->ledger);
    if (reattach_window_ended(&sv->window, peer_now_ms())) /* the last one is back */
        handle_memory_serve_all(sv);
    if (reattach)
        log_reattached(p, t, h, counted, bounded);
    if (reattach)
        p->reattached_ms = peer_now_ms(); /* it tells its shares and imports again (imports.h) */
    if (reattach && sv->heirs) { /* the children it forked before the restart */
        struct heir_owner o = {.tenant = t->id, .uid = p->uid};
        heirs_adopt_children(sv->heirs, p->pid, &o);
    }
    log_about_info(t->name, p->pid, -1, "tenant %s: pid %u (uid %u) joined%s; %u process(es)",
                    t->name, p->pid, p->uid,
             reattach ? " again after a kairosd restart" : "", t->n_members);
    sv->io->joined(p); /* its exit is watched from now on */
    struct kairos_welcome w = {.tenant_id = t->id, .n_gpus = sv->ts->n_gpus};
    for (unsigned g = 0; g < sv->ts->n_gpus; g++)
        w.quota[g] = t->quota[g];
    if (!peer_send(p, KAIROS_MSG_WELCOME, r->seq, &w, sizeof w))
        return false;
    uint32_t ppid; /* its start time, which tells it from a later process with its pid */
    if (proc_stat_read(sv->heirs ? sv->heirs->proc : "/proc", p->pid, &ppid, &p->start) != 0)
        p->start = 0;
    if ((r->body.hello.flags & KAIROS_HELLO_FORK_TICKETS) && sv->heirs) {
        p->wants_tickets = true;
        p->ticket_owner = (struct heir_owner){.tenant = t->id, .uid = p->uid};
        if (!handle_handovers_push_tickets(p, FORK_TICKETS_AT_HELLO, 0))
            return false;
    }
    return handle_time_welcome(p, t); /* the time policies in force */
}

bool handle_members_tenant_set(struct peer *p, const struct proto_request *r)
{
    struct services *sv = p->sv;
    const struct kairos_tenant_set *m = &r->body.tenant_set;
    char msg[KAIROS_MSG_MAX];
    bool existed = ledger_tenant_find(&sv->ts->ledger, m->tenant) != NULL, changed;
    /* a body of before (proto.h: no fault_domain) leaves the domain as it is */
    const char *domain = r->body_len == sizeof *m ? m->fault_domain : NULL;
    int code = tenants_set(sv->ts, sv->cfg, m, domain, p->uid, p->pid, &changed, msg,
                           sizeof msg);
    if (code) {
        log_warn("uid %u (pid %u): TENANT_SET %s refused: %s", p->uid, p->pid, m->tenant, msg);
        return peer_error(p, r->seq, (uint32_t)code, msg);
    }
    struct ledger_tenant *t = ledger_tenant_find(&sv->ts->ledger, m->tenant);
    if (!existed && t && (t->flags & LEDGER_TENANT_EPHEMERAL) &&
        tenants_settings_of(sv->ts, t)->owner_pid)
        owners_watch(sv->owners, t);
    if (changed)
        handle_members_tenants_changed(sv);
    return peer_send(p, KAIROS_MSG_OK, r->seq, NULL, 0);
}

bool handle_members_tenant_del(struct peer *p, const struct proto_request *r)
{
    char msg[KAIROS_MSG_MAX];
    int code = tenants_del(p->sv->ts, r->body.tenant_del.tenant, p->uid, msg, sizeof msg);
    if (code)
        return peer_error(p, r->seq, (uint32_t)code, msg);
    membership_tenant_removed(&p->sv->membership, r->body.tenant_del.tenant);
    handle_members_tenants_changed(p->sv); /* its policies and domain, if any, are gone */
    return peer_send(p, KAIROS_MSG_OK, r->seq, NULL, 0);
}

/* TENANT_MEMBERS and TENANT_ADMIT: membership.c decides, OK or its refusal. */
bool handle_members_membership(struct peer *p, const struct proto_request *r)
{
    struct peer_cred cr = {.pid = p->pid, .uid = p->uid, .gid = p->gid, .cgroup = p->cgroup};
    char msg[KAIROS_MSG_MAX];
    int code = r->type == KAIROS_MSG_TENANT_MEMBERS
                   ? membership_set_rules(&p->sv->membership, &cr, &r->body.tenant_members, msg,
                                          sizeof msg)
                   : membership_admit(&p->sv->membership, &cr, &r->body.tenant_admit, msg,
                                      sizeof msg);
    if (code)
        return peer_error(p, r->seq, (uint32_t)code, msg);
    return peer_send(p, KAIROS_MSG_OK, r->seq, NULL, 0);
}


/* What p's departure changes (the transport closes its connection). */
void handle_members_left(struct peer *p)
{
    struct services *sv = p->sv;
    if (p->fork_tickets && sv->heirs) /* reserved, never spent: back to the shares */
        heirs_unreserve(sv->heirs, &p->ticket_owner, p->fork_tickets);
    p->fork_tickets = 0;
    if (p->member && sv->stopping) {
        ledger_leave(&sv->ts->ledger, p->member, NULL); /* in memory only; nothing logged */
        p->member = NULL;
    }
    struct ledger_tenant *left_from = p->member ? p->member->tenant : NULL;
    if (p->member)
        p->member->cr.peer = NULL;
    if (p->member && sv->imports && !sv->stopping) {
        size_t kept_before = sv->imports->n_kept;
        imports_member_left(sv->imports, p->pid); /* its imports end with it (imports.h) */
        handle_memory_kept_released(sv, kept_before);
    }
    if (p->member && linger_keep(sv->linger, p->member, p->pid)) {
        credit_fold(p->member); /* what it took after its last report stays counted */
        p->member = NULL; /* its charge stays until the GPU frees its memory */
    }
    if (p->member)
        credit_drop(p->member); /* unused credit is nobody's memory: back to the tenant */
    if (p->member) {
        uint64_t freed[KAIROS_MAX_GPUS];
        struct ledger_tenant *t = ledger_leave(&sv->ts->ledger, p->member, freed);
        char line[512], a[32];
        size_t len = 0;
        for (unsigned g = 0; g < sv->ts->n_gpus; g++)
            if (freed[g] && len < sizeof line) {
                int n = snprintf(line + len, sizeof line - len, ", %s on GPU %u",
                                 tenants_size(freed[g], a, sizeof a), g);
                len += n > 0 ? (size_t)n : 0;
            }
        log_about_info(t->name, p->pid, -1, "tenant %s: pid %u left%s%s", t->name, p->pid,
                        len ? "; released" : "",
                 len ? line + 1 : "");
        p->member = NULL;
        handle_memory_serve(sv, t); /* what waited for room may fit now */
        if (tenants_after_leave(sv->ts, t))
            sv->io->compute_changed_later(sv);
    } else if (left_from && !sv->stopping) {
        handle_memory_serve(sv, left_from);
    }
    if (left_from && !sv->stopping)
        reattach_window_record(&sv->window, &sv->ts->ledger);
}

void handle_members_tick(struct services *sv, uint64_t now)
{
    /* removed tenants whose memory drained (or whose members did not come back) */
    if (!reattach_window_holds(&sv->window, now) && tenants_sweep_removed(sv->ts))
        sv->io->compute_changed_later(sv);
}
