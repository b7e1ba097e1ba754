/* gen.c - seeded, deterministic random cluster instances for scale and property tests.
 *
 * Workloads mimic Table 2's spread: whole-GPU throughput log-uniform in [1, 200],
 * memory log-uniform in [50 MiB, 40 % of the GPU], targets drawn from {1/2, 1/3, 1/4, 1/6, 1/8, 1/10, 1/12, 1/16} of solo
 * (R1 u R2 without 2/3, plus 1/16, so that 10,000 workloads fit about 2,000 GPUs), and
 * per-profile throughput from the concave model Thr(s) = Thr(whole) x (SM(s)/SM(whole))^e
 * (e = 1 is the linear model). The generator state lives on the stack (splitmix64).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kairos/plan.h"

struct gen_rng {
    uint64_t s;
};

static uint64_t gen_next(struct gen_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double gen_unit(struct gen_rng *r)
{
    return (double)(gen_next(r) >> 11) / 9007199254740992.0;
}

static double gen_log_uniform(struct gen_rng *r, double lo, double hi)
{
    return exp(log(lo) + gen_unit(r) * (log(hi) - log(lo)));
}

static const double gen_targets[] = {1.0 / 2, 1.0 / 3, 1.0 / 4, 1.0 / 6, 1.0 / 8,
                                     1.0 / 10, 1.0 / 12, 1.0 / 16};

static void gen_workload(struct gen_rng *r, const struct plan_gpu_model *m, double e, int k,
                         struct plan_workload *w)
{
    memset(w, 0, sizeof(*w));
    snprintf(w->name, sizeof(w->name), "w%06d", k);
    double whole = gen_log_uniform(r, 1, 200);
    w->mem_mib = (int64_t)gen_log_uniform(r, 50, 0.4 * (double)m->whole_mem_mib);
    w->target = whole * gen_targets[gen_next(r) % (sizeof(gen_targets) / sizeof(gen_targets[0]))];
    for (int o = 0; o < plan_option_count(m); o++)
        w->thr[0][o] = whole * pow((double)plan_option_sms(m, o) / m->whole_sms, e);
    w->line = 0;
}

int plan_gen(const struct plan_gen_params *g, struct plan_input *in)
{
    struct gen_rng r = {g->seed};
    struct plan_workload w;
    memset(in, 0, sizeof(*in));
    if (g->n_workloads < 0 || g->n_gpus < 1)
        return -EINVAL;
    int rc = plan_model_builtin(g->model, &in->pools[0].model);
    if (rc)
        return rc;
    in->n_pools = 1;
    in->pools[0].count = g->n_gpus;
    for (int k = 0; k < g->n_workloads && !rc; k++) {
        gen_workload(&r, &in->pools[0].model, g->concave_exponent, k, &w);
        rc = plan_input_add_workload(in, &w);
    }
    if (rc)
        plan_input_free(in);
    return rc;
}

/* One option table (throughput or solo p99) of a workload, per model with several pools. */
static void gen_write_table(const struct plan_input *in, const double (*table)[PLAN_MAX_OPTIONS],
                            FILE *f)
{
    for (int p = 0; p < in->n_pools; p++) {
        const struct plan_gpu_model *m = &in->pools[p].model;
        if (in->n_pools > 1)
            fprintf(f, "      %s:\n", m->name);
        for (int o = 0; o < plan_option_count(m); o++)
            if (table[p][o] > 0)
                fprintf(f, "%s      %s: %.17g\n", in->n_pools > 1 ? "  " : "",
                        plan_option_name(m, o), table[p][o]);
    }
}

/* The optional keys, only when set (a file without them is written as before). */
static void gen_write_extras(const struct plan_input *in, const struct plan_workload *wl, FILE *f)
{
    if (wl->drain_s > 0)
        fprintf(f, "    drain_seconds: %.17g\n", wl->drain_s);
    if (wl->p99_ms > 0)
        fprintf(f, "    p99_ms: %.17g\n", wl->p99_ms);
    if (wl->lat) {
        fprintf(f, "    solo_p99_ms:\n");
        gen_write_table(in, wl->lat->solo_p99_ms, f);
    }
}

int plan_input_write_yaml(const struct plan_input *in, void *stream)
{
    FILE *f = stream;
    fprintf(f, "# written by plan_input_write_yaml (kairos plan bench --scale)\ngpus:\n");
    for (int p = 0; p < in->n_pools; p++)
        fprintf(f, "  - model: %s\n    count: %d\n", in->pools[p].model.name, in->pools[p].count);
    fprintf(f, "workloads:\n");
    for (int w = 0; w < in->n_workloads; w++) {
        const struct plan_workload *wl = &in->workloads[w];
        fprintf(f, "  - name: %s\n    memory_mib: %lld\n    target: %.17g\n    throughput:\n",
                wl->name, (long long)wl->mem_mib, wl->target);
        gen_write_table(in, (const double (*)[PLAN_MAX_OPTIONS])wl->thr, f);
        gen_write_extras(in, wl, f);
    }
    return ferror(f) ? -EIO : 0;
}
