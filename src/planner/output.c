/* output.c - plans out and back in: a readable table, JSON and YAML (libyaml's
 * emitter), and reading a JSON plan back for online changes.
 *
 * YAML comes from a json_t tree (output_tree); the YAML writer is a generic json_t
 * walker. JSON is written directly in the same order and format as jansson would write
 * that tree (at 100,000 workloads building and freeing the tree was a third of
 * `kairos plan --json`); test_output.c checks the two texts are identical byte for
 * byte, so the formats cannot drift apart.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "kairos/plan.h"

static const struct plan_gpu_model *output_model(const struct plan_input *in, const struct plan *p,
                                                 int gpu)
{
    return &in->pools[p->gpus[gpu].pool].model;
}

/* Tenants of instance i, counted along its assignment list. */
static int output_tenants(const int *first, const int *next, int i)
{
    int n = 0;
    for (int a = first[i]; a >= 0; a = next[a])
        n++;
    return n;
}

/* Linked lists so that every writer visits the plan in one pass: the assignments of
 * each instance and the instances of each GPU, in plan order. */
struct output_lists {
    int *first_a, *next_a;   /* per instance / per assignment */
    int *first_i, *next_i;   /* per GPU / per instance */
};

static void output_lists_free(struct output_lists *l)
{
    free(l->first_a);
    free(l->next_a);
    free(l->first_i);
    free(l->next_i);
}

static int output_lists_build(const struct plan *p, struct output_lists *l)
{
    l->first_a = malloc(((size_t)p->n_instances + 1) * sizeof(int));
    l->next_a = malloc(((size_t)p->n_assigns + 1) * sizeof(int));
    l->first_i = malloc(((size_t)p->n_gpus + 1) * sizeof(int));
    l->next_i = malloc(((size_t)p->n_instances + 1) * sizeof(int));
    if (!l->first_a || !l->next_a || !l->first_i || !l->next_i) {
        output_lists_free(l);
        return -ENOMEM;
    }
    for (int i = 0; i < p->n_instances; i++)
        l->first_a[i] = -1;
    for (int g = 0; g < p->n_gpus; g++)
        l->first_i[g] = -1;
    for (int a = p->n_assigns - 1; a >= 0; a--) {
        l->next_a[a] = l->first_a[p->assigns[a].instance];
        l->first_a[p->assigns[a].instance] = a;
    }
    for (int i = p->n_instances - 1; i >= 0; i--) {
        l->next_i[i] = l->first_i[p->instances[i].gpu];
        l->first_i[p->instances[i].gpu] = i;
    }
    return 0;
}

/* Idle capacity of GPU g in compute slices: slices no instance holds plus each
 * instance's slices x its unused time; *free_slices gets the first part. */
static double output_idle(const struct plan_input *in, const struct plan *p,
                          const struct output_lists *l, int g, int *free_slices)
{
    const struct plan_gpu_model *m = output_model(in, p, g);
    int used = 0;
    double idle = 0;
    for (int i = l->first_i[g]; i >= 0; i = l->next_i[i]) {
        int c = plan_option_compute(m, p->instances[i].option), t = 0;
        for (int a = l->first_a[i]; a >= 0; a = l->next_a[a])
            t += p->assigns[a].time;
        used += c;
        idle += c * (double)(PLAN_TIME_UNITS - t) / PLAN_TIME_UNITS;
    }
    if (free_slices)
        *free_slices = PLAN_COMPUTE_SLICES - used;
    return idle + PLAN_COMPUTE_SLICES - used;
}

/* ---- the json tree ---- */

static json_t *output_assign_json(const struct plan_input *in, const struct plan *p,
                                  const struct plan_assign *a, int tenants)
{
    const struct plan_workload *w = &in->workloads[a->workload];
    return json_pack("{s:s, s:f, s:I, s:f, s:f}", "name", w->name,
                     "t", a->time / (double)PLAN_TIME_UNITS, "memory_mib", (json_int_t)a->mem_mib,
                     "target", w->target, "normalized_throughput",
                     plan_norm_thr(in, p, a, tenants));
}

