/* reentry.h - whether the calling thread is inside the shim's own work.
 *
 * A signal handler may call close() (async-signal-safe by POSIX) at any point of
 * the thread it interrupts, including inside the shim while it holds the state
 * lock, memguard's lock or the tracer's: taking one of them again there would
 * deadlock the thread on itself. The shim marks the stretches where it takes its
 * locks (state_lock, and the dispatch of ioctl, open and close around them), and a
 * close that finds this thread inside one takes the async-signal-safe path
 * (dispatch.c: recorded when the interrupted call leaves the shim).
 *
 * Thread rules: per thread (initial-exec TLS: no allocation, safe in a handler).
 */
#ifndef KAIROS_SHIM_REENTRY_H
#define KAIROS_SHIM_REENTRY_H

#include <stdbool.h>

void reentry_enter(void);
void reentry_leave(void);
/* True between an enter and its leave on this thread. */
bool reentry_inside(void);

#endif /* KAIROS_SHIM_REENTRY_H */
