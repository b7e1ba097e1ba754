/* handle_space.c - ROUTE answered from the member's tenant and its fault domain (see
 * handle_space.h). */
#include "daemon/transport/handle_space.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon/base/log.h"
#include "daemon/space/client_settings.h"
#include "daemon/space/mps_domains.h"

bool handle_space_route(struct peer *p, const struct proto_request *r)
{
    const struct ledger_tenant *t = p->member->tenant;
    struct kairos_routed out = {.mode = KAIROS_ROUTE_TIME};
    if (!t->fault_domain[0]) {
        if (p->sv->mps)
            snprintf(out.pipe_dir, sizeof out.pipe_dir, "%s", p->sv->mps->root);
        return peer_send(p, KAIROS_MSG_ROUTED, r->seq, &out, sizeof out);
    }
    char why[KAIROS_MSG_MAX] = "space mode is not available in this kairosd";
    int rc = p->sv->mps ? mps_domains_route(p->sv->mps, t->fault_domain, p->uid, out.pipe_dir,
                                            sizeof out.pipe_dir, why, sizeof why)
                        : -ENOSYS;
    if (rc) {
        log_about_warn(t->name, p->pid, -1, "tenant %s: pid %u (uid %u) refused the GPU: %s",
                       t->name, p->pid, p->uid, why);
        return peer_error(p, r->seq, KAIROS_ERR_PERMISSION, why);
    }
    out.mode = KAIROS_ROUTE_MPS;
    out.thread_pct = SPACE_THREAD_PCT;
    out.priority = space_client_priority(&p->sv->ts->ledger, &p->sv->ts->compute, t);
    snprintf(out.domain, sizeof out.domain, "%s", t->fault_domain);
    log_about_info(t->name, p->pid, -1, "tenant %s: pid %u (uid %u) is an MPS client of fault "
                   "domain %s (priority %u)", t->name, p->pid, p->uid, t->fault_domain,
                   out.priority);
    return peer_send(p, KAIROS_MSG_ROUTED, r->seq, &out, sizeof out);
}
