/* sim_scenario.c - the simulator's scenario files (etc/sim/NAME.yaml):
 *
 *   seconds: 20
 *   measure: runnable | nvml | userd                 # optional (sim.h)
 *   warmup_s: 1       # optional: after any change of who competes, not judged
 *   gpu: { context_switch_us: 120, idle_switch_us: 20, disable_us: 720, enable_us: 400,
 *          preempt_us: 600,
 *          sense_us: 1000, report_phase_us: 0,
 *          nvml_sample_us: 0 }                                         # optional
 *   tenants:
 *     - name: a
 *       compute: { share: 75%, limit: none, priority: normal }  # as in kairosd.yaml
 *       load: deep | shallow | bursty | requests
 *       work_us: 500      # shallow: work per sync; bursty: on time; requests: per request
 *       gap_us: 50        # shallow: sync gap; bursty: off time; requests: interval
 *       arrive_s: 0
 *       leave_s: 10       # optional
 *
 * Errors name file:line:column like config.c. */
#include "daemon/time/sim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "daemon/base/yaml_doc.h"

#include "daemon/config/config.h"

static const char *sval(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int number(struct ydoc *p, const yaml_node_t *n, const char *what, double max, double *out)
{
    const char *s = sval(n);
    char *end;
    double v = s ? strtod(s, &end) : -1;
    if (!s || end == s || *end || !(v >= 0 && v <= max))
        return ydoc_fail(p, n, "expected %s as a number from 0 to %g", what, max);
    *out = v;
    return 0;
}

static int parse_load(struct ydoc *p, const yaml_node_t *n, enum gpu_sim_load *out)
{
    static const char *names[] = {"deep", "shallow", "bursty", "requests"};
    const char *s = sval(n);
    for (unsigned i = 0; s && i < 4; i++)
        if (!strcmp(s, names[i])) {
            *out = (enum gpu_sim_load)i;
            return 0;
        }
    return ydoc_fail(p, n, "expected load deep, shallow, bursty or requests");
}

static int parse_tenant(struct ydoc *p, const yaml_node_t *n, struct gpu_sim_tenant_spec *t)
{
    if (n->type != YAML_MAPPING_NODE)
        return ydoc_fail(p, n, "expected a tenant as a mapping { name: ..., compute: ..., load: ... }");
    memset(t, 0, sizeof *t);
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        const char *key = sval(k);
        double d;
        int rc = 0;
        if (!key)
            return ydoc_fail(p, k, "expected a key");
        if (!strcmp(key, "name")) {
            if (!sval(v) || strlen(sval(v)) >= sizeof t->name || !*sval(v))
                return ydoc_fail(p, v, "expected a tenant name of 1-63 characters");
            snprintf(t->name, sizeof t->name, "%s", sval(v));
        } else if (!strcmp(key, "compute")) {
            rc = config_parse_policy(p->name, p->doc, v, &t->pol, p->err, p->err_len);
        } else if (!strcmp(key, "load")) {
            rc = parse_load(p, v, &t->load);
        } else if (!strcmp(key, "work_us")) {
            if (!(rc = number(p, v, "work_us", 1e7, &d)))
                t->work_us = (uint32_t)d;
        } else if (!strcmp(key, "gap_us")) {
            if (!(rc = number(p, v, "gap_us", 1e7, &d)))
                t->gap_us = (uint32_t)d;
        } else if (!strcmp(key, "arrive_s")) {
            if (!(rc = number(p, v, "arrive_s", 86400, &d)))
                t->arrive_us = (uint64_t)(d * 1e6);
        } else if (!strcmp(key, "leave_s")) {
            if (!(rc = number(p, v, "leave_s", 86400, &d)))
                t->leave_us = (uint64_t)(d * 1e6);
        } else {
            return ydoc_fail(p, k, "unknown key '%s' in a tenant (expected name, compute, load, "
                              "work_us, gap_us, arrive_s or leave_s)", key);
        }
        if (rc)
            return rc;
    }
    if (!t->name[0])
        return ydoc_fail(p, n, "tenant without a name");
    return 0;
}

static int parse_gpu(struct ydoc *p, const yaml_node_t *n, struct gpu_sim_params *g)
{
    if (n->type != YAML_MAPPING_NODE)
        return ydoc_fail(p, n, "expected gpu as a mapping { context_switch_us: 25, ... }");
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        const char *key = sval(k);
        uint32_t *field = NULL;
        if (key && !strcmp(key, "context_switch_us"))
            field = &g->ctx_switch_us;
        else if (key && !strcmp(key, "idle_switch_us"))
            field = &g->idle_switch_us;
        else if (key && !strcmp(key, "disable_us"))
            field = &g->disable_us;
        else if (key && !strcmp(key, "enable_us"))
            field = &g->enable_us;
        else if (key && !strcmp(key, "preempt_us"))
            field = &g->preempt_us;
        else if (key && !strcmp(key, "default_timeslice_us"))
            field = &g->default_ts_us;
        else if (key && !strcmp(key, "sense_us"))
            field = &g->sense_us;
        else if (key && !strcmp(key, "report_phase_us"))
            field = &g->report_phase_us;
        else if (key && !strcmp(key, "nvml_sample_us"))
            field = &g->nvml_sample_us;
        else
            return ydoc_fail(p, k, "unknown key in gpu (expected context_switch_us, "
                              "idle_switch_us, disable_us, "
                              "enable_us, preempt_us, default_timeslice_us, sense_us, "
                              "report_phase_us or nvml_sample_us)");
        double d;
        if (number(p, v, key, 1e6, &d))
            return -EINVAL;
        *field = (uint32_t)d;
    }
    return 0;
}

