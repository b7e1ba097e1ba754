/* state.c - the state file of run-time tenants: atomic JSON writes that fail
 * without changing the previous file, bounded reads that set a corrupt or oversized
 * file aside instead of failing, and entries refused one by one (a bad entry, a
 * GPU the node lacks, a tenant beyond the limit) instead of the whole file. See
 * state.h. */
#include "daemon/state/state.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/policy.h"
#include "daemon/state/handovers_state.h"
#include "daemon/state/usage_state.h"

#define STATE_VERSION 1

/* {"0": {"share_ppm": 300000, "limit_ppm": 0, "priority": "latency"}}, or NULL when
 * the tenant has none (or out of memory: then the policies are not written). */
static json_t *compute_json(const struct state_settings *st, unsigned n_gpus)
{
    json_t *all = NULL;
    for (unsigned g = 0; g < n_gpus; g++) {
        if (!st->has_compute[g])
            continue;
        json_t *one = json_object();
        if (!all)
            all = json_object();
        if (!one || !all) {
            json_decref(one);
            json_decref(all);
            return NULL;
        }
        char key[16];
        snprintf(key, sizeof key, "%u", g);
        const struct sched_policy *pol = &st->compute[g];
        json_object_set_new(one, "share_ppm", json_integer(policy_ppm(pol->share)));
        json_object_set_new(one, "limit_ppm", json_integer(policy_ppm(pol->limit)));
        json_object_set_new(one, "priority", json_string(sched_prio_name(pol->prio)));
        json_object_set_new(all, key, one);
    }
    return all;
}

/* {"users": [1000], "groups": [], "cgroups": ["/slurm/job_*"]}. */
static json_t *members_json(const struct member_rules *r)
{
    json_t *users = json_array(), *groups = json_array(), *cgroups = json_array();
    for (uint32_t i = 0; i < r->n_users; i++)
        json_array_append_new(users, json_integer(r->users[i]));
    for (uint32_t i = 0; i < r->n_groups; i++)
        json_array_append_new(groups, json_integer(r->groups[i]));
    for (uint32_t i = 0; i < r->n_cgroups; i++)
        json_array_append_new(cgroups, json_string(r->cgroups[i]));
    return json_pack("{s:o, s:o, s:o}", "users", users, "groups", groups, "cgroups", cgroups);
}

/* One tenant's entry, its settings st; NULL when out of memory. */
static json_t *entry_json(const struct ledger_tenant *t, const struct state_settings *st,
                          unsigned n_gpus)
{
    json_t *quota = json_object(), *jt = json_object();
    if (!quota || !jt) {
        json_decref(quota);
        json_decref(jt);
        return NULL;
    }
    for (unsigned g = 0; g < n_gpus; g++) {
        char key[16];
        snprintf(key, sizeof key, "%u", g);
        if (st->has_quota[g])
            json_object_set_new(quota, key, json_integer((json_int_t)st->quota[g]));
    }
    json_object_set_new(jt, "name", json_string(t->name));
    json_object_set_new(jt, "ephemeral", json_boolean(t->flags & LEDGER_TENANT_EPHEMERAL));
    if (t->flags & LEDGER_TENANT_REMOVED) /* by a reload, kept while it holds anything */
        json_object_set_new(jt, "removed", json_true());
    json_object_set_new(jt, "quota", quota);
    if (st->owner_pid)
        json_object_set_new(jt, "owner_pid", json_integer(st->owner_pid));
    json_t *compute = compute_json(st, n_gpus);
    if (compute)
        json_object_set_new(jt, "compute", compute);
    json_t *members = st->has_members ? members_json(&st->members) : NULL;
    if (members)
        json_object_set_new(jt, "members", members);
    if (st->managed_charge) /* absent: refuse */
        json_object_set_new(jt, "managed", json_string("charge"));
    if (st->fault_domain[0]) /* absent: none */
        json_object_set_new(jt, "fault_domain", json_string(st->fault_domain));
    return jt;
}

