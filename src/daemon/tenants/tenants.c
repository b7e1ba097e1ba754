/* tenants.c - tenants from the configuration and from run time, around the ledger:
 * which exist, their quotas (sizes and percentages resolved against the node's
 * GPUs) and compute policies checked (one GPU's shares, configured and run-time,
 * add up to at most 100 %) and handed to the registry (registry.h), which keeps
 * them with their sources; every change is logged in an operator's words and
 * persisted when it must be. */
#include "daemon/tenants/tenants.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/units.h"
#include "core/policy.h"
#include "daemon/base/log.h"
#include "daemon/tenants/registry.h"
#include "daemon/state/state.h"
#include "daemon/state/usage_state.h"

const struct tenant_settings *tenants_settings_of(const struct tenants *ts,
                                                  const struct ledger_tenant *t)
{
    return settings_book_of(&ts->settings, t->id);
}

const char *tenants_size(uint64_t bytes, char *buf, size_t cap)
{
    return units_format_size(bytes, buf, cap);
}

int tenants_init(struct tenants *ts, unsigned n_gpus, const char *state_path)
{
    memset(ts, 0, sizeof *ts);
    ts->n_gpus = n_gpus;
    snprintf(ts->state_path, sizeof ts->state_path, "%s", state_path);
    usage_book_init(&ts->usage);
    compute_book_init(&ts->compute);
    settings_book_init(&ts->settings);
    return ledger_init(&ts->ledger, n_gpus);
}

void tenants_fini(struct tenants *ts)
{
    handovers_saved_free(&ts->saved_handovers);
    settings_book_fini(&ts->settings);
    compute_book_fini(&ts->compute);
    usage_book_fini(&ts->usage);
    ledger_fini(&ts->ledger);
}

/* Removes t (without members) from the ledger and its records kept by id. Its
 * chargeback counters stay until the next save (usage_state.h). */
static void tenant_remove(struct tenants *ts, struct ledger_tenant *t)
{
    compute_book_drop(&ts->compute, t->id);
    settings_book_drop(&ts->settings, t->id);
    ledger_tenant_remove(&ts->ledger, t);
}

static bool declared(const struct config *c, const char *name)
{
    for (size_t k = 0; c && k < c->n_tenants; k++)
        if (!strcmp(c->tenants[k].name, name))
            return true;
    return false;
}

/* The node's compute shares, but `except`'s: the registry's (every source), or with
 * `pending` (a configuration about to be applied) that configuration's and the
 * run-time policies of the tenants it does not declare (its policies are theirs). */
static int node_shares(const struct tenants *ts, const struct config *pending,
                       const struct ledger_tenant *except, struct policy_shares *out)
{
    int rc = pending ? config_shares(pending, out) : 0;
    for (size_t i = 0; !rc && i < ts->ledger.n_tenants; i++) {
        const struct ledger_tenant *t = ts->ledger.tenants[i];
        if (t == except || (pending && declared(pending, t->name)))
            continue;
        const struct compute_policies *cp = compute_book_find(&ts->compute, t->id);
        for (unsigned g = 0; !rc && cp && g < KAIROS_MAX_GPUS; g++)
            if (cp->has[g] && (!pending || tenants_settings_of(ts, t)->src.compute[g] ==
                                               SETTING_RUNTIME))
                rc = policy_shares_add(out, t->name, g, cp->pol[g].share);
    }
    return rc;
}

/* Whether the node's shares (node_shares), with `name` holding pol where has says,
 * stay within 100 % per GPU. 0, -EINVAL (why says which GPU, tenants and sum) or
 * -ENOMEM. */
static int shares_fit(const struct tenants *ts, const struct config *pending,
                      const struct ledger_tenant *except, const char *name, const bool *has,
                      const struct sched_policy *pol, char *why, size_t why_len)
{
    struct policy_shares shares = {0};
    int rc = node_shares(ts, pending, except, &shares);
    for (unsigned g = 0; !rc && has && g < KAIROS_MAX_GPUS; g++)
        if (has[g])
            rc = policy_shares_add(&shares, name, g, pol[g].share);
    if (rc)
        snprintf(why, why_len, "out of memory");
    else
        rc = policy_shares_check(&shares, why, why_len);
    policy_shares_free(&shares);
    return rc;
}