static json_t *output_instance_json(const struct plan_input *in, const struct plan *p, int i,
                                    const int *first, const int *next)
{
    const struct plan_instance *pi = &p->instances[i];
    json_t *wl = json_array();
    int tenants = output_tenants(first, next, i);
    for (int a = first[i]; a >= 0; a = next[a])
        json_array_append_new(wl, output_assign_json(in, p, &p->assigns[a], tenants));
    return json_pack("{s:s, s:i, s:o}", "profile",
                     plan_option_name(output_model(in, p, pi->gpu), pi->option), "start", pi->start,
                     "workloads", wl);
}

static json_t *output_gpus_json(const struct plan_input *in, const struct plan *p)
{
    struct output_lists l;
    json_t *gpus = json_array();
    if (output_lists_build(p, &l)) {
        json_decref(gpus);
        return NULL;
    }
    for (int g = 0; g < p->n_gpus; g++) {
        json_t *insts = json_array();
        for (int i = l.first_i[g]; i >= 0; i = l.next_i[i])
            json_array_append_new(insts, output_instance_json(in, p, i, l.first_a, l.next_a));
        json_array_append_new(gpus, json_pack("{s:i, s:s, s:b, s:f, s:o}", "index", g, "model",
                                              output_model(in, p, g)->name, "mig", p->gpus[g].mig,
                                              "idle_slices", output_idle(in, p, &l, g, NULL),
                                              "instances", insts));
    }
    output_lists_free(&l);
    return gpus;
}

static const char *output_option_at(const struct plan_input *in, int pool, int option)
{
    return pool < 0 || option < 0 ? "" : plan_option_name(&in->pools[pool].model, option);
}

static json_t *output_moves_json(const struct plan_input *in, const struct plan *p,
                                 const struct plan_moves *mv)
{
    json_t *arr = json_array();
    for (int k = 0; mv && k < mv->n; k++) {
        const struct plan_move *m = &mv->moves[k];
        int pool = m->to_gpu >= 0 ? p->gpus[m->to_gpu].pool : -1;
        json_t *o = json_pack("{s:s}", "name", in->workloads[m->workload].name);
        json_object_set_new(o, "from_gpu", m->from_gpu >= 0 ? json_integer(m->from_gpu) : json_null());
        json_object_set_new(o, "to_gpu", m->to_gpu >= 0 ? json_integer(m->to_gpu) : json_null());
        json_object_set_new(o, "to_profile", m->to_gpu >= 0
                            ? json_string(output_option_at(in, pool, m->to_option)) : json_null());
        json_array_append_new(arr, o);
    }
    return arr;
}

static json_t *output_tree(const struct plan_input *in, const struct plan *p,
                           const struct plan_moves *mv)
{
    struct plan_metrics m;
    plan_metrics_compute(in, p, &m);
    json_t *inf = json_array();
    for (int f = 0; f < p->n_infeasible; f++)
        json_array_append_new(inf, json_pack("{s:s, s:s}", "name",
                                             in->workloads[p->infeasible[f].workload].name, "reason",
                                             plan_reason_text(p->infeasible[f].reason)));
    json_t *root = json_pack("{s:s, s:s, s:{s:i, s:f, s:f, s:i, s:i}}", "algo", p->algo,
                             "interference", plan_interference_name(in->interference), "summary",
                             "gpus", m.gpus, "gpus_in_slices", m.slices,
                             "mean_normalized_throughput", m.mean_norm_thr, "placed", m.placed,
                             "infeasible", m.infeasible);
    if (p->exact_status >= 0)
        json_object_set_new(root, "exact", json_pack("{s:s, s:f}", "status",
                                                     plan_exact_status_text(p->exact_status),
                                                     "lower_bound", p->exact_bound));
    json_object_set_new(root, "gpus", output_gpus_json(in, p));
    json_object_set_new(root, "infeasible", inf);
    if (mv)
        json_object_set_new(root, "moves", output_moves_json(in, p, mv));
    return root;
}

/* ---- YAML from the tree ---- */

static int output_yaml_scalar(yaml_emitter_t *em, const char *s, int plain)
{
    yaml_event_t ev;
    yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), plain, !plain,
                                 plain ? YAML_PLAIN_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
    return yaml_emitter_emit(em, &ev);
}

