/* cmd_plan.c - `kairos plan`: compute, compare, change and benchmark cluster plans.
 *
 * Thin front end over include/kairos/plan.h: parse options, load the cluster file,
 * run the chosen algorithm(s), verify every plan with the independent checker before
 * printing it, and map outcomes to exit codes (0 ok, 1 runtime error or infeasible
 * workload, 2 usage). Under --json every error is {"error": "..."} on stdout.
 * The benchmark lives in cmd_plan_bench.c, the trace replay in cmd_plan_trace.c.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cmd_plan.h"
#include "cli/commands.h"
#include "kairos/plan.h"

static const char plan_usage_text[] =
    "usage: kairos plan [--algo NAME|all] [--json|--yaml] CLUSTER.yaml\n"
    "       kairos plan --from PLAN.json --add NEW.yaml [--json|--yaml] CLUSTER.yaml\n"
    "       kairos plan --from PLAN.json --remove NAME[,NAME...] [--max-moves N] CLUSTER.yaml\n"
    "       kairos plan bench [--cases DIR] [--exact-limit SECONDS] [--no-exact] [--scale[=N]]\n"
    "                         [--interference MODE]\n"
    "       kairos plan bench [--scale=N] --write-scale FILE\n"
    "       kairos plan trace [--policy P] [--drain S] [--horizon S] [--json] CLUSTER.yaml\n"
    "                         TRACE.yaml   (kairos plan trace --help)\n"
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
    "  -x, --explain       also print the model, a lower bound (LP relaxation), idle\n"
    "                      capacity per GPU and why each workload sits where it sits\n"
    "  -e, --emit DIR      also write what the cluster applies: DIR/mig-parted.yaml,\n"
    "                      DIR/kairosd-node<N>.yaml (tenants) and DIR/gres.conf (Slurm)\n"
    "      --gpus-per-node N  GPUs per node for --emit (default 8)\n"
    "      --slices mig|mps  how --emit cuts a GPU the plan slices: MIG instances\n"
    "                      (default) or, MIG left off, SM shares of kairosd's space mode\n"
    "                      (a fault domain per GPU, each tenant capped with sms:)\n"
    "      --interference M time-sharing loss: none (the paper's model), kairos (kairosd's\n"
    "                      windows) or native (the driver's time-slicing), measured on\n"
    "                      kernel streams; kairos-pairs or native-pairs, measured on a\n"
    "                      pair of real trainings; overrides the cluster file's\n"
    "                      'interference' (default none)\n"
    "      --pools MODE    Kairos with several GPU pools: best (default: joint, also\n"
    "                      started from the best plan pool by pool), joint (from its own\n"
    "                      starts only) or sequential (pool by pool, the planner before)\n"
    "      --mig-time-sharing  let several workloads time-share one MIG instance (the\n"
    "                      paper's model, for studies): kairosd enforces time shares on\n"
    "                      whole GPUs only, so by default a MIG instance holds one\n"
    "                      workload; refused with --emit\n"
    "  -h, --help          this text\n"
    "\n"
    "Exit status: 0 plan found for every workload, 1 runtime error or an infeasible\n"
    "workload (named, with the reason), 2 usage error. See kairos-plan(1).\n";

struct plan_cli {
    const char *file, *from, *add, *remove;
    int interference;                  /* -1: as the cluster file says */
    const char *emit;                  /* --emit DIR */
    int explain;
    int mig_sharing;                   /* --mig-time-sharing */
    struct plan_emit_to to;            /* --gpus-per-node, --slices */
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

int plan_cli_count(const char *s, long lo, long hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = s && *s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || errno || *end || v < lo || v > hi)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

