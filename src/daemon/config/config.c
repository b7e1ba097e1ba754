/* config.c - kairosd.conf parsing with libyaml's document API: every node keeps its
 * position, so every refusal names file:line:column and what was expected. A key
 * twice in any mapping and a second document are refused before anything is read
 * (yaml_doc.c). */
#include "daemon/config/config.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "daemon/base/log.h"
#include "daemon/config/members_config.h"
#include "core/policy.h"
#include "daemon/base/yaml_doc.h"
#include "core/tenant_name.h"
#include "core/units.h"

static int parse_path(struct ydoc *p, const yaml_node_t *n, const char *what, char *out,
                      size_t cap)
{
    if (ydoc_want(p, n, YAML_SCALAR_NODE, what))
        return -EINVAL;
    const char *s = ydoc_text(n);
    if (s[0] != '/')
        return ydoc_fail(p, n, "expected %s as an absolute path, found '%s'", what, s);
    if (strlen(s) >= cap)
        return ydoc_fail(p, n, "%s is too long (at most %zu characters)", what, cap - 1);
    snprintf(out, cap, "%s", s);
    return 0;
}

/* kernel_log: PATH | none (faults: the driver's Xid reports are not read). */
static int parse_kernel_log(struct ydoc *p, const yaml_node_t *n, char *out, size_t cap)
{
    if (n->type == YAML_SCALAR_NODE && !strcmp(ydoc_text(n), "none")) {
        out[0] = 0;
        return 0;
    }
    return parse_path(p, n, "kernel_log (a path such as /dev/kmsg, or none)", out, cap);
}

/* unprivileged_cgroups: [/kubepods.slice, ...]: cgroup v2 path patterns. */
static int parse_unprivileged(struct ydoc *p, const yaml_node_t *n, struct config *c)
{
    if (ydoc_want(p, n, YAML_SEQUENCE_NODE, "unprivileged_cgroups as a list of cgroup patterns, "
             "e.g. [/kubepods.slice, /kubepods]"))
        return -EINVAL;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(p->doc, *it);
        if (c->n_unprivileged_cgroups >= CONFIG_MAX_UNPRIVILEGED_CGROUPS)
            return ydoc_fail(p, item, "at most %d unprivileged_cgroups",
                             CONFIG_MAX_UNPRIVILEGED_CGROUPS);
        if (item->type != YAML_SCALAR_NODE || ydoc_text(item)[0] != '/' ||
            strlen(ydoc_text(item)) >= KAIROS_CGROUP_MAX)
            return ydoc_fail(p, item, "expected a cgroup path pattern beginning with '/' "
                             "(at most %d characters), e.g. /kubepods.slice",
                             KAIROS_CGROUP_MAX - 1);
        snprintf(c->unprivileged_cgroups[c->n_unprivileged_cgroups++], KAIROS_CGROUP_MAX, "%s",
                 ydoc_text(item));
    }
    return 0;
}

static int parse_admins(struct ydoc *p, const yaml_node_t *n, struct config *c)
{
    if (ydoc_want(p, n, YAML_SEQUENCE_NODE, "admins as a list of uids or user names"))
        return -EINVAL;
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    c->admins = calloc(count ? count : 1, sizeof *c->admins);
    if (!c->admins)
        return -ENOMEM;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(p->doc, *it);
        if (ydoc_want(p, item, YAML_SCALAR_NODE, "a uid or user name"))
            return -EINVAL;
        const char *s = ydoc_text(item);
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (*s && !*end && !errno && s[0] != '-' && v < UINT32_MAX) {
            c->admins[c->n_admins++] = (uid_t)v;
            continue;
        }
        struct passwd pw, *found = NULL;
        char buf[4096];
        if (getpwnam_r(s, &pw, buf, sizeof buf, &found) || !found)
            return ydoc_fail(p, item, "admin '%s' is neither a uid nor a known user name", s);
        c->admins[c->n_admins++] = found->pw_uid;
    }
    return 0;
}

static int parse_time_mode(struct ydoc *p, const yaml_node_t *n, enum sched_mode *mode)
{
    if (n && n->type == YAML_SCALAR_NODE && sched_mode_parse(ydoc_text(n), mode))
        return 0;
    return ydoc_fail(p, n, "time_mode must be windows (strict windows while tenants compete), "
                           "timeslices (hardware timeslices only) or auto");
}

