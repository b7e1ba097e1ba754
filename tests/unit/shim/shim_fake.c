/* shim_fake.c - test helpers over the fake driver (see shim_fake.h). */
#include "shim_fake.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <setjmp.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim/memguard.h"
#include "shim/state.h"

static struct shim_real fake;

const struct shim_real *shim_fake_setup(void)
{
    fakedrv_reset(2, FAKE_FB_BYTES);
    state_reset();
    memset(&fake, 0, sizeof fake);
    fake.open = fakedrv_open;
    fake.open64 = fakedrv_open;
    fake.openat = fakedrv_openat;
    fake.openat64 = fakedrv_openat;
    fake.__open_2 = fakedrv_open_2;
    fake.__open64_2 = fakedrv_open_2;
    fake.__openat_2 = fakedrv_openat_2;
    fake.__openat64_2 = fakedrv_openat_2;
    fake.close = fakedrv_close;
    fake.dup = fakedrv_dup;
    fake.dup2 = fakedrv_dup2;
    fake.dup3 = fakedrv_dup3;
    fake.fcntl = fakedrv_fcntl;
    fake.fcntl64 = fakedrv_fcntl;
    fake.ioctl = fakedrv_ioctl;
    fake.mmap = fakedrv_mmap;
    fake.mmap64 = fakedrv_mmap64;
    fake.munmap = fakedrv_munmap;
    fake.fstat = fakedrv_fstat;
    fake.readlink = fakedrv_readlink;
    fake.fopen = fakedrv_fopen;
    fake.fopen64 = fakedrv_fopen;
    fake.fclose = fclose;
    shim_real_fill(&fake);
    return &fake;
}

uint32_t fk_alloc(const struct shim_real *r, int fd, uint32_t client, uint32_t parent,
                  uint32_t *handle, uint32_t cls, void *params, uint32_t params_size, bool nvos64,
                  bool xfer)
{
    struct rm_alloc64_args a64 = {.h_client = client, .h_parent = parent, .h_object = *handle,
                                  .h_class = cls, .params = (uintptr_t)params,
                                  .params_size = params_size};
    struct rm_alloc_args a32 = {.h_client = client, .h_parent = parent, .h_object = *handle,
                                .h_class = cls, .params = (uintptr_t)params,
                                .params_size = params_size};
    void *arg = nvos64 ? (void *)&a64 : (void *)&a32;
    uint32_t size = nvos64 ? sizeof a64 : sizeof a32;
    int ret;
    if (xfer) {
        struct rm_xfer_args x = {.cmd = RM_NR_ALLOC, .size = size, .ptr = (uintptr_t)arg};
        ret = shim_ioctl(r, fd, RM_IOWR(RM_NR_XFER, sizeof x), &x);
    } else {
        ret = shim_ioctl(r, fd, RM_IOWR(RM_NR_ALLOC, size), arg);
    }
    if (ret != 0)
        return 0xffffffffu;
    *handle = nvos64 ? a64.h_object : a32.h_object;
    return nvos64 ? a64.status : a32.status;
}

uint32_t fk_client(const struct shim_real *r, int fd, uint32_t *client)
{
    *client = 0;
    return fk_alloc(r, fd, 0, 0, client, RM_CLASS_NV01_ROOT_CLIENT, NULL, 0, false, false);
}

uint32_t fk_vidmem(const struct shim_real *r, int fd, uint32_t client, uint32_t parent,
                   uint32_t *handle, uint64_t size, bool xfer)
{
    struct rm_memory_alloc_params mp;
    memset(&mp, 0, sizeof mp);
    mp.size = size;
    return fk_alloc(r, fd, client, parent, handle, RM_CLASS_NV01_MEMORY_LOCAL_USER, &mp,
                    sizeof mp, true, xfer);
}

uint32_t fk_free(const struct shim_real *r, int fd, uint32_t client, uint32_t handle)
{
    struct rm_free_args a = {.h_client = client, .h_object = handle};
    if (shim_ioctl(r, fd, RM_IOWR(RM_NR_FREE, sizeof a), &a) != 0)
        return 0xffffffffu;
    return a.status;
}

