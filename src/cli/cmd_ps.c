/* cmd_ps.c - `kairos ps`: the node's tenants, their processes, memory held and
 * quota per GPU, refusals so far, and the time shares of tenants with a compute
 * policy and what held them back (ps_view.c decodes them), as an aligned table or
 * one JSON document.
 *
 *   kairos ps [--json] [--columns LIST | --wide] [--socket PATH]
 *
 * The table's columns are those of columns.c: a default set that fits 80 columns
 * (its PIDS cut to fit), every column with --wide, or the ones -o names.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/columns.h"
#include "cli/commands.h"
#include "cli/ps_view.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kairos ps [options]\n"
            "\n"
            "Lists kairosd's tenants: their processes, GPU memory held and quota per GPU,\n"
            "how many allocations were refused, and for tenants with a compute policy\n"
            "their time share: policy, target, what they got over the last 100 ms and\n"
            "the last minute, pause window and pauses, and the part of the last minute\n"
            "they were held back and why (--wide, or hold,why in --columns); in space\n"
            "mode each tenant's fault domain, the part of the SMs its MPS clients may\n"
            "run on (sms: in kairosd's configuration) and GPU faults (caused/lost work).\n"
            "\n"
            "options:\n"
            "  -j, --json          one JSON document (errors as {\"error\": ...})\n"
            "  -o, --columns LIST  the columns to show, comma separated (default:\n"
            "                      " COLUMNS_PS_DEFAULT ",\n"
            "                      the compute ones only when a tenant has a compute policy,\n"
            "                      domain,sms,faults when a tenant has a fault domain or a\n"
            "                      fault, PIDS cut to fit 80 columns)\n"
            "  -w, --wide          every column, PIDS uncut\n"
            "  -s, --socket PATH   kairosd's socket (default $KAIROS_SOCKET or "
            KAIROS_DEFAULT_SOCKET ")\n"
            "  -h, --help          show this text\n"
            "\n"
            "columns:\n");
    columns_print_known(out, 2);
}

static int fail(bool json, const char *msg)
{
    if (json) {
        json_t *e = json_pack("{s:s}", "error", msg);
        json_dumpf(e, stdout, JSON_COMPACT);
        putchar('\n');
        json_decref(e);
    } else {
        fprintf(stderr, "kairos ps: %s\n", msg);
    }
    return 1;
}

/* A fraction, or null when it is unknown (valid false) or absent (limit 0). */
static json_t *json_fraction(double f, bool valid)
{
    return valid ? json_real(f) : json_null();
}

/* One reason's figures: part of the last minute's periods it held the tenant back
 * in and of its time it kept it paused (null when unknown), the same since the
 * tenant got its policy (periods, seconds). Paused time is not for "none". */
static json_t *reason_json(const struct ps_hold *h, unsigned k)
{
    json_t *o = json_pack("{s:o, s:I}", "periods", json_fraction(h->periods[k], h->measured),
                          "periods_total", (json_int_t)h->periods_total[k]);
    if (k != KAIROS_HOLD_NONE) {
        json_object_set_new(o, "paused", json_fraction(h->paused[k], h->measured));
        json_object_set_new(o, "paused_seconds_total", json_real(h->paused_seconds[k]));
    }
    return o;
}

/* {"now", "why", "paused", "slices", "reasons": {"none": ..., "share": ...}}, or
 * null from a kairosd of before; the minute's figures null until measured. */
static json_t *hold_json(const struct ps_hold *h)
{
    if (!h->known)
        return json_null();
    json_t *reasons = json_object();
    for (unsigned k = 0; k < KAIROS_HOLD_REASONS; k++)
        json_object_set_new(reasons, ps_hold_name(k), reason_json(h, k));
    json_t *why = h->measured ? json_string(ps_hold_name(ps_hold_why(h))) : json_null();
    json_t *slices = h->measured ? json_boolean(ps_hold_slices(h)) : json_null();
    return json_pack("{s:s, s:o, s:o, s:o, s:o}", "now", ps_hold_name(h->now), "why", why,
                     "paused", json_fraction(ps_hold_paused(h), h->measured), "slices", slices,
                     "reasons", reasons);
}

/* {"share", "limit", "priority", "target", "window", "minute", "windowed", "pauses",
 *  "hold"} */
static json_t *compute_json(const struct ps_compute *c)
{
    json_t *windowed = c->period_us ? json_pack("{s:I, s:I}", "duty_us", (json_int_t)c->duty_us,
                                                "period_us", (json_int_t)c->period_us)
                                    : json_null();
    return json_pack("{s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:I, s:o}", "share",
                     json_real(c->share), "limit", json_fraction(c->limit, c->limit > 0),
                     "priority", c->priority, "target", json_real(c->target), "window",
                     json_fraction(c->window, c->measured), "minute",
                     json_fraction(c->minute, c->measured), "windowed", windowed, "pauses",
                     (json_int_t)c->pauses, "hold", hold_json(&c->hold));
}