static int parse_latency_yield(struct ydoc *p, const yaml_node_t *n, unsigned *out)
{
    unsigned long ul;
    if (ydoc_uint(p, n, "latency_yield_us", SCHED_YIELD_MAX_US, &ul))
        return -EINVAL;
    if (ul && ul < SCHED_YIELD_MIN_US)
        return ydoc_fail(p, n, "latency_yield_us must be 0 (no rule: the slices of the shares) "
                               "or %u to %u microseconds", SCHED_YIELD_MIN_US, SCHED_YIELD_MAX_US);
    *out = (unsigned)ul;
    return 0;
}

static int parse_metrics(struct ydoc *p, const yaml_node_t *n, struct metrics_addr *out)
{
    char why[256];
    if (ydoc_want(p, n, YAML_SCALAR_NODE, "metrics as an address such as 127.0.0.1:9494, or off"))
        return -EINVAL;
    if (metrics_addr_parse(ydoc_text(n), out, why, sizeof why))
        return ydoc_fail(p, n, "%s", why);
    return 0;
}

/* One entry of audit exempt: COMMAND, or { command: COMMAND, user: USER-or-UID }. */
static int parse_exempt_item(struct ydoc *p, const yaml_node_t *n, struct config_exempt *e)
{
    *e = (struct config_exempt){.any_uid = true};
    const yaml_node_t *cmd = n, *user = NULL;
    if (n->type == YAML_MAPPING_NODE) {
        cmd = NULL;
        for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
             pr++) {
            yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
            yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
            if (k->type == YAML_SCALAR_NODE && !strcmp(ydoc_text(k), "command") && !cmd)
                cmd = v;
            else if (k->type == YAML_SCALAR_NODE && !strcmp(ydoc_text(k), "user") && !user)
                user = v;
            else
                return ydoc_fail(p, k, "expected command or user (once each) in an audit "
                                       "exemption");
        }
        if (!cmd && !user)
            return ydoc_fail(p, n, "an audit exemption needs a command, a user, or both");
    }
    if (cmd) {
        if (ydoc_want(p, cmd, YAML_SCALAR_NODE, "a command name (as in /proc/PID/comm)"))
            return -EINVAL;
        size_t len = strlen(ydoc_text(cmd));
        if (!len || len > 255 || strchr(ydoc_text(cmd), '/'))
            return ydoc_fail(p, cmd, "audit exemption '%s': expected a command name without "
                                     "'/' (as in /proc/PID/comm)", ydoc_text(cmd));
        /* the kernel keeps the first 15 characters (nvidia-persistenced: nvidia-persiste) */
        len = len < sizeof e->command ? len : sizeof e->command - 1;
        memcpy(e->command, ydoc_text(cmd), len);
        e->command[len] = 0;
    }
    if (user) {
        if (ydoc_want(p, user, YAML_SCALAR_NODE, "a user name or uid"))
            return -EINVAL;
        const char *s = ydoc_text(user);
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        struct passwd pw, *found = NULL;
        char buf[4096];
        if (*s && !*end && !errno && s[0] != '-' && v < UINT32_MAX)
            e->uid = (uid_t)v;
        else if (!getpwnam_r(s, &pw, buf, sizeof buf, &found) && found)
            e->uid = found->pw_uid;
        else
            return ydoc_fail(p, user, "audit exemption: '%s' is neither a uid nor a known user "
                                      "name", s);
        e->any_uid = false;
    }
    return 0;
}

static int parse_exempt(struct ydoc *p, const yaml_node_t *n, struct config *c)
{
    if (ydoc_want(p, n, YAML_SEQUENCE_NODE, "audit exempt as a list of command names or "
                                       "{ command: NAME, user: USER }"))
        return -EINVAL;
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    free(c->audit_exempt);
    c->audit_exempt = calloc(count ? count : 1, sizeof *c->audit_exempt);
    if (!c->audit_exempt)
        return -ENOMEM;
    c->n_audit_exempt = 0;
    c->audit_exempt_given = true;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++)
        if (parse_exempt_item(p, yaml_document_get_node(p->doc, *it),
                              &c->audit_exempt[c->n_audit_exempt++]))
            return -EINVAL;
    return 0;
}


