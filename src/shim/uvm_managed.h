/* uvm_managed.h - managed memory (cudaMallocManaged) under a quota.
 *
 * What the driver does (recorded on the H200, tests/fixtures/h200-...-managed-1g.nvtrace;
 * docs/memory.md): cudaMallocManaged makes its range with an mmap of the
 * /dev/nvidia-uvm descriptor at a fixed address whose file offset is that address;
 * UVM turns the mapping into a managed range and takes device memory for it later,
 * inside the kernel, as the GPU touches it (no RM call shows it). The only other
 * mmap CUDA makes of that descriptor maps a semaphore pool that
 * UVM_ALLOC_SEMAPHORE_POOL created first, at exactly that address and length
 * (system memory). So the shim counts as managed every mmap of a UVM descriptor
 * that is not exactly a live semaphore pool it saw made.
 *
 * Under a quota the policy decides before the mmap reaches the driver:
 *   refuse (the default): the mmap fails with ENOMEM (cudaMallocManaged returns
 *     an error), and one line on stderr says why and what to do;
 *   charge: the whole range, rounded up to 2 MiB, is reserved on every GPU the
 *     process has a device on (the worst case: all of it made resident, on any of
 *     them) before the mmap, settled after it, and released as munmap (or an
 *     mmap MAP_FIXED over it) removes it; a process's exit releases it in kairosd.
 *     A GPU the process starts using later (UVM_REGISTER_GPU) is charged the
 *     live ranges first, or its registration is refused (NV_ERR_NO_MEMORY).
 * The policy is kairosd's for the tenant (CHARGE with KAIROS_CHARGE_MANAGED), or
 * KAIROS_MANAGED for a standalone process (settings.h).
 *
 * UVM_ALLOC_SEMAPHORE_POOL and UVM_FREE are made on a copy the shim owns and with
 * the module's lock held across the call, as is the mmap of a semaphore pool: a
 * pool cannot be freed between the shim's check and the mmap that relies on it,
 * and the range the shim records is the one the driver read.
 *
 * Thread rules: any application thread. One mutex of its own, held across the
 * kernel calls named above (never across a message to kairosd); never taken with
 * the state lock held. A forked child starts with no ranges (the parent's stay
 * the parent's).
 */
#ifndef KAIROS_SHIM_UVM_MANAGED_H
#define KAIROS_SHIM_UVM_MANAGED_H

#include <stdbool.h>
#include <stdint.h>

#include "kairos/proto.h"
#include "shim/memguard.h"
#include "shim/real.h"

#define UVM_MANAGED_PAGE (2ull << 20) /* a range is charged in 2 MiB pages */

enum uvm_mmap_kind {
    UVM_MMAP_PASS = 0, /* no quota: nothing to do */
    UVM_MMAP_POOL,     /* a semaphore pool's CPU mapping: the module's lock is held */
    UVM_MMAP_MANAGED,  /* a managed range: reserved on the GPUs of gpus */
};

struct uvm_mmap_ticket {
    enum uvm_mmap_kind kind;
    uint64_t len;
    uint64_t bytes; /* charged per GPU */
    uint32_t gpus;  /* bit g: reserved on GPU g */
    struct memguard_ticket per_gpu[KAIROS_MAX_GPUS];
};

/* Before an mmap of a /dev/nvidia-uvm descriptor of len bytes at addr. True when
 * the mmap may go ahead (then call uvm_managed_after_mmap with its result); false
 * when it is refused: errno is ENOMEM and the driver must not be called. */
bool uvm_managed_before_mmap(const struct shim_real *r, uint64_t addr, uint64_t len,
                             struct uvm_mmap_ticket *t);
/* After it: p is what mmap returned (MAP_FAILED or the range); fixed: it was
 * MAP_FIXED, so what was mapped there before is gone. */
void uvm_managed_after_mmap(struct uvm_mmap_ticket *t, void *p, bool fixed);

/* [addr, addr + len) was unmapped (munmap, or an mmap MAP_FIXED over it):
 * releases the managed ranges, or their parts, it removed. */
void uvm_managed_unmapped(uint64_t addr, uint64_t len);

/* True when an ioctl on a UVM descriptor must go through uvm_managed_ioctl. */
bool uvm_managed_wants(unsigned long request);
/* Makes that ioctl and records what it did: UVM_ALLOC_SEMAPHORE_POOL and UVM_FREE
 * on a copy of the argument with the lock held, UVM_REGISTER_GPU after charging
 * the live ranges on the new GPU (or answered NV_ERR_NO_MEMORY). Returns as ioctl
 * does (-1 with errno EFAULT for an unreadable argument, which never reaches the
 * driver). */
int uvm_managed_ioctl(const struct shim_real *r, int fd, unsigned long request, void *arg);

/* For tests and logs: managed ranges live, and bytes charged for them per GPU. */
void uvm_managed_stats(uint32_t *ranges, uint64_t *charged_per_gpu);
/* Tests: forget everything (no other thread may be inside the shim). */
void uvm_managed_reset(void);

#endif /* KAIROS_SHIM_UVM_MANAGED_H */
