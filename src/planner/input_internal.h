/* input_internal.h - what the planner's two YAML readers share: input.c (cluster
 * files, workloads-only files) and input_trace.c (trace files, whose arrivals are
 * workloads read with input.c's rules). Private to src/planner/. */
#ifndef KAIROS_PLANNER_INPUT_INTERNAL_H
#define KAIROS_PLANNER_INPUT_INTERNAL_H

#include <stddef.h>
#include <stdio.h>
#include <yaml.h>

#include "kairos/plan.h"

struct input_block;

/* Workload names -> index, open addressing (the duplicate check must stay linear). */
struct input_names {
    int *slot;          /* workload index + 1, 0 = empty */
    size_t mask;
};

struct input_ctx {
    struct input_names names;
    yaml_document_t *doc;
    const char *file;
    char *err;
    size_t errlen;
    struct plan_input *in;
    const struct plan_input *base;   /* workloads-only files: the cluster's pools */
    struct plan_gpu_model custom[PLAN_MAX_POOLS];
    int n_custom;
    struct input_block *block;       /* the workload list read item by item, or NULL */
};

int input_fail(struct input_ctx *c, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
yaml_node_t *input_node(struct input_ctx *c, int id);
int input_expect(struct input_ctx *c, const yaml_node_t *n, yaml_node_type_t t, const char *what);
int input_number(struct input_ctx *c, const yaml_node_t *n, const char *key, double *out);
int input_name(struct input_ctx *c, const yaml_node_t *n, const char *key, char *out);
yaml_node_t *input_get(struct input_ctx *c, yaml_node_t *map, const char *key);
int input_only_keys(struct input_ctx *c, yaml_node_t *map, const char *const *keys);
int input_require(struct input_ctx *c, yaml_node_t *map, const char *key, yaml_node_t **out);
int input_workload(struct input_ctx *c, yaml_node_t *n);
int input_drain(struct input_ctx *c, const yaml_node_t *n, double *out);
int input_read_all(FILE *f, char **buf, size_t *len);
yaml_node_t *input_load_doc(struct input_ctx *c, const char *text, size_t len, int *rc);

#endif
