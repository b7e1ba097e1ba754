/* handle_time.c - RUNNABLE to the time-share, and the time policies sent to a new
 * member (see handle_time.h). */
#include "daemon/transport/handle_time.h"

#include "daemon/time/timeshare.h"

/* A member's runnable time on one GPU: the scheduler's demand (timeshare.c). */
bool handle_time_runnable(struct peer *p, const struct proto_request *r)
{
    if (p->sv->timeshare)
        timeshare_runnable(p->sv->timeshare, p->member->tenant->name, p->pid,
                           &r->body.runnable);
    return true;
}

bool handle_time_welcome(struct peer *p, const struct ledger_tenant *t)
{
    for (unsigned g = 0; g < p->sv->ts->n_gpus; g++) {
        struct kairos_time_policy tp;
        if (timeshare_policy(p->sv->timeshare, t->name, g, &tp) &&
            !peer_send(p, KAIROS_MSG_TIME_POLICY, 0, &tp, sizeof tp))
            return false;
    }
    return true;
}
