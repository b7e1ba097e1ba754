/* loop.c - epoll dispatch with deferred frees of removed watches (see loop.h). */
#include "daemon/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
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