static int resolve_quota(const struct tenants *ts, const struct config *c,
                         const struct config_tenant *t, const struct config_quota *q,
                         unsigned *gpu, uint64_t *bytes, char *err, size_t err_len)
{
    int index = q->index;
    if (index < 0) {
        for (unsigned g = 0; ts->gpu_known && g < ts->n_gpus; g++)
            if (!strcmp(ts->gpu_uuid[g], q->uuid))
                index = (int)g;
        if (index < 0) {
            snprintf(err, err_len, "%s:%u:%u: tenant '%s': no GPU %s on this node%s", c->path,
                     q->line, q->column, t->name, q->uuid,
                     ts->gpu_known ? "" : " (GPU UUIDs need NVML; use the GPU index)");
            return -EINVAL;
        }
    }
    if ((unsigned)index >= ts->n_gpus) {
        snprintf(err, err_len, "%s:%u:%u: tenant '%s': GPU %d does not exist (this node has %u; "
                 "set 'gpus:' when running without NVML)", c->path, q->line, q->column, t->name,
                 index, ts->n_gpus);
        return -EINVAL;
    }
    char why[160];
    uint64_t total = ts->gpu_known ? ts->gpu_total[index] : 0;
    if (strchr(q->value, '%') && !total) {
        snprintf(err, err_len, "%s:%u:%u: tenant '%s': '%s' needs GPU %d's total memory, known "
                 "only with NVML; give a size such as 40G", c->path, q->line, q->column, t->name,
                 q->value, index);
        return -EINVAL;
    }
    if (units_parse_size(q->value, total, bytes, why, sizeof why)) {
        snprintf(err, err_len, "%s:%u:%u: tenant '%s': %s", c->path, q->line, q->column, t->name,
                 why);
        return -EINVAL;
    }
    if (total && *bytes > total) {
        char has[32];
        log_warn("%s:%u:%u: tenant '%s': memory '%s' is more than GPU %d's %s: it is never "
                 "reached there (a percentage suits GPUs of different sizes)", c->path, q->line,
                 q->column, t->name, q->value, index, units_format_size(total, has, sizeof has));
    }
    if (units_size_is_bare(q->value))
        log_warn("%s:%u:%u: tenant '%s': memory '%s' has no unit and is read as %s bytes, as "
                 "documented; add one (%sB for bytes, or G, MiB...)", c->path, q->line,
                 q->column, t->name, q->value, q->value, q->value);
    if (*bytes > KAIROS_BYTES_MAX) {
        snprintf(err, err_len, "%s:%u:%u: tenant '%s': %s is absurd", c->path, q->line, q->column,
                 t->name, q->value);
        return -EINVAL;
    }
    *gpu = (unsigned)index;
    return 0;
}

/* Whether t still has something a removal would lose track of: a member (live, or
 * lingering while the GPU holds its memory) or memory draining. */
static bool holds_anything(const struct ledger_tenant *t)
{
    if (t->n_members)
        return true;
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
        if (t->draining[g] || t->held[g])
            return true;
    return false;
}

static void describe_holdings(const struct ledger_tenant *t, unsigned n_gpus, char *out,
                              size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    for (unsigned g = 0; g < n_gpus && len < cap; g++) {
        char a[32];
        uint64_t b = t->held[g] + t->draining[g];
        int n = b ? snprintf(out + len, cap - len, "%s%s on GPU %u", len ? ", " : "",
                             tenants_size(b, a, sizeof a), g)
                  : 0;
        len += n > 0 ? (size_t)n : 0;
    }
    if (!len)
        snprintf(out, cap, "no memory");
}

/* The config tenants c no longer declares: removed, or marked removed while they
 * hold anything (tenants.h); true when any was. */
static bool undeclare(struct tenants *ts, const struct config *c)
{
    bool changed = false;
    for (size_t i = ts->ledger.n_tenants; i-- > 0;) {
        struct ledger_tenant *t = ts->ledger.tenants[i];
        if (!(t->flags & LEDGER_TENANT_CONFIG) || declared(c, t->name))
            continue;
        changed = true;
        if (!holds_anything(t)) {
            log_info("tenant %s: no longer in the configuration; removed", t->name);
            tenant_remove(ts, t);
            continue;
        }
        char held[256];
        describe_holdings(t, ts->n_gpus, held, sizeof held);
        t->flags = LEDGER_TENANT_REMOVED;
        registry_undeclared(&ts->compute, &ts->settings, t);
        log_warn("tenant %s: no longer in %s; marked removed: kept with its quotas until its "
                 "%u process(es) leave and the GPU frees its memory (%s), then removed; no "
                 "process may join it meanwhile. Declare it again to keep it, or stop its "
                 "processes (kairos ps lists them) to remove it now", t->name,
                 c->path[0] ? c->path : "the configuration", t->n_members, held);
    }
    return changed;
}

