/* cmd_plan_bench.c - `kairos plan bench`: the planner's benchmark.
 *
 * For every case file (DIR/<group>/<case>.yaml) it runs every algorithm, verifies each
 * plan with the checker, and prints GPUs used (whole and in slices), Kairos's reduction
 * against each baseline, the gap to the exact optimum where it is proven, and the mean
 * normalized throughput. Nothing is hard-coded: every number is computed here.
 * --scale[=N] times every heuristic end to end (cluster file in, JSON plan out) on 10,000
 * and 100,000 generated workloads (or N) with a pool large enough for all of them.
 * --traces[=DIR] replays the arrival and departure traces of DIR (cmd_plan_trace.c).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmd_plan.h"
#include "kairos/plan.h"

#define BENCH_MAX_CASES 256

static const enum plan_algo bench_algos[] = {
    PLAN_ALGO_TEMPORAL, PLAN_ALGO_BESTFIT, PLAN_ALGO_GPULET, PLAN_ALGO_SEED, PLAN_ALGO_KAIROS,
    PLAN_ALGO_EXACT,
};
#define BENCH_N_ALGOS (sizeof(bench_algos) / sizeof(bench_algos[0]))
#define BENCH_KAIROS 4
#define BENCH_EXACT 5

struct bench_row {
    struct plan_metrics m[BENCH_N_ALGOS];
    int exact_optimal, checked_ok;
};

struct bench_sum {
    double red_whole[3], red_slices[3], gap, total_slices[BENCH_N_ALGOS];
    int total[BENCH_N_ALGOS], n, n_gap;
};

static double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int bench_is_yaml(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 5 && !strcmp(d->d_name + n - 5, ".yaml");
}

static int bench_is_dir(const struct dirent *d)
{
    return d->d_name[0] != '.' && d->d_type == DT_DIR;
}

/* --mig-time-sharing: plan with several workloads per MIG instance (the paper's model). */
static int bench_mig_sharing;

static int bench_run_case(const char *path, double limit, int no_exact, int interference,
                          struct bench_row *r, char *err, size_t errlen)
{
    struct plan_input in;
    int rc = plan_input_load(path, &in, err, errlen);
    if (rc)
        return rc;
    if (interference >= 0)
        in.interference = interference;
    in.mig_sharing = bench_mig_sharing;
    r->checked_ok = 1;
    r->exact_optimal = 0;
    for (size_t a = 0; a < BENCH_N_ALGOS && !rc; a++) {
        struct plan_options o;
        struct plan p;
        plan_options_default(&o);
        o.algo = bench_algos[a];
        o.exact_time_limit_s = limit;
        if (no_exact)
            o.exact_max_workloads = 0;
        if ((rc = plan_solve(&in, &o, &p)))
            break;
        if (plan_check(&in, &p, err, errlen)) {
            r->checked_ok = 0;
            fprintf(stderr, "%s: %s plan FAILED the checker: %s\n", path, plan_algo_name(o.algo), err);
        }
        plan_metrics_compute(&in, &p, &r->m[a]);
        if (a == BENCH_EXACT)
            r->exact_optimal = p.exact_status == 1;
        plan_free(&p);
    }
    plan_input_free(&in);
    return rc;
}

static double bench_red(double ours, double base)
{
    return base > 0 ? 100.0 * (1.0 - ours / base) : 0;
}

static void bench_print_header(void)
{
    printf("%-34s %3s", "case", "n");
    static const char *const names[] = {"Temporal", "BestFit", "GPUlet", "Seed", "Kairos", "Exact"};
    for (size_t a = 0; a < BENCH_N_ALGOS; a++)
        printf(" %11s", names[a]);
    printf(" %6s %6s %6s %5s | %s\n", "vsT%", "vsB%", "vsG%", "gap", "Thr/target T B G S K");
}

