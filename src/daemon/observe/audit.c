/* audit.c - compares what the GPUs hold with the ledger (see audit.h): the backend's
 * process lists summed per tenant, the openers of the device nodes from /proc, and the
 * GPU's memory.used reconciled with both; what each finding leads to (a report, a kill
 * by policy with exemptions) is audit_action.c's. */
#include "daemon/observe/audit.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/grow.h"
#include "daemon/memory/heirs.h"
#include "daemon/memory/linger.h"
#include "daemon/base/log.h"
#include "daemon/base/mps_server.h"
#include "daemon/base/procscan.h"
#include "daemon/observe/audit_action.h"
#include "daemon/observe/audit_findings.h"
#include "daemon/space/client_end.h"
#include "daemon/space/mps_domains.h"

#define AUDIT_SCAN_BUDGET (4u << 20) /* descriptors read per /proc scan */
#define AUDIT_NO_GPU 0xffu           /* a finding about no GPU in particular */
#define AUDIT_SCAN_EVERY 10u         /* intervals between /proc scans (sooner when needed) */

/* A process the ledger knows: a member now (left_ms 0), or one that left within the
 * grace period (the driver may still hold its memory for a few hundred ms). */
struct audit_known {
    uint32_t pid;
    uint64_t left_ms;
    char tenant[KAIROS_NAME_MAX];
    struct ledger_tenant *member_of; /* a member now: its tenant (valid for this pass) */
    uint64_t since_ms;               /* a member since (as the audit saw it) */
};

/* One tenant's processes on the GPU being audited. */
struct audit_sum {
    struct ledger_tenant *tenant;
    uint64_t used;
    size_t first, n; /* its processes: a->mine[first .. first + n) */
};

struct audit {
    struct loop *loop;
    struct gpu_backend *gpu; /* NULL: the /proc scan only */
    struct tenants *ts;
    const struct linger_set *linger; /* departed members whose charge lingers */
    struct heirs *heirs;             /* who holds members' files, or NULL */
    const struct mps_domains *mps;   /* space mode's MPS daemons, or NULL */
    struct client_ends *mps_kills; /* kills waiting for an MPS client's end */
    const struct config *cfg;
    struct loop_watch *w; /* the audit_interval_ms timer */
    const char *proc; /* "/proc" (tests: another root) */
    uint32_t mps_owner; /* who owns the MPS server's binary: root (tests: their uid) */
    uint64_t (*clock)(void *ctx); /* CLOCK_MONOTONIC ms (monotonic_ms), or the tests' */
    void *clock_ctx;
    uint64_t now_ms;
    struct audit_findings findings;
    struct audit_known *known;
    size_t n_known, cap_known;
    struct gpu_proc *procs; /* the backend's list for one GPU, grown to what it reports */
    size_t cap_procs;
    uint32_t *listed;       /* its pids, sorted */
    uint32_t *gpu_listed[KAIROS_MAX_GPUS]; /* the same per GPU, kept for the /proc scan */
    size_t n_gpu_listed[KAIROS_MAX_GPUS];
    bool gpu_listed_ok[KAIROS_MAX_GPUS];
    uint64_t gpu_used[KAIROS_MAX_GPUS], gpu_known[KAIROS_MAX_GPUS]; /* memory.used, explained */
    unsigned ticks_since_scan;
    const struct gpu_proc **mine; /* members' processes, grouped by tenant */
    struct audit_sum *sums;
    size_t cap_sums;
    struct procscan_nodes nodes;
    struct procscan scan;
    uint32_t *listed_on;    /* per opener of a->scan: bit g when the backend lists it on g */
    bool scan_ok;
};

/* A kill that waited for its victim's MPS client (client_end.h): whether the client
 * was ended first, then the kill's line. */
static void killed_after_client_end(void *ctx, const struct client_end_outcome *o)
{
    (void)ctx;
    uint32_t pid = o->victim->pid;
    if (o->ended)
        audit_warn(o->tenant, pid, o->gpu, "audit: pid %u of tenant %s: its MPS client was "
                   "ended first (terminate_client), so that the kill spares fault domain %s",
                   pid, o->tenant, o->domain);
    else
        audit_warn(o->tenant, pid, o->gpu, "audit: pid %u of tenant %s: its MPS client could "
                   "not be ended first (terminate_client to the control daemon of fault "
                   "domain %s: %s); the kill may end the work of fault domain %s", pid,
                   o->tenant, o->domain, o->failure, o->domain);
    audit_killed(o->victim, o->tenant, o->gpu, o->what, o->signal_err);
}