static int output_yaml_node(yaml_emitter_t *em, json_t *j)
{
    yaml_event_t ev;
    char buf[64];
    int ok = 1;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *v;
        yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
        ok = yaml_emitter_emit(em, &ev);
        json_object_foreach(j, k, v)
            ok = ok && output_yaml_scalar(em, k, 1) && output_yaml_node(em, v);
        yaml_mapping_end_event_initialize(&ev);
        return ok && yaml_emitter_emit(em, &ev);
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *v;
        yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
        ok = yaml_emitter_emit(em, &ev);
        json_array_foreach(j, i, v)
            ok = ok && output_yaml_node(em, v);
        yaml_sequence_end_event_initialize(&ev);
        return ok && yaml_emitter_emit(em, &ev);
    }
    case JSON_STRING:
        return output_yaml_scalar(em, json_string_value(j), 0);
    case JSON_INTEGER:
        snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(j));
        return output_yaml_scalar(em, buf, 1);
    case JSON_REAL:
        snprintf(buf, sizeof(buf), "%.6g", json_real_value(j));
        return output_yaml_scalar(em, buf, 1);
    case JSON_TRUE:
        return output_yaml_scalar(em, "true", 1);
    case JSON_FALSE:
        return output_yaml_scalar(em, "false", 1);
    default:
        return output_yaml_scalar(em, "null", 1);
    }
}

static int output_yaml(json_t *root, FILE *f)
{
    yaml_emitter_t em;
    yaml_event_t ev;
    if (!yaml_emitter_initialize(&em))
        return -ENOMEM;
    yaml_emitter_set_output_file(&em, f);
    yaml_emitter_set_unicode(&em, 1);
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    int ok = yaml_emitter_emit(&em, &ev);
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    ok = ok && yaml_emitter_emit(&em, &ev) && output_yaml_node(&em, root);
    yaml_document_end_event_initialize(&ev, 1);
    ok = ok && yaml_emitter_emit(&em, &ev);
    yaml_stream_end_event_initialize(&ev);
    ok = ok && yaml_emitter_emit(&em, &ev);
    yaml_emitter_delete(&em);
    return ok ? 0 : -EIO;
}

/* ---- the table ---- */

static void output_table_gpu(const struct plan_input *in, const struct plan *p,
                             const struct output_lists *l, int g, FILE *f)
{
    const struct plan_gpu_model *m = output_model(in, p, g);
    for (int i = l->first_i[g]; i >= 0; i = l->next_i[i]) {
        const struct plan_instance *pi = &p->instances[i];
        int tenants = output_tenants(l->first_a, l->next_a, i);
        for (int a = l->first_a[i]; a >= 0; a = l->next_a[a]) {
            const struct plan_assign *as = &p->assigns[a];
            fprintf(f, "%-4d %-18s %-9s %5d  %-28s %6.1f %9lld %8.3f\n", g, m->name,
                    plan_option_name(m, pi->option), pi->start, in->workloads[as->workload].name,
                    as->time * 100.0 / PLAN_TIME_UNITS, (long long)as->mem_mib,
                    plan_norm_thr(in, p, as, tenants));
        }
    }
}