/* A size with no unit keeps its documented meaning (bytes) in a file, with a warning:
 * "1" there is more likely a slip than one byte. */
static void bare_size_warning(const struct ydoc *p, const yaml_node_t *v, const char *what)
{
    if (units_size_is_bare(ydoc_text(v)))
        log_warn("%s:%lu:%lu: %s '%s' has no unit and is read as %s bytes, as documented; "
                 "add one (%sB for bytes, or G, MiB...)", p->name,
                 (unsigned long)v->start_mark.line + 1, (unsigned long)v->start_mark.column + 1,
                 what, ydoc_text(v), ydoc_text(v), ydoc_text(v));
}

/* audit: NAME: SIZE ("audit NAME" in messages, example as the hint). */
static int parse_audit_size(struct ydoc *p, const yaml_node_t *v, const char *name,
                            const char *example, uint64_t *out)
{
    char what[64], shape[96], why[128];
    snprintf(what, sizeof what, "audit %s", name);
    snprintf(shape, sizeof shape, "%s as a size (e.g. %s)", what, example);
    if (ydoc_want(p, v, YAML_SCALAR_NODE, shape))
        return -EINVAL;
    if (units_parse_size(ydoc_text(v), 0, out, why, sizeof why))
        return ydoc_fail(p, v, "%s: %s", what, why);
    bare_size_warning(p, v, what);
    return 0;
}

static int parse_audit_key(struct ydoc *p, const yaml_node_t *k, const yaml_node_t *v,
                           struct config *c)
{
    const char *key = ydoc_text(k);
    unsigned long ul;
    if (!strcmp(key, "interval_ms")) {
        if (ydoc_uint(p, v, "audit interval_ms", 3600000, &ul))
            return -EINVAL;
        if (ul && ul < 100)
            return ydoc_fail(p, v, "audit interval_ms must be 0 (off) or at least 100");
        c->audit_interval_ms = (unsigned)ul;
    } else if (!strcmp(key, "kill")) {
        if (ydoc_bool(p, v, "audit kill", &c->audit_kill))
            return -EINVAL;
    } else if (!strcmp(key, "action")) {
        if (v->type != YAML_SCALAR_NODE ||
            (strcmp(ydoc_text(v), "report") && strcmp(ydoc_text(v), "kill")))
            return ydoc_fail(p, v, "audit action must be report (log what is found) or kill "
                                   "(also kill the processes found, but the exempt)");
        c->audit_kill = !strcmp(ydoc_text(v), "kill");
    } else if (!strcmp(key, "exempt")) {
        return parse_exempt(p, v, c);
    } else if (!strcmp(key, "overhead")) {
        return parse_audit_size(p, v, "overhead", "1G", &c->audit_overhead);
    } else if (!strcmp(key, "process_overhead")) {
        return parse_audit_size(p, v, "process_overhead", "64M", &c->audit_process_overhead);
    } else if (!strcmp(key, "mps_server_max")) {
        return parse_audit_size(p, v, "mps_server_max", "1G", &c->audit_mps_server_max);
    } else if (!strcmp(key, "leave_grace_ms")) {
        if (ydoc_uint(p, v, "audit leave_grace_ms", 600000, &ul))
            return -EINVAL;
        c->audit_leave_grace_ms = (unsigned)ul;
    } else {
        return ydoc_fail(p, k, "unknown key '%s' in audit (expected interval_ms, action, exempt, "
                               "overhead, process_overhead, mps_server_max, leave_grace_ms or "
                               "kill)", key);
    }
    return 0;
}

static int parse_audit(struct ydoc *p, const yaml_node_t *n, struct config *c)
{
    if (ydoc_want(p, n, YAML_MAPPING_NODE, "audit as a mapping { interval_ms: N, action: "
                                           "report|kill, exempt: [...] }"))
        return -EINVAL;
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        if (ydoc_want(p, k, YAML_SCALAR_NODE, "a key") || parse_audit_key(p, k, v, c))
            return -EINVAL;
    }
    return 0;
}