/* The run-time tenants whose fault domain c does not declare (a reload dropped it, or
 * the state file names it): kept, with an undeclared domain's defaults, and warned. */
static void warn_undeclared_domains(const struct tenants *ts, const struct config *c)
{
    for (size_t i = 0; c && i < ts->ledger.n_tenants; i++) {
        const struct ledger_tenant *t = ts->ledger.tenants[i];
        const struct tenant_settings *r = tenants_settings_of(ts, t);
        if (r->src.fault_domain != SETTING_RUNTIME ||
            space_config_domain(&c->space, r->fault_domain))
            continue;
        log_warn("tenant %s: its fault domain %s, set at run time, is not declared under "
                 "space: domains: in %s; kept, with the defaults (one MPS server per uid). "
                 "Declare it, or take the tenant out of it (kairos tenant set %s "
                 "--fault-domain '')", t->name, r->fault_domain,
                 c->path[0] ? c->path : "the configuration", t->name);
    }
}

int tenants_apply_config(struct tenants *ts, const struct config *c, char *err, size_t err_len)
{
    int rc = 0;
    uint64_t (*quotas)[KAIROS_MAX_GPUS] = calloc(c->n_tenants ? c->n_tenants : 1, sizeof *quotas);
    bool (*given)[KAIROS_MAX_GPUS] = calloc(c->n_tenants ? c->n_tenants : 1, sizeof *given);
    if (!quotas || !given) {
        free(quotas);
        free(given);
        return -ENOMEM;
    }
    for (size_t i = 0; i < c->n_tenants; i++)
        for (size_t j = 0; j < c->tenants[i].n_quotas; j++) {
            unsigned gpu;
            uint64_t bytes;
            rc = resolve_quota(ts, c, &c->tenants[i], &c->tenants[i].quotas[j], &gpu, &bytes, err,
                               err_len);
            if (rc)
                goto out;
            quotas[i][gpu] = bytes;
            given[i][gpu] = true;
        }
    char why[512];
    rc = shares_fit(ts, c, NULL, NULL, NULL, NULL, why, sizeof why);
    if (rc) {
        if (rc == -EINVAL)
            snprintf(err, err_len, "%s: %s, counting the tenants created at run time: lower "
                     "their shares (kairos run --tenant NAME --share N%%) or the "
                     "configuration's", c->path[0] ? c->path : "configuration", why);
        else
            snprintf(err, err_len, "%s", why);
        goto out;
    }
    char a[32], b[32];
    bool changed = undeclare(ts, c);
    for (size_t i = 0; i < c->n_tenants; i++) {
        struct ledger_tenant *t = ledger_tenant_find(&ts->ledger, c->tenants[i].name);
        if (t && (t->flags & LEDGER_TENANT_REMOVED)) {
            log_info("tenant %s: in the configuration again; no longer removed", t->name);
            changed = true;
        }
        if (!t) {
            rc = ledger_tenant_add(&ts->ledger, c->tenants[i].name, NULL,
                                   LEDGER_TENANT_CONFIG, &t);
            if (rc) {
                snprintf(err, err_len, "tenant '%s': %s", c->tenants[i].name, strerror(-rc));
                goto out;
            }
        }
        t->flags = LEDGER_TENANT_CONFIG;
        registry_apply_config(&ts->ledger, &ts->compute, &ts->settings, t, &c->tenants[i],
                              quotas[i], given[i]);
        for (unsigned g = 0; g < ts->n_gpus; g++) {
            if (t->held[g] > t->quota[g])
                log_warn("tenant %s: quota on GPU %u is now %s, below the %s it holds; its "
                         "allocations there are refused until it frees memory", t->name, g,
                         tenants_size(t->quota[g], a, sizeof a),
                         tenants_size(t->held[g], b, sizeof b));
        }
    }
    if (changed) /* what a restart finds: the removed tenants, not those gone */
        tenants_save_state(ts, NULL, why, sizeof why);
    warn_undeclared_domains(ts, c);
out:
    free(quotas);
    free(given);
    return rc;
}