static int output_table(const struct plan_input *in, const struct plan *p,
                         const struct plan_moves *mv, FILE *f)
{
    struct plan_metrics m;
    plan_metrics_compute(in, p, &m);
    fprintf(f, "plan (%s, interference %s): %d GPUs (%.2f in slices), %d workloads placed, "
            "%d infeasible, mean Thr/target %.3f\n", p->algo,
            plan_interference_name(in->interference), m.gpus, m.slices, m.placed, m.infeasible,
            m.mean_norm_thr);
    if (p->exact_status >= 0)
        fprintf(f, "exact: %s, lower bound %.0f GPUs\n", plan_exact_status_text(p->exact_status),
                p->exact_bound);
    fprintf(f, "\n%-4s %-18s %-9s %5s  %-28s %6s %9s %8s\n", "GPU", "model", "instance", "start",
            "workload", "t(%)", "m(MiB)", "Thr/tgt");
    struct output_lists l;
    if (output_lists_build(p, &l))
        return -ENOMEM;
    for (int g = 0; g < p->n_gpus; g++)
        output_table_gpu(in, p, &l, g, f);
    output_lists_free(&l);
    for (int k = 0; k < p->n_infeasible; k++)
        fprintf(f, "%sinfeasible: %s: %s\n", k ? "" : "\n",
                in->workloads[p->infeasible[k].workload].name,
                plan_reason_text(p->infeasible[k].reason));
    for (int k = 0; mv && k < mv->n; k++) {
        const struct plan_move *mo = &mv->moves[k];
        fprintf(f, "%smove: %s: ", k ? "" : "\n", in->workloads[mo->workload].name);
        if (mo->from_gpu >= 0)
            fprintf(f, "from GPU %d ", mo->from_gpu);
        else
            fprintf(f, "new ");
        if (mo->to_gpu >= 0)
            fprintf(f, "to GPU %d %s\n", mo->to_gpu,
                    output_option_at(in, p->gpus[mo->to_gpu].pool, mo->to_option));
        else
            fprintf(f, "removed\n");
    }
    if (mv && !mv->n)
        fprintf(f, "\nmoves: none\n");
    return 0;
}

/* ---- --explain: the plan's cost and why each workload sits where it sits ---- */

static void output_explain_workload(const struct plan_input *in, const struct plan *p,
                                    const struct plan_assign *as, int tenants, FILE *f)
{
    const struct plan_instance *pi = &p->instances[as->instance];
    const struct plan_gpu_model *m = output_model(in, p, pi->gpu);
    const struct plan_workload *w = &in->workloads[as->workload];
    int pool = p->gpus[pi->gpu].pool, smallest = -1, cheapest = -1;
    long best_area = 0;
    fprintf(f, "  %s: GPU %d %s@%d, t %.1f %% with %d tenant%s; alone it needs:", w->name,
            pi->gpu, plan_option_name(m, pi->option), pi->start, as->time / 10.0, tenants,
            tenants == 1 ? "" : "s");
    /* options in size order: MIG profiles as listed, then the whole GPU */
    for (int k = 1; k <= plan_option_count(m); k++) {
        int o = k == plan_option_count(m) ? PLAN_OPTION_WHOLE : k;
        int t = plan_time_needed(w, pool, m, o);
        if (t < 0)
            continue;
        long area = (long)t * plan_option_compute(m, o);
        fprintf(f, " %s %.1f %%", plan_option_name(m, o), t / 10.0);
        if (smallest < 0)
            smallest = o;
        if (cheapest < 0 || area < best_area) {
            cheapest = o;
            best_area = area;
        }
    }
    const char *why = pi->option == smallest ? "the smallest option that meets its target"
                    : pi->option == cheapest ? "the option with the least slices x time"
                    : tenants > 1 ? "idle time of a larger instance shared with others (one "
                                    "instance fewer than its own)"
                    : "the free slices left on this GPU";
    fprintf(f, "\n    here: %s\n", why);
}

