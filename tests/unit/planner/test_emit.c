/* test_emit.c - what `kairos plan --emit` writes is what the cluster's tools accept:
 * kairosd's own configuration parser takes every node's tenants (and their shares of a
 * GPU add up to at most 100 %), every time share of the plan is a compute policy kairosd
 * parsed (none left as a comment: a MIG instance holds one tenant), a plan that
 * time-shares a MIG instance is refused, mig-parted's file has one config per node
 * whose mig-devices count the plan's instances, and the Slurm lines count every
 * instance; a p99 workload sharing a GPU is its tenant at priority latency; with MPS
 * slices, each sliced GPU is a fault domain whose tenants kairosd caps at their SMs. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <yaml.h>

#include "daemon/config/config.h"
#include "core/policy.h"
#include "kairos/plan.h"

static const struct plan_emit_to MIG4 = {4, PLAN_SLICES_MIG}, MIG8 = {8, PLAN_SLICES_MIG},
                                 MPS4 = {4, PLAN_SLICES_MPS}, MPS8 = {8, PLAN_SLICES_MPS};

static char *emit_text(int (*fn)(const struct plan_input *, const struct plan *,
                                 const struct plan_emit_to *, void *),
                       const struct plan_input *in, const struct plan *p,
                       const struct plan_emit_to *to, int node)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(fn ? fn(in, p, to, f) : plan_emit_kairosd(in, p, to, node, f), 0);
    fclose(f);
    return buf;
}

static void plan_for(struct plan_input *in, struct plan *p, uint64_t seed, enum plan_algo a)
{
    struct plan_gen_params g = {seed, 60, 64, seed % 2 ? "H200-141GB" : "A100-40GB", 0.7};
    struct plan_options o;
    assert_int_equal(plan_gen(&g, in), 0);
    snprintf(in->workloads[0].name, PLAN_NAME_MAX, "bad#name/0");   /* needs sanitising */
    plan_options_default(&o);
    o.algo = a;
    assert_int_equal(plan_solve(in, &o, p), 0);
}

static void test_kairosd_accepts_tenants(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        struct plan_input in;
        struct plan p;
        plan_for(&in, &p, seed, seed % 3 ? PLAN_ALGO_KAIROS : PLAN_ALGO_TEMPORAL);
        int tenants = 0;
        for (int n = 0; n < plan_emit_nodes(&p, 4); n++) {
            struct config c;
            struct policy_shares sh = {0};
            char err[512], why[512];
            char *text = emit_text(NULL, &in, &p, &MIG4, n);
            if (config_parse("kairosd.yaml", text, strlen(text), &c, err, sizeof(err)))
                fail_msg("kairosd refuses node %d: %s\n%s", n, err, text);
            assert_int_equal(config_shares(&c, &sh), 0);
            if (policy_shares_check(&sh, why, sizeof(why)))
                fail_msg("node %d: %s", n, why);
            tenants += (int)c.n_tenants;
            policy_shares_free(&sh);
            config_free(&c);
            free(text);
        }
        assert_int_equal(tenants, p.n_assigns);
        plan_free(&p);
        plan_input_free(&in);
    }
}

/* The policy kairosd parsed for the tenant of assignment as (tenant t of node file c):
 * its memory quota on the plan's device; if it shares its instance, that instance is a
 * MIG-off GPU and the tenant has share = its time share there; alone, no policy. */
static void check_tenant(const struct plan *p, const int *tenants, const struct plan_assign *as,
                         const struct config_tenant *t, int per_node, int *shared, int *mig)
{
    const struct plan_instance *pi = &p->instances[as->instance];
    unsigned d = (unsigned)(pi->gpu % per_node);
    assert_int_equal(t->n_quotas, 1);
    assert_int_equal(t->quotas[0].index, (int)d);
    if (tenants[as->instance] == 1) {
        assert_int_equal(t->n_compute, 0);
        *mig += pi->option != PLAN_OPTION_WHOLE;
        return;
    }
    if (pi->option != PLAN_OPTION_WHOLE || p->gpus[pi->gpu].mig)
        fail_msg("%s: %d tenants time-share a MIG instance", t->name, tenants[as->instance]);
    assert_int_equal(t->n_compute, 1);
    assert_int_equal(t->compute[0].gpu, d);
    double want = as->time / (double)PLAN_TIME_UNITS, got = t->compute[0].pol.share;
    if (got > 1.0 + 1e-9)
        got /= 100;   /* whichever unit policy.h keeps, the share is the plan's */
    if (fabs(got - want) > 0.0005 + 1e-9)
        fail_msg("%s: kairosd share %.4f, plan %.4f", t->name, got, want);
    (*shared)++;
}

