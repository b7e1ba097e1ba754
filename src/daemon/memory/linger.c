/* linger.c - departed processes whose memory the GPU still holds, and the memory
 * of released ones that its memory.used still shows (see linger.h). */
#include "daemon/memory/linger.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/grow.h"
#include "core/units.h"
#include "daemon/base/log.h"

/* One GPU's memory.used and what its process list attributes to processes, taken
 * together: their difference is the memory no listed process accounts for. */
struct sample {
    bool valid;
    uint64_t used, listed;
};

struct lingering {
    struct ledger_member *member;
    uint32_t pid;
    uint64_t departed_ms; /* when it began to linger (monotonic) */
    struct sample seen[KAIROS_MAX_GPUS]; /* the last check that found it on the GPU */
    /* what it had reported held when it departed: its charge never drops below it
     * by the GPU's word (see reconcile) */
    uint64_t reported[KAIROS_MAX_GPUS];
};

/* A released member's memory that one GPU's memory.used still shows. The tenant is
 * found again by name and id: it may be removed or replaced meanwhile. */
struct drain {
    char tenant[KAIROS_NAME_MAX];
    uint32_t tenant_id;
    uint32_t pid;
    unsigned gpu;
    uint64_t bytes;        /* at most this: what the member held there */
    uint64_t counted;      /* what the tenant's draining[gpu] holds for it now */
    struct sample seen;    /* while the member's memory was known to be held */
    uint64_t deadline_ms;
};

/* The last sample of a GPU (taken every LINGER_BASELINE_MS while there are
 * members) that listed pid with memory: what shows that a departing process's
 * memory was still held shortly before, when the GPU no longer lists it at its
 * departure. Kept LINGER_BASELINE_MAX_AGE_MS. */
struct listed {
    uint32_t pid;
    uint64_t at_ms;
    struct sample s;
};

struct baseline {
    uint64_t at_ms;        /* the last sample */
    struct listed *v;
    size_t n, cap;
};

struct linger_set {
    struct loop *loop;
    struct gpu_backend *gpu;
    struct ledger *ledger;
    unsigned n_gpus;
    bool (*after_leave)(void *ctx, struct ledger_tenant *t);
    void *after_leave_ctx;
    struct loop_watch *w; /* its check timer (loop_add_timer) */
    struct lingering *items;
    size_t n, cap;
    void (*removed)(void *ctx);
    void *removed_ctx;
    struct gpu_proc *procs; /* the backend's list, grown to what it reports */
    size_t cap_procs;
    struct drain *drains;
    size_t n_drains, cap_drains;
    struct baseline base[KAIROS_MAX_GPUS];
    bool (*holds)(void *ctx, uint32_t pid); /* another witness (heirs.h), or NULL */
    void *holds_ctx;
    void (*changed)(void *ctx); /* told when a charge starts or stops lingering */
    void *changed_ctx;
    uint64_t (*clock)(void *ctx); /* CLOCK_MONOTONIC ms (monotonic_ms), or the tests' */
    void *clock_ctx;
};

