/* mig.c - MIG geometry: placement rules, maximal layouts, fitting instances on a GPU.
 *
 * Rule (from the -lgipp placements): an instance takes the contiguous memory slices
 * [start, start + size) at one of its allowed starts; instances may not overlap and
 * their compute slices sum to at most 7. A multiset of instances fits on a GPU iff it
 * is dominated by one of the maximal layouts, because legal layouts are closed under
 * removing instances. The enumeration therefore doubles as the fit oracle.
 */
#include <errno.h>
#include <string.h>

#include "kairos/plan.h"

#define MIG_MAX_PLACEMENTS 64

struct mig_placement {
    int option;
    int start;
    unsigned mem_bits;
    int compute;
};

struct mig_enum {
    const struct mig_placement *pl;
    int n_pl;
    struct plan_layouts *out;
};

int plan_mix_count(plan_mix_t mix, int option)
{
    return (int)(mix >> (4 * (option - 1)) & 0xfu);
}

plan_mix_t plan_mix_add(plan_mix_t mix, int option, int n)
{
    int c = plan_mix_count(mix, option) + n;
    plan_mix_t cleared = mix & ~((plan_mix_t)0xfu << (4 * (option - 1)));
    return cleared | ((plan_mix_t)(c & 0xf) << (4 * (option - 1)));
}

int plan_mix_compute(const struct plan_gpu_model *m, plan_mix_t mix)
{
    int sum = 0;
    for (int o = 1; o <= m->n_profiles; o++)
        sum += plan_mix_count(mix, o) * m->profiles[o - 1].compute_slices;
    return sum;
}

static unsigned mig_run_bits(int start, int size)
{
    return ((1u << size) - 1u) << start;
}

static int mig_placements(const struct plan_gpu_model *m, struct mig_placement *pl)
{
    int n = 0;
    for (int i = 0; i < m->n_profiles; i++) {
        const struct plan_profile *p = &m->profiles[i];
        for (int s = 0; s < PLAN_MEM_SLICES; s++) {
            if (!(p->start_mask >> s & 1u) || s + p->mem_slices > PLAN_MEM_SLICES)
                continue;
            if (n == MIG_MAX_PLACEMENTS)
                return -E2BIG;
            pl[n++] = (struct mig_placement){i + 1, s, mig_run_bits(s, p->mem_slices),
                                             p->compute_slices};
        }
    }
    return n;
}

static int mig_can_add(const struct mig_placement *p, unsigned mem, int compute)
{
    return !(p->mem_bits & mem) && compute + p->compute <= PLAN_COMPUTE_SLICES;
}

static int mig_is_maximal(const struct mig_enum *e, unsigned mem, int compute)
{
    for (int i = 0; i < e->n_pl; i++)
        if (mig_can_add(&e->pl[i], mem, compute))
            return 0;
    return 1;
}

static void mig_record(struct plan_layouts *out, plan_mix_t mix)
{
    out->n_placements++;
    for (int i = 0; i < out->n_mixes; i++)
        if (out->mixes[i] == mix)
            return;
    if (out->n_mixes < PLAN_MAX_LAYOUTS)
        out->mixes[out->n_mixes++] = mix;
}

static uint32_t mig_hash(plan_mix_t mix)
{
    return (uint32_t)((mix * 2654435761u) >> 20) & (PLAN_LEGAL_HASH - 1);
}

/* The legal set stores mix + 1 so that 0 marks an empty slot. */
static void mig_record_legal(struct plan_layouts *out, plan_mix_t mix)
{
    uint32_t h = mig_hash(mix);
    while (out->legal[h] && out->legal[h] != mix + 1)
        h = (h + 1) & (PLAN_LEGAL_HASH - 1);
    if (!out->legal[h] && out->n_legal < PLAN_LEGAL_HASH / 2) {
        out->legal[h] = mix + 1;
        out->n_legal++;
    }
}

