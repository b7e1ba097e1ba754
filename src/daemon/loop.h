/* loop.h - kairosd's event loop: epoll over file descriptors, each with a callback.
 * Knows nothing of tenants or messages; timers and signals are file descriptors
 * (timerfd, signalfd) that their owners register like any other.
 *
 * A watch removed during a dispatch is never called again, even if its event was
 * already fetched in the same batch (freed after the batch).
 *
 * Thread rules: one thread.
 */
#ifndef KAIROS_DAEMON_LOOP_H
#define KAIROS_DAEMON_LOOP_H

#include <stdbool.h>
#include <stdint.h>

struct loop;
struct loop_watch;

typedef void (*loop_cb)(void *ctx, int fd, uint32_t events);

int loop_init(struct loop **out);
void loop_fini(struct loop *l);

/* Watches fd for events (EPOLLIN...); returns the watch or NULL (errno set). */
struct loop_watch *loop_add(struct loop *l, int fd, uint32_t events, loop_cb cb, void *ctx);
/* Changes the events watched (0: none for now). 0 or -errno. */
int loop_modify(struct loop *l, struct loop_watch *w, uint32_t events);
/* Stops watching (does not close fd). */
void loop_del(struct loop *l, struct loop_watch *w);

/* Runs until loop_stop; returns 0 or -errno on an epoll failure. */
int loop_run(struct loop *l);
void loop_stop(struct loop *l);

#endif /* KAIROS_DAEMON_LOOP_H */