double plan_cli_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int plan_cli_seconds(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : 0;
    if (!s || !*s || errno || *end || !(v > 0) || v > 86400)
        return -EINVAL;
    *out = v;
    return 0;
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
        {"interference", required_argument, NULL, 'i'},
        {"emit", required_argument, NULL, 'e'}, {"explain", no_argument, NULL, 'x'},
        {"gpus-per-node", required_argument, NULL, 'n'},
        {"pools", required_argument, NULL, 'p'},
        {"mig-time-sharing", no_argument, NULL, 'M'},
        {"slices", required_argument, NULL, 'S'},
        {NULL, 0, NULL, 0},
    };
    int ch, a;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "a:jyf:A:e:xh", longs, NULL)) != -1) {
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
        case 'm':
            if (plan_cli_count(optarg, 0, 1000000, &c->max_moves))
                return snprintf(err, errlen, "--max-moves takes a whole number of moves "
                                "(0..1000000), got '%s'", optarg), -EINVAL;
            break;
        case 't':
            if (plan_cli_seconds(optarg, &c->opt.exact_time_limit_s))
                return snprintf(err, errlen, "--exact-limit takes seconds greater than 0 (at "
                                "most 86400), got '%s'", optarg), -EINVAL;
            break;
        case 'i':
            if ((c->interference = plan_interference_from_name(optarg)) < 0)
                return snprintf(err, errlen, "--interference takes " PLAN_INTERF_LIST ", got "
                                "'%s'", optarg), -EINVAL;
            break;
        case 'p':
            if ((c->opt.pools = plan_pools_from_name(optarg)) < 0)
                return snprintf(err, errlen, "--pools takes best, joint or sequential, got "
                                "'%s'", optarg), -EINVAL;
            break;
        case 'e': c->emit = optarg; break;
        case 'x': c->explain = 1; break;
        case 'M': c->mig_sharing = 1; break;
        case 'S':
            if (strcmp(optarg, "mig") && strcmp(optarg, "mps"))
                return snprintf(err, errlen, "--slices takes mig (MIG instances) or mps (SM "
                                "shares of kairosd's space mode), got '%s'", optarg), -EINVAL;
            c->to.slices = strcmp(optarg, "mps") ? PLAN_SLICES_MIG : PLAN_SLICES_MPS;
            break;
        case 'n':
            if (plan_cli_count(optarg, 1, 1024, &c->to.gpus_per_node))
                return snprintf(err, errlen, "--gpus-per-node takes a number of GPUs (1..1024), "
                                "got '%s'", optarg), -EINVAL;
            break;
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
    if (c->emit && c->mig_sharing)
        return snprintf(err, errlen, "--emit writes only plans that kairosd enforces, and kairosd "
                        "cannot enforce time shares inside a MIG instance: drop "
                        "--mig-time-sharing"), -EINVAL;
    if (c->from && c->explain)
        return snprintf(err, errlen, "--explain explains a plan computed from scratch, not an "
                        "online change (run it without --from)"), -EINVAL;
    return 0;
}

typedef int (*plan_emit_fn)(const struct plan_input *in, const struct plan *p,
                            const struct plan_emit_to *to, void *stream);

static int plan_emit_file(const char *dir, const char *name, plan_emit_fn fn, int node,
                          const struct plan_input *in, const struct plan *p,
                          const struct plan_emit_to *to, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    int rc = f ? 0 : -errno;
    if (!rc)
        rc = fn ? fn(in, p, to, f) : plan_emit_kairosd(in, p, to, node, f);
    if (f && fclose(f) && !rc)
        rc = -EIO;
    if (rc == -ENOTSUP)
        snprintf(err, errlen, "not writing %.200s: the plan time-shares a MIG instance, which "
                 "kairosd cannot enforce", path);
    else if (rc)
        snprintf(err, errlen, "cannot write %.200s: %s", path, strerror(-rc));
    return rc;
}

