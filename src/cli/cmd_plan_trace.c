/* cmd_plan_trace.c - `kairos plan trace`: replay arrivals and departures against a cluster.
 *
 * Loads the cluster file and the trace (src/planner/input.c), replays the trace under
 * the three policies of trace.c (online moves only, a plan from scratch at every event,
 * and drain-aware replanning) and prints one policy's events and every policy's totals:
 * GPU-hours, moves, drain seconds, workloads that could not be placed, replans, and
 * how those waited (started later, longest wait, gave up, still waiting). Every
 * plan a replay takes has passed the checker. Exit 0 replayed, 1 runtime error, 2 usage.
 */
#include <errno.h>
#include <dirent.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_plan.h"
#include "kairos/plan.h"

static const char trace_usage_text[] =
    "usage: kairos plan trace [--policy online|replan|drain-aware] [--drain SECONDS]\n"
    "                         [--horizon SECONDS] [--max-moves N] [--interference MODE]\n"
    "                         [--json] CLUSTER.yaml TRACE.yaml\n"
    "\n"
    "Replay TRACE's arrivals and departures against the cluster (whose own workloads are\n"
    "planned at time 0) under three policies: online (moves of kairos plan --add/--remove\n"
    "only), replan (a plan from scratch at every event, drain time ignored) and\n"
    "drain-aware (online, and the plan from scratch where the GPU-seconds it saves until\n"
    "the horizon exceed the drain seconds of the workloads it moves). A workload that\n"
    "finds no room waits, in arrival order, until room is made or its departure comes.\n"
    "Prints the events of one policy and the totals of all three.\n"
    "\n"
    "      --policy P     the policy whose events are printed (default drain-aware)\n"
    "      --drain S      drain seconds of a moved workload without its own\n"
    "                     'drain_seconds' (default: the trace's, else 60)\n"
    "      --horizon S    how long a replan's saving counts (default: until the next event)\n"
    "      --max-moves N  moves a departure may spend to release a GPU (default 2)\n"
    "      --interference M  none, kairos, native, kairos-pairs or native-pairs (default:\n"
    "                     the cluster file's)\n"
    "  -j, --json         print events and totals as JSON (errors as {\"error\": ...})\n"
    "  -h, --help         this text\n"
    "\n"
    "Exit status: 0 replayed (workloads that could not be placed are counted, not an\n"
    "error), 1 runtime error, 2 usage error. See kairos-plan(1).\n";

struct trace_cli {
    const char *cluster, *trace;
    int policy, interference;
    double drain_s;                    /* 0: the trace's */
    enum plan_format fmt;
    struct plan_trace_options opt;
};

static int trace_policy_from_name(const char *name)
{
    for (int p = 0; p < PLAN_TRACE_POLICIES; p++)
        if (!strcmp(name, plan_trace_policy_name(p)))
            return p;
    return -1;
}

static int trace_parse_args(int argc, char **argv, struct trace_cli *c, char *err, size_t errlen)
{
    static const struct option longs[] = {
        {"policy", required_argument, NULL, 'p'}, {"drain", required_argument, NULL, 'd'},
        {"horizon", required_argument, NULL, 'H'}, {"max-moves", required_argument, NULL, 'm'},
        {"interference", required_argument, NULL, 'i'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "jh", longs, NULL)) != -1) {
        switch (ch) {
        case 'p':
            if ((c->policy = trace_policy_from_name(optarg)) < 0)
                return snprintf(err, errlen, "--policy takes online, replan or drain-aware, got "
                                "'%s'", optarg), -1;
            break;
        case 'd':
            if (plan_cli_seconds(optarg, &c->drain_s))
                return snprintf(err, errlen, "--drain takes seconds greater than 0 (at most "
                                "86400), got '%s'", optarg), -1;
            break;
        case 'H':
            if (plan_cli_seconds(optarg, &c->opt.horizon_s))
                return snprintf(err, errlen, "--horizon takes seconds greater than 0 (at most "
                                "86400), got '%s'", optarg), -1;
            break;
        case 'm':
            if (plan_cli_count(optarg, 0, 1000000, &c->opt.max_moves))
                return snprintf(err, errlen, "--max-moves takes a whole number of moves "
                                "(0..1000000), got '%s'", optarg), -1;
            break;
        case 'i':
            if ((c->interference = plan_interference_from_name(optarg)) < 0)
                return snprintf(err, errlen, "--interference takes " PLAN_INTERF_LIST ", got "
                                "'%s'", optarg), -1;
            break;
        case 'j': c->fmt = PLAN_FMT_JSON; break;
        case 'h': return 1;
        default:
            return snprintf(err, errlen, "unknown or incomplete option '%s'", argv[optind - 1]), -1;
        }
    }
    if (optind != argc - 2)
        return snprintf(err, errlen, "expected CLUSTER.yaml and TRACE.yaml"), -1;
    c->cluster = argv[optind];
    c->trace = argv[optind + 1];
    return 0;
}

