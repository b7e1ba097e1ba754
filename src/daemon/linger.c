/* linger.c - departed processes whose memory the GPU still holds (see linger.h). */
#include "daemon/linger.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/grow.h"
#include "daemon/log.h"

struct lingering {
    struct ledger_member *member;
    uint32_t pid;
};

struct linger_set {
    struct loop *loop;
    struct gpu_backend *gpu;
    struct tenants *ts;
    struct loop_watch *w; /* its check timer (loop_add_timer) */
    struct lingering *items;
    size_t n, cap;
    void (*removed)(void *ctx);
    void *removed_ctx;
    struct gpu_proc *procs; /* the backend's list, grown to what it reports */
    size_t cap_procs;
    bool (*holds)(void *ctx, uint32_t pid); /* another witness (heirs.h), or NULL */
    void *holds_ctx;
};

/* Whether some GPU lists pid (with memory in use, or memory unknown), or the holder
 * check says its files live on in it or in a process it handed them to. */
static bool gpu_holds(struct linger_set *lg, uint32_t pid)
{
    if (lg->holds && lg->holds(lg->holds_ctx, pid))
        return true;
    for (unsigned g = 0; lg->gpu && g < lg->ts->n_gpus; g++) {
        size_t n = 0;
        if (gpu_processes_all(lg->gpu, g, &lg->procs, &lg->cap_procs, &n))
            continue;
        for (size_t i = 0; i < n; i++)
            if (lg->procs[i].pid == pid && (!lg->procs[i].used_valid || lg->procs[i].used))
                return true;
    }
    return false;
}

static void arm(struct linger_set *lg, bool on)
{
    loop_timer_set(lg->w, on ? LINGER_CHECK_MS * 1000u : 0);
}

static void release(struct linger_set *lg, size_t i)
{
    struct lingering it = lg->items[i];
    lg->items[i] = lg->items[--lg->n];
    uint64_t freed[KAIROS_MAX_GPUS];
    struct ledger_tenant *t = ledger_leave(&lg->ts->ledger, it.member, freed);
    uint64_t total = 0;
    for (unsigned g = 0; g < lg->ts->n_gpus; g++)
        total += freed[g];
    char a[32];
    log_info("tenant %s: the GPU freed the memory of departed pid %u; released %s", t->name,
             it.pid, tenants_size(total, a, sizeof a));
    if (tenants_after_leave(lg->ts, t) && lg->removed)
        lg->removed(lg->removed_ctx);
}

static void on_timer(void *ctx, int fd, uint32_t events)
{
    (void)events;
    struct linger_set *lg = ctx;
    uint64_t expirations;
    (void)!read(fd, &expirations, sizeof expirations);
    for (size_t i = 0; i < lg->n;) {
        if (gpu_holds(lg, lg->items[i].pid))
            i++;
        else
            release(lg, i);
    }
    if (lg->n == 0)
        arm(lg, false);
}

int linger_init(struct linger_set **out, struct loop *loop, struct gpu_backend *gpu,
                struct tenants *ts)
{
    struct linger_set *lg = calloc(1, sizeof *lg);
    if (!lg)
        return -ENOMEM;
    lg->loop = loop;
    lg->gpu = gpu && gpu->ops ? gpu : NULL;
    lg->ts = ts;
    if (!(lg->w = loop_add_timer(loop, 0, on_timer, lg))) {
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
    free(lg);
}

/* Whether the member is charged anything (else there is nothing to keep). */
static bool holds_any(const struct linger_set *lg, const struct ledger_member *m)
{
    for (unsigned g = 0; g < lg->ts->n_gpus && g < KAIROS_MAX_GPUS; g++)
        if (m->held[g])
            return true;
    return false;
}

bool linger_keep(struct linger_set *lg, struct ledger_member *m, uint32_t pid)
{
    if (!lg || (!lg->gpu && !lg->holds) || !m || !holds_any(lg, m) || !gpu_holds(lg, pid))
        return false;
    struct lingering *grown = grow_for_one(lg->items, &lg->cap, lg->n, sizeof *grown, 8);
    if (!grown)
        return false; /* out of memory: release now, as without a GPU backend */
    lg->items = grown;
    lg->items[lg->n++] = (struct lingering){m, pid};
    if (lg->n == 1)
        arm(lg, true);
    log_info("tenant %s: pid %u left but the GPU still holds its memory (a child, an exec'd "
             "program or a receiver keeps its descriptors); its charge stays until the GPU "
             "frees it",
             m->tenant->name, pid);
    return true;
}

void linger_set_holder_check(struct linger_set *lg, bool (*holds)(void *ctx, uint32_t pid),
                              void *ctx)
{
    if (!lg)
        return;
    lg->holds = holds;
    lg->holds_ctx = ctx;
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
    for (size_t i = 0; lg && i < lg->n; i++)
        if (lg->items[i].member == m)
            return true;
    return false;
}

unsigned linger_count(const struct linger_set *lg)
{
    return lg ? (unsigned)lg->n : 0;
}
