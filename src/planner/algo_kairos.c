/* algo_kairos.c - Kairos's planner: the seed's steps, then better where we can.
 *
 * 1. A portfolio of starting points, each a full instance multiset: the seed's
 *    (smallest instance, fuse, migrate up), a cost-aware one (least compute x time
 *    per workload, fuse, migrate up), and the three baselines' own constructions with
 *    exact time shares (so Kairos is never worse than any baseline by construction);
 *    with one workload per MIG instance (the default) also a cost-aware start that
 *    counts a MIG instance as held whole (least compute x time it holds).
 *    Up to KAIROS_LARGE workloads each fused start is built twice: equal times fused in
 *    input order (as the baselines do) and larger memory first.
 * 2. Two packers per starting point: the seed's first-fit decreasing and a layout
 *    cover that picks, GPU by GPU, the maximal MIG layout covering the most slices.
 * 3. Local search on the packed plan: empty instances into other instances' idle time
 *    (fewer slices), then empty whole GPUs, least loaded first, into idle time or into
 *    new instances carved from other GPUs' free slices (fewer GPUs). All or nothing.
 * The best plan by (workloads placed within the pool's GPUs, GPUs, used slices) wins:
 * with too few GPUs, placing workloads comes before saving GPUs. Beyond KAIROS_LARGE workloads only the
 * seed's start is searched (lightly); the other starts are only packed, which keeps
 * the never-worse-than-a-baseline guarantee and 10,000 workloads under a second.
 */
#include <errno.h>
#include <stdlib.h>

#include "planner/internal.h"

#define KAIROS_GPU_ATTEMPTS 400
#define KAIROS_LARGE 2000          /* workloads; beyond this the search is trimmed */

typedef int (*kairos_choice_fn)(const struct state *s, int w);

struct kairos_start {
    kairos_choice_fn choose;
    int fuse;          /* 0: one instance each at its exact time */
    int migrate;       /* the seed's step 3 */
    int large;         /* also searched (packers, local search) on large inputs */
};

static const struct kairos_start kairos_starts[] = {
    {algo_smallest_option, 1, 1, 1},   /* the seed */
    {algo_area_option, 1, 1, 1},       /* cost-aware */
    {algo_area_option, 1, 0, 0},       /* GPUlet-MIG's multiset */
    {algo_bestfit_option, 0, 0, 0},    /* Best-fit-MIG's multiset */
    {algo_whole_option, 1, 0, 0},      /* Temporal's multiset */
    {algo_held_area_option, 1, 1, 1},  /* cost-aware, a MIG instance held whole (default
                                        * only: with mig_sharing it is the second start) */
};

#define KAIROS_N_STARTS (sizeof(kairos_starts) / sizeof(kairos_starts[0]))

static int kairos_build(struct state *s, const struct kairos_start *k, int mem_ties)
{
    int *choice = algo_choose(s, k->choose);
    int rc;
    if (!choice)
        return -ENOMEM;
    rc = k->fuse ? algo_fuse(s, choice, mem_ties) : algo_alone(s, choice, 0);
    if (!rc && k->migrate)
        rc = algo_migrate_up(s);
    free(choice);
    return rc;
}

static int kairos_cmp_desc(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return (*x < *y) - (*x > *y);
}

/* Workloads still placed once the plan is cut to the pool's GPUs, keeping the GPUs
 * with the most workloads (what solve.c's capping keeps). */
static int kairos_placed(const struct state *s)
{
    int *members = calloc((size_t)s->n_gpu + 1, sizeof(int)), n = 0, placed = 0;
    int cap = s->in->pools[s->pool].count;
    if (!members)
        return 0;
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].gpu >= 0 && s->gpu[s->inst[i].gpu].alive)
            members[s->inst[i].gpu] += s->inst[i].n;
    for (int g = 0; g < s->n_gpu; g++)
        if (members[g])
            members[n++] = members[g];
    if (n > cap)
        qsort(members, (size_t)n, sizeof(int), kairos_cmp_desc);
    for (int g = 0; g < n && g < cap; g++)
        placed += members[g];
    free(members);
    return placed;
}

/* Better: more workloads placed within the pool's GPUs, then fewer GPUs and slices. */
static int kairos_better(const struct state *a, const struct state *b)
{
    int pa = kairos_placed(a), pb = kairos_placed(b);
    if (pa != pb)
        return pa > pb;
    return st_score(a) < st_score(b);
}

static void kairos_offer(struct state *cand, struct state *best, int *have)
{
    if (!*have || kairos_better(cand, best)) {
        if (*have)
            st_free(best);
        *best = *cand;
        *have = 1;
    } else {
        st_free(cand);
    }
}

/* Pack, improve (unless trimmed), keep if better. search: 0 none, 1 light, 2 full.
 * When the pool is too small, the packed plan before the search is offered too: the
 * search saves GPUs, which is worth nothing if it leaves fewer workloads placed. */
static int kairos_finish(struct state *cand, int cover, int search, struct state *best, int *have)
{
    struct state before;
    int rc = cover ? algo_pack_cover(cand) : algo_pack_ffd(cand);
    int capped = !rc && search && st_alive_gpus(cand) > cand->in->pools[cand->pool].count;
    if (capped && (rc = st_copy(&before, cand)))
        capped = 0;
    if (!rc && search)
        rc = algo_improve(cand, KAIROS_GPU_ATTEMPTS, search == 2 ? 8 : 3);
    if (rc) {
        if (capped)
            st_free(&before);
        st_free(cand);
        return rc;
    }
    if (capped)
        kairos_offer(&before, best, have);
    kairos_offer(cand, best, have);
    return 0;
}

int algo_kairos(struct state *s)
{
    struct state best, built, cand;
    int have = 0, rc = 0;
    int large = s->n_wl > KAIROS_LARGE;
    /* each fused start twice on small inputs: equal times in input order, then larger
     * memory first (neither order wins on every case) */
    for (size_t run = 0; run < 2 * KAIROS_N_STARTS && !rc; run++) {
        size_t k = run % KAIROS_N_STARTS;
        int mem_ties = run >= KAIROS_N_STARTS;
        if (mem_ties && (large || !kairos_starts[k].fuse))
            continue;
        if (kairos_starts[k].choose == algo_held_area_option && s->in->mig_sharing)
            continue;
        if ((rc = st_copy(&built, s)))
            break;
        rc = kairos_build(&built, &kairos_starts[k], mem_ties);
        int search = large ? kairos_starts[k].large : 2;
        for (int cover = 0; cover < 2 - (large && !search) && !rc; cover++) {
            rc = st_copy(&cand, &built);
            rc = rc ? rc : kairos_finish(&cand, cover, search, &best, &have);
        }
        st_free(&built);
    }
    if (rc) {
        if (have)
            st_free(&best);
        return rc;
    }
    best.need_owner = s->need_owner;   /* best shares s's need table */
    s->need_owner = 0;
    st_free(s);
    *s = best;
    return 0;
}
