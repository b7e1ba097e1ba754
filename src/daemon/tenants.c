/* tenants.c - tenants from the configuration and from run time, around the ledger;
 * every change is logged in an operator's words and persisted when it must be. */
#include "daemon/tenants.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/units.h"
#include "daemon/log.h"
#include "daemon/state.h"

const char *tenants_size(uint64_t bytes, char *buf, size_t cap)
{
    return units_format_size(bytes, buf, cap);
}

int tenants_init(struct tenants *ts, unsigned n_gpus, const char *state_path)
{
    memset(ts, 0, sizeof *ts);
    ts->n_gpus = n_gpus;
    snprintf(ts->state_path, sizeof ts->state_path, "%s", state_path);
    return ledger_init(&ts->ledger, n_gpus);
}

void tenants_fini(struct tenants *ts)
{
    ledger_fini(&ts->ledger);
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
    if (*bytes > KAIROS_BYTES_MAX) {
        snprintf(err, err_len, "%s:%u:%u: tenant '%s': %s is absurd", c->path, q->line, q->column,
                 t->name, q->value);
        return -EINVAL;
    }
    *gpu = (unsigned)index;
    return 0;
}

int tenants_apply_config(struct tenants *ts, const struct config *c, char *err, size_t err_len)
{
    int rc = 0;
    uint64_t (*quotas)[KAIROS_MAX_GPUS] = calloc(c->n_tenants ? c->n_tenants : 1, sizeof *quotas);
    if (!quotas)
        return -ENOMEM;
    for (size_t i = 0; i < c->n_tenants; i++)
        for (size_t j = 0; j < c->tenants[i].n_quotas; j++) {
            unsigned gpu;
            uint64_t bytes;
            rc = resolve_quota(ts, c, &c->tenants[i], &c->tenants[i].quotas[j], &gpu, &bytes, err,
                               err_len);
            if (rc)
                goto out;
            quotas[i][gpu] = bytes;
        }
    char a[32], b[32];
    /* config tenants no longer declared */
    for (size_t i = ts->ledger.n_tenants; i-- > 0;) {
        struct ledger_tenant *t = ts->ledger.tenants[i];
        bool declared = false;
        for (size_t k = 0; k < c->n_tenants; k++)
            declared |= !strcmp(c->tenants[k].name, t->name);
        if (!(t->flags & LEDGER_TENANT_CONFIG) || declared)
            continue;
        if (t->n_members) {
            t->flags = LEDGER_TENANT_EPHEMERAL;
            log_warn("tenant %s: no longer in the configuration; kept until its %u process(es) "
                     "exit", t->name, t->n_members);
        } else {
            log_info("tenant %s: no longer in the configuration; removed", t->name);
            ledger_tenant_remove(&ts->ledger, t);
        }
    }
    for (size_t i = 0; i < c->n_tenants; i++) {
        struct ledger_tenant *t = ledger_tenant_find(&ts->ledger, c->tenants[i].name);
        if (!t) {
            rc = ledger_tenant_add(&ts->ledger, c->tenants[i].name, quotas[i],
                                   LEDGER_TENANT_CONFIG, &t);
            if (rc) {
                snprintf(err, err_len, "tenant '%s': %s", c->tenants[i].name, strerror(-rc));
                goto out;
            }
        }
        t->flags = LEDGER_TENANT_CONFIG;
        for (unsigned g = 0; g < ts->n_gpus; g++) {
            if (ledger_tenant_set_quota(&ts->ledger, t, g, quotas[i][g]) == 1)
                log_warn("tenant %s: quota on GPU %u is now %s, below the %s it holds; its "
                         "allocations there are refused until it frees memory", t->name, g,
                         tenants_size(quotas[i][g], a, sizeof a),
                         tenants_size(t->held[g], b, sizeof b));
        }
    }
out:
    free(quotas);
    return rc;
}

void tenants_load_state(struct tenants *ts)
{
    char err[512], aside[PATH_MAX + 32];
    int rc = state_load(ts->state_path, &ts->ledger, err, sizeof err, aside, sizeof aside);
    if (rc < 0)
        log_error("%s; the configuration's tenants are kept, tenants created at run time are "
                  "lost and must be created again (kairos run --mem)", err);
    else if (rc > 0)
        log_info("state %s: %d tenant(s) created at run time restored", ts->state_path, rc);
}

void tenants_save_state(struct tenants *ts)
{
    char err[512];
    if (state_save(ts->state_path, &ts->ledger, err, sizeof err))
        log_error("state not saved: %s; a restart would forget tenants created at run time "
                  "(check the 'state:' path in the configuration)", err);
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

int tenants_set(struct tenants *ts, const char *name, unsigned n_gpus, const uint64_t *quota,
                unsigned flags, uint32_t uid, uint32_t owner_pid, char *msg, size_t msg_len)
{
    for (unsigned g = ts->n_gpus; g < n_gpus; g++)
        if (quota[g] != KAIROS_QUOTA_KEEP && quota[g] != 0) {
            snprintf(msg, msg_len, "GPU %u does not exist on this node (it has %u GPU%s)", g,
                     ts->n_gpus, ts->n_gpus == 1 ? "" : "s");
            return KAIROS_ERR_INVALID;
        }
    struct ledger_tenant *t = ledger_tenant_find(&ts->ledger, name);
    bool created = false;
    if (!t) {
        unsigned lf = (flags & KAIROS_TENANT_EPHEMERAL) ? LEDGER_TENANT_EPHEMERAL : 0;
        int rc = ledger_tenant_add(&ts->ledger, name, NULL, lf, &t);
        if (rc) {
            snprintf(msg, msg_len, "cannot create tenant '%s': %s", name,
                     rc == -ENOSPC ? "too many tenants (remove unused ones)" : strerror(-rc));
            return KAIROS_ERR_INVALID;
        }
        created = true;
        if (lf) {
            t->owner_pid = owner_pid;
            t->owner_alive = owner_pid != 0;
        }
    }
    bool over = false;
    for (unsigned g = 0; g < n_gpus && g < ts->n_gpus; g++)
        if (quota[g] != KAIROS_QUOTA_KEEP)
            over |= ledger_tenant_set_quota(&ts->ledger, t, g, quota[g]) == 1;
    char q[256];
    describe_quota(ts, t, q, sizeof q);
    snprintf(msg, msg_len, "tenant %s %s: %s%s", name, created ? "created" : "updated", q,
             over ? "; it holds more than its new quota, so its allocations are refused until "
                    "it frees memory"
                  : "");
    log_info("%s (by uid %u)%s", msg, uid,
             (t->flags & LEDGER_TENANT_CONFIG) ? "; a configuration tenant: the change lasts "
                                                 "until the configuration is reloaded"
                                               : "");
    if (!(t->flags & LEDGER_TENANT_CONFIG))
        tenants_save_state(ts);
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
    ledger_tenant_remove(&ts->ledger, t);
    snprintf(msg, msg_len, "tenant %s removed", name);
    log_info("%s (by uid %u)", msg, uid);
    tenants_save_state(ts);
    return 0;
}

void tenants_after_leave(struct tenants *ts, struct ledger_tenant *t)
{
    if (t->n_members || t->owner_alive || !(t->flags & LEDGER_TENANT_EPHEMERAL))
        return;
    log_info("tenant %s: its command and its last process have exited; removed (created by "
             "kairos run)", t->name);
    ledger_tenant_remove(&ts->ledger, t);
    tenants_save_state(ts);
}