static void trace_event_name(const struct plan_input *in, const struct plan_trace *t, int e,
                             char *out, size_t len)
{
    if (e < 0)
        snprintf(out, len, "start (%d workloads)", t->n_initial);
    else
        snprintf(out, len, "%c%s", t->events[e].kind == PLAN_TRACE_ARRIVE ? '+' : '-',
                 in->workloads[t->events[e].workload].name);
}

static void trace_print_events(const struct plan_input *in, const struct plan_trace *t,
                               const struct plan_trace_result *r, int policy)
{
    printf("events under %s:\n%10s  %-28s %5s %6s %9s %8s %7s %7s  %s\n",
           plan_trace_policy_name(policy), "time_s", "event", "GPUs", "moves", "drain_s",
           "unplaced", "started", "waiting", "replan (GPUs, drain_s)");
    for (int k = 0; k < r->n_steps; k++) {
        const struct plan_trace_step *s = &r->steps[k];
        char name[PLAN_NAME_MAX + 32], re[64] = "-";
        trace_event_name(in, t, s->event, name, sizeof(name));
        if (s->replan_gpus >= 0)
            snprintf(re, sizeof(re), "%s (%d, %.0f)", s->replanned ? "taken" : "no",
                     s->replan_gpus, s->replan_drain_s);
        printf("%10.0f  %-28s %5d %6d %9.0f %8d %7d %7d  %s\n", s->at, name, s->gpus,
               s->moves, s->drain_s, s->unplaced, s->started, s->waiting,
               s->event < 0 ? "-" : re);
    }
}

static void trace_print_totals(const struct plan_trace_result *r)
{
    printf("\n%-12s %10s %8s %6s %10s %8s %7s %6s %10s %7s %7s\n", "policy", "GPU-hours",
           "max GPUs", "moves", "drain_s", "unplaced", "replans", "waited", "max_wait_s",
           "gave_up", "waiting");
    for (int p = 0; p < PLAN_TRACE_POLICIES; p++)
        printf("%-12s %10.2f %8d %6d %10.0f %8d %7d %6d %10.0f %7d %7d\n",
               plan_trace_policy_name(p), r[p].gpu_hours, r[p].max_gpus, r[p].moves,
               r[p].drain_s, r[p].unplaced, r[p].replans, r[p].waited, r[p].max_wait_s,
               r[p].gave_up, r[p].waiting_at_end);
}

static json_t *trace_json_events(const struct plan_input *in, const struct plan_trace *t,
                                 const struct plan_trace_result *r)
{
    json_t *arr = json_array();
    for (int k = 0; k < r->n_steps; k++) {
        const struct plan_trace_step *s = &r->steps[k];
        const struct plan_trace_event *ev = s->event >= 0 ? &t->events[s->event] : NULL;
        json_t *o = json_pack("{s:f, s:s, s:i, s:i, s:f, s:i, s:i, s:i, s:b}", "at", s->at,
                              "event",
                              !ev ? "start" : ev->kind == PLAN_TRACE_ARRIVE ? "arrive" : "depart",
                              "gpus", s->gpus, "moves", s->moves, "drain_seconds", s->drain_s,
                              "unplaced", s->unplaced, "started", s->started, "waiting",
                              s->waiting, "replanned", s->replanned);
        if (ev)
            json_object_set_new(o, "workload", json_string(in->workloads[ev->workload].name));
        if (s->replan_gpus >= 0)
            json_object_set_new(o, "replan", json_pack("{s:i, s:f}", "gpus", s->replan_gpus,
                                                       "drain_seconds", s->replan_drain_s));
        json_array_append_new(arr, o);
    }
    return arr;
}