static uint64_t monotonic_ms(void *ctx)
{
    (void)ctx;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static uint64_t now_ms(const struct linger_set *lg)
{
    return lg->clock(lg->clock_ctx);
}

/* Invalid when the backend cannot tell memory.used or a listed process's memory.
 * Leaves the list in lg->procs, *listed (may be NULL) entries. */
static struct sample sample_gpu_list(struct linger_set *lg, unsigned g, size_t *listed)
{
    struct sample s = {0};
    struct gpu_status st;
    size_t n = 0;
    if (listed)
        *listed = 0;
    if (!lg->gpu->ops->status || lg->gpu->ops->status(lg->gpu, g, &st) || !st.memory_valid ||
        gpu_processes_all(lg->gpu, g, &lg->procs, &lg->cap_procs, &n))
        return s;
    for (size_t i = 0; i < n; i++) {
        if (!lg->procs[i].used_valid)
            return s;
        s.listed += lg->procs[i].used;
    }
    s.valid = true;
    s.used = st.memory_used;
    if (listed)
        *listed = n;
    return s;
}

static struct sample sample_gpu(struct linger_set *lg, unsigned g)
{
    return sample_gpu_list(lg, g, NULL);
}

/* How much of bytes the GPU's memory.used still shows of a process it no longer
 * lists, compared with `seen` (when the process was listed, its memory held): what
 * memory.used beyond the listed processes' has grown by since, within [0, bytes]. */
static uint64_t still_shown(const struct sample *seen, const struct sample *now, uint64_t bytes)
{
    long double grown = ((long double)now->used - (long double)now->listed) -
                        ((long double)seen->used - (long double)seen->listed);
    if (grown < (long double)LINGER_DRAIN_SLACK)
        return 0; /* a new context's few MiB in the kernel, not a departed process's */
    return grown >= (long double)bytes ? bytes : (uint64_t)grown;
}

static void tell_changed(struct linger_set *lg)
{
    if (lg->changed)
        lg->changed(lg->changed_ctx);
}

/* Whether some GPU lists pid (with memory in use, or memory unknown). */
static bool gpu_lists(struct linger_set *lg, uint32_t pid)
{
    for (unsigned g = 0; lg->gpu && g < lg->n_gpus; g++) {
        size_t n = 0;
        if (gpu_processes_all(lg->gpu, g, &lg->procs, &lg->cap_procs, &n))
            continue;
        for (size_t i = 0; i < n; i++)
            if (lg->procs[i].pid == pid && (!lg->procs[i].used_valid || lg->procs[i].used))
                return true;
    }
    return false;
}

/* Whether some GPU lists pid, or the holder check says its files live on in it or
 * in a process it handed them to. */
static bool gpu_holds(struct linger_set *lg, uint32_t pid)
{
    return (lg->holds && lg->holds(lg->holds_ctx, pid)) || gpu_lists(lg, pid);
}

/* Every LINGER_CHECK_MS while something lingers or drains; else every
 * LINGER_BASELINE_MS for the GPU samples, or off without a GPU backend. */
static void arm(struct linger_set *lg)
{
    bool busy = lg->n || lg->n_drains;
    uint64_t ms = busy ? LINGER_CHECK_MS : lg->gpu ? LINGER_BASELINE_MS : 0;
    loop_timer_set(lg->w, ms * 1000ull);
}

static struct listed *baseline_find(struct baseline *b, uint32_t pid)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i].pid == pid)
            return &b->v[i];
    return NULL;
}

/* Records the sample s (taken at now) for each pid of lg->procs[0, n) with memory,
 * and forgets the records older than LINGER_BASELINE_MAX_AGE_MS. */
static void baseline_record(struct baseline *b, const struct gpu_proc *procs, size_t n,
                            const struct sample *s, uint64_t now)
{
    for (size_t i = 0; i < n; i++) {
        if (!procs[i].used)
            continue;
        struct listed *r = baseline_find(b, procs[i].pid);
        if (!r) {
            struct listed *grown = grow_for_one(b->v, &b->cap, b->n, sizeof *grown, 16);
            if (!grown)
                continue; /* out of memory: no evidence for this one */
            b->v = grown;
            r = &b->v[b->n++];
        }
        *r = (struct listed){.pid = procs[i].pid, .at_ms = now, .s = *s};
    }
    for (size_t i = 0; i < b->n;)
        if (now - b->v[i].at_ms > LINGER_BASELINE_MAX_AGE_MS)
            b->v[i] = b->v[--b->n];
        else
            i++;
}

/* Samples every GPU with the pids it lists with memory, at most every
 * LINGER_BASELINE_MS and only while there are members. */
static void baseline_refresh(struct linger_set *lg)
{
    uint64_t now = now_ms(lg);
    if (!lg->ledger->members)
        return;
    for (unsigned g = 0; g < lg->n_gpus; g++) {
        struct baseline *b = &lg->base[g];
        if (b->at_ms && now - b->at_ms < LINGER_BASELINE_MS - LINGER_CHECK_MS / 2)
            continue;
        size_t n;
        struct sample s = sample_gpu_list(lg, g, &n);
        b->at_ms = now;
        if (s.valid)
            baseline_record(b, lg->procs, n, &s, now);
    }
}

/* t's memory on gpu that the GPU still shows after its member (pid) was released:
 * held back from t's room (draining) until it goes. */
