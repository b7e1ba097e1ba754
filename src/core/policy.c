/* policy.c - the one set of checks for compute policies, whatever their source
 * (configuration, TENANT_SET, state file); see policy.h. */
#include "core/policy.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/units.h"

static_assert(KAIROS_PRIO_NORMAL == (int)SCHED_PRIO_NORMAL &&
                  KAIROS_PRIO_LATENCY == (int)SCHED_PRIO_LATENCY &&
                  KAIROS_PRIO_BATCH == (int)SCHED_PRIO_BATCH,
              "the wire's priorities are the scheduler's");

static int refuse(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t why_len, const char *fmt, ...)
{
    if (why && why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

int policy_parse_percent(const char *what, const char *text, double *out, char *why,
                         size_t why_len)
{
    if (units_parse_percent(text, out, NULL, 0))
        return refuse(why, why_len,
                      "expected %s as a percentage from 0%% to 100%% (e.g. 40%%), found '%s'",
                      what, text);
    return 0;
}

int policy_parse_limit(const char *text, double *limit, char *why, size_t why_len)
{
    if (!strcmp(text, "none")) {
        *limit = 0;
        return 0;
    }
    if (policy_parse_percent("limit", text, limit, why, why_len))
        return -EINVAL;
    if (*limit <= 0)
        return refuse(why, why_len, "a limit of 0%% would never let the tenant run (write "
                                    "none for no limit)");
    return 0;
}

const char *sched_mode_name(enum sched_mode m)
{
    return m == SCHED_MODE_WINDOWS ? "windows" : m == SCHED_MODE_TIMESLICES ? "timeslices" : "auto";
}

bool sched_mode_parse(const char *name, enum sched_mode *out)
{
    for (enum sched_mode m = SCHED_MODE_AUTO; m <= SCHED_MODE_WINDOWS; m++)
        if (name && !strcmp(name, sched_mode_name(m))) {
            *out = m;
            return true;
        }
    return false;
}

const char *sched_prio_name(enum sched_prio p)
{
    return p == SCHED_PRIO_LATENCY ? "latency" : p == SCHED_PRIO_BATCH ? "batch" : "normal";
}

int policy_parse_priority(const char *text, enum sched_prio *prio, char *why, size_t why_len)
{
    if (!strcmp(text, "latency"))
        *prio = SCHED_PRIO_LATENCY;
    else if (!strcmp(text, "normal"))
        *prio = SCHED_PRIO_NORMAL;
    else if (!strcmp(text, "batch"))
        *prio = SCHED_PRIO_BATCH;
    else
        return refuse(why, why_len, "expected priority latency, normal or batch, found '%s'",
                      text);
    return 0;
}

int policy_check(const struct sched_policy *p, char *why, size_t why_len)
{
    if (!(p->share >= 0 && p->share <= 1))
        return refuse(why, why_len, "share %.7g%% is outside 0-100%%: give a share from 0%% "
                      "(best effort) to 100%%", p->share * 100);
    if (!(p->limit >= 0 && p->limit <= 1))
        return refuse(why, why_len, "limit %.7g%% is outside 0-100%%: give a limit from 0%% to "
                      "100%%, or none", p->limit * 100);
    if ((unsigned)p->prio > SCHED_PRIO_BATCH)
        return refuse(why, why_len, "priority %u is unknown: give 0 (normal), 1 (latency) or "
                      "2 (batch)", (unsigned)p->prio);
    if (p->limit > 0 && p->limit < p->share)
        return refuse(why, why_len, "share %.7g%% is above the limit %.7g%%: a tenant cannot be "
                      "guaranteed more than its cap (lower the share or raise the limit)",
                      p->share * 100, p->limit * 100);
    return 0;
}

int policy_from_ppm(uint32_t share_ppm, uint32_t limit_ppm, unsigned prio,
                    struct sched_policy *out, char *why, size_t why_len)
{
    if (prio > KAIROS_PRIO_BATCH)
        return refuse(why, why_len, "priority %u is unknown: give 0 (normal), 1 (latency) or "
                      "2 (batch)", prio);
    struct sched_policy p = {.share = (double)share_ppm / KAIROS_PPM,
                             .limit = (double)limit_ppm / KAIROS_PPM,
                             .prio = (enum sched_prio)prio};
    if (policy_check(&p, why, why_len))
        return -EINVAL;
    *out = p;
    return 0;
}

bool policy_equal(const struct sched_policy *a, const struct sched_policy *b)
{
    return a->share == b->share && a->limit == b->limit && a->prio == b->prio;
}

uint32_t policy_ppm(double fraction)
{
    return (uint32_t)lround(fraction * KAIROS_PPM);
}

void policy_to_wire(const struct sched_policy *p, struct kairos_compute *out)
{
    memset(out, 0, sizeof *out);
    out->share_ppm = policy_ppm(p->share);
    out->limit_ppm = policy_ppm(p->limit);
    out->priority = (uint8_t)p->prio;
    out->flags = KAIROS_COMPUTE_SET;
}

const char *policy_describe(const struct sched_policy *p, char *buf, size_t cap)
{
    char limit[32] = "no limit";
    if (p->limit > 0)
        snprintf(limit, sizeof limit, "limit %.7g%%", p->limit * 100);
    snprintf(buf, cap, "share %.7g%%, %s, %s", p->share * 100, limit, sched_prio_name(p->prio));
    return buf;
}

int policy_shares_add(struct policy_shares *s, const char *tenant, unsigned gpu, double share)
{
    if (share <= 0)
        return 0;
    struct policy_share *grown = grow_for_one(s->v, &s->cap, s->n, sizeof *grown, 16);
    if (!grown)
        return -ENOMEM;
    s->v = grown;
    s->v[s->n++] = (struct policy_share){.tenant = tenant, .gpu = gpu, .share = share};
    return 0;
}

int policy_shares_check(const struct policy_shares *s, char *why, size_t why_len)
{
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        double sum = 0;
        char who[256] = "";
        size_t used = 0;
        for (size_t i = 0; i < s->n; i++) {
            if (s->v[i].gpu != g)
                continue;
            sum += s->v[i].share;
            int w = snprintf(who + used, sizeof who - used, "%s%s %.7g%%", used ? ", " : "",
                             s->v[i].tenant, s->v[i].share * 100);
            if (w > 0 && (size_t)w < sizeof who - used)
                used += (size_t)w;
        }
        if (sum > 1.0 + 1e-9)
            return refuse(why, why_len, "compute shares on GPU %u add up to %.7g%% (%s): at most "
                          "100%% can be guaranteed", g, sum * 100, who);
    }
    return 0;
}

void policy_shares_free(struct policy_shares *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}
