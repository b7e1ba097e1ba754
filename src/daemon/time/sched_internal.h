/* sched_internal.h - what the two files of one GPU's scheduler share, and nothing
 * else includes: sched.c (the API, targets, timeslices, windows and the plan) and
 * sched_ladder.c (AUTO's ladder: who is short, the level, the slices' trims, the
 * levels coupled across GPUs). Declarations only, the structs being sched.h's, so
 * that neither file's module includes the other's.
 *
 * Thread rules: as sched.h's.
 */
#ifndef KAIROS_DAEMON_SCHED_INTERNAL_H
#define KAIROS_DAEMON_SCHED_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

struct sched_gpu;
struct sched_tenant;
struct sched_usage;

/* sched.c: whether t takes a window of its own when the GPU is in windows. */
bool sched_in_windows(const struct sched_gpu *g, const struct sched_tenant *t);
/* sched.c: whether two or more active tenants take windows. */
bool sched_windows_possible(const struct sched_gpu *g);
/* sched.c: whether the GPU has a latency tenant. */
bool sched_latency_present(const struct sched_gpu *g);
/* sched.c: what the tenant ran in the period, as far as it can be told. */
uint64_t sched_ran_us(const struct sched_gpu *g, const struct sched_usage *u);

/* sched_ladder.c: the active set changed: the level back to the mode's floor (or
 * to the one it needed lately), the misses, debts and trims forgotten. */
void sched_reset_mode(struct sched_gpu *g);
/* sched_ladder.c: a new mode or policy: sched_reset_mode, the levels needed before
 * forgotten too. */
void sched_forget_levels(struct sched_gpu *g);
/* sched_ladder.c: one period's judgement after the targets (sched_tick). */
void sched_judge(struct sched_gpu *g, const struct sched_usage use[], double busy);

#endif /* KAIROS_DAEMON_SCHED_INTERNAL_H */