static void drain_start(struct linger_set *lg, struct ledger_tenant *t, uint32_t pid,
                        unsigned g, uint64_t bytes, const struct sample *seen)
{
    struct sample now = sample_gpu(lg, g);
    uint64_t shown = now.valid ? still_shown(seen, &now, bytes) : 0;
    if (!shown)
        return;
    struct drain *grown = grow_for_one(lg->drains, &lg->cap_drains, lg->n_drains,
                                       sizeof *grown, 8);
    if (!grown)
        return; /* out of memory: returned now, as without a backend */
    lg->drains = grown;
    struct drain *d = &lg->drains[lg->n_drains++];
    *d = (struct drain){.tenant_id = t->id, .pid = pid, .gpu = g, .bytes = bytes,
                        .counted = shown, .seen = *seen,
                        .deadline_ms = now_ms(lg) + LINGER_DRAIN_MAX_MS};
    memcpy(d->tenant, t->name, sizeof d->tenant);
    t->draining[g] += shown;
    char a[32];
    log_info("tenant %s: GPU %u's memory.used still shows %s of departed pid %u; held back "
             "from the tenant's quota until it drops (at most %d ms)", t->name, g,
             units_format_size(shown, a, sizeof a), pid, LINGER_DRAIN_MAX_MS);
}

/* Ends drain i: its tenant's room comes back. */
static void drain_end(struct linger_set *lg, size_t i, struct ledger_tenant *t)
{
    struct drain *d = &lg->drains[i];
    if (t)
        t->draining[d->gpu] -= d->counted < t->draining[d->gpu] ? d->counted
                                                                : t->draining[d->gpu];
    lg->drains[i] = lg->drains[--lg->n_drains];
}

static void drains_check(struct linger_set *lg)
{
    uint64_t now = now_ms(lg);
    for (size_t i = 0; i < lg->n_drains;) {
        struct drain *d = &lg->drains[i];
        struct ledger_tenant *t = ledger_tenant_find(lg->ledger, d->tenant);
        if (!t || t->id != d->tenant_id) {
            drain_end(lg, i, NULL); /* the tenant went: nothing to hold back */
            continue;
        }
        struct sample s = sample_gpu(lg, d->gpu);
        uint64_t shown = s.valid ? still_shown(&d->seen, &s, d->bytes) : 0;
        char a[32];
        if (shown && now >= d->deadline_ms) {
            log_warn("tenant %s: GPU %u's memory.used still shows %s of departed pid %u after "
                     "%d ms; that memory is returned to the tenant's quota (the audit reports "
                     "what stays unexplained)", t->name, d->gpu,
                     units_format_size(shown, a, sizeof a), d->pid, LINGER_DRAIN_MAX_MS);
            shown = 0;
        } else if (!shown) {
            log_info("tenant %s: GPU %u freed the memory of departed pid %u", t->name, d->gpu,
                     d->pid);
        }
        if (!shown) {
            drain_end(lg, i, t);
            continue;
        }
        t->draining[d->gpu] = t->draining[d->gpu] - d->counted + shown;
        d->counted = shown;
        i++;
    }
}

static void release(struct linger_set *lg, size_t i)
{
    struct lingering it = lg->items[i];
    lg->items[i] = lg->items[--lg->n];
    uint64_t freed[KAIROS_MAX_GPUS];
    struct ledger_tenant *t = ledger_leave(lg->ledger, it.member, freed);
    uint64_t total = 0;
    for (unsigned g = 0; g < lg->n_gpus; g++)
        total += freed[g];
    char a[32];
    log_info("tenant %s: the GPU no longer lists departed pid %u; released %s", t->name, it.pid,
             units_format_size(total, a, sizeof a));
    tell_changed(lg);
    if (lg->after_leave && lg->after_leave(lg->after_leave_ctx, t)) {
        if (lg->removed)
            lg->removed(lg->removed_ctx);
        return; /* the tenant is gone: no room to hold back */
    }
    for (unsigned g = 0; g < lg->n_gpus; g++)
        if (freed[g] && it.seen[g].valid)
            drain_start(lg, t, it.pid, g, freed[g], &it.seen[g]);
}

/* Member m (process pid) departs and no GPU lists it: on each GPU where a sample at
 * most LINGER_BASELINE_MAX_AGE_MS old listed pid with memory (the last such one is
 * compared), what memory.used still shows of it drains (the caller releases m). */
