/* handle_handovers.c - the requests on memory that outlives its process: fork
 * tickets, FORKED and INHERITED (who else holds a process's NVIDIA files, heirs.h),
 * SHARED and IMPORTED (legacy CUDA IPC, imports.h); see handle_handovers.h. */
#include "daemon/transport/handle_handovers.h"

#include <stdio.h>

#include "daemon/base/log.h"
#include "daemon/memory/heirs.h"
#include "daemon/memory/imports.h"
#include "daemon/transport/handle_memory.h"

bool handle_handovers_push_tickets(struct peer *p, uint32_t want, uint32_t spent)
{
    if (want > p->fork_tickets)
        p->fork_tickets += heirs_reserve(p->sv->heirs, &p->ticket_owner,
                                         want - p->fork_tickets, p->fork_tickets);
    struct kairos_fork_tickets m = {.want = want, .held = p->fork_tickets, .spent = spent};
    return peer_send(p, KAIROS_MSG_FORK_TICKETS, 0, &m, sizeof m);
}

bool handle_handovers_fork_tickets(struct peer *p, const struct proto_request *r)
{
    if (!p->member || !p->wants_tickets)
        return peer_error(p, r->seq, KAIROS_ERR_NOT_REGISTERED,
                          "only a tenant's member whose HELLO asked for fork tickets "
                          "(KAIROS_HELLO_FORK_TICKETS) asks for more");
    const struct kairos_fork_tickets *m = &r->body.fork_tickets;
    return handle_handovers_push_tickets(p, m->want, m->spent);
}

/* FORKED with TICKET: no reply, whatever happens (the shim did not wait); a ticket
 * spent, an edge made as far as /proc can check the child. */
static bool on_forked_ticket(struct peer *p, const struct proto_request *r, char *why,
                             size_t why_len)
{
    struct heir_owner o = {.tenant = p->member->tenant->id, .uid = p->uid};
    bool had = p->fork_tickets > 0;
    if (had) {
        p->fork_tickets--;
        heirs_unreserve(p->sv->heirs, &p->ticket_owner, 1);
    }
    int code = heirs_forked_ticket(p->sv->heirs, p->pid, p->start, &o, &r->body.forked, why,
                                   why_len);
    uint64_t quiet;
    if ((code || !had) &&
        ratelog_event(&p->sv->handover_refusals, peer_now_ms(), RATELOG_INTERVAL_MS, &quiet))
        log_warn("tenant %s: pid %u (uid %u): FORKED of pid %u with a ticket%s: %s; %llu such "
                 "refusals not logged since the last such line", p->member->tenant->name,
                 p->pid, p->uid, r->body.forked.child_pid, had ? "" : " it did not hold",
                 code ? why : "followed anyway", (unsigned long long)quiet);
    if (!code)
        log_debug("pid %u forked pid %u (a ticket spent), which shares its NVIDIA files",
                  p->pid, r->body.forked.child_pid);
    return true;
}

/* FORKED, INHERITED: another process holds the NVIDIA files of the sender (or the
 * sender holds another's), as /proc confirms (heirs.h). Only from a tenant's member:
 * an edge is its tenant's (and uid's), counted against their share of the table. */
