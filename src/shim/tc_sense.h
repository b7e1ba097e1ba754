/* tc_sense.h - the runnable sensor (tc_sense.c), for the control thread.
 *
 * The munmap hooks the dispatch calls (timectl_unmap_begin/end) are declared in
 * timectl.h.
 *
 * Thread rules: everything but the hooks runs on the control thread only.
 */
#ifndef KAIROS_SHIM_TC_SENSE_H
#define KAIROS_SHIM_TC_SENSE_H

#include <stdbool.h>
#include <stdint.h>

#include "kairos/proto.h"

/* The sampling intervals of the control thread (timectl.c). Fast, every 1 ms,
 * while some reporting GPU has had work queued or channels moving within the last
 * KAIROS_IDLE_EARLY_MS (tc_sense_quiet), so that runnable and progress time keep
 * their 1 ms resolution while there is something to count and the early idle
 * report goes 20 ms after the last work, as before. Idle, every TC_SENSE_IDLE_NS
 * where kairosd acts on a wake at once (KAIROS_TIME_QUICK_WAKE), else every
 * TC_SENSE_REST_NS. TC_SENSE_IDLE_NS:
 * an idle sample has nothing to count, but the first sample that sees new work
 * is what sends the wake (KAIROS_RUNNABLE_WAKE) and goes back to the fast rate, so
 * this interval bounds how much later than with 1 ms sampling kairosd hears of
 * work arriving after an idle spell (on average half of it). The trade-off: 20 ms
 * costs 50 wakeups a second instead of ~1000 (it divides the 100 ms report period,
 * so the reports add none: ~0.03 % of a core at the ~6 us a wakeup cost where
 * issue 23 measured, 0.12-0.27 % on the sandboxed 2-core build machine, where a
 * bare timed wait costs as much; bench_idle.c) and makes a wake up to 20 ms later
 * (10 on average); 10 ms would double the cost for 5 ms less on average. */
#define TC_SENSE_FAST_NS 1000000ull
#define TC_SENSE_IDLE_NS 20000000ull
/* Idle where no reporting GPU's policy has KAIROS_TIME_QUICK_WAKE (kairosd would
 * do nothing at once with the wake: natively or in the shares' slices nobody is
 * paused): once a report period (100 ms: 10 wakeups a second), the wake up to
 * that much later. */
#define TC_SENSE_REST_NS 100000000ull

/* A policy asked for reports: from now on munmaps of NVIDIA ranges synchronise
 * with the sampling. */
void tc_sense_start(void);
bool tc_sense_active(void);
/* Reads the channels' USERD addresses from the object tree again. */
void tc_sense_refresh(void);
/* One sample of every channel at now_ns. Runnable time is counted from the sample
 * before, except that a sample seeing work after one that saw none counts at most
 * TC_SENSE_FAST_NS of the gap (the work began somewhere in it; 1 ms sampling
 * counted one interval for a start too), so sparse idle samples never turn a
 * short burst into a long one. */
void tc_sense_sample(uint64_t now_ns);
/* True when every GPU of mask has had nothing queued or moving for at least
 * for_ns (the samples since now_ns - for_ns saw none): the sampler may slow down. */
bool tc_sense_quiet(uint32_t mask, uint64_t now_ns, uint64_t for_ns);
/* The report for gpu since the last one (false: nothing sampled yet); after it
 * was sent, tc_sense_reported starts the next interval. */
bool tc_sense_report(uint32_t gpu, uint64_t now_ns, struct kairos_runnable *out);
void tc_sense_reported(uint32_t gpu, uint64_t now_ns);
/* A wake for gpu (KAIROS_RUNNABLE_WAKE: the interval so far, which the next
 * report covers again) when the last report sent was idle (under 2 % runnable)
 * and the last sample saw work queued; false otherwise. tc_sense_woke once it
 * was sent: one wake per idle report. */
bool tc_sense_wake(uint32_t gpu, uint64_t now_ns, struct kairos_runnable *out);
void tc_sense_woke(uint32_t gpu);
/* An early idle report for gpu (KAIROS_RUNNABLE_IDLE: the interval so far, which
 * the next report covers again) when the last report was busy and no sample has
 * seen work queued for KAIROS_IDLE_EARLY_MS; false otherwise. tc_sense_idled once
 * it was sent: the next work seen is a wake. */
bool tc_sense_idle(uint32_t gpu, uint64_t now_ns, struct kairos_runnable *out);
void tc_sense_idled(uint32_t gpu);
/* timectl_reset; the forked child's handler. */
void tc_sense_reset(void);
void tc_sense_after_fork(void);

#endif /* KAIROS_SHIM_TC_SENSE_H */