int plan_write_explain(const struct plan_input *in, const struct plan *p, void *stream)
{
    FILE *f = stream;
    struct output_lists l;
    struct plan_metrics m;
    double lb = 0;
    if (output_lists_build(p, &l))
        return -ENOMEM;
    plan_metrics_compute(in, p, &m);
    int rc = plan_lower_bound(in, &lb);
    fprintf(f, "\nexplain: model Thr(s, t) = Thr(s) x t x eff(tenants), interference %s%s\n",
            plan_interference_name(in->interference), in->n_curves ? " (on a whole GPU, a "
            "measured time-share curve where a workload's profile has one)" : "");
    if (!rc)
        fprintf(f, "lower bound (LP relaxation, compute-time and memory slices): %.2f -> at "
                "least %d GPUs; this plan: %d\n", lb, (int)ceil(lb - 1e-6), m.gpus);
    else
        fprintf(f, "lower bound: not computed (%s)\n", rc == -E2BIG ? "more than 20000 "
                "workloads" : "the LP solver failed");
    fprintf(f, "idle capacity per GPU (compute slices: free + unused time in instances):\n");
    double total = 0;
    for (int g = 0; g < p->n_gpus; g++) {
        int free_slices = 0;
        double idle = output_idle(in, p, &l, g, &free_slices);
        total += idle;
        fprintf(f, "  GPU %d: %.2f of 7 idle (%d free slices)\n", g, idle, free_slices);
    }
    fprintf(f, "  total idle: %.2f GPU-equivalents\nworkloads:\n", total / PLAN_COMPUTE_SLICES);
    for (int g = 0; g < p->n_gpus; g++)
        for (int i = l.first_i[g]; i >= 0; i = l.next_i[i]) {
            int tenants = output_tenants(l.first_a, l.next_a, i);
            for (int a = l.first_a[i]; a >= 0; a = l.next_a[a])
                output_explain_workload(in, p, &p->assigns[a], tenants, f);
        }
    output_lists_free(&l);
    return ferror(f) ? -EIO : 0;
}

/* ---- JSON written directly, as json_dumps(output_tree(), INDENT(2) | PRESERVE_ORDER |
 * REAL_PRECISION(10)) writes it ---- */

struct output_buf {
    char *s;
    size_t len, cap;
    int depth, fresh;            /* fresh: nothing yet in the innermost container */
    int failed;
};

static void ob_put(struct output_buf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->failed = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
}

static void ob_str(struct output_buf *b, const char *s)
{
    ob_put(b, s, strlen(s));
}

static void ob_newline(struct output_buf *b)
{
    static const char spaces[] = "                                ";
    ob_put(b, "\n", 1);
    for (int d = b->depth * 2; d > 0; d -= 32)
        ob_put(b, spaces, d < 32 ? (size_t)d : 32);
}

/* Before a value or a key inside a container. */
static void ob_item(struct output_buf *b)
{
    if (!b->fresh)
        ob_put(b, ",", 1);
    b->fresh = 0;
    ob_newline(b);
}

static void ob_quoted(struct output_buf *b, const char *s)
{
    ob_put(b, "\"", 1);
    for (const char *p = s; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        char esc[8];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            ob_put(b, esc, 2);
        } else if (ch < 0x20) {
            const char *named = ch == '\b' ? "\\b" : ch == '\f' ? "\\f" : ch == '\n' ? "\\n"
                              : ch == '\r' ? "\\r" : ch == '\t' ? "\\t" : NULL;
            if (!named)
                snprintf(esc, sizeof(esc), "\\u%04X", ch);
            ob_str(b, named ? named : esc);
        } else {
            ob_put(b, p, 1);
        }
    }
    ob_put(b, "\"", 1);
}

static void ob_key(struct output_buf *b, const char *key)
{
    ob_item(b);
    ob_quoted(b, key);
    ob_put(b, ": ", 2);
}

static void ob_open(struct output_buf *b, const char *key, char bracket)
{
    if (key)
        ob_key(b, key);
    else
        ob_item(b);
    ob_put(b, &bracket, 1);
    b->depth++;
    b->fresh = 1;
}

static void ob_close(struct output_buf *b, char bracket)
{
    b->depth--;
    if (!b->fresh)
        ob_newline(b);
    b->fresh = 0;
    ob_put(b, &bracket, 1);
}

static void ob_kstr(struct output_buf *b, const char *key, const char *v)
{
    ob_key(b, key);
    ob_quoted(b, v);
}

static void ob_kint(struct output_buf *b, const char *key, long long v)
{
    char num[32];
    ob_key(b, key);
    ob_put(b, num, (size_t)snprintf(num, sizeof(num), "%lld", v));
}

/* jansson's real format: %.10g, a ".0" where it would read back as an integer, and
 * no '+' or leading zeros in the exponent. */
