/* own_thread.h - the shim's own threads (the credit sender and the watcher,
 * memguard.c; the time control, timectl.c; the SIGTERM waiter, soft_end.c): each is
 * started with every signal blocked, so that none of the application's signals, nor
 * its handlers, ever runs on one of ours.
 *
 * Thread rules: callable from any thread; the caller's signal mask is as it was after.
 */
#ifndef KAIROS_SHIM_OWN_THREAD_H
#define KAIROS_SHIM_OWN_THREAD_H

#include <pthread.h>
#include <stdbool.h>

/* Starts fn(arg) with every signal blocked: joinable into *t, or detached where t is
 * NULL. Whether it started. */
bool own_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif /* KAIROS_SHIM_OWN_THREAD_H */
