/* cmd_plan.c - `kairos plan`: compute, compare, change and benchmark cluster plans.
 *
 * Thin front end over include/kairos/plan.h: parse options, load the cluster file,
 * run the chosen algorithm(s), verify every plan with the independent checker before
 * printing it, and map outcomes to exit codes (0 ok, 1 runtime error or infeasible
 * workload, 2 usage). Under --json every error is {"error": "..."} on stdout.
 * The benchmark lives in cmd_plan_bench.c.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_plan.h"
#include "cli/commands.h"
#include "kairos/plan.h"

static const char plan_usage_text[] =
    "usage: kairos plan [--algo NAME|all] [--json|--yaml] CLUSTER.yaml\n"
    "       kairos plan --from PLAN.json --add NEW.yaml [--json|--yaml] CLUSTER.yaml\n"
    "       kairos plan --from PLAN.json --remove NAME[,NAME...] [--max-moves N] CLUSTER.yaml\n"
    "       kairos plan bench [--cases DIR] [--exact-limit SECONDS] [--no-exact] [--scale]\n"
    "\n"
    "Decide the MIG layout of every GPU and the IGPU(s, t, m) of every workload so that\n"
    "each workload meets its target on the fewest GPUs. Every plan is verified by an\n"
    "independent checker before it is printed.\n"
    "\n"
    "  -a, --algo NAME     kairos (default), seed, temporal, bestfit, gpulet, exact, or all\n"
    "                      (all: one summary line per algorithm)\n"
    "  -j, --json          print the plan as JSON (errors as {\"error\": ...})\n"
    "  -y, --yaml          print the plan as YAML\n"
    "  -f, --from PLAN     an existing plan (written with --json) for online changes\n"
    "  -A, --add FILE      place the workloads of FILE (same format, 'workloads' only is\n"
    "                      enough) into PLAN, moving as few placed workloads as possible\n"
    "      --remove NAMES  remove workloads from PLAN, then release a GPU if that moves\n"
    "                      at most --max-moves workloads (default 2)\n"
    "      --exact-limit S time limit of the exact solver in seconds (default 10)\n"
    "  -h, --help          this text\n"
    "\n"
    "Exit status: 0 plan found for every workload, 1 runtime error or an infeasible\n"
    "workload (named, with the reason), 2 usage error. See kairos-plan(1).\n";

struct plan_cli {
    const char *file, *from, *add, *remove;
    int all, max_moves;
    enum plan_format fmt;
    struct plan_options opt;
};

int plan_cli_error(enum plan_format fmt, const char *msg, int code)
{
    if (fmt == PLAN_FMT_JSON) {
        json_t *e = json_pack("{s:s}", "error", msg);
        json_dumpf(e, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(e);
    } else {
        fprintf(stderr, "kairos plan: %s\n", msg);
    }
    return code;
}

static int plan_usage_error(const struct plan_cli *c, const char *msg)
{
    if (c->fmt != PLAN_FMT_JSON)
        fprintf(stderr, "%s", plan_usage_text);
    return plan_cli_error(c->fmt, msg, 2);
}

static int plan_parse_args(int argc, char **argv, struct plan_cli *c, char *err, size_t errlen)
{
    static const struct option longs[] = {
        {"algo", required_argument, NULL, 'a'}, {"json", no_argument, NULL, 'j'},
        {"yaml", no_argument, NULL, 'y'},       {"from", required_argument, NULL, 'f'},
        {"add", required_argument, NULL, 'A'},  {"remove", required_argument, NULL, 'r'},
        {"max-moves", required_argument, NULL, 'm'},
        {"exact-limit", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch, a;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "a:jyf:A:h", longs, NULL)) != -1) {
        switch (ch) {
        case 'a':
            if (!strcmp(optarg, "all"))
                c->all = 1;
            else if ((a = plan_algo_from_name(optarg)) >= 0)
                c->opt.algo = a;
            else
                return snprintf(err, errlen, "unknown algorithm '%s'", optarg), -EINVAL;
            break;
        case 'j': c->fmt = PLAN_FMT_JSON; break;
        case 'y': c->fmt = PLAN_FMT_YAML; break;
        case 'f': c->from = optarg; break;
        case 'A': c->add = optarg; break;
        case 'r': c->remove = optarg; break;
        case 'm': c->max_moves = atoi(optarg); break;
        case 't': c->opt.exact_time_limit_s = atof(optarg); break;
        case 'h': return 1;
        default:
            return snprintf(err, errlen, "unknown or incomplete option '%s'", argv[optind - 1]), -EINVAL;
        }
    }
    if (optind != argc - 1)
        return snprintf(err, errlen, "expected exactly one CLUSTER.yaml"), -EINVAL;
    c->file = argv[optind];
    if (!!c->from != (c->add || c->remove) || (c->add && c->remove))
        return snprintf(err, errlen, "--from needs exactly one of --add or --remove"), -EINVAL;
    return 0;
}

static int plan_report(const struct plan_input *in, const struct plan *p,
                       const struct plan_moves *mv, enum plan_format fmt)
{
    char err[512];
    if (plan_check(in, p, err, sizeof(err))) {
        char msg[600];
        snprintf(msg, sizeof(msg), "internal error: the plan failed the checker: %s", err);
        return plan_cli_error(fmt, msg, 1);
    }
    if (plan_write(in, p, mv, fmt, stdout))
        return plan_cli_error(fmt, "cannot write the plan", 1);
    if (p->n_infeasible && fmt == PLAN_FMT_TABLE)
        fprintf(stderr, "kairos plan: %d workload(s) cannot be placed (see 'infeasible')\n",
                p->n_infeasible);
    return p->n_infeasible ? 1 : 0;
}

static int plan_compare(const struct plan_input *in, const struct plan_cli *c)
{
    json_t *arr = json_array();
    if (c->fmt == PLAN_FMT_TABLE)
        printf("%-9s %5s %8s %10s %6s  %s\n", "algo", "GPUs", "slices", "Thr/tgt", "placed", "check");
    for (int a = 0; a < PLAN_ALGO_COUNT; a++) {
        struct plan_options o = c->opt;
        struct plan p;
        struct plan_metrics m;
        char err[512];
        o.algo = a;
        if (plan_solve(in, &o, &p))
            return plan_cli_error(c->fmt, "out of memory", 1);
        int bad = plan_check(in, &p, err, sizeof(err));
        plan_metrics_compute(in, &p, &m);
        if (c->fmt == PLAN_FMT_TABLE)
            printf("%-9s %5d %8.2f %10.3f %6d  %s%s\n", plan_algo_name(a), m.gpus, m.slices,
                   m.mean_norm_thr, m.placed, bad ? "FAILED: " : "ok",
                   bad ? err : (p.exact_status == 0 ? " (not proven optimal)" : ""));
        else
            json_array_append_new(arr, json_pack("{s:s, s:i, s:f, s:f, s:i, s:b}", "algo",
                                                 plan_algo_name(a), "gpus", m.gpus, "gpus_in_slices",
                                                 m.slices, "mean_normalized_throughput",
                                                 m.mean_norm_thr, "placed", m.placed, "checked", !bad));
        plan_free(&p);
    }
    if (c->fmt != PLAN_FMT_TABLE) {
        json_dumpf(arr, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    }
    json_decref(arr);
    return 0;
}

static int plan_append_workloads(struct plan_input *in, const char *path, char *err, size_t errlen)
{
    struct plan_input extra;
    int rc = plan_input_load(path, &extra, err, errlen);
    for (int w = 0; !rc && w < extra.n_workloads; w++) {
        struct plan_workload wl;
        memset(&wl, 0, sizeof(wl));
        memcpy(wl.name, extra.workloads[w].name, sizeof(wl.name));
        wl.mem_mib = extra.workloads[w].mem_mib;
        wl.target = extra.workloads[w].target;
        wl.line = extra.workloads[w].line;
        /* map the extra file's pools onto ours by model name */
        for (int p = 0; p < extra.n_pools; p++)
            for (int q = 0; q < in->n_pools; q++)
                if (!strcmp(extra.pools[p].model.name, in->pools[q].model.name))
                    memcpy(wl.thr[q], extra.workloads[w].thr[p], sizeof(wl.thr[q]));
        for (int k = 0; k < in->n_workloads; k++)
            if (!strcmp(in->workloads[k].name, wl.name)) {
                snprintf(err, errlen, "%s:%d: workload '%s' is already in the cluster", path,
                         wl.line, wl.name);
                rc = -EINVAL;
            }
        rc = rc ? rc : plan_input_add_workload(in, &wl);
    }
    plan_input_free(&extra);
    return rc;
}