static int parse_memory(struct ydoc *p, const yaml_node_t *n, struct config_tenant *t)
{
    if (ydoc_want(p, n, YAML_MAPPING_NODE,
             "memory as a mapping of GPU (index or GPU-uuid) to size, e.g. { 0: 40G, 1: 50% }"))
        return -EINVAL;
    size_t count = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    t->quotas = calloc(count ? count : 1, sizeof *t->quotas);
    if (!t->quotas)
        return -ENOMEM;
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        struct config_quota *q = &t->quotas[t->n_quotas];
        if (ydoc_want(p, k, YAML_SCALAR_NODE, "a GPU index or GPU-uuid"))
            return -EINVAL;
        const char *key = ydoc_text(k);
        if (!strncmp(key, "GPU-", 4) || !strncmp(key, "MIG-", 4)) {
            if (strlen(key) >= sizeof q->uuid)
                return ydoc_fail(p, k, "GPU uuid '%s' is too long", key);
            q->index = -1;
            snprintf(q->uuid, sizeof q->uuid, "%s", key);
        } else {
            unsigned long idx;
            if (ydoc_uint(p, k, "a GPU index or GPU-uuid", KAIROS_MAX_GPUS - 1, &idx))
                return -EINVAL;
            q->index = (int)idx;
        }
        for (size_t i = 0; i < t->n_quotas; i++)
            if (t->quotas[i].index == q->index && !strcmp(t->quotas[i].uuid, q->uuid))
                return ydoc_fail(p, k, "GPU '%s' appears twice in tenant '%s'", key, t->name);
        if (ydoc_want(p, v, YAML_SCALAR_NODE, "a size such as 40G, 512MiB or 50%"))
            return -EINVAL;
        if (strlen(ydoc_text(v)) >= sizeof q->value || !*ydoc_text(v))
            return ydoc_fail(p, v, "expected a size such as 40G, 512MiB or 50%%, found '%s'",
                        ydoc_text(v));
        snprintf(q->value, sizeof q->value, "%s", ydoc_text(v));
        q->line = (unsigned)v->start_mark.line + 1;
        q->column = (unsigned)v->start_mark.column + 1;
        t->n_quotas++;
    }
    return 0;
}

static int parse_policy(struct ydoc *p, const yaml_node_t *n, struct sched_policy *pol)
{
    if (ydoc_want(p, n, YAML_MAPPING_NODE,
             "a compute policy { share: 40%, limit: 60%, priority: latency|normal|batch }"))
        return -EINVAL;
    memset(pol, 0, sizeof *pol);
    const yaml_node_t *share = NULL;
    char why[256];
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        if (ydoc_want(p, k, YAML_SCALAR_NODE, "a key"))
            return -EINVAL;
        const char *key = ydoc_text(k);
        int rc;
        if (!strcmp(key, "share")) {
            if (ydoc_want(p, v, YAML_SCALAR_NODE, "share"))
                return -EINVAL;
            rc = policy_parse_percent("share", ydoc_text(v), &pol->share, why, sizeof why);
            share = v;
        } else if (!strcmp(key, "limit")) {
            if (ydoc_want(p, v, YAML_SCALAR_NODE, "limit"))
                return -EINVAL;
            rc = policy_parse_limit(ydoc_text(v), &pol->limit, why, sizeof why);
        } else if (!strcmp(key, "priority")) {
            if (ydoc_want(p, v, YAML_SCALAR_NODE, "priority"))
                return -EINVAL;
            rc = policy_parse_priority(ydoc_text(v), &pol->prio, why, sizeof why);
        } else {
            return ydoc_fail(p, k, "unknown key '%s' in a compute policy (expected share, limit or "
                              "priority)", key);
        }
        if (rc)
            return ydoc_fail(p, v, "%s", why);
    }
    if (policy_check(pol, why, sizeof why))
        return ydoc_fail(p, share ? share : n, "%s", why);
    return 0;
}

int config_parse_policy(const char *name, struct yaml_document_s *doc, struct yaml_node_s *node,
                        struct sched_policy *out, char *err, size_t err_len)
{
    struct ydoc p = {.name = name, .doc = doc, .err = err, .err_len = err_len};
    return parse_policy(&p, node, out);
}

