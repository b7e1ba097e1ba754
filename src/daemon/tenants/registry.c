/* registry.c - a tenant's settings with their sources, the precedence of the
 * configuration over run time, and what of them the state file keeps (see registry.h). */
#include "daemon/tenants/registry.h"

#include <stdio.h>
#include <string.h>

#include "core/units.h"
#include "daemon/config/config.h"
#include "daemon/memory/ledger.h"
#include "daemon/base/log.h"

const char *setting_source_name(enum setting_source s)
{
    switch (s) {
    case SETTING_CONFIG:
        return "configuration";
    case SETTING_RUNTIME:
        return "run time";
    case SETTING_UNSET:
        break;
    }
    return "unset";
}

int registry_set_quota(struct ledger *l, struct ledger_tenant *t, unsigned gpu, uint64_t bytes,
                       enum setting_source s)
{
    int rc = ledger_tenant_set_quota(l, t, gpu, bytes);
    if (rc >= 0)
        t->src.quota[gpu] = (uint8_t)s;
    return rc;
}

int registry_set_compute(struct compute_book *b, struct ledger_tenant *t, unsigned gpu,
                         const struct sched_policy *pol, enum setting_source s)
{
    int rc = compute_book_set(b, t->id, gpu, pol);
    if (!rc)
        t->src.compute[gpu] = (uint8_t)(pol ? s : SETTING_UNSET);
    return rc;
}

void registry_set_members(struct ledger_tenant *t, const struct member_rules *r,
                          enum setting_source s)
{
    if (r)
        t->members = *r;
    else
        memset(&t->members, 0, sizeof t->members);
    t->src.members = (uint8_t)s;
}

void registry_set_managed(struct ledger_tenant *t, bool charge, enum setting_source s)
{
    t->managed_charge = charge;
    t->src.managed = (uint8_t)s;
}

bool registry_policy(const struct compute_book *b, const struct ledger_tenant *t, unsigned gpu,
                     struct sched_policy *out)
{
    return t && compute_book_policy(b, t->id, gpu, out);
}

bool registry_has_runtime(const struct ledger_tenant *t, unsigned n_gpus)
{
    if (t->src.members == SETTING_RUNTIME || t->src.managed == SETTING_RUNTIME ||
        t->src.fault_domain == SETTING_RUNTIME)
        return true;
    for (unsigned g = 0; g < n_gpus && g < KAIROS_MAX_GPUS; g++)
        if (t->src.quota[g] == SETTING_RUNTIME || t->src.compute[g] == SETTING_RUNTIME)
            return true;
    return false;
}

/* The configuration's compute policies for ct: all of them, on every GPU. A run-time
 * policy gives way (logged once for the tenant). */
static void apply_compute(struct compute_book *b, struct ledger_tenant *t,
                          const struct config_tenant *ct)
{
    bool dropped = false;
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        const struct sched_policy *pol = NULL;
        for (size_t j = 0; j < ct->n_compute; j++)
            if (ct->compute[j].gpu == g)
                pol = &ct->compute[j].pol;
        dropped |= t->src.compute[g] == SETTING_RUNTIME;
        if (registry_set_compute(b, t, g, pol, SETTING_CONFIG))
            log_error("tenant %s: out of memory: its compute policy on GPU %u is not taken",
                      t->name, g);
    }
    if (dropped)
        log_warn("tenant %s: its compute policies set at run time are dropped: it is now "
                 "declared in the configuration, whose compute policy it follows", t->name);
}

static void apply_members(struct ledger_tenant *t, const struct config_tenant *ct)
{
    if (t->src.members == SETTING_RUNTIME && !members_rules_empty(&t->members)) {
        char was[200];
        members_rules_describe(&t->members, was, sizeof was);
        log_warn("tenant %s: its members rules set at run time (%s) give way to the "
                 "configuration's", t->name, was);
    }
    registry_set_members(t, &ct->members, SETTING_CONFIG); /* none: admissions only */
}

