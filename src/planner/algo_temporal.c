/* algo_temporal.c - the Temporal baseline (cGPU/qGPU style): MIG off, each workload
 * gets the minimal time share on the whole GPU, t = target / Thr(whole), and workloads
 * are packed first-fit decreasing in time (and memory) onto whole GPUs.
 */
#include <errno.h>
#include <stdlib.h>

#include "planner/internal.h"

int algo_temporal(struct state *s)
{
    int *choice = malloc(((size_t)s->in->n_workloads + 1) * sizeof(int));
    int rc;
    if (!choice)
        return -ENOMEM;
    for (int w = 0; w < s->in->n_workloads; w++)
        choice[w] = -1;
    for (int i = 0; i < s->n_wl; i++) {
        int w = s->wl[i];
        choice[w] = st_need(s, w, PLAN_OPTION_WHOLE) >= 0 ? PLAN_OPTION_WHOLE : -1;
    }
    rc = algo_fuse(s, choice);
    rc = rc ? rc : algo_pack_ffd(s);
    free(choice);
    return rc;
}
