/* cmd_ps.c - `kairos ps`: the node's tenants, their processes, memory held and
 * quota per GPU, refusals so far, and the time shares of tenants with a compute
 * policy (ps_view.c decodes them), as an aligned table or one JSON document.
 *
 *   kairos ps [--json] [--socket PATH]
 */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/ps_view.h"
#include "core/units.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kairos ps [options]\n"
            "\n"
            "Lists kairosd's tenants: their processes, GPU memory held and quota per GPU,\n"
            "how many allocations were refused, and for tenants with a compute policy\n"
            "their time share: policy, target, what they got over the last 100 ms and\n"
            "the last minute, pause window and pauses.\n"
            "\n"
            "options:\n"
            "  -j, --json          one JSON document (errors as {\"error\": ...})\n"
            "  -s, --socket PATH   kairosd's socket (default $KAIROS_SOCKET or "
            KAIROS_DEFAULT_SOCKET ")\n"
            "  -h, --help          show this text\n");
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

/* {"share", "limit", "priority", "target", "window", "minute", "windowed", "pauses"} */
static json_t *compute_json(const struct ps_compute *c)
{
    json_t *windowed = c->period_us ? json_pack("{s:I, s:I}", "duty_us", (json_int_t)c->duty_us,
                                                "period_us", (json_int_t)c->period_us)
                                    : json_null();
    return json_pack("{s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:I}", "share",
                     json_real(c->share), "limit", json_fraction(c->limit, c->limit > 0),
                     "priority", c->priority, "target", json_real(c->target), "window",
                     json_fraction(c->window, c->measured), "minute",
                     json_fraction(c->minute, c->measured), "windowed", windowed, "pauses",
                     (json_int_t)c->pauses);
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
        json_array_append_new(tenants, json_pack("{s:s, s:i, s:o, s:o}", "name", r->tenant,
                                                 "processes", (int)r->n_pids, "pids", pids,
                                                 "gpus", gpus));
    }
    json_object_set_new(root, "gpus", json_integer(s->n_gpus));
    json_object_set_new(root, "tenants", tenants);
    /* shares are whole ppm: 6 significant digits print them exactly (0.3, not 0.299...) */
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    putchar('\n');
    json_decref(root);
}

static void print_pids(const struct kairos_ps_reply *r, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    for (uint32_t k = 0; k < r->n_pids && k < KAIROS_PS_MAX_PIDS && len + 16 < cap; k++) {
        int w = snprintf(out + len, cap - len, "%s%u", k ? "," : "", r->pids[k]);
        len += w > 0 ? (size_t)w : 0;
    }
    if (r->n_pids > KAIROS_PS_MAX_PIDS)
        snprintf(out + len, cap - len, ",... (%u in all)", r->n_pids);
    if (!r->n_pids)
        snprintf(out, cap, "-");
}

/* The compute columns: SHARE LIMIT PRIO TARGET 100MS 1MIN WINDOW PAUSES. */
#define COMPUTE_FMT "%6s  %5s  %-7s  %6s  %6s  %6s  %11s  %7s  "

static void print_compute_cells(const struct kairos_ps_reply *r, unsigned g)
{
    struct ps_compute c;
    if (!r || !ps_compute_get(r, g, &c)) {
        printf(COMPUTE_FMT, "-", "-", "-", "-", "-", "-", "-", "-");
        return;
    }
    char share[16], limit[16], target[16], window[16], minute[16], duty[32], pauses[24];
    snprintf(pauses, sizeof pauses, "%llu", (unsigned long long)c.pauses);
    printf(COMPUTE_FMT, ps_cell_pct(c.share, true, share, sizeof share),
           ps_cell_limit(c.limit, limit, sizeof limit), c.priority,
           ps_cell_pct(c.target, true, target, sizeof target),
           ps_cell_pct(c.window, c.measured, window, sizeof window),
           ps_cell_pct(c.minute, c.measured, minute, sizeof minute),
           ps_cell_window(&c, duty, sizeof duty), pauses);
}

static void print_table(const struct ps_snapshot *s)
{
    if (!s->n) {
        printf("no tenants (kairosd manages %u GPU%s); create one with 'kairos run --mem SIZE' "
               "or in the configuration\n", s->n_gpus, s->n_gpus == 1 ? "" : "s");
        return;
    }
    bool compute = ps_any_compute(s);
    int w = 6;
    for (size_t i = 0; i < s->n; i++)
        if ((int)strlen(s->list[i].tenant) > w)
            w = (int)strlen(s->list[i].tenant);
    printf("%-*s  %3s  %11s  %11s  %7s  ", w, "TENANT", "GPU", "HELD", "QUOTA", "REFUSED");
    if (compute)
        printf(COMPUTE_FMT, "SHARE", "LIMIT", "PRIO", "TARGET", "100MS", "1MIN", "WINDOW",
               "PAUSES");
    printf("PIDS\n");
    for (size_t i = 0; i < s->n; i++) {
        const struct kairos_ps_reply *r = &s->list[i];
        char pids[1024];
        print_pids(r, pids, sizeof pids);
        bool first = true;
        for (unsigned g = 0; g < s->n_gpus; g++) {
            if (!ps_gpu_shown(r, g))
                continue;
            char held[32], quota[32];
            printf("%-*s  %3u  %11s  %11s  %7llu  ", w, first ? r->tenant : "", g,
                   units_format_size(r->held[g], held, sizeof held),
                   units_format_size(r->quota[g], quota, sizeof quota),
                   (unsigned long long)r->refusals[g]);
            if (compute)
                print_compute_cells(r, g);
            printf("%s\n", first ? pids : "");
            first = false;
        }
        if (first) {
            printf("%-*s  %3s  %11s  %11s  %7s  ", w, r->tenant, "-", "-", "no GPU", "-");
            if (compute)
                print_compute_cells(NULL, 0);
            printf("%s\n", pids);
        }
    }
}

int cmd_ps(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"socket", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false;
    const char *socket_path = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "js:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            json = true;
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
    struct ps_snapshot snap;
    char err[512];
    if (ps_fetch(client_socket_path(socket_path), &snap, err, sizeof err))
        return fail(json, err);
    if (json)
        print_json(&snap);
    else
        print_table(&snap);
    ps_snapshot_free(&snap);
    return 0;
}
