/* imports.c - shared RM objects and the verified imports of them (see imports.h). */
#include "daemon/imports.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/grow.h"
#include "daemon/log.h"
#include "daemon/proc_stat.h"

void imports_init(struct imports *im, const char *proc, struct heirs *heirs)
{
    memset(im, 0, sizeof *im);
    im->proc = proc ? proc : "/proc";
    im->heirs = heirs;
}

void imports_set_ledger(struct imports *im, struct ledger *ledger)
{
    im->ledger = ledger;
}

void imports_fini(struct imports *im)
{
    free(im->kept);
    free(im->shares);
    free(im->v);
    memset(im, 0, sizeof *im);
}

/* A share of everything the process has (h_client 0): what a process that shared
 * more than kairosd remembers one by one is taken to have done. */
static bool shares_all(const struct ipc_share *s)
{
    return s->what.h_client == 0;
}

static bool same_object(const struct ipc_share *s, uint32_t client, uint32_t object)
{
    return shares_all(s) || (s->what.h_client == client && s->what.h_object == object);
}

static bool same_process(const struct ipc_share *s, uint32_t pid, uint64_t start)
{
    return s->pid == pid && s->start == start;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const struct ipc_share *admitting_share(const struct imports *im, uint32_t pid,
                                               uint32_t uid, uint32_t client_src,
                                               uint32_t object_src, uint32_t h_client,
                                               bool *shared, bool *own);

/* heirs_hold answers for departed importers, remembered for one prune (an importer
 * has many imports; each question reads /proc). */
struct holds_memo {
    uint32_t pid[8];
    bool holds[8];
    unsigned n;
};

static bool departed_holds(struct imports *im, uint32_t pid, struct holds_memo *memo)
{
    for (unsigned k = 0; k < memo->n; k++)
        if (memo->pid[k] == pid)
            return memo->holds[k];
    bool holds = im->heirs && heirs_hold(im->heirs, pid);
    unsigned k = memo->n < 8 ? memo->n++ : pid % 8;
    memo->pid[k] = pid;
    memo->holds[k] = holds;
    return holds;
}

/* An import lives while its importer is connected, or after its departure while
 * it, or a process it handed its files to, holds a driver file. One taken
 * provisionally (after a restart) lives until its deadline, unless a share that
 * admits it has arrived by then. */
static bool import_lives(struct imports *im, struct ipc_import *i, struct holds_memo *memo)
{
    if (!i->verified) {
        bool shared, own;
        const struct ipc_share *by = admitting_share(im, i->pid, i->uid, i->h_client_src,
                                                     i->h_object_src, i->h_client, &shared,
                                                     &own);
        i->verified = by != NULL;
        if (by) { /* told before its share (a restart): it imports the object shared */
            i->exporter_pid = by->pid;
            i->exporter_start = by->start;
            i->seq = i->seq > by->seq ? i->seq : by->seq + 1;
        }
        if (!i->verified && now_ms() >= i->provisional_until_ms)
            return false;
    }
    if (!i->departed)
        return true; /* connected: kairosd hears of its departure */
    return i->heirs_hold && departed_holds(im, i->pid, memo);
}

static bool share_in_use(const struct imports *im, const struct ipc_share *s)
{
    for (size_t i = 0; i < im->n; i++)
        if (same_object(s, im->v[i].h_client_src, im->v[i].h_object_src))
            return true;
    return false;
}

/* Whether a verified import begun before k was freed still holds k's object. */
static bool kept_in_use(const struct imports *im, const struct ipc_kept *k)
{
    for (size_t i = 0; i < im->n; i++) {
        const struct ipc_import *v = &im->v[i];
        if (v->verified && v->exporter_pid == k->pid && v->exporter_start == k->start &&
            v->h_client_src == k->h_client && v->h_object_src == k->h_object &&
            v->seq > k->since && v->seq < k->seq)
            return true;
    }
    return false;
}

/* k's bytes back to its tenant's room (when the tenant is still the same one). */
static void kept_release(struct imports *im, const struct ipc_kept *k)
{
    struct ledger_tenant *t = im->ledger ? ledger_tenant_find(im->ledger, k->tenant) : NULL;
    if (!t || t->id != k->tenant_id)
        return;
    t->draining[k->gpu] -= k->bytes < t->draining[k->gpu] ? k->bytes : t->draining[k->gpu];
    log_info("tenant %s: the last CUDA IPC import of object 0x%x of client 0x%x (freed by pid "
             "%u) ended: its charge is released", t->name, k->h_object, k->h_client, k->pid);
}

static void prune_kept(struct imports *im)
{
    size_t w = 0;
    for (size_t i = 0; i < im->n_kept; i++)
        if (kept_in_use(im, &im->kept[i]))
            im->kept[w++] = im->kept[i];
        else
            kept_release(im, &im->kept[i]);
    im->n_kept = w;
}

/* Forgets imports that ended, then shares of processes gone that no import names,
 * then releases the kept charges no import holds any more. */
static void prune(struct imports *im)
{
    size_t w = 0;
    struct holds_memo memo = {.n = 0};
    for (size_t i = 0; i < im->n; i++)
        if (import_lives(im, &im->v[i], &memo))
            im->v[w++] = im->v[i];
    im->n = w;
    w = 0;
    for (size_t i = 0; i < im->n_shares; i++)
        if (!im->shares[i].departed || share_in_use(im, &im->shares[i]))
            im->shares[w++] = im->shares[i];
    im->n_shares = w;
    prune_kept(im);
}

/* Room for one more share of pid: when it already has KAIROS_SHARED_PER_PROCESS,
 * or the node KAIROS_SHARED_MAX, its own are replaced by one share of everything,
 * with any process (never a refusal: an unverified import would let the memory
 * outlive the exporter's charge). Returns the slot to fill, or NULL (out of memory). */
static struct ipc_share *room_for(struct imports *im, uint32_t pid, uint64_t start, bool *all)
{
    size_t mine = 0;
    for (size_t i = 0; i < im->n_shares; i++)
        if (same_process(&im->shares[i], pid, start)) {
            if (shares_all(&im->shares[i])) {
                *all = true;
                return &im->shares[i]; /* shares everything already */
            }
            mine++;
        }
    if (im->n_shares >= KAIROS_SHARED_MAX)
        prune(im);
    *all = mine >= KAIROS_SHARED_PER_PROCESS || im->n_shares >= KAIROS_SHARED_MAX;
    if (*all) {
        size_t w = 0;
        for (size_t i = 0; i < im->n_shares; i++)
            if (!same_process(&im->shares[i], pid, start))
                im->shares[w++] = im->shares[i];
        im->n_shares = w;
    }
    struct ipc_share *grown =
        grow_for_one(im->shares, &im->cap_shares, im->n_shares, sizeof *grown, 16);
    if (!grown)
        return NULL;
    im->shares = grown;
    return &im->shares[im->n_shares++];
}

int imports_shared(struct imports *im, uint32_t pid, uint32_t uid, const struct kairos_shared *m,
                   char *why, size_t why_len)
{
    uint32_t ppid;
    uint64_t start;
    if (proc_stat_read(im->proc, pid, &ppid, &start) != 0) {
        snprintf(why, why_len, "pid %u is not in %s: kairosd cannot tell it from a later "
                 "process with its pid", pid, im->proc);
        return KAIROS_ERR_INVALID;
    }
    for (size_t i = 0; i < im->n_shares; i++) {
        struct ipc_share *s = &im->shares[i];
        if (same_process(s, pid, start) && !shares_all(s) &&
            s->what.h_client == m->h_client && s->what.h_object == m->h_object) {
            s->what = *m; /* shared again: the newest scope */
            return 0;
        }
    }
    bool all = false;
    struct ipc_share *slot = room_for(im, pid, start, &all);
    if (!slot) {
        snprintf(why, why_len, "kairosd is out of memory; try again");
        return KAIROS_ERR_INVALID;
    }
    *slot = (struct ipc_share){.pid = pid, .uid = uid, .start = start, .seq = ++im->seq,
                               .what = *m};
    if (all)
        slot->what = (struct kairos_shared){.share_type = KAIROS_SHARE_ALL};
    return 0;
}

/* Whether the share admits pid (euid uid) dup'ing into its client h_client. */
static bool scope_admits(const struct ipc_share *s, uint32_t pid, uint32_t uid, uint32_t h_client)
{
    switch (s->what.share_type) {
    case KAIROS_SHARE_ALL:
        return true;
    case KAIROS_SHARE_SECURITY_TOKEN:
        return s->uid == uid;
    case KAIROS_SHARE_CLIENT:
        return s->what.share_arg == h_client;
    case KAIROS_SHARE_PID:
        return s->what.share_arg == pid;
    default:
        return false;
    }
}

/* A live member's share of (client_src, object_src) that admits pid (euid uid)
 * dup'ing it into its client h_client, never pid's own; NULL when none, with
 * *shared (a live share of it exists) and *own (pid shared it itself) set. */
static const struct ipc_share *admitting_share(const struct imports *im, uint32_t pid,
                                               uint32_t uid, uint32_t client_src,
                                               uint32_t object_src, uint32_t h_client,
                                               bool *shared, bool *own)
{
    *shared = *own = false;
    for (size_t i = 0; i < im->n_shares; i++) {
        const struct ipc_share *s = &im->shares[i];
        if (!same_object(s, client_src, object_src) || s->departed)
            continue;
        *shared = true;
        *own |= s->pid == pid && !shares_all(s);
        if (s->pid != pid && scope_admits(s, pid, uid, h_client))
            return s;
    }
    return NULL;
}

static int begin(struct imports *im, uint32_t pid, uint32_t uid, const struct kairos_imported *m,
                 uint64_t provisional_ms, uint32_t *exporter, char *why, size_t why_len)
{
    bool own, shared;
    const struct ipc_share *by = admitting_share(im, pid, uid, m->h_client_src, m->h_object_src,
                                                 m->h_client, &shared, &own);
    bool provisional = !by && !shared && provisional_ms;
    if (!by && !provisional) {
        snprintf(why, why_len,
                 own ? "object 0x%x of client 0x%x is the sender's own: not an import"
                 : shared ? "object 0x%x of client 0x%x is not shared with pid %u (uid %u): "
                            "the exporter must share it with this process"
                          : "no live member of a tenant reported object 0x%x of client 0x%x as "
                            "shared (pid %u)",
                 m->h_object_src, m->h_client_src, pid, uid);
        return own ? KAIROS_ERR_INVALID : KAIROS_ERR_PERMISSION;
    }
    uint32_t ppid;
    uint64_t start;
    if (proc_stat_read(im->proc, pid, &ppid, &start) != 0) {
        snprintf(why, why_len, "pid %u is not in %s", pid, im->proc);
        return KAIROS_ERR_INVALID;
    }
    if (im->n >= KAIROS_IMPORTS_MAX)
        prune(im);
    size_t mine = 0;
    for (size_t i = 0; i < im->n; i++)
        mine += im->v[i].pid == pid && im->v[i].start == start;
    struct ipc_import *grown = im->n < KAIROS_IMPORTS_MAX && mine < KAIROS_IMPORTS_PER_PROCESS
                                   ? grow_for_one(im->v, &im->cap, im->n, sizeof *grown, 16)
                                   : NULL;
    if (!grown) {
        snprintf(why, why_len, "kairosd remembers no more than %u imports per process and %u "
                 "in all (or is out of memory); close imported memory first",
                 KAIROS_IMPORTS_PER_PROCESS, KAIROS_IMPORTS_MAX);
        return KAIROS_ERR_INVALID;
    }
    im->v = grown;
    im->v[im->n++] = (struct ipc_import){.pid = pid, .uid = uid, .start = start,
                                         .exporter_pid = by ? by->pid : 0,
                                         .exporter_start = by ? by->start : 0,
                                         .seq = ++im->seq,
                                         .verified = by != NULL,
                                         .provisional_until_ms = now_ms() + provisional_ms,
                                         .h_client_src = m->h_client_src,
                                         .h_object_src = m->h_object_src,
                                         .h_client = m->h_client, .h_object = m->h_object};
    if (exporter)
        *exporter = by ? by->pid : 0;
    return 0;
}

static int end(struct imports *im, uint32_t pid, const struct kairos_imported *m, char *why,
               size_t why_len)
{
    for (size_t i = 0; i < im->n; i++) {
        struct ipc_import *v = &im->v[i];
        if (v->pid == pid && !v->departed && v->h_client_src == m->h_client_src &&
            v->h_object_src == m->h_object_src && v->h_client == m->h_client &&
            (v->h_object == m->h_object || v->h_object == 0)) {
            im->v[i] = im->v[--im->n];
            prune_kept(im); /* maybe the last import of an object its exporter freed */
            return 0;
        }
    }
    snprintf(why, why_len, "pid %u has no import of object 0x%x of client 0x%x into client 0x%x",
             pid, m->h_object_src, m->h_client_src, m->h_client);
    return KAIROS_ERR_INVALID;
}

int imports_imported(struct imports *im, uint32_t pid, uint32_t uid,
                     const struct kairos_imported *m, uint64_t provisional_ms,
                     uint32_t *exporter, char *why, size_t why_len)
{
    if (m->flags == KAIROS_IMPORT_BEGIN)
        return begin(im, pid, uid, m, provisional_ms, exporter, why, why_len);
    return end(im, pid, m, why, why_len);
}

void imports_member_left(struct imports *im, uint32_t pid)
{
    for (size_t i = 0; i < im->n_shares; i++)
        if (im->shares[i].pid == pid)
            im->shares[i].departed = true;
    bool holds = false, asked = false;
    for (size_t i = 0; i < im->n; i++)
        if (im->v[i].pid == pid && !im->v[i].departed) {
            if (!asked) /* one /proc look for all its imports */
                holds = im->heirs && heirs_hold(im->heirs, pid);
            asked = true;
            im->v[i].departed = true;
            im->v[i].heirs_hold = holds;
        }
    prune(im);
}

/* Forgets pid's own share of (client, object) (not a share of everything); returns
 * when it was reported (0: not one by one, so any import of it counts). */
static uint64_t forget_share(struct imports *im, uint32_t pid, uint64_t start, uint32_t client,
                             uint32_t object)
{
    for (size_t i = 0; i < im->n_shares; i++) {
        const struct ipc_share *s = &im->shares[i];
        if (same_process(s, pid, start) && !shares_all(s) && s->what.h_client == client &&
            s->what.h_object == object) {
            uint64_t seq = s->seq;
            im->shares[i] = im->shares[--im->n_shares];
            return seq;
        }
    }
    return 0;
}

/* The record kept for pid's (client, object): one per object, however often told. */
static struct ipc_kept *kept_slot(struct imports *im, uint32_t pid, uint64_t start,
                                  uint32_t client, uint32_t object, bool *fresh)
{
    *fresh = false;
    for (size_t i = 0; i < im->n_kept; i++) {
        struct ipc_kept *k = &im->kept[i];
        if (k->pid == pid && k->start == start && k->h_client == client && k->h_object == object)
            return k;
    }
    struct ipc_kept *grown = grow_for_one(im->kept, &im->cap_kept, im->n_kept, sizeof *grown, 8);
    if (!grown)
        return NULL;
    im->kept = grown;
    *fresh = true;
    return &im->kept[im->n_kept++];
}

/* The start time of connected member pid, from its shares: its FREED may be read
 * after it exited (the hang-up comes after its messages), when /proc has it no more. */
static bool live_start(const struct imports *im, uint32_t pid, uint64_t *start)
{
    for (size_t i = 0; i < im->n_shares; i++)
        if (im->shares[i].pid == pid && !im->shares[i].departed) {
            *start = im->shares[i].start;
            return true;
        }
    return false;
}

bool imports_freed(struct imports *im, uint32_t pid, struct ledger_tenant *t,
                   const struct kairos_shared *m)
{
    uint32_t ppid;
    uint64_t start;
    if (!live_start(im, pid, &start) && proc_stat_read(im->proc, pid, &ppid, &start) != 0)
        return false; /* shares nothing, and gone: nothing of it can be imported */
    prune(im); /* first: imports told before their share (a restart) are verified */
    /* it can no longer be dup'ed: its share goes */
    uint64_t since = forget_share(im, pid, start, m->h_client, m->h_object);
    struct ipc_kept probe = {.pid = pid, .start = start, .h_client = m->h_client,
                             .h_object = m->h_object, .since = since, .seq = ++im->seq};
    if (!im->ledger || !t || m->gpu >= KAIROS_MAX_GPUS || !kept_in_use(im, &probe))
        return false; /* no verified import holds it: released with the sender's report */
    bool fresh;
    struct ipc_kept *k = kept_slot(im, pid, start, m->h_client, m->h_object, &fresh);
    if (!k)
        return false; /* out of memory: released, logged by the caller */
    if (fresh) {
        *k = probe;
        k->gpu = m->gpu;
        memcpy(k->tenant, t->name, sizeof k->tenant);
        k->tenant_id = t->id;
    } else if (k->gpu != m->gpu || k->tenant_id != t->id) {
        return true; /* the same object on another GPU or tenant: a lie; the first stays */
    }
    /* Freed again under the same handle (re-allocated, re-shared, re-imported): the
     * record covers the imports of both, and both charges (the sender's own tenant). */
    uint64_t add = m->bytes < KAIROS_BYTES_MAX - k->bytes ? m->bytes : KAIROS_BYTES_MAX - k->bytes;
    k->bytes += add;
    k->since = k->since < since ? k->since : since;
    k->seq = probe.seq;
    t->draining[k->gpu] += add;
    return true;
}

bool imports_hold(struct imports *im, uint32_t pid)
{
    prune(im);
    for (size_t i = 0; i < im->n_shares; i++) {
        const struct ipc_share *s = &im->shares[i];
        if (s->pid == pid && share_in_use(im, s))
            return true;
    }
    return false;
}

bool imports_holder_cb(void *ctx, uint32_t pid)
{
    struct imports *im = ctx;
    return (im->heirs && heirs_hold(im->heirs, pid)) || imports_hold(im, pid);
}

uint64_t imports_kept(const struct imports *im, const struct ledger_tenant *t, unsigned gpu)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < im->n_kept; i++) {
        const struct ipc_kept *k = &im->kept[i];
        if (k->tenant_id == t->id && k->gpu == gpu && !strcmp(k->tenant, t->name))
            sum += k->bytes;
    }
    return sum < t->draining[gpu] ? sum : t->draining[gpu];
}

size_t imports_check(struct imports *im)
{
    prune(im);
    return im->n_kept;
}

size_t imports_count(struct imports *im)
{
    prune(im);
    return im->n;
}