static json_t *state_json(const struct ledger *l, const struct state_settings_io *io,
                          const struct usage_book *usage, const struct ledger_tenant *skip,
                          json_t *handovers)
{
    json_t *root = json_object(), *list = json_array();
    struct state_settings *st = malloc(sizeof *st);
    if (!root || !list || !st)
        goto fail;
    json_object_set_new(root, "version", json_integer(STATE_VERSION));
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct ledger_tenant *t = l->tenants[i];
        memset(st, 0, sizeof *st);
        if (t == skip || !io->get(io->ctx, l, t, st))
            continue;
        json_t *jt = entry_json(t, st, l->n_gpus);
        if (!jt)
            goto fail;
        json_array_append_new(list, jt);
    }
    free(st);
    json_object_set_new(root, "tenants", list);
    if (handovers)
        json_object_set(root, "handovers", handovers);
    json_t *counters = usage ? usage_state_json(usage, l, skip) : NULL;
    if (counters) /* out of memory: saved without the counters, which stay as they are */
        json_object_set_new(root, USAGE_STATE_KEY, counters);
    return root;
fail:
    free(st);
    json_decref(list);
    json_decref(root);
    return NULL;
}

/* Writes text to path atomically: a temporary file, fsync, rename, fsync of the
 * directory. Any failure leaves the previous file as it was. */
static int write_atomically(const char *path, const char *text, char *err, size_t err_len)
{
    int rc = 0, fd = -1;
    char tmp[PATH_MAX], dir[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        snprintf(err, err_len, "%s: path too long", path);
        return -ENAMETOOLONG;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, err_len, "cannot write %s: %s", tmp, strerror(errno));
        return rc;
    }
    size_t len = strlen(text), done = 0;
    while (done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : -ENOSPC;
            snprintf(err, err_len, "cannot write %s: %s", tmp, strerror(-rc));
            goto out;
        }
        done += (size_t)n;
    }
    if (fsync(fd)) {
        rc = -errno;
        snprintf(err, err_len, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd)) {
        fd = -1;
        rc = -errno;
        snprintf(err, err_len, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path)) {
        rc = -errno;
        snprintf(err, err_len, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto out;
    }
    snprintf(dir, sizeof dir, "%s", path);
    fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        fsync(fd); /* the rename itself is durable; failure here is not worth a refusal */
out:
    if (fd >= 0)
        close(fd);
    if (rc)
        unlink(tmp);
    return rc;
}

int state_save(const char *path, const struct ledger *l, const struct state_settings_io *io,
               const struct ledger_tenant *skip, char *err, size_t err_len)
{
    return state_save_all(path, l, io, skip, NULL, err, err_len);
}

int state_save_all(const char *path, const struct ledger *l, const struct state_settings_io *io,
                   const struct ledger_tenant *skip, json_t *handovers, char *err,
                   size_t err_len)
{
    return state_save_counted(path, l, io, NULL, skip, handovers, NULL, err, err_len);
}

/* The document as text, or NULL when out of memory. */
static char *dump(json_t *root)
{
    return root ? json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
}

int state_save_counted(const char *path, const struct ledger *l,
                       const struct state_settings_io *io, const struct usage_book *usage,
                       const struct ledger_tenant *skip, json_t *handovers, bool *usage_saved,
                       char *err, size_t err_len)
{
    json_t *root = state_json(l, io, usage, skip, handovers);
    char *text = dump(root);
    int rc;
    bool with_usage = root && json_object_get(root, USAGE_STATE_KEY);
    if (text && strlen(text) + 1 > STATE_MAX_BYTES && with_usage) {
        /* the tenants first: without the counters, which stay as they are */
        free(text);
        json_object_del(root, USAGE_STATE_KEY);
        with_usage = false;
        text = dump(root);
    }
    if (usage_saved)
        *usage_saved = false;
    if (!text) {
        snprintf(err, err_len, "out of memory");
        rc = -ENOMEM;
    } else if (strlen(text) + 1 > STATE_MAX_BYTES) {
        snprintf(err, err_len, "the state would exceed %d MiB", STATE_MAX_BYTES >> 20);
        rc = -EFBIG;
    } else {
        size_t len = strlen(text);
        char *nl = realloc(text, len + 2);
        if (nl) {
            text = nl;
            memcpy(text + len, "\n", 2);
        }
        rc = write_atomically(path, text, err, err_len);
        if (!rc && usage_saved)
            *usage_saved = with_usage;
    }
    free(text);
    json_decref(root);
    return rc;
}

