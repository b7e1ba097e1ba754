/* timectl.h - time control of the process's GPU work: timeslices, pause/resume.
 *
 * The daemon owns the policy (include/kairos/proto.h, TIME_POLICY, pushed on the
 * agent's connection); the shim owns the mechanism, applied with CUDA's own
 * handles on the /dev/nvidiactl file each client lives on (the driver accepts a
 * client's handles on no other file), through the real-function table, so the
 * controls are neither traced nor guarded again:
 *
 *   - timeslice: NVA06C SET_TIMESLICE on every channel group (0xA06C) of the
 *     process on the policy's GPU, and on every group created later (hooked
 *     after the object tree applied the RM_ALLOC); 0: the application's own,
 *     given back to each group where Kairos had set others (tc_pause.c);
 *   - pause: NV2080 FIFO_DISABLE_CHANNELS {bDisable=1, bOnlyDisableScheduling=0,
 *     bRewindGpPut=0} on the client's subdevice with all the process's channels
 *     on that GPU (64 per call); resume: the same with bDisable=0. A channel
 *     created while paused is disabled at once. Doorbells are left alone: no page
 *     protection, no signal handler (tc_pause.c says what was measured);
 *   - a control thread that applies timeslice changes at once and follows the
 *     strict windows (period, phase, duty from epoch_ns on CLOCK_MONOTONIC),
 *     waking at each window edge on an absolute CLOCK_MONOTONIC deadline.
 *
 *   - with KAIROS_TIME_REPORT in the policy, the runnable sensor: the control
 *     thread samples the channels' USERD (queued work) and reports RUNNABLE.
 *
 * Split by responsibility: tc_pause.c the channel pause and the timeslices,
 * tc_sense.c the runnable sensor, timectl.c the policy link and the control
 * thread (each says its thread and signal rules).
 *
 * Thread rules: thread-safe. Never called with the state lock held; takes it only
 * around object-tree lookups, never across a real ioctl. The policy handler runs
 * under the agent's mutex and only stores the policy and wakes the thread. A
 * forked child starts with no policy, nothing paused and no thread.
 */
#ifndef KAIROS_SHIM_TIMECTL_H
#define KAIROS_SHIM_TIMECTL_H

#include <stdbool.h>
#include <stdint.h>

#include "kairos/proto.h"
#include "shim/real.h"

/* Registers the policy handler with the agent (call once, at load). */
void timectl_init(void);

/* The real-function table controls are issued through (the dispatch's). */
void timectl_set_real(const struct shim_real *r);

/* A policy from the daemon (the agent's handler; tests call it directly). Ignores
 * one older than the last for its GPU. Starts the control thread on first use. */
void timectl_policy(const struct kairos_time_policy *p);

/* True once any policy arrived (the dispatch hooks cost nothing before). */
bool timectl_active(void);

/* After the object tree applied a successful RM_ALLOC of a channel group or a
 * channel: sets the current timeslice / disables it while paused. */
void timectl_after_alloc(uint32_t h_client, uint32_t h_object, uint32_t h_class);

/* The application set a channel group's timeslice itself, us as the driver
 * accepted it (CUDA does, right after creating one: 2048 us for the first, 1024 us
 * for the others): recorded on the group, policy or not (a policy's timeslice of
 * 0 gives it back); with a policy's non-zero timeslice in force, the policy's is
 * set back, so that a tenant cannot raise its own. */
void timectl_after_app_timeslice(uint32_t h_client, uint32_t h_tsg, uint64_t us);


/* Around the real munmap (or MAP_FIXED mmap) of [addr, addr+len) and the object
 * tree's update after it: while the runnable sensor runs, a range that may hold a
 * USERD page it samples is taken out of its table first and not sampled until
 * the tree forgot it (tc_sense.c). begin returns whether end must release. */
bool timectl_unmap_begin(uint64_t addr, uint64_t len);
void timectl_unmap_end(bool held);

/* The mechanism alone (the control thread's; tests). 0 or -errno. */
int timectl_pause(uint32_t gpu);
int timectl_resume(uint32_t gpu);
bool timectl_is_paused(uint32_t gpu);

/* Whether strict windows want gpu paused at now_ns, and when that changes next
 * (*next_ns; UINT64_MAX: never). Pure; exposed for tests. */
bool timectl_window_paused(const struct kairos_time_policy *p, uint64_t now_ns,
                           uint64_t *next_ns);

struct timectl_stats {
    uint64_t pauses, resumes;     /* transitions made */
    uint64_t controls_failed;     /* controls the driver refused (or ioctl errors) */
    uint64_t timeslices_overridden;    /* the application's own timeslices set back */
    uint64_t timeslices_restored;      /* channel groups given their own back (policy 0) */
    uint64_t pause_ns, pause_max_ns;   /* time in the driver calls of all pauses, longest */
    uint64_t resume_ns, resume_max_ns; /* the same for resumes */
    uint64_t turns;        /* the control thread's wakeups (returns from its wait) */
    uint64_t samples;      /* runnable sensor samples taken */
    uint64_t sample_ns;    /* time in them (and in re-reading the channel table): the
                            * sensor's own CPU cost in this process */
    uint64_t reports;      /* regular RUNNABLE reports made (once a period per GPU) */
    uint64_t wake_reports; /* KAIROS_RUNNABLE_WAKE reports made */
};
void timectl_stats(struct timectl_stats *s);

/* Tests: stops the control thread, resumes everything, forgets the policies. */
void timectl_reset(void);

#endif /* KAIROS_SHIM_TIMECTL_H */