static void on_state_refusal(void *ctx, const char *msg)
{
    const struct tenants *ts = ctx;
    log_error("state %s: %s", ts->state_path, msg);
}

/* The loaded run-time policies, admitted one by one in the file's order while the
 * shares of each GPU stay within 100 % with the configuration's (which may have
 * changed while kairosd was stopped); the others are dropped and logged. Running
 * sums per GPU: linear in the number of policies, however many tenants load. */
static void admit_loaded_compute(struct tenants *ts)
{
    double sum[KAIROS_MAX_GPUS] = {0};
    for (size_t i = 0; i < ts->ledger.n_tenants; i++) {
        const struct ledger_tenant *t = ts->ledger.tenants[i];
        struct sched_policy pol;
        for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
            if (tenants_settings_of(ts, t)->src.compute[g] != SETTING_RUNTIME &&
                compute_book_policy(&ts->compute, t->id, g, &pol))
                sum[g] += pol.share; /* the configuration's */
    }
    for (size_t i = 0; i < ts->ledger.n_tenants; i++) {
        struct ledger_tenant *t = ts->ledger.tenants[i];
        struct sched_policy pol;
        for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
            if (tenants_settings_of(ts, t)->src.compute[g] != SETTING_RUNTIME ||
                !compute_book_policy(&ts->compute, t->id, g, &pol))
                continue;
            char what[96];
            double with = sum[g] + pol.share;
            if (with <= 1.0 + 1e-9) {
                sum[g] = with;
                continue;
            }
            log_error("state %s: tenant %s: compute policy on GPU %u (%s) refused: compute shares "
                      "on GPU %u add up to %.7g%% with it: at most 100%% can be guaranteed; the "
                      "tenant is kept without it (set it again with kairos run --share once "
                      "there is room)", ts->state_path, t->name, g,
                      policy_describe(&pol, what, sizeof what), g, with * 100);
            registry_set_compute(&ts->compute, &ts->settings, t, g, NULL, SETTING_UNSET);
        }
    }
}

void tenants_load_state(struct tenants *ts, const struct config *c)
{
    /* c's tenants are in the ledger already, with their sources */
    char err[512], aside[PATH_MAX + 32];
    struct registry_books books = {&ts->compute, &ts->settings};
    struct state_settings_io io = registry_state_io(&books);
    int rc = state_load_all(ts->state_path, &ts->ledger, &io, &ts->usage, &ts->saved_handovers,
                            on_state_refusal, ts, err, sizeof err, aside, sizeof aside);
    if (rc < 0)
        log_error("%s; the configuration's tenants are kept, tenants created at run time are "
                  "lost and must be created again (kairos run --mem)", err);
    else if (rc > 0)
        log_info("state %s: %d tenant(s) created at run time restored", ts->state_path, rc);
    if (rc > 0)
        admit_loaded_compute(ts);
    warn_undeclared_domains(ts, c);
}

int tenants_save_state(struct tenants *ts, const struct ledger_tenant *skip, char *err,
                       size_t err_len)
{
    json_t *handovers = ts->handovers_json ? ts->handovers_json(ts->handovers_ctx) : NULL;
    bool counted = false;
    struct registry_books books = {&ts->compute, &ts->settings};
    struct state_settings_io io = registry_state_io(&books);
    int rc = state_save_counted(ts->state_path, &ts->ledger, &io, &ts->usage, skip, handovers,
                                &counted, err, err_len);
    json_decref(handovers);
    if (rc)
        log_error("state not saved: %s (check the 'state:' path in the configuration and the "
                  "free space of its file system)", err);
    else if (counted) /* what a restart finds is what the metrics may show */
        usage_state_published(&ts->usage);
    else
        log_warn("state %s saved without the chargeback counters: with them it would exceed "
                 "%d MiB; the metrics show them as of their last save (remove unused tenants)",
                 ts->state_path, STATE_MAX_BYTES >> 20);
    return rc;
}

/* The reply to a change refused because the state file cannot record it (rc:
 * -errno; the path and the details are in the log). */
static int refuse_unsaved(const char *name, const char *what, int rc, char *msg, size_t msg_len)
{
    snprintf(msg, msg_len, "tenant '%s' not %s: kairosd cannot write its state file (%s); "
             "nothing changed. Free space or fix 'state:' in the configuration, then retry",
             name, what, strerror(-rc));
    return KAIROS_ERR_BUSY;
}

