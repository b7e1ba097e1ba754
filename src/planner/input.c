/* input.c - the planner's YAML input: GPU pools, custom models and workloads.
 *
 * Parsed with libyaml's document API so that every node keeps its line and column;
 * every error names file:line:column and what was expected. Unknown keys are errors
 * (a typo must not silently change a plan). Replicas (count) are expanded here, and
 * target_fraction is resolved to an absolute target here, so the algorithms only ever
 * see absolute targets. A workload's p99 target (p99_ms) is refused without its solo p99
 * on every option it could run on. Trace files (input_trace.c) read their arrivals with
 * the same workload rules, through input_internal.h. The formats are documented in
 * man/kairos-plan.1.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <yaml.h>

#include "kairos/plan.h"
#include "planner/input_block.h"
#include "planner/input_internal.h"

#define INPUT_MAX_WORKLOADS 2000000
#define INPUT_MAX_COUNT 100000


static uint64_t input_name_hash(const char *name)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h;
}

/* Index of `name` among in's workloads, or -1; with add >= 0 and the name absent,
 * records it as workload `add`. The table is grown to stay at most half full. */
static int input_names_find(struct input_names *t, const struct plan_input *in, const char *name,
                            int add)
{
    if (add >= 0 && (size_t)(add + 1) * 2 > t->mask) {
        size_t cap = t->mask ? (t->mask + 1) * 2 : 1024;
        int *slot = calloc(cap, sizeof(int));
        if (!slot)
            return -2;
        for (size_t i = 0; t->slot && i <= t->mask; i++) {
            if (!t->slot[i])
                continue;
            size_t h = input_name_hash(in->workloads[t->slot[i] - 1].name) & (cap - 1);
            while (slot[h])
                h = (h + 1) & (cap - 1);
            slot[h] = t->slot[i];
        }
        free(t->slot);
        t->slot = slot;
        t->mask = cap - 1;
    }
    if (!t->slot)
        return -1;
    size_t h = input_name_hash(name) & t->mask;
    for (; t->slot[h]; h = (h + 1) & t->mask)
        if (!strcmp(in->workloads[t->slot[h] - 1].name, name))
            return t->slot[h] - 1;
    if (add >= 0)
        t->slot[h] = add + 1;
    return -1;
}

int input_fail(struct input_ctx *c, const yaml_node_t *n, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s:%zu:%zu: %s", c->file, n->start_mark.line + 1,
             n->start_mark.column + 1, what);
    return -EINVAL;
}

yaml_node_t *input_node(struct input_ctx *c, int id)
{
    return yaml_document_get_node(c->doc, id);
}

static const char *input_scalar(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int input_expect(struct input_ctx *c, const yaml_node_t *n, yaml_node_type_t t,
                        const char *what)
{
    if (n->type == t)
        return 0;
    return input_fail(c, n, "expected %s", what);
}

int input_number(struct input_ctx *c, const yaml_node_t *n, const char *key, double *out)
{
    const char *s = input_scalar(n);
    char *end = NULL;
    if (!s || !*s)
        return input_fail(c, n, "expected a number for '%s'", key);
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return input_fail(c, n, "expected a number for '%s', got '%s'", key, s);
    *out = v;
    return 0;
}

static int input_positive(struct input_ctx *c, const yaml_node_t *n, const char *key, double *out)
{
    int rc = input_number(c, n, key, out);
    if (!rc && !(*out > 0))
        return input_fail(c, n, "'%s' must be greater than 0", key);
    return rc;
}

static int input_int(struct input_ctx *c, const yaml_node_t *n, const char *key, long lo,
                     long hi, long *out)
{
    const char *s = input_scalar(n);
    char *end = NULL;
    if (!s || !*s)
        return input_fail(c, n, "expected an integer for '%s'", key);
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end)
        return input_fail(c, n, "expected an integer for '%s', got '%s'", key, s);
    if (v < lo || v > hi)
        return input_fail(c, n, "'%s' must be in %ld..%ld, got %ld", key, lo, hi, v);
    *out = v;
    return 0;
}

int input_name(struct input_ctx *c, const yaml_node_t *n, const char *key, char *out)
{
    const char *s = input_scalar(n);
    if (!s || !*s)
        return input_fail(c, n, "expected a non-empty string for '%s'", key);
    if (strlen(s) >= PLAN_NAME_MAX)
        return input_fail(c, n, "'%s' is longer than %d characters", key, PLAN_NAME_MAX - 1);
    memcpy(out, s, strlen(s) + 1);
    return 0;
}

/* Iterate a mapping: calls fn(ctx, key, value_node, arg) for each pair. */
typedef int (*input_pair_fn)(struct input_ctx *c, const char *key, yaml_node_t *key_node,
                             yaml_node_t *val, void *arg);

static int input_each_pair(struct input_ctx *c, yaml_node_t *map, input_pair_fn fn, void *arg)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = input_node(c, p->key), *v = input_node(c, p->value);
        const char *ks = input_scalar(k);
        if (!ks)
            return input_fail(c, k, "expected a plain key");
        int rc = fn(c, ks, k, v, arg);
        if (rc)
            return rc;
    }
    return 0;
}