/* --emit DIR: the configuration files a cluster applies (emit.c). */
static int plan_emit_all(const char *dir, const struct plan_input *in, const struct plan *p,
                         const struct plan_emit_to *to, char *err, size_t errlen)
{
    if (mkdir(dir, 0755) && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %.200s: %s", dir, strerror(errno));
        return -errno;
    }
    int rc = plan_emit_file(dir, "mig-parted.yaml", plan_emit_mig_parted, 0, in, p, to, err,
                            errlen);
    rc = rc ? rc : plan_emit_file(dir, "gres.conf", plan_emit_slurm, 0, in, p, to, err, errlen);
    for (int n = 0; !rc && n < plan_emit_nodes(p, to->gpus_per_node); n++) {
        char name[64];
        snprintf(name, sizeof(name), "kairosd-node%d.yaml", n);
        rc = plan_emit_file(dir, name, NULL, n, in, p, to, err, errlen);
    }
    int linear = rc ? 0 : plan_emit_linear_shares(in, p);
    if (linear > 0)
        fprintf(stderr, "kairos plan: %d time share(s) in %.200s come from the linear model "
                "(no time_shares in the workload's profile): kairosd enforces a share as GPU "
                "time, and a workload that leaves the GPU idle part of the time alone needs "
                "less of it than its target's part of its throughput; kairos profile "
                "--time-shares measures the curve (docs/planner.md)\n", linear, dir);
    return rc;
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
                   bad ? err : (p.exact_status >= 0 && p.exact_status != PLAN_EXACT_OPTIMAL
                                 ? " (not proven optimal)" : ""));
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
    int rc = plan_input_load_extra(path, in, &extra, err, errlen);
    if (rc)
        return rc;
    rc = plan_input_merge(in, &extra, path, err, errlen);
    plan_input_free(&extra);
    return rc;
}

/* A plan read with --from must fit the cluster file: the checker's rules, with the
 * workloads it does not place counted as absent. */
static int plan_validate_from(const struct plan_input *in, const struct plan *old, const char *path,
                              char *err, size_t errlen)
{
    struct plan q;
    char why[512];
    char *placed = calloc((size_t)in->n_workloads + 1, 1);
    int rc = placed ? plan_copy(&q, old) : -ENOMEM;
    if (rc) {
        free(placed);
        return snprintf(err, errlen, "out of memory"), rc;
    }
    q.n_infeasible = 0;
    for (int a = 0; a < old->n_assigns; a++)
        placed[old->assigns[a].workload] += placed[old->assigns[a].workload] < 2;
    for (int w = 0; w < in->n_workloads && !rc; w++)
        if (!placed[w] && plan_add_infeasible(&q, w, PLAN_NO_CAPACITY) < 0)
            rc = -ENOMEM;
    /* absent workloads are not a fault of the old plan: let any reason pass for them */
    for (int f = 0; f < q.n_infeasible; f++)
        q.infeasible[f].reason = plan_reason_of(in, q.infeasible[f].workload);
    rc = rc ? rc : plan_check(in, &q, why, sizeof(why));
    if (rc) {
        int n = snprintf(err, errlen, "%s does not fit the cluster file: ", path);
        if (n >= 0 && (size_t)n < errlen)
            snprintf(err + n, errlen - (size_t)n, "%.300s; recompute it with 'kairos plan "
                     "--json' on this cluster file", why);
    }
    plan_free(&q);
    free(placed);
    return rc;
}