static void describe_quota(const struct tenants *ts, const struct ledger_tenant *t, char *out,
                           size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    for (unsigned g = 0; g < ts->n_gpus && len < cap; g++) {
        char a[32];
        int n = snprintf(out + len, cap - len, "%sGPU %u %s", g ? ", " : "", g,
                         tenants_size(t->quota[g], a, sizeof a));
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

/* The compute policies the tenant would have after m: its own (none when new) with
 * m's SET and CLEAR applied, refused (KAIROS_ERR_*, msg) for a configuration tenant,
 * a GPU the node lacks, or shares of a GPU above 100 % with everyone else's. */
static int next_compute(const struct tenants *ts, const struct config *c,
                        const struct ledger_tenant *t, const struct kairos_tenant_set *m,
                        bool has[KAIROS_MAX_GPUS], struct sched_policy pol[KAIROS_MAX_GPUS],
                        bool *changed, char *msg, size_t msg_len)
{
    bool asked = false;
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        asked |= m->compute[g].flags != 0;
        pol[g] = (struct sched_policy){0};
        has[g] = registry_policy(&ts->compute, t, g, &pol[g]);
    }
    *changed = false;
    if (!asked)
        return 0;
    if (t && (t->flags & LEDGER_TENANT_CONFIG)) {
        snprintf(msg, msg_len, "tenant '%s' is declared in the configuration, which sets its "
                 "compute policy (compute: in %s); change it there and reload kairosd (SIGHUP)",
                 t->name, c && c->path[0] ? c->path : "kairosd.yaml");
        return KAIROS_ERR_INVALID;
    }
    char why[512];
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        const struct kairos_compute *w = &m->compute[g];
        if (!w->flags)
            continue;
        if (g >= ts->n_gpus) {
            snprintf(msg, msg_len, "GPU %u does not exist on this node (it has %u GPU%s): no "
                     "compute policy there", g, ts->n_gpus, ts->n_gpus == 1 ? "" : "s");
            return KAIROS_ERR_INVALID;
        }
        bool set = w->flags & KAIROS_COMPUTE_SET;
        struct sched_policy p = {0};
        if (set && policy_from_ppm(w->share_ppm, w->limit_ppm, w->priority, &p, why,
                                   sizeof why)) {
            snprintf(msg, msg_len, "compute policy on GPU %u refused: %s", g, why);
            return KAIROS_ERR_INVALID;
        }
        *changed |= set != has[g] || (set && !policy_equal(&p, &pol[g]));
        has[g] = set;
        pol[g] = p;
    }
    if (!*changed)
        return 0;
    int rc = shares_fit(ts, NULL, t, m->tenant, has, pol, why, sizeof why);
    if (rc == -EINVAL) {
        snprintf(msg, msg_len, "%s; give %s a smaller share there, or lower another tenant's",
                 why, m->tenant);
        return KAIROS_ERR_INVALID;
    }
    if (rc) {
        snprintf(msg, msg_len, "kairosd is out of memory");
        return KAIROS_ERR_INVALID;
    }
    return 0;
}

/* Whether domain (NULL: not asked) changes t's fault domain, now current (t NULL: a
 * new tenant's, none); refused (KAIROS_ERR_*, msg) for a configuration tenant, a domain the
 * configuration does not declare (a domain needs its MPS settings), or a tenant with
 * processes (they are routed already). */
static int next_domain(const struct config *c, const struct ledger_tenant *t,
                       const char *current, const char *domain, bool *changed, char *msg,
                       size_t msg_len)
{
    const char *path = c && c->path[0] ? c->path : "kairosd.yaml";
    *changed = domain && strcmp(t ? current : "", domain);
    if (!*changed)
        return 0;
    if (t && (t->flags & LEDGER_TENANT_CONFIG)) {
        snprintf(msg, msg_len, "tenant '%s' is declared in the configuration, which sets its "
                 "fault domain (fault_domain: in %s); change it there and reload kairosd "
                 "(SIGHUP)", t->name, path);
        return KAIROS_ERR_INVALID;
    }
    if (domain[0] && !(c && space_config_domain(&c->space, domain))) {
        snprintf(msg, msg_len, "fault domain '%s' is not declared in %s: a domain needs its "
                 "MPS settings; add it under space: domains: and reload kairosd (SIGHUP), or "
                 "name a declared one", domain, path);
        return KAIROS_ERR_INVALID;
    }
    if (t && t->n_members) {
        snprintf(msg, msg_len, "tenant '%s' has %u process(es), already routed (%s%s); its "
                 "fault domain changes only while it has none: stop them first", t->name,
                 t->n_members, current[0] ? "fault domain " : "time sharing", current);
        return KAIROS_ERR_BUSY;
    }
    return 0;
}