static void ob_kreal(struct output_buf *b, const char *key, double v)
{
    char num[40], *e;
    ob_key(b, key);
    snprintf(num, sizeof(num), "%.10g", v);
    if (!strchr(num, '.') && !strchr(num, 'e'))
        strcat(num, ".0");
    if ((e = strchr(num, 'e'))) {
        char *from = e + 1, *to = e + 1;
        if (*from == '+')
            from++;
        else if (*from == '-')
            from = ++to;
        while (*from == '0' && from[1])
            from++;
        memmove(to, from, strlen(from) + 1);
    }
    ob_str(b, num);
}

static void ob_knull(struct output_buf *b, const char *key)
{
    ob_key(b, key);
    ob_str(b, "null");
}

static void output_json_gpu(struct output_buf *b, const struct plan_input *in,
                            const struct plan *p, const struct output_lists *l, int g)
{
    ob_open(b, NULL, '{');
    ob_kint(b, "index", g);
    ob_kstr(b, "model", output_model(in, p, g)->name);
    ob_key(b, "mig");
    ob_str(b, p->gpus[g].mig ? "true" : "false");
    ob_kreal(b, "idle_slices", output_idle(in, p, l, g, NULL));
    ob_open(b, "instances", '[');
    for (int i = l->first_i[g]; i >= 0; i = l->next_i[i]) {
        const struct plan_instance *pi = &p->instances[i];
        int tenants = output_tenants(l->first_a, l->next_a, i);
        ob_open(b, NULL, '{');
        ob_kstr(b, "profile", plan_option_name(output_model(in, p, g), pi->option));
        ob_kint(b, "start", pi->start);
        ob_open(b, "workloads", '[');
        for (int k = l->first_a[i]; k >= 0; k = l->next_a[k]) {
            const struct plan_assign *a = &p->assigns[k];
            const struct plan_workload *w = &in->workloads[a->workload];
            ob_open(b, NULL, '{');
            ob_kstr(b, "name", w->name);
            ob_kreal(b, "t", a->time / (double)PLAN_TIME_UNITS);
            ob_kint(b, "memory_mib", a->mem_mib);
            ob_kreal(b, "target", w->target);
            ob_kreal(b, "normalized_throughput", plan_norm_thr(in, p, a, tenants));
            ob_close(b, '}');
        }
        ob_close(b, ']');
        ob_close(b, '}');
    }
    ob_close(b, ']');
    ob_close(b, '}');
}

static void output_json_moves(struct output_buf *b, const struct plan_input *in,
                              const struct plan *p, const struct plan_moves *mv)
{
    ob_open(b, "moves", '[');
    for (int k = 0; k < mv->n; k++) {
        const struct plan_move *m = &mv->moves[k];
        int pool = m->to_gpu >= 0 ? p->gpus[m->to_gpu].pool : -1;
        ob_open(b, NULL, '{');
        ob_kstr(b, "name", in->workloads[m->workload].name);
        if (m->from_gpu >= 0)
            ob_kint(b, "from_gpu", m->from_gpu);
        else
            ob_knull(b, "from_gpu");
        if (m->to_gpu >= 0) {
            ob_kint(b, "to_gpu", m->to_gpu);
            ob_kstr(b, "to_profile", output_option_at(in, pool, m->to_option));
        } else {
            ob_knull(b, "to_gpu");
            ob_knull(b, "to_profile");
        }
        ob_close(b, '}');
    }
    ob_close(b, ']');
}