static json_t *gpu_json(const struct kairos_ps_reply *r, unsigned g)
{
    json_t *o = json_pack("{s:i, s:I, s:I, s:I}", "index", (int)g, "quota",
                          (json_int_t)r->quota[g], "held", (json_int_t)r->held[g], "refusals",
                          (json_int_t)r->refusals[g]);
    struct ps_compute c;
    if (ps_compute_get(r, g, &c))
        json_object_set_new(o, "compute", compute_json(&c));
    return o;
}

/* The GPU faults kairosd attributed to the tenant, the last one null when none. */
static json_t *faults_json(const struct kairos_ps_reply *r)
{
    json_t *last = json_null();
    if (r->last_fault_xid)
        last = json_pack("{s:I, s:o, s:I, s:b}", "xid", (json_int_t)r->last_fault_xid, "gpu",
                         r->last_fault_gpu == UINT32_MAX ? json_null()
                                                         : json_integer(r->last_fault_gpu),
                         "unix_ms", (json_int_t)r->last_fault_unix_ms, "caused",
                         r->last_fault_caused != 0);
    return json_pack("{s:I, s:I, s:o}", "caused", (json_int_t)r->faults_caused, "lost_work",
                     (json_int_t)r->faults_lost, "last", last);
}

static void print_json(const struct ps_snapshot *s)
{
    json_t *root = json_object(), *tenants = json_array();
    for (size_t i = 0; i < s->n; i++) {
        const struct kairos_ps_reply *r = &s->list[i];
        json_t *pids = json_array(), *gpus = json_array();
        for (uint32_t k = 0; k < r->n_pids && k < KAIROS_PS_MAX_PIDS; k++)
            json_array_append_new(pids, json_integer(r->pids[k]));
        for (unsigned g = 0; g < s->n_gpus; g++)
            json_array_append_new(gpus, gpu_json(r, g));
        json_t *t = json_pack("{s:s, s:b, s:i, s:o, s:o}", "name", r->tenant, "removed",
                              (r->flags & KAIROS_PS_REMOVED) != 0, "processes", (int)r->n_pids,
                              "pids", pids, "gpus", gpus);
        if (s->faults) {
            json_object_set_new(t, "fault_domain",
                                r->fault_domain[0] ? json_string(r->fault_domain) : json_null());
            json_object_set_new(t, "sm_percent",
                                r->sm_percent ? json_integer(r->sm_percent) : json_null());
            json_object_set_new(t, "faults", faults_json(r));
        }
        json_array_append_new(tenants, t);
    }
    json_object_set_new(root, "gpus", json_integer(s->n_gpus));
    json_object_set_new(root, "tenants", tenants);
    /* shares are whole ppm: 6 significant digits print them exactly (0.3, not 0.299...) */
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    putchar('\n');
    json_decref(root);
}

static void print_table(const struct ps_snapshot *s, struct columns *cols, bool chosen)
{
    if (!s->n) {
        printf("no tenants (kairosd manages %u GPU%s); create one with 'kairos run --mem SIZE' "
               "or in the configuration\n", s->n_gpus, s->n_gpus == 1 ? "" : "s");
        return;
    }
    if (!chosen && !ps_any_compute(s))
        columns_drop_compute(cols);
    if (!chosen && ps_any_space(s))
        columns_add_space(cols);
    columns_fit_names(cols, s);
    columns_header(stdout, cols, "");
    for (size_t i = 0; i < s->n; i++) {
        struct columns_row row = {.r = &s->list[i], .first = true};
        for (unsigned g = 0; g < s->n_gpus; g++) {
            if (!ps_gpu_shown(row.r, g))
                continue;
            row.g = g;
            columns_row(stdout, cols, "", &row);
            row.first = false;
        }
        if (row.first) {
            row.no_gpu = true;
            columns_row(stdout, cols, "", &row);
        }
    }
}

int cmd_ps(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"socket", required_argument, NULL, 's'},
        {"columns", required_argument, NULL, 'o'},
        {"wide", no_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, wide = false;
    const char *socket_path = NULL, *chosen = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "js:o:wh", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            json = true;
            break;
        case 'o':
            chosen = optarg;
            break;
        case 'w':
            wide = true;
            break;
        case 's':
            socket_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kairos ps: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    struct columns cols = {.max_width = chosen || wide ? 0 : COLUMNS_WIDTH};
    char err[512];
    if (columns_parse(chosen ? chosen : wide ? COLUMNS_PS_WIDE : COLUMNS_PS_DEFAULT, &cols, err,
                      sizeof err)) {
        fprintf(stderr, "kairos ps: --columns: %s\n", err);
        return 2;
    }
    struct ps_snapshot snap;
    if (ps_fetch(client_socket_path(socket_path), true, &snap, err, sizeof err))
        return fail(json, err);
    if (json)
        print_json(&snap);
    else
        print_table(&snap, &cols, chosen != NULL);
    ps_snapshot_free(&snap);
    return 0;
}
