/* profile.c - per-application throughput tables: which GPU fractions to measure, what a
 * workload prints, and the table file `kairos profile` writes and the planner reads.
 *
 * A table gives one workload's throughput at t = 100 % on each spatial option of one
 * GPU model, and its peak memory. Fractions: each option is measured at its SM share
 * (MPS active-thread percentage = ceil(100 x SMs / whole SMs); options with the same
 * percentage share one run). A workload reports "throughput=<number>" (the last such
 * line counts) and may report "memory_mib=<number>". The file (YAML):
 *   model: H200-141GB
 *   workload: resnet50-inf-bs8
 *   method: mps            # or mig
 *   memory_mib: 1834
 *   throughput: {whole: 1200.5, 1g.18gb: 210.2, ...}
 *   p99_ms: {whole: 4.1, 1g.18gb: 9.8, ...}   # optional: solo p99 latency per option
 *   time_shares: {25: 610.2, 50: 950.1}      # optional: whole GPU at a time share (%)
 * kairos profile does not measure p99 (a workload with a p99 target needs it added);
 * it measures time_shares with --time-shares (CMD a tenant of kairosd, its GPU time
 * capped at each share); plan_profile_check_shares (curve.c) says which are usable.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "kairos/plan.h"

int plan_profile_points(const struct plan_gpu_model *m, int *percent, int *point_of)
{
    int n = 0;
    for (int o = 0; o < plan_option_count(m); o++) {
        int p = plan_option_sm_percent(m, o);
        int k = 0;
        while (k < n && percent[k] != p)
            k++;
        if (k == n)
            percent[n++] = p;
        point_of[o] = k;
    }
    return n;
}

static int profile_number(const char *line, const char *key, double *out)
{
    size_t n = strlen(key);
    char *end = NULL;
    while (*line == ' ' || *line == '\t')
        line++;
    if (strncmp(line, key, n) || line[n] != '=')
        return 0;
    double v = strtod(line + n + 1, &end);
    while (end && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n'))
        end++;
    if (!end || end == line + n + 1 || *end || !isfinite(v) || v < 0)
        return 0;
    *out = v;
    return 1;
}

void plan_profile_scan(const char *text, double *thr, double *mem_mib)
{
    const char *line = text;
    while (line && *line) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[256];
        if (len < sizeof(buf)) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            profile_number(buf, "throughput", thr);
            profile_number(buf, "memory_mib", mem_mib);
        }
        line = nl ? nl + 1 : NULL;
    }
}

int plan_profile_write(const struct plan_profile_table *t, void *stream)
{
    FILE *f = stream;
    fprintf(f, "# throughput table written by kairos profile; read by kairos plan (workload key "
            "'profile')\n# %s\nmodel: %s\nworkload: %s\nmethod: %s\nmemory_mib: %lld\n"
            "throughput:\n", t->note, t->model, t->workload, t->method, (long long)t->mem_mib);
    for (int k = 0; k < t->n; k++)
        if (t->thr[k] > 0)
            fprintf(f, "  %s: %.6g\n", t->option[k], t->thr[k]);
    int lat = 0;
    for (int k = 0; k < t->n; k++)
        lat |= t->p99_ms[k] > 0;
    if (lat)
        fprintf(f, "p99_ms:\n");
    for (int k = 0; lat && k < t->n; k++)
        if (t->thr[k] > 0 && t->p99_ms[k] > 0)
            fprintf(f, "  %s: %.6g\n", t->option[k], t->p99_ms[k]);
    if (t->n_shares)
        fprintf(f, "# whole GPU, its time capped by kairosd at each share (%%): throughput\n"
                "time_shares:\n");
    for (int k = 0; k < t->n_shares; k++)
        fprintf(f, "  %.6g: %.6g\n", t->share_pct[k], t->share_thr[k]);
    return ferror(f) ? -EIO : 0;
}

static const char *profile_scalar(yaml_document_t *d, yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int profile_fail(char *err, size_t errlen, const char *path, const yaml_node_t *n,
                        const char *what)
{
    snprintf(err, errlen, "%s:%zu: %s", path, n ? n->start_mark.line + 1 : 1, what);
    return -EINVAL;
}

static int profile_copy(char *dst, const char *src)
{
    if (!src || !*src || strlen(src) >= PLAN_NAME_MAX)
        return -EINVAL;
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

/* 'p99_ms': option -> solo p99 (ms), for options of 'throughput' (which may come after). */
static int profile_p99(yaml_document_t *d, yaml_node_t *map, struct plan_profile_table *t,
                       const char *path, char *err, size_t errlen)
{
    yaml_node_pair_t *end_pair = map->data.mapping.pairs.top;
    for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < end_pair; q++) {
        yaml_node_t *kn = yaml_document_get_node(d, q->key);
        const char *o = profile_scalar(d, kn);
        const char *x = profile_scalar(d, yaml_document_get_node(d, q->value));
        char *end = NULL;
        double v = x ? strtod(x, &end) : -1;
        if (!o || !x || *end || !(v > 0) || !isfinite(v))
            return profile_fail(err, errlen, path, kn, "expected 'option: p99 in ms' (a number "
                                "> 0)");
        int k = 0;
        while (k < t->n && strcmp(t->option[k], o))
            k++;
        if (k == t->n && (t->n == PLAN_MAX_OPTIONS || profile_copy(t->option[t->n++], o)))
            return profile_fail(err, errlen, path, kn, "too many options or a bad option name");
        t->p99_ms[k] = v;
    }
    return 0;
}