/* Every tenant's policy, applied through kairosd's parser, is what the plan says, for
 * plans of every algorithm that time-shares (default: one workload per MIG instance). */
static void test_kairosd_enforces_every_share(void **state)
{
    static const enum plan_algo algos[] = {PLAN_ALGO_KAIROS, PLAN_ALGO_SEED, PLAN_ALGO_GPULET,
                                           PLAN_ALGO_TEMPORAL};
    int shared = 0, mig = 0;
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
            struct plan_input in;
            struct plan p;
            plan_for(&in, &p, seed, algos[a]);
            int *tenants = plan_tenants(&p);
            assert_non_null(tenants);
            for (int n = 0; n < plan_emit_nodes(&p, 4); n++) {
                struct config c;
                char err[512];
                char *text = emit_text(NULL, &in, &p, &MIG4, n);
                if (config_parse("kairosd.yaml", text, strlen(text), &c, err, sizeof(err)))
                    fail_msg("kairosd refuses node %d: %s\n%s", n, err, text);
                assert_null(strstr(text, "time share"));   /* no share left unenforced */
                size_t k = 0;
                for (int i = 0; i < p.n_assigns; i++)
                    if (p.instances[p.assigns[i].instance].gpu / 4 == n) {
                        assert_true(k < c.n_tenants);
                        check_tenant(&p, tenants, &p.assigns[i], &c.tenants[k++], 4, &shared,
                                     &mig);
                    }
                assert_int_equal(k, c.n_tenants);
                config_free(&c);
                free(text);
            }
            free(tenants);
            plan_free(&p);
            plan_input_free(&in);
        }
    }
    assert_true(shared > 0 && mig > 0);   /* both kinds of tenant were checked */
}

/* A time share the linear model gave (no time_shares curve in the workload's profile)
 * says so on its line, and plan_emit_linear_shares counts exactly those lines; a
 * workload with a curve for its pool gets none. */
static void test_linear_shares_are_marked(void **state)
{
    (void)state;
    struct plan_input in;
    struct plan p;
    plan_for(&in, &p, 2, PLAN_ALGO_TEMPORAL);
    int lines = 0, marked = 0;
    for (int n = 0; n < plan_emit_nodes(&p, 4); n++) {
        char *text = emit_text(NULL, &in, &p, &MIG4, n);
        for (char *l = strstr(text, "compute:"); l; l = strstr(l + 1, "compute:")) {
            lines++;
            char *end = strchr(l, '\n'), *mark = strstr(l, "# linear model");
            marked += end && mark && mark < end;
        }
        free(text);
    }
    assert_true(lines > 0);
    assert_int_equal(marked, lines);
    assert_int_equal(plan_emit_linear_shares(&in, &p), lines);
    static struct plan_time_curve measured = {.n = {1}, .t = {{0.5}}, .thr = {{1.0}}};
    for (int w = 0; w < in.n_workloads; w++)
        in.workloads[w].curve = &measured;
    assert_int_equal(plan_emit_linear_shares(&in, &p), 0);
    for (int n = 0; n < plan_emit_nodes(&p, 4); n++) {
        char *text = emit_text(NULL, &in, &p, &MIG4, n);
        assert_null(strstr(text, "linear model"));
        free(text);
    }
    for (int w = 0; w < in.n_workloads; w++)
        in.workloads[w].curve = NULL; /* not the input's to free */
    plan_free(&p);
    plan_input_free(&in);
}

/* A plan made with MIG time sharing (--mig-time-sharing) that time-shares a MIG
 * instance: kairosd could not enforce it, so no kairosd.yaml is written for it. */
