/* imports.c - shared RM objects, the verified imports of them, and their bounds (see
 * imports.h). */
#include "daemon/memory/imports.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/grow.h"
#include "daemon/base/log.h"
#include "daemon/base/proc_stat.h"

void imports_init(struct imports *im, const char *proc, struct heirs *heirs,
                  struct ledger *ledger)
{
    memset(im, 0, sizeof *im);
    im->proc = proc ? proc : "/proc";
    im->heirs = heirs;
    im->ledger = ledger;
    im->max_shares = KAIROS_SHARED_MAX;
    im->max_imports = KAIROS_IMPORTS_MAX;
    im->mps_owner = MPS_SERVER_OWNER;
    im->mps_rescan_ms = IMPORTS_MPS_RESCAN_MS;
}

void imports_fini(struct imports *im)
{
    free(im->kept);
    free(im->shares);
    free(im->v);
    memset(im, 0, sizeof *im);
}

static bool same_object(const struct ipc_share *s, uint32_t client, uint32_t object)
{
    return s->what.h_client == client && s->what.h_object == object;
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

/* Whether a share of scope what, by a process of euid sharer_uid, admits pid (euid
 * uid) dup'ing into its client h_client. */
static bool scope_admits(const struct kairos_shared *what, uint32_t sharer_uid, uint32_t pid,
                         uint32_t uid, uint32_t h_client)
{
    switch (what->share_type) {
    case KAIROS_SHARE_ALL:
        return true;
    case KAIROS_SHARE_SECURITY_TOKEN:
        return sharer_uid == uid;
    case KAIROS_SHARE_CLIENT:
        return what->share_arg == h_client;
    case KAIROS_SHARE_PID:
        return what->share_arg == pid;
    default:
        return false;
    }
}

/* Whether import v is of the object that process (pid, start) of euid uid shared
 * with scope what, and that scope admits it: only such an import keeps that
 * process's charge, whoever else claims to share the object. */
static bool import_of(const struct ipc_import *v, uint32_t pid, uint64_t start, uint32_t uid,
                      const struct kairos_shared *what)
{
    return (v->verified || !v->mps) && /* an MPS client's holds no member's charge */
           v->h_client_src == what->h_client && v->h_object_src == what->h_object &&
           !(v->pid == pid && v->start == start) &&
           scope_admits(what, uid, v->pid, v->uid, v->h_client);
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
        *own |= s->pid == pid;
        if (s->pid != pid && scope_admits(&s->what, s->uid, pid, uid, h_client))
            return s;
    }
    return NULL;
}

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
 * admits it has arrived by then; an MPS client's lives on unverified once past it. */