void registry_apply_config(struct ledger *l, struct compute_book *cb, struct ledger_tenant *t,
                           const struct config_tenant *ct, const uint64_t *quota,
                           const bool *declared)
{
    for (unsigned g = 0; g < l->n_gpus; g++) {
        char a[32], b[32];
        enum setting_source was = t->src.quota[g];
        if (declared[g]) {
            if (was == SETTING_RUNTIME && t->quota[g] != quota[g])
                log_info("tenant %s: quota on GPU %u set at run time (%s) replaced by the "
                         "configuration's (%s)", t->name, g,
                         units_format_size(t->quota[g], a, sizeof a),
                         units_format_size(quota[g], b, sizeof b));
            registry_set_quota(l, t, g, quota[g], SETTING_CONFIG);
        } else if (was == SETTING_CONFIG) {
            registry_set_quota(l, t, g, 0, SETTING_UNSET);
        } else if (was == SETTING_RUNTIME && t->quota[g]) {
            log_info("tenant %s: quota on GPU %u set at run time (%s) kept: the configuration "
                     "declares none there", t->name, g,
                     units_format_size(t->quota[g], a, sizeof a));
        }
    }
    apply_compute(cb, t, ct);
    apply_members(t, ct);
    /* managed: every configured tenant declares it (absent: refuse) */
    if (t->src.managed == SETTING_RUNTIME && t->managed_charge != ct->managed_charge)
        log_info("tenant %s: managed memory set at run time (%s) replaced by the "
                 "configuration's (%s)", t->name, t->managed_charge ? "charge" : "refuse",
                 ct->managed_charge ? "charge" : "refuse");
    registry_set_managed(t, ct->managed_charge, SETTING_CONFIG);
    if (strcmp(t->fault_domain, ct->fault_domain))
        log_info("tenant %s: fault domain %s (was %s%s); processes started from now on use it",
                 t->name, ct->fault_domain[0] ? ct->fault_domain : "none",
                 t->fault_domain[0] ? t->fault_domain : "none",
                 t->src.fault_domain == SETTING_RUNTIME ? ", set at run time: the "
                                                          "configuration's replaces it" : "");
    registry_set_fault_domain(t, ct->fault_domain, SETTING_CONFIG);
}

void registry_set_fault_domain(struct ledger_tenant *t, const char *domain,
                               enum setting_source s)
{
    bool none = !domain || !domain[0];
    snprintf(t->fault_domain, sizeof t->fault_domain, "%s", none ? "" : domain);
    t->src.fault_domain = (uint8_t)(none ? SETTING_UNSET : s);
}

void registry_undeclared(struct compute_book *b, struct ledger_tenant *t)
{
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        if (t->src.quota[g] == SETTING_CONFIG)
            t->src.quota[g] = SETTING_RUNTIME;
        if (t->src.compute[g] == SETTING_CONFIG)
            registry_set_compute(b, t, g, NULL, SETTING_UNSET);
    }
    if (t->src.members == SETTING_CONFIG)
        t->src.members = SETTING_RUNTIME;
    if (t->src.managed == SETTING_CONFIG)
        t->src.managed = SETTING_RUNTIME;
    if (t->src.fault_domain == SETTING_CONFIG)
        registry_set_fault_domain(t, NULL, SETTING_UNSET);
}

/* The run-time settings of t, for a save (struct state_settings_io.get). */
static bool state_get(void *ctx, const struct ledger *l, const struct ledger_tenant *t,
                      struct state_settings *out)
{
    const struct compute_book *b = ctx;
    bool configured = t->flags & LEDGER_TENANT_CONFIG;
    if (configured && !registry_has_runtime(t, l->n_gpus))
        return false;
    for (unsigned g = 0; g < l->n_gpus && g < KAIROS_MAX_GPUS; g++) {
        out->has_quota[g] = !configured || t->src.quota[g] == SETTING_RUNTIME;
        out->quota[g] = t->quota[g];
        out->has_compute[g] = t->src.compute[g] != SETTING_CONFIG &&
                              compute_book_policy(b, t->id, g, &out->compute[g]);
    }
    out->has_members = t->src.members != SETTING_CONFIG && !members_rules_empty(&t->members);
    out->members = t->members;
    out->managed_charge = t->managed_charge && t->src.managed != SETTING_CONFIG;
    if (t->src.fault_domain == SETTING_RUNTIME)
        snprintf(out->fault_domain, sizeof out->fault_domain, "%s", t->fault_domain);
    out->owner_pid = t->owner_pid;
    return true;
}

/* What a load found for t, set at run time (struct state_settings_io.put). */
static void state_put(void *ctx, struct ledger *l, struct ledger_tenant *t,
                      const struct state_settings *s)
{
    struct compute_book *b = ctx;
    for (unsigned g = 0; g < l->n_gpus && g < KAIROS_MAX_GPUS; g++)
        if (s->has_quota[g] && t->src.quota[g] != SETTING_CONFIG)
            registry_set_quota(l, t, g, s->quota[g], SETTING_RUNTIME);
    if (t->flags & LEDGER_TENANT_CONFIG)
        return; /* the rest is the configuration's */
    if (s->owner_pid)
        t->owner_pid = s->owner_pid; /* the server checks whether it lives */
    for (unsigned g = 0; g < l->n_gpus && g < KAIROS_MAX_GPUS; g++)
        if (s->has_compute[g] && registry_set_compute(b, t, g, &s->compute[g], SETTING_RUNTIME))
            log_error("tenant %s: out of memory: its compute policy on GPU %u is not restored",
                      t->name, g);
    if (s->has_members)
        registry_set_members(t, &s->members, SETTING_RUNTIME);
    if (s->managed_charge)
        registry_set_managed(t, true, SETTING_RUNTIME);
    if (s->fault_domain[0])
        registry_set_fault_domain(t, s->fault_domain, SETTING_RUNTIME);
}

struct state_settings_io registry_state_io(struct compute_book *b)
{
    return (struct state_settings_io){.get = state_get, .put = state_put, .ctx = b};
}
