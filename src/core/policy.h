/* policy.h - compute policies (share, limit, priority; docs/scheduler.md): the type
 * and its checks, in the core because kairosd and the CLI both need them (kairos run
 * --share/--limit/--priority refuses what kairosd would refuse, without linking
 * daemon code). kairosd takes policies from three sources: the configuration
 * (config.c), an administrator's TENANT_SET (proto_check.c, tenants.c) and the state
 * file (state.c). One set of checks for all of them, so that a policy refused in one
 * is refused in the others with the same words: the text operators write, the range
 * and consistency of a policy, its parts-per-million form on the wire, and the rule
 * that the shares of one GPU's tenants add up to at most 100 %. Also the node's
 * time-share settings as values (enum sched_mode, the latency yield's bounds), which
 * kairosd's configuration reads and its scheduler applies.
 *
 * Pure: no I/O, no globals. Thread rules: no shared state.
 */
#ifndef KAIROS_CORE_POLICY_H
#define KAIROS_CORE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A tenant's priority on a GPU (docs/scheduler.md). */
enum sched_prio { SCHED_PRIO_NORMAL = 0, SCHED_PRIO_LATENCY, SCHED_PRIO_BATCH };

/* share: guaranteed fraction when others compete (0 = best effort);
 * limit: a cap held even on an idle GPU (0 = none). Both in [0, 1]. */
struct sched_policy {
    double share;
    double limit;
    enum sched_prio prio;
};

#include "kairos/proto.h"

/* The node's time-share settings (kairosd.conf time_mode and latency_yield_us), read
 * by the configuration and applied by the scheduler (daemon/time/sched.h): plain
 * values, here so that the configuration needs nothing of the scheduler. */
/* How shares are enforced when tenants compete:
 *   AUTO        do no harm (docs/scheduler.md, "The rule"): the driver's own
 *               timeslices and no pause while nobody is short of its share; when a
 *               tenant that waited stays below its target, timeslices in the ratio
 *               of the shares; when it stays short under those, strict windows;
 *               after a hold, the native state is tried again (needs runnable time:
 *               the simulator, or the shims' RUNNABLE reports on a GPU);
 *   TIMESLICES  timeslices only (limits still get their windows);
 *   WINDOWS     strict clock-aligned windows whenever two or more tenants that
 *               are not latency tenants are active; a latency tenant is never
 *               paused for the others (it must run when its requests come; only
 *               a limit of its own gives it a window) and runs over the
 *               others' windows with its long timeslice. Without runnable time
 *               (NVML) "active" is "has a live process". */
enum sched_mode { SCHED_MODE_AUTO = 0, SCHED_MODE_TIMESLICES, SCHED_MODE_WINDOWS };
const char *sched_mode_name(enum sched_mode m);
/* "auto", "timeslices" or "windows" (sched_mode_name's words) into *out; false
 * for anything else (NULL included). */
bool sched_mode_parse(const char *name, enum sched_mode *out);
#define SCHED_YIELD_US 50u       /* default slice of the others beside a latency tenant
                                  * (sched_set_yield; docs/scheduler.md, the H200) */
#define SCHED_YIELD_MIN_US 20u   /* latency_yield_us is 0 (no rule) or within these; */
#define SCHED_YIELD_MAX_US 1000u /* the most is the scheduler's SCHED_TS_UNIT_US */

/* Text as operators write it (kairosd.yaml, kairos run). what names the value in
 * the message ("share"). 0, or -EINVAL with what was expected in why. */
int policy_parse_percent(const char *what, const char *text, double *out, char *why,
                         size_t why_len);
/* A percentage above 0, or "none" (0: no limit). */
int policy_parse_limit(const char *text, double *limit, char *why, size_t why_len);
/* latency, normal or batch. */
const char *sched_prio_name(enum sched_prio p);
int policy_parse_priority(const char *text, enum sched_prio *prio, char *why, size_t why_len);

/* A whole policy: share and limit within 0-100 %, a known priority, a share not above
 * the limit. 0, or -EINVAL with what is wrong and what to do in why. */
int policy_check(const struct sched_policy *p, char *why, size_t why_len);

/* From parts per million and a KAIROS_PRIO_* (the wire, the state file), checked as
 * policy_check does. 0 or -EINVAL (why). */
int policy_from_ppm(uint32_t share_ppm, uint32_t limit_ppm, unsigned prio,
                    struct sched_policy *out, char *why, size_t why_len);
/* Field by field (struct padding never compared). */
bool policy_equal(const struct sched_policy *a, const struct sched_policy *b);
/* p (checked) as a KAIROS_COMPUTE_SET entry. */
void policy_to_wire(const struct sched_policy *p, struct kairos_compute *out);
/* A fraction in [0, 1] in parts per million, rounded. */
uint32_t policy_ppm(double fraction);
/* "share 30%, limit 50%, latency" into buf. */
const char *policy_describe(const struct sched_policy *p, char *buf, size_t cap);

/* The shares of a node's tenants, gathered from wherever they are declared, to
 * check that those of one GPU add up to at most 100 %. Names are not copied: they
 * must outlive the list. Shares of 0 (best effort) are not kept. */
struct policy_share {
    const char *tenant;
    unsigned gpu;
    double share;
};
struct policy_shares {
    struct policy_share *v;
    size_t n, cap;
};
/* 0 or -ENOMEM. */
int policy_shares_add(struct policy_shares *s, const char *tenant, unsigned gpu, double share);
/* 0, or -EINVAL with "compute shares on GPU G add up to S% (a 70%, b 40%): at most
 * 100% can be guaranteed" in why (the first GPU over, tenants in the order added). */
int policy_shares_check(const struct policy_shares *s, char *why, size_t why_len);
void policy_shares_free(struct policy_shares *s);

#endif /* KAIROS_CORE_POLICY_H */