static int plan_find_workload(const struct plan_input *in, const char *name)
{
    for (int w = 0; w < in->n_workloads; w++)
        if (!strcmp(in->workloads[w].name, name))
            return w;
    return -1;
}

static int plan_online(struct plan_input *in, const struct plan_cli *c)
{
    char err[512];
    struct plan old, cur, next;
    struct plan_moves mv = {0}, step;
    int n_old = in->n_workloads, rc;
    if (c->add && plan_append_workloads(in, c->add, err, sizeof(err)))
        return plan_cli_error(c->fmt, err, 1);
    if (plan_read_json(c->from, in, &old, err, sizeof(err)))
        return plan_cli_error(c->fmt, err, 1);
    if (c->add) {
        rc = plan_online_add(in, &old, n_old, &cur, &mv);
        plan_free(&old);
        if (rc)
            return plan_cli_error(c->fmt, "cannot compute the change", 1);
    } else {
        char *names = strdup(c->remove), *save = NULL;
        cur = old;
        for (char *n = strtok_r(names, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
            int w = plan_find_workload(in, n);
            if (w < 0 || plan_online_remove(in, &cur, w, c->max_moves, &next, &step)) {
                snprintf(err, sizeof(err), "workload '%s' is not in the plan", n);
                free(names);
                plan_free(&cur);
                plan_moves_free(&mv);
                return plan_cli_error(c->fmt, err, 1);
            }
            plan_free(&cur);
            cur = next;
            for (int k = 0; k < step.n; k++) {
                struct plan_move *nm = realloc(mv.moves, (size_t)(mv.n + 1) * sizeof(*nm));
                if (nm) {
                    mv.moves = nm;
                    mv.moves[mv.n++] = step.moves[k];
                }
            }
            plan_moves_free(&step);
        }
        free(names);
    }
    /* removed workloads are neither placed nor infeasible: drop them from the input view */
    rc = plan_report_online(in, &cur, &mv, c->fmt);
    plan_free(&cur);
    plan_moves_free(&mv);
    return rc;
}

int plan_report_online(const struct plan_input *in, const struct plan *p,
                       const struct plan_moves *mv, enum plan_format fmt)
{
    struct plan_input view = *in;
    struct plan q;
    char *placed = calloc((size_t)in->n_workloads + 1, 1);
    int rc;
    if (!placed || plan_copy(&q, p)) {
        free(placed);
        return plan_cli_error(fmt, "out of memory", 1);
    }
    for (int a = 0; a < p->n_assigns; a++)
        placed[p->assigns[a].workload] = 1;
    for (int f = 0; f < p->n_infeasible; f++)
        placed[p->infeasible[f].workload] = 1;
    /* a removed workload is reported under moves; let the checker treat it as gone */
    for (int w = 0; w < in->n_workloads; w++)
        if (!placed[w])
            plan_add_infeasible(&q, w, PLAN_NO_CAPACITY);
    int removed_start = p->n_infeasible;
    char err[512];
    rc = plan_check(&view, &q, err, sizeof(err));
    q.n_infeasible = removed_start;
    if (rc) {
        char msg[600];
        snprintf(msg, sizeof(msg), "internal error: the changed plan failed the checker: %s", err);
        rc = plan_cli_error(fmt, msg, 1);
    } else {
        rc = plan_write(in, &q, mv, fmt, stdout) ? plan_cli_error(fmt, "cannot write", 1)
                                                 : (q.n_infeasible ? 1 : 0);
    }
    plan_free(&q);
    free(placed);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    struct plan_cli c = {0};
    struct plan_input in;
    struct plan p;
    char err[512];
    c.max_moves = 2;
    plan_options_default(&c.opt);
    if (argc >= 2 && !strcmp(argv[1], "bench"))
        return plan_bench(argc - 1, argv + 1);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j"))
            c.fmt = PLAN_FMT_JSON;
    int rc = plan_parse_args(argc, argv, &c, err, sizeof(err));
    if (rc == 1) {
        fputs(plan_usage_text, stdout);
        return 0;
    }
    if (rc)
        return plan_usage_error(&c, err);
    if (plan_input_load(c.file, &in, err, sizeof(err)))
        return plan_cli_error(c.fmt, err, 1);
    if (c.from)
        rc = plan_online(&in, &c);
    else if (c.all)
        rc = plan_compare(&in, &c);
    else if (plan_solve(&in, &c.opt, &p))
        rc = plan_cli_error(c.fmt, "out of memory while planning", 1);
    else {
        rc = plan_report(&in, &p, NULL, c.fmt);
        plan_free(&p);
    }
    plan_input_free(&in);
    return rc;
}