static int parse_compute(struct ydoc *p, const yaml_node_t *n, struct config_tenant *t)
{
    if (ydoc_want(p, n, YAML_MAPPING_NODE,
             "compute as a mapping of GPU index to policy, e.g. { 0: { share: 40% } }"))
        return -EINVAL;
    size_t count = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    t->compute = calloc(count ? count : 1, sizeof *t->compute);
    if (!t->compute)
        return -ENOMEM;
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        struct config_compute *c = &t->compute[t->n_compute];
        unsigned long idx;
        if (ydoc_uint(p, k, "a GPU index", KAIROS_MAX_GPUS - 1, &idx))
            return -EINVAL;
        for (size_t i = 0; i < t->n_compute; i++)
            if (t->compute[i].gpu == idx)
                return ydoc_fail(p, k, "GPU %lu appears twice in tenant '%s' compute", idx,
                                 t->name);
        c->gpu = (unsigned)idx;
        if (parse_policy(p, v, &c->pol))
            return -EINVAL;
        c->line = (unsigned)k->start_mark.line + 1;
        c->column = (unsigned)k->start_mark.column + 1;
        t->n_compute++;
    }
    return 0;
}

/* The shares of one GPU's tenants may not add up above 100 % (policy.c's rule). */
static int check_shares(struct ydoc *p, const yaml_node_t *n, const struct config *c)
{
    struct policy_shares shares = {0};
    char why[512];
    int rc = config_shares(c, &shares);
    if (rc == 0 && policy_shares_check(&shares, why, sizeof why))
        rc = ydoc_fail(p, n, "%s", why);
    policy_shares_free(&shares);
    return rc;
}

/* sms: P%: the share of the GPU's SMs a space tenant's MPS clients may use. */
static int parse_sms(struct ydoc *p, const yaml_node_t *v, struct config_tenant *t)
{
    double f = 0;
    char why[256];
    if (ydoc_want(p, v, YAML_SCALAR_NODE, "sms: a percentage of the GPU's SMs, e.g. 50%"))
        return -EINVAL;
    if (policy_parse_percent("sms", ydoc_text(v), &f, why, sizeof why))
        return ydoc_fail(p, v, "%s", why);
    unsigned pct = (unsigned)(f * 100 + 0.5);
    double off = f * 100 - pct;
    if (pct < 1 || off > 1e-6 || off < -1e-6)
        return ydoc_fail(p, v, "sms: '%s': MPS takes a whole percentage of the SMs from 1%% to "
                         "100%% (e.g. 50%%)", ydoc_text(v));
    t->sms_pct = pct;
    return 0;
}