static void drain_unlisted(struct linger_set *lg, struct ledger_member *m, uint32_t pid)
{
    uint64_t now = now_ms(lg);
    for (unsigned g = 0; g < lg->n_gpus; g++) {
        const struct listed *r = m->held[g] ? baseline_find(&lg->base[g], pid) : NULL;
        if (r && now - r->at_ms <= LINGER_BASELINE_MAX_AGE_MS)
            drain_start(lg, m->tenant, pid, g, m->held[g], &r->s);
    }
    arm(lg);
}

/* Samples the GPUs where it.member holds memory: its memory is known held now. */
static void seen_now(struct linger_set *lg, struct lingering *it)
{
    for (unsigned g = 0; !lg->gpu && g < lg->n_gpus; g++)
        it->seen[g] = (struct sample){0}; /* a holder alone keeps it: nothing to sample */
    if (!lg->gpu)
        return;
    for (unsigned g = 0; g < lg->n_gpus; g++)
        it->seen[g] = it->member->held[g] ? sample_gpu(lg, g) : (struct sample){0};
}

/* A departed member's unused credit is counted as held with it (it may have
 * allocated from it after its last report: an exec right after allocating). Where
 * the GPU lists the process with its memory, that figure says how much of the
 * credit was taken: the charge drops to it, never below what the process had
 * reported (so only the credit's uncertainty is settled by the GPU's word). */
static void reconcile(struct linger_set *lg, struct lingering *it)
{
    for (unsigned g = 0; lg->gpu && g < lg->n_gpus; g++) {
        struct ledger_member *m = it->member;
        size_t n = 0;
        if (m->held[g] <= it->reported[g] ||
            gpu_processes_all(lg->gpu, g, &lg->procs, &lg->cap_procs, &n))
            continue;
        for (size_t i = 0; i < n; i++) {
            const struct gpu_proc *p = &lg->procs[i];
            if (p->pid != it->pid || !p->used_valid || p->used >= m->held[g])
                continue;
            uint64_t keep = p->used > it->reported[g] ? p->used : it->reported[g], released;
            ledger_release(lg->ledger, m, g, m->held[g] - keep, &released);
            char a[32];
            log_info("tenant %s: departed pid %u's charge on GPU %u settled to %s, what the GPU "
                     "shows of it (its credit was not all taken)", m->tenant->name, it->pid, g,
                     units_format_size(keep, a, sizeof a));
            break;
        }
    }
}

void linger_check(struct linger_set *lg)
{
    if (lg->gpu) {
        baseline_refresh(lg);
        drains_check(lg);
    }
    for (size_t i = 0; i < lg->n;) {
        if (gpu_holds(lg, lg->items[i].pid)) {
            reconcile(lg, &lg->items[i]);
            seen_now(lg, &lg->items[i++]);
        } else {
            release(lg, i);
        }
    }
    arm(lg);
}

static void on_timer(void *ctx, int fd, uint32_t events)
{
    (void)events;
    uint64_t expirations;
    (void)!read(fd, &expirations, sizeof expirations);
    linger_check(ctx);
}

int linger_init(struct linger_set **out, const struct linger_deps *deps)
{
    struct linger_set *lg = calloc(1, sizeof *lg);
    if (!lg)
        return -ENOMEM;
    struct loop *loop = deps->loop;
    lg->loop = loop;
    lg->gpu = deps->gpu && deps->gpu->ops ? deps->gpu : NULL;
    lg->ledger = deps->ledger;
    lg->n_gpus = deps->n_gpus;
    lg->after_leave = deps->after_leave;
    lg->after_leave_ctx = deps->after_leave_ctx;
    lg->holds = deps->holds;
    lg->holds_ctx = deps->holds_ctx;
    lg->clock = monotonic_ms;
    if (!(lg->w = loop_add_timer(loop, lg->gpu ? LINGER_BASELINE_MS * 1000ull : 0, on_timer,
                                 lg))) {
        int rc = -errno;
        free(lg);
        return rc ? rc : -ENOMEM;
    }
    *out = lg;
    return 0;
}

void linger_fini(struct linger_set *lg)
{
    if (!lg)
        return;
    loop_del_close(lg->loop, lg->w);
    free(lg->items);
    free(lg->procs);
    free(lg->drains);
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
        free(lg->base[g].v);
    free(lg);
}