static void bench_print_row(const char *name, const struct bench_row *r, struct bench_sum *s)
{
    const struct plan_metrics *k = &r->m[BENCH_KAIROS];
    printf("%-34s %3d", name, k->placed + k->infeasible);
    for (size_t a = 0; a < BENCH_N_ALGOS; a++) {
        char cell[32];
        snprintf(cell, sizeof(cell), "%d(%.2f)%s", r->m[a].gpus, r->m[a].slices,
                 a == BENCH_EXACT && !r->exact_optimal ? "?" : "");
        printf(" %11s", cell);
        s->total[a] += r->m[a].gpus;
        s->total_slices[a] += r->m[a].slices;
    }
    for (int b = 0; b < 3; b++) {
        double red = bench_red(k->gpus, r->m[b].gpus);
        s->red_whole[b] += red;
        s->red_slices[b] += bench_red(k->slices, r->m[b].slices);
        printf(" %6.1f", red);
    }
    if (r->exact_optimal) {
        printf(" %5d", k->gpus - r->m[BENCH_EXACT].gpus);
        s->gap += k->gpus - r->m[BENCH_EXACT].gpus;
        s->n_gap++;
    } else {
        printf(" %5s", "-");
    }
    printf(" | %4.2f %4.2f %4.2f %4.2f %4.2f%s\n", r->m[0].mean_norm_thr, r->m[1].mean_norm_thr,
           r->m[2].mean_norm_thr, r->m[3].mean_norm_thr, k->mean_norm_thr,
           r->checked_ok ? "" : "  CHECK FAILED");
    s->n++;
}

/* The paper reports reductions of the GPUs summed over the cases; the mean of the
 * per-case percentages is printed after it, for comparison. */
static void bench_print_sum(const char *group, const struct bench_sum *s)
{
    if (!s->n)
        return;
    printf("%-34s TOTALS over %d cases: T %d B %d G %d S %d K %d GPUs (in slices T %.2f B %.2f "
           "G %.2f S %.2f K %.2f)\n", group, s->n, s->total[0], s->total[1], s->total[2],
           s->total[3], s->total[4], s->total_slices[0], s->total_slices[1], s->total_slices[2],
           s->total_slices[3], s->total_slices[4]);
    printf("%-34s Kairos's reduction of the totals: vs Temporal %.1f %% (slices %.1f %%), vs "
           "Best-fit-MIG %.1f %% (%.1f %%), vs GPUlet-MIG %.1f %% (%.1f %%)\n", "",
           bench_red(s->total[4], s->total[0]), bench_red(s->total_slices[4], s->total_slices[0]),
           bench_red(s->total[4], s->total[1]), bench_red(s->total_slices[4], s->total_slices[1]),
           bench_red(s->total[4], s->total[2]), bench_red(s->total_slices[4], s->total_slices[2]));
    printf("%-34s (mean of per-case reductions: %.1f / %.1f / %.1f %%); Kairos vs proven optimum: "
           "%+.2f GPUs/case over %d cases\n\n", "", s->red_whole[0] / s->n, s->red_whole[1] / s->n,
           s->red_whole[2] / s->n, s->n_gap ? s->gap / s->n_gap : 0, s->n_gap);
}

static int bench_group(const char *dir, const char *group, double limit, int no_exact,
                       int interference)
{
    char path[4096], name[512], err[512];
    struct dirent **list;
    struct bench_sum sum;
    int n = scandir(dir, &list, bench_is_yaml, alphasort), rc = 0;
    if (n < 0)
        return -errno;
    if (n == 0) { /* not a group of cases (data/planner/profiles holds tables) */
        free(list);
        return 0;
    }
    memset(&sum, 0, sizeof(sum));
    printf("== %s: per-profile throughput model '%s' (data/planner/README.md), interference %s, "
           "%s\n", group, strchr(group, '-') ? strchr(group, '-') + 1 : group,
           interference >= 0 ? plan_interference_name(interference) : "as in each case file",
           bench_mig_sharing ? "MIG time sharing (unenforced)" : "one workload per MIG instance");
    for (int i = 0; i < n; i++) {
        struct bench_row r;
        if (snprintf(path, sizeof(path), "%s/%s", dir, list[i]->d_name) >= (int)sizeof(path))
            rc = -ENAMETOOLONG;
        snprintf(name, sizeof(name), "%s/%.*s", group, (int)strlen(list[i]->d_name) - 5,
                 list[i]->d_name);
        if (!rc && (rc = bench_run_case(path, limit, no_exact, interference, &r, err,
                                              sizeof(err))))
            fprintf(stderr, "kairos plan bench: %s\n", err);
        if (!rc)
            bench_print_row(name, &r, &sum);
        fflush(stdout);
        free(list[i]);
    }
    free(list);
    bench_print_sum(group, &sum);
    return rc;
}

