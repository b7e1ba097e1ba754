/* shim_fake.h - test helpers: the shim's dispatch over the fake driver.
 *
 * shim_fake_setup() resets the fake driver and the shim's state and returns a
 * real-function table made of the fakedrv_* functions; the rm_* helpers issue
 * RM calls through the shim's dispatch (shim_ioctl) as an application would.
 */
#ifndef KAIROS_TESTS_SHIM_FAKE_H
#define KAIROS_TESTS_SHIM_FAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/objtree.h"
#include "shim/real.h"

#define FAKE_FB_BYTES (1ull << 30) /* 1 GiB per fake GPU */

const struct shim_real *shim_fake_setup(void);

/* shim_fake_setup under a memory quota: KAIROS_MEM=mem, no KAIROS_TENANT, the shim's
 * memguard reset. fk_quota_end drops the quota and resets memguard again. */
const struct shim_real *fk_quota_setup(const char *mem);
void fk_quota_end(void);

/* Bytes the fake driver holds on GPU 0, and what the shim has charged there. */
uint64_t fk_driver_holds(void);
uint64_t fk_shim_charged(void);

/* RM calls through the dispatch. Return the RM status, or 0xffffffff when the
 * ioctl itself failed. */
uint32_t fk_alloc(const struct shim_real *r, int fd, uint32_t client, uint32_t parent,
                  uint32_t *handle, uint32_t cls, void *params, uint32_t params_size, bool nvos64,
                  bool xfer);
uint32_t fk_client(const struct shim_real *r, int fd, uint32_t *client);
uint32_t fk_vidmem(const struct shim_real *r, int fd, uint32_t client, uint32_t parent,
                   uint32_t *handle, uint64_t size, bool xfer);
uint32_t fk_free(const struct shim_real *r, int fd, uint32_t client, uint32_t handle);
uint32_t fk_fb_info(const struct shim_real *r, int fd, uint32_t client, uint32_t subdevice,
                    uint32_t *total_kib, uint32_t *free_kib);

/* A client with a device (0x80) and a subdevice (0x2080) on fd. */
void fk_context(const struct shim_real *r, int fd, uint32_t *client, uint32_t *device,
                uint32_t *subdevice);

/* The doorbell as CUDA maps it: a usermode object under subdevice, MAP_MEMORY
 * naming a fresh /dev/nvidia0 descriptor (in *dev0), and the mmap of that. */
void *fk_doorbell(const struct shim_real *r, int ctl, uint32_t client, uint32_t subdevice,
                  int *dev0);

/* The set-up of the tests that rewrite a call's arguments at the driver's return: a
 * 64 MiB quota (fk_quota_setup), on_signal installed for SIGUSR1, and a context
 * (fk_context) on a fresh /dev/nvidiactl descriptor, in *ctx. fk_raise_at_return is
 * the reply hook (fakedrv_set_reply_hook) that raises SIGUSR1 there. */
struct fk_forger {
    const struct shim_real *real;
    int ctl;
    uint32_t client, device, subdevice;
};
void fk_forger_setup(void (*on_signal)(int), struct fk_forger *ctx);
/* The end of those tests: the reply hook removed and the quota dropped (fk_quota_end). */
void fk_forger_end(void);
void fk_raise_at_return(void *ctx);

struct objtree_stats fk_stats(void);

#endif /* KAIROS_TESTS_SHIM_FAKE_H */
