/* handle_memory.c - the requests on device memory (CHARGE, COMMIT, RELEASE, CREDIT)
 * against the ledger and the credit, what credit decides sent to the peers, and the
 * credit's periodic work; see handle_memory.h. */
#include "daemon/transport/handle_memory.h"

#include <errno.h>
#include <stdio.h>

#include "daemon/base/log.h"
#include "daemon/memory/credit.h"
#include "daemon/memory/imports.h"

static void credit_reply(void *ctx, void *peer, uint32_t seq, const struct kairos_credit *cr)
{
    (void)ctx;
    struct peer *p = peer;
    if (p && !peer_send(p, KAIROS_MSG_CREDIT, seq, cr, sizeof *cr))
        p->broken = true; /* closed by its handler or the next tick */
}

static void credit_recall(void *ctx, void *peer, unsigned gpu, uint64_t bytes)
{
    (void)ctx;
    struct peer *p = peer;
    struct kairos_credit_recall r = {.gpu = gpu, .bytes = bytes};
    if (p) {
        char a[32];
        log_debug("tenant %s: recalling %s of credit on GPU %u from pid %u",
                  p->member->tenant->name, tenants_size(bytes, a, sizeof a), gpu, p->pid);
        if (!peer_send(p, KAIROS_MSG_CREDIT_RECALL, 0, &r, sizeof r))
            p->broken = true;
    }
}

static void credit_refused(void *ctx, struct ledger_tenant *t, struct ledger_member *m,
                           unsigned gpu, uint64_t need)
{
    (void)ctx;
    uint64_t quiet;
    if (!ratelog_event(&t->refusal_log, peer_now_ms(), RATELOG_INTERVAL_MS, &quiet))
        return;
    char a[32], b[32], c[32], d[32];
    log_about_info(t->name, m->pid, (int)gpu,
                   "tenant %s: refused %s on GPU %u for pid %u (holds %s of %s, %s more "
                   "reserved as its processes' unused credit); %llu "
                   "refusal(s) on this GPU so far, %llu of the tenant's not logged since its "
                   "last such line (one every %d s)",
                   t->name, tenants_size(need, a, sizeof a), gpu, m->pid,
                   tenants_size(t->held[gpu], b, sizeof b),
                   tenants_size(t->quota[gpu], c, sizeof c),
                   tenants_size(t->credit[gpu], d, sizeof d),
                   (unsigned long long)t->refusals[gpu], (unsigned long long)quiet,
                   RATELOG_INTERVAL_MS / 1000);
}

static void credit_revoked(void *ctx, struct ledger_tenant *t, struct ledger_member *m,
                           unsigned gpu, uint64_t bytes)
{
    (void)ctx;
    char a[32];
    log_about_warn(t->name, m->pid, (int)gpu,
                   "tenant %s: pid %u did not answer a credit recall within %d ms; it gets "
                   "no credit ahead on GPU %u any more, and its %s of credit there stays "
                   "counted until it says it read this or exits (what waits for room there "
                   "is refused after %d ms more)",
                   t->name, m->pid, CREDIT_RECALL_TIMEOUT_MS, gpu,
                   tenants_size(bytes, a, sizeof a), CREDIT_ACK_TIMEOUT_MS);
    struct peer *p = m->cr.peer;
    struct kairos_credit r = {.gpu = gpu, .flags = KAIROS_CREDIT_REVOKED | KAIROS_CREDIT_EXACT,
                              .held = credit_view_held(t, gpu), .returned = m->held[gpu],
                              .least = credit_chunk(t->quota[gpu]), .quota = t->quota[gpu]};
    if (p && !peer_send(p, KAIROS_MSG_CREDIT, 0, &r, sizeof r))
        p->broken = true;
}

/* ROOM to a shim that remembers a refusal on gpu (credit.h, credit_notify). */
static void credit_room_notice(void *ctx, void *peer, unsigned gpu)
{
    (void)ctx;
    struct peer *p = peer;
    struct kairos_room r = {.gpu = gpu};
    if (p && !peer_send(p, KAIROS_MSG_ROOM, 0, &r, sizeof r))
        p->broken = true;
}