static int parse_tenant(struct ydoc *p, const yaml_node_t *n, struct config *c)
{
    if (ydoc_want(p, n, YAML_MAPPING_NODE, "a tenant as a mapping { name: NAME, memory: {...} }"))
        return -EINVAL;
    struct config_tenant *t = &c->tenants[c->n_tenants++];
    t->line = (unsigned)n->start_mark.line + 1;
    t->column = (unsigned)n->start_mark.column + 1;
    const yaml_node_t *memory = NULL, *compute = NULL, *sms = NULL;
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        if (ydoc_want(p, k, YAML_SCALAR_NODE, "a key"))
            return -EINVAL;
        if (!strcmp(ydoc_text(k), "name")) {
            if (ydoc_want(p, v, YAML_SCALAR_NODE, "a tenant name"))
                return -EINVAL;
            if (strlen(ydoc_text(v)) >= KAIROS_NAME_MAX || !tenant_name_valid(ydoc_text(v)))
                return ydoc_fail(p, v,
                            "tenant name '%s' must be 1-63 characters of A-Z a-z 0-9 . _ - "
                            "(not starting with . or -)", ydoc_text(v));
            snprintf(t->name, sizeof t->name, "%s", ydoc_text(v));
        } else if (!strcmp(ydoc_text(k), "memory")) {
            memory = v;
        } else if (!strcmp(ydoc_text(k), "compute")) {
            compute = v;
        } else if (!strcmp(ydoc_text(k), "members")) {
            if (members_config_parse(p, v, &t->members))
                return -EINVAL;
        } else if (!strcmp(ydoc_text(k), "managed")) {
            if (ydoc_want(p, v, YAML_SCALAR_NODE, "managed: refuse or managed: charge"))
                return -EINVAL;
            if (strcmp(ydoc_text(v), "refuse") && strcmp(ydoc_text(v), "charge"))
                return ydoc_fail(p, v, "managed: '%s' is neither refuse (managed memory, "
                                 "cudaMallocManaged, refused: the default) nor charge (allowed, "
                                 "each range charged in full against the quota)", ydoc_text(v));
            t->managed_charge = !strcmp(ydoc_text(v), "charge");
        } else if (!strcmp(ydoc_text(k), "fault_domain")) {
            if (ydoc_want(p, v, YAML_SCALAR_NODE, "fault_domain: NAME") ||
                strlen(ydoc_text(v)) >= KAIROS_NAME_MAX || !tenant_name_valid(ydoc_text(v)))
                return ydoc_fail(p, v, "fault_domain: '%s' must be 1-63 characters of A-Z a-z "
                                 "0-9 . _ - (not starting with . or -)", ydoc_text(v));
            snprintf(t->fault_domain, sizeof t->fault_domain, "%s", ydoc_text(v));
        } else if (!strcmp(ydoc_text(k), "sms")) {
            if (parse_sms(p, v, t))
                return -EINVAL;
            sms = v;
        } else {
            return ydoc_fail(p, k, "unknown key '%s' in a tenant (expected name, memory, compute, "
                             "members, managed, fault_domain or sms)", ydoc_text(k));
        }
    }
    if (!t->name[0])
        return ydoc_fail(p, n, "tenant without a name (add name: NAME)");
    if (sms && !t->fault_domain[0])
        return ydoc_fail(p, sms, "sms: caps the SMs of a fault domain's MPS clients, and tenant "
                         "'%s' has no fault_domain: add fault_domain: NAME (space mode, "
                         "docs/space.md) or drop sms", t->name);
    for (size_t i = 0; i + 1 < c->n_tenants; i++)
        if (!strcmp(c->tenants[i].name, t->name))
            return ydoc_fail(p, n, "tenant '%s' is declared twice (first at line %u)", t->name,
                        c->tenants[i].line);
    int rc = memory ? parse_memory(p, memory, t) : 0;
    if (rc)
        return rc;
    if (compute)
        return parse_compute(p, compute, t);
    return 0;
}

static int parse_tenants(struct ydoc *p, const yaml_node_t *n, struct config *c)
{
    if (ydoc_want(p, n, YAML_SEQUENCE_NODE, "tenants as a list of { name: ..., memory: ... }"))
        return -EINVAL;
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count > KAIROS_MAX_TENANTS)
        return ydoc_fail(p, n, "too many tenants (at most %d)", KAIROS_MAX_TENANTS);
    c->tenants = calloc(count ? count : 1, sizeof *c->tenants);
    if (!c->tenants)
        return -ENOMEM;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        int rc = parse_tenant(p, yaml_document_get_node(p->doc, *it), c);
        if (rc)
            return rc;
    }
    return check_shares(p, n, c);
}

