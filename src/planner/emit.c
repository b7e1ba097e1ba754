/* emit.c - a plan as configuration a cluster applies: the MIG layout of every node in
 * mig-parted's format, each node's kairosd.yaml tenants (kairosd.conf(5)), and Slurm
 * gres lines.
 *
 * Nodes: GPU g of the plan is device g % gpus_per_node of node g / gpus_per_node.
 * kairosd keys quotas and compute policies by GPU index (or GPU UUID), not by MIG
 * instance, so a MIG instance may hold one tenant only (its memory quota on the GPU's
 * index, no compute policy: the instance isolates it); a plan with a shared MIG
 * instance is refused (-ENOTSUP), since its time shares could not be enforced.
 * A tenant sharing a MIG-off GPU gets share = its time share, priority normal, but for
 * the one workload with a p99 target there (plan_latency_tenants): priority latency.
 * mig-parted places the instances itself; the plan's starts are one legal placement.
 * gres.conf: a node without MIG names each GPU's device file; a node with MIG instances
 * leaves the devices to Slurm's NVML detection (MIG device files exist only once created).
 * With MPS slices (plan_emit_to.slices) no GPU gets MIG: a sliced GPU's tenants form the
 * fault domain gpu<d> of kairosd's space mode, each capped at its instance's SM
 * percentage (sms:, what kairos profile's MPS proxy measured), and the GPU is one device
 * to Slurm.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kairos/plan.h"

static const struct plan_gpu_model *emit_model(const struct plan_input *in, const struct plan *p,
                                               int g)
{
    return &in->pools[p->gpus[g].pool].model;
}

int plan_emit_nodes(const struct plan *p, int gpus_per_node)
{
    return gpus_per_node > 0 ? (p->n_gpus + gpus_per_node - 1) / gpus_per_node : 0;
}

/* Whether GPU g is cut into MIG instances (else whole, or SM shares of MPS). */
static bool emit_uses_mig(const struct plan *p, const struct plan_emit_to *to, int g)
{
    return p->gpus[g].mig && to->slices == PLAN_SLICES_MIG;
}

int plan_emit_mig_parted(const struct plan_input *in, const struct plan *p,
                         const struct plan_emit_to *to, void *stream)
{
    FILE *f = stream;
    int gpus_per_node = to->gpus_per_node;
    if (gpus_per_node < 1)
        return -EINVAL;
    fprintf(f, "# mig-parted configuration written by kairos plan (%s); one config per node:\n"
            "#   nvidia-mig-parted apply -f THIS_FILE -c kairos-node<N>\n%s"
            "version: v1\nmig-configs:\n", p->algo, to->slices == PLAN_SLICES_MPS
            ? "# --slices mps: MIG stays off; kairosd's space mode makes the slices\n" : "");
    for (int n = 0; n < plan_emit_nodes(p, gpus_per_node); n++) {
        fprintf(f, "  kairos-node%d:\n", n);
        for (int g = n * gpus_per_node; g < p->n_gpus && g < (n + 1) * gpus_per_node; g++) {
            const struct plan_gpu_model *m = emit_model(in, p, g);
            int count[PLAN_MAX_OPTIONS] = {0};
            fprintf(f, "    - devices: [%d]\n      mig-enabled: %s\n", g % gpus_per_node,
                    emit_uses_mig(p, to, g) ? "true" : "false");
            if (!emit_uses_mig(p, to, g))
                continue;
            for (int i = 0; i < p->n_instances; i++)
                if (p->instances[i].gpu == g)
                    count[p->instances[i].option]++;
            fprintf(f, "      mig-devices:\n");
            for (int o = 1; o < plan_option_count(m); o++)
                if (count[o])
                    fprintf(f, "        \"%s\": %d\n", plan_option_name(m, o), count[o]);
        }
    }
    return ferror(f) ? -EIO : 0;
}

/* kairosd tenant names: 1..63 of [A-Za-z0-9._-], not starting with . or -. */
static void emit_tenant_name(const char *name, int w, char *out, size_t len)
{
    size_t k = 0;
    int changed = name[0] == '.' || name[0] == '-';
    if (changed)
        out[k++] = 'w';
    for (const char *c = name; *c && k + 12 < len; c++) {
        int ok = isalnum((unsigned char)*c) || *c == '.' || *c == '_' || *c == '-';
        out[k++] = ok ? *c : '-';
        changed |= !ok;
    }
    out[k] = '\0';
    if (changed)   /* keep names unique when characters had to be replaced */
        snprintf(out + k, len - k, "-%d", w);
}