static void trace_print_json(const struct plan_input *in, const struct plan_trace *t,
                             const struct plan_trace_result *r, int policy)
{
    json_t *totals = json_object();
    for (int p = 0; p < PLAN_TRACE_POLICIES; p++)
        json_object_set_new(totals, plan_trace_policy_name(p), json_pack(
            "{s:f, s:i, s:i, s:f, s:i, s:i, s:i, s:f, s:f, s:i, s:i}", "gpu_hours",
            r[p].gpu_hours, "max_gpus", r[p].max_gpus, "moves", r[p].moves, "drain_seconds",
            r[p].drain_s, "unplaced", r[p].unplaced, "replans", r[p].replans, "waited",
            r[p].waited, "wait_seconds", r[p].wait_s, "max_wait_seconds", r[p].max_wait_s,
            "gave_up", r[p].gave_up, "waiting_at_end", r[p].waiting_at_end));
    json_t *root = json_pack("{s:s, s:f, s:f, s:o, s:o}", "policy", plan_trace_policy_name(policy),
                             "drain_seconds_default", t->drain_s, "end", t->end_s, "events",
                             trace_json_events(in, t, &r[policy]), "totals", totals);
    json_dumpf(root, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    json_decref(root);
}

static int trace_run(struct trace_cli *c, struct plan_input *in, struct plan_trace *t)
{
    struct plan_trace_result r[PLAN_TRACE_POLICIES];
    char err[600];
    int rc = 0, p;
    memset(r, 0, sizeof(r));
    for (p = 0; p < PLAN_TRACE_POLICIES && !rc; p++) {
        c->opt.policy = p;
        rc = plan_trace_replay(in, t, &c->opt, &r[p], err, sizeof(err));
    }
    if (rc) {
        char msg[700];
        snprintf(msg, sizeof(msg), "replaying under %s: %s", plan_trace_policy_name(p - 1),
                 rc == -EINVAL ? err : "out of memory");
        rc = plan_cli_error(c->fmt, msg, 1);
    } else if (c->fmt == PLAN_FMT_JSON) {
        trace_print_json(in, t, r, c->policy);
    } else {
        trace_print_events(in, t, &r[c->policy], c->policy);
        trace_print_totals(r);
    }
    for (p = 0; p < PLAN_TRACE_POLICIES; p++)
        plan_trace_result_free(&r[p]);
    return rc;
}

int plan_trace_cmd(int argc, char **argv)
{
    struct trace_cli c = {0};
    struct plan_input in;
    struct plan_trace t;
    char err[600];
    c.policy = PLAN_TRACE_DRAIN_AWARE;
    c.interference = -1;
    plan_trace_options_default(&c.opt);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j"))
            c.fmt = PLAN_FMT_JSON;
    int rc = trace_parse_args(argc, argv, &c, err, sizeof(err));
    if (rc == 1) {
        fputs(trace_usage_text, stdout);
        return 0;
    }
    if (rc) {
        if (c.fmt != PLAN_FMT_JSON)
            fputs(trace_usage_text, stderr);
        return plan_cli_error(c.fmt, err, 2);
    }
    if (plan_input_load(c.cluster, &in, err, sizeof(err)))
        return plan_cli_error(c.fmt, err, 1);
    if (c.interference >= 0)
        in.interference = c.interference;
    if (plan_trace_load(c.trace, &in, &t, err, sizeof(err))) {
        plan_input_free(&in);
        return plan_cli_error(c.fmt, err, 1);
    }
    if (c.drain_s > 0)
        t.drain_s = c.drain_s;
    rc = trace_run(&c, &in, &t);
    plan_trace_free(&t);
    plan_input_free(&in);
    return rc;
}

/* `kairos plan bench --traces[=DIR]`: every DIR/<case>/ with cluster.yaml and trace.yaml
 * replayed under the three policies (the trace's own drains, horizon until the next
 * event), one line per policy. */
static int trace_bench_case(const char *dir, const char *name)
{
    char cpath[4096], tpath[4096], err[600];
    struct plan_input in;
    struct plan_trace t;
    struct plan_trace_options o;
    struct plan_trace_result r;
    int rc = 0;
    snprintf(cpath, sizeof(cpath), "%s/%s/cluster.yaml", dir, name);
    snprintf(tpath, sizeof(tpath), "%s/%s/trace.yaml", dir, name);
    if (plan_input_load(cpath, &in, err, sizeof(err)))
        return fprintf(stderr, "kairos plan bench: %s\n", err), 1;
    if (plan_trace_load(tpath, &in, &t, err, sizeof(err))) {
        plan_input_free(&in);
        return fprintf(stderr, "kairos plan bench: %s\n", err), 1;
    }
    plan_trace_options_default(&o);
    for (int p = 0; p < PLAN_TRACE_POLICIES && !rc; p++) {
        o.policy = p;
        if ((rc = plan_trace_replay(&in, &t, &o, &r, err, sizeof(err)))) {
            fprintf(stderr, "kairos plan bench: %s under %s: %s\n", name,
                    plan_trace_policy_name(p), err);
            break;
        }
        printf("%-20s %-12s %6d %10.2f %8d %6d %10.0f %8d %7d\n", name, plan_trace_policy_name(p),
               t.n_events, r.gpu_hours, r.max_gpus, r.moves, r.drain_s, r.unplaced, r.replans);
        plan_trace_result_free(&r);
    }
    plan_trace_free(&t);
    plan_input_free(&in);
    return rc ? 1 : 0;
}

static int trace_is_case(const struct dirent *d)
{
    return d->d_name[0] != '.' && d->d_type == DT_DIR;
}

int plan_trace_bench(const char *dir)
{
    struct dirent **list;
    int n = scandir(dir, &list, trace_is_case, alphasort), rc = 0;
    if (n < 0) {
        fprintf(stderr, "kairos plan bench: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    printf("traces (%s): each case replayed under every policy, its own drains, horizon until "
           "the next event\n%-20s %-12s %6s %10s %8s %6s %10s %8s %7s\n", dir, "case", "policy",
           "events", "GPU-hours", "max GPUs", "moves", "drain_s", "unplaced", "replans");
    for (int i = 0; i < n; i++) {
        rc |= trace_bench_case(dir, list[i]->d_name);
        free(list[i]);
    }
    free(list);
    return rc;
}