yaml_node_t *input_get(struct input_ctx *c, yaml_node_t *map, const char *key)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *ks = input_scalar(input_node(c, p->key));
        if (ks && !strcmp(ks, key))
            return input_node(c, p->value);
    }
    return NULL;
}

int input_only_keys(struct input_ctx *c, yaml_node_t *map, const char *const *keys)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = input_node(c, p->key);
        const char *ks = input_scalar(k);
        int known = 0;
        for (const char *const *q = keys; ks && *q; q++)
            known |= !strcmp(*q, ks);
        if (!known) {
            char list[256] = "";
            for (const char *const *q = keys; *q; q++)
                snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                         q == keys ? "" : ", ", *q);
            return input_fail(c, k, "unknown key '%s' (expected one of: %s)", ks ? ks : "?", list);
        }
    }
    return 0;
}

int input_require(struct input_ctx *c, yaml_node_t *map, const char *key, yaml_node_t **out)
{
    *out = input_get(c, map, key);
    if (!*out)
        return input_fail(c, map, "missing required key '%s'", key);
    return 0;
}

/* ---- models ---- */

static int input_starts(struct input_ctx *c, yaml_node_t *seq, unsigned *mask)
{
    int rc = input_expect(c, seq, YAML_SEQUENCE_NODE, "a list of start slices, e.g. [0, 2, 4]");
    *mask = 0;
    yaml_node_item_t *end = rc ? NULL : seq->data.sequence.items.top;
    for (yaml_node_item_t *i = seq->data.sequence.items.start; !rc && i < end; i++) {
        long s = 0;
        rc = input_int(c, input_node(c, *i), "starts", 0, PLAN_MEM_SLICES - 1, &s);
        if (!rc)
            *mask |= 1u << s;
    }
    return rc;
}

static int input_profile(struct input_ctx *c, yaml_node_t *n, struct plan_profile *p)
{
    static const char *const keys[] = {"name", "compute_slices", "memory_slices", "sms",
                                       "memory_mib", "starts", NULL};
    yaml_node_t *v[6];
    long cs, ms, sms, mem;
    int rc = input_expect(c, n, YAML_MAPPING_NODE, "a profile mapping");
    rc = rc ? rc : input_only_keys(c, n, keys);
    for (int i = 0; !rc && i < 6; i++)
        rc = input_require(c, n, keys[i], &v[i]);
    rc = rc ? rc : input_name(c, v[0], "name", p->name);
    rc = rc ? rc : input_int(c, v[1], "compute_slices", 1, PLAN_COMPUTE_SLICES, &cs);
    rc = rc ? rc : input_int(c, v[2], "memory_slices", 1, PLAN_MEM_SLICES, &ms);
    rc = rc ? rc : input_int(c, v[3], "sms", 1, 100000, &sms);
    rc = rc ? rc : input_int(c, v[4], "memory_mib", 1, 1L << 40, &mem);
    rc = rc ? rc : input_starts(c, v[5], &p->start_mask);
    if (rc)
        return rc;
    p->compute_slices = (int)cs;
    p->mem_slices = (int)ms;
    p->sms = (int)sms;
    p->mem_mib = mem;
    return 0;
}

static int input_model(struct input_ctx *c, yaml_node_t *n, struct plan_gpu_model *m)
{
    static const char *const keys[] = {"name", "sms", "memory_mib", "profiles", NULL};
    yaml_node_t *v[4];
    long sms, mem;
    char why[200];
    memset(m, 0, sizeof(*m));
    int rc = input_expect(c, n, YAML_MAPPING_NODE, "a model mapping (name, sms, memory_mib, profiles)");
    rc = rc ? rc : input_only_keys(c, n, keys);
    for (int i = 0; !rc && i < 4; i++)
        rc = input_require(c, n, keys[i], &v[i]);
    rc = rc ? rc : input_name(c, v[0], "name", m->name);
    rc = rc ? rc : input_int(c, v[1], "sms", 1, 100000, &sms);
    rc = rc ? rc : input_int(c, v[2], "memory_mib", 1, 1L << 40, &mem);
    rc = rc ? rc : input_expect(c, v[3], YAML_SEQUENCE_NODE, "a list of profiles");
    if (rc)
        return rc;
    m->whole_sms = (int)sms;
    m->whole_mem_mib = mem;
    for (yaml_node_item_t *i = v[3]->data.sequence.items.start; i < v[3]->data.sequence.items.top; i++) {
        if (m->n_profiles == PLAN_MAX_PROFILES)
            return input_fail(c, input_node(c, *i), "at most %d profiles per model", PLAN_MAX_PROFILES);
        rc = input_profile(c, input_node(c, *i), &m->profiles[m->n_profiles++]);
        if (rc)
            return rc;
    }
    if (plan_model_validate(m, why, sizeof(why)))
        return input_fail(c, n, "%s", why);
    return 0;
}

static int input_models(struct input_ctx *c, yaml_node_t *seq)
{
    int rc = input_expect(c, seq, YAML_SEQUENCE_NODE, "a list of GPU models");
    for (yaml_node_item_t *i = seq->data.sequence.items.start; !rc && i < seq->data.sequence.items.top; i++) {
        if (c->n_custom == PLAN_MAX_POOLS)
            return input_fail(c, input_node(c, *i), "at most %d custom models", PLAN_MAX_POOLS);
        rc = input_model(c, input_node(c, *i), &c->custom[c->n_custom++]);
    }
    return rc;
}

