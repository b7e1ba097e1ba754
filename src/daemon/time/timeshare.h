/* timeshare.h - kairosd's compute isolation: one scheduler (sched.c) per GPU fed
 * every 100 ms (timerfd) with the per-process utilization of the GPU backend summed
 * per tenant, the tenants' compute policies (from the registry, registry.h, whether
 * the configuration or run time set them), and the TIME_POLICY decisions
 * handed to a sender (the server sends them to each member process); what each
 * tenant got and what held it back, for kairos ps and the metrics (time_stats.c).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_TIMESHARE_H
#define KAIROS_DAEMON_TIMESHARE_H

#include <stdbool.h>

#include "daemon/config/config.h"
#include "daemon/gpu/gpu.h"
#include "daemon/base/loop.h"
#include "daemon/tenants/tenants.h"
#include "kairos/proto.h"

struct timeshare;

/* Sends p to every member process of tenant (on p->gpu). */
typedef void (*timeshare_send_fn)(void *ctx, const char *tenant,
                                  const struct kairos_time_policy *p);

/* gpu may be NULL (no backend: policies are sent, never corrected). cfg (its
 * time_mode) is read at timeshare_reconfigure. */
int timeshare_init(struct timeshare **out, struct loop *loop, struct gpu_backend *gpu,
                   struct tenants *ts, const struct config *cfg, timeshare_send_fn send,
                   void *ctx);
void timeshare_fini(struct timeshare *t);
/* Takes the compute policies again, the configuration's and the run-time
 * tenants' (at start, after a reload, after a TENANT_SET or TENANT_DEL that
 * changed them, after an ephemeral tenant went away), and sends the decisions that
 * changed. */
void timeshare_reconfigure(struct timeshare *t);
/* One period now (the timer calls it; tests may too). */
void timeshare_tick(struct timeshare *t);
/* A member process (pid) of tenant reported its runnable time (KAIROS_MSG_RUNNABLE,
 * asked for by KAIROS_TIME_REPORT in every policy sent): the next tick takes the
 * tenant's as its demand when all its members reported (docs/scheduler.md). One
 * flagged KAIROS_RUNNABLE_WAKE is no report: a tenant the scheduler had idle is
 * planned in at once (sched_wake) and the changed decisions sent; reports that
 * show a whole idle interval of every member of an active tenant lend its
 * window at once (sched_idle_now). */
void timeshare_runnable(struct timeshare *t, const char *tenant, uint32_t pid,
                        const struct kairos_runnable *r);
/* The policy in force for tenant on gpu; false when it has none. */
bool timeshare_policy(const struct timeshare *t, const char *tenant, unsigned gpu,
                      struct kairos_time_policy *out);
/* Fills p's compute figures (compute_flags, shares, priority, window, pauses, the
 * holds) for tenant on GPUs [0, n_gpus) where it has a policy; leaves the others as they are
 * (0: no policy). t may be NULL. */
void timeshare_ps(const struct timeshare *t, const char *tenant, unsigned n_gpus,
                  struct kairos_ps_reply *p);

#endif /* KAIROS_DAEMON_TIMESHARE_H */
