/* registry.c - a tenant's settings with their sources, the precedence of the
 * configuration over run time, and what of them the state file keeps (see registry.h). */
#include "daemon/tenants/registry.h"

#include <stdio.h>
#include <string.h>

#include <errno.h>

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

/* t's record in sb, made when it has none; NULL (logged, *rc set) when it cannot be. */
static struct tenant_settings *record(struct settings_book *sb, const struct ledger_tenant *t,
                                      int *rc)
{
    struct tenant_settings *r;
    *rc = settings_book_get(sb, t->id, &r);
    if (*rc)
        log_error("tenant %s: %s: its settings are not changed", t->name,
                  *rc == -ENOSPC ? "too many tenants" : "out of memory");
    return r;
}

int registry_set_quota(struct ledger *l, struct settings_book *sb, struct ledger_tenant *t,
                       unsigned gpu, uint64_t bytes, enum setting_source s)
{
    if (gpu >= l->n_gpus)
        return -EINVAL;
    int rc;
    struct tenant_settings *r = record(sb, t, &rc);
    if (!r)
        return rc;
    rc = ledger_tenant_set_quota(l, t, gpu, bytes);
    if (rc >= 0)
        r->src.quota[gpu] = (uint8_t)s;
    return rc;
}

int registry_set_compute(struct compute_book *b, struct settings_book *sb,
                         struct ledger_tenant *t, unsigned gpu, const struct sched_policy *pol,
                         enum setting_source s)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return -EINVAL;
    int rc = 0;
    struct tenant_settings *r = pol ? record(sb, t, &rc) : settings_book_entry(sb, t->id);
    if (rc)
        return rc;
    rc = compute_book_set(b, t->id, gpu, pol);
    if (!rc && r)
        r->src.compute[gpu] = (uint8_t)(pol ? s : SETTING_UNSET);
    return rc;
}

int registry_set_members(struct settings_book *sb, struct ledger_tenant *t,
                         const struct member_rules *r, enum setting_source s)
{
    int rc;
    struct tenant_settings *rec = record(sb, t, &rc);
    if (!rec)
        return rc;
    if (r)
        rec->members = *r;
    else
        memset(&rec->members, 0, sizeof rec->members);
    rec->src.members = (uint8_t)s;
    return 0;
}

int registry_set_managed(struct settings_book *sb, struct ledger_tenant *t, bool charge,
                         enum setting_source s)
{
    int rc;
    struct tenant_settings *r = record(sb, t, &rc);
    if (!r)
        return rc;
    r->managed_charge = charge;
    r->src.managed = (uint8_t)s;
    return 0;
}

int registry_set_owner(struct settings_book *sb, struct ledger_tenant *t, uint32_t pid,
                       bool alive)
{
    int rc;
    struct tenant_settings *r = record(sb, t, &rc);
    if (!r)
        return rc;
    r->owner_pid = pid;
    r->owner_alive = alive;
    return 0;
}

bool registry_policy(const struct compute_book *b, const struct ledger_tenant *t, unsigned gpu,
                     struct sched_policy *out)
{
    return t && compute_book_policy(b, t->id, gpu, out);
}

bool registry_has_runtime(const struct settings_book *sb, const struct ledger_tenant *t,
                          unsigned n_gpus)
{
    const struct tenant_settings *r = settings_book_of(sb, t->id);
    if (r->src.members == SETTING_RUNTIME || r->src.managed == SETTING_RUNTIME ||
        r->src.fault_domain == SETTING_RUNTIME)
        return true;
    for (unsigned g = 0; g < n_gpus && g < KAIROS_MAX_GPUS; g++)
        if (r->src.quota[g] == SETTING_RUNTIME || r->src.compute[g] == SETTING_RUNTIME)
            return true;
    return false;
}

/* The configuration's compute policies for ct: all of them, on every GPU. A run-time
 * policy gives way (logged once for the tenant). */
static void apply_compute(struct compute_book *b, struct settings_book *sb,
                          struct ledger_tenant *t, const struct config_tenant *ct)
{
    bool dropped = false;
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        const struct sched_policy *pol = NULL;
        for (size_t j = 0; j < ct->n_compute; j++)
            if (ct->compute[j].gpu == g)
                pol = &ct->compute[j].pol;
        dropped |= settings_book_of(sb, t->id)->src.compute[g] == SETTING_RUNTIME;
        if (registry_set_compute(b, sb, t, g, pol, SETTING_CONFIG))
            log_error("tenant %s: out of memory: its compute policy on GPU %u is not taken",
                      t->name, g);
    }
    if (dropped)
        log_warn("tenant %s: its compute policies set at run time are dropped: it is now "
                 "declared in the configuration, whose compute policy it follows", t->name);
}

