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
    return algo_fuse_pack(s, algo_area_option);
}