static int output_json(const struct plan_input *in, const struct plan *p,
                       const struct plan_moves *mv, FILE *f)
{
    struct output_buf b = {.fresh = 1};
    struct output_lists l;
    struct plan_metrics m;
    if (output_lists_build(p, &l))
        return -ENOMEM;
    plan_metrics_compute(in, p, &m);
    ob_put(&b, "{", 1);
    b.depth = 1;
    ob_kstr(&b, "algo", p->algo);
    ob_kstr(&b, "interference", plan_interference_name(in->interference));
    ob_open(&b, "summary", '{');
    ob_kint(&b, "gpus", m.gpus);
    ob_kreal(&b, "gpus_in_slices", m.slices);
    ob_kreal(&b, "mean_normalized_throughput", m.mean_norm_thr);
    ob_kint(&b, "placed", m.placed);
    ob_kint(&b, "infeasible", m.infeasible);
    ob_close(&b, '}');
    if (p->exact_status >= 0) {
        ob_open(&b, "exact", '{');
        ob_kstr(&b, "status", plan_exact_status_text(p->exact_status));
        ob_kreal(&b, "lower_bound", p->exact_bound);
        ob_close(&b, '}');
    }
    ob_open(&b, "gpus", '[');
    for (int g = 0; g < p->n_gpus; g++)
        output_json_gpu(&b, in, p, &l, g);
    ob_close(&b, ']');
    ob_open(&b, "infeasible", '[');
    for (int k = 0; k < p->n_infeasible; k++) {
        ob_open(&b, NULL, '{');
        ob_kstr(&b, "name", in->workloads[p->infeasible[k].workload].name);
        ob_kstr(&b, "reason", plan_reason_text(p->infeasible[k].reason));
        ob_close(&b, '}');
    }
    ob_close(&b, ']');
    if (mv)
        output_json_moves(&b, in, p, mv);
    ob_close(&b, '}');
    ob_put(&b, "\n", 1);
    output_lists_free(&l);
    int rc = b.failed ? -ENOMEM : fwrite(b.s, 1, b.len, f) != b.len ? -EIO : 0;
    free(b.s);
    return rc;
}

int plan_write_json_tree(const struct plan_input *in, const struct plan *p,
                         const struct plan_moves *mv, void *stream)
{
    json_t *root = output_tree(in, p, mv);
    if (!root)
        return -ENOMEM;
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    int rc = !text || fputs(text, stream) == EOF || fputc('\n', stream) == EOF;
    free(text);
    json_decref(root);
    return rc ? -EIO : 0;
}

int plan_write(const struct plan_input *in, const struct plan *p, const struct plan_moves *mv,
               enum plan_format fmt, void *stream)
{
    FILE *f = stream;
    if (fmt == PLAN_FMT_TABLE) {
        int rc = output_table(in, p, mv, f);
        return rc ? rc : ferror(f) ? -EIO : 0;
    }
    if (fmt == PLAN_FMT_JSON)
        return output_json(in, p, mv, f);
    json_t *root = output_tree(in, p, mv);
    if (!root)
        return -ENOMEM;
    int rc = output_yaml(root, f);
    json_decref(root);
    return rc ? -EIO : 0;
}

/* ---- reading a JSON plan back ---- */

struct output_name {
    const char *name;
    int index;
};

static int output_name_cmp(const void *a, const void *b)
{
    return strcmp(((const struct output_name *)a)->name, ((const struct output_name *)b)->name);
}

static int output_find_pool(const struct plan_input *in, const char *model)
{
    for (int p = 0; p < in->n_pools; p++)
        if (!strcmp(in->pools[p].model.name, model))
            return p;
    return -1;
}

static int output_read_assign(const struct plan_input *in, struct plan *p, int g, int i, json_t *jw,
                              const struct output_name *idx, char *err, size_t errlen)
{
    struct output_name key = {json_string_value(json_object_get(jw, "name")), -1}, *hit;
    json_t *t = json_object_get(jw, "t"), *mem = json_object_get(jw, "memory_mib");
    hit = key.name ? bsearch(&key, idx, (size_t)in->n_workloads, sizeof(*idx), output_name_cmp) : NULL;
    if (!hit) {
        snprintf(err, errlen, "gpu %d: workload '%s' is not in the cluster file", g,
                 key.name ? key.name : "(no name)");
        return -EINVAL;
    }
    if (!json_is_number(t) || !(json_number_value(t) > 0) || json_number_value(t) > 1) {
        snprintf(err, errlen, "gpu %d: workload '%s' needs a time share 't' in (0, 1]", g, key.name);
        return -EINVAL;
    }
    if (!json_is_integer(mem) || json_integer_value(mem) < 0 || json_integer_value(mem) > (1LL << 40)) {
        snprintf(err, errlen, "gpu %d: workload '%s' needs a 'memory_mib' in 0..2^40", g, key.name);
        return -EINVAL;
    }
    if (plan_add_assign(p, hit->index, i, (int)lround(json_number_value(t) * PLAN_TIME_UNITS),
                        json_integer_value(mem)) < 0)
        return -ENOMEM;
    return 0;
}

