/* metrics_snapshot.c - a render of the metrics in a forked child, one at a time,
 * with a gap between starts and a deadline (see metrics_snapshot.h). */
#include "daemon/observe/metrics_snapshot.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/base/log.h"

struct metrics_snapshot {
    struct loop *loop;
    struct metrics_sources src;
    metrics_snapshot_done done;
    void *ctx;
    struct loop_watch *timer;   /* the gap before a start, then the deadline of a render */
    struct loop_watch *exit_w;  /* the child's pidfd */
    pid_t child;                /* 0: no render under way */
    int pidfd, memfd;
    bool asked;                 /* a render is asked for and not started yet */
    uint64_t last_start_ms;
    struct metrics_snapshot_counts counts;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The child: the daemon's state as it was at fork(), rendered into memfd. It touches
 * nothing else (no loop, no socket, no NVML) and leaves with _exit, so none of
 * kairosd's exit work runs twice. */
static _Noreturn void render_in_child(const struct metrics_sources *src,
                                      const struct metrics_gpus *gpus, int memfd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char *text;
    size_t len;
    if (metrics_render_gpus(src, gpus, &text, &len) || write_all(memfd, text, len))
        _exit(1);
    _exit(0);
}

/* Hands a finished render (or its failure) to the owner. */
static void finish(struct metrics_snapshot *s, int err)
{
    int fd = -1;
    size_t len = 0;
    struct stat st;
    if (!err && fstat(s->memfd, &st) == 0) {
        fd = s->memfd;
        len = (size_t)st.st_size;
    } else {
        err = err ? err : -errno;
        close(s->memfd);
        s->counts.failed++;
    }
    s->memfd = -1;
    s->done(s->ctx, fd, len, err);
}

/* fork() failed: the render is made here, in the loop thread, as a last resort. */
static void render_inline(struct metrics_snapshot *s, const struct metrics_gpus *gpus)
{
    char *text;
    size_t len;
    s->counts.inline_renders++;
    int rc = metrics_render_gpus(&s->src, gpus, &text, &len);
    if (!rc) {
        rc = write_all(s->memfd, text, len) ? -errno : 0;
        free(text);
    }
    finish(s, rc);
}

static void stop_child(struct metrics_snapshot *s)
{
    loop_del(s->loop, s->exit_w);
    s->exit_w = NULL;
    close(s->pidfd);
    s->pidfd = -1;
    s->child = 0;
}

static void on_exit_ready(void *ctx, int fd, uint32_t events)
{
    struct metrics_snapshot *s = ctx;
    int status;
    pid_t r = waitpid(s->child, &status, WNOHANG);
    if (r == 0)
        return; /* not yet (a spurious wake) */
    loop_timer_after_ms(s->timer, UINT64_MAX);
    stop_child(s);
    bool ok = r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok)
        log_warn("metrics: the renderer ended %s %d; this scrape fails",
                 r > 0 && WIFSIGNALED(status) ? "by signal" : "with status",
                 r > 0 && WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    finish(s, ok ? 0 : -ECHILD);
}

static void start(struct metrics_snapshot *s)
{
    s->asked = false;
    s->last_start_ms = now_ms();
    struct metrics_gpus gpus;
    metrics_read_gpus(&s->src, &gpus);
    s->memfd = memfd_create("kairos-metrics", MFD_CLOEXEC);
    if (s->memfd < 0) {
        s->counts.failed++;
        s->done(s->ctx, -1, 0, -errno);
        return;
    }
    pid_t pid = fork();
    if (pid == 0)
        render_in_child(&s->src, &gpus, s->memfd);
    int pidfd = pid > 0 ? pidfd_open(pid, 0) : -1;
    struct loop_watch *w = pidfd >= 0 ? loop_add(s->loop, pidfd, EPOLLIN, on_exit_ready, s) : NULL;
    if (!w) {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        if (pidfd >= 0)
            close(pidfd);
        log_debug("metrics: cannot fork a renderer (%s); rendering in the loop", strerror(errno));
        render_inline(s, &gpus);
        return;
    }
    s->counts.forked++;
    s->child = pid;
    s->pidfd = pidfd;
    s->exit_w = w;
    loop_timer_after_ms(s->timer, METRICS_RENDER_TIMEOUT_MS);
}

/* The timer: the gap before an asked render has passed, or a render's deadline. */
static void on_timer(void *ctx, int fd, uint32_t events)
{
    struct metrics_snapshot *s = ctx;
    uint64_t expirations;
    if (read(fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        return;
    if (s->child) {
        log_warn("metrics: a render took longer than %d ms; killed, this scrape fails",
                 METRICS_RENDER_TIMEOUT_MS);
        kill(s->child, SIGKILL); /* its pidfd turns readable: on_exit_ready reaps it */
        return;
    }
    if (s->asked)
        start(s);
}

void metrics_snapshot_request(struct metrics_snapshot *s)
{
    if (s->child || s->asked)
        return;
    uint64_t since = now_ms() - s->last_start_ms;
    if (s->last_start_ms && since < METRICS_RENDER_GAP_MS) {
        s->asked = true;
        loop_timer_after_ms(s->timer, METRICS_RENDER_GAP_MS - since);
        return;
    }
    start(s);
}

int metrics_snapshot_init(struct metrics_snapshot **out, struct loop *loop,
                          const struct metrics_sources *src, metrics_snapshot_done done,
                          void *ctx)
{
    struct metrics_snapshot *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    *s = (struct metrics_snapshot){.loop = loop, .src = *src, .done = done, .ctx = ctx,
                                   .pidfd = -1, .memfd = -1};
    s->timer = loop_add_timer(loop, 0, on_timer, s);
    if (!s->timer) {
        int rc = -errno;
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void metrics_snapshot_fini(struct metrics_snapshot *s)
{
    if (!s)
        return;
    if (s->child) {
        kill(s->child, SIGKILL);
        waitpid(s->child, NULL, 0);
        stop_child(s);
    }
    if (s->memfd >= 0)
        close(s->memfd);
    loop_del_close(s->loop, s->timer);
    free(s);
}

struct metrics_snapshot_counts metrics_snapshot_counts(const struct metrics_snapshot *s)
{
    return s->counts;
}