static int set_aside(const char *path, char *out, size_t out_len)
{
    snprintf(out, out_len, "%s.corrupt-%lld", path, (long long)time(NULL));
    return rename(path, out) ? -errno : 0;
}

/* The document's frame: {"version": 1, "tenants": [...]}. Anything else makes the
 * whole file unreadable. */
static int check_frame(json_t *root, char *err, size_t err_len)
{
    if (!json_is_object(root)) {
        snprintf(err, err_len, "the top level is not an object");
        return -EINVAL;
    }
    json_t *v = json_object_get(root, "version");
    if (!json_is_integer(v) || json_integer_value(v) != STATE_VERSION) {
        snprintf(err, err_len, "\"version\" is missing or not %d", STATE_VERSION);
        return -EINVAL;
    }
    if (!json_is_array(json_object_get(root, "tenants"))) {
        snprintf(err, err_len, "\"tenants\" is missing or not a list");
        return -EINVAL;
    }
    return 0;
}

/* One entry of "tenants": a valid name and a quota of GPU index to bytes, each
 * GPU one this node has (a quota of 0 on a missing GPU is harmless). 0, or -EINVAL
 * with why (which names the tenant when it can). */
static int check_entry(json_t *jt, size_t i, unsigned n_gpus, char *why, size_t why_len)
{
    json_t *name = json_object_get(jt, "name"), *quota = json_object_get(jt, "quota");
    json_t *eph = json_object_get(jt, "ephemeral"), *removed = json_object_get(jt, "removed");
    if (!json_is_object(jt) || !json_is_string(name) ||
        !ledger_name_valid(json_string_value(name)) || !json_is_object(quota) ||
        (eph && !json_is_boolean(eph)) || (removed && !json_is_boolean(removed))) {
        snprintf(why, why_len, "entry %zu: needs a valid \"name\" and a \"quota\" object", i);
        return -EINVAL;
    }
    const char *key;
    json_t *q;
    json_object_foreach(quota, key, q) {
        char *end;
        unsigned long g = strtoul(key, &end, 10);
        if (!*key || *end || key[0] == '-' || g >= KAIROS_MAX_GPUS || !json_is_integer(q) ||
            json_integer_value(q) < 0 || (uint64_t)json_integer_value(q) > KAIROS_BYTES_MAX) {
            snprintf(why, why_len, "tenant '%s': quota \"%.16s\" is not a GPU index with a "
                     "byte count", json_string_value(name), key);
            return -EINVAL;
        }
        if (g >= n_gpus && json_integer_value(q) > 0) {
            snprintf(why, why_len, "tenant '%s' has a quota on GPU %lu, which this node does not "
                     "have (it has %u)", json_string_value(name), g, n_gpus);
            return -EINVAL;
        }
    }
    return 0;
}