static int input_find_model(struct input_ctx *c, const char *name, struct plan_gpu_model *out)
{
    for (int i = 0; i < c->n_custom; i++) {
        if (!strcmp(c->custom[i].name, name)) {
            *out = c->custom[i];
            return 0;
        }
    }
    return plan_model_builtin(name, out);
}

static int input_pool(struct input_ctx *c, yaml_node_t *n)
{
    static const char *const keys[] = {"model", "count", NULL};
    yaml_node_t *vm, *vc;
    long count;
    struct plan_pool *pool = &c->in->pools[c->in->n_pools];
    int rc = input_expect(c, n, YAML_MAPPING_NODE, "a pool mapping (model, count)");
    rc = rc ? rc : input_only_keys(c, n, keys);
    rc = rc ? rc : input_require(c, n, "model", &vm);
    rc = rc ? rc : input_require(c, n, "count", &vc);
    rc = rc ? rc : input_int(c, vc, "count", 1, 1000000, &count);
    if (rc)
        return rc;
    const char *name = input_scalar(vm);
    if (!name || input_find_model(c, name, &pool->model))
        return input_fail(c, vm, "unknown GPU model '%s' (built in: A100-40GB, "
                          "A100-40GB+1g.10gb, H100-80GB, H200-141GB; others go under 'models')",
                          name ? name : "?");
    for (int p = 0; p < c->in->n_pools; p++)
        if (!strcmp(c->in->pools[p].model.name, name))
            return input_fail(c, vm, "model '%s' already has a pool; add to its count", name);
    pool->count = (int)count;
    c->in->n_pools++;
    return 0;
}

static int input_pools(struct input_ctx *c, yaml_node_t *seq)
{
    int rc = input_expect(c, seq, YAML_SEQUENCE_NODE, "a list of GPU pools");
    for (yaml_node_item_t *i = seq->data.sequence.items.start; !rc && i < seq->data.sequence.items.top; i++) {
        if (c->in->n_pools == PLAN_MAX_POOLS)
            return input_fail(c, input_node(c, *i), "at most %d GPU pools", PLAN_MAX_POOLS);
        rc = input_pool(c, input_node(c, *i));
    }
    if (!rc && !c->in->n_pools)
        return input_fail(c, seq, "expected at least one GPU pool");
    return rc;
}

/* ---- workloads ---- */

struct input_thr_arg {
    double (*table)[PLAN_MAX_OPTIONS];   /* [pool][option]: throughput or solo p99 */
    int pool;          /* -1: flat mapping applying to every pool */
};

static int input_thr_pair(struct input_ctx *c, const char *key, yaml_node_t *kn, yaml_node_t *v,
                          void *arg)
{
    struct input_thr_arg *a = arg;
    double thr;
    int matched = 0;
    int rc = input_positive(c, v, key, &thr);
    if (rc)
        return rc;
    for (int p = 0; p < c->in->n_pools; p++) {
        if (a->pool >= 0 && p != a->pool)
            continue;
        int o = plan_option_find(&c->in->pools[p].model, key);
        if (o < 0)
            continue;
        a->table[p][o] = thr;
        matched = 1;
    }
    if (!matched)
        return input_fail(c, kn, "'%s' is not 'whole' or a MIG profile of the GPU model(s) in 'gpus'", key);
    return 0;
}

static int input_pool_index(struct input_ctx *c, const char *name)
{
    for (int p = 0; p < c->in->n_pools; p++)
        if (!strcmp(c->in->pools[p].model.name, name))
            return p;
    return -1;
}

static int input_thr_model_pair(struct input_ctx *c, const char *key, yaml_node_t *kn,
                                yaml_node_t *v, void *arg)
{
    struct input_thr_arg a = {((struct input_thr_arg *)arg)->table, input_pool_index(c, key)};
    if (a.pool < 0)
        return input_fail(c, kn, "'%s' is not a GPU model of 'gpus'", key);
    int rc = input_expect(c, v, YAML_MAPPING_NODE, "a mapping of spatial option to throughput");
    return rc ? rc : input_each_pair(c, v, input_thr_pair, &a);
}

/* 'throughput' or 'solo_p99_ms': option -> number, or model -> (option -> number). */
static int input_option_table(struct input_ctx *c, yaml_node_t *n,
                              double (*table)[PLAN_MAX_OPTIONS], const char *what)
{
    int rc = input_expect(c, n, YAML_MAPPING_NODE, what);
    if (rc)
        return rc;
    if (n->data.mapping.pairs.start == n->data.mapping.pairs.top)
        return input_fail(c, n, "expected at least one entry in %s", what);
    yaml_node_t *first = input_node(c, n->data.mapping.pairs.start->value);
    struct input_thr_arg a = {table, -1};
    if (first->type == YAML_MAPPING_NODE)
        return input_each_pair(c, n, input_thr_model_pair, &a);
    return input_each_pair(c, n, input_thr_pair, &a);
}