bool sim_scenario_set_mode(struct sim_scenario *sc, const char *name)
{
    if (name && !strcmp(name, "native")) {
        sc->native = true;
        return true;
    }
    if (!sched_mode_parse(name, &sc->mode))
        return false;
    sc->native = false;
    return true;
}

static int parse_mode(struct ydoc *p, const yaml_node_t *v, struct sim_scenario *sc)
{
    if (sim_scenario_set_mode(sc, sval(v)))
        return 0;
    return ydoc_fail(p, v, "mode must be auto, timeslices, windows or native");
}

static int parse_measure(struct ydoc *p, const yaml_node_t *v, enum sim_measure *measure)
{
    static const char *const names[] = {"runnable", "nvml", "userd"};
    const char *m = sval(v);
    for (int i = 0; m && i < 3; i++)
        if (!strcmp(m, names[i])) {
            *measure = (enum sim_measure)i;
            return 0;
        }
    return ydoc_fail(p, v, "measure must be runnable (the simulator's knowledge of who "
                           "waited), nvml (use only) or userd (the shims' USERD samples "
                           "plus use, as kairosd sees the GPU)");
}

static int parse_root(struct ydoc *p, const yaml_node_t *root, struct sim_scenario *sc)
{
    if (!root || root->type != YAML_MAPPING_NODE)
        return ydoc_fail(p, root, "expected a scenario mapping (seconds, gpu, tenants)");
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start;
         pr < root->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        const char *key = sval(k);
        int rc;
        if (key && !strcmp(key, "seconds"))
            rc = number(p, v, "seconds", 3600, &sc->seconds);
        else if (key && !strcmp(key, "gpu"))
            rc = parse_gpu(p, v, &sc->gpu);
        else if (key && !strcmp(key, "mode"))
            rc = parse_mode(p, v, sc);
        else if (key && !strcmp(key, "measure"))
            rc = parse_measure(p, v, &sc->measure);
        else if (key && !strcmp(key, "warmup_s")) {
            double d;
            rc = number(p, v, "warmup_s", 60, &d);
            sc->warmup_periods = (size_t)llround(d * 1e6 / SCHED_PERIOD_US);
        } else if (key && !strcmp(key, "latency_yield_us")) {
            double d;
            rc = number(p, v, "latency_yield_us", SCHED_TS_UNIT_US, &d);
            sc->latency_yield_us = (uint32_t)d;
        }
        else if (key && !strcmp(key, "tenants")) {
            if (v->type != YAML_SEQUENCE_NODE)
                return ydoc_fail(p, v, "expected tenants as a list");
            rc = 0;
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 !rc && it < v->data.sequence.items.top; it++) {
                if (sc->n == GPU_SIM_MAX_TENANTS)
                    return ydoc_fail(p, v, "at most %d tenants", GPU_SIM_MAX_TENANTS);
                rc = parse_tenant(p, yaml_document_get_node(p->doc, *it), &sc->tenants[sc->n++]);
            }
        } else
            return ydoc_fail(p, k, "unknown setting (expected seconds, gpu, mode, measure, "
                                   "warmup_s, latency_yield_us or tenants)");
        if (rc)
            return rc;
    }
    double sum = 0;
    for (size_t i = 0; i < sc->n; i++)
        sum += sc->tenants[i].pol.share;
    if (sum > 1.0 + 1e-9)
        return ydoc_fail(p, root, "compute shares add up to %g%%: at most 100%% can be guaranteed",
                    sum * 100);
    if (!sc->n)
        return ydoc_fail(p, root, "a scenario needs tenants");
    return 0;
}

int sim_scenario_parse(const char *name, const char *text, size_t len, struct sim_scenario *sc,
                       char *err, size_t err_len)
{
    memset(sc, 0, sizeof *sc);
    sc->seconds = 10;
    sc->latency_yield_us = SCHED_YIELD_US;
    sc->warmup_periods = SIM_WARMUP_PERIODS;
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return -ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        snprintf(err, err_len, "%s:%lu:%lu: %s", name,
                 (unsigned long)parser.problem_mark.line + 1,
                 (unsigned long)parser.problem_mark.column + 1,
                 parser.problem ? parser.problem : "not valid YAML");
        yaml_parser_delete(&parser);
        return -EINVAL;
    }
    struct ydoc p = {.name = name, .doc = &doc, .err = err, .err_len = err_len};
    int rc = ydoc_check_unique_keys(&p);
    if (!rc)
        rc = ydoc_refuse_more(&p, &parser);
    if (!rc)
        rc = parse_root(&p, yaml_document_get_root_node(&doc), sc);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

int sim_scenario_load(const char *path, struct sim_scenario *sc, char *err, size_t err_len)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int rc = -errno;
        snprintf(err, err_len, "%s: cannot open the scenario: %s", path, strerror(errno));
        return rc;
    }
    char *text = malloc(1 << 20);
    size_t len = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (!text)
        return -ENOMEM;
    int rc = sim_scenario_parse(path, text, len, sc, err, err_len);
    free(text);
    return rc;
}
