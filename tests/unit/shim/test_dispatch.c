/* test_dispatch.c - RM calls through the shim's dispatch against the fake driver:
 * the object tree's counts, XFER, refused allocations, errno and return values. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim_fake.h"

#define MIB (1ull << 20)

static void test_context_sequence(void **state)
{
    (void)state;
    const struct shim_real *r = shim_fake_setup();
    int ctl = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    assert_true(ctl >= 0);
    uint32_t client, device, subdevice;
    fk_context(r, ctl, &client, &device, &subdevice);

    /* Vidmem: direct NVOS64, through XFER, and a size RM rounds up to 2 MiB. */
    uint32_t m1 = 0x1001, m2 = 0, m3 = 0x1003;
    assert_int_equal(fk_vidmem(r, ctl, client, device, &m1, 64 * MIB, false), 0);
    assert_int_equal(fk_vidmem(r, ctl, client, device, &m2, 16 * MIB, true), 0);
    assert_true(m2 != 0);
    assert_int_equal(fk_vidmem(r, ctl, client, subdevice, &m3, 1, false), 0);
    struct objtree_stats s = fk_stats();
    assert_int_equal(s.vidmem_now, 82 * MIB);
    assert_int_equal(s.vidmem_allocs, 3);

    /* VA space, a channel group with two channels (one via XFER + NVOS21). */
    uint32_t va = 0x2001, tsg = 0x2002, ch1 = 0x2003, ch2 = 0x2004;
    assert_int_equal(fk_alloc(r, ctl, client, device, &va, RM_CLASS_FERMI_VASPACE_A, NULL, 0,
                              true, false),
                     0);
    uint32_t tsg_params[5] = {0, 0, va, 1, 0};
    assert_int_equal(fk_alloc(r, ctl, client, device, &tsg, RM_CLASS_KEPLER_CHANNEL_GROUP_A,
                              tsg_params, sizeof tsg_params, true, false),
                     0);
    uint8_t ch_params[368] = {0};
    assert_int_equal(fk_alloc(r, ctl, client, tsg, &ch1, RM_CLASS_HOPPER_CHANNEL_GPFIFO_A,
                              ch_params, sizeof ch_params, true, false),
                     0);
    assert_int_equal(fk_alloc(r, ctl, client, tsg, &ch2, RM_CLASS_HOPPER_CHANNEL_GPFIFO_A,
                              ch_params, sizeof ch_params, false, true),
                     0);

    /* The doorbell: usermode object, MAP_MEMORY naming a /dev/nvidia0 fd, mmap of it. */
    int dev0;
    void *bell = fk_doorbell(r, ctl, client, subdevice, &dev0);

    s = fk_stats();
    assert_int_equal(s.live_clients, 1);
    assert_int_equal(s.live_channel_groups, 1);
    assert_int_equal(s.live_channels, 2);
    assert_int_equal(s.live_usermode, 1);
    assert_int_equal(s.doorbell_mappings, 1);
    assert_int_equal(s.live_doorbell_mappings, 1);

    /* Controls pass through and are answered by the driver. */
    uint32_t total, avail;
    assert_int_equal(fk_fb_info(r, ctl, client, subdevice, &total, &avail), 0);
    assert_int_equal(total, FAKE_FB_BYTES >> 10);
    assert_int_equal(avail, (FAKE_FB_BYTES - 82 * MIB) >> 10);

    /* Explicit free; the channel group's free takes its channels with it. */
    assert_int_equal(fk_free(r, ctl, client, m1), 0);
    assert_int_equal(fk_free(r, ctl, client, tsg), 0);
    s = fk_stats();
    assert_int_equal(s.vidmem_now, 18 * MIB);
    assert_int_equal(s.live_channel_groups, 0);
    assert_int_equal(s.live_channels, 0);

    assert_int_equal(shim_munmap(r, bell, 0x10000), 0);
    assert_int_equal(fk_stats().live_doorbell_mappings, 0);

    /* Closing the ctl file frees everything else, with no RM_FREE seen. */
    shim_close(r, dev0);
    shim_close(r, ctl);
    s = fk_stats();
    assert_int_equal(s.vidmem_now, 0);
    assert_int_equal(s.live_objects, 0);
    assert_int_equal(fakedrv_fb_free(0), FAKE_FB_BYTES);
}

static void test_refused_and_errors(void **state)
{
    (void)state;
    const struct shim_real *r = shim_fake_setup();
    int ctl = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    uint32_t client, device, subdevice;
    fk_context(r, ctl, &client, &device, &subdevice);
    uint32_t big = 0;
    assert_int_equal(fk_vidmem(r, ctl, client, device, &big, FAKE_FB_BYTES - 4 * MIB, false), 0);

    /* The fake GPU is full: status NV_ERR_NO_MEMORY, ioctl 0, nothing counted. */
    uint32_t more = 0;
    errno = 4321;
    assert_int_equal(fk_vidmem(r, ctl, client, device, &more, 8 * MIB, false),
                     RM_NV_ERR_NO_MEMORY);
    assert_int_equal(errno, 4321); /* a successful ioctl leaves errno alone */
    more = 0;
    assert_int_equal(fk_vidmem(r, ctl, client, device, &more, 8 * MIB, true),
                     RM_NV_ERR_NO_MEMORY);
    struct objtree_stats s = fk_stats();
    assert_int_equal(s.vidmem_now, FAKE_FB_BYTES - 4 * MIB);
    assert_int_equal(s.vidmem_allocs, 1);

    /* A framing error: -1 with the driver's errno, nothing counted. */
    uint8_t junk[40] = {0};
    errno = 0;
    assert_int_equal(shim_ioctl(r, ctl, RM_IOWR(RM_NR_ALLOC, sizeof junk), junk), -1);
    assert_int_equal(errno, EINVAL);
    struct rm_xfer_args x = {.cmd = RM_NR_ALLOC, .size = 20000, .ptr = (uintptr_t)junk};
    errno = 0;
    assert_int_equal(shim_ioctl(r, ctl, RM_IOWR(RM_NR_XFER, sizeof x), &x), -1);
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_int_equal(shim_ioctl(r, ctl, RM_IOWR(RM_NR_FREE, 16), NULL), -1);
    assert_int_equal(errno, EFAULT);

    /* An RM_CONTROL with an absurd params pointer is not read by the shim. */
    struct rm_control_args c = {.h_client = client, .h_object = subdevice, .cmd = 0x20800170,
                                .params = 0x10, .params_size = 0x7fffffff};
    assert_int_equal(shim_ioctl(r, ctl, RM_IOWR(RM_NR_CONTROL, sizeof c), &c), 0);

    /* A mmap the driver refuses: MAP_FAILED and its errno. */
    int dev0 = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidia0", O_RDWR, 0);
    errno = 0;
    assert_true(shim_mmap(r, true, NULL, 0x10000, PROT_WRITE, MAP_SHARED, dev0, 0) == MAP_FAILED);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(fk_stats().doorbell_mappings, 0);

    assert_int_equal(fk_free(r, ctl, client, big), 0);
    assert_int_equal(fk_stats().vidmem_now, 0);
    shim_close(r, dev0);
    shim_close(r, ctl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_context_sequence),
        cmocka_unit_test(test_refused_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