static void mig_dfs(const struct mig_enum *e, int next, unsigned mem, int compute, plan_mix_t mix)
{
    mig_record_legal(e->out, mix);
    if (mix && mig_is_maximal(e, mem, compute))
        mig_record(e->out, mix);
    for (int i = next; i < e->n_pl; i++) {
        const struct mig_placement *p = &e->pl[i];
        if (mig_can_add(p, mem, compute))
            mig_dfs(e, i + 1, mem | p->mem_bits, compute + p->compute,
                    plan_mix_add(mix, p->option, 1));
    }
}

int plan_layouts_enumerate(const struct plan_gpu_model *m, struct plan_layouts *out)
{
    struct mig_placement pl[MIG_MAX_PLACEMENTS];
    int n = mig_placements(m, pl);
    if (n < 0)
        return n;
    memset(out, 0, sizeof(*out));
    struct mig_enum e = {pl, n, out};
    mig_dfs(&e, 0, 0, 0, 0);
    for (int h = 0; h < PLAN_LEGAL_HASH; h++) {
        for (int o = 1; out->legal[h] && o <= m->n_profiles; o++)
            if (plan_mix_fits(out, plan_mix_add(out->legal[h] - 1, o, 1)))
                out->room[h] |= (uint16_t)(1u << o);
    }
    return out->n_mixes < PLAN_MAX_LAYOUTS && out->n_legal < PLAN_LEGAL_HASH / 2 ? 0 : -E2BIG;
}

static int mig_dominated(plan_mix_t small, plan_mix_t big)
{
    for (int o = 1; o <= PLAN_MAX_PROFILES; o++)
        if (plan_mix_count(small, o) > plan_mix_count(big, o))
            return 0;
    return 1;
}

int plan_mix_fits(const struct plan_layouts *l, plan_mix_t mix)
{
    uint32_t h = mig_hash(mix);
    while (l->legal[h]) {
        if (l->legal[h] == mix + 1)
            return 1;
        h = (h + 1) & (PLAN_LEGAL_HASH - 1);
    }
    return 0;
}

unsigned plan_mix_room(const struct plan_layouts *l, plan_mix_t mix)
{
    uint32_t h = mig_hash(mix);
    while (l->legal[h]) {
        if (l->legal[h] == mix + 1)
            return l->room[h];
        h = (h + 1) & (PLAN_LEGAL_HASH - 1);
    }
    return 0;
}

int plan_mix_fits_slow(const struct plan_layouts *l, plan_mix_t mix)
{
    for (int i = 0; i < l->n_mixes; i++)
        if (mig_dominated(mix, l->mixes[i]))
            return 1;
    return 0;
}

/* Place instances (largest first) by backtracking over allowed starts. */
static int mig_place_rec(const struct plan_gpu_model *m, const int *opts, int n, int k,
                         unsigned mem, int *starts)
{
    if (k == n)
        return 1;
    const struct plan_profile *p = &m->profiles[opts[k] - 1];
    for (int s = 0; s + p->mem_slices <= PLAN_MEM_SLICES; s++) {
        unsigned bits = mig_run_bits(s, p->mem_slices);
        if (!(p->start_mask >> s & 1u) || (bits & mem))
            continue;
        starts[k] = s;
        if (mig_place_rec(m, opts, n, k + 1, mem | bits, starts))
            return 1;
    }
    return 0;
}

int plan_mix_place(const struct plan_gpu_model *m, plan_mix_t mix, int *starts, int max)
{
    int opts[PLAN_MEM_SLICES * 2], order[PLAN_MEM_SLICES * 2], tmp[PLAN_MEM_SLICES * 2];
    int n = 0;
    for (int o = 1; o <= m->n_profiles; o++)
        for (int c = 0; c < plan_mix_count(mix, o); c++) {
            if (n == PLAN_MEM_SLICES || n == max)
                return -ENOSPC;
            opts[n++] = o;
        }
    if (plan_mix_compute(m, mix) > PLAN_COMPUTE_SLICES)
        return -ENOSPC;
    /* Backtrack largest-first (fewer starts), then report in option order. */
    for (int i = 0; i < n; i++)
        order[i] = opts[n - 1 - i];
    if (!mig_place_rec(m, order, n, 0, 0, tmp))
        return -ENOSPC;
    for (int i = 0; i < n; i++)
        starts[i] = tmp[n - 1 - i];
    return 0;
}