static void test_refuses_shared_mig(void **state)
{
    int refused = 0;
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        struct plan_gen_params g = {seed, 60, 64, seed % 2 ? "H200-141GB" : "A100-40GB", 0.7};
        struct plan_input in;
        struct plan_options o;
        struct plan p;
        char *buf = NULL;
        size_t len = 0;
        assert_int_equal(plan_gen(&g, &in), 0);
        in.mig_sharing = 1;
        plan_options_default(&o);
        o.algo = PLAN_ALGO_SEED;
        assert_int_equal(plan_solve(&in, &o, &p), 0);
        int *tenants = plan_tenants(&p), shared = 0;
        assert_non_null(tenants);
        for (int i = 0; i < p.n_instances; i++)
            shared |= p.instances[i].option != PLAN_OPTION_WHOLE && tenants[i] > 1;
        FILE *f = open_memstream(&buf, &len);
        assert_non_null(f);
        int rc = plan_emit_kairosd(&in, &p, &MIG8, 0, f);
        fclose(f);
        assert_int_equal(rc, shared ? -ENOTSUP : 0);
        refused += shared;
        free(buf);
        free(tenants);
        plan_free(&p);
        plan_input_free(&in);
    }
    assert_true(refused > 0);
}

/* Sum of the mig-devices counts in mig-parted's file (and the config count). */
static int mig_parted_count(const char *text, int *configs)
{
    yaml_parser_t ps;
    yaml_document_t doc;
    int total = 0;
    assert_true(yaml_parser_initialize(&ps));
    yaml_parser_set_input_string(&ps, (const unsigned char *)text, strlen(text));
    assert_true(yaml_parser_load(&ps, &doc));
    yaml_node_t *root = yaml_document_get_root_node(&doc), *cfgs = NULL;
    for (yaml_node_pair_t *k = root->data.mapping.pairs.start; k < root->data.mapping.pairs.top; k++) {
        const char *key = (const char *)yaml_document_get_node(&doc, k->key)->data.scalar.value;
        yaml_node_t *v = yaml_document_get_node(&doc, k->value);
        if (!strcmp(key, "version"))
            assert_string_equal((const char *)v->data.scalar.value, "v1");
        if (!strcmp(key, "mig-configs"))
            cfgs = v;
    }
    assert_non_null(cfgs);
    *configs = (int)(cfgs->data.mapping.pairs.top - cfgs->data.mapping.pairs.start);
    for (yaml_node_pair_t *c = cfgs->data.mapping.pairs.start; c < cfgs->data.mapping.pairs.top; c++) {
        yaml_node_t *list = yaml_document_get_node(&doc, c->value);
        for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
            yaml_node_t *dev = yaml_document_get_node(&doc, *it);
            for (yaml_node_pair_t *k = dev->data.mapping.pairs.start; k < dev->data.mapping.pairs.top; k++) {
                const char *key = (const char *)yaml_document_get_node(&doc, k->key)->data.scalar.value;
                yaml_node_t *v = yaml_document_get_node(&doc, k->value);
                if (!strcmp(key, "mig-devices"))
                    for (yaml_node_pair_t *m = v->data.mapping.pairs.start; m < v->data.mapping.pairs.top; m++)
                        total += atoi((const char *)yaml_document_get_node(&doc, m->value)->data.scalar.value);
                else if (!strcmp(key, "mig-enabled") && !strcmp((const char *)v->data.scalar.value, "false"))
                    total++;   /* a MIG-off GPU is one instance of the plan */
            }
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&ps);
    return total;
}

static void test_mig_parted(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        struct plan_input in;
        struct plan p;
        int configs = 0;
        plan_for(&in, &p, seed, PLAN_ALGO_KAIROS);
        char *mp = emit_text(plan_emit_mig_parted, &in, &p, &MIG8, 0);
        assert_int_equal(mig_parted_count(mp, &configs), p.n_instances);
        assert_int_equal(configs, plan_emit_nodes(&p, 8));
        free(mp);
        plan_free(&p);
        plan_input_free(&in);
    }
}

/* One gres.conf line: only keys Slurm's gres.conf knows, node first; per node either
 * AutoDetect=off and a File=/dev/nvidia<d> per GPU of the plan on it (each once), or
 * AutoDetect=nvml (only where MIG instances are) and Counts that add up to its instances. */
struct gres_node {
    int autodetect;    /* 0 none seen, 1 off, 2 nvml */
    int files, counted, device_seen[8];
};