static int input_throughput(struct input_ctx *c, yaml_node_t *n, struct plan_workload *w)
{
    return input_option_table(c, n, w->thr, "a mapping of spatial option (whole, 1g.5gb, ...) "
                              "to throughput");
}

/* A solo p99 table owned by the input (workloads point at it; replicas share it). */
static struct plan_latency *input_lat_new(struct plan_input *in)
{
    struct plan_latency *t = calloc(1, sizeof(*t));
    struct plan_latency **nl = t ? realloc(in->lat, ((size_t)in->n_lat + 1) * sizeof(*nl)) : NULL;
    if (!nl) {
        free(t);
        return NULL;
    }
    in->lat = nl;
    in->lat[in->n_lat++] = t;
    return t;
}

/* A time-share curve owned by the input (workloads point at it; replicas share it). */
static struct plan_time_curve *input_curve_new(struct plan_input *in)
{
    struct plan_time_curve *t = calloc(1, sizeof(*t));
    struct plan_time_curve **nc = t ? realloc(in->curves, ((size_t)in->n_curves + 1) *
                                                          sizeof(*nc)) : NULL;
    if (!nc) {
        free(t);
        return NULL;
    }
    in->curves = nc;
    in->curves[in->n_curves++] = t;
    return t;
}

/* A profile table's time_shares (checked by plan_profile_load) as w's curve on pool: the
 * shares as fractions, each throughput at most Thr(whole) (PLAN_SHARES_TOLERANCE). */
static int input_curve(struct plan_input *in, const struct plan_profile_table *t, int pool,
                       struct plan_workload *w)
{
    struct plan_time_curve *c = t->n_shares ? input_curve_new(in) : NULL;
    if (t->n_shares && !c)
        return -ENOMEM;
    double whole = w->thr[pool][PLAN_OPTION_WHOLE];
    for (int k = 0; c && k < t->n_shares; k++) {
        c->t[pool][k] = t->share_pct[k] / 100;
        c->thr[pool][k] = t->share_thr[k] < whole ? t->share_thr[k] : whole;
    }
    if (c)
        c->n[pool] = t->n_shares;
    w->curve = c;
    return 0;
}

/* A workload with 'p99_ms' needs its solo p99 on every option it has a throughput for. */
static int input_p99_complete(struct input_ctx *c, yaml_node_t *n, const struct plan_workload *w)
{
    for (int p = 0; p < c->in->n_pools; p++) {
        const struct plan_gpu_model *m = &c->in->pools[p].model;
        for (int o = 0; o < plan_option_count(m); o++)
            if (w->thr[p][o] > 0 && !(plan_solo_p99(w, p, o) > 0))
                return input_fail(c, n, "workload '%s' has a p99 target (p99_ms) but no solo "
                                  "p99 on %s of %s, so the target cannot be checked there: add "
                                  "it under 'solo_p99_ms' (or as 'p99_ms' in its profile "
                                  "table), or drop that option's throughput", w->name,
                                  plan_option_name(m, o), m->name);
    }
    return 0;
}

/* 'p99_ms' (the target) and 'solo_p99_ms' (per option, like 'throughput'); a profile
 * table's p99_ms has already been put in *lat. */
static int input_latency(struct input_ctx *c, yaml_node_t *n, struct plan_workload *w,
                         struct plan_latency *lat)
{
    yaml_node_t *vt = input_get(c, n, "p99_ms"), *vs = input_get(c, n, "solo_p99_ms");
    int rc = vt ? input_positive(c, vt, "p99_ms", &w->p99_ms) : 0;
    if (!rc && vs)
        rc = input_option_table(c, vs, lat->solo_p99_ms, "a mapping of spatial option (whole, "
                                "1g.5gb, ...) to solo p99 latency in ms");
    if (rc)
        return rc;
    int any = 0;
    for (int p = 0; p < PLAN_MAX_POOLS; p++)
        for (int o = 0; o < PLAN_MAX_OPTIONS; o++)
            any |= lat->solo_p99_ms[p][o] > 0;
    if (any) {
        struct plan_latency *t = input_lat_new(c->in);
        if (!t)
            return -ENOMEM;
        *t = *lat;
        w->lat = t;
    }
    return w->p99_ms > 0 ? input_p99_complete(c, n, w) : 0;
}

static int input_target(struct input_ctx *c, yaml_node_t *n, struct plan_workload *w)
{
    yaml_node_t *abs = input_get(c, n, "target"), *frac = input_get(c, n, "target_fraction");
    if (!!abs == !!frac)
        return input_fail(c, n, "expected exactly one of 'target' (absolute) or "
                          "'target_fraction' (of whole-GPU throughput)");
    if (abs)
        return input_positive(c, abs, "target", &w->target);
    double f;
    int rc = input_positive(c, frac, "target_fraction", &f);
    if (rc)
        return rc;
    for (int p = 0; p < c->in->n_pools; p++) {
        if (w->thr[p][PLAN_OPTION_WHOLE] > 0) {
            w->target = f * w->thr[p][PLAN_OPTION_WHOLE];
            return 0;
        }
    }
    return input_fail(c, frac, "'target_fraction' needs a throughput for 'whole'");
}