/* What the finding what about p (a member of t, NULL: none) leads to (audit_act). A
 * member of a fault domain that is to be killed has its MPS client ended first
 * (terminate_client), so that the kill cannot fault the domain's other clients (a
 * signal to a client with work in flight may: docs/space.md); the kill follows
 * without holding up the loop (space/client_end.h), once per process. */
static void act(struct audit *a, const struct procscan_proc *p, const struct ledger_tenant *t,
                int gpu, const char *what, bool killable)
{
    const char *name = t ? t->name : NULL;
    const char *domain = t ? tenants_settings_of(a->ts, t)->fault_domain : "";
    if (!a->mps || !t || !domain[0] || !audit_would_kill(a->cfg, p, killable)) {
        audit_act(a->cfg, p, name, gpu, what, killable);
        return;
    }
    if (client_ends_pending(a->mps_kills, p->pid))
        return; /* on its way */
    char why[256];
    struct client_end_order o = {.victim = *p, .tenant = t->name, .domain = domain,
                                 .gpu = gpu, .what = what, .signal = SIGKILL,
                                 .done = killed_after_client_end};
    if (!client_ends_start(a->mps_kills, a->mps, a->proc, &o, why, sizeof why)) {
        audit_warn(t->name, p->pid, gpu, "audit: pid %u (%s) %s; to be killed once its MPS "
                   "client is ended (terminate_client to fault domain %s's control daemon), "
                   "within %d ms", p->pid, p->comm, what, domain,
                   CLIENT_END_WAIT_MS);
        return;
    }
    audit_warn(t->name, p->pid, gpu, "audit: pid %u of tenant %s: its MPS client could not be "
               "ended first (%s); the kill may end the work of fault domain %s", p->pid, t->name,
               why, domain);
    audit_act(a->cfg, p, name, gpu, what, killable);
}

