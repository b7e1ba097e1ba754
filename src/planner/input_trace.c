/* input_trace.c - the planner's trace files (plan_trace_parse, plan_trace_load): timed
 * arrivals (workloads, read with the cluster file's rules by input.c) and departures
 * (a workload's name, present at that time), a default drain_seconds and an end; every
 * error names file:line. Replayed by trace.c; the format is in man/kairos-plan.1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "kairos/plan.h"
#include "planner/input_internal.h"

struct input_trace {
    struct plan_trace *t;
    char (*depart)[PLAN_NAME_MAX];     /* per event: the departing workload's name */
    int cap;
};

static int input_trace_event(struct input_trace *x, double at, int kind, int w, int line,
                             const char *name)
{
    struct plan_trace *t = x->t;
    if (t->n_events == x->cap) {
        int cap = x->cap ? x->cap * 2 : 16;
        struct plan_trace_event *ne = realloc(t->events, (size_t)cap * sizeof(*ne));
        if (ne)
            t->events = ne;
        char (*nd)[PLAN_NAME_MAX] = realloc(x->depart, (size_t)cap * sizeof(*nd));
        if (nd)
            x->depart = nd;
        if (!ne || !nd)
            return -ENOMEM;
        x->cap = cap;
    }
    snprintf(x->depart[t->n_events], PLAN_NAME_MAX, "%s", name ? name : "");
    t->events[t->n_events++] = (struct plan_trace_event){at, kind, w, line};
    return 0;
}

/* One event: 'at' and exactly one of 'arrive' (a workload, as in a cluster file; its
 * replicas each arrive) or 'depart' (a workload's name). */
static int input_trace_item(struct input_ctx *c, yaml_node_t *n, struct input_trace *x)
{
    static const char *const keys[] = {"at", "arrive", "depart", NULL};
    yaml_node_t *vat, *va, *vd;
    double at = 0;
    char name[PLAN_NAME_MAX];
    int rc = input_expect(c, n, YAML_MAPPING_NODE, "an event mapping ('at' and 'arrive' or "
                          "'depart')");
    rc = rc ? rc : input_only_keys(c, n, keys);
    rc = rc ? rc : input_require(c, n, "at", &vat);
    rc = rc ? rc : input_number(c, vat, "at", &at);
    if (!rc && !(at >= 0))
        rc = input_fail(c, vat, "'at' must be 0 or more seconds, got %g", at);
    if (!rc && x->t->n_events && at < x->t->events[x->t->n_events - 1].at)
        rc = input_fail(c, vat, "events must be in time order: at %g comes after %g", at,
                        x->t->events[x->t->n_events - 1].at);
    va = rc ? NULL : input_get(c, n, "arrive");
    vd = rc ? NULL : input_get(c, n, "depart");
    if (!rc && !!va == !!vd)
        rc = input_fail(c, n, "an event has exactly one of 'arrive' (a workload) or 'depart' "
                        "(a workload's name)");
    if (rc)
        return rc;
    int line = (int)n->start_mark.line + 1, first = c->in->n_workloads;
    if (vd)
        return input_name(c, vd, "depart", name) ? -EINVAL
               : input_trace_event(x, at, PLAN_TRACE_DEPART, -1, line, name);
    rc = input_workload(c, va);
    for (int w = first; !rc && w < c->in->n_workloads; w++)
        rc = input_trace_event(x, at, PLAN_TRACE_ARRIVE, w, line, NULL);
    return rc;
}

static int input_trace_root(struct input_ctx *c, yaml_node_t *root, struct input_trace *x)
{
    static const char *const keys[] = {"drain_seconds", "end", "events", NULL};
    yaml_node_t *ev, *v;
    int rc = input_expect(c, root, YAML_MAPPING_NODE, "a trace mapping with 'events'");
    rc = rc ? rc : input_only_keys(c, root, keys);
    rc = rc ? rc : input_require(c, root, "events", &ev);
    rc = rc ? rc : input_expect(c, ev, YAML_SEQUENCE_NODE, "a list of events");
    if (!rc && (v = input_get(c, root, "drain_seconds")))
        rc = input_drain(c, v, &x->t->drain_s);
    x->t->end_s = -1;
    if (!rc && (v = input_get(c, root, "end")) && !(rc = input_number(c, v, "end", &x->t->end_s))
        && !(x->t->end_s >= 0))
        rc = input_fail(c, v, "'end' must be 0 or more seconds");
    for (yaml_node_item_t *i = rc ? NULL : ev->data.sequence.items.start;
         i && i < ev->data.sequence.items.top && !rc; i++)
        rc = input_trace_item(c, input_node(c, *i), x);
    if (!rc && x->t->n_events && x->t->end_s >= 0 &&
        x->t->end_s < x->t->events[x->t->n_events - 1].at)
        rc = input_fail(c, v ? v : root, "'end' (%g) comes before the last event (at %g)",
                        x->t->end_s, x->t->events[x->t->n_events - 1].at);
    return rc;
}

