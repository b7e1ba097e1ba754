/* algo_temporal.c - the Temporal baseline (cGPU/qGPU style): MIG off, each workload
 * gets the minimal time share on the whole GPU, t = target / Thr(whole), and workloads
 * are packed first-fit decreasing in time (and memory) onto whole GPUs.
 */
#include <errno.h>
#include <stdlib.h>

#include "planner/internal.h"

int algo_temporal(struct state *s)
{
    return algo_fuse_pack(s, algo_whole_option);
}
