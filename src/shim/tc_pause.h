/* tc_pause.h - the channel pause and the timeslices (tc_pause.c), for timectl.c.
 *
 * The public half of the mechanism (timectl_pause, timectl_resume, the allocation
 * hooks, timectl_set_real, timectl_active) is declared in timectl.h; these are
 * the parts only the policy link and the tests of the split use.
 *
 * Thread rules: thread-safe; never called with the state lock held.
 */
#ifndef KAIROS_SHIM_TC_PAUSE_H
#define KAIROS_SHIM_TC_PAUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "shim/timectl.h"

/* Sets us on every channel group of the process on gpu, and on every one made
 * later. us 0: the application's own timeslices: where a non-zero one was in
 * force, each group is given back the one the application last set on it (none
 * set: left as it is); its later SET_TIMESLICE stands. */
void tc_pause_set_timeslice(uint32_t gpu, uint64_t us);
/* A policy arrived: the allocation hooks now matter. */
void tc_pause_activate(void);
/* How long gpu's channels were enabled since the last restart (since since_ns,
 * the start of the interval, when never paused), up to now_ns; restart: the next
 * interval starts at now_ns. */
uint64_t tc_pause_unpaused(uint32_t gpu, uint64_t now_ns, uint64_t since_ns, bool restart);
/* Files with a lower id were opened before this process was forked: the parent's. */
uint64_t tc_pause_first_own_file(void);
/* Fills the pause, resume and control counters of s. */
void tc_pause_stats(struct timectl_stats *s);
/* Resumes every GPU and forgets everything (timectl_reset). */
void tc_pause_reset(void);
/* In a forked child (single-threaded, from the atfork handler). */
void tc_pause_after_fork(void);

#endif /* KAIROS_SHIM_TC_PAUSE_H */