static void gres_line(char *line, struct gres_node *nodes, int n_nodes)
{
    int node = -1;
    char *save = NULL;
    for (char *kv = strtok_r(line, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
        if (node < 0) {
            assert_int_equal(sscanf(kv, "NodeName=node%d", &node), 1);
            assert_true(node >= 0 && node < n_nodes);
        } else if (!strcmp(kv, "AutoDetect=off") || !strcmp(kv, "AutoDetect=nvml")) {
            assert_int_equal(nodes[node].autodetect, 0);
            nodes[node].autodetect = kv[11] == 'o' ? 1 : 2;
        } else if (!strncmp(kv, "File=", 5)) {
            int d = -1;
            assert_int_equal(sscanf(kv, "File=/dev/nvidia%d", &d), 1);
            assert_true(d >= 0 && d < 8 && !nodes[node].device_seen[d]);
            nodes[node].device_seen[d] = 1;
            nodes[node].files++;
        } else if (!strncmp(kv, "Count=", 6)) {
            nodes[node].counted += atoi(kv + 6);
        } else {
            assert_true(!strcmp(kv, "Name=gpu") || !strncmp(kv, "Type=", 5));
        }
    }
}

static void check_gres(const struct plan *p, const char *text)
{
    struct gres_node nodes[64];
    int n_nodes = plan_emit_nodes(p, 8);
    char *copy = strdup(text), *save = NULL;
    assert_true(n_nodes <= 64);
    memset(nodes, 0, sizeof(nodes));
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (l[0] != '#')
            gres_line(l, nodes, n_nodes);
    free(copy);
    for (int n = 0; n < n_nodes; n++) {
        int instances = 0, mig = 0;
        for (int i = 0; i < p->n_instances; i++)
            if (p->instances[i].gpu / 8 == n) {
                instances++;
                mig |= p->instances[i].option != PLAN_OPTION_WHOLE;
            }
        for (int i = 0; i < p->n_instances && !mig; i++)
            if (p->instances[i].gpu / 8 == n)
                assert_true(nodes[n].device_seen[p->instances[i].gpu % 8]);
        assert_int_equal(nodes[n].autodetect, mig ? 2 : 1);
        assert_int_equal(mig ? nodes[n].counted : nodes[n].files, instances);
        assert_int_equal(mig ? nodes[n].files : nodes[n].counted, 0);
    }
}

static void test_slurm_gres(void **state)
{
    (void)state;
    int file_nodes = 0, nvml_nodes = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        static const enum plan_algo algos[] = {PLAN_ALGO_KAIROS, PLAN_ALGO_TEMPORAL};
        for (int a = 0; a < 2; a++) {
            struct plan_input in;
            struct plan p;
            plan_for(&in, &p, seed, algos[a]);
            char *gres = emit_text(plan_emit_slurm, &in, &p, &MIG8, 0);
            check_gres(&p, gres);
            file_nodes += strstr(gres, "AutoDetect=off") != NULL;
            nvml_nodes += strstr(gres, "AutoDetect=nvml") != NULL;
            free(gres);
            plan_free(&p);
            plan_input_free(&in);
        }
    }
    assert_true(file_nodes > 0 && nvml_nodes > 0);   /* both forms were checked */
}

/* A GPU shared by a p99 workload (its one latency tenant) and two others: kairosd parses
 * priority latency for it, normal for the others; without a p99 target all are normal. */