const struct credit_io handle_memory_credit_io = {
    .reply = credit_reply,
    .recall = credit_recall,
    .refused = credit_refused,
    .revoked = credit_revoked,
    .room = credit_room_notice,
};

/* No grant while the members of before a restart reattach (reattach.h). */
bool handle_memory_hold(struct services *sv)
{
    return reattach_window_holds(&sv->window, peer_now_ms());
}

void handle_memory_serve(struct services *sv, struct ledger_tenant *t)
{
    for (unsigned g = 0; g < sv->ts->n_gpus; g++)
        credit_serve(&sv->ts->ledger, t, g, handle_memory_hold(sv), peer_now_ms(),
                     &handle_memory_credit_io);
}

/* Kept charges of freed shared objects were released (imports.h): the room they
 * held back may answer allocations waiting for credit. */
void handle_memory_kept_released(struct services *sv, size_t kept_before)
{
    if (!sv->imports || sv->imports->n_kept >= kept_before)
        return;
    handle_memory_serve_all(sv);
}

void handle_memory_describe_held(const struct ledger_tenant *t, unsigned gpu, char *out,
                                 size_t cap)
{
    char a[32], b[32];
    snprintf(out, cap, "holds %s of %s", tenants_size(t->held[gpu], a, sizeof a),
             tenants_size(t->quota[gpu], b, sizeof b));
}

/* A managed range (cudaMallocManaged) in a tenant whose policy refuses it: the
 * shim fails the allocation and says what to do; logged once per interval. */
static bool refuse_managed(struct peer *p, const struct proto_request *r)
{
    const struct kairos_charge *ch = &r->body.charge;
    struct ledger_tenant *t = p->member->tenant;
    struct kairos_grant no = {.granted = 0, .reason = KAIROS_GRANT_MANAGED_REFUSED,
                              .quota = ch->gpu < KAIROS_MAX_GPUS ? t->quota[ch->gpu] : 0,
                              .held = ch->gpu < KAIROS_MAX_GPUS ? t->held[ch->gpu] : 0};
    uint64_t quiet;
    char a[32];
    if (ratelog_event(&t->refusal_log, peer_now_ms(), RATELOG_INTERVAL_MS, &quiet))
        log_about_info(t->name, p->pid, (int)ch->gpu,
                       "tenant %s: refused managed memory (%s, cudaMallocManaged) on GPU %u for "
                       "pid %u: its policy is managed: refuse (set managed: charge for it to "
                       "allow managed memory, charged in full); %llu of the tenant's refusals "
                       "not logged since its last such line",
                       t->name, tenants_size(ch->bytes, a, sizeof a), ch->gpu, p->pid,
                       (unsigned long long)quiet);
    return peer_send(p, KAIROS_MSG_GRANT, r->seq, &no, sizeof no);
}