bool handle_handovers_handover(struct peer *p, const struct proto_request *r)
{
    char why[KAIROS_MSG_MAX];
    if (!p->member) {
        uint64_t quiet;
        if (ratelog_event(&p->sv->handover_refusals, peer_now_ms(), RATELOG_INTERVAL_MS, &quiet))
            log_warn("pid %u (uid %u): %s refused: not a tenant's member; %llu such refusals "
                     "not logged since the last such line", p->pid, p->uid,
                     proto_type_name(r->type), (unsigned long long)quiet);
        return peer_error(p, r->seq, KAIROS_ERR_NOT_REGISTERED,
                          "this process is not a member of any tenant: only a tenant's member "
                          "reports hand-overs of NVIDIA files (send HELLO with your tenant's "
                          "name first)");
    }
    if (!p->sv->heirs)
        return peer_error(p, r->seq, KAIROS_ERR_INVALID,
                          "this kairosd does not follow NVIDIA files across processes");
    struct heir_owner o = {.tenant = p->member->tenant->id, .uid = p->uid};
    bool forked = r->type == KAIROS_MSG_FORKED;
    if (forked && (r->body.forked.flags & KAIROS_FORKED_TICKET))
        return on_forked_ticket(p, r, why, sizeof why);
    int code = forked ? heirs_forked(p->sv->heirs, p->pid, &o, &r->body.forked, why, sizeof why)
                      : heirs_inherited(p->sv->heirs, p->pid, &o, &r->body.inherited, why,
                                        sizeof why);
    if (code) {
        uint64_t quiet;
        if (ratelog_event(&p->sv->handover_refusals, peer_now_ms(), RATELOG_INTERVAL_MS, &quiet))
            log_warn("tenant %s: pid %u (uid %u): %s refused: %s; %llu such refusals not "
                     "logged since the last such line", p->member->tenant->name, p->pid, p->uid,
                     proto_type_name(r->type), why, (unsigned long long)quiet);
        return peer_error(p, r->seq, (uint32_t)code, why);
    }
    if (forked) /* debug: a tenant may fork often; what lingers is logged at info */
        log_debug("pid %u forked pid %u, which shares its NVIDIA files", p->pid,
                  r->body.forked.child_pid);
    else
        log_info("pid %u holds NVIDIA files of pid %u (%s)", p->pid, r->body.inherited.from_pid,
                 r->body.inherited.flags & KAIROS_INHERITED_EXEC ? "inherited at exec"
                                                                 : "received");
    return peer_send(p, KAIROS_MSG_OK, r->seq, NULL, 0);
}

/* A member that reattached after a restart reports its imports again, maybe before
 * their exporters report their shares: imports.h keeps those a while. */
static bool just_reattached(const struct peer *p)
{
    return p->reattached_ms && peer_now_ms() - p->reattached_ms < IMPORTS_PROVISIONAL_MS;
}

/* SHARED with KAIROS_SHARED_FREED: no reply (the freeing thread does not wait). */
static bool on_shared_freed(struct peer *p, const struct kairos_shared *m)
{
    char a[32];
    struct kairos_shared bounded = *m;
    if (m->gpu < KAIROS_MAX_GPUS) { /* it freed at most what it was granted (issue 25, 5) */
        const struct ledger_member *me = p->member;
        uint64_t granted = me->held[m->gpu] + me->credit[m->gpu];
        bounded.bytes = m->bytes < granted ? m->bytes : granted;
        if (bounded.bytes < m->bytes)
            handle_memory_claim_beyond(p, m->gpu, "SHARED FREED's bytes", m->bytes,
                                       m->bytes - bounded.bytes);
    }
    m = &bounded;
    size_t kept_before = p->sv->imports->n_kept;
    bool kept = imports_freed(p->sv->imports, p->pid, p->member->tenant, m);
    handle_memory_kept_released(p->sv, kept_before + kept); /* it may have ended others */
    if (kept)
        log_info("tenant %s: pid %u freed object 0x%x of client 0x%x while a CUDA IPC import "
                 "of it lives: its %s on GPU %u stay charged until the last import ends",
                 p->member->tenant->name, p->pid, m->h_object, m->h_client,
                 tenants_size(m->bytes, a, sizeof a), m->gpu);
    else
        log_debug("pid %u freed shared object 0x%x of client 0x%x: no import holds it",
                  p->pid, m->h_object, m->h_client);
    return true;
}

/* Member p as imports.h weighs its claims: its tenant, and what the ledger charges
 * it per GPU (what it may share). */
