/* credit.c - credit granted ahead to a tenant's processes, recalled when another
 * member needs room (see credit.h). Bookkeeping on the ledger's records; what is
 * to be sent goes through struct credit_io. */
#include "daemon/memory/credit.h"

#include <string.h>

#include "daemon/memory/ledger.h"

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
    return a < b ? 0 : a - b;
}

uint64_t credit_chunk(uint64_t quota)
{
    uint64_t c = quota / CREDIT_CHUNK_DIV;
    c -= c % CREDIT_CHUNK_MIN; /* whole pages */
    if (c < CREDIT_CHUNK_MIN)
        c = CREDIT_CHUNK_MIN;
    return c > CREDIT_CHUNK_MAX ? CREDIT_CHUNK_MAX : c;
}

uint64_t credit_view_held(const struct ledger_tenant *t, unsigned g)
{
    return sat_add(t->held[g], t->draining[g]);
}

uint64_t credit_room(const struct ledger_tenant *t, unsigned g)
{
    return sat_sub(t->quota[g], sat_add(sat_add(t->held[g], t->draining[g]), t->credit[g]));
}

/* The member's credit on g becomes c (the tenant's sum follows). */
static void set_credit(struct ledger_member *m, unsigned g, uint64_t c)
{
    struct ledger_tenant *t = m->tenant;
    t->credit[g] = sat_add(sat_sub(t->credit[g], m->credit[g]), c);
    m->credit[g] = c;
}

static void set_held(struct ledger_member *m, unsigned g, uint64_t h)
{
    struct ledger_tenant *t = m->tenant;
    t->held[g] = sat_add(sat_sub(t->held[g], m->held[g]), h);
    m->held[g] = h;
}

uint64_t credit_bound_claim(const struct ledger_member *m, unsigned g, uint64_t claim,
                            uint64_t *counted)
{
    uint64_t granted = sat_add(m->held[g], m->credit[g]);
    if (claim <= granted) {
        *counted = claim;
        return 0;
    }
    uint64_t extra = claim - granted, room = credit_room(m->tenant, g);
    uint64_t late = extra < room ? extra : room;
    *counted = granted + late;
    return extra - late;
}

uint64_t credit_take_report(struct ledger_member *m, unsigned g, const struct kairos_credit *c)
{
    struct credit_member *cr = &m->cr;
    uint64_t beyond = 0;
    if (c->flags & KAIROS_CREDIT_RECALLED)
        cr->recall_deadline_ms[g] = 0;
    bool newest = !cr->reported[g] || c->report > cr->report[g];
    if (newest) {
        /* the newest: what it holds out of what it was granted, the rest its credit.
         * A claim above the grant is counted only as far as the quota has room (as
         * a CHARGE would be granted); the rest is a lie, not counted (credit.h). An
         * older report's held is stale. */
        cr->reported[g] = true;
        cr->report[g] = c->report;
        uint64_t total = sat_add(m->held[g], m->credit[g]), held;
        beyond = credit_bound_claim(m, g, c->held, &held);
        set_credit(m, g, sat_sub(total, held));
        set_held(m, g, held);
    }
    /* then what it gave back (after the split: a reattach counts all as held) */
    uint64_t back = c->returned < m->credit[g] ? c->returned : m->credit[g];
    set_credit(m, g, m->credit[g] - back);
    if ((c->flags & KAIROS_CREDIT_REVOKED) && newest && cr->unacked[g]) {
        /* built after it read the revocation: it holds held and no credit any more
         * (the split above counted what it took before; every message it builds
         * says so until one is answered, so the newest taken always does) */
        set_credit(m, g, 0);
        cr->unacked[g] = false;
        cr->ack_deadline_ms[g] = 0;
    }
    if (cr->ended[g])
        set_credit(m, g, 0); /* after its LAST: what it frees is not its credit any more */
    return beyond;
}

