/* algo_seed.c - KRYPTON's orchestrator as published (the "seed"), reconstructed from
 * the paper's four steps: (1) smallest feasible instance per workload, (2) fuse
 * same-size instances in time, (3) migrate workloads from small instances with the
 * most idle time into existing larger ones, emptying whole instances, (4) pack the
 * instance multiset onto GPUs first-fit decreasing under the placement rules.
 */
#include <errno.h>
#include <stdlib.h>

#include "planner/internal.h"

int algo_seed(struct state *s)
{
    int *choice = malloc(((size_t)s->in->n_workloads + 1) * sizeof(int));
    int rc;
    if (!choice)
        return -ENOMEM;
    for (int w = 0; w < s->in->n_workloads; w++)
        choice[w] = -1;
    for (int i = 0; i < s->n_wl; i++)
        choice[s->wl[i]] = algo_smallest_option(s, s->wl[i]);
    rc = algo_fuse(s, choice);
    rc = rc ? rc : algo_migrate_up(s);
    rc = rc ? rc : algo_pack_ffd(s);
    free(choice);
    return rc;
}
