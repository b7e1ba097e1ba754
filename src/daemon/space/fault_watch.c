/* fault_watch.c - the kernel log in kairosd's loop (see fault_watch.h). */
#include "daemon/space/fault_watch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "daemon/base/kernel_log.h"
#include "daemon/base/log.h"
#include "daemon/base/loop.h"
#include "daemon/gpu/gpu.h"
#include "daemon/gpu/xid.h"
#include "daemon/memory/ledger.h"
#include "daemon/space/faults.h"

struct fault_watch {
    struct fault_watch_deps deps;
    struct kernel_log log;
    struct loop_watch *watch;
};

static uint64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void on_line(void *ctx, const char *text)
{
    struct fault_watch *w = ctx;
    struct xid_report x;
    if (!xid_parse(text, &x))
        return;
    const struct ledger *l = w->deps.ledger;
    unsigned gpu;
    struct fault_context c = {.gpu = FAULTS_GPU_UNKNOWN, .mono_ms = clock_ms(CLOCK_MONOTONIC),
                              .unix_ms = clock_ms(CLOCK_REALTIME), .proc = "/proc"};
    if (!gpu_index_at(w->deps.gpu, l->n_gpus, &x.pci, &gpu))
        c.gpu = gpu;
    else if (l->n_gpus == 1 && !w->deps.gpu)
        c.gpu = 0; /* no backend to ask: a node of one GPU has no other */
    char line[1024];
    struct fault_domain_event ev;
    faults_on_xid(w->deps.faults, l, w->deps.settings, w->deps.mps, &x, &c, &ev, line,
                  sizeof line);
    log_warn("%s", line);
    if (ev.set && w->deps.domain_fault)
        w->deps.domain_fault(w->deps.ctx, &ev);
}

static void on_readable(void *ctx, int fd, uint32_t events)
{
    (void)fd;
    (void)events;
    struct fault_watch *w = ctx;
    int rc = kernel_log_drain(&w->log, on_line, w);
    if (rc < 0) {
        log_warn("faults: reading the kernel log failed (%s); GPU faults are no longer "
                 "attributed to tenants until kairosd restarts", strerror(-rc));
        loop_del(w->deps.loop, w->watch);
        w->watch = NULL;
    }
}

int fault_watch_open(struct fault_watch **out, const char *path,
                     const struct fault_watch_deps *deps)
{
    struct fault_watch *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->deps = *deps;
    int rc = kernel_log_open(&w->log, path);
    if (rc) {
        free(w);
        return rc;
    }
    w->watch = loop_add(deps->loop, w->log.fd, EPOLLIN, on_readable, w);
    if (!w->watch) {
        rc = -errno;
        kernel_log_close(&w->log);
        free(w);
        return rc ? rc : -ENOMEM;
    }
    *out = w;
    return 0;
}

void fault_watch_close(struct fault_watch *w)
{
    if (!w)
        return;
    if (w->watch)
        loop_del(w->deps.loop, w->watch);
    kernel_log_close(&w->log);
    free(w);
}