/* Departures name a workload present at their time; arrivals' indices become the
 * cluster's (the trace's workloads were appended after its n_initial own). */
static int input_trace_resolve(const char *path, struct plan_input *cluster, struct input_trace *x,
                               char *err, size_t errlen)
{
    struct plan_trace *t = x->t;
    char *present = calloc((size_t)cluster->n_workloads + 1, 1);
    int rc = present ? 0 : -ENOMEM;
    for (int w = 0; present && w < t->n_initial; w++)
        present[w] = 1;
    for (int e = 0; !rc && e < t->n_events; e++) {
        struct plan_trace_event *ev = &t->events[e];
        if (ev->kind == PLAN_TRACE_ARRIVE) {
            ev->workload += t->n_initial;
            present[ev->workload] = 1;
            continue;
        }
        ev->workload = plan_input_find(cluster, x->depart[e]);
        if (ev->workload < 0 || !present[ev->workload]) {
            snprintf(err, errlen, "%s:%d: '%s' departs at %g s but %s", path, ev->line,
                     x->depart[e], ev->at, ev->workload < 0 ? "no workload of the cluster file "
                     "or the trace has that name" : "is not there then (it arrives later, or "
                     "departed already)");
            rc = -EINVAL;
        } else {
            present[ev->workload] = 0;
        }
    }
    free(present);
    return rc;
}

int plan_trace_parse(const char *text, size_t len, const char *name, struct plan_input *cluster,
                     struct plan_trace *t, char *err, size_t errlen)
{
    struct plan_input arr;
    struct input_trace x = {t, NULL, 0};
    struct input_ctx c;
    yaml_document_t doc;
    int rc;
    memset(t, 0, sizeof(*t));
    memset(&arr, 0, sizeof(arr));
    memset(&c, 0, sizeof(c));
    t->drain_s = PLAN_TRACE_DRAIN_DEFAULT;
    t->n_initial = cluster->n_workloads;
    arr.n_pools = cluster->n_pools;
    memcpy(arr.pools, cluster->pools, sizeof(arr.pools));
    arr.interference = cluster->interference;
    c = (struct input_ctx){.file = name, .err = err, .errlen = errlen, .in = &arr, .doc = &doc,
                           .base = cluster};
    yaml_node_t *root = input_load_doc(&c, text, len, &rc);
    if (root) {
        rc = input_trace_root(&c, root, &x);
        yaml_document_delete(&doc);
    }
    rc = rc ? rc : plan_input_merge(cluster, &arr, name, err, errlen);
    rc = rc ? rc : input_trace_resolve(name, cluster, &x, err, errlen);
    if (!rc && t->end_s < 0)
        t->end_s = t->n_events ? t->events[t->n_events - 1].at : 0;
    free(c.names.slot);
    free(x.depart);
    plan_input_free(&arr);
    if (rc)
        plan_trace_free(t);
    return rc;
}

void plan_trace_free(struct plan_trace *t)
{
    free(t->events);
    t->events = NULL;
    t->n_events = 0;
}

int plan_trace_load(const char *path, struct plan_input *cluster, struct plan_trace *t,
                    char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0;
    int rc;
    memset(t, 0, sizeof(*t));
    if (!f) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    rc = input_read_all(f, &buf, &len);
    fclose(f);
    if (rc)
        snprintf(err, errlen, "%s: %s", path, rc == -EIO ? "read error" : strerror(-rc));
    else
        rc = plan_trace_parse(buf, len, path, cluster, t, err, errlen);
    free(buf);
    return rc;
}
