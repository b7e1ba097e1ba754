/* handle_space.c - ROUTE answered from the member's tenant and its fault domain, and
 * ENDING, a member's SIGTERM after its MPS client's end (see handle_space.h). */
#include "daemon/transport/handle_space.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "daemon/base/log.h"
#include "daemon/space/client_end.h"
#include "daemon/space/client_settings.h"
#include "daemon/space/mps_domains.h"

bool handle_space_route(struct peer *p, const struct proto_request *r)
{
    const struct ledger_tenant *t = p->member->tenant;
    const char *domain = tenants_settings_of(p->sv->ts, t)->fault_domain;
    struct kairos_routed out = {.mode = KAIROS_ROUTE_TIME};
    if (!domain[0]) {
        if (p->sv->mps)
            snprintf(out.pipe_dir, sizeof out.pipe_dir, "%s", p->sv->mps->root);
        return peer_send(p, KAIROS_MSG_ROUTED, r->seq, &out, sizeof out);
    }
    char why[KAIROS_MSG_MAX] = "space mode is not available in this kairosd";
    int rc = p->sv->mps ? mps_domains_route(p->sv->mps, domain, p->uid, out.pipe_dir,
                                            sizeof out.pipe_dir, why, sizeof why)
                        : -ENOSYS;
    if (rc) {
        log_about_warn(t->name, p->pid, -1, "tenant %s: pid %u (uid %u) refused the GPU: %s",
                       t->name, p->pid, p->uid, why);
        return peer_error(p, r->seq, KAIROS_ERR_PERMISSION, why);
    }
    out.mode = KAIROS_ROUTE_MPS;
    out.thread_pct = space_client_threads(&p->sv->ts->settings, t);
    out.priority = space_client_priority(&p->sv->ts->ledger, &p->sv->ts->compute,
                                         &p->sv->ts->settings, t);
    snprintf(out.domain, sizeof out.domain, "%s", domain);
    log_about_info(t->name, p->pid, -1, "tenant %s: pid %u (uid %u) is an MPS client of fault "
                   "domain %s (priority %u, %u %% of the SMs)", t->name, p->pid, p->uid,
                   domain, out.priority, out.thread_pct);
    return peer_send(p, KAIROS_MSG_ROUTED, r->seq, &out, sizeof out);
}

/* A member's own end (client_end.h's done): whether its MPS client went first. */
static void ended(void *ctx, const struct client_end_outcome *o)
{
    (void)ctx;
    uint32_t pid = o->victim->pid;
    if (o->ended)
        log_about_info(o->tenant, pid, -1, "tenant %s: pid %u ends at its SIGTERM after its "
                       "MPS client (terminate_client), sparing fault domain %s", o->tenant,
                       pid, o->domain);
    else
        log_about_warn(o->tenant, pid, -1, "tenant %s: pid %u ends at its SIGTERM; its MPS "
                       "client could not be ended first (terminate_client to the control "
                       "daemon of fault domain %s: %s): its end may end the work of fault "
                       "domain %s", o->tenant, pid, o->domain, o->failure, o->domain);
}

bool handle_space_ending(struct peer *p, const struct proto_request *r)
{
    (void)r;
    const struct ledger_tenant *t = p->member->tenant;
    const char *domain = tenants_settings_of(p->sv->ts, t)->fault_domain;
    char why[KAIROS_MSG_MAX] = "it is in no fault domain";
    if (domain[0] && !p->sv->ends)
        snprintf(why, sizeof why, "space mode is not available in this kairosd");
    if (domain[0] && p->sv->ends) {
        if (client_ends_pending(p->sv->ends, p->pid))
            return true; /* a second SIGTERM: the first one's end is on its way */
        struct client_end_order o = {
            .victim = {.pid = p->pid, .uid = p->uid, .exists = true}, .start = p->start,
            .tenant = t->name, .domain = domain, .gpu = -1, .what = "its SIGTERM",
            .signal = SIGTERM, .done = ended};
        const char *proc = p->sv->heirs ? p->sv->heirs->proc : "/proc";
        if (!p->start)
            snprintf(why, sizeof why, "its start time is not known");
        else if (!client_ends_start(p->sv->ends, p->sv->mps, proc, &o, why, sizeof why))
            return true;
    }
    if (!p->ending_refused) /* a peer repeating it fills no log */
        log_about_warn(t->name, p->pid, -1, "tenant %s: pid %u asked that its MPS client be "
                       "ended before its SIGTERM; not done (%s): its shim ends it after %d ms",
                       t->name, p->pid, why, KAIROS_ENDING_WAIT_MS);
    p->ending_refused = true;
    return true;
}