static void send_reply(struct ledger_member *m, unsigned g, uint32_t seq, uint64_t report,
                       uint32_t flags, uint64_t granted, const struct credit_io *io)
{
    struct ledger_tenant *t = m->tenant;
    set_credit(m, g, sat_add(m->credit[g], granted));
    struct kairos_credit r = {.gpu = g, .flags = flags | KAIROS_CREDIT_NOTICES,
                              .report = report,
                              .held = credit_view_held(t, g), .returned = m->held[g],
                              .need = granted,
                              .least = credit_chunk(t->quota[g]), .quota = t->quota[g]};
    if (io && io->reply)
        io->reply(io->ctx, m->cr.peer, seq, &r);
}

/* Answers m's waiting request on g with granted (added to its credit). */
static void reply(struct ledger_member *m, unsigned g, uint32_t flags, uint64_t granted,
                  const struct credit_io *io)
{
    struct credit_wait w = m->cr.wait[g];
    memset(&m->cr.wait[g], 0, sizeof m->cr.wait[g]);
    send_reply(m, g, w.seq, w.report, flags, granted, io);
}

/* The unused credit of t's other members on g that may still be recalled; *owed:
 * whether a recall is outstanding there. */
static uint64_t recallable(const struct ledger *l, const struct ledger_member *m, unsigned g,
                           bool *owed)
{
    uint64_t sum = 0;
    *owed = false;
    for (const struct ledger_member *o = l->members; o; o = o->next) {
        if (o == m || o->tenant != m->tenant)
            continue;
        if (o->cr.recall_deadline_ms[g] || o->cr.ack_deadline_ms[g])
            *owed = true; /* its answer, or its word that it dropped its credit, is due */
        else if (!o->cr.revoked[g])
            sum = sat_add(sum, o->credit[g]);
    }
    return sum;
}

static void send_recalls(struct ledger *l, const struct ledger_member *m, unsigned g,
                         uint64_t now_ms, const struct credit_io *io)
{
    for (struct ledger_member *o = l->members; o; o = o->next) {
        if (o == m || o->tenant != m->tenant || o->cr.recall_deadline_ms[g] ||
            o->cr.revoked[g] || !o->credit[g])
            continue;
        o->cr.recall_deadline_ms[g] = now_ms + CREDIT_RECALL_TIMEOUT_MS;
        o->cr.recalled_at_ms[g] = now_ms ? now_ms : 1;
        if (io && io->recall)
            io->recall(io->ctx, o->cr.peer, g, o->credit[g]);
    }
}

/* Whether m's tenant on g is contended: another member waits for room, or a recall
 * was sent there less than CREDIT_CONTENDED_MS ago. Then every grant is exact, so
 * that members near the quota take turns by their requests, not by recalls. */
static bool contended(const struct ledger *l, const struct ledger_member *m, unsigned g,
                      uint64_t now_ms)
{
    for (const struct ledger_member *o = l->members; o; o = o->next) {
        if (o->tenant != m->tenant)
            continue;
        if (o != m && o->cr.wait[g].active)
            return true;
        if (o->cr.recalled_at_ms[g] && now_ms < o->cr.recalled_at_ms[g] + CREDIT_CONTENDED_MS)
            return true;
    }
    return false;
}

/* The tenant's memory on g that no one holds (credit counts as free: a refused
 * member could have had it by recalls): only when it grows may a refusal fit. */
static uint64_t not_held(const struct ledger_tenant *t, unsigned g)
{
    return sat_sub(t->quota[g], credit_view_held(t, g));
}