/* Logs how t's compute policies (was, as they were) became has/pol. */
static void log_compute(const struct ledger_tenant *t, const struct compute_policies *was,
                        const bool *has, const struct sched_policy *pol, uint32_t uid)
{
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        char what[96];
        if (has[g] && (!was->has[g] || !policy_equal(&pol[g], &was->pol[g])))
            log_info("tenant %s: compute policy on GPU %u: %s (by uid %u)", t->name, g,
                     policy_describe(&pol[g], what, sizeof what), uid);
        else if (!has[g] && was->has[g])
            log_info("tenant %s: no compute policy on GPU %u any more (by uid %u)", t->name, g,
                     uid);
    }
}

/* m's quotas in bytes (percentages of each GPU's memory resolved), KEEP kept.
 * 0, or KAIROS_ERR_INVALID with msg when a percentage names a GPU whose memory
 * kairosd does not know. */
/* A quota beyond its GPU's memory (where kairosd knows it) is a slip, such as
 * --mem 100G on an 80 GiB GPU: refused, naming the most the GPU has. */
static int beyond_gpus(const struct tenants *ts, unsigned n, const uint64_t *bytes, char *msg,
                       size_t msg_len)
{
    for (unsigned g = 0; ts->gpu_known && g < n && g < ts->n_gpus; g++) {
        if (bytes[g] == KAIROS_QUOTA_KEEP || !ts->gpu_total[g] || bytes[g] <= ts->gpu_total[g])
            continue;
        char want[32], has[32];
        snprintf(msg, msg_len, "a quota of %s on GPU %u is more than its %s of memory; give at "
                 "most that, or a percentage such as 90%%",
                 units_format_size(bytes[g], want, sizeof want), g,
                 units_format_size(ts->gpu_total[g], has, sizeof has));
        return KAIROS_ERR_INVALID;
    }
    return 0;
}

static int resolve_quotas(const struct tenants *ts, const struct kairos_tenant_set *m,
                          uint64_t *bytes, char *msg, size_t msg_len)
{
    for (unsigned g = 0; g < m->n_gpus && g < ts->n_gpus; g++) {
        uint64_t q = m->quota[g];
        bytes[g] = q;
        if (q == KAIROS_QUOTA_KEEP || !(q & KAIROS_QUOTA_PERCENT))
            continue;
        uint64_t ppm = q & ~KAIROS_QUOTA_PERCENT;
        if (!ts->gpu_known || !ts->gpu_total[g]) {
            snprintf(msg, msg_len, "a percentage of GPU %u's memory needs its size, which "
                     "kairosd knows only with NVML (not on this node); give a size such as 8G",
                     g);
            return KAIROS_ERR_INVALID;
        }
        bytes[g] = (uint64_t)((long double)ts->gpu_total[g] * (long double)ppm / KAIROS_PPM);
    }
    return beyond_gpus(ts, m->n_gpus, bytes, msg, msg_len);
}