static bool import_lives(struct imports *im, struct ipc_import *i, struct holds_memo *memo)
{
    if (!i->verified && (!i->mps || now_ms() < i->provisional_until_ms)) {
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
        if (import_of(&im->v[i], s->pid, s->start, s->uid, &s->what))
            return true;
    return false;
}

/* Whether a verified import that k's share admits, begun after that share and
 * before its free, still holds k's object. */
static bool kept_in_use(const struct imports *im, const struct ipc_kept *k)
{
    for (size_t i = 0; i < im->n; i++) {
        const struct ipc_import *v = &im->v[i];
        if (v->verified && import_of(v, k->pid, k->start, k->uid, &k->scope) &&
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

/* ---- bounds ------------------------------------------------------------------------ */

/* How many entries of one table are the sender's process's, tenant's, uid's, and
 * how many there are in all. */
struct ipc_counts {
    size_t process, tenant, uid, all;
};

static void count_one(struct ipc_counts *c, const struct ipc_sender *who, uint64_t start,
                      uint32_t pid, uint64_t e_start, uint32_t tenant, uint32_t uid)
{
    c->process += pid == who->pid && e_start == start;
    c->tenant += tenant == who->tenant;
    c->uid += uid == who->uid;
    c->all++;
}

static struct ipc_counts count_shares(const struct imports *im, const struct ipc_sender *who,
                                      uint64_t start)
{
    struct ipc_counts c = {0, 0, 0, 0};
    for (size_t i = 0; i < im->n_shares; i++) {
        const struct ipc_share *s = &im->shares[i];
        count_one(&c, who, start, s->pid, s->start, s->tenant, s->uid);
    }
    return c;
}

static struct ipc_counts count_imports(const struct imports *im, const struct ipc_sender *who,
                                       uint64_t start)
{
    struct ipc_counts c = {0, 0, 0, 0};
    for (size_t i = 0; i < im->n; i++) {
        const struct ipc_import *v = &im->v[i];
        count_one(&c, who, start, v->pid, v->start, v->tenant, v->uid);
    }
    return c;
}

/* Whether one more entry of who (c: its counts) passes the bounds: 0, or
 * KAIROS_ERR_INVALID with why. The node's bound refuses only a tenant past its
 * reserve: what other tenants filled never refuses this one its reserve. */
static int over_bounds(const struct ipc_counts *c, const struct ipc_sender *who,
                       size_t per_process, size_t node_max, const char *what, char *why,
                       size_t why_len)
{
    const char *fix = "end some first (free shared memory, close imported memory)";
    if (c->process >= per_process)
        snprintf(why, why_len, "pid %u has %zu CUDA IPC %s, the most kairosd follows per "
                 "process: %s", who->pid, c->process, what, fix);
    else if (c->tenant >= KAIROS_IPC_PER_TENANT)
        snprintf(why, why_len, "pid %u's tenant has %zu CUDA IPC %s, the most kairosd follows "
                 "per tenant: %s", who->pid, c->tenant, what, fix);
    else if (c->uid >= KAIROS_IPC_PER_UID)
        snprintf(why, why_len, "uid %u has %zu CUDA IPC %s, the most kairosd follows per user: "
                 "%s", who->uid, c->uid, what, fix);
    else if (c->all >= node_max && c->tenant >= KAIROS_IPC_RESERVED)
        snprintf(why, why_len, "kairosd follows %zu CUDA IPC %s on this node, its most, and "
                 "pid %u's tenant has %zu (each tenant keeps %u even then): %s", c->all, what,
                 who->pid, c->tenant, KAIROS_IPC_RESERVED, fix);
    else
        return 0;
    return KAIROS_ERR_INVALID;
}

/* Room for one more entry of who in a table: 0, or a KAIROS_ERR_* code with why.
 * Past a bound, what ended is forgotten first (prune), then counted again. */
static int room(struct imports *im, const struct ipc_sender *who, uint64_t start, bool shares,
                char *why, size_t why_len)
{
    size_t per = shares ? KAIROS_SHARED_PER_PROCESS : KAIROS_IMPORTS_PER_PROCESS;
    size_t max = shares ? im->max_shares : im->max_imports;
    const char *what = shares ? "shares" : "imports";
    struct ipc_counts c = shares ? count_shares(im, who, start) : count_imports(im, who, start);
    if (!over_bounds(&c, who, per, max, what, why, why_len))
        return 0;
    prune(im);
    c = shares ? count_shares(im, who, start) : count_imports(im, who, start);
    return over_bounds(&c, who, per, max, what, why, why_len);
}

/* ---- shares ------------------------------------------------------------------------ */

/* The bytes that process (pid, start)'s shares name on gpu, (client, object)'s aside. */
static uint64_t shared_on(const struct imports *im, uint32_t pid, uint64_t start, uint32_t gpu,
                          uint32_t client, uint32_t object)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < im->n_shares; i++) {
        const struct ipc_share *s = &im->shares[i];
        if (same_process(s, pid, start) && !s->departed && s->what.gpu == gpu &&
            !same_object(s, client, object))
            sum += s->what.bytes;
    }
    return sum;
}

/* Whether m's bytes fit, with who's other shares on that GPU, in what the ledger
 * charges who there: 0, or KAIROS_ERR_INVALID with why. */
static int beyond_charge(const struct imports *im, const struct ipc_sender *who, uint64_t start,
                         const struct kairos_shared *m, char *why, size_t why_len)
{
    if (!m->bytes)
        return 0; /* no device memory: such a share never keeps a charge */
    uint64_t others = shared_on(im, who->pid, start, m->gpu, m->h_client, m->h_object);
    uint64_t charged = m->gpu < KAIROS_MAX_GPUS ? who->charged[m->gpu] : 0;
    if (m->bytes <= charged && others <= charged - m->bytes)
        return 0;
    snprintf(why, why_len, "pid %u would share %llu bytes on GPU %u with object 0x%x of client "
             "0x%x, more than the %llu kairosd charges it there: kairosd follows shares of "
             "memory the process holds only", who->pid, (unsigned long long)(others + m->bytes),
             m->gpu, m->h_object, m->h_client, (unsigned long long)charged);
    return KAIROS_ERR_INVALID;
}

static struct ipc_share *live_share(struct imports *im, uint32_t pid, uint64_t start,
                                    uint32_t client, uint32_t object)
{
    for (size_t i = 0; i < im->n_shares; i++) {
        struct ipc_share *s = &im->shares[i];
        if (same_process(s, pid, start) && !s->departed && same_object(s, client, object))
            return s;
    }
    return NULL;
}

int imports_shared(struct imports *im, const struct ipc_sender *who,
                   const struct kairos_shared *m, char *why, size_t why_len)
{
    uint32_t ppid;
    uint64_t start;
    if (proc_stat_read(im->proc, who->pid, &ppid, &start) != 0) {
        snprintf(why, why_len, "pid %u is not in %s: kairosd cannot tell it from a later "
                 "process with its pid", who->pid, im->proc);
        return KAIROS_ERR_INVALID;
    }
    int code = beyond_charge(im, who, start, m, why, why_len);
    if (code)
        return code;
    struct ipc_share *s = live_share(im, who->pid, start, m->h_client, m->h_object);
    if (s) {
        s->what = *m; /* shared again: one entry, the newest scope and size */
        return 0;
    }
    if ((code = room(im, who, start, true, why, why_len)))
        return code;
    struct ipc_share *grown =
        grow_for_one(im->shares, &im->cap_shares, im->n_shares, sizeof *grown, 16);
    if (!grown) {
        snprintf(why, why_len, "kairosd is out of memory; try again");
        return KAIROS_ERR_INVALID;
    }
    im->shares = grown;
    im->shares[im->n_shares++] = (struct ipc_share){.pid = who->pid, .uid = who->uid,
                                                    .tenant = who->tenant, .start = start,
                                                    .seq = ++im->seq, .what = *m};
    return 0;
}

/* ---- imports ----------------------------------------------------------------------- */

static int refuse_begin(const struct kairos_imported *m, uint32_t pid, uint32_t uid, bool own,
                        bool shared, char *why, size_t why_len)
{
    snprintf(why, why_len,
             own ? "object 0x%x of client 0x%x is the sender's own: not an import"
             : shared ? "object 0x%x of client 0x%x is not shared with pid %u (uid %u): "
                        "the exporter must share it with this process"
                      : "no live member of a tenant reported object 0x%x of client 0x%x as "
                        "shared (pid %u)",
             m->h_object_src, m->h_client_src, pid, uid);
    return own ? KAIROS_ERR_INVALID : KAIROS_ERR_PERMISSION;
}

/* Whether an MPS server runs as uid or as root, from a scan of /proc at most
 * mps_rescan_ms old. */
static bool mps_serves(struct imports *im, uint32_t uid)
{
    uint64_t now = now_ms();
    if (!im->mps_scanned_ms || now - im->mps_scanned_ms >= im->mps_rescan_ms) {
        int rc = mps_server_scan(im->proc, im->mps_owner, &im->mps);
        if (rc)
            log_debug("cannot scan %s for MPS servers: %s", im->proc, strerror(-rc));
        else if (im->mps.cut)
            log_debug("MPS servers of more than %d uids run: some are not seen", MPS_SERVERS_MAX);
        im->mps_scanned_ms = now ? now : 1;
    }
    return mps_server_serves(&im->mps, uid);
}

/* pid's live import of m's object (any destination) begun after the share by (one
 * object: a new one under the same handle is shared anew), or not verified yet;
 * NULL when none. */
static struct ipc_import *same_import(struct imports *im, uint32_t pid, uint64_t start,
                                      const struct kairos_imported *m,
                                      const struct ipc_share *by)
{
    for (size_t i = 0; i < im->n; i++) {
        struct ipc_import *v = &im->v[i];
        if (v->pid == pid && v->start == start && !v->departed &&
            v->h_client_src == m->h_client_src && v->h_object_src == m->h_object_src &&
            (!v->verified || !by || v->seq > by->seq))
            return v;
    }
    return NULL;
}

/* A BEGIN of an object pid imports already: one entry, one more BEGIN to end. */
static void begin_again(struct ipc_import *v, const struct ipc_share *by, bool mps)
{
    v->begun += v->begun < UINT32_MAX;
    v->mps |= mps;
    if (!v->verified && by) {
        v->verified = true;
        v->exporter_pid = by->pid;
        v->exporter_start = by->start;
    }
}

static int begin(struct imports *im, const struct ipc_sender *who,
                 const struct kairos_imported *m, uint64_t provisional_ms, uint32_t *exporter,
                 char *why, size_t why_len)
{
    bool own, shared;
    const struct ipc_share *by = admitting_share(im, who->pid, who->uid, m->h_client_src,
                                                 m->h_object_src, m->h_client, &shared, &own);
    /* no member shared it: maybe an MPS client's dup of its server's object */
    bool mps = !by && !shared && mps_serves(im, who->uid);
    if (!by && !mps && (shared || !provisional_ms))
        return refuse_begin(m, who->pid, who->uid, own, shared, why, why_len);
    uint32_t ppid;
    uint64_t start;
    if (proc_stat_read(im->proc, who->pid, &ppid, &start) != 0) {
        snprintf(why, why_len, "pid %u is not in %s", who->pid, im->proc);
        return KAIROS_ERR_INVALID;
    }
    if (exporter)
        *exporter = by ? by->pid : mps ? IMPORTS_FROM_MPS : 0;
    struct ipc_import *v = same_import(im, who->pid, start, m, by);
    if (v) {
        begin_again(v, by, mps);
        return 0;
    }
    int code = room(im, who, start, false, why, why_len);
    struct ipc_import *grown =
        code ? NULL : grow_for_one(im->v, &im->cap, im->n, sizeof *grown, 16);
    if (!code && !grown)
        snprintf(why, why_len, "kairosd is out of memory; try again");
    if (!grown)
        return KAIROS_ERR_INVALID;
    im->v = grown;
    im->v[im->n++] = (struct ipc_import){.pid = who->pid, .uid = who->uid,
                                         .tenant = who->tenant, .start = start, .begun = 1,
                                         .exporter_pid = by ? by->pid : 0,
                                         .exporter_start = by ? by->start : 0,
                                         .seq = ++im->seq,
                                         .verified = by != NULL, .mps = mps,
                                         .provisional_until_ms = now_ms() + provisional_ms,
                                         .h_client_src = m->h_client_src,
                                         .h_object_src = m->h_object_src,
                                         .h_client = m->h_client, .h_object = m->h_object};
    return 0;
}

/* pid's live import of m's object: the one begun into m's destination if any
 * (BEGINs into others may be counted in it), else -1. */
static ptrdiff_t ended_import(const struct imports *im, uint32_t pid,
                              const struct kairos_imported *m)
{
    ptrdiff_t any = -1;
    for (size_t i = 0; i < im->n; i++) {
        const struct ipc_import *v = &im->v[i];
        if (v->pid != pid || v->departed || v->h_client_src != m->h_client_src ||
            v->h_object_src != m->h_object_src)
            continue;
        if (v->h_client == m->h_client && (v->h_object == m->h_object || !v->h_object))
            return (ptrdiff_t)i;
        any = (ptrdiff_t)i;
    }
    return any;
}

/* An END ends one BEGIN of that object by pid (the BEGINs of one object are one
 * entry, whatever their destination); the last one ends the import. */
static int end(struct imports *im, uint32_t pid, const struct kairos_imported *m,
               uint32_t *exporter, char *why, size_t why_len)
{
    ptrdiff_t i = ended_import(im, pid, m);
    if (i < 0) {
        snprintf(why, why_len, "pid %u has no import of object 0x%x of client 0x%x into client "
                 "0x%x", pid, m->h_object_src, m->h_client_src, m->h_client);
        return KAIROS_ERR_INVALID;
    }
    if (exporter)
        *exporter = im->v[i].mps && !im->v[i].verified ? IMPORTS_FROM_MPS
                                                       : im->v[i].exporter_pid;
    if (--im->v[i].begun)
        return 0;
    im->v[i] = im->v[--im->n];
    prune_kept(im); /* maybe the last import of an object its exporter freed */
    return 0;
}

int imports_imported(struct imports *im, const struct ipc_sender *who,
                     const struct kairos_imported *m, uint64_t provisional_ms,
                     uint32_t *exporter, char *why, size_t why_len)
{
    if (m->flags == KAIROS_IMPORT_BEGIN)
        return begin(im, who, m, provisional_ms, exporter, why, why_len);
    return end(im, who->pid, m, exporter, why, why_len);
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

/* ---- the exporter's free ----------------------------------------------------------- */

/* Forgets pid's live share of (client, object), copied to *out; false when it has
 * none (then nothing of it can be kept). */
static bool forget_share(struct imports *im, uint32_t pid, uint64_t start, uint32_t client,
                         uint32_t object, struct ipc_share *out)
{
    struct ipc_share *s = live_share(im, pid, start, client, object);
    if (!s)
        return false;
    *out = *s;
    *s = im->shares[--im->n_shares];
    return true;
}

/* The record kept for pid's (client, object) shared with that scope: one per
 * object and scope, however often told. */
static struct ipc_kept *kept_slot(struct imports *im, const struct ipc_kept *probe, bool *fresh)
{
    *fresh = false;
    for (size_t i = 0; i < im->n_kept; i++) {
        struct ipc_kept *k = &im->kept[i];
        if (k->pid == probe->pid && k->start == probe->start &&
            k->h_client == probe->h_client && k->h_object == probe->h_object &&
            k->scope.share_type == probe->scope.share_type &&
            k->scope.share_arg == probe->scope.share_arg)
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

/* What a FREED may add to t's kept charges on gpu: no more than its share named,
 * and never past t's quota there with what is kept already. */
static uint64_t kept_add(const struct imports *im, const struct ledger_tenant *t, unsigned gpu,
                         uint64_t told, uint64_t shared)
{
    uint64_t add = told < shared ? told : shared;
    uint64_t kept = imports_kept(im, t, gpu);
    uint64_t left = t->quota[gpu] > kept ? t->quota[gpu] - kept : 0;
    return add < left ? add : left;
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
    struct ipc_share s;
    if (!forget_share(im, pid, start, m->h_client, m->h_object, &s) || s.what.gpu != m->gpu ||
        !s.what.bytes)
        return false; /* not its share, not that GPU, or of no device memory: nothing */
    struct ipc_kept probe = {.pid = pid, .uid = s.uid, .start = start, .scope = s.what,
                             .h_client = m->h_client, .h_object = m->h_object,
                             .since = s.seq, .seq = ++im->seq};
    if (!im->ledger || !t || m->gpu >= KAIROS_MAX_GPUS || !kept_in_use(im, &probe))
        return false; /* no verified import holds it: released with the sender's report */
    bool fresh;
    struct ipc_kept *k = kept_slot(im, &probe, &fresh);
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
    uint64_t add = kept_add(im, t, k->gpu, m->bytes, s.what.bytes);
    k->bytes += add;
    k->since = k->since < probe.since ? k->since : probe.since;
    k->seq = probe.seq;
    t->draining[k->gpu] += add;
    return true;
}

bool imports_hold(struct imports *im, uint32_t pid)
{
    prune(im);
    for (size_t i = 0; i < im->n_shares; i++) {
        const struct ipc_share *s = &im->shares[i];
        if (s->pid == pid && s->what.bytes && share_in_use(im, s))
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