/* Answers m's waiting request on g if it can be answered now; true when it was. */
static bool serve_one(struct ledger *l, struct ledger_member *m, unsigned g, bool hold,
                      uint64_t now_ms, const struct credit_io *io)
{
    struct credit_wait *w = &m->cr.wait[g];
    struct ledger_tenant *t = m->tenant;
    if (!w->active || hold || m->cr.unacked[g])
        return false; /* revoked and not yet said so: a grant now could be lost in
                       * the credit its word drops */
    uint64_t room = credit_room(t, g), chunk = credit_chunk(t->quota[g]);
    /* credit ahead only to one that takes it, is not revoked, and has no neighbour
     * contending for the room (it would be recalled at once) */
    bool ahead = (w->flags & KAIROS_CREDIT_AHEAD) && !m->cr.revoked[g] &&
                 !contended(l, m, g, now_ms);
    if (room >= w->need) {
        if (!ahead)
            reply(m, g, KAIROS_CREDIT_EXACT, w->need, io); /* exactly the need */
        else if (room - w->need >= chunk)
            reply(m, g, 0, w->need + chunk, io); /* far from the quota: a chunk ahead */
        else
            reply(m, g, KAIROS_CREDIT_ALL, room, io); /* near it: all the room is its */
        return true;
    }
    bool owed;
    uint64_t others = recallable(l, m, g, &owed);
    if (w->rounds < CREDIT_RECALL_ROUNDS && others && sat_add(room, others) >= w->least) {
        w->rounds++;
        send_recalls(l, m, g, now_ms, io);
        return false;
    }
    if (owed)
        return false; /* an answer (or a revoked member's word) is coming */
    uint64_t granted = room >= w->least ? room : 0;
    t->refusals[g]++;
    if (io && io->refused)
        io->refused(io->ctx, t, m, g, w->need);
    bool remembered = (w->flags & KAIROS_CREDIT_NOTICE) && !granted;
    reply(m, g, KAIROS_CREDIT_REFUSED | KAIROS_CREDIT_EXACT, granted, io);
    if (remembered) { /* the shim answers such allocations itself until a ROOM */
        m->cr.notice[g] = true;
        m->cr.notice_avail[g] = not_held(t, g);
    }
    return true;
}

/* m's last CREDIT on g (KAIROS_CREDIT_LAST: it exits): it holds no credit from now
 * on, whatever a reply that crossed this message granted or a message sent after it
 * asks (the shim's sender may send a request it built before LAST after it); a
 * request of its that still waits for room is refused (the process takes nothing
 * more). */
static void take_last(struct ledger_member *m, unsigned g, const struct credit_io *io)
{
    if (m->cr.wait[g].active)
        reply(m, g, KAIROS_CREDIT_REFUSED | KAIROS_CREDIT_EXACT, 0, io);
    set_credit(m, g, 0);
    m->cr.recall_deadline_ms[g] = 0;
    m->cr.ended[g] = true;
}

void credit_request(struct ledger *l, struct ledger_member *m, unsigned g, uint32_t seq,
                    const struct kairos_credit *c, bool hold, uint64_t now_ms,
                    const struct credit_io *io)
{
    if (c->flags & KAIROS_CREDIT_LAST)
        take_last(m, g, io);
    if (!c->need && !(c->flags & KAIROS_CREDIT_AHEAD)) { /* a report: answered at once */
        /* ALL only once no room is left outside the members' credit: a shim told ALL
         * asks nothing ahead, so room still ungranted would cost its next allocation
         * a round trip (and fail it while kairosd is stopped); asked for ahead, that
         * room is granted ALL (serve_one) */
        uint64_t room = credit_room(m->tenant, g);
        uint32_t flags = m->cr.revoked[g] || contended(l, m, g, now_ms) ? KAIROS_CREDIT_EXACT
                         : room == 0                                    ? KAIROS_CREDIT_ALL
                                                                        : 0;
        send_reply(m, g, seq, c->report, flags, 0, io);
        return;
    }
    if (m->cr.ended[g]) { /* asked after its LAST: answered, with nothing */
        send_reply(m, g, seq, c->report, KAIROS_CREDIT_REFUSED | KAIROS_CREDIT_EXACT, 0, io);
        return;
    }
    struct credit_wait *w = &m->cr.wait[g];
    if (w->active) /* a second request while one waits: the first gets nothing */
        reply(m, g, KAIROS_CREDIT_REFUSED, 0, io);
    *w = (struct credit_wait){.active = true, .seq = seq, .flags = c->flags,
                              .report = c->report, .need = c->need, .least = c->least};
    credit_serve(l, m->tenant, g, hold, now_ms, io);
}