bool handle_memory_charge(struct peer *p, const struct proto_request *r)
{
    struct services *sv = p->sv;
    const struct kairos_charge *ch = &r->body.charge;
    char msg[KAIROS_MSG_MAX];
    if (!p->member)
        return peer_error(p, r->seq, KAIROS_ERR_NOT_REGISTERED,
                          "send HELLO with your tenant's name before CHARGE");
    if (ch->bytes == 0 && ch->gpu < sv->ts->n_gpus) { /* a query: what is held, what may be */
        const struct ledger_tenant *qt = p->member->tenant;
        struct kairos_grant q = {.granted = 1, .quota = qt->quota[ch->gpu],
                                 .held = qt->held[ch->gpu]};
        return peer_send(p, KAIROS_MSG_GRANT, r->seq, &q, sizeof q);
    }
    if (ch->gpu < KAIROS_MAX_GPUS)
        p->member->tenant->requests[ch->gpu]++;
    if ((ch->flags & KAIROS_CHARGE_MANAGED) &&
        !tenants_settings_of(sv->ts, p->member->tenant)->managed_charge)
        return refuse_managed(p, r);
    if (handle_memory_hold(sv))
        return peer_error(p, r->seq, KAIROS_ERR_BUSY,
                          "kairosd restarted and waits for its processes to reattach before it "
                          "grants memory (2 s at most); ask again");
    struct ledger_grant g;
    int rc = ledger_charge(&sv->ts->ledger, p->member, ch->gpu, ch->bytes, ch->token, &g);
    if (rc == -EINVAL) {
        snprintf(msg, sizeof msg, "GPU %u does not exist on this node (it has %u)", ch->gpu,
                 sv->ts->n_gpus);
        return peer_error(p, r->seq, KAIROS_ERR_INVALID, msg);
    }
    if (rc) {
        snprintf(msg, sizeof msg, "%s", rc == -ENOSPC ? "too many CHARGEs awaiting their COMMIT "
                                                        "(send COMMIT after each allocation)"
                                                      : "kairosd is out of memory");
        return peer_error(p, r->seq, KAIROS_ERR_INVALID, msg);
    }
    /* a managed range comes from a shim with credit: its reports count it from now
     * on, as held, and no COMMIT follows (proto.h) */
    if (g.granted && (ch->flags & KAIROS_CHARGE_MANAGED))
        ledger_commit(&sv->ts->ledger, p->member, ch->gpu, ch->token, true, ch->bytes, NULL);
    struct ledger_tenant *t = p->member->tenant;
    char a[32], line[128];
    if (!g.granted) {
        uint64_t quiet;
        if (ratelog_event(&t->refusal_log, peer_now_ms(), RATELOG_INTERVAL_MS, &quiet)) {
            handle_memory_describe_held(t, ch->gpu, line, sizeof line);
            log_about_info(t->name, p->pid, (int)ch->gpu,
                     "tenant %s: refused %s on GPU %u for pid %u (%s); %llu refusal(s) on "
                     "this GPU so far, %llu of the tenant's not logged since its last such "
                     "line (one every %d s)",
                     t->name, tenants_size(ch->bytes, a, sizeof a), ch->gpu, p->pid, line,
                     (unsigned long long)t->refusals[ch->gpu], (unsigned long long)quiet,
                     RATELOG_INTERVAL_MS / 1000);
        }
    } else if (log_current_level >= LOG_LEVEL_DEBUG) {
        handle_memory_describe_held(t, ch->gpu, line, sizeof line);
        log_debug("tenant %s: granted %s on GPU %u to pid %u (%s)", t->name,
                  tenants_size(ch->bytes, a, sizeof a), ch->gpu, p->pid, line);
    }
    struct kairos_grant reply = {.granted = g.granted, .quota = g.quota, .held = g.held};
    return peer_send(p, KAIROS_MSG_GRANT, r->seq, &reply, sizeof reply);
}

/* A member claimed more than kairosd granted it (what = the message and field, claim
 * what it said; beyond: what was not counted, issue 25, item 5): counted per tenant
 * and GPU (kairos_tenant_claims_beyond_grant_total), logged once per interval. */
void handle_memory_claim_beyond(struct peer *p, unsigned gpu, const char *what,
                                uint64_t claim, uint64_t beyond)
{
    struct ledger_tenant *t = p->member->tenant;
    uint64_t quiet;
    char a[32], b[32];
    t->lies[gpu]++;
    if (!ratelog_event(&t->lie_log, peer_now_ms(), RATELOG_INTERVAL_MS, &quiet))
        return;
    log_about_warn(t->name, p->pid, (int)gpu,
                   "tenant %s: pid %u (uid %u) claimed %s in a %s on GPU %u, %s beyond what "
                   "kairosd granted it and the tenant's quota leaves: not counted (a shim that "
                   "lies, or memory taken past it, which the audit compares with the grants); "
                   "%llu such claim(s) in the tenant on this GPU, %llu not logged since the "
                   "last such line", t->name, p->pid, p->uid, tenants_size(claim, a, sizeof a),
                   what, gpu, tenants_size(beyond, b, sizeof b),
                   (unsigned long long)t->lies[gpu], (unsigned long long)quiet);
}