static void test_latency_tenant_priority(void **state)
{
    static const char text[] =
        "gpus: [{model: H200-141GB, count: 1}]\nworkloads:\n"
        "  - {name: serve, memory_mib: 100, target: 20, throughput: {whole: 100},\n"
        "     p99_ms: 6, solo_p99_ms: {whole: 4}}\n"
        "  - {name: train, memory_mib: 100, target: 40, throughput: {whole: 100}}\n"
        "  - {name: batch, memory_mib: 100, target: 30, throughput: {whole: 100}}\n";
    struct plan_input in;
    struct plan p;
    struct plan_options o;
    struct config c;
    char err[512];
    (void)state;
    assert_int_equal(plan_input_parse(text, strlen(text), "c.yaml", &in, err, sizeof(err)), 0);
    plan_options_default(&o);
    assert_int_equal(plan_solve(&in, &o, &p), 0);
    assert_int_equal(plan_check(&in, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n_gpus, 1);
    char *out = emit_text(NULL, &in, &p, &MIG8, 0);
    if (config_parse("kairosd.yaml", out, strlen(out), &c, err, sizeof(err)))
        fail_msg("kairosd refuses: %s\n%s", err, out);
    assert_int_equal(c.n_tenants, 3);
    for (size_t t = 0; t < c.n_tenants; t++) {
        assert_int_equal(c.tenants[t].n_compute, 1);
        assert_int_equal(c.tenants[t].compute[0].pol.prio, !strcmp(c.tenants[t].name, "serve")
                         ? SCHED_PRIO_LATENCY : SCHED_PRIO_NORMAL);
    }
    assert_non_null(strstr(out, "share: 20.0%, priority: latency"));
    config_free(&c);
    free(out);
    plan_free(&p);
    in.workloads[0].p99_ms = 0;   /* no target: the line it had before */
    assert_int_equal(plan_solve(&in, &o, &p), 0);
    out = emit_text(NULL, &in, &p, &MIG8, 0);
    assert_null(strstr(out, "latency"));
    free(out);
    plan_free(&p);
    plan_input_free(&in);
}

/* --slices mps: a sliced GPU's tenants, applied through kairosd's parser, form the fault
 * domain gpu<d> with sms: its instance's SM percentage and no compute policy; the other
 * tenants are as with MIG; no GPU gets MIG; Slurm sees each GPU once, by its file. */
static void test_mps_slices(void **state)
{
    int sliced = 0, gres_gpus = 0;
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        struct plan_input in;
        struct plan p;
        plan_for(&in, &p, seed, seed % 2 ? PLAN_ALGO_KAIROS : PLAN_ALGO_GPULET);
        int *tenants = plan_tenants(&p), shared = 0, mig = 0, used[256] = {0}, n_used = 0;
        assert_non_null(tenants);
        assert_true(p.n_gpus <= 256);
        for (int n = 0; n < plan_emit_nodes(&p, 4); n++) {
            struct config c;
            char err[512];
            char *text = emit_text(NULL, &in, &p, &MPS4, n);
            if (config_parse("kairosd.yaml", text, strlen(text), &c, err, sizeof(err)))
                fail_msg("kairosd refuses node %d: %s\n%s", n, err, text);
            size_t k = 0;
            for (int i = 0; i < p.n_assigns; i++) {
                const struct plan_instance *pi = &p.instances[p.assigns[i].instance];
                if (pi->gpu / 4 != n)
                    continue;
                const struct config_tenant *t = &c.tenants[k++];
                if (!p.gpus[pi->gpu].mig) {
                    assert_int_equal(t->sms_pct, 0);
                    check_tenant(&p, tenants, &p.assigns[i], t, 4, &shared, &mig);
                    continue;
                }
                char domain[16];
                snprintf(domain, sizeof domain, "gpu%d", pi->gpu % 4);
                assert_string_equal(t->fault_domain, domain);
                assert_int_equal(t->sms_pct, plan_option_sm_percent(
                                                 &in.pools[p.gpus[pi->gpu].pool].model,
                                                 pi->option));
                assert_int_equal(t->n_compute, 0);
                assert_int_equal(t->quotas[0].index, pi->gpu % 4);
                sliced++;
            }
            assert_int_equal(k, c.n_tenants);
            config_free(&c);
            free(text);
        }
        for (int i = 0; i < p.n_instances; i++)
            n_used += !used[p.instances[i].gpu]++;
        char *mp = emit_text(plan_emit_mig_parted, &in, &p, &MPS8, 0);
        int configs = 0;
        assert_null(strstr(mp, "mig-enabled: true"));
        assert_int_equal(mig_parted_count(mp, &configs), n_used);
        char *gres = emit_text(plan_emit_slurm, &in, &p, &MPS8, 0);
        assert_null(strstr(gres, "AutoDetect=nvml\n"));   /* no node line has it */
        for (const char *at = gres; (at = strstr(at, " File=/dev/nvidia")); at++)
            gres_gpus++;
        gres_gpus -= n_used;   /* one File line per GPU the plan uses: back to 0 */
        free(gres);
        free(mp);
        free(tenants);
        plan_free(&p);
        plan_input_free(&in);
    }
    assert_int_equal(gres_gpus, 0);
    assert_true(sliced > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kairosd_accepts_tenants),
        cmocka_unit_test(test_kairosd_enforces_every_share),
        cmocka_unit_test(test_linear_shares_are_marked),
        cmocka_unit_test(test_refuses_shared_mig),
        cmocka_unit_test(test_mig_parted),
        cmocka_unit_test(test_slurm_gres),
        cmocka_unit_test(test_latency_tenant_priority),
        cmocka_unit_test(test_mps_slices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