static void apply_members(struct settings_book *sb, struct ledger_tenant *t,
                          const struct config_tenant *ct)
{
    const struct tenant_settings *r = settings_book_of(sb, t->id);
    if (r->src.members == SETTING_RUNTIME && !members_rules_empty(&r->members)) {
        char was[200];
        members_rules_describe(&r->members, was, sizeof was);
        log_warn("tenant %s: its members rules set at run time (%s) give way to the "
                 "configuration's", t->name, was);
    }
    registry_set_members(sb, t, &ct->members, SETTING_CONFIG); /* none: admissions only */
}

/* managed: every configured tenant declares it (absent: refuse) */
static void apply_managed(struct settings_book *sb, struct ledger_tenant *t,
                          const struct config_tenant *ct)
{
    const struct tenant_settings *r = settings_book_of(sb, t->id);
    if (r->src.managed == SETTING_RUNTIME && r->managed_charge != ct->managed_charge)
        log_info("tenant %s: managed memory set at run time (%s) replaced by the "
                 "configuration's (%s)", t->name, r->managed_charge ? "charge" : "refuse",
                 ct->managed_charge ? "charge" : "refuse");
    registry_set_managed(sb, t, ct->managed_charge, SETTING_CONFIG);
}

static void apply_fault_domain(struct settings_book *sb, struct ledger_tenant *t,
                               const struct config_tenant *ct)
{
    const struct tenant_settings *r = settings_book_of(sb, t->id);
    if (strcmp(r->fault_domain, ct->fault_domain))
        log_info("tenant %s: fault domain %s (was %s%s); processes started from now on use it",
                 t->name, ct->fault_domain[0] ? ct->fault_domain : "none",
                 r->fault_domain[0] ? r->fault_domain : "none",
                 r->src.fault_domain == SETTING_RUNTIME ? ", set at run time: the "
                                                          "configuration's replaces it" : "");
    registry_set_fault_domain(sb, t, ct->fault_domain, SETTING_CONFIG);
}

/* sms: comes from the configuration only, with the fault domain it needs (config.c) */
static void apply_sms(struct settings_book *sb, struct ledger_tenant *t,
                      const struct config_tenant *ct)
{
    unsigned was = settings_book_of(sb, t->id)->sms_pct;
    if (was != ct->sms_pct)
        log_info("tenant %s: its MPS clients may use %u %% of the SMs (was %u %%); processes "
                 "started from now on get it", t->name, ct->sms_pct ? ct->sms_pct : 100,
                 was ? was : 100);
    int rc = 0;
    struct tenant_settings *r = ct->sms_pct ? record(sb, t, &rc) : settings_book_entry(sb, t->id);
    if (r)
        r->sms_pct = (uint8_t)ct->sms_pct;
    else if (rc)
        log_error("tenant %s: out of memory: its sms: is not taken", t->name);
}

void registry_apply_config(struct ledger *l, struct compute_book *cb, struct settings_book *sb,
                           struct ledger_tenant *t, const struct config_tenant *ct,
                           const uint64_t *quota, const bool *declared)
{
    for (unsigned g = 0; g < l->n_gpus; g++) {
        char a[32], b[32];
        enum setting_source was = settings_book_of(sb, t->id)->src.quota[g];
        if (declared[g]) {
            if (was == SETTING_RUNTIME && t->quota[g] != quota[g])
                log_info("tenant %s: quota on GPU %u set at run time (%s) replaced by the "
                         "configuration's (%s)", t->name, g,
                         units_format_size(t->quota[g], a, sizeof a),
                         units_format_size(quota[g], b, sizeof b));
            registry_set_quota(l, sb, t, g, quota[g], SETTING_CONFIG);
        } else if (was == SETTING_CONFIG) {
            registry_set_quota(l, sb, t, g, 0, SETTING_UNSET);
        } else if (was == SETTING_RUNTIME && t->quota[g]) {
            log_info("tenant %s: quota on GPU %u set at run time (%s) kept: the configuration "
                     "declares none there", t->name, g,
                     units_format_size(t->quota[g], a, sizeof a));
        }
    }
    apply_compute(cb, sb, t, ct);
    apply_members(sb, t, ct);
    apply_managed(sb, t, ct);
    apply_fault_domain(sb, t, ct);
    apply_sms(sb, t, ct);
}