static void ipc_sender_of(const struct peer *p, struct ipc_sender *who)
{
    *who = (struct ipc_sender){.pid = p->pid, .uid = p->uid, .tenant = p->member->tenant->id};
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        uint64_t held = p->member->held[g], credit = p->member->credit[g];
        who->charged[g] = held > UINT64_MAX - credit ? UINT64_MAX : held + credit;
    }
}

/* SHARED, IMPORTED: legacy CUDA IPC (imports.h). Only members: a charge kept for
 * an import is a tenant's, and the claims are checked against members' reports. */
bool handle_handovers_ipc(struct peer *p, const struct proto_request *r)
{
    char why[KAIROS_MSG_MAX];
    if (r->type == KAIROS_MSG_SHARED && (r->body.shared.flags & KAIROS_SHARED_FREED)) {
        if (p->member && p->sv->imports)
            return on_shared_freed(p, &r->body.shared);
        log_debug("pid %u: SHARED FREED from no member ignored (it gets no reply)", p->pid);
        return true;
    }
    if (!p->member)
        return peer_error(p, r->seq, KAIROS_ERR_NOT_REGISTERED,
                          "send HELLO with your tenant's name first: only a tenant's member "
                          "shares or imports memory");
    if (!p->sv->imports)
        return peer_error(p, r->seq, KAIROS_ERR_INVALID,
                          "this kairosd does not follow CUDA IPC imports");
    uint32_t exporter = 0;
    size_t kept_before = p->sv->imports->n_kept;
    bool shared = r->type == KAIROS_MSG_SHARED;
    struct ipc_sender who;
    ipc_sender_of(p, &who);
    int code = shared ? imports_shared(p->sv->imports, &who, &r->body.shared, why, sizeof why)
                      : imports_imported(p->sv->imports, &who, &r->body.imported,
                                         just_reattached(p) ? IMPORTS_PROVISIONAL_MS : 0,
                                         &exporter, why, sizeof why);
    handle_memory_kept_released(p->sv, kept_before);
    if (code) {
        log_warn("pid %u (uid %u): %s refused: %s", p->pid, p->uid, proto_type_name(r->type),
                 why);
        return peer_error(p, r->seq, (uint32_t)code, why);
    }
    if (shared)
        log_debug("pid %u shared object 0x%x of client 0x%x (scope %u)", p->pid,
                  r->body.shared.h_object, r->body.shared.h_client, r->body.shared.share_type);
    else if (r->body.imported.flags == KAIROS_IMPORT_BEGIN && exporter == IMPORTS_FROM_MPS)
        log_debug("pid %u (uid %u) imports object 0x%x of client 0x%x, which no member shared, "
                  "while an MPS server serves its uid: taken as an MPS client's, charging no "
                  "one", p->pid, p->uid, r->body.imported.h_object_src,
                  r->body.imported.h_client_src);
    else if (r->body.imported.flags == KAIROS_IMPORT_BEGIN && !exporter)
        log_info("pid %u imports object 0x%x of client 0x%x (CUDA IPC), reported again after "
                 "a restart: kept while its exporter reattaches", p->pid,
                 r->body.imported.h_object_src, r->body.imported.h_client_src);
    else if (r->body.imported.flags == KAIROS_IMPORT_BEGIN)
        log_info("pid %u imports object 0x%x of client 0x%x shared by pid %u (CUDA IPC): "
                 "pid %u stays charged while it lives", p->pid, r->body.imported.h_object_src,
                 r->body.imported.h_client_src, exporter, exporter);
    else if (exporter == IMPORTS_FROM_MPS)
        log_debug("pid %u: its import of object 0x%x of client 0x%x (an MPS client's) ended",
                  p->pid, r->body.imported.h_object_src, r->body.imported.h_client_src);
    else
        log_info("pid %u: its import of object 0x%x of client 0x%x ended", p->pid,
                 r->body.imported.h_object_src, r->body.imported.h_client_src);
    return peer_send(p, KAIROS_MSG_OK, r->seq, NULL, 0);
}