uint32_t fk_fb_info(const struct shim_real *r, int fd, uint32_t client, uint32_t subdevice,
                    uint32_t *total_kib, uint32_t *free_kib)
{
    struct rm_fb_get_info_v2_params p;
    memset(&p, 0, sizeof p);
    p.count = 2;
    p.entries[0].index = RM_FB_INFO_HEAP_SIZE;
    p.entries[1].index = RM_FB_INFO_HEAP_FREE;
    struct rm_control_args a = {.h_client = client, .h_object = subdevice,
                                .cmd = RM_CTRL_NV2080_FB_GET_INFO_V2, .params = (uintptr_t)&p,
                                .params_size = sizeof p};
    if (shim_ioctl(r, fd, RM_IOWR(RM_NR_CONTROL, sizeof a), &a) != 0)
        return 0xffffffffu;
    *total_kib = p.entries[0].data;
    *free_kib = p.entries[1].data;
    return a.status;
}

void fk_context(const struct shim_real *r, int fd, uint32_t *client, uint32_t *device,
                uint32_t *subdevice)
{
    assert_int_equal(fk_client(r, fd, client), 0);
    uint32_t dev_params[14] = {0};
    *device = 0;
    assert_int_equal(fk_alloc(r, fd, *client, *client, device, RM_CLASS_NV01_DEVICE_0,
                              dev_params, sizeof dev_params, true, false),
                     0);
    uint32_t sub_params = 0;
    *subdevice = 0;
    assert_int_equal(fk_alloc(r, fd, *client, *device, subdevice, RM_CLASS_NV20_SUBDEVICE_0,
                              &sub_params, sizeof sub_params, false, false),
                     0);
}

struct objtree_stats fk_stats(void)
{
    struct objtree_stats s;
    state_stats(&s);
    return s;
}

void *fk_doorbell(const struct shim_real *r, int ctl, uint32_t client, uint32_t subdevice,
                  int *dev0)
{
    uint32_t um = 0;
    uint8_t um_params[2] = {0};
    assert_int_equal(fk_alloc(r, ctl, client, subdevice, &um, RM_CLASS_HOPPER_USERMODE_A,
                              um_params, sizeof um_params, true, false),
                     0);
    *dev0 = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidia0", O_RDWR, 0);
    assert_true(*dev0 >= 0);
    struct rm_map_memory_args map = {.h_client = client, .h_device = subdevice, .h_memory = um,
                                     .length = 0x10000, .fd = *dev0};
    assert_int_equal(shim_ioctl(r, ctl, RM_IOWR(RM_NR_MAP_MEMORY, sizeof map), &map), 0);
    assert_int_equal(map.status, 0);
    void *bell = shim_mmap(r, false, NULL, 0x10000, PROT_WRITE, MAP_SHARED, *dev0, 0);
    assert_true(bell != MAP_FAILED);
    return bell;
}

const struct shim_real *fk_quota_setup(const char *mem)
{
    setenv("KAIROS_MEM", mem, 1);
    unsetenv("KAIROS_TENANT");
    const struct shim_real *r = shim_fake_setup();
    memguard_reset();
    return r;
}

void fk_quota_end(void)
{
    unsetenv("KAIROS_MEM");
    memguard_reset();
}

uint64_t fk_driver_holds(void)
{
    return fakedrv_fb_total(0) - fakedrv_fb_free(0);
}

uint64_t fk_shim_charged(void)
{
    struct memguard_stats st;
    memguard_stats(&st);
    return st.charged[0];
}

void fk_forger_end(void)
{
    fakedrv_set_reply_hook(NULL, NULL);
    fk_quota_end();
}

void fk_forger_setup(void (*on_signal)(int), struct fk_forger *ctx)
{
    ctx->real = fk_quota_setup("64M");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGUSR1, &sa, NULL);
    ctx->ctl = shim_open(ctx->real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    assert_true(ctx->ctl >= 0);
    fk_context(ctx->real, ctx->ctl, &ctx->client, &ctx->device, &ctx->subdevice);
}

void fk_raise_at_return(void *ctx)
{
    (void)ctx;
    raise(SIGUSR1);
}