static int input_push(struct input_ctx *c, yaml_node_t *n, const struct plan_workload *w)
{
    if (c->in->n_workloads >= INPUT_MAX_WORKLOADS)
        return input_fail(c, n, "more than %d workloads", INPUT_MAX_WORKLOADS);
    int i = input_names_find(&c->names, c->in, w->name, c->in->n_workloads);
    if (i == -2)
        return -ENOMEM;
    if (i >= 0)
        return input_fail(c, n, "workload name '%s' is used twice (first on line %d)",
                          w->name, c->in->workloads[i].line);
    return plan_input_add_workload(c->in, w);
}

static int input_replicas(struct input_ctx *c, yaml_node_t *n, struct plan_workload *w, long count)
{
    if (count == 1)
        return input_push(c, n, w);
    char base[PLAN_NAME_MAX];
    memcpy(base, w->name, sizeof(base));
    for (long r = 0; r < count; r++) {
        int len = snprintf(w->name, sizeof(w->name), "%s#%ld", base, r);
        if (len >= (int)sizeof(w->name))
            return input_fail(c, n, "name '%s' too long for %ld replicas", base, count);
        int rc = input_push(c, n, w);
        if (rc)
            return rc;
    }
    return 0;
}

/* 'profile: FILE' (relative to the cluster file): a table written by kairos profile
 * gives the throughput on its GPU model's options and, unless set, the memory. */
static int input_profile_table(struct input_ctx *c, yaml_node_t *n, struct plan_workload *w,
                               long *mem, struct plan_latency *lat)
{
    struct plan_profile_table t;
    char path[4096], why[512];
    const char *file = input_scalar(n), *slash = strrchr(c->file, '/');
    if (!file || !*file)
        return input_fail(c, n, "expected a file name for 'profile'");
    if (file[0] == '/' || !slash)
        snprintf(path, sizeof(path), "%s", file);
    else
        snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - c->file), c->file, file);
    if (plan_profile_load(path, &t, why, sizeof(why)))
        return input_fail(c, n, "profile table: %s", why);
    int pool = input_pool_index(c, t.model);
    if (pool < 0)
        return input_fail(c, n, "profile table %s was measured on %s, which is not a GPU model of "
                          "'gpus'", file, t.model);
    for (int k = 0; k < t.n; k++) {
        int o = plan_option_find(&c->in->pools[pool].model, t.option[k]);
        if (o < 0)
            return input_fail(c, n, "profile table %s: '%s' is not an option of %s", file,
                              t.option[k], t.model);
        if (t.thr[k] > 0)
            w->thr[pool][o] = t.thr[k];
        if (t.p99_ms[k] > 0)
            lat->solo_p99_ms[pool][o] = t.p99_ms[k];
    }
    if (*mem <= 0 && t.mem_mib <= 0)
        return input_fail(c, n, "profile table %s has no memory_mib; give 'memory_mib'", file);
    if (*mem <= 0)
        *mem = (long)t.mem_mib;
    return input_curve(c->in, &t, pool, w);
}

/* 'drain_seconds': what moving the workload costs (traces), more than 0, at most a week
 * (0 in struct plan_workload means "the trace's default"). */
int input_drain(struct input_ctx *c, const yaml_node_t *n, double *out)
{
    int rc = input_positive(c, n, "drain_seconds", out);
    if (!rc && *out > 604800)
        return input_fail(c, n, "'drain_seconds' must be at most 604800 (a week), got %g", *out);
    return rc;
}

int input_workload(struct input_ctx *c, yaml_node_t *n)
{
    static const char *const keys[] = {"name", "memory_mib", "throughput", "target",
                                       "target_fraction", "count", "profile",
                                       "drain_seconds", "p99_ms", "solo_p99_ms", NULL};
    struct plan_workload w;
    struct plan_latency lat;
    yaml_node_t *vn, *vm, *vt, *vc, *vp;
    long mem = 0, count = 1;
    memset(&w, 0, sizeof(w));
    memset(&lat, 0, sizeof(lat));
    int rc = input_expect(c, n, YAML_MAPPING_NODE, "a workload mapping (name, memory_mib, throughput, target)");
    rc = rc ? rc : input_only_keys(c, n, keys);
    rc = rc ? rc : input_require(c, n, "name", &vn);
    rc = rc ? rc : input_name(c, vn, "name", w.name);
    vp = rc ? NULL : input_get(c, n, "profile");
    vt = rc ? NULL : input_get(c, n, "throughput");
    vm = rc ? NULL : input_get(c, n, "memory_mib");
    if (!rc && !!vp == !!vt)
        rc = input_fail(c, n, "expected exactly one of 'throughput' or 'profile' (a table "
                        "written by kairos profile)");
    if (!rc && !vm && !vp)
        rc = input_require(c, n, "memory_mib", &vm);
    if (!rc && vm)
        rc = input_int(c, vm, "memory_mib", 1, 1L << 40, &mem);
    if (!rc && vp)
        rc = input_profile_table(c, vp, &w, &mem, &lat);
    if (!rc && vt)
        rc = input_throughput(c, vt, &w);
    rc = rc ? rc : input_target(c, n, &w);
    vc = input_get(c, n, "count");
    if (!rc && vc)
        rc = input_int(c, vc, "count", 1, INPUT_MAX_COUNT, &count);
    vc = input_get(c, n, "drain_seconds");
    if (!rc && vc)
        rc = input_drain(c, vc, &w.drain_s);
    rc = rc ? rc : input_latency(c, n, &w, &lat);
    if (rc)
        return rc;
    w.mem_mib = mem;
    w.line = (int)n->start_mark.line + 1;
    return input_replicas(c, n, &w, count);
}