static int bench_cases(const char *root, double limit, int no_exact, int interference)
{
    struct dirent **groups;
    char dir[4096];
    int n = scandir(root, &groups, bench_is_dir, alphasort), rc = 0;
    if (n < 0) {
        fprintf(stderr, "kairos plan bench: %s: %s\n", root, strerror(errno));
        return 1;
    }
    printf("GPUs used per algorithm: whole(in slices); '?' = exact not proven within the limit.\n"
           "Reductions are Kairos's, in whole GPUs per case; gap = Kairos - exact optimum.\n\n");
    bench_print_header();
    if (n == 0) { /* DIR is one group: its case files directly */
        free(groups);
        const char *base = strrchr(root, '/');
        return bench_group(root, base && base[1] ? base + 1 : root, limit, no_exact,
                           interference) ? 1 : 0;
    }
    for (int i = 0; i < n; i++) {
        int len = snprintf(dir, sizeof(dir), "%s/%s", root, groups[i]->d_name);
        if (!rc && len < (int)sizeof(dir) && bench_group(dir, groups[i]->d_name, limit, no_exact,
                                                                interference))
            rc = 1;
        free(groups[i]);
    }
    free(groups);
    return rc;
}

/* One algorithm end to end, as `kairos plan --json FILE > /dev/null` does it: load
 * the cluster file, plan, check, write the JSON plan. */
static int bench_scale_one(enum plan_algo a, const char *path, FILE *sink)
{
    struct plan_options o;
    struct plan_input in;
    struct plan p;
    struct plan_metrics m;
    char err[512];
    plan_options_default(&o);
    o.algo = a;
    double w0 = plan_cli_monotonic(), c0 = bench_now();
    if (plan_input_load(path, &in, err, sizeof(err))) {
        fprintf(stderr, "kairos plan bench: %s\n", err);
        return 1;
    }
    in.mig_sharing = bench_mig_sharing;
    double load = bench_now() - c0, c1 = bench_now();
    if (plan_solve(&in, &o, &p)) {
        plan_input_free(&in);
        return 1;
    }
    double solve = bench_now() - c1;
    int bad = plan_check(&in, &p, err, sizeof(err));
    bad |= plan_write(&in, &p, NULL, PLAN_FMT_JSON, sink) != 0;
    double cpu = bench_now() - c0, wall = plan_cli_monotonic() - w0;
    plan_metrics_compute(&in, &p, &m);
    printf("  %-9s %6.3f s end to end (%6.3f s CPU: load %5.3f, plan %6.3f)  %6d GPUs (%8.1f in "
           "slices)  %6d placed  %s\n", plan_algo_name(a), wall, cpu, load, solve, m.gpus, m.slices,
           m.placed, bad ? (err[0] ? err : "write failed") : "checked");
    fflush(stdout);
    plan_free(&p);
    plan_input_free(&in);
    return bad;
}

/* The scale input of n workloads (seed 1, H200, concave 0.7, n / 2 GPUs). */
static struct plan_gen_params bench_scale_params(int n)
{
    return (struct plan_gen_params){1, n, n / 2 > 1 ? n / 2 : 1, "H200-141GB", 0.7};
}

/* --write-scale FILE: the cluster file the scale run plans, for timing the CLI. */
static int bench_write_scale(int n, const char *out)
{
    struct plan_gen_params g = bench_scale_params(n);
    struct plan_input in;
    FILE *f = fopen(out, "w");
    int rc = !f || plan_gen(&g, &in);
    if (!rc) {
        rc = plan_input_write_yaml(&in, f) != 0;
        plan_input_free(&in);
    }
    if (f && fclose(f))
        rc = 1;
    if (rc)
        fprintf(stderr, "kairos plan bench: cannot write %s\n", out);
    return rc;
}

/* Every algorithm but the exact one on n generated workloads and a pool large enough
 * for all of them (n / 2 GPUs), end to end from a cluster file. */
