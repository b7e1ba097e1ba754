/* loop.h - kairosd's event loop: epoll over file descriptors, each with a callback.
 * Knows nothing of tenants or messages; timers and signals are file descriptors
 * (timerfd, signalfd) that their owners register like any other, periodic timers and
 * wake-ups (eventfd) through loop_add_timer and loop_add_wakeup, which own their fd.
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

/* A periodic timer: a timerfd (CLOCK_MONOTONIC, non-blocking) watched for EPOLLIN,
 * firing every period_us (0: created stopped, see loop_timer_set); cb reads the
 * expiration count from fd. Returns the watch or NULL (errno set, nothing left open). */
struct loop_watch *loop_add_timer(struct loop *l, uint64_t period_us, loop_cb cb, void *ctx);
/* Makes a timer from loop_add_timer fire every period_us from now (0: stops it).
 * 0 or -errno. */
int loop_timer_set(struct loop_watch *w, uint64_t period_us);
/* Makes a timer from loop_add_timer fire once, ms milliseconds from now (0: at once,
 * after the loop's other events; UINT64_MAX: never). 0 or -errno. */
int loop_timer_after_ms(struct loop_watch *w, uint64_t ms);
/* A wake-up of the loop: an eventfd watched for EPOLLIN; loop_wake makes cb run once
 * back in the loop (cb reads fd with eventfd_read). NULL (errno set) on failure. */
struct loop_watch *loop_add_wakeup(struct loop *l, loop_cb cb, void *ctx);
/* Signals a watch from loop_add_wakeup. 0 or -errno. */
int loop_wake(struct loop_watch *w);
/* loop_del, then closes the descriptor a loop_add_timer or loop_add_wakeup watch owns.
 * NULL: nothing. */
void loop_del_close(struct loop *l, struct loop_watch *w);

/* Runs until loop_stop; returns 0 or -errno on an epoll failure. */
int loop_run(struct loop *l);
void loop_stop(struct loop *l);

#endif /* KAIROS_DAEMON_LOOP_H */
