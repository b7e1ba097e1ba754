/* audit.c - compares what the GPUs hold with the ledger (see audit.h): the backend's
 * process lists summed per tenant, and what each finding leads to (report, kill). */
#include "daemon/audit.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "daemon/log.h"

enum audit_kind { AUDIT_UNREGISTERED = 1, AUDIT_TENANT_OVER = 2 };

/* A finding already reported: (who, gpu, kind), who a pid or a tenant id. */
struct audit_seen {
    uint32_t who;
    unsigned gpu;
    enum audit_kind kind;
    bool still; /* seen in this pass */
};

/* One tenant's processes on the GPU being audited. */
struct audit_sum {
    struct ledger_tenant *tenant;
    uint64_t used;
    size_t first, n; /* its processes: a->mine[first .. first + n) */
};

struct audit {
    struct loop *loop;
    struct gpu_backend *gpu;
    struct tenants *ts;
    const struct config *cfg;
    int tfd;
    struct loop_watch *w;
    struct audit_seen *seen;
    size_t n_seen, cap_seen;
    struct gpu_proc *procs; /* the backend's list for one GPU, grown to what it reports */
    size_t cap_procs;
    const struct gpu_proc **mine; /* members' processes, grouped by tenant */
    struct audit_sum *sums;
    size_t cap_sums;
};

static void comm_of(uint32_t pid, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    FILE *f = fopen(path, "re");
    out[0] = 0;
    if (f) {
        if (fgets(out, (int)cap, f))
            out[strcspn(out, "\n")] = 0;
        fclose(f);
    }
    if (!out[0])
        snprintf(out, cap, "?");
}

/* true when this finding is new in this pass and must be reported */
static bool first_sight(struct audit *a, uint32_t who, unsigned gpu, enum audit_kind kind)
{
    for (size_t i = 0; i < a->n_seen; i++)
        if (a->seen[i].who == who && a->seen[i].gpu == gpu && a->seen[i].kind == kind) {
            a->seen[i].still = true;
            return false;
        }
    if (a->n_seen == a->cap_seen) {
        size_t cap = a->cap_seen ? 2 * a->cap_seen : 64;
        struct audit_seen *v = realloc(a->seen, cap * sizeof *v);
        if (!v)
            return true; /* reported again next pass rather than never */
        a->seen = v;
        a->cap_seen = cap;
    }
    a->seen[a->n_seen++] = (struct audit_seen){who, gpu, kind, true};
    return true;
}

static void act(struct audit *a, uint32_t pid, const char *what)
{
    char comm[32];
    comm_of(pid, comm, sizeof comm);
    if (!a->cfg->audit_kill) {
        log_warn("audit: pid %u (%s) %s; not killed (set audit: { kill: true } to kill such "
                 "processes)", pid, comm, what);
        return;
    }
    if (pid <= 1 || pid == (uint32_t)getpid()) {
        log_warn("audit: pid %u (%s) %s; never killed (pid 1 or kairosd)", pid, comm, what);
        return;
    }
    if (kill((pid_t)pid, SIGKILL))
        log_error("audit: pid %u (%s) %s; kill failed: %s", pid, comm, what, strerror(errno));
    else
        log_warn("audit: pid %u (%s) %s; killed (audit.kill is true)", pid, comm, what);
}

/* The backend's processes on gpu into a->procs, however many there are. */
static int list_processes(struct audit *a, unsigned gpu, size_t *n)
{
    for (int attempt = 0; attempt < 4; attempt++) {
        int rc = a->gpu->ops->processes(a->gpu, gpu, a->procs, a->cap_procs, n);
        if (rc != -E2BIG)
            return rc;
        size_t cap = *n + *n / 4 + 16; /* processes may start before the next call */
        struct gpu_proc *v = realloc(a->procs, cap * sizeof *v);
        const struct gpu_proc **m = realloc(a->mine, cap * sizeof *m);
        if (v)
            a->procs = v;
        if (m)
            a->mine = m;
        if (!v || !m)
            return -ENOMEM;
        a->cap_procs = cap;
    }
    return -EAGAIN;
}

/* The slot of tenant t among the first *n sums (added when absent). */
static struct audit_sum *sum_of(struct audit *a, size_t *n, struct ledger_tenant *t)
{
    for (size_t i = 0; i < *n; i++)
        if (a->sums[i].tenant == t)
            return &a->sums[i];
    if (*n == a->cap_sums) {
        size_t cap = a->cap_sums ? 2 * a->cap_sums : 16;
        struct audit_sum *v = realloc(a->sums, cap * sizeof *v);
        if (!v)
            return NULL;
        a->sums = v;
        a->cap_sums = cap;
    }
    a->sums[*n] = (struct audit_sum){.tenant = t};
    return &a->sums[(*n)++];
}

static int by_used_desc(const void *x, const void *y)
{
    const struct gpu_proc *p = *(const struct gpu_proc *const *)x;
    const struct gpu_proc *q = *(const struct gpu_proc *const *)y;
    return (p->used < q->used) - (p->used > q->used);
}

/* A tenant whose processes together use more than its quota on gpu: reported once
 * with its processes; killed largest first until the rest fit (when kill is on). */