static int input_workloads(struct input_ctx *c, yaml_node_t *seq)
{
    int rc = input_expect(c, seq, YAML_SEQUENCE_NODE, "a list of workloads");
    for (yaml_node_item_t *i = seq->data.sequence.items.start; !rc && i < seq->data.sequence.items.top; i++)
        rc = input_workload(c, input_node(c, *i));
    return rc;
}

/* The workload list through input_block: each item is a small document of its own. */
static int input_workloads_block(struct input_ctx *c)
{
    yaml_document_t *outer = c->doc;
    int rc = 0, done = 0;
    while (!rc) {
        rc = input_block_next(c->block, &done);
        if (rc || done)
            break;
        c->doc = &c->block->doc;
        rc = input_workload(c, yaml_document_get_node(c->doc, 1));
        c->doc = outer;
    }
    return rc;
}

static int input_root(struct input_ctx *c, yaml_node_t *root)
{
    static const char *const keys[] = {"models", "gpus", "workloads", "interference", NULL};
    yaml_node_t *gpus, *wl, *models;
    int rc = input_expect(c, root, YAML_MAPPING_NODE, "a mapping with 'gpus' and 'workloads'");
    rc = rc ? rc : input_only_keys(c, root, keys);
    gpus = rc ? NULL : input_get(c, root, "gpus");
    if (!rc && !gpus && c->base) {
        /* a workloads-only file: its throughput keys name the cluster's GPU models */
        c->in->n_pools = c->base->n_pools;
        memcpy(c->in->pools, c->base->pools, sizeof(c->in->pools));
    } else {
        rc = rc ? rc : input_require(c, root, "gpus", &gpus);
    }
    rc = rc ? rc : input_require(c, root, "workloads", &wl);
    yaml_node_t *mode = rc ? NULL : input_get(c, root, "interference");
    if (mode) {
        const char *name = input_scalar(mode);
        c->in->interference = name ? plan_interference_from_name(name) : -1;
        if (c->in->interference < 0)
            return input_fail(c, mode, "'interference' must be " PLAN_INTERF_LIST);
    } else if (!rc && c->base) {
        c->in->interference = c->base->interference;
    }
    models = input_get(c, root, "models");
    if (!rc && models)
        rc = input_models(c, models);
    if (!rc && gpus)
        rc = input_pools(c, gpus);
    if (!rc && c->block)
        return input_workloads_block(c);
    return rc ? rc : input_workloads(c, wl);
}

static int input_parser_error(struct input_ctx *c, const yaml_parser_t *ps)
{
    if (ps->error == YAML_MEMORY_ERROR) {
        snprintf(c->err, c->errlen, "%s: too large for libyaml's document reader (it ran out of "
                 "memory or of node slots, which happens near a million workloads written with "
                 "quotes, flow style or anchors); write 'workloads' in block style (plain "
                 "'key: value' lines), which is read one workload at a time", c->file);
        return -EFBIG;
    }
    snprintf(c->err, c->errlen, "%s:%zu:%zu: YAML syntax: %s%s%s", c->file,
             ps->problem_mark.line + 1, ps->problem_mark.column + 1,
             ps->problem ? ps->problem : "malformed input", ps->context ? " " : "",
             ps->context ? ps->context : "");
    return -EINVAL;
}

static int input_parse_with(const char *text, size_t len, const char *name,
                            const struct plan_input *base, struct plan_input *in, char *err,
                            size_t errlen, int first_pass);

int plan_input_parse(const char *text, size_t len, const char *name, struct plan_input *in,
                     char *err, size_t errlen)
{
    return input_parse_with(text, len, name, NULL, in, err, errlen, 0);
}

int plan_input_parse_document(const char *text, size_t len, const char *name,
                              struct plan_input *in, char *err, size_t errlen)
{
    return input_parse_with(text, len, name, NULL, in, err, errlen, 1);
}

/* Parses text with libyaml into doc; the root node, or NULL with the error written. */
yaml_node_t *input_load_doc(struct input_ctx *c, const char *text, size_t len, int *rc)
{
    yaml_parser_t ps;
    yaml_node_t *root = NULL;
    *rc = -ENOMEM;
    if (!yaml_parser_initialize(&ps))
        return NULL;
    yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
    if (!yaml_parser_load(&ps, c->doc)) {
        *rc = input_parser_error(c, &ps);
        yaml_parser_delete(&ps);
        return NULL;
    }
    yaml_parser_delete(&ps);
    *rc = 0;
    root = yaml_document_get_root_node(c->doc);
    if (!root) {
        snprintf(c->err, c->errlen, "%s:1:1: expected a mapping with 'gpus' and 'workloads', got "
                 "an empty file", c->file);
        *rc = -EINVAL;
        yaml_document_delete(c->doc);
    }
    return root;
}