/* 'time_shares': share in % -> throughput on the whole GPU (checked once all is read). */
static int profile_shares(yaml_document_t *d, yaml_node_t *map, struct plan_profile_table *t,
                          const char *path, char *err, size_t errlen)
{
    yaml_node_pair_t *end_pair = map->data.mapping.pairs.top;
    for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < end_pair; q++) {
        yaml_node_t *kn = yaml_document_get_node(d, q->key);
        const char *s = profile_scalar(d, kn);
        const char *x = profile_scalar(d, yaml_document_get_node(d, q->value));
        char *end_s = NULL, *end_x = NULL;
        double pct = s ? strtod(s, &end_s) : -1, thr = x ? strtod(x, &end_x) : -1;
        if (!s || !x || *end_s || *end_x || !isfinite(pct) || !isfinite(thr))
            return profile_fail(err, errlen, path, kn, "expected 'share in %: throughput' (two "
                                "numbers)");
        if (t->n_shares == PLAN_MAX_SHARES)
            return profile_fail(err, errlen, path, kn, "more than 16 time shares");
        t->share_pct[t->n_shares] = pct;
        t->share_thr[t->n_shares++] = thr;
    }
    return 0;
}

static int profile_pairs(yaml_document_t *d, yaml_node_t *map, struct plan_profile_table *t,
                         const char *path, char *err, size_t errlen)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(d, p->key), *vn = yaml_document_get_node(d, p->value);
        const char *k = profile_scalar(d, kn), *v = profile_scalar(d, vn);
        char *end = NULL;
        if (k && !strcmp(k, "throughput") && vn->type == YAML_MAPPING_NODE) {
            for (yaml_node_pair_t *q = vn->data.mapping.pairs.start; q < vn->data.mapping.pairs.top; q++) {
                const char *o = profile_scalar(d, yaml_document_get_node(d, q->key));
                const char *x = profile_scalar(d, yaml_document_get_node(d, q->value));
                double thr = x ? strtod(x, &end) : -1;
                int at = 0;
                while (o && at < t->n && strcmp(t->option[at], o))
                    at++;   /* an option p99_ms named first */
                if ((at == t->n && (t->n == PLAN_MAX_OPTIONS || profile_copy(t->option[t->n], o)))
                    || !x || *end || !(thr > 0) || !isfinite(thr))
                    return profile_fail(err, errlen, path, yaml_document_get_node(d, q->key),
                                        "expected 'option: throughput' (a number > 0)");
                t->n += at == t->n;
                t->thr[at] = thr;
            }
        } else if (k && !strcmp(k, "p99_ms") && vn->type == YAML_MAPPING_NODE) {
            if (profile_p99(d, vn, t, path, err, errlen))
                return -EINVAL;
        } else if (k && !strcmp(k, "time_shares") && vn->type == YAML_MAPPING_NODE) {
            if (profile_shares(d, vn, t, path, err, errlen))
                return -EINVAL;
        } else if (k && v && !strcmp(k, "model") && !profile_copy(t->model, v)) {
        } else if (k && v && !strcmp(k, "workload") && !profile_copy(t->workload, v)) {
        } else if (k && v && !strcmp(k, "method") && !profile_copy(t->method, v)) {
        } else if (k && v && !strcmp(k, "memory_mib")) {
            long long mem = strtoll(v, &end, 10);
            if (*end || mem < 1 || mem > (1LL << 40))
                return profile_fail(err, errlen, path, vn, "'memory_mib' must be 1..2^40");
            t->mem_mib = mem;
        } else {
            return profile_fail(err, errlen, path, kn, "unknown key or bad value (expected model, "
                                "workload, method, memory_mib, throughput, p99_ms, "
                                "time_shares)");
        }
    }
    int thr = 0;
    for (int k = 0; k < t->n; k++)
        thr |= t->thr[k] > 0;
    if (!t->model[0] || !thr)
        return profile_fail(err, errlen, path, map, "a table needs 'model' and 'throughput'");
    char why[256];
    if (plan_profile_check_shares(t, why, sizeof(why)))
        return profile_fail(err, errlen, path, map, why);
    return 0;
}

int plan_profile_load(const char *path, struct plan_profile_table *t, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    yaml_parser_t ps;
    yaml_document_t doc;
    int rc;
    memset(t, 0, sizeof(*t));
    if (!f) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    if (!yaml_parser_initialize(&ps)) {
        fclose(f);
        return -ENOMEM;
    }
    yaml_parser_set_input_file(&ps, f);
    if (!yaml_parser_load(&ps, &doc)) {
        snprintf(err, errlen, "%s:%zu: YAML syntax: %s", path, ps.problem_mark.line + 1,
                 ps.problem ? ps.problem : "malformed");
        rc = -EINVAL;
    } else {
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        rc = root && root->type == YAML_MAPPING_NODE ? profile_pairs(&doc, root, t, path, err, errlen)
                                                     : profile_fail(err, errlen, path, root,
                                                                    "expected a mapping");
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&ps);
    fclose(f);
    return rc;
}
