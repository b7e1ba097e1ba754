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

/* A policy asked for reports: from now on munmaps of NVIDIA ranges synchronise
 * with the sampling. */
void tc_sense_start(void);
bool tc_sense_active(void);
/* Reads the channels' USERD addresses from the object tree again. */
void tc_sense_refresh(void);
/* One sample of every channel at now_ns. */
void tc_sense_sample(uint64_t now_ns);
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