/* Whether the member is charged anything (else there is nothing to keep): what it
 * reported held, or credit it may have allocated from since its last report (a
 * process that execs right after allocating never sends that report; the caller
 * folds the credit into its holdings when it lingers). */
static bool holds_any(const struct linger_set *lg, const struct ledger_member *m)
{
    for (unsigned g = 0; g < lg->n_gpus && g < KAIROS_MAX_GPUS; g++)
        if (m->held[g] || m->credit[g])
            return true;
    return false;
}

/* Member m of departed pid lingers from now on; false when out of memory. */
static bool add_item(struct linger_set *lg, struct ledger_member *m, uint32_t pid)
{
    struct lingering *grown = grow_for_one(lg->items, &lg->cap, lg->n, sizeof *grown, 8);
    if (!grown)
        return false;
    lg->items = grown;
    struct lingering *it = &lg->items[lg->n++];
    *it = (struct lingering){.member = m, .pid = pid, .departed_ms = now_ms(lg)};
    memcpy(it->reported, m->held, sizeof it->reported); /* before its credit is folded in */
    seen_now(lg, it);
    arm(lg);
    tell_changed(lg);
    return true;
}

bool linger_restore(struct linger_set *lg, struct ledger_tenant *t, uint32_t pid,
                    const uint64_t held[KAIROS_MAX_GPUS], bool vouched)
{
    struct ledger_member *m = NULL;
    if (!lg || linger_member_of(lg, pid) || (!vouched && !gpu_lists(lg, pid)) ||
        ledger_join(lg->ledger, t, pid, held, &m))
        return false;
    if (!add_item(lg, m, pid)) {
        ledger_leave(lg->ledger, m, NULL);
        return false;
    }
    return true;
}

const struct ledger_member *linger_at(const struct linger_set *lg, size_t i, uint32_t *pid)
{
    if (!lg || i >= lg->n)
        return NULL;
    *pid = lg->items[i].pid;
    return lg->items[i].member;
}

void linger_set_changed_hook(struct linger_set *lg, void (*fn)(void *ctx), void *ctx)
{
    if (!lg)
        return;
    lg->changed = fn;
    lg->changed_ctx = ctx;
}

bool linger_keep(struct linger_set *lg, struct ledger_member *m, uint32_t pid)
{
    if (!lg || (!lg->gpu && !lg->holds) || !m || !holds_any(lg, m))
        return false;
    if (!gpu_holds(lg, pid)) {
        if (lg->gpu)
            drain_unlisted(lg, m, pid);
        return false;
    }
    if (!add_item(lg, m, pid))
        return false; /* out of memory: release now, as without a GPU backend */
    log_info("tenant %s: pid %u left but the GPU still holds its memory (a child, an exec'd "
             "program or a receiver keeps its descriptors); its charge stays until the GPU "
             "frees it",
             m->tenant->name, pid);
    return true;
}

void linger_set_clock(struct linger_set *lg, uint64_t (*clock)(void *ctx), void *ctx)
{
    if (!lg)
        return;
    lg->clock = clock ? clock : monotonic_ms;
    lg->clock_ctx = ctx;
}

void linger_set_removed_hook(struct linger_set *lg, void (*fn)(void *ctx), void *ctx)
{
    if (!lg)
        return;
    lg->removed = fn;
    lg->removed_ctx = ctx;
}

bool linger_has(const struct linger_set *lg, const struct ledger_member *m)
{
    return linger_departed_ms(lg, m) != 0;
}

uint64_t linger_departed_ms(const struct linger_set *lg, const struct ledger_member *m)
{
    for (size_t i = 0; lg && i < lg->n; i++)
        if (lg->items[i].member == m)
            return lg->items[i].departed_ms;
    return 0;
}

const struct ledger_member *linger_member_of(const struct linger_set *lg, uint32_t pid)
{
    for (size_t i = 0; lg && i < lg->n; i++)
        if (lg->items[i].pid == pid)
            return lg->items[i].member;
    return NULL;
}

unsigned linger_count(const struct linger_set *lg)
{
    return lg ? (unsigned)lg->n : 0;
}

unsigned linger_draining(const struct linger_set *lg)
{
    return lg ? (unsigned)lg->n_drains : 0;
}