static int refuse_policy(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse_policy(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* A ppm field: an integer from 0 to KAIROS_PPM (larger ones are left to policy.c's
 * words, up to UINT32_MAX). */
static int ppm_field(json_t *one, const char *key, uint32_t *out, char *why, size_t why_len)
{
    json_t *v = json_object_get(one, key);
    if (!v) {
        *out = 0;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
        return refuse_policy(why, why_len, "\"%s\" is not a number of parts per million", key);
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

/* One GPU's compute policy from the file, checked as every policy is (policy.c). */
static int policy_json(json_t *one, struct sched_policy *out, char *why, size_t why_len)
{
    if (!json_is_object(one))
        return refuse_policy(why, why_len, "not an object {\"share_ppm\": N, \"limit_ppm\": "
                             "N, \"priority\": NAME}");
    const char *key;
    json_t *v;
    json_object_foreach(one, key, v) {
        if (strcmp(key, "share_ppm") && strcmp(key, "limit_ppm") && strcmp(key, "priority"))
            return refuse_policy(why, why_len, "unknown key \"%s\"", key);
    }
    uint32_t share, limit;
    if (ppm_field(one, "share_ppm", &share, why, why_len) ||
        ppm_field(one, "limit_ppm", &limit, why, why_len))
        return -EINVAL;
    enum sched_prio prio = SCHED_PRIO_NORMAL;
    json_t *p = json_object_get(one, "priority");
    if (p && !json_is_string(p))
        return refuse_policy(why, why_len, "\"priority\" is not latency, normal or batch");
    if (p && policy_parse_priority(json_string_value(p), &prio, why, why_len))
        return -EINVAL;
    return policy_from_ppm(share, limit, (unsigned)prio, out, why, why_len);
}

/* The tenant's "compute", GPU by GPU: a bad policy is refused alone (warn), the
 * tenant and its other policies kept. */
static void load_compute(json_t *jt, const struct ledger_tenant *t, unsigned n_gpus,
                         struct state_settings *st, state_warn_fn warn, void *warn_ctx)
{
    json_t *compute = json_object_get(jt, "compute");
    char why[256], msg[512];
    if (!compute)
        return;
    if (!json_is_object(compute)) {
        snprintf(msg, sizeof msg, "tenant '%s': \"compute\" is not an object of GPU index to "
                 "policy; refused, the tenant is kept without compute policies", t->name);
        if (warn)
            warn(warn_ctx, msg);
        return;
    }
    const char *key;
    json_t *one;
    json_object_foreach(compute, key, one) {
        char *end;
        unsigned long g = strtoul(key, &end, 10);
        struct sched_policy pol;
        int rc;
        if (!*key || *end || key[0] == '-' || g >= n_gpus)
            rc = refuse_policy(why, sizeof why, "\"%s\" is not a GPU of this node (0-%d)", key,
                               (int)n_gpus - 1);
        else
            rc = policy_json(one, &pol, why, sizeof why);
        if (rc) {
            snprintf(msg, sizeof msg, "tenant '%s': compute policy \"%s\" refused: %s; the "
                     "tenant is kept without it", t->name, key, why);
            if (warn)
                warn(warn_ctx, msg);
            continue;
        }
        st->has_compute[g] = true;
        st->compute[g] = pol;
    }
}

/* An id list of "members" into ids; false when it is not one. */
static bool load_ids(json_t *list, uint32_t *ids, uint32_t *n)
{
    size_t i;
    json_t *v;
    if (!json_is_array(list) || json_array_size(list) > KAIROS_MEMBERS_MAX_IDS)
        return false;
    json_array_foreach(list, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= UINT32_MAX)
            return false;
        ids[(*n)++] = (uint32_t)json_integer_value(v);
    }
    return true;
}

/* The tenant's "members" rules: a bad one is refused whole (warn), and the tenant
 * is kept without rules (only administrators and admitted processes join: closed). */
static void load_members(json_t *jt, const struct ledger_tenant *t, struct state_settings *st,
                         state_warn_fn warn, void *warn_ctx)
{
    json_t *m = json_object_get(jt, "members");
    if (!m)
        return;
    struct member_rules r;
    memset(&r, 0, sizeof r);
    json_t *cg = json_object_get(m, "cgroups");
    bool ok = json_is_object(m) && load_ids(json_object_get(m, "users"), r.users, &r.n_users) &&
              load_ids(json_object_get(m, "groups"), r.groups, &r.n_groups) &&
              json_is_array(cg) && json_array_size(cg) <= KAIROS_MEMBERS_MAX_CGROUPS;
    size_t i;
    json_t *v;
    if (ok)
        json_array_foreach(cg, i, v) {
            const char *s = json_string_value(v);
            if (!s || s[0] != '/' || strlen(s) >= KAIROS_CGROUP_MAX) {
                ok = false;
                break;
            }
            snprintf(r.cgroups[r.n_cgroups++], KAIROS_CGROUP_MAX, "%s", s);
        }
    if (!ok) {
        char msg[512];
        snprintf(msg, sizeof msg, "tenant '%s': \"members\" is not {\"users\": [uid...], "
                 "\"groups\": [gid...], \"cgroups\": [\"/path\"...]}; refused, the tenant is "
                 "kept without members rules (administrators and admitted processes only)",
                 t->name);
        if (warn)
            warn(warn_ctx, msg);
        return;
    }
    st->has_members = true;
    st->members = r;
}

/* The tenant's "fault_domain" (set at run time): a name by the configuration's rule,
 * else refused alone (warn) and the tenant kept in no domain (time sharing, so it
 * shares no MPS server's fate with anyone). */
static void load_fault_domain(json_t *jt, const struct ledger_tenant *t,
                              struct state_settings *st, state_warn_fn warn, void *warn_ctx)
{
    json_t *d = json_object_get(jt, "fault_domain");
    if (!d)
        return;
    const char *name = json_string_value(d);
    if (name && strlen(name) == json_string_length(d) && strlen(name) < KAIROS_NAME_MAX &&
        ledger_name_valid(name)) {
        snprintf(st->fault_domain, sizeof st->fault_domain, "%s", name);
        return;
    }
    char msg[512];
    snprintf(msg, sizeof msg, "tenant '%s': \"fault_domain\" is not a fault domain's name (1-63 "
             "characters of A-Z a-z 0-9 . _ -); refused, the tenant is kept in no fault domain "
             "(set it again with kairos tenant set %s --fault-domain NAME)", t->name, t->name);
    if (warn)
        warn(warn_ctx, msg);
}

/* An entry kept out of the ledger: told to warn, and copied to aside (when given)
 * for the administrator. */
static void put_aside(json_t *jt, json_t *aside, state_warn_fn warn, void *warn_ctx,
                      const char *why)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s; this entry is set aside, the other tenants are loaded", why);
    if (warn)
        warn(warn_ctx, msg);
    if (aside)
        json_array_append(aside, jt);
}

/* The entry's quotas (checked by check_entry); on a tenant the configuration
 * declares, io takes them only on GPUs where it declares none (it owns the others). */
static void load_quota(json_t *jt, unsigned n_gpus, struct state_settings *st)
{
    const char *key;
    json_t *q;
    json_object_foreach(json_object_get(jt, "quota"), key, q) {
        unsigned long g = strtoul(key, NULL, 10);
        if (g < n_gpus) {
            st->has_quota[g] = true;
            st->quota[g] = (uint64_t)json_integer_value(q);
        }
    }
}

/* An entry for a tenant the configuration declares: what was set at run time and the
 * configuration does not own (registry.h) is taken; its compute policies, members
 * rules and fault domain, the configuration's, are not (told to warn). 0: no tenant
 * added. */
static int load_into_configured(json_t *jt, struct ledger *l, struct ledger_tenant *t,
                                const struct state_settings_io *io, struct state_settings *st,
                                state_warn_fn warn, void *warn_ctx)
{
    load_quota(jt, l->n_gpus, st);
    io->put(io->ctx, l, t, st);
    if ((json_object_get(jt, "compute") || json_object_get(jt, "members") ||
         json_object_get(jt, "fault_domain")) && warn) {
        char msg[512];
        snprintf(msg, sizeof msg, "tenant '%s' is declared in the configuration, which sets its "
                 "compute policies, members rules and fault domain: those of the state file "
                 "are dropped (its quotas on GPUs the configuration does not declare are kept)",
                 t->name);
        warn(warn_ctx, msg);
    }
    return 0;
}

/* Adds one checked entry to l; 1 when added, 0 when set aside or merged into a
 * configured tenant (its run-time settings). */
static int load_entry(json_t *jt, struct ledger *l, const struct state_settings_io *io,
                      struct state_settings *st, json_t *aside, state_warn_fn warn,
                      void *warn_ctx)
{
    const char *name = json_string_value(json_object_get(jt, "name"));
    char why[256];
    struct ledger_tenant *t = ledger_tenant_find(l, name);
    memset(st, 0, sizeof *st);
    if (t && (t->flags & LEDGER_TENANT_CONFIG))
        return load_into_configured(jt, l, t, io, st, warn, warn_ctx);
    if (t) {
        snprintf(why, sizeof why, "tenant '%s' appears twice in the state file", name);
        put_aside(jt, aside, warn, warn_ctx, why);
        return 0;
    }
    unsigned flags = json_is_true(json_object_get(jt, "ephemeral")) ? LEDGER_TENANT_EPHEMERAL : 0;
    if (json_is_true(json_object_get(jt, "removed"))) /* swept unless its processes return */
        flags = LEDGER_TENANT_REMOVED;
    int rc = ledger_tenant_add(l, name, NULL, flags, &t);
    if (rc) {
        if (rc == -ENOSPC)
            snprintf(why, sizeof why, "tenant '%s' cannot be added: kairosd holds at most %d "
                     "tenants (remove unused ones, then merge it back)", name, LEDGER_MAX_TENANTS);
        else
            snprintf(why, sizeof why, "tenant '%s' cannot be added: %s", name, strerror(-rc));
        put_aside(jt, aside, warn, warn_ctx, why);
        return 0;
    }
    load_quota(jt, l->n_gpus, st);
    json_t *owner = json_object_get(jt, "owner_pid");
    if (json_is_integer(owner) && json_integer_value(owner) > 0 &&
        json_integer_value(owner) <= INT32_MAX)
        st->owner_pid = (uint32_t)json_integer_value(owner); /* server checks if alive */
    load_compute(jt, t, l->n_gpus, st, warn, warn_ctx);
    load_members(jt, t, st, warn, warn_ctx);
    const char *managed = json_string_value(json_object_get(jt, "managed"));
    /* anything else: refuse, the default */
    st->managed_charge = managed && !strcmp(managed, "charge");
    load_fault_domain(jt, t, st, warn, warn_ctx);
    io->put(io->ctx, l, t, st);
    return 1;
}

int state_parse(const char *text, size_t len, struct ledger *l,
                const struct state_settings_io *io, state_warn_fn warn, void *warn_ctx,
                struct json_t *aside, char *err, size_t err_len)
{
    return state_parse_all(text, len, l, io, NULL, warn, warn_ctx, aside, NULL, err, err_len);
}

int state_parse_all(const char *text, size_t len, struct ledger *l,
                    const struct state_settings_io *io, struct usage_book *usage,
                    state_warn_fn warn, void *warn_ctx, struct json_t *aside,
                    struct handovers_saved *saved, char *err, size_t err_len)
{
    json_error_t jerr;
    if (len > STATE_MAX_BYTES) {
        snprintf(err, err_len, "larger than %d MiB, the most a state file may hold",
                 STATE_MAX_BYTES >> 20);
        return -EFBIG;
    }
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        snprintf(err, err_len, "line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        return -EINVAL;
    }
    if (check_frame(root, err, err_len)) {
        json_decref(root);
        return -EINVAL;
    }
    int added = 0;
    size_t i;
    json_t *jt;
    char why[256];
    struct state_settings *st = malloc(sizeof *st);
    if (!st) {
        json_decref(root);
        snprintf(err, err_len, "out of memory");
        return -ENOMEM;
    }
    json_array_foreach(json_object_get(root, "tenants"), i, jt) {
        if (check_entry(jt, i, l->n_gpus, why, sizeof why))
            put_aside(jt, aside, warn, warn_ctx, why);
        else
            added += load_entry(jt, l, io, st, aside, warn, warn_ctx);
    }
    free(st);
    json_t *handovers = json_object_get(root, "handovers");
    if (saved && handovers &&
        handovers_state_parse(handovers, l->n_gpus, saved, warn, warn_ctx) == -ENOMEM && warn)
        warn(warn_ctx, "handovers: out of memory; the hand-overs are forgotten");
    /* after the tenants: the counters of every tenant now known */
    if (usage)
        usage_state_load(json_object_get(root, USAGE_STATE_KEY), usage, l, (double)time(NULL),
                         warn, warn_ctx);
    json_decref(root);
    return added; /* a bad section (or no memory for it) loses only the hand-overs, or
                   * only the counters */
}

/* Reads at most STATE_MAX_BYTES + 1 bytes of a regular file into *out. 0, -ENOENT,
 * -EFBIG (too large: nothing kept), or -errno with err saying why. */
static int read_bounded(const char *path, char **out, size_t *len, char *err, size_t err_len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0) {
        int rc = -errno;
        snprintf(err, err_len, "cannot read %s: %s", path, strerror(errno));
        return rc;
    }
    if (fstat(fd, &st)) {
        int rc = -errno;
        snprintf(err, err_len, "cannot read %s: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > STATE_MAX_BYTES) {
        bool big = S_ISREG(st.st_mode);
        snprintf(err, err_len, "%s", big ? "" : "not a regular file");
        close(fd);
        return big ? -EFBIG : -EINVAL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    ssize_t n = 1;
    while (buf && got <= (size_t)st.st_size && n > 0) {
        n = read(fd, buf + got, (size_t)st.st_size + 1 - got);
        if (n < 0 && errno == EINTR)
            n = 1;
        else if (n > 0)
            got += (size_t)n;
    }
    int rc = !buf ? -ENOMEM : n < 0 ? -errno : got > (size_t)st.st_size ? -EFBIG : 0;
    close(fd);
    if (rc == -ENOMEM || (rc && rc != -EFBIG))
        snprintf(err, err_len, "cannot read %s: %s", path, strerror(-rc));
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = got;
    return 0;
}

/* Writes the entries set aside to PATH.set-aside-<unix time> (a state file of
 * their own, which an administrator may merge back); its name goes to out. */
static void write_aside(const char *path, json_t *entries, char *out, size_t out_len,
                        state_warn_fn warn, void *warn_ctx)
{
    char err[256], msg[PATH_MAX + 320];
    json_t *root = json_pack("{s:i, s:O}", "version", STATE_VERSION, "tenants", entries);
    char *text = root ? json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    snprintf(out, out_len, "%s.set-aside-%lld", path, (long long)time(NULL));
    if (!text || write_atomically(out, text, err, sizeof err)) {
        snprintf(msg, sizeof msg, "the entries set aside could not be saved to %s (%s); they "
                 "are only in this log", out, text ? err : "out of memory");
        out[0] = 0;
        if (warn)
            warn(warn_ctx, msg);
    }
    free(text);
    json_decref(root);
}

int state_load(const char *path, struct ledger *l, const struct state_settings_io *io,
               state_warn_fn warn, void *warn_ctx, char *err, size_t err_len, char *aside,
               size_t aside_len)
{
    return state_load_all(path, l, io, NULL, NULL, warn, warn_ctx, err, err_len, aside,
                          aside_len);
}

int state_load_all(const char *path, struct ledger *l, const struct state_settings_io *io,
                   struct usage_book *usage, struct handovers_saved *saved, state_warn_fn warn,
                   void *warn_ctx, char *err, size_t err_len, char *aside, size_t aside_len)
{
    char why[256] = "", *text = NULL;
    size_t len = 0;
    aside[0] = 0;
    int rc = read_bounded(path, &text, &len, why, sizeof why);
    if (rc == -ENOENT)
        return 0;
    if (rc && rc != -EFBIG && rc != -EINVAL) {
        snprintf(err, err_len, "%s", why);
        return rc;
    }
    json_t *entries = json_array();
    if (rc == -EFBIG)
        snprintf(why, sizeof why, "larger than %d MiB, the most a state file may hold",
                 STATE_MAX_BYTES >> 20);
    else if (!rc && !entries)
        rc = -ENOMEM;
    else if (!rc)
        rc = state_parse_all(text, len, l, io, usage, warn, warn_ctx, entries, saved, why,
                             sizeof why);
    free(text);
    if (rc == -ENOMEM) {
        snprintf(err, err_len, "cannot read %s: out of memory", path);
        json_decref(entries);
        return rc;
    }
    if (rc < 0) {
        int r2 = set_aside(path, aside, aside_len);
        snprintf(err, err_len, "state file %s is corrupt (%s); %s%s", path, why,
                 r2 ? "could not set it aside: " : "set aside as ", r2 ? strerror(-r2) : aside);
        json_decref(entries);
        return -EINVAL;
    }
    if (json_array_size(entries))
        write_aside(path, entries, aside, aside_len, warn, warn_ctx);
    json_decref(entries);
    return rc;
}