int registry_set_fault_domain(struct settings_book *sb, struct ledger_tenant *t,
                              const char *domain, enum setting_source s)
{
    bool none = !domain || !domain[0];
    int rc = 0;
    struct tenant_settings *r = none ? settings_book_entry(sb, t->id) : record(sb, t, &rc);
    if (!r)
        return rc;
    snprintf(r->fault_domain, sizeof r->fault_domain, "%s", none ? "" : domain);
    r->src.fault_domain = (uint8_t)(none ? SETTING_UNSET : s);
    return 0;
}

void registry_undeclared(struct compute_book *b, struct settings_book *sb,
                         struct ledger_tenant *t)
{
    struct tenant_settings *r = settings_book_entry(sb, t->id);
    if (!r)
        return; /* nothing set: nothing the configuration gave */
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        if (r->src.quota[g] == SETTING_CONFIG)
            r->src.quota[g] = SETTING_RUNTIME;
        if (r->src.compute[g] == SETTING_CONFIG)
            registry_set_compute(b, sb, t, g, NULL, SETTING_UNSET);
    }
    if (r->src.members == SETTING_CONFIG)
        r->src.members = SETTING_RUNTIME;
    if (r->src.managed == SETTING_CONFIG)
        r->src.managed = SETTING_RUNTIME;
    if (r->src.fault_domain == SETTING_CONFIG)
        registry_set_fault_domain(sb, t, NULL, SETTING_UNSET);
    r->sms_pct = 0; /* the configuration's only */
}

/* The run-time settings of t, for a save (struct state_settings_io.get). */
static bool state_get(void *ctx, const struct ledger *l, const struct ledger_tenant *t,
                      struct state_settings *out)
{
    const struct registry_books *b = ctx;
    const struct tenant_settings *r = settings_book_of(b->settings, t->id);
    bool configured = t->flags & LEDGER_TENANT_CONFIG;
    if (configured && !registry_has_runtime(b->settings, t, l->n_gpus))
        return false;
    for (unsigned g = 0; g < l->n_gpus && g < KAIROS_MAX_GPUS; g++) {
        out->has_quota[g] = !configured || r->src.quota[g] == SETTING_RUNTIME;
        out->quota[g] = t->quota[g];
        out->has_compute[g] = r->src.compute[g] != SETTING_CONFIG &&
                              compute_book_policy(b->compute, t->id, g, &out->compute[g]);
    }
    out->has_members = r->src.members != SETTING_CONFIG && !members_rules_empty(&r->members);
    out->members = r->members;
    out->managed_charge = r->managed_charge && r->src.managed != SETTING_CONFIG;
    if (r->src.fault_domain == SETTING_RUNTIME)
        snprintf(out->fault_domain, sizeof out->fault_domain, "%s", r->fault_domain);
    out->owner_pid = r->owner_pid;
    return true;
}

/* What a load found for t, set at run time (struct state_settings_io.put). */
static void state_put(void *ctx, struct ledger *l, struct ledger_tenant *t,
                      const struct state_settings *s)
{
    const struct registry_books *b = ctx;
    for (unsigned g = 0; g < l->n_gpus && g < KAIROS_MAX_GPUS; g++)
        if (s->has_quota[g] &&
            settings_book_of(b->settings, t->id)->src.quota[g] != SETTING_CONFIG)
            registry_set_quota(l, b->settings, t, g, s->quota[g], SETTING_RUNTIME);
    if (t->flags & LEDGER_TENANT_CONFIG)
        return; /* the rest is the configuration's */
    if (s->owner_pid) /* the server checks whether it lives */
        registry_set_owner(b->settings, t, s->owner_pid, false);
    for (unsigned g = 0; g < l->n_gpus && g < KAIROS_MAX_GPUS; g++)
        if (s->has_compute[g] &&
            registry_set_compute(b->compute, b->settings, t, g, &s->compute[g],
                                 SETTING_RUNTIME))
            log_error("tenant %s: out of memory: its compute policy on GPU %u is not restored",
                      t->name, g);
    if (s->has_members)
        registry_set_members(b->settings, t, &s->members, SETTING_RUNTIME);
    if (s->managed_charge)
        registry_set_managed(b->settings, t, true, SETTING_RUNTIME);
    if (s->fault_domain[0])
        registry_set_fault_domain(b->settings, t, s->fault_domain, SETTING_RUNTIME);
}

struct state_settings_io registry_state_io(const struct registry_books *b)
{
    return (struct state_settings_io){.get = state_get, .put = state_put, .ctx = (void *)b};
}