bool handle_memory_commit(struct peer *p, const struct proto_request *r)
{
    const struct kairos_commit *m = &r->body.commit;
    uint64_t beyond = 0;
    int rc = ledger_commit(&p->sv->ts->ledger, p->member, m->gpu, m->token, m->ok, m->actual,
                           &beyond);
    if (beyond)
        handle_memory_claim_beyond(p, m->gpu, "COMMIT's actual size", m->actual, beyond);
    if (rc == -ENOENT)
        log_warn("tenant %s: pid %u committed token %llu on GPU %u that no CHARGE reserved; "
                 "ignored", p->member->tenant->name, p->pid, (unsigned long long)m->token, m->gpu);
    else if (rc == -EINVAL)
        log_warn("tenant %s: pid %u committed on GPU %u, which does not exist; ignored",
                 p->member->tenant->name, p->pid, m->gpu);
    return true;
}

bool handle_memory_release(struct peer *p, const struct proto_request *r)
{
    const struct kairos_release *m = &r->body.release;
    uint64_t done = 0;
    int rc = ledger_release(&p->sv->ts->ledger, p->member, m->gpu, m->bytes, &done);
    char a[32], b[32];
    if (rc == -ERANGE)
        log_warn("tenant %s: pid %u released %s on GPU %u but held only %s; counted as %s",
                 p->member->tenant->name, p->pid, tenants_size(m->bytes, a, sizeof a), m->gpu,
                 tenants_size(done, b, sizeof b), b);
    else if (rc)
        log_warn("tenant %s: pid %u released on GPU %u, which does not exist; ignored",
                 p->member->tenant->name, p->pid, m->gpu);
    else
        credit_notify(&p->sv->ts->ledger, p->member->tenant, m->gpu, &handle_memory_credit_io);
    return true;
}

/* CREDIT: a report taken at once; a request answered now or when room comes. */
bool handle_memory_credit(struct peer *p, const struct proto_request *r)
{
    struct services *sv = p->sv;
    const struct kairos_credit *m = &r->body.credit;
    if (m->gpu >= sv->ts->n_gpus) {
        char msg[KAIROS_MSG_MAX];
        snprintf(msg, sizeof msg, "GPU %u does not exist on this node (it has %u)", m->gpu,
                 sv->ts->n_gpus);
        return peer_error(p, r->seq, KAIROS_ERR_INVALID, msg);
    }
    struct ledger_tenant *t = p->member->tenant;
    if (m->need || (m->flags & KAIROS_CREDIT_AHEAD))
        t->requests[m->gpu]++;
    uint64_t beyond = credit_take_report(p->member, m->gpu, m);
    if (beyond)
        handle_memory_claim_beyond(p, m->gpu, "CREDIT report's held", m->held, beyond);
    bool hold = handle_memory_hold(sv);
    credit_request(&sv->ts->ledger, p->member, m->gpu, r->seq, m, hold, peer_now_ms(),
                   &handle_memory_credit_io);
    credit_serve(&sv->ts->ledger, t, m->gpu, handle_memory_hold(sv), peer_now_ms(),
                 &handle_memory_credit_io);
    return !p->broken;
}

void handle_memory_serve_all(struct services *sv)
{
    for (size_t i = 0; i < sv->ts->ledger.n_tenants; i++)
        handle_memory_serve(sv, sv->ts->ledger.tenants[i]);
}

void handle_memory_tick(struct services *sv, uint64_t now)
{
    credit_expire(&sv->ts->ledger, handle_memory_hold(sv), now, &handle_memory_credit_io);
    /* quota changes, reloads and drained memory: refusals that may fit now */
    credit_notify(&sv->ts->ledger, NULL, 0, &handle_memory_credit_io);
    if (sv->imports && sv->imports->n_kept) { /* an importer's heirs may have gone */
        size_t kept_before = sv->imports->n_kept;
        imports_check(sv->imports);
        handle_memory_kept_released(sv, kept_before);
    }
    if (reattach_window_ended(&sv->window, now))
        handle_memory_serve_all(sv);
}