/* Whether assignment as's time share comes from the linear model: no time-share curve
 * of its workload for the pool of its GPU. */
static bool linear_share(const struct plan_input *in, const struct plan *p,
                         const struct plan_assign *as)
{
    const struct plan_time_curve *c = in->workloads[as->workload].curve;
    return !c || !c->n[p->gpus[p->instances[as->instance].gpu].pool];
}

/* A tenant's lines beyond its memory: its MIG instance (a comment), its SM share of
 * the GPU's fault domain, or its time share of a whole GPU it shares (a comment when
 * the linear model gave it). */
static void emit_tenant_slice(const struct plan_input *in, const struct plan *p,
                              const struct plan_emit_to *to, const struct plan_assign *as,
                              int sharing, int latency, FILE *f)
{
    const struct plan_instance *pi = &p->instances[as->instance];
    const struct plan_gpu_model *m = emit_model(in, p, pi->gpu);
    int d = pi->gpu % to->gpus_per_node;
    if (emit_uses_mig(p, to, pi->gpu))
        fprintf(f, "    # MIG %s at slice %d, its only tenant\n",
                plan_option_name(m, pi->option), pi->start);
    else if (p->gpus[pi->gpu].mig)
        fprintf(f, "    fault_domain: gpu%d\n    sms: %d%%   # the SMs of MIG %s, its only "
                "tenant\n", d, plan_option_sm_percent(m, pi->option),
                plan_option_name(m, pi->option));
    else if (sharing)
        fprintf(f, "    compute: { %d: { share: %.1f%%, priority: %s } }%s\n", d,
                as->time * 100.0 / PLAN_TIME_UNITS, latency ? "latency" : "normal",
                linear_share(in, p, as) ? "   # linear model (no measured time_shares): "
                                          "may be more GPU time than it needs" : "");
}

int plan_emit_linear_shares(const struct plan_input *in, const struct plan *p)
{
    int *tenants = plan_tenants(p);
    if (!tenants)
        return -ENOMEM;
    int n = 0;
    for (int a = 0; a < p->n_assigns; a++) {
        const struct plan_assign *as = &p->assigns[a];
        const struct plan_instance *pi = &p->instances[as->instance];
        n += pi->option == PLAN_OPTION_WHOLE && !p->gpus[pi->gpu].mig &&
             tenants[as->instance] > 1 && linear_share(in, p, as);
    }
    free(tenants);
    return n;
}

int plan_emit_kairosd(const struct plan_input *in, const struct plan *p,
                      const struct plan_emit_to *to, int node, void *stream)
{
    FILE *f = stream;
    int gpus_per_node = to->gpus_per_node;
    int *tenants = plan_tenants(p), *lat = plan_latency_tenants(in, p);
    if (!tenants || !lat || gpus_per_node < 1) {
        free(tenants);
        free(lat);
        return gpus_per_node < 1 ? -EINVAL : -ENOMEM;
    }
    for (int i = 0; i < p->n_instances; i++)
        if (p->instances[i].option != PLAN_OPTION_WHOLE && tenants[i] > 1) {
            free(tenants);
            free(lat);
            return -ENOTSUP;   /* kairosd has no compute policy per MIG instance */
        }
    fprintf(f, "# kairosd.yaml tenants of node %d, written by kairos plan (%s, interference %s);\n"
            "# see kairosd.conf(5). Add socket, admins, audit and the rest as the node needs.\n"
            "tenants:\n", node, p->algo, plan_interference_name(in->interference));
    for (int a = 0; a < p->n_assigns; a++) {
        const struct plan_assign *as = &p->assigns[a];
        const struct plan_instance *pi = &p->instances[as->instance];
        if (pi->gpu / gpus_per_node != node)
            continue;
        char name[KAIROS_PLAN_TENANT_MAX];
        emit_tenant_name(in->workloads[as->workload].name, as->workload, name, sizeof(name));
        fprintf(f, "  - name: %s\n    memory: { %d: %lldMiB }\n", name, pi->gpu % gpus_per_node,
                (long long)as->mem_mib);
        emit_tenant_slice(in, p, to, as, tenants[as->instance] > 1,
                          lat[as->instance] == as->workload, f);
    }
    free(tenants);
    free(lat);
    return ferror(f) ? -EIO : 0;
}

static void emit_type(const struct plan_gpu_model *m, int option, char *out, size_t len)
{
    snprintf(out, len, "%s", option == PLAN_OPTION_WHOLE ? m->name : plan_option_name(m, option));
    for (char *c = out; option == PLAN_OPTION_WHOLE && *c; c++)
        *c = (char)tolower((unsigned char)*c);
}