int tenants_set(struct tenants *ts, const struct config *c, const struct kairos_tenant_set *m,
                const char *domain, uint32_t uid, uint32_t owner_pid, bool *compute_changed,
                char *msg, size_t msg_len)
{
    const char *name = m->tenant;
    *compute_changed = false;
    uint64_t quota[KAIROS_MAX_GPUS];
    int qcode = resolve_quotas(ts, m, quota, msg, msg_len);
    if (qcode)
        return qcode;
    for (unsigned g = ts->n_gpus; g < m->n_gpus; g++)
        if (m->quota[g] != KAIROS_QUOTA_KEEP && m->quota[g] != 0) {
            snprintf(msg, msg_len, "GPU %u does not exist on this node (it has %u GPU%s)", g,
                     ts->n_gpus, ts->n_gpus == 1 ? "" : "s");
            return KAIROS_ERR_INVALID;
        }
    struct ledger_tenant *t = ledger_tenant_find(&ts->ledger, name);
    if (t && !tenants_joinable(t, c, msg, msg_len))
        return KAIROS_ERR_INVALID;
    bool has[KAIROS_MAX_GPUS], changed;
    struct sched_policy pol[KAIROS_MAX_GPUS];
    bool moved = false;
    int code = next_compute(ts, c, t, m, has, pol, &changed, msg, msg_len);
    if (!code)
        code = next_domain(c, t, t ? tenants_settings_of(ts, t)->fault_domain : "", domain,
                           &moved, msg, msg_len);
    if (code)
        return code;
    bool created = false;
    struct ledger_tenant before = {0};
    struct compute_policies before_compute = {0}; /* t's, as it was */
    struct tenant_settings before_settings = {0};
    bool had_settings = false;
    if (t) {
        before = *t;
        const struct compute_policies *cp = compute_book_find(&ts->compute, t->id);
        if (cp)
            before_compute = *cp;
        const struct tenant_settings *r = settings_book_entry(&ts->settings, t->id);
        had_settings = r != NULL;
        if (r)
            before_settings = *r;
    }
    if (!t) {
        unsigned lf = (m->flags & KAIROS_TENANT_EPHEMERAL) ? LEDGER_TENANT_EPHEMERAL : 0;
        int rc = ledger_tenant_add(&ts->ledger, name, NULL, lf, &t);
        if (rc) {
            if (rc == -ENOSPC)
                snprintf(msg, msg_len, "cannot create tenant '%s': kairosd holds at most %d "
                         "tenants; remove unused ones (kairos ps lists them)", name,
                         LEDGER_MAX_TENANTS);
            else
                snprintf(msg, msg_len, "cannot create tenant '%s': %s", name, strerror(-rc));
            return KAIROS_ERR_INVALID;
        }
        created = true;
    }
    int set = 0, rc;
    if (created && (t->flags & LEDGER_TENANT_EPHEMERAL))
        set = registry_set_owner(&ts->settings, t, owner_pid, owner_pid != 0);
    bool over = false;
    for (unsigned g = 0; !set && g < m->n_gpus && g < ts->n_gpus; g++)
        if (quota[g] != KAIROS_QUOTA_KEEP) {
            rc = registry_set_quota(&ts->ledger, &ts->settings, t, g, quota[g], SETTING_RUNTIME);
            over |= rc == 1;
            set = rc < 0 ? rc : 0;
        }
    if (!set && (m->flags & (KAIROS_TENANT_MANAGED_CHARGE | KAIROS_TENANT_MANAGED_REFUSE)))
        set = registry_set_managed(&ts->settings, t, m->flags & KAIROS_TENANT_MANAGED_CHARGE,
                                   SETTING_RUNTIME);
    char previous_domain[KAIROS_NAME_MAX]; /* for the log once saved */
    snprintf(previous_domain, sizeof previous_domain, "%s", before_settings.fault_domain);
    char why[512];
    for (unsigned g = 0; changed && !set && g < KAIROS_MAX_GPUS; g++)
        set = registry_set_compute(&ts->compute, &ts->settings, t, g, has[g] ? &pol[g] : NULL,
                                   SETTING_RUNTIME);
    if (moved && !set)
        set = registry_set_fault_domain(&ts->settings, t, domain, SETTING_RUNTIME);
    rc = set ? set : tenants_save_state(ts, NULL, why, sizeof why);
    if (rc) {
        if (created) {
            tenant_remove(ts, t);
        } else { /* nothing else changed them meanwhile: one loop thread */
            *t = before;
            compute_book_put(&ts->compute, t->id, &before_compute); /* as it was: room */
            struct tenant_settings *r = settings_book_entry(&ts->settings, t->id);
            if (r && had_settings)
                *r = before_settings;
            else if (r)
                settings_book_drop(&ts->settings, t->id);
        }
        if (set) {
            snprintf(msg, msg_len, "tenant '%s' not %s: kairosd is out of memory; nothing "
                     "changed", name, created ? "created" : "updated");
            return KAIROS_ERR_BUSY;
        }
        return refuse_unsaved(name, created ? "created" : "updated", rc, msg, msg_len);
    }
    char q[256];
    describe_quota(ts, t, q, sizeof q);
    snprintf(msg, msg_len, "tenant %s %s: %s; managed memory %s%s%s%s", name,
             created ? "created" : "updated", q,
             tenants_settings_of(ts, t)->managed_charge ? "charged in full" : "refused",
             tenants_settings_of(ts, t)->fault_domain[0] ? "; fault domain " : "",
             tenants_settings_of(ts, t)->fault_domain,
             over ? "; it holds more than its new quota, so its allocations are refused until "
                    "it frees memory"
                  : "");
    log_info("%s (by uid %u)%s", msg, uid,
             (t->flags & LEDGER_TENANT_CONFIG) ? "; a configuration tenant: a quota on a GPU "
                                                 "the configuration declares lasts until it is "
                                                 "reloaded, one on another GPU is kept"
                                               : "");
    if (changed)
        log_compute(t, &before_compute, has, pol, uid);
    if (moved)
        log_info("tenant %s: fault domain %s (was %s; by uid %u): its processes started from "
                 "now on use it", name,
                 tenants_settings_of(ts, t)->fault_domain[0]
                     ? tenants_settings_of(ts, t)->fault_domain : "none",
                 previous_domain[0] ? previous_domain : "none", uid);
    *compute_changed = changed || moved;
    return 0;
}

