/* reattach.c - bounding a reattaching process's claim (see reattach.h). */
#include "daemon/reattach.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* What the backend reports pid uses on GPU g: true with *used when it can tell
 * (a listed process with a known size, or a complete list without pid: 0). */
static bool backend_used(struct gpu_backend *gpu, unsigned g, uint32_t pid, uint64_t *used)
{
    if (!gpu || !gpu->ops || !gpu->ops->processes)
        return false;
    struct gpu_proc *procs = NULL;
    size_t cap = 0, n = 0;
    bool known = false;
    if (gpu_processes_all(gpu, g, &procs, &cap, &n) == 0) {
        known = true; /* the whole list: a pid not in it uses nothing */
        *used = 0;
        for (size_t i = 0; i < n; i++)
            if (procs[i].pid == pid) {
                known = procs[i].used_valid;
                *used = procs[i].used;
                break;
            }
    }
    free(procs);
    return known;
}

uint64_t reattach_bound(const struct ledger_tenant *t, unsigned g, uint64_t claim, uint32_t pid,
                        struct gpu_backend *gpu, char *why, size_t why_len)
{
    why[0] = 0;
    uint64_t left = t->quota[g] > t->held[g] ? t->quota[g] - t->held[g] : 0;
    uint64_t used;
    if (backend_used(gpu, g, pid, &used) && used < claim && used <= left) {
        snprintf(why, why_len, "the GPU reports %llu bytes for it",
                 (unsigned long long)used);
        return used;
    }
    if (claim > left) {
        snprintf(why, why_len, "the tenant's quota leaves %llu bytes", (unsigned long long)left);
        return left;
    }
    return claim;
}
