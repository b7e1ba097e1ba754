/* requests.c - the table of requests (who may send each, its handler) and the
 * dispatch of one checked message (see requests.h). */
#include "daemon/transport/requests.h"

#include <stdio.h>
#include <stdlib.h>

#include "daemon/base/log.h"
#include "daemon/transport/handle_handovers.h"
#include "daemon/transport/handle_members.h"
#include "daemon/transport/handle_memory.h"
#include "daemon/transport/handle_ps.h"
#include "daemon/transport/handle_space.h"
#include "daemon/transport/handle_time.h"

static const struct request_type requests[] = {
    {KAIROS_MSG_HELLO, REQUEST_ANYONE, false, handle_members_hello},
    {KAIROS_MSG_CHARGE, REQUEST_ANYONE, false, handle_memory_charge}, /* NOT_REGISTERED */
    {KAIROS_MSG_COMMIT, REQUEST_MEMBER, false, handle_memory_commit},
    {KAIROS_MSG_RELEASE, REQUEST_MEMBER, false, handle_memory_release},
    {KAIROS_MSG_RUNNABLE, REQUEST_MEMBER, false, handle_time_runnable},
    {KAIROS_MSG_CREDIT, REQUEST_MEMBER, false, handle_memory_credit},
    {KAIROS_MSG_FORKED, REQUEST_ANYONE, false, handle_handovers_handover}, /* members */
    {KAIROS_MSG_INHERITED, REQUEST_ANYONE, false, handle_handovers_handover}, /* members */
    {KAIROS_MSG_FORK_TICKETS, REQUEST_ANYONE, false, handle_handovers_fork_tickets},
    {KAIROS_MSG_SHARED, REQUEST_ANYONE, false, handle_handovers_ipc}, /* members */
    {KAIROS_MSG_IMPORTED, REQUEST_ANYONE, false, handle_handovers_ipc}, /* members */
    {KAIROS_MSG_TENANT_SET, REQUEST_ADMIN, true, handle_members_tenant_set},
    {KAIROS_MSG_TENANT_DEL, REQUEST_ADMIN, true, handle_members_tenant_del},
    {KAIROS_MSG_PS, REQUEST_ANYONE, false, handle_ps},
    {KAIROS_MSG_ROUTE, REQUEST_MEMBER, false, handle_space_route},
    {KAIROS_MSG_ENDING, REQUEST_MEMBER, false, handle_space_ending},
    {KAIROS_MSG_TENANT_MEMBERS, REQUEST_ADMIN, false, handle_members_membership},
    {KAIROS_MSG_TENANT_ADMIT, REQUEST_ANYONE, false, handle_members_membership},
};

const struct request_type *requests_find(uint16_t type)
{
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++)
        if (requests[i].type == type)
            return &requests[i];
    return NULL;
}

/* Whether p may send r (as e->who says); a refusal is sent. */
static bool allowed(struct peer *p, const struct request_type *e, const struct proto_request *r)
{
    if (e->who == REQUEST_MEMBER && !p->member) {
        log_warn("pid %u: %s before HELLO; disconnecting it", p->pid, proto_type_name(r->type));
        peer_error(p, r->seq, KAIROS_ERR_NOT_REGISTERED,
                   "send HELLO with your tenant's name first");
        return false;
    }
    if (e->who != REQUEST_ADMIN || members_is_admin(p->sv->cfg, p->uid, p->cgroup))
        return true;
    char msg[KAIROS_MSG_MAX];
    peer_msgf(msg, sizeof msg, "permission denied: only root or an administrator listed "
              "under 'admins:' in %s may create tenants or change quotas (you are uid %u)",
              p->sv->cfg->path[0] ? p->sv->cfg->path : "the configuration", p->uid);
    log_warn("uid %u (pid %u): %s refused: not an administrator", p->uid, p->pid,
             proto_type_name(r->type));
    peer_error(p, r->seq, KAIROS_ERR_PERMISSION, msg);
    return false;
}

bool requests_handle(struct peer *p, const unsigned char *buf, size_t len)
{
    struct proto_request r;
    char why[KAIROS_MSG_MAX];
    int code = proto_check(buf, len, &r, why, sizeof why);
    if (code) {
        log_warn("pid %u (uid %u): malformed message: %s; disconnecting it", p->pid, p->uid,
                 why);
        peer_error(p, r.seq, (uint32_t)code, why);
        return false;
    }
    const struct request_type *e = requests_find(r.type);
    if (!e) { /* proto_check accepts requests only, and each has its entry */
        fprintf(stderr, "%s:%d: impossible message type %u\n", __FILE__, __LINE__, r.type);
        abort();
    }
    if (e->registers)
        p->registered |= members_is_admin(p->sv->cfg, p->uid, p->cgroup);
    if (!allowed(p, e, &r))
        return e->who != REQUEST_MEMBER; /* an administrator's refusal keeps the peer */
    return e->handle(p, &r);
}
