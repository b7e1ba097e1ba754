/* memguard.h - device-memory quotas enforced inside the tenant process.
 *
 * Before each device-memory allocation (RM_ALLOC of NV01_MEMORY_LOCAL_USER, or a
 * VID_HEAP_CONTROL allocation in video memory) the shim reserves its size, rounded
 * up to the driver's page, against the quota: from the credit kairosd's ledger
 * granted this process for a named tenant (the ledger shares the quota among all
 * its processes; no round trip while the credit lasts), or locally for a
 * standalone process (KAIROS_MEM). A refused allocation never reaches the driver: the shim writes
 * NV_ERR_NO_MEMORY into the argument's status and returns 0, exactly as the
 * driver answers a full GPU, so CUDA returns cudaErrorMemoryAllocation and the
 * context keeps working. After the call the reservation is settled with what the
 * object tree says really happened; frees and closes release.
 *
 * FB_GET_INFO_V2 replies are rewritten so the tenant sees its quota as the GPU's
 * size (HEAP_SIZE, what cudaMemGetInfo reads as total; TOTAL_RAM_SIZE and
 * USABLE_RAM_SIZE, what device properties and nvidia-smi read) and the quota
 * minus what the tenant holds as free (HEAP_FREE, never more than the GPU really
 * has free).
 *
 * Thread rules: thread-safe; never called with the state lock held.
 */
#ifndef KAIROS_SHIM_MEMGUARD_H
#define KAIROS_SHIM_MEMGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/objtree.h"
#include "kairos/proto.h"
#include "shim/real.h"
#include "shim/shadow.h"

struct memguard_ticket {
    bool active;        /* a reservation is outstanding */
    uint32_t gpu;
    uint64_t reserved;
    uint64_t token;
    bool from_credit;   /* taken from the tenant's credit (else the local quota) */
};

/* Reads the settings (settings.h); call once at load. */
void memguard_init(void);
/* True when a quota applies to this process (one load). */
bool memguard_active(void);

/* Before the first open of /dev/nvidiactl: registers with kairosd when a tenant
 * is named. Returns 0, or -EACCES when GPU use must be refused (fail-closed). */
int memguard_first_gpu_use(const struct shim_real *r);

/* Before an RM call on /dev/nvidiactl (req, arg: the call, XFER already
 * unwrapped; sh: the shim's copy of it, read with no system call where arg and its
 * parameters lie in it, NULL for none). True when it must be refused as out of
 * memory. */
bool memguard_before(const struct shim_real *r, uint32_t req, void *arg,
                     const struct shadow_call *sh, struct memguard_ticket *t);
/* True when RM request req can create device memory (an allocation escape, or
 * XFER that may wrap one), whatever its argument says. */
bool memguard_may_allocate(uint32_t req);
/* Managed memory (uvm_managed.c): reserves bytes on GPU gpu for a managed range
 * before its mmap. 0 with t active (settle with memguard_after, an effect of
 * bytes on gpu if the mmap succeeded, of 0 if not). A tenant's process asks
 * kairosd for each range (CHARGE flagged managed, never from credit) and waits
 * for its answer, holding no lock of memguard's; -EPERM when the policy
 * refuses managed memory (kairosd's for a tenant, KAIROS_MANAGED standalone, and
 * always while kairosd cannot be asked); -ENOMEM beyond the quota. */
int memguard_reserve_managed(const struct shim_real *r, uint32_t gpu, uint64_t bytes,
                             struct memguard_ticket *t);
/* Writes NV_ERR_NO_MEMORY into the status field of a refused allocation. */
void memguard_write_refusal(uint32_t req, void *arg);
/* After the call: settles the ticket with the tree's effect and releases frees. */
void memguard_after(struct memguard_ticket *t, const struct objtree_effect *effect);
/* Memory released without a call of its own (the last close of a file). */
void memguard_released(const struct objtree_effect *effect);
/* The entries ({index, data} pairs, 8 bytes each, data in KiB) of a successful
 * FB_GET_INFO or FB_GET_INFO_V2 on GPU gpu, rewritten in place: the sizes the tenant's
 * quota, the free memory what its quota leaves. */
void memguard_rewrite_fb_entries(uint8_t *entries, uint32_t count, int gpu);

/* Counters for tests and logs. */
struct memguard_stats {
    uint64_t charged[KAIROS_MAX_GPUS];
    uint64_t credit[KAIROS_MAX_GPUS];   /* unused credit (tenant mode) */
    uint64_t refusals;
    uint64_t quota[KAIROS_MAX_GPUS];
};
void memguard_stats(struct memguard_stats *s);
/* Tests: forget everything and read the settings again. */
void memguard_reset(void);

#endif /* KAIROS_SHIM_MEMGUARD_H */