int tenants_del(struct tenants *ts, const char *name, uint32_t uid, char *msg, size_t msg_len)
{
    struct ledger_tenant *t = ledger_tenant_find(&ts->ledger, name);
    if (!t) {
        snprintf(msg, msg_len, "no tenant '%s' ('kairos ps' lists them)", name);
        return KAIROS_ERR_NO_TENANT;
    }
    if (t->flags & LEDGER_TENANT_CONFIG) {
        snprintf(msg, msg_len, "tenant '%s' is declared in the configuration; remove it there and "
                 "reload kairosd (SIGHUP)", name);
        return KAIROS_ERR_INVALID;
    }
    if (t->n_members) {
        snprintf(msg, msg_len, "tenant '%s' still has %u process(es); stop them first", name,
                 t->n_members);
        return KAIROS_ERR_BUSY;
    }
    char why[512];
    int rc = tenants_save_state(ts, t, why, sizeof why);
    if (rc)
        return refuse_unsaved(name, "removed", rc, msg, msg_len);
    tenant_remove(ts, t);
    snprintf(msg, msg_len, "tenant %s removed", name);
    log_info("%s (by uid %u)", msg, uid);
    return 0;
}

/* Removes t, removed by the configuration, once nothing of it is left; true if so. */
static bool removed_gone(struct tenants *ts, struct ledger_tenant *t)
{
    if (!(t->flags & LEDGER_TENANT_REMOVED) || holds_anything(t))
        return false;
    log_info("tenant %s: its last process has left and the GPU holds none of its memory; "
             "removed (no longer in the configuration)", t->name);
    char why[512];
    tenants_save_state(ts, t, why, sizeof why); /* failing, a restart sweeps it again */
    tenant_remove(ts, t);
    return true;
}

size_t tenants_sweep_removed(struct tenants *ts)
{
    size_t n = 0;
    for (size_t i = ts->ledger.n_tenants; i-- > 0;)
        n += removed_gone(ts, ts->ledger.tenants[i]);
    return n;
}

bool tenants_joinable(const struct ledger_tenant *t, const struct config *c, char *msg,
                      size_t msg_len)
{
    if (!(t->flags & LEDGER_TENANT_REMOVED))
        return true;
    snprintf(msg, msg_len, "tenant '%s' was removed from the configuration and goes once its "
             "%u process(es) leave; no process may join it. Declare it again in %s and reload "
             "kairosd (SIGHUP) to use it", t->name, t->n_members,
             c && c->path[0] ? c->path : "kairosd.yaml");
    return false;
}

bool tenants_after_leave(struct tenants *ts, struct ledger_tenant *t)
{
    if (removed_gone(ts, t))
        return true;
    if (t->n_members || tenants_settings_of(ts, t)->owner_alive ||
        !(t->flags & LEDGER_TENANT_EPHEMERAL))
        return false;
    log_info("tenant %s: its command and its last process have exited; removed (created by "
             "kairos run)", t->name);
    char why[512];
    tenants_save_state(ts, t, why, sizeof why); /* failing, a restart finds it ownerless */
    tenant_remove(ts, t);
    return true;
}
