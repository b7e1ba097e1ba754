/* algo_bestfit.c - the Best-fit-MIG baseline: each workload alone in its smallest MIG
 * instance that meets the target at t = 100 % (the whole GPU only when no MIG profile
 * can), holding the instance's full time; instances packed first-fit decreasing.
 */
#include <errno.h>
#include <stdlib.h>

#include "planner/internal.h"

int algo_bestfit(struct state *s)
{
    int *choice = malloc(((size_t)s->in->n_workloads + 1) * sizeof(int));
    int rc;
    if (!choice)
        return -ENOMEM;
    for (int w = 0; w < s->in->n_workloads; w++)
        choice[w] = -1;
    for (int i = 0; i < s->n_wl; i++)
        choice[s->wl[i]] = algo_bestfit_option(s, s->wl[i]);
    rc = algo_alone(s, choice, 1);
    rc = rc ? rc : algo_pack_ffd(s);
    free(choice);
    return rc;
}
