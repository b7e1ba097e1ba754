/* audit.c - compares the GPU backend's processes with the ledger (see audit.h). */
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

#define AUDIT_SEEN_MAX 512

enum audit_kind { AUDIT_UNREGISTERED = 1, AUDIT_OVER_QUOTA = 2 };

struct audit_seen {
    uint32_t pid;
    unsigned gpu;
    enum audit_kind kind;
    bool still; /* seen in this pass */
};

struct audit {
    struct loop *loop;
    struct gpu_backend *gpu;
    struct tenants *ts;
    const struct config *cfg;
    int tfd;
    struct loop_watch *w;
    struct audit_seen seen[AUDIT_SEEN_MAX];
    size_t n_seen;
    struct gpu_proc procs[GPU_MAX_PROCS];
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

/* true when this (pid, gpu, kind) is new in this pass and must be reported */
static bool first_sight(struct audit *a, uint32_t pid, unsigned gpu, enum audit_kind kind)
{
    for (size_t i = 0; i < a->n_seen; i++)
        if (a->seen[i].pid == pid && a->seen[i].gpu == gpu && a->seen[i].kind == kind) {
            a->seen[i].still = true;
            return false;
        }
    if (a->n_seen < AUDIT_SEEN_MAX)
        a->seen[a->n_seen++] = (struct audit_seen){pid, gpu, kind, true};
    return true;
}

static void act(struct audit *a, uint32_t pid, const char *what)
{
    char comm[32];
    comm_of(pid, comm, sizeof comm);
    if (!a->cfg->audit_kill) {
        log_about_warn(NULL, pid, -1,
                       "audit: pid %u (%s) %s; not killed (set audit: { kill: true } to kill such "
                 "processes)", pid, comm, what);
        return;
    }
    if (pid <= 1 || pid == (uint32_t)getpid()) {
        log_about_warn(NULL, pid, -1, "audit: pid %u (%s) %s; never killed (pid 1 or kairosd)",
                       pid, comm, what);
        return;
    }
    if (kill((pid_t)pid, SIGKILL))
        log_about_error(NULL, pid, -1, "audit: pid %u (%s) %s; kill failed: %s", pid, comm,
                        what, strerror(errno));
    else
        log_about_warn(NULL, pid, -1, "audit: pid %u (%s) %s; killed (audit.kill is true)", pid,
                       comm, what);
}

void audit_tick(struct audit *a)
{
    if (!a->gpu || !a->gpu->ops)
        return;
    for (size_t i = 0; i < a->n_seen; i++)
        a->seen[i].still = false;
    uint32_t self = (uint32_t)getpid();
    for (unsigned g = 0; g < a->ts->n_gpus; g++) {
        size_t n = 0;
        int rc = a->gpu->ops->processes(a->gpu, g, a->procs, GPU_MAX_PROCS, &n);
        if (rc) {
            log_debug("audit: GPU %u: cannot list processes: %s", g, strerror(-rc));
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            const struct gpu_proc *p = &a->procs[i];
            if (p->pid == self)
                continue;
            char what[256], x[32], y[32];
            struct ledger_member *m = ledger_find_pid(&a->ts->ledger, p->pid);
            if (!m) {
                if (!first_sight(a, p->pid, g, AUDIT_UNREGISTERED))
                    continue;
                snprintf(what, sizeof what, "uses GPU %u (%s) without being a registered tenant "
                         "(started without kairos run or the shim?)", g,
                         p->used_valid ? tenants_size(p->used, x, sizeof x) : "memory unknown");
                act(a, p->pid, what);
            } else if (p->used_valid && p->used > m->tenant->quota[g]) {
                if (!first_sight(a, p->pid, g, AUDIT_OVER_QUOTA))
                    continue;
                snprintf(what, sizeof what, "of tenant %s uses %s on GPU %u, above the tenant's "
                         "quota of %s (memory the shim did not see)", m->tenant->name,
                         tenants_size(p->used, x, sizeof x), g,
                         tenants_size(m->tenant->quota[g], y, sizeof y));
                act(a, p->pid, what);
            }
        }
    }
    /* forget processes that went away, so a reused pid is reported again */
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
    free(a);
}
