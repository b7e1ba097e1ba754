/* credit.c - a tenant process's credit on one GPU (see credit.h). Pure arithmetic;
 * the caller (memguard.c) holds its lock around every call. */
#include "shim/credit.h"

#include <string.h>

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
    return a < b ? 0 : a - b;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* What is beyond the keep goes back: two chunks far from the quota and near it
 * alone (ALL; so that a reattach claim stays within what kairosd accepts); only what
 * waiting allocations need when members contend (EXACT). Before the first reply
 * nothing is known: all kept. */
static void trim(struct credit_gpu *c)
{
    uint64_t keep = c->exact    ? (c->waiting ? c->need : 0)
                    : c->chunk ? CREDIT_KEEP_CHUNKS * c->chunk
                               : UINT64_MAX;
    if (c->credit > keep) {
        c->returning = sat_add(c->returning, c->credit - keep);
        c->credit = keep;
    }
}

bool credit_take(struct credit_gpu *c, uint64_t bytes)
{
    if (c->credit < bytes)
        return false;
    c->credit -= bytes;
    c->held = sat_add(c->held, bytes);
    c->dirty = true;
    return true;
}

uint64_t credit_wait_begin(struct credit_gpu *c, uint64_t bytes)
{
    c->need = sat_add(c->need, bytes);
    c->least = c->waiting == 0 || bytes < c->least ? bytes : c->least;
    c->waiting++;
    return ++c->gen_waiting;
}

void credit_wait_end(struct credit_gpu *c, uint64_t bytes)
{
    c->need = sat_sub(c->need, bytes);
    if (c->waiting)
        c->waiting--;
    if (!c->waiting) {
        c->need = 0;
        c->least = 0;
    } else if (c->least > c->need) {
        c->least = c->need;
    }
}

bool credit_wait_refused(const struct credit_gpu *c, uint64_t gen)
{
    return gen <= c->gen_refused;
}

void credit_settle(struct credit_gpu *c, uint64_t reserved, uint64_t actual)
{
    c->held = sat_add(sat_sub(c->held, reserved), actual);
    if (actual <= reserved) {
        c->credit = sat_add(c->credit, reserved - actual);
        trim(c);
    } else {
        /* the driver took more than was reserved: from credit where it can; the
         * rest is held beyond it, counted when reported */
        uint64_t extra = actual - reserved;
        c->credit -= extra < c->credit ? extra : c->credit;
    }
    c->dirty = true;
}

/* The refusal remembered no longer holds: the next allocation asks kairosd. */
static void forget_refusal(struct credit_gpu *c)
{
    c->refused_least = 0;
}

void credit_on_room(struct credit_gpu *c)
{
    forget_refusal(c);
}

bool credit_refusal_holds(struct credit_gpu *c, uint64_t bytes, uint64_t now_ms)
{
    if (!c->refused_least || bytes < c->refused_least)
        return false;
    if (now_ms >= c->refused_ms + KAIROS_REFUSAL_MEMORY_MS || now_ms < c->refused_ms) {
        forget_refusal(c); /* a notice may have been lost: ask again */
        return false;
    }
    return true;
}

void credit_release(struct credit_gpu *c, uint64_t bytes)
{
    if (bytes)
        forget_refusal(c); /* its own free: room it did not have */
    uint64_t n = bytes < c->held ? bytes : c->held;
    c->held -= n;
    c->credit = sat_add(c->credit, n);
    trim(c);
    c->dirty = true;
}

void credit_recall(struct credit_gpu *c, uint64_t bytes)
{
    uint64_t give = bytes < c->credit ? bytes : c->credit;
    c->credit -= give;
    c->returning = sat_add(c->returning, give);
    c->recalled = true;
    c->exact = true; /* another member needs room: nothing ahead until a reply says */
    c->all = false;
}

static bool wants_request(const struct credit_gpu *c)
{
    if (c->asking || c->closed)
        return false;
    if (c->waiting)
        return c->need > c->credit && c->gen_waiting > c->gen_refused;
    /* ahead, once the first allocation there has told what a chunk is */
    return c->chunk && !c->exact && !c->all && !c->ahead_off && c->credit < c->chunk / 2;
}

bool credit_has_message(const struct credit_gpu *c, bool *request)
{
    *request = wants_request(c);
    return *request || c->dirty || c->returning || c->recalled;
}