static void check_tenant_sum(struct audit *a, unsigned gpu, struct audit_sum *s)
{
    struct ledger_tenant *t = s->tenant;
    uint64_t quota = t->quota[gpu];
    if (s->used <= quota || !first_sight(a, t->id, gpu, AUDIT_TENANT_OVER))
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
    log_warn("audit: tenant %s: its %zu process(es) together use %s on GPU %u, above the "
             "tenant's quota of %s (memory the shim did not see): pids %s", t->name, s->n,
             tenants_size(s->used, x, sizeof x), gpu, tenants_size(quota, y, sizeof y), list);
    uint64_t left = s->used;
    for (size_t i = 0; i < s->n && left > quota; i++) {
        char what[256];
        snprintf(what, sizeof what, "of tenant %s uses %s on GPU %u, where the tenant is above "
                 "its quota of %s", t->name, tenants_size(mine[i]->used, x, sizeof x), gpu,
                 tenants_size(quota, y, sizeof y));
        act(a, mine[i]->pid, what);
        left -= mine[i]->used;
    }
}

static void audit_gpu(struct audit *a, unsigned g)
{
    size_t n = 0;
    int rc = list_processes(a, g, &n);
    if (rc) {
        log_debug("audit: GPU %u: cannot list processes: %s", g, strerror(-rc));
        return;
    }
    uint32_t self = (uint32_t)getpid();
    size_t n_sums = 0, n_mine = 0;
    /* members' processes grouped by tenant; the others reported at once */
    for (size_t i = 0; i < n; i++) {
        const struct gpu_proc *p = &a->procs[i];
        if (p->pid == self)
            continue;
        struct ledger_member *m = ledger_find_pid(&a->ts->ledger, p->pid);
        if (m) {
            struct audit_sum *s = sum_of(a, &n_sums, m->tenant);
            if (!s)
                return;
            s->used += p->used_valid ? p->used : 0;
            s->n++;
            continue;
        }
        if (!first_sight(a, p->pid, g, AUDIT_UNREGISTERED))
            continue;
        char what[256], x[32];
        snprintf(what, sizeof what, "uses GPU %u (%s) without being a registered tenant "
                 "(started without kairos run or the shim?)", g,
                 p->used_valid ? tenants_size(p->used, x, sizeof x) : "memory unknown");
        act(a, p->pid, what);
    }
    for (size_t k = 0; k < n_sums; k++) {
        a->sums[k].first = n_mine;
        n_mine += a->sums[k].n;
        a->sums[k].n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        const struct gpu_proc *p = &a->procs[i];
        struct ledger_member *m = p->pid == self ? NULL : ledger_find_pid(&a->ts->ledger, p->pid);
        if (!m)
            continue;
        struct audit_sum *s = sum_of(a, &n_sums, m->tenant);
        a->mine[s->first + s->n++] = p;
    }
    for (size_t k = 0; k < n_sums; k++)
        check_tenant_sum(a, g, &a->sums[k]);
}

void audit_tick(struct audit *a)
{
    if (!a->gpu || !a->gpu->ops)
        return;
    for (size_t i = 0; i < a->n_seen; i++)
        a->seen[i].still = false;
    for (unsigned g = 0; g < a->ts->n_gpus; g++)
        audit_gpu(a, g);
    /* forget what went away, so a reused pid (or a tenant over again) is reported again */
    size_t k = 0;
    for (size_t i = 0; i < a->n_seen; i++)
        if (a->seen[i].still)
            a->seen[k++] = a->seen[i];
    a->n_seen = k;
}

static void on_timer(void *ctx, int fd, uint32_t events)
{
    uint64_t expirations;
    (void)!read(fd, &expirations, sizeof expirations);
    audit_tick(ctx);
}

void audit_reconfigure(struct audit *a)
{
    if (a->tfd < 0)
        return;
    unsigned ms = a->cfg->audit_interval_ms;
    struct itimerspec its = {0};
    if (ms) {
        its.it_interval.tv_sec = ms / 1000;
        its.it_interval.tv_nsec = (long)(ms % 1000) * 1000000L;
        its.it_value = its.it_interval;
    }
    timerfd_settime(a->tfd, 0, &its, NULL);
}

int audit_init(struct audit **out, struct loop *loop, struct gpu_backend *gpu,
               struct tenants *ts, const struct config *cfg)
{
    struct audit *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->loop = loop;
    a->gpu = gpu;
    a->ts = ts;
    a->cfg = cfg;
    a->tfd = -1;
    if (gpu && gpu->ops) {
        a->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (a->tfd < 0 || !(a->w = loop_add(loop, a->tfd, EPOLLIN, on_timer, a))) {
            int rc = -errno;
            if (a->tfd >= 0)
                close(a->tfd);
            free(a);
            return rc;
        }
        audit_reconfigure(a);
        if (cfg->audit_interval_ms)
            log_info("audit: every %u ms with the %s backend; unregistered processes are %s",
                     cfg->audit_interval_ms, gpu->ops->name,
                     cfg->audit_kill ? "killed" : "reported");
        else
            log_info("audit: off (audit: { interval_ms: 0 })");
    }
    *out = a;
    return 0;
}

void audit_fini(struct audit *a)
{
    if (!a)
        return;
    if (a->w)
        loop_del(a->loop, a->w);
    if (a->tfd >= 0)
        close(a->tfd);
    free(a->seen);
    free(a->procs);
    free(a->mine);
    free(a->sums);
    free(a);
}