static int bench_scale(int n)
{
    struct plan_gen_params g = bench_scale_params(n);
    struct plan_input in;
    char path[] = "/tmp/kairos-plan-bench-XXXXXX";
    int rc = 0, fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL, *sink = fopen("/dev/null", "w");
    if (!f || !sink || plan_gen(&g, &in)) {
        fprintf(stderr, "kairos plan bench: cannot prepare the scale input\n");
        rc = 1;
        goto out;
    }
    rc = plan_input_write_yaml(&in, f) != 0;
    plan_input_free(&in);
    if (fclose(f) || rc) {
        f = NULL;
        rc = 1;
        goto out;
    }
    f = NULL;
    printf("scale: %d generated workloads (seed %llu, %s, concave 0.7), a pool of %d GPUs, one "
           "core, from a cluster file:\n", g.n_workloads, (unsigned long long)g.seed, g.model,
           g.n_gpus);
    static const enum plan_algo algos[] = {PLAN_ALGO_KAIROS, PLAN_ALGO_SEED, PLAN_ALGO_TEMPORAL,
                                           PLAN_ALGO_BESTFIT, PLAN_ALGO_GPULET};
    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++)
        rc |= bench_scale_one(algos[i], path, sink);
out:
    if (f)
        fclose(f);
    if (sink)
        fclose(sink);
    if (fd >= 0)
        unlink(path);
    return rc;
}

int plan_bench(int argc, char **argv)
{
    static const struct option longs[] = {
        {"cases", required_argument, NULL, 'c'}, {"exact-limit", required_argument, NULL, 't'},
        {"no-exact", no_argument, NULL, 'n'},    {"scale", optional_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},        {"interference", required_argument, NULL, 'i'},
        {"write-scale", required_argument, NULL, 'w'},
        {"mig-time-sharing", no_argument, NULL, 'M'},
        {"traces", optional_argument, NULL, 'T'}, {NULL, 0, NULL, 0},
    };
    const char *root = "data/planner", *write_scale = NULL, *traces = NULL;
    double limit = 10;
    int no_exact = 0, scale = 0, cases = 0, ch, rc = 0, scale_n = 0, interference = -1;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "nh", longs, NULL)) != -1) {
        switch (ch) {
        case 'c': root = optarg; cases = 1; break;
        case 't':
            if (plan_cli_seconds(optarg, &limit)) {
                fprintf(stderr, "kairos plan bench: --exact-limit takes seconds (> 0), got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'n': no_exact = 1; break;
        case 'w': write_scale = optarg; break;
        case 'M': bench_mig_sharing = 1; break;
        case 'T': traces = optarg ? optarg : "data/planner/traces"; break;
        case 'i':
            if ((interference = plan_interference_from_name(optarg)) < 0) {
                fprintf(stderr, "kairos plan bench: --interference takes " PLAN_INTERF_LIST
                        ", got '%s'\n", optarg);
                return 2;
            }
            break;
        case 's':
            scale = 1;
            if (optarg && plan_cli_count(optarg, 1, 2000000, &scale_n)) {
                fprintf(stderr, "kairos plan bench: --scale takes a number of workloads "
                        "(1..2000000), got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'h':
            printf("usage: kairos plan bench [--cases DIR] [--exact-limit SECONDS] [--no-exact] [--scale[=N]]\n"
                   "                         [--interference MODE] "
                   "[--mig-time-sharing] [--scale=N --write-scale FILE]\n"
                   "       (MODE: " PLAN_INTERF_LIST ")\n"
                   "       kairos plan bench --traces[=DIR]   (default data/planner/traces)\n");
            return 0;
        default:
            fprintf(stderr, "usage: kairos plan bench [--cases DIR] [--exact-limit S] [--no-exact] [--scale[=N]]\n"
                   "                         [--interference MODE] "
                   "[--mig-time-sharing] [--scale=N --write-scale FILE]\n"
                   "       (MODE: " PLAN_INTERF_LIST ")\n");
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "kairos plan bench: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (write_scale)
        return bench_write_scale(scale_n ? scale_n : 100000, write_scale) ? 1 : 0;
    if (traces && !scale && !cases)   /* --traces alone: only the traces */
        return plan_trace_bench(traces) ? 1 : 0;
    if (traces)
        rc = plan_trace_bench(traces);
    if (!scale || cases)
        rc |= bench_cases(root, limit, no_exact, interference);
    if (scale && scale_n)
        rc |= bench_scale(scale_n);
    else if (scale)
        rc |= bench_scale(10000) | bench_scale(100000);
    return rc ? 1 : 0;
}