bool credit_next_message(struct credit_gpu *c, uint32_t gpu, struct kairos_credit *out)
{
    bool request;
    if (!credit_has_message(c, &request))
        return false;
    memset(out, 0, sizeof *out);
    out->gpu = gpu;
    out->report = ++c->report;
    out->held = c->held;
    out->returned = c->returning;
    out->flags = c->recalled ? KAIROS_CREDIT_RECALLED : 0;
    if (c->acking) {
        out->flags |= KAIROS_CREDIT_REVOKED;
        if (!c->ack_built)
            c->ack_from = out->report;
        c->ack_built = true;
    }
    c->returning = 0;
    c->recalled = false;
    c->dirty = false;
    if (request) {
        if (c->waiting && c->need > c->credit) {
            out->need = c->need - c->credit;
            uint64_t least = sat_sub(c->least, c->credit);
            out->least = least == 0 ? 1 : least < out->need ? least : out->need;
        }
        if (!c->exact && !c->ahead_off)
            out->flags |= KAIROS_CREDIT_AHEAD;
        if (c->notices)
            out->flags |= KAIROS_CREDIT_NOTICE;
        c->ask_notice = c->notices;
        c->ask_least = c->waiting ? c->least : 0;
        c->asking = true;
        c->ask_report = out->report;
        c->gen_asked = c->gen_waiting;
    }
    return true;
}

void credit_unsend(struct credit_gpu *c, const struct kairos_credit *m)
{
    c->returning = sat_add(c->returning, m->returned);
    if (m->flags & KAIROS_CREDIT_RECALLED)
        c->recalled = true;
    c->dirty = true;
    if (c->asking && c->ask_report == m->report)
        c->asking = false;
}

/* A refusal that granted nothing to a request said NOTICE: kairosd owes a ROOM
 * before anything it refused can fit, so allocations of at least the smallest then
 * waiting are refused here meanwhile. Any other refusal is not remembered. */
static void remember_refusal(struct credit_gpu *c, const struct kairos_credit *r,
                             uint64_t now_ms)
{
    if (!(r->flags & KAIROS_CREDIT_REFUSED) || !(r->flags & KAIROS_CREDIT_NOTICES) ||
        !c->ask_notice || r->need || !c->ask_least)
        return;
    bool merge = c->refused_least && now_ms < c->refused_ms + KAIROS_REFUSAL_MEMORY_MS;
    if (!merge || c->ask_least < c->refused_least)
        c->refused_least = c->ask_least;
    if (!merge)
        c->refused_ms = now_ms;
}

void credit_on_reply(struct credit_gpu *c, const struct kairos_credit *r, uint64_t now_ms)
{
    if (r->flags & KAIROS_CREDIT_NOTICES)
        c->notices = true;
    if (c->quota && r->quota != c->quota)
        forget_refusal(c); /* another quota: what was refused may fit */
    if (r->flags & KAIROS_CREDIT_REVOKED) {
        /* allocations ask from now on; kairosd counts the credit until told */
        c->credit = 0;
        c->acking = true;
        c->ack_built = false;
        c->dirty = true;
    } else if (c->acking && c->ack_built && r->report >= c->ack_from) {
        c->acking = false; /* kairosd took a message that said so */
    }
    if (c->asking && r->report == c->ask_report) {
        c->asking = false;
        c->gen_answered = c->gen_asked;
        if (r->flags & KAIROS_CREDIT_REFUSED)
            c->gen_refused = c->gen_asked;
        remember_refusal(c, r, now_ms);
    }
    /* after the last message kairosd counts no credit for the process: a grant that
     * crossed it is not the process's to use */
    c->credit = sat_add(c->credit, c->closed ? 0 : r->need);
    c->chunk = r->least;
    c->quota = r->quota;
    c->exact = r->flags & KAIROS_CREDIT_EXACT;
    c->all = !c->exact && (r->flags & KAIROS_CREDIT_ALL);
    c->others_held = sat_sub(r->held, r->returned);
    if (c->exact)
        trim(c);
}

void credit_reconnected(struct credit_gpu *c)
{
    c->asking = false;
    c->returning = 0;  /* the new daemon counts only what the process claims */
    c->recalled = false;
    c->acking = false; /* the new daemon revoked nothing */
    c->notices = false; /* it may be one of before: requests say NOTICE once it does */
    forget_refusal(c);
    c->dirty = c->held || c->credit; /* tell it the split of the claim */
}

uint64_t credit_claim(const struct credit_gpu *c)
{
    return sat_add(c->held, c->credit);
}

uint64_t credit_tenant_held(const struct credit_gpu *c)
{
    return sat_add(c->others_held, c->held);
}

bool credit_last_message(struct credit_gpu *c, uint32_t gpu, struct kairos_credit *out)
{
    if (!c->held && !c->credit && !c->returning && !c->dirty && !c->asking)
        return false;
    c->returning = sat_add(c->returning, c->credit);
    c->credit = 0;
    c->asking = false;
    c->waiting = 0;
    c->exact = true;
    c->all = false;
    c->closed = true;
    c->dirty = true;
    if (!credit_next_message(c, gpu, out))
        return false;
    out->flags |= KAIROS_CREDIT_LAST; /* a grant that crosses it is void (see on_reply) */
    return true;
}