static int plan_remove_names(const struct plan_input *in, const struct plan *old, const char *list,
                             int **ws, int *n_ws, char *err, size_t errlen)
{
    char *names = strdup(list), *save = NULL;
    char *placed = calloc((size_t)in->n_workloads + 1, 1);
    int rc = names && placed ? 0 : -ENOMEM;
    *ws = malloc((strlen(list) / 2 + 2) * sizeof(int));
    *n_ws = 0;
    if (!*ws)
        rc = -ENOMEM;
    for (int a = 0; !rc && a < old->n_assigns; a++)
        placed[old->assigns[a].workload] = 1;
    for (char *n = rc ? NULL : strtok_r(names, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
        int w = plan_input_find(in, n);
        if (w < 0 || !placed[w]) {
            snprintf(err, errlen, "workload '%s' is %s", n, w < 0 ? "not in the cluster file"
                     : placed[w] == 2 ? "named twice in --remove" : "not placed in the plan");
            rc = -EINVAL;
            break;
        }
        placed[w] = 2;
        (*ws)[(*n_ws)++] = w;
    }
    if (!rc && !*n_ws) {
        snprintf(err, errlen, "--remove needs at least one workload name");
        rc = -EINVAL;
    }
    free(names);
    free(placed);
    return rc;
}

static int plan_online(struct plan_input *in, const struct plan_cli *c)
{
    char err[600];
    struct plan old, cur;
    struct plan_moves mv = {0};
    int n_old = in->n_workloads, rc, *ws = NULL, n_ws = 0;
    if (c->add && plan_append_workloads(in, c->add, err, sizeof(err)))
        return plan_cli_error(c->fmt, err, 1);
    if (plan_read_json(c->from, in, &old, err, sizeof(err)))
        return plan_cli_error(c->fmt, err, 1);
    if (plan_validate_from(in, &old, c->from, err, sizeof(err))) {
        plan_free(&old);
        return plan_cli_error(c->fmt, err, 1);
    }
    if (c->add) {
        rc = plan_online_add(in, &old, n_old, &cur, &mv);
    } else if (!(rc = plan_remove_names(in, &old, c->remove, &ws, &n_ws, err, sizeof(err)))) {
        rc = plan_online_remove(in, &old, ws, n_ws, c->max_moves, &cur, &mv);
    } else {
        free(ws);
        plan_free(&old);
        return plan_cli_error(c->fmt, err, 1);
    }
    free(ws);
    plan_free(&old);
    if (rc)
        return plan_cli_error(c->fmt, "out of memory while computing the change", 1);
    /* removed workloads are neither placed nor infeasible: drop them from the input view */
    rc = plan_report_online(in, &cur, &mv, c->fmt);
    if (rc != 1 && c->emit && plan_emit_all(c->emit, in, &cur, &c->to, err, sizeof(err)))
        rc = plan_cli_error(c->fmt, err, 1);
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

/* p99 targets rest on kairosd's latency priority, which a shared MIG instance lacks. */
static int plan_refuse_p99_sharing(const struct plan_input *in, const struct plan_cli *c)
{
    char msg[300];
    int w = 0;
    while (!(in->workloads[w].p99_ms > 0))
        w++;
    snprintf(msg, sizeof(msg), "workload '%s' has a p99 target, and --mig-time-sharing would "
             "time-share MIG instances without kairosd's latency priority: drop "
             "--mig-time-sharing (or the p99 targets)", in->workloads[w].name);
    return plan_usage_error(c, msg);
}

int cmd_plan(int argc, char **argv)
{
    struct plan_cli c = {0};
    struct plan_input in;
    struct plan p;
    char err[512];
    c.max_moves = 2;
    c.interference = -1;
    c.to.gpus_per_node = 8;
    plan_options_default(&c.opt);
    if (argc >= 2 && !strcmp(argv[1], "bench"))
        return plan_bench(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "trace"))
        return plan_trace_cmd(argc - 1, argv + 1);
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
    if (c.interference >= 0)
        in.interference = c.interference;
    in.mig_sharing = c.mig_sharing;
    if (c.mig_sharing && plan_input_has_p99(&in))
        rc = plan_refuse_p99_sharing(&in, &c);
    else if (c.from)
        rc = plan_online(&in, &c);
    else if (c.all)
        rc = plan_compare(&in, &c);
    else if (plan_solve(&in, &c.opt, &p))
        rc = plan_cli_error(c.fmt, "out of memory while planning", 1);
    else {
        rc = plan_report(&in, &p, NULL, c.fmt);
        if (rc != 1 && c.explain && plan_write_explain(&in, &p, c.fmt == PLAN_FMT_TABLE ? stdout
                                                                                    : stderr))
            rc = plan_cli_error(c.fmt, "cannot write the explanation", 1);
        if (rc != 1 && c.emit && plan_emit_all(c.emit, &in, &p, &c.to, err, sizeof(err)))
            rc = plan_cli_error(c.fmt, err, 1);
        plan_free(&p);
    }
    plan_input_free(&in);
    return rc;
}