static int parse_root(struct ydoc *p, const yaml_node_t *root, struct config *c)
{
    if (!root) {
        c->empty = true;
        return 0; /* an empty file: all defaults */
    }
    if (ydoc_want(p, root, YAML_MAPPING_NODE,
                  "a mapping of settings (socket, state, tenants, ...)"))
        return -EINVAL;
    const yaml_node_t *reserve = NULL; /* admin_reserve, when given */
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start;
         pr < root->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        if (ydoc_want(p, k, YAML_SCALAR_NODE, "a setting name"))
            return -EINVAL;
        const char *key = ydoc_text(k); /* unique: ydoc_check_unique_keys */
        unsigned long ul;
        int rc;
        if (!strcmp(key, "socket"))
            rc = parse_path(p, v, "socket", c->socket, sizeof c->socket);
        else if (!strcmp(key, "state"))
            rc = parse_path(p, v, "state", c->state, sizeof c->state);
        else if (!strcmp(key, "admins"))
            rc = parse_admins(p, v, c);
        else if (!strcmp(key, "unprivileged_cgroups"))
            rc = parse_unprivileged(p, v, c);
        else if (!strcmp(key, "audit"))
            rc = parse_audit(p, v, c);
        else if (!strcmp(key, "tenants")) {
            rc = parse_tenants(p, v, c);
            c->tenants_given = true;
        }
        else if (!strcmp(key, "gpus")) {
            rc = ydoc_uint(p, v, "gpus", KAIROS_MAX_GPUS, &ul);
            c->gpus = (unsigned)ul;
        } else if (!strcmp(key, "metrics")) {
            rc = parse_metrics(p, v, &c->metrics);
        } else if (!strcmp(key, "space")) {
            rc = space_config_parse(p, v, &c->space);
        } else if (!strcmp(key, "kernel_log")) {
            rc = parse_kernel_log(p, v, c->kernel_log, sizeof c->kernel_log);
        } else if (!strcmp(key, "time_mode")) {
            rc = parse_time_mode(p, v, &c->time_mode);
        } else if (!strcmp(key, "latency_yield_us")) {
            rc = parse_latency_yield(p, v, &c->latency_yield_us);
        } else if (!strcmp(key, "max_connections")) {
            rc = ydoc_uint(p, v, "max_connections", 65536, &ul);
            if (!rc && ul == 0)
                rc = ydoc_fail(p, v, "max_connections must be at least 1");
            c->max_connections = (unsigned)ul;
        } else if (!strcmp(key, "max_connections_per_user")) {
            rc = ydoc_uint(p, v, "max_connections_per_user", 65536, &ul);
            if (!rc && ul == 0)
                rc = ydoc_fail(p, v, "max_connections_per_user must be at least 1");
            c->max_connections_per_user = (unsigned)ul;
        } else if (!strcmp(key, "admin_reserve")) {
            rc = ydoc_uint(p, v, "admin_reserve", 65535, &ul);
            c->admin_reserve = (unsigned)ul;
            reserve = v;
        } else if (!strcmp(key, "register_timeout_ms")) {
            rc = ydoc_uint(p, v, "register_timeout_ms", 3600000, &ul);
            if (!rc && ul < 100)
                rc = ydoc_fail(p, v, "register_timeout_ms must be at least 100");
            c->register_timeout_ms = (unsigned)ul;
        } else if (!strcmp(key, "usage_save_interval_ms")) {
            rc = ydoc_uint(p, v, "usage_save_interval_ms", 3600000, &ul);
            if (!rc && ul < 1000)
                rc = ydoc_fail(p, v, "usage_save_interval_ms must be at least 1000 (each save "
                               "writes the whole state file)");
            c->usage_save_interval_ms = (unsigned)ul;
        } else
            rc = ydoc_fail(p, k,
                      "unknown setting '%s' (expected socket, state, admins, "
                      "unprivileged_cgroups, audit, gpus, "
                      "max_connections, max_connections_per_user, admin_reserve, "
                      "register_timeout_ms, usage_save_interval_ms, metrics, time_mode, "
                      "latency_yield_us, space, kernel_log or tenants)",
                      key);
        if (rc)
            return rc;
    }
    if (reserve && c->admin_reserve >= c->max_connections)
        return ydoc_fail(p, reserve, "admin_reserve (%u) must be below max_connections (%u): "
                         "the others need at least one", c->admin_reserve, c->max_connections);
    return 0;
}

void config_defaults(struct config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->socket, sizeof c->socket, "%s", KAIROS_DEFAULT_SOCKET);
    snprintf(c->state, sizeof c->state, "%s", CONFIG_DEFAULT_STATE);
    snprintf(c->kernel_log, sizeof c->kernel_log, "%s", CONFIG_DEFAULT_KERNEL_LOG);
    c->audit_interval_ms = 1000;
    c->audit_overhead = 1ull << 30;
    c->audit_mps_server_max = 1ull << 30;
    c->audit_leave_grace_ms = 2000;
    /* A connection costs kairosd about 2 KiB and two descriptors, the kernel a few KiB
     * more (scripts/bench-connections), and 128 KiB of send buffer at worst (a peer that
     * never reads): 512 per user fits a job of several hundred GPU processes and pins at
     * most 64 MiB of kernel memory; 4096 in all take 8256 descriptors. */
    c->max_connections = 4096;
    c->max_connections_per_user = 512;
    c->admin_reserve = 16;
    c->register_timeout_ms = 5000;
    c->usage_save_interval_ms = 60000; /* a crash loses at most a minute of counting */
    c->time_mode = SCHED_MODE_AUTO; /* do no harm: docs/scheduler.md, "The rule" */
    c->latency_yield_us = SCHED_YIELD_US;
    space_config_defaults(&c->space);
}

