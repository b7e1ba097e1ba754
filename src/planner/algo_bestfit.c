/* algo_bestfit.c - the Best-fit-MIG baseline: each workload alone in its smallest MIG
 * instance that meets the target at t = 100 % (the whole GPU only when no MIG profile
 * can), holding the instance's full time; instances packed first-fit decreasing.
 */
#include <errno.h>
#include <stdlib.h>

#include "planner/internal.h"

int algo_bestfit(struct state *s)
{
    int *choice = algo_choose(s, algo_bestfit_option);
    int rc;
    if (!choice)
        return -ENOMEM;
    rc = algo_alone(s, choice, 1);
    rc = rc ? rc : algo_pack_ffd(s);
    free(choice);
    return rc;
}
