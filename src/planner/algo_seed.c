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
    int *choice = algo_choose(s, algo_smallest_option);
    int rc;
    if (!choice)
        return -ENOMEM;
    rc = algo_fuse(s, choice, 0);
    rc = rc ? rc : algo_migrate_up(s);
    rc = rc ? rc : algo_pack_ffd(s);
    free(choice);
    return rc;
}
