/* loop.c - epoll dispatch with deferred frees of removed watches (see loop.h). */
#include "daemon/base/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

struct loop_watch {
    int fd;
    loop_cb cb; /* NULL once removed */
    void *ctx;
    struct loop_watch *next_dead;
};

struct loop {
    int epfd;
    bool stop;
    struct loop_watch *dead;
};

int loop_init(struct loop **out)
{
    struct loop *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) {
        int rc = -errno;
        free(l);
        return rc;
    }
    *out = l;
    return 0;
}

static void reap(struct loop *l)
{
    while (l->dead) {
        struct loop_watch *w = l->dead;
        l->dead = w->next_dead;
        free(w);
    }
}

void loop_fini(struct loop *l)
{
    if (!l)
        return;
    reap(l);
    close(l->epfd);
    free(l);
}

struct loop_watch *loop_add(struct loop *l, int fd, uint32_t events, loop_cb cb, void *ctx)
{
    struct loop_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->fd = fd;
    w->cb = cb;
    w->ctx = ctx;
    struct epoll_event ev = {.events = events, .data.ptr = w};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev)) {
        int e = errno;
        free(w);
        errno = e;
        return NULL;
    }
    return w;
}

int loop_modify(struct loop *l, struct loop_watch *w, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = w};
    return epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev) ? -errno : 0;
}

void loop_del(struct loop *l, struct loop_watch *w)
{
    if (!w)
        return;
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    w->cb = NULL;
    w->next_dead = l->dead;
    l->dead = w;
}

/* Watches fd (just made by the caller) or closes it on failure, keeping errno. */
static struct loop_watch *add_owned(struct loop *l, int fd, loop_cb cb, void *ctx)
{
    if (fd < 0)
        return NULL;
    struct loop_watch *w = loop_add(l, fd, EPOLLIN, cb, ctx);
    if (!w) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return w;
}

struct loop_watch *loop_add_timer(struct loop *l, uint64_t period_us, loop_cb cb, void *ctx)
{
    struct loop_watch *w =
        add_owned(l, timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC), cb, ctx);
    int rc = w ? loop_timer_set(w, period_us) : 0;
    if (rc) {
        loop_del_close(l, w);
        errno = -rc;
        return NULL;
    }
    return w;
}

int loop_timer_set(struct loop_watch *w, uint64_t period_us)
{
    struct itimerspec its = {
        .it_interval = {.tv_sec = (time_t)(period_us / 1000000),
                        .tv_nsec = (long)(period_us % 1000000) * 1000},
    };
    its.it_value = its.it_interval;
    return timerfd_settime(w->fd, 0, &its, NULL) ? -errno : 0;
}

int loop_timer_after_ms(struct loop_watch *w, uint64_t ms)
{
    struct itimerspec its = {0};
    if (ms == 0)
        its.it_value.tv_nsec = 1;
    else if (ms != UINT64_MAX) {
        its.it_value.tv_sec = (time_t)(ms / 1000);
        its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
    }
    return timerfd_settime(w->fd, 0, &its, NULL) ? -errno : 0;
}

struct loop_watch *loop_add_wakeup(struct loop *l, loop_cb cb, void *ctx)
{
    return add_owned(l, eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), cb, ctx);
}

int loop_wake(struct loop_watch *w)
{
    return eventfd_write(w->fd, 1) ? -errno : 0;
}

void loop_del_close(struct loop *l, struct loop_watch *w)
{
    if (!w)
        return;
    int fd = w->fd;
    loop_del(l, w);
    close(fd);
}

int loop_run(struct loop *l)
{
    struct epoll_event evs[64];
    l->stop = false;
    while (!l->stop) {
        int n = epoll_wait(l->epfd, evs, 64, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        for (int i = 0; i < n && !l->stop; i++) {
            struct loop_watch *w = evs[i].data.ptr;
            if (w->cb)
                w->cb(w->ctx, w->fd, evs[i].events);
        }
        reap(l);
    }
    return 0;
}

void loop_stop(struct loop *l)
{
    l->stop = true;
}