void credit_serve(struct ledger *l, struct ledger_tenant *t, unsigned g, bool hold,
                  uint64_t now_ms, const struct credit_io *io)
{
    if (g >= KAIROS_MAX_GPUS)
        return;
    for (struct ledger_member *m = l->members; m; m = m->next)
        if (m->tenant == t && m->cr.wait[g].active)
            serve_one(l, m, g, hold, now_ms, io);
    credit_notify(l, t, g, io);
}

static void notify_one(struct ledger_member *m, unsigned g, const struct credit_io *io)
{
    if (!m->cr.notice[g] || not_held(m->tenant, g) <= m->cr.notice_avail[g])
        return;
    m->cr.notice[g] = false;
    if (io && io->room)
        io->room(io->ctx, m->cr.peer, g);
}

void credit_notify(struct ledger *l, struct ledger_tenant *t, unsigned g,
                   const struct credit_io *io)
{
    for (struct ledger_member *m = l->members; m; m = m->next) {
        if (t && m->tenant == t && g < KAIROS_MAX_GPUS)
            notify_one(m, g, io);
        for (unsigned h = 0; !t && h < KAIROS_MAX_GPUS; h++)
            notify_one(m, h, io);
    }
}

/* A recall unanswered past its deadline: m is revoked. Its credit stays counted (it
 * may still allocate from it until it reads KAIROS_CREDIT_REVOKED) until it says it
 * dropped it, or leaves; what waits for room waits for that word until the ack
 * deadline, then is refused. */
static void revoke(struct ledger *l, struct ledger_member *m, unsigned g, bool hold,
                   uint64_t now_ms, const struct credit_io *io)
{
    m->cr.recall_deadline_ms[g] = 0;
    m->cr.revoked[g] = true;
    m->cr.unacked[g] = true;
    m->cr.ack_deadline_ms[g] = now_ms + CREDIT_ACK_TIMEOUT_MS;
    if (io && io->revoked)
        io->revoked(io->ctx, m->tenant, m, g, m->credit[g]);
    credit_serve(l, m->tenant, g, hold, now_ms, io);
}

void credit_expire(struct ledger *l, bool hold, uint64_t now_ms, const struct credit_io *io)
{
    for (struct ledger_member *m = l->members; m; m = m->next)
        for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
            uint64_t d = m->cr.recall_deadline_ms[g], a = m->cr.ack_deadline_ms[g];
            if (d && now_ms >= d) {
                revoke(l, m, g, hold, now_ms, io);
            } else if (a && now_ms >= a) {
                m->cr.ack_deadline_ms[g] = 0; /* still counted; what waits is refused */
                credit_serve(l, m->tenant, g, hold, now_ms, io);
            }
        }
}

void credit_drop(struct ledger_member *m)
{
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        set_credit(m, g, 0);
        m->cr.recall_deadline_ms[g] = 0;
        m->cr.ack_deadline_ms[g] = 0;
        m->cr.unacked[g] = false;
        m->cr.wait[g].active = false;
        m->cr.notice[g] = false;
    }
}

void credit_fold(struct ledger_member *m)
{
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        set_held(m, g, sat_add(m->held[g], m->credit[g]));
        set_credit(m, g, 0);
        m->cr.recall_deadline_ms[g] = 0;
        m->cr.ack_deadline_ms[g] = 0;
        m->cr.unacked[g] = false;
        m->cr.wait[g].active = false;
        m->cr.notice[g] = false;
    }
}