/* The whole file as one libyaml document. */
static int input_parse_doc(struct input_ctx *c, const char *text, size_t len)
{
    yaml_document_t doc;
    int rc;
    c->doc = &doc;
    yaml_node_t *root = input_load_doc(c, text, len, &rc);
    if (!root)
        return rc;
    rc = input_root(c, root);
    yaml_document_delete(&doc);
    return rc;
}

/* 1 if root is a block mapping whose 'workloads' key is at column 0 of `line` with an
 * empty plain value: the list input_block_region found is the real top-level one. */
static int input_block_fits(struct input_ctx *c, yaml_node_t *root, size_t line)
{
    if (root->type != YAML_MAPPING_NODE || root->data.mapping.style != YAML_BLOCK_MAPPING_STYLE)
        return 0;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = input_node(c, p->key), *v = input_node(c, p->value);
        const char *ks = input_scalar(k);
        if (!ks || strcmp(ks, "workloads"))
            continue;
        return k->start_mark.line == line && k->start_mark.column == 0 &&
               v->type == YAML_SCALAR_NODE && v->data.scalar.length == 0 &&
               v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    }
    return 0;
}

/* The fast path: libyaml reads the file without the workload list's lines (kept as
 * empty lines, so marks do not move), input_block reads the list item by item. Returns
 * INPUT_BLOCK_OTHER when the file is not in the subset it reads (nothing is kept). */
static int input_parse_fast(struct input_ctx *c, const char *text, size_t len)
{
    size_t begin, end, line, lines = 0, at;
    yaml_document_t doc;
    struct input_block block;
    int rc;
    if (input_block_region(text, len, &begin, &end, &line))
        return INPUT_BLOCK_OTHER;
    for (const char *p = text + begin; (p = memchr(p, '\n', (size_t)(text + end - p))); p++)
        lines++;
    char *rest = malloc(begin + lines + (len - end) + 1);
    if (!rest)
        return -ENOMEM;
    memcpy(rest, text, begin);
    memset(rest + begin, '\n', lines);
    at = begin + lines;
    memcpy(rest + at, text + end, len - end);
    c->doc = &doc;
    yaml_node_t *root = input_load_doc(c, rest, at + (len - end), &rc);
    if (!root) {
        free(rest);
        return INPUT_BLOCK_OTHER;
    }
    if (!input_block_fits(c, root, line - 1)) {
        rc = INPUT_BLOCK_OTHER;
    } else {
        input_block_init(&block, text + begin, text + end, line);
        c->block = &block;
        c->in->reader = PLAN_READER_BLOCK;
        rc = input_root(c, root);
        c->block = NULL;
        input_block_fini(&block);
    }
    yaml_document_delete(&doc);
    free(rest);
    return rc;
}

/* Pass 0 tries the block reader, pass 1 is libyaml's document. */
static int input_parse_with(const char *text, size_t len, const char *name,
                            const struct plan_input *base, struct plan_input *in, char *err,
                            size_t errlen, int first_pass)
{
    struct input_ctx c;
    int rc = -EINVAL;
    for (int pass = first_pass; pass < 2; pass++) {
        memset(&c, 0, sizeof(c));
        c.file = name;
        c.err = err;
        c.errlen = errlen;
        c.in = in;
        c.base = base;
        memset(in, 0, sizeof(*in));
        rc = pass ? input_parse_doc(&c, text, len) : input_parse_fast(&c, text, len);
        free(c.names.slot);
        if (rc)
            plan_input_free(in);
        if (rc != INPUT_BLOCK_OTHER)
            break;
    }
    return rc;
}

static int input_load_with(const char *path, const struct plan_input *base,
                           struct plan_input *in, char *err, size_t errlen);

int plan_input_load(const char *path, struct plan_input *in, char *err, size_t errlen)
{
    return input_load_with(path, NULL, in, err, errlen);
}

int plan_input_load_extra(const char *path, const struct plan_input *base,
                          struct plan_input *extra, char *err, size_t errlen)
{
    return input_load_with(path, base, extra, err, errlen);
}

/* Reads a stream that cannot be mapped (a pipe) into *buf. */
int input_read_all(FILE *f, char **buf, size_t *len)
{
    size_t cap = 0;
    *buf = NULL;
    *len = 0;
    for (;;) {
        if (*len == cap) {
            char *nb = realloc(*buf, cap ? cap * 2 : 65536);
            if (!nb)
                return -ENOMEM;
            *buf = nb;
            cap = cap ? cap * 2 : 65536;
        }
        size_t got = fread(*buf + *len, 1, cap - *len, f);
        *len += got;
        if (got == 0)
            break;
    }
    return ferror(f) ? -EIO : 0;
}

/* A regular file is mapped (no copy, no growing buffer: at a million workloads the
 * file is 300 MB); anything else is read. */