void config_free(struct config *c)
{
    for (size_t i = 0; i < c->n_tenants; i++) {
        free(c->tenants[i].quotas);
        free(c->tenants[i].compute);
    }
    free(c->tenants);
    free(c->admins);
    free(c->audit_exempt);
    c->audit_exempt = NULL;
    c->n_audit_exempt = 0;
    c->tenants = NULL;
    c->admins = NULL;
    c->n_tenants = c->n_admins = 0;
    c->n_unprivileged_cgroups = 0;
}

int config_parse(const char *name, const char *text, size_t len, struct config *c, char *err,
                 size_t err_len)
{
    config_defaults(c);
    yaml_parser_t parser;
    yaml_document_t doc;
    int rc = 0;
    if (!yaml_parser_initialize(&parser))
        return -ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        snprintf(err, err_len, "%s:%lu:%lu: %s%s%s", name,
                 (unsigned long)parser.problem_mark.line + 1,
                 (unsigned long)parser.problem_mark.column + 1,
                 parser.problem ? parser.problem : "not valid YAML",
                 parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return -EINVAL;
    }
    struct ydoc p = {.name = name, .doc = &doc, .err = err, .err_len = err_len};
    rc = ydoc_check_unique_keys(&p);
    if (!rc)
        rc = ydoc_refuse_more(&p, &parser);
    if (!rc)
        rc = parse_root(&p, yaml_document_get_root_node(&doc), c);
    snprintf(c->path, sizeof c->path, "%s", name);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (rc) {
        if (rc == -ENOMEM)
            snprintf(err, err_len, "%s: out of memory", name);
        config_free(c);
    }
    return rc;
}

int config_load(const char *path, struct config *c, char *err, size_t err_len)
{
    int rc = 0;
    char *text = NULL;
    FILE *f = fopen(path, "re");
    if (!f) {
        rc = -errno;
        snprintf(err, err_len, "%s: cannot open the configuration: %s", path, strerror(errno));
        goto out;
    }
    size_t cap = 4096, len = 0;
    text = malloc(cap);
    if (!text) {
        rc = -ENOMEM;
        goto out;
    }
    size_t n;
    while ((n = fread(text + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            if (cap >= (1u << 24)) {
                rc = -EFBIG;
                snprintf(err, err_len, "%s: larger than 16 MiB, not a configuration", path);
                goto out;
            }
            char *grown = realloc(text, cap * 2);
            if (!grown) {
                rc = -ENOMEM;
                goto out;
            }
            text = grown;
            cap *= 2;
        }
    }
    if (ferror(f)) {
        rc = -EIO;
        snprintf(err, err_len, "%s: read error", path);
        goto out;
    }
    rc = config_parse(path, text, len, c, err, err_len);
out:
    free(text);
    if (f)
        fclose(f);
    return rc;
}

int config_shares(const struct config *c, struct policy_shares *out)
{
    for (size_t i = 0; i < c->n_tenants; i++)
        for (size_t j = 0; j < c->tenants[i].n_compute; j++) {
            const struct config_compute *cc = &c->tenants[i].compute[j];
            int rc = policy_shares_add(out, c->tenants[i].name, cc->gpu, cc->pol.share);
            if (rc)
                return rc;
        }
    return 0;
}

int config_reload_check(const struct config *cur, const struct config *next, char *err,
                        size_t err_len)
{
    if (next->n_tenants || next->tenants_given || !cur->n_tenants)
        return 0;
    char names[200];
    size_t len = 0;
    names[0] = 0;
    for (size_t i = 0; i < cur->n_tenants && len < sizeof names; i++) {
        int n = snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
                         cur->tenants[i].name);
        len += n > 0 ? (size_t)n : 0;
    }
    snprintf(err, err_len, "%s %s, while the configuration in force declares %zu tenant(s) "
             "(%s): refused as a file emptied or cut by mistake. To remove every configured "
             "tenant, write 'tenants: []' in it and reload again",
             next->path[0] ? next->path : "the new configuration",
             next->empty ? "is empty" : "has no 'tenants:' list", cur->n_tenants, names);
    return -EINVAL;
}