static uint64_t monotonic_ms(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* --- findings (audit_findings.h), at this pass's time --- */

static struct audit_seen *finding(struct audit *a, uint32_t who, unsigned gpu,
                                  enum audit_kind kind)
{
    return audit_findings_get(&a->findings, who, gpu, kind, a->now_ms);
}

static bool due(struct audit *a, uint32_t who, unsigned gpu, enum audit_kind kind,
                uint64_t delay_ms)
{
    return audit_findings_due(&a->findings, who, gpu, kind, a->now_ms, delay_ms);
}

/* --- who the ledger knows --- */

static int by_pid(const void *x, const void *y)
{
    uint32_t p = ((const struct audit_known *)x)->pid, q = ((const struct audit_known *)y)->pid;
    return (p > q) - (p < q);
}

static int add_known(struct audit *a, uint32_t pid, uint64_t left_ms, const char *tenant,
                     struct ledger_tenant *member_of)
{
    struct audit_known *v = grow_for_one(a->known, &a->cap_known, a->n_known, sizeof *v, 64);
    if (!v)
        return -ENOMEM;
    a->known = v;
    struct audit_known *k = &a->known[a->n_known++];
    k->pid = pid;
    k->left_ms = left_ms;
    k->member_of = member_of;
    k->since_ms = 0;
    snprintf(k->tenant, sizeof k->tenant, "%s", tenant);
    return 0;
}

static const struct audit_known *find_known(const struct audit *a, uint32_t pid)
{
    struct audit_known key = {.pid = pid};
    return a->n_known ? bsearch(&key, a->known, a->n_known, sizeof key, by_pid) : NULL;
}

/* The tenant pid is a member of now, or NULL. */
static struct ledger_tenant *member_tenant(const struct audit *a, uint32_t pid)
{
    const struct audit_known *k = find_known(a, pid);
    return k ? k->member_of : NULL;
}

/* The members now, and those that left within the grace period: from the previous
 * pass's list, or, for a member that joined and left between two passes (a fork
 * reported without waiting lets a parent exit at once), from when the lingering
 * member departed. A process that keeps running after it left is a finding once the
 * grace period is over either way. */
static void update_known(struct audit *a)
{
    struct audit_known *old = a->known;
    size_t n_old = a->n_known;
    a->known = NULL;
    a->n_known = a->cap_known = 0;
    for (struct ledger_member *m = a->ts->ledger.members; m; m = m->next)
        if (!linger_has(a->linger, m) && add_known(a, m->pid, 0, m->tenant->name, m->tenant))
            break;
    if (a->n_known)
        qsort(a->known, a->n_known, sizeof *a->known, by_pid);
    size_t members = a->n_known;
    for (size_t i = 0; i < members; i++) {
        struct audit_known *was = n_old ? bsearch(&a->known[i], old, n_old, sizeof *old, by_pid)
                                        : NULL;
        a->known[i].since_ms = was && !was->left_ms ? was->since_ms : a->now_ms;
    }
    for (size_t i = 0; i < n_old; i++) {
        struct audit_known key = {.pid = old[i].pid};
        if (members && bsearch(&key, a->known, members, sizeof key, by_pid))
            continue;
        uint64_t left = old[i].left_ms ? old[i].left_ms : a->now_ms;
        if (a->now_ms - left < a->cfg->audit_leave_grace_ms)
            add_known(a, old[i].pid, left, old[i].tenant, NULL);
    }
    for (struct ledger_member *m = a->ts->ledger.members; m; m = m->next) {
        struct audit_known key = {.pid = m->pid};
        uint64_t left = linger_departed_ms(a->linger, m);
        if (left && a->now_ms - left < a->cfg->audit_leave_grace_ms &&
            !(n_old && bsearch(&key, old, n_old, sizeof *old, by_pid)) &&
            add_known(a, m->pid, left, m->tenant->name, NULL))
            break;
    }
    free(old);
    if (a->n_known)
        qsort(a->known, a->n_known, sizeof *a->known, by_pid);
}

/* True when pid is not an intruder to report now: it is exiting (its descriptors
 * being closed), or left its tenant within the grace period. */
static bool leaving(struct audit *a, const struct procscan_proc *p, unsigned gpu)
{
    const struct audit_known *k = find_known(a, p->pid);
    if (k && k->left_ms) {
        log_debug("audit: pid %u left tenant %s %llu ms ago and still holds GPU %u: not an "
                  "intruder within audit leave_grace_ms", p->pid, k->tenant,
                  (unsigned long long)(a->now_ms - k->left_ms), gpu);
        return true;
    }
    if (p->exists && p->exiting) {
        log_debug("audit: pid %u is exiting; the driver frees what it held", p->pid);
        return true;
    }
    return false;
}

/* --- the backend's process lists --- */

/* The backend's processes on gpu into a->procs, however many there are (mine and
 * listed grown with it). */
static int list_processes(struct audit *a, unsigned gpu, size_t *n)
{
    size_t had = a->cap_procs;
    int rc = gpu_processes_all(a->gpu, gpu, &a->procs, &a->cap_procs, n);
    if (a->cap_procs == had)
        return rc;
    const struct gpu_proc **m = realloc(a->mine, a->cap_procs * sizeof *m);
    if (m)
        a->mine = m;
    uint32_t *l = realloc(a->listed, a->cap_procs * sizeof *l);
    if (l)
        a->listed = l;
    if (!m || !l) {
        a->cap_procs = had; /* procs may be larger than needed: harmless */
        return -ENOMEM;
    }
    return rc;
}

static int u32_cmp(const void *x, const void *y)
{
    uint32_t p = *(const uint32_t *)x, q = *(const uint32_t *)y;
    return (p > q) - (p < q);
}

static bool is_listed(const struct audit *a, size_t n, uint32_t pid)
{
    return n && bsearch(&pid, a->listed, n, sizeof pid, u32_cmp);
}

/* The slot of tenant t among the first *n sums (added when absent). */
static struct audit_sum *sum_of(struct audit *a, size_t *n, struct ledger_tenant *t)
{
    for (size_t i = 0; i < *n; i++)
        if (a->sums[i].tenant == t)
            return &a->sums[i];
    struct audit_sum *v = grow_for_one(a->sums, &a->cap_sums, *n, sizeof *v, 16);
    if (!v)
        return NULL;
    a->sums = v;
    a->sums[*n] = (struct audit_sum){.tenant = t};
    return &a->sums[(*n)++];
}

static int by_used_desc(const void *x, const void *y)
{
    const struct gpu_proc *p = *(const struct gpu_proc *const *)x;
    const struct gpu_proc *q = *(const struct gpu_proc *const *)y;
    return (p->used < q->used) - (p->used > q->used);
}

static void describe(struct audit *a, uint32_t pid, struct procscan_proc *out)
{
    procscan_describe(a->proc, pid, out);
}

/* A tenant whose processes together use more than its quota on gpu: reported once
 * with its processes; the largest named (killed by policy) until the rest fit. */
static void check_tenant_sum(struct audit *a, unsigned gpu, struct audit_sum *s)
{
    struct ledger_tenant *t = s->tenant;
    uint64_t quota = t->quota[gpu];
    /* what the driver takes for each context beyond what the shim can charge */
    uint64_t slack = a->cfg->audit_process_overhead * s->n;
    if (s->used <= quota || s->used - quota <= slack ||
        !due(a, t->id, gpu, AUDIT_TENANT_OVER, 0))
        return;
    const struct gpu_proc **mine = a->mine + s->first;
    qsort(mine, s->n, sizeof *mine, by_used_desc);
    char list[512], x[32], y[32];
    size_t len = 0;
    for (size_t i = 0; i < s->n && len < sizeof list; i++) {
        int k = snprintf(list + len, sizeof list - len, "%s%u %s", i ? ", " : "", mine[i]->pid,
                         tenants_size(mine[i]->used, x, sizeof x));
        len += k > 0 ? (size_t)k : 0;
    }
    audit_warn(t->name, 0, (int)gpu, "audit: tenant %s: its %zu process(es) together use %s "
               "on GPU %u, above the tenant's quota of %s (memory the shim did not see): pids "
               "%s", t->name, s->n, tenants_size(s->used, x, sizeof x), gpu,
               tenants_size(quota, y, sizeof y), list);
    uint64_t left = s->used;
    for (size_t i = 0; i < s->n && left > quota + a->cfg->audit_process_overhead * (s->n - i);
         i++) {
        char what[256];
        struct procscan_proc p;
        describe(a, mine[i]->pid, &p);
        snprintf(what, sizeof what, "of tenant %s uses %s on GPU %u, where the tenant is above "
                 "its quota of %s", t->name, tenants_size(mine[i]->used, x, sizeof x), gpu,
                 tenants_size(quota, y, sizeof y));
        act(a, &p, t, (int)gpu, what, p.exists); /* gone: its pid may be reused */
        left -= mine[i]->used;
    }
}

/* Whether pid is an MPS server (mps_server.h): its clients are members charged for
 * what they allocate, it is not an intruder. */
static bool mps_server(const struct audit *a, const struct procscan_proc *p)
{
    return p->exists && mps_server_is(a->proc, p->pid, a->mps_owner, NULL);
}

/* An MPS server the backend lists on g: noted once (while it stays); its own memory
 * is reported when above audit mps_server_max, since it is outside every quota, but
 * the server is never killed: its clients' work would end with it. */
static void check_mps_server(struct audit *a, unsigned g, const struct gpu_proc *gp,
                             const struct procscan_proc *p)
{
    char x[32], y[32];
    const char *used = gp->used_valid ? tenants_size(gp->used, x, sizeof x) : "unknown";
    if (due(a, p->pid, g, AUDIT_MPS_SERVER, 0))
        log_info("audit: pid %u (uid %u) is an MPS server (%s, root's binary) on GPU %u: its "
                 "own memory %s is charged to no tenant; its clients' allocations are charged "
                 "to their tenants", p->pid, p->uid, MPS_SERVER_EXE, g, used);
    if (!gp->used_valid || gp->used <= a->cfg->audit_mps_server_max ||
        !due(a, p->pid, g, AUDIT_MPS_OVER, 0))
        return;
    audit_warn(NULL, p->pid, (int)g, "audit: pid %u (%s) uid %u, an MPS server, uses %s on GPU "
               "%u, above audit mps_server_max (%s): memory outside every tenant's quota; not "
               "killed (its clients' work would end with it)", p->pid, p->comm, p->uid, used, g,
               tenants_size(a->cfg->audit_mps_server_max, y, sizeof y));
}

/* A process the backend lists that is no member. */
static void check_unregistered(struct audit *a, unsigned g, const struct gpu_proc *gp)
{
    struct procscan_proc p;
    describe(a, gp->pid, &p);
    if (leaving(a, &p, g))
        return;
    const struct ledger_member *gone = p.exists ? NULL : linger_member_of(a->linger, gp->pid);
    if (gone) { /* it exited; a process holding its files keeps its memory, charged */
        log_debug("audit: pid %u left tenant %s and exited; GPU %u still lists it because "
                  "another process holds its files; its memory stays charged to %s", gp->pid,
                  gone->tenant->name, g, gone->tenant->name);
        return;
    }
    if (mps_server(a, &p)) {
        check_mps_server(a, g, gp, &p);
        return;
    }
    /* not in /proc: exited while the driver frees, or of another pid namespace: only
     * a finding when it lasts */
    if (!due(a, gp->pid, g, AUDIT_UNREGISTERED, p.exists ? 0 : a->cfg->audit_leave_grace_ms))
        return;
    char what[256], x[32];
    snprintf(what, sizeof what, "uses GPU %u (%s) without being a registered tenant "
             "(started without kairos run or the shim?)%s", g,
             gp->used_valid ? tenants_size(gp->used, x, sizeof x) : "memory unknown",
             p.exists ? "" : "; not in /proc (another pid namespace?)");
    audit_act(a->cfg, &p, NULL, (int)g, what, p.exists);
}

/* Returns how many processes the backend listed on g (their pids in a->listed), or
 * -errno when it cannot tell. */
static long audit_gpu_processes(struct audit *a, unsigned g)
{
    size_t n = 0;
    int rc = list_processes(a, g, &n);
    if (rc) {
        log_debug("audit: GPU %u: cannot list processes: %s", g, strerror(-rc));
        return rc;
    }
    uint32_t self = (uint32_t)getpid();
    size_t n_sums = 0, n_mine = 0;
    for (size_t i = 0; i < n; i++) {
        const struct gpu_proc *p = &a->procs[i];
        a->listed[i] = p->pid;
        if (p->pid == self)
            continue;
        struct ledger_tenant *t = member_tenant(a, p->pid);
        if (!t) {
            check_unregistered(a, g, p);
            continue;
        }
        struct audit_sum *s = sum_of(a, &n_sums, t);
        if (!s)
            return -ENOMEM;
        s->used += p->used_valid ? p->used : 0;
        s->n++;
    }
    if (n)
        qsort(a->listed, n, sizeof *a->listed, u32_cmp);
    uint32_t *keep = realloc(a->gpu_listed[g], (n ? n : 1) * sizeof *keep);
    if (keep) {
        if (n)
            memcpy(keep, a->listed, n * sizeof *keep);
        a->gpu_listed[g] = keep;
        a->n_gpu_listed[g] = n;
    }
    a->gpu_listed_ok[g] = keep != NULL;
    for (size_t k = 0; k < n_sums; k++) {
        a->sums[k].first = n_mine;
        n_mine += a->sums[k].n;
        a->sums[k].n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        const struct gpu_proc *p = &a->procs[i];
        struct ledger_tenant *t = p->pid == self ? NULL : member_tenant(a, p->pid);
        if (!t)
            continue;
        struct audit_sum *s = sum_of(a, &n_sums, t);
        a->mine[s->first + s->n++] = p;
    }
    for (size_t k = 0; k < n_sums; k++)
        check_tenant_sum(a, g, &a->sums[k]);
    return (long)n;
}

/* --- openers and memory.used --- */

/* Whether pid holds the files of a member (live, or lingering: its charge stays
 * for them), by a hand-over kairosd verified (a fork, a receipt: heirs.h). */
static bool holds_for_member(struct audit *a, uint32_t pid)
{
    uint32_t from[8];
    size_t n = a->heirs ? heirs_sources_of(a->heirs, pid, from, 8) : 0;
    for (size_t i = 0; i < n; i++)
        if (ledger_find_pid(&a->ts->ledger, from[i]))
            return true;
    return false;
}

/* How long an opener is given before it is reported: a child of a member (or of
 * one that just left) inherits its parent's NVIDIA files at fork(), and the shim's
 * FORKED report of it reaches kairosd a little later; within leave_grace_ms it may
 * still arrive. Anyone else is reported at first sight. */
static uint64_t child_of_member_delay(struct audit *a, const struct procscan_proc *p)
{
    return p->ppid && find_known(a, p->ppid) ? a->cfg->audit_leave_grace_ms : 0;
}

/* An opener of a node of the driver that is neither a member, nor listed by the
 * backend, nor leaving, nor holding a member's files: reported, a member's child
 * after leave_grace_ms (its GPU memory, if any, is only seen through memory.used). */
static void check_openers(struct audit *a)
{
    uint32_t self = (uint32_t)getpid();
    for (size_t i = 0; i < a->scan.n; i++) {
        const struct procscan_opener *o = &a->scan.v[i];
        const struct audit_known *k = find_known(a, o->proc.pid);
        /* members are checked by their sums; listed processes by check_unregistered */
        if (o->proc.pid == self || (k && !k->left_ms) || a->listed_on[i] ||
            holds_for_member(a, o->proc.pid))
            continue;
        unsigned g = 0;
        while (g < a->nodes.n && !(o->gpus & (1u << g)))
            g++;
        if (g == a->nodes.n)
            g = AUDIT_NO_GPU;
        if (mps_server(a, &o->proc)) {
            if (due(a, o->proc.pid, g, AUDIT_MPS_OPENER, 0))
                log_info("audit: pid %u (uid %u) is an MPS server (%s, root's binary) with the "
                         "driver's nodes open; the GPU backend does not list it", o->proc.pid,
                         o->proc.uid, MPS_SERVER_EXE);
            continue;
        }
        if (leaving(a, &o->proc, g) ||
            !due(a, o->proc.pid, g, AUDIT_OPENER, child_of_member_delay(a, &o->proc)))
            continue;
        char what[256];
        if (g == AUDIT_NO_GPU)
            snprintf(what, sizeof what, "has the driver's %s* nodes open without being a "
                     "registered tenant (no GPU's node)", a->nodes.prefix);
        else
            snprintf(what, sizeof what, "has %s open without being a registered tenant; %s",
                     a->nodes.node[g], a->gpu ? "the GPU backend does not list it (memory "
                     "without a CUDA context?)" : "no GPU backend to say what it holds");
        audit_act(a->cfg, &o->proc, NULL, g == AUDIT_NO_GPU ? -1 : (int)g, what, false);
    }
}

/* Opener i may hold GPU g's unexplained memory: it has g's node or nvidiactl open (an
 * RM client lives on its nvidiactl descriptor, which can reach every GPU), the
 * backend does not list it there (no context: a member with a context is listed),
 * and it is not leaving, not exiting, not kairosd. A member can be one, once it has
 * been one for leave_grace_ms: memory taken past the shim (raw system calls, a static
 * binary) is charged to no one. */
static bool holds_unexplained(struct audit *a, size_t i, unsigned g)
{
    const struct procscan_opener *o = &a->scan.v[i];
    const struct audit_known *k = find_known(a, o->proc.pid);
    /* a member that just joined may still be creating its context */
    bool settled = !k || (!k->left_ms && a->now_ms - k->since_ms >= a->cfg->audit_leave_grace_ms);
    return ((o->gpus & (1u << g)) || o->driver) && !(a->listed_on[i] & (1u << g)) && settled &&
           !o->proc.exiting && o->proc.pid != (uint32_t)getpid();
}

/* " (member of tenant T)" for a member, else "". */
static const char *member_note(const struct audit *a, uint32_t pid, char *buf, size_t cap)
{
    const struct ledger_tenant *t = member_tenant(a, pid);
    buf[0] = 0;
    if (t)
        snprintf(buf, cap, " (member of tenant %s)", t->name);
    return buf;
}

/* memory.used of GPU g against what is known: every process the backend lists, what
 * kairosd granted the members it does not list (held and credit: the ledger's grant,
 * which no report can raise above the quota, issue 25 item 5), what departed members'
 * tenants still drain (linger.h), and the driver's overhead. Returns
 * true when memory is unexplained and has been for leave_grace_ms (a transient while
 * the driver frees what a process held is no finding). */
static bool measure(struct audit *a, unsigned g, size_t n_listed)
{
    struct gpu_status st;
    if (!a->gpu->ops->status || a->gpu->ops->status(a->gpu, g, &st) || !st.memory_valid)
        return false;
    uint64_t used = st.memory_used;
    uint64_t known = a->cfg->audit_overhead;
    for (size_t i = 0; i < n_listed; i++)
        known += a->procs[i].used_valid ? a->procs[i].used : 0;
    for (struct ledger_member *m = a->ts->ledger.members; m; m = m->next)
        if (!is_listed(a, n_listed, m->pid))
            known += m->held[g] + m->credit[g];
    for (size_t i = 0; i < a->ts->ledger.n_tenants; i++)
        known += a->ts->ledger.tenants[i]->draining[g]; /* departed members' (linger.h) */
    a->gpu_used[g] = used;
    a->gpu_known[g] = known;
    if (used <= known)
        return false;
    return audit_findings_lasted(finding(a, 0, g, AUDIT_UNEXPLAINED), a->now_ms,
                                 a->cfg->audit_leave_grace_ms);
}

/* GPU g's unexplained memory (measure() said so), after a fresh /proc scan: reported
 * once with the processes that may hold it, each of them acted on once (also one
 * that comes while the memory stays unexplained). */
static void name_holders(struct audit *a, unsigned g)
{
    uint64_t used = a->gpu_used[g], known = a->gpu_known[g];
    struct audit_seen *f = finding(a, 0, g, AUDIT_UNEXPLAINED);
    char x[32], y[32], z[32], holders[512] = "";
    size_t len = 0, n_holders = 0;
    for (size_t i = 0; a->scan_ok && i < a->scan.n; i++) {
        if (!holds_unexplained(a, i, g))
            continue;
        const struct procscan_proc *p = &a->scan.v[i].proc;
        n_holders++;
        if (len < sizeof holders) {
            char note[KAIROS_NAME_MAX + 32];
            int w = snprintf(holders + len, sizeof holders - len, "%spid %u (%s) uid %u%s",
                             len ? ", " : "", p->pid, p->comm, p->uid,
                             member_note(a, p->pid, note, sizeof note));
            len += w > 0 ? (size_t)w : 0;
        }
    }
    tenants_size(used - known, x, sizeof x);
    if (f && !f->reported) {
        f->reported = true;
        audit_warn(NULL, 0, (int)g, "audit: GPU %u: %s of memory.used unexplained (memory.used "
                   "%s; processes listed, members' holdings and the overhead allowance %s): "
                   "%s%s", g, x, tenants_size(used, y, sizeof y),
                   tenants_size(known, z, sizeof z), n_holders ? "held by " : "",
                   n_holders ? holders : "no holder found in /proc (another pid namespace, "
                                         "or kairosd not root?)");
    }
    for (size_t i = 0; a->scan_ok && i < a->scan.n; i++) {
        const struct procscan_proc *p = &a->scan.v[i].proc;
        if (!holds_unexplained(a, i, g) || !due(a, p->pid, g, AUDIT_HOLDER, 0))
            continue;
        char what[256], note[KAIROS_NAME_MAX + 32];
        const struct ledger_tenant *t = member_tenant(a, p->pid);
        bool mps = !t && mps_server(a, p);
        snprintf(what, sizeof what, "holds %s open while GPU %u has %s unexplained%s",
                 a->scan.v[i].gpus & (1u << g) ? a->nodes.node[g] : "the driver's nodes", g, x,
                 mps ? ", an MPS server" : member_note(a, p->pid, note, sizeof note));
        if (mps) /* reported, never killed: its clients' work would end with it */
            audit_warn(NULL, p->pid, (int)g, "audit: pid %u (%s) %s, uid %u; not killed (an "
                       "MPS server)", p->pid, p->comm, what, p->uid);
        else
            act(a, p, t, (int)g, what, true);
    }
}

/* The openers of the driver's nodes now, and on which GPUs the backend lists each. */
static void scan_proc(struct audit *a)
{
    int rc = procscan_run(&a->scan, a->proc, &a->nodes, AUDIT_SCAN_BUDGET);
    a->scan_ok = rc == 0;
    a->ticks_since_scan = 0;
    if (rc)
        log_debug("audit: cannot scan %s: %s", a->proc, strerror(-rc));
    else if (a->scan.cut && due(a, 0, AUDIT_NO_GPU, AUDIT_OPENER, 0))
        log_warn("audit: the /proc scan stopped after %zu descriptors of %zu processes; "
                 "processes after them are not seen", a->scan.descriptors, a->scan.processes);
    uint32_t *v = realloc(a->listed_on, (a->scan.n ? a->scan.n : 1) * sizeof *v);
    if (!v) {
        a->scan_ok = false;
        a->scan.n = 0;
        return;
    }
    a->listed_on = v;
    for (size_t i = 0; i < a->scan.n; i++) {
        uint32_t pid = a->scan.v[i].proc.pid;
        v[i] = 0;
        for (unsigned g = 0; g < a->nodes.n; g++)
            if (a->gpu_listed_ok[g] && a->n_gpu_listed[g] &&
                bsearch(&pid, a->gpu_listed[g], a->n_gpu_listed[g], sizeof pid, u32_cmp))
                v[i] |= 1u << g;
    }
}

/* One pass: the backend's lists and memory.used first (cheap), then /proc every
 * AUDIT_SCAN_EVERY intervals, or at once when memory is unexplained. */
void audit_tick(struct audit *a)
{
    a->now_ms = a->clock(a->clock_ctx);
    audit_findings_begin(&a->findings);
    update_known(a);
    uint32_t unexplained = 0; /* bit g: GPU g's memory is unexplained */
    for (unsigned g = 0; a->gpu && g < a->ts->n_gpus; g++) {
        long n = audit_gpu_processes(a, g);
        if (n < 0)
            a->gpu_listed_ok[g] = false;
        else if (measure(a, g, (size_t)n))
            unexplained |= 1u << g;
    }
    bool due_now = false;
    for (unsigned g = 0; g < a->ts->n_gpus; g++) {
        const struct audit_seen *f = (unexplained & (1u << g)) ? finding(a, 0, g, AUDIT_UNEXPLAINED)
                                                              : NULL;
        due_now |= f && !f->reported;
    }
    bool scanned = due_now || ++a->ticks_since_scan >= AUDIT_SCAN_EVERY;
    if (scanned) {
        scan_proc(a);
        check_openers(a);
        for (unsigned g = 0; g < a->ts->n_gpus; g++)
            if (unexplained & (1u << g))
                name_holders(a, g);
    }
    audit_findings_end(&a->findings, scanned); /* what went away is forgotten */
}

static void on_timer(void *ctx, int fd, uint32_t events)
{
    uint64_t expirations;
    (void)!read(fd, &expirations, sizeof expirations);
    audit_tick(ctx);
}

void audit_set_mps_owner(struct audit *a, uint32_t owner)
{
    a->mps_owner = owner;
}

void audit_set_clock(struct audit *a, uint64_t (*clock)(void *ctx), void *ctx)
{
    a->clock = clock ? clock : monotonic_ms;
    a->clock_ctx = ctx;
}

void audit_reconfigure(struct audit *a)
{
    loop_timer_set(a->w, (uint64_t)a->cfg->audit_interval_ms * 1000);
}

/* The device node of each GPU (the backend's, else /dev/nvidiaINDEX) and the prefix
 * all nodes of the driver share. */
static void find_nodes(struct audit *a)
{
    /* without a backend, tests name a directory of their own instead of /dev */
    const char *devdir = a->gpu ? NULL : getenv("KAIROS_AUDIT_DEVDIR");
    a->nodes.n = a->ts->n_gpus;
    for (unsigned g = 0; g < a->nodes.n; g++)
        if (!a->gpu || !a->gpu->ops->device_path ||
            a->gpu->ops->device_path(a->gpu, g, a->nodes.node[g], sizeof a->nodes.node[g]))
            snprintf(a->nodes.node[g], sizeof a->nodes.node[g], "%.40s/nvidia%u",
                     devdir && *devdir ? devdir : "/dev", g);
    const char *dir = a->nodes.n ? a->nodes.node[0] : "/dev/nvidia0";
    const char *slash = strrchr(dir, '/');
    int len = slash ? (int)(slash - dir) : 0;
    snprintf(a->nodes.prefix, sizeof a->nodes.prefix, "%.*s/nvidia", len, dir);
}

int audit_init(struct audit **out, const struct audit_deps *deps)
{
    struct audit *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    struct loop *loop = deps->loop;
    struct gpu_backend *gpu = deps->gpu;
    const struct config *cfg = deps->cfg;
    a->loop = loop;
    a->gpu = gpu && gpu->ops ? gpu : NULL;
    a->ts = deps->ts;
    a->cfg = cfg;
    a->proc = deps->proc_root ? deps->proc_root : "/proc";
    a->linger = deps->linger;
    a->heirs = deps->heirs;
    a->mps = deps->mps;
    a->mps_owner = MPS_SERVER_OWNER;
    a->clock = monotonic_ms;
    int rc = client_ends_init(&a->mps_kills, loop);
    if (rc || !(a->w = loop_add_timer(loop, 0, on_timer, a))) {
        rc = rc ? rc : -errno;
        client_ends_fini(a->mps_kills);
        free(a);
        return rc;
    }
    find_nodes(a);
    a->ticks_since_scan = AUDIT_SCAN_EVERY - 1; /* the first pass scans */
    audit_reconfigure(a);
    if (!cfg->audit_interval_ms)
        log_info("audit: off (audit: { interval_ms: 0 })");
    else if (a->gpu)
        log_info("audit: every %u ms with the %s backend and the /proc scan of %s* (GPU 0: "
                 "%s); what it finds is %s", cfg->audit_interval_ms, gpu->ops->name,
                 a->nodes.prefix, a->nodes.n ? a->nodes.node[0] : "none",
                 cfg->audit_kill ? "killed (action kill), but the exempt" : "reported");
    else
        log_warn("audit: every %u ms, without a GPU backend: only the /proc scan of %s* runs "
                 "(processes that open the GPUs without being registered); what each process, "
                 "each tenant and each GPU holds cannot be checked, and nothing is killed",
                 cfg->audit_interval_ms, a->nodes.prefix);
    *out = a;
    return 0;
}

void audit_fini(struct audit *a)
{
    if (!a)
        return;
    loop_del_close(a->loop, a->w);
    client_ends_fini(a->mps_kills);
    procscan_fini(&a->scan);
    audit_findings_free(&a->findings);
    free(a->known);
    free(a->procs);
    free(a->listed);
    free(a->mine);
    free(a->sums);
    free(a->listed_on);
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
        free(a->gpu_listed[g]);
    free(a);
}