/* Whether node n holds a MIG instance (then Slurm must find its devices through NVML). */
static int emit_node_has_mig(const struct plan *p, const struct plan_emit_to *to, int n)
{
    for (int i = 0; i < p->n_instances; i++)
        if (p->instances[i].gpu / to->gpus_per_node == n &&
            emit_uses_mig(p, to, p->instances[i].gpu))
            return 1;
    return 0;
}

/* What Slurm sees of instance i: the MIG profile, or the GPU (whole, or sliced by MPS,
 * which Slurm does not see). */
static int emit_slurm_option(const struct plan *p, const struct plan_emit_to *to, int i)
{
    return emit_uses_mig(p, to, p->instances[i].gpu) ? p->instances[i].option
                                                     : PLAN_OPTION_WHOLE;
}

/* Whether instance i is the first of its GPU (a GPU is one device to Slurm without MIG). */
static bool emit_first_of_gpu(const struct plan *p, int i)
{
    for (int j = 0; j < i; j++)
        if (p->instances[j].gpu == p->instances[i].gpu)
            return false;
    return true;
}

/* A node without MIG: one line per GPU with its device file, detection off. */
static void emit_slurm_files(const struct plan_input *in, const struct plan *p,
                             const struct plan_emit_to *to, int n, FILE *f)
{
    fprintf(f, "NodeName=node%d AutoDetect=off\n", n);
    for (int i = 0; i < p->n_instances; i++) {
        const struct plan_instance *pi = &p->instances[i];
        char type[PLAN_NAME_MAX];
        if (pi->gpu / to->gpus_per_node != n || !emit_first_of_gpu(p, i))
            continue;
        emit_type(emit_model(in, p, pi->gpu), PLAN_OPTION_WHOLE, type, sizeof(type));
        fprintf(f, "NodeName=node%d Name=gpu Type=%s File=/dev/nvidia%d\n", n, type,
                pi->gpu % to->gpus_per_node);
    }
}

int plan_emit_slurm(const struct plan_input *in, const struct plan *p,
                    const struct plan_emit_to *to, void *stream)
{
    FILE *f = stream;
    int gpus_per_node = to->gpus_per_node;
    if (gpus_per_node < 1)
        return -EINVAL;
    fprintf(f, "# Slurm gres.conf written by kairos plan (%s); node names are node<N>.\n"
            "# A node without MIG lists each GPU's device file (File=/dev/nvidia<index>).\n"
            "# MIG devices have no fixed device file before mig-parted creates them (their\n"
            "# /dev/nvidia-caps files are numbered then), so a node with MIG instances uses\n"
            "# AutoDetect=nvml and its Type/Count lines say what Slurm must find there.\n",
            p->algo);
    for (int n = 0; n < plan_emit_nodes(p, gpus_per_node); n++) {
        /* per (pool, option): devices on this node */
        int count[PLAN_MAX_POOLS][PLAN_MAX_OPTIONS] = {{0}}, mig;
        char gres[1024] = "";
        for (int i = 0; i < p->n_instances; i++) {
            const struct plan_instance *pi = &p->instances[i];
            int o = emit_slurm_option(p, to, i);
            if (pi->gpu / gpus_per_node == n && (o != PLAN_OPTION_WHOLE || emit_first_of_gpu(p, i)))
                count[p->gpus[pi->gpu].pool][o]++;
        }
        if (!(mig = emit_node_has_mig(p, to, n)))
            emit_slurm_files(in, p, to, n, f);
        else
            fprintf(f, "NodeName=node%d AutoDetect=nvml\n", n);
        for (int pool = 0; pool < in->n_pools; pool++) {
            const struct plan_gpu_model *m = &in->pools[pool].model;
            for (int o = 0; o < plan_option_count(m); o++) {
                char type[PLAN_NAME_MAX];
                if (!count[pool][o])
                    continue;
                emit_type(m, o, type, sizeof(type));
                if (mig)
                    fprintf(f, "NodeName=node%d Name=gpu Type=%s Count=%d\n", n, type,
                            count[pool][o]);
                size_t used = strlen(gres);
                snprintf(gres + used, sizeof(gres) - used, "%sgpu:%s:%d", used ? "," : "", type,
                         count[pool][o]);
            }
        }
        fprintf(f, "# slurm.conf: NodeName=node%d Gres=%s\n", n, gres);
    }
    return ferror(f) ? -EIO : 0;
}