static int input_load_with(const char *path, const struct plan_input *base,
                           struct plan_input *in, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    char *buf = NULL;
    void *map = MAP_FAILED;
    size_t len = 0;
    int rc = 0;
    memset(in, 0, sizeof(*in));
    if (!f) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    if (!fstat(fileno(f), &st) && S_ISREG(st.st_mode) && st.st_size > 0) {
        len = (size_t)st.st_size;
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fileno(f), 0);
    }
    if (map == MAP_FAILED && (rc = input_read_all(f, &buf, &len))) {
        snprintf(err, errlen, "%s: %s", path, rc == -EIO ? "read error" : strerror(-rc));
        goto out;
    }
    rc = input_parse_with(map != MAP_FAILED ? map : buf, len, path, base, in, err, errlen, 0);
out:
    if (map != MAP_FAILED)
        munmap(map, len);
    free(buf);
    fclose(f);
    return rc;
}

int plan_input_add_workload(struct plan_input *in, const struct plan_workload *w)
{
    int n = in->n_workloads;
    if (n == 0 || (n >= 16 && (n & (n - 1)) == 0)) {
        size_t cap = n ? (size_t)n * 2 : 16;
        struct plan_workload *nw = realloc(in->workloads, cap * sizeof(*nw));
        if (!nw)
            return -ENOMEM;
        in->workloads = nw;
    }
    in->workloads[in->n_workloads++] = *w;
    return 0;
}

void plan_input_free(struct plan_input *in)
{
    free(in->workloads);
    in->workloads = NULL;
    in->n_workloads = 0;
    for (int k = 0; k < in->n_lat; k++)
        free(in->lat[k]);
    free(in->lat);
    in->lat = NULL;
    in->n_lat = 0;
    for (int k = 0; k < in->n_curves; k++)
        free(in->curves[k]);
    free(in->curves);
    in->curves = NULL;
    in->n_curves = 0;
}

/* extra's time-share curve of wl, as a curve of `in` with extra's pools mapped onto in's. */
static int input_merge_curve(struct plan_input *in, const struct plan_input *extra,
                             struct plan_workload *wl)
{
    const struct plan_time_curve *src = wl->curve;
    struct plan_time_curve *t = src ? input_curve_new(in) : NULL;
    if (src && !t)
        return -ENOMEM;
    for (int p = 0; src && p < extra->n_pools; p++)
        for (int q = 0; q < in->n_pools; q++)
            if (!strcmp(extra->pools[p].model.name, in->pools[q].model.name)) {
                t->n[q] = src->n[p];
                memcpy(t->t[q], src->t[p], sizeof(t->t[q]));
                memcpy(t->thr[q], src->thr[p], sizeof(t->thr[q]));
            }
    wl->curve = t;
    return 0;
}

/* extra's solo p99 table of wl, as a table of `in` with extra's pools mapped onto in's. */
static int input_merge_lat(struct plan_input *in, const struct plan_input *extra,
                           struct plan_workload *wl)
{
    const struct plan_latency *src = wl->lat;
    struct plan_latency *t = src ? input_lat_new(in) : NULL;
    if (src && !t)
        return -ENOMEM;
    for (int p = 0; src && p < extra->n_pools; p++)
        for (int q = 0; q < in->n_pools; q++)
            if (!strcmp(extra->pools[p].model.name, in->pools[q].model.name))
                memcpy(t->solo_p99_ms[q], src->solo_p99_ms[p], sizeof(t->solo_p99_ms[q]));
    wl->lat = t;
    return 0;
}

int plan_input_merge(struct plan_input *in, const struct plan_input *extra, const char *path,
                     char *err, size_t errlen)
{
    struct input_names names = {0};
    int rc = 0;
    for (int w = 0; w < in->n_workloads && !rc; w++)
        rc = input_names_find(&names, in, in->workloads[w].name, w) == -2 ? -ENOMEM : 0;
    for (int w = 0; w < extra->n_workloads && !rc; w++) {
        struct plan_workload wl = extra->workloads[w];
        memset(wl.thr, 0, sizeof(wl.thr));
        /* map the extra file's pools onto ours by model name */
        for (int p = 0; p < extra->n_pools; p++)
            for (int q = 0; q < in->n_pools; q++)
                if (!strcmp(extra->pools[p].model.name, in->pools[q].model.name))
                    memcpy(wl.thr[q], extra->workloads[w].thr[p], sizeof(wl.thr[q]));
        int dup = input_names_find(&names, in, wl.name, in->n_workloads);
        if (dup == -2) {
            rc = -ENOMEM;
        } else if (dup >= 0) {
            snprintf(err, errlen, "%s:%d: workload '%s' is already in the cluster (line %d); "
                     "give it another name", path, wl.line, wl.name, in->workloads[dup].line);
            rc = -EINVAL;
        } else {
            rc = input_merge_lat(in, extra, &wl);
            rc = rc ? rc : input_merge_curve(in, extra, &wl);
            rc = rc ? rc : plan_input_add_workload(in, &wl);
        }
    }
    free(names.slot);
    return rc;
}

int plan_input_find(const struct plan_input *in, const char *name)
{
    for (int w = 0; w < in->n_workloads; w++)
        if (!strcmp(in->workloads[w].name, name))
            return w;
    return -1;
}

/* ---- traces: timed arrivals and departures (replayed by trace.c) ---- */
