/* cmd_ps.c - `kairos ps`: the node's tenants, their processes, memory held and
 * quota per GPU, and refusals so far, as an aligned table or one JSON document.
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
#include "core/units.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kairos ps [options]\n"
            "\n"
            "Lists kairosd's tenants: their processes, GPU memory held and quota per GPU,\n"
            "and how many allocations were refused.\n"
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

static bool gpu_used(const struct kairos_ps_reply *r, unsigned g)
{
    return r->quota[g] || r->held[g] || r->refusals[g];
}

static void print_json(const struct kairos_ps_reply *list, size_t n, unsigned n_gpus)
{
    json_t *root = json_object(), *tenants = json_array();
    for (size_t i = 0; i < n; i++) {
        const struct kairos_ps_reply *r = &list[i];
        json_t *pids = json_array(), *gpus = json_array();
        for (uint32_t k = 0; k < r->n_pids && k < KAIROS_PS_MAX_PIDS; k++)
            json_array_append_new(pids, json_integer(r->pids[k]));
        for (unsigned g = 0; g < n_gpus; g++)
            json_array_append_new(gpus, json_pack("{s:i, s:I, s:I, s:I}", "index", (int)g,
                                                  "quota", (json_int_t)r->quota[g], "held",
                                                  (json_int_t)r->held[g], "refusals",
                                                  (json_int_t)r->refusals[g]));
        json_array_append_new(tenants, json_pack("{s:s, s:i, s:o, s:o}", "name", r->tenant,
                                                 "processes", (int)r->n_pids, "pids", pids,
                                                 "gpus", gpus));
    }
    json_object_set_new(root, "gpus", json_integer(n_gpus));
    json_object_set_new(root, "tenants", tenants);
    json_dumpf(root, stdout, JSON_INDENT(2));
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

static void print_table(const struct kairos_ps_reply *list, size_t n, unsigned n_gpus)
{
    if (!n) {
        printf("no tenants (kairosd manages %u GPU%s); create one with 'kairos run --mem SIZE' "
               "or in the configuration\n", n_gpus, n_gpus == 1 ? "" : "s");
        return;
    }
    int w = 6;
    for (size_t i = 0; i < n; i++)
        if ((int)strlen(list[i].tenant) > w)
            w = (int)strlen(list[i].tenant);
    printf("%-*s  %3s  %11s  %11s  %7s  %s\n", w, "TENANT", "GPU", "HELD", "QUOTA", "REFUSED",
           "PIDS");
    for (size_t i = 0; i < n; i++) {
        const struct kairos_ps_reply *r = &list[i];
        char pids[1024];
        print_pids(r, pids, sizeof pids);
        bool first = true;
        for (unsigned g = 0; g < n_gpus; g++) {
            if (!gpu_used(r, g))
                continue;
            char held[32], quota[32];
            printf("%-*s  %3u  %11s  %11s  %7llu  %s\n", w, first ? r->tenant : "", g,
                   units_format_size(r->held[g], held, sizeof held),
                   units_format_size(r->quota[g], quota, sizeof quota),
                   (unsigned long long)r->refusals[g], first ? pids : "");
            first = false;
        }
        if (first)
            printf("%-*s  %3s  %11s  %11s  %7s  %s\n", w, r->tenant, "-", "-", "no GPU", "-", pids);
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
    struct client cl;
    char err[512];
    if (client_connect(&cl, client_socket_path(socket_path), err, sizeof err))
        return fail(json, err);
    struct kairos_ps_reply *list;
    size_t n;
    unsigned n_gpus;
    int rc = client_ps(&cl, &list, &n, &n_gpus, err, sizeof err);
    client_close(&cl);
    if (rc)
        return fail(json, err);
    if (json)
        print_json(list, n, n_gpus);
    else
        print_table(list, n, n_gpus);
    free(list);
    return 0;
}