static int output_read_instance(const struct plan_input *in, struct plan *p, int g, json_t *ji,
                                const struct output_name *idx, char *err, size_t errlen)
{
    const struct plan_gpu_model *m = &in->pools[p->gpus[g].pool].model;
    const char *prof = json_string_value(json_object_get(ji, "profile"));
    json_t *start = json_object_get(ji, "start"), *wl = json_object_get(ji, "workloads");
    int o = prof ? plan_option_find(m, prof) : -1;
    if (o < 0 || !json_is_integer(start) || !json_is_array(wl)) {
        snprintf(err, errlen, "gpu %d: an instance needs a 'profile' of %s (whole or a MIG "
                 "profile), a 'start' and 'workloads'%s%s", g, m->name, prof ? "; got " : "",
                 prof ? prof : "");
        return -EINVAL;
    }
    if (json_integer_value(start) < 0 || json_integer_value(start) >= PLAN_MEM_SLICES) {
        snprintf(err, errlen, "gpu %d: instance %s starts at memory slice %" JSON_INTEGER_FORMAT
                 ", outside 0..%d", g, prof, json_integer_value(start), PLAN_MEM_SLICES - 1);
        return -EINVAL;
    }
    int i = plan_add_instance(p, g, o, (int)json_integer_value(start));
    if (i < 0)
        return -ENOMEM;
    size_t k;
    json_t *jw;
    json_array_foreach(wl, k, jw) {
        int rc = output_read_assign(in, p, g, i, jw, idx, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

static int output_read_gpus(const struct plan_input *in, struct plan *p, json_t *gpus,
                            const struct output_name *idx, char *err, size_t errlen)
{
    size_t k, q;
    json_t *jg, *ji;
    json_array_foreach(gpus, k, jg) {
        const char *model = json_string_value(json_object_get(jg, "model"));
        json_t *insts = json_object_get(jg, "instances");
        int pool = model ? output_find_pool(in, model) : -1;
        if (pool < 0 || !json_is_array(insts) || !json_is_boolean(json_object_get(jg, "mig"))) {
            snprintf(err, errlen, "gpu %zu: needs a 'model' that is a GPU pool of the cluster file "
                     "(got '%s'), 'mig' (true/false) and 'instances'", k, model ? model : "?");
            return -EINVAL;
        }
        int g = plan_add_gpu(p, pool, json_is_true(json_object_get(jg, "mig")));
        if (g < 0)
            return -ENOMEM;
        json_array_foreach(insts, q, ji) {
            int rc = output_read_instance(in, p, g, ji, idx, err, errlen);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int plan_read_json(const char *path, const struct plan_input *in, struct plan *p, char *err,
                   size_t errlen)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    struct output_name *idx = malloc(((size_t)in->n_workloads + 1) * sizeof(*idx));
    int rc = 0;
    plan_init(p);
    if (!root || !idx) {
        if (!root)
            snprintf(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        rc = root ? -ENOMEM : -EINVAL;
        goto out;
    }
    for (int w = 0; w < in->n_workloads; w++)
        idx[w] = (struct output_name){in->workloads[w].name, w};
    qsort(idx, (size_t)in->n_workloads, sizeof(*idx), output_name_cmp);
    json_t *gpus = json_object_get(root, "gpus");
    const char *algo = json_string_value(json_object_get(root, "algo"));
    snprintf(p->algo, sizeof(p->algo), "%s", algo ? algo : "loaded");
    if (!json_is_array(gpus)) {
        snprintf(err, errlen, "%s: expected a plan written by 'kairos plan --json' (no 'gpus')", path);
        rc = -EINVAL;
        goto out;
    }
    rc = output_read_gpus(in, p, gpus, idx, err, errlen);
    if (rc && !strchr(err, ':')) {
        char tmp[256];
        snprintf(tmp, sizeof(tmp), "%s", err);
        snprintf(err, errlen, "%s: %s", path, tmp);
    }
out:
    json_decref(root);
    free(idx);
    if (rc)
        plan_free(p);
    return rc;
}
