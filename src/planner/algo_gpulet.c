/* algo_gpulet.c - the GPUlet-MIG baseline: each workload keeps GPUlet's most
 * cost-effective spatial option (least compute slices x time share, ties to the
 * smaller option), same-option instances are fused in time (duty cycles), and the
 * instances are packed first-fit decreasing. No migration between sizes.
 */
#include <errno.h>
#include <stdlib.h>

#include "planner/internal.h"

int algo_gpulet(struct state *s)
{
    int *choice = malloc(((size_t)s->in->n_workloads + 1) * sizeof(int));
    int rc;
    if (!choice)
        return -ENOMEM;
    for (int w = 0; w < s->in->n_workloads; w++)
        choice[w] = -1;
    for (int i = 0; i < s->n_wl; i++)
        choice[s->wl[i]] = algo_area_option(s, s->wl[i]);
    rc = algo_fuse(s, choice);
    rc = rc ? rc : algo_pack_ffd(s);
    free(choice);
    return rc;
}
