/* handovers_state.c - the "handovers" part of the state file, written and read
 * back with its form checked entry by entry (see handovers_state.h). */
#include "daemon/state/handovers_state.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/memory/ledger.h"

static json_t *edge_json(const struct heir_edge *e)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:s}", "from_pid", (json_int_t)e->from_pid,
                     "from_start", (json_int_t)e->from_start, "pid", (json_int_t)e->pid,
                     "start", (json_int_t)e->start, "kind", heir_kind_name(e->kind));
}

static json_t *linger_json(const struct saved_linger *s, unsigned n_gpus)
{
    json_t *held = json_object();
    for (unsigned g = 0; held && g < n_gpus; g++) {
        char key[16];
        snprintf(key, sizeof key, "%u", g);
        if (s->held[g])
            json_object_set_new(held, key, json_integer((json_int_t)s->held[g]));
    }
    return held ? json_pack("{s:s, s:I, s:I, s:o}", "tenant", s->tenant, "pid",
                            (json_int_t)s->pid, "start", (json_int_t)s->start, "held", held)
                : NULL;
}

json_t *handovers_state_json(const struct handovers_saved *s, unsigned n_gpus)
{
    json_t *edges = json_array(), *lingering = json_array();
    bool ok = edges && lingering;
    for (size_t i = 0; ok && i < s->n_edges; i++)
        ok = json_array_append_new(edges, edge_json(&s->edges[i])) == 0;
    for (size_t i = 0; ok && i < s->n_lingering; i++)
        ok = json_array_append_new(lingering, linger_json(&s->lingering[i], n_gpus)) == 0;
    if (!ok) {
        json_decref(edges);
        json_decref(lingering);
        return NULL;
    }
    return json_pack("{s:s, s:o, s:o}", "boot_id", s->boot_id, "edges", edges, "lingering",
                     lingering);
}

/* An integer member of o within [lo, hi] into *out. */
static bool int_field(json_t *o, const char *key, uint64_t lo, uint64_t hi, uint64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    uint64_t n = (uint64_t)json_integer_value(v);
    if (n < lo || n > hi)
        return false;
    *out = n;
    return true;
}

static bool edge_parse(json_t *j, struct heir_edge *e)
{
    uint64_t from, pid;
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (!json_is_object(j) || !int_field(j, "from_pid", 1, HANDOVERS_PID_MAX, &from) ||
        !int_field(j, "pid", 1, HANDOVERS_PID_MAX, &pid) ||
        !int_field(j, "from_start", 0, INT64_MAX, &e->from_start) ||
        !int_field(j, "start", 0, INT64_MAX, &e->start) || from == pid)
        return false;
    e->from_pid = (uint32_t)from;
    e->pid = (uint32_t)pid;
    e->kind = heir_kind_parse(kind);
    return e->kind < HEIR_KINDS;
}

static bool linger_parse(json_t *j, unsigned n_gpus, struct saved_linger *s)
{
    uint64_t pid;
    const char *tenant = json_string_value(json_object_get(j, "tenant"));
    json_t *held = json_object_get(j, "held");
    memset(s, 0, sizeof *s);
    if (!json_is_object(j) || !tenant || !ledger_name_valid(tenant) ||
        !int_field(j, "pid", 1, HANDOVERS_PID_MAX, &pid) ||
        !int_field(j, "start", 0, INT64_MAX, &s->start) || !json_is_object(held))
        return false;
    snprintf(s->tenant, sizeof s->tenant, "%s", tenant);
    s->pid = (uint32_t)pid;
    const char *key;
    json_t *v;
    bool any = false;
    json_object_foreach(held, key, v) {
        char *end;
        unsigned long g = strtoul(key, &end, 10);
        if (!*key || *end || key[0] < '0' || key[0] > '9' || g >= n_gpus ||
            !json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) > KAIROS_BYTES_MAX)
            return false;
        s->held[g] = (uint64_t)json_integer_value(v);
        any |= s->held[g] > 0;
    }
    return any; /* a charge of nothing keeps nothing */
}

static void refuse(void (*warn)(void *, const char *), void *ctx, const char *what, size_t i)
{
    char msg[160];
    snprintf(msg, sizeof msg, "handovers: %s entry %zu is malformed; refused (its hand-over "
             "is forgotten)", what, i);
    if (warn)
        warn(ctx, msg);
}

static bool boot_id_valid(const char *s)
{
    size_t n = strlen(s);
    if (n >= HANDOVERS_BOOT_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || s[i] == '-'))
            return false;
    return true;
}

int handovers_state_parse(json_t *j, unsigned n_gpus, struct handovers_saved *out,
                          void (*warn)(void *ctx, const char *msg), void *warn_ctx)
{
    memset(out, 0, sizeof *out);
    json_t *edges = json_object_get(j, "edges"), *lingering = json_object_get(j, "lingering");
    const char *boot = json_string_value(json_object_get(j, "boot_id"));
    if (!json_is_object(j) || !boot || !boot_id_valid(boot) ||
        (edges && !json_is_array(edges)) || (lingering && !json_is_array(lingering))) {
        if (warn)
            warn(warn_ctx, "handovers: not {\"boot_id\": ID, \"edges\": [...], \"lingering\": "
                           "[...]}; refused whole (the hand-overs are forgotten)");
        return -EINVAL;
    }
    snprintf(out->boot_id, sizeof out->boot_id, "%s", boot);
    size_t ne = json_array_size(edges), nl = json_array_size(lingering);
    if (ne > HEIRS_MAX || nl > HANDOVERS_LINGER_MAX) {
        if (warn)
            warn(warn_ctx, "handovers: more entries than kairosd keeps; refused whole");
        return -EINVAL;
    }
    out->edges = ne ? calloc(ne, sizeof *out->edges) : NULL;
    out->lingering = nl ? calloc(nl, sizeof *out->lingering) : NULL;
    if ((ne && !out->edges) || (nl && !out->lingering)) {
        handovers_saved_free(out);
        return -ENOMEM;
    }
    size_t i;
    json_t *v;
    json_array_foreach(edges, i, v) {
        if (edge_parse(v, &out->edges[out->n_edges]))
            out->n_edges++;
        else
            refuse(warn, warn_ctx, "edge", i);
    }
    json_array_foreach(lingering, i, v) {
        if (linger_parse(v, n_gpus, &out->lingering[out->n_lingering]))
            out->n_lingering++;
        else
            refuse(warn, warn_ctx, "lingering", i);
    }
    return 0;
}

void handovers_saved_free(struct handovers_saved *s)
{
    free(s->edges);
    free(s->lingering);
    memset(s, 0, sizeof *s);
}
