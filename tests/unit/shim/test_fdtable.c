/* test_fdtable.c - descriptor classification and dup/close semantics of the shim. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim/fdtable.h"
#include "shim/state.h"
#include "shim_fake.h"

static void test_classify_path(void **state)
{
    (void)state;
    int minor;
    assert_int_equal(fdtable_classify_path(AT_FDCWD, "/dev/nvidiactl", &minor), RM_NODE_CTL);
    assert_int_equal(minor, 255);
    assert_int_equal(fdtable_classify_path(AT_FDCWD, "/dev/nvidia0", &minor), RM_NODE_DEV);
    assert_int_equal(minor, 0);
    assert_int_equal(fdtable_classify_path(AT_FDCWD, "/dev/nvidia12", &minor), RM_NODE_DEV);
    assert_int_equal(minor, 12);
    assert_int_equal(fdtable_classify_path(AT_FDCWD, "/dev/nvidia-uvm", &minor), RM_NODE_UVM);
    assert_int_equal(fdtable_classify_path(3, "/dev/nvidia-uvm-tools", &minor), RM_NODE_UVM);
    assert_int_equal(fdtable_classify_path(AT_FDCWD, "/dev/nvidia-modeset", &minor),
                     RM_NODE_NONE);
    assert_int_equal(fdtable_classify_path(AT_FDCWD, "/dev/nvidiactlx", &minor), RM_NODE_NONE);
    assert_int_equal(fdtable_classify_path(AT_FDCWD, "/dev/nvidia01", &minor), RM_NODE_NONE);
    assert_int_equal(fdtable_classify_path(AT_FDCWD, "/dev/nvidia999", &minor), RM_NODE_NONE);
    assert_int_equal(fdtable_classify_path(AT_FDCWD, "nvidiactl", &minor), RM_NODE_NONE);
    assert_int_equal(fdtable_classify_path(AT_FDCWD, NULL, &minor), RM_NODE_NONE);
}

static void test_open_and_lazy(void **state)
{
    (void)state;
    const struct shim_real *r = shim_fake_setup();
    struct fdt_info fi;
    int ctl = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    assert_true(ctl >= 0);
    assert_int_equal(fdtable_get(ctl, &fi), FDT_NVIDIA);
    assert_int_equal(fi.node, RM_NODE_CTL);
    int dev = shim_open(r, SHIM_OPENAT, AT_FDCWD, "/dev/nvidia1", O_RDWR, 0);
    assert_int_equal(fdtable_get(dev, &fi), FDT_NVIDIA);
    assert_int_equal(fi.node, RM_NODE_DEV);
    assert_int_equal(fi.minor, 1);

    /* Not NVIDIA: unknown until first used, then cached as other; errno is the kernel's. */
    int null = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/null", O_RDWR, 0);
    assert_int_equal(fdtable_get(null, NULL), FDT_UNKNOWN);
    struct termios tio;
    errno = 0;
    assert_int_equal(shim_ioctl(r, null, TCGETS, &tio), -1);
    assert_int_equal(errno, ENOTTY);
    assert_int_equal(fdtable_get(null, NULL), FDT_OTHER);
    assert_int_equal(shim_close(r, null), 0);
    assert_int_equal(fdtable_get(null, NULL), FDT_UNKNOWN);

    /* Opened behind the shim's back: classified at its first ioctl (fstat, readlink). */
    int hidden = fakedrv_open("/dev/nvidiactl", O_RDWR);
    int hidden_uvm = fakedrv_open("/dev/nvidia-uvm", O_RDWR);
    uint32_t client;
    assert_int_equal(fk_client(r, hidden, &client), 0);
    assert_int_equal(fdtable_get(hidden, &fi), FDT_NVIDIA);
    assert_int_equal(fi.node, RM_NODE_CTL);
    assert_int_equal(fk_stats().live_clients, 1);
    uint64_t init[2] = {0, 0xdead};
    assert_int_equal(shim_ioctl(r, hidden_uvm, 0x30000001u, init), 0);
    assert_int_equal(fdtable_get(hidden_uvm, &fi), FDT_NVIDIA);
    assert_int_equal(fi.node, RM_NODE_UVM);

    assert_int_equal(shim_close(r, hidden), 0);
    assert_int_equal(fk_stats().live_clients, 0);
    shim_close(r, hidden_uvm);
    shim_close(r, dev);
    shim_close(r, ctl);
    uint32_t files, fds;
    state_fd_counts(&files, &fds);
    assert_int_equal(files, 0);
    assert_int_equal(fds, 0);
}

static void test_dup_close(void **state)
{
    (void)state;
    const struct shim_real *r = shim_fake_setup();
    int ctl = shim_open(r, SHIM_OPEN64, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    uint32_t client, device, subdevice;
    fk_context(r, ctl, &client, &device, &subdevice);
    int copy = shim_dup(r, ctl);
    assert_true(copy >= 0);
    struct fdt_info a, b;
    assert_int_equal(fdtable_get(ctl, &a), FDT_NVIDIA);
    assert_int_equal(fdtable_get(copy, &b), FDT_NVIDIA);
    assert_true(a.file_id == b.file_id);

    /* Closing one of two descriptors frees nothing; the dup still works. */
    assert_int_equal(shim_close(r, ctl), 0);
    assert_int_equal(fk_stats().live_clients, 1);
    uint32_t mem = 0;
    assert_int_equal(fk_vidmem(r, copy, client, device, &mem, 4u << 20, false), 0);
    assert_int_equal(fk_stats().vidmem_now, 4u << 20);

    /* A descriptor from F_DUPFD_CLOEXEC, far above 1024, shares the file too. */
    int high = shim_fcntl(r, false, copy, F_DUPFD_CLOEXEC, 5000, NULL);
    assert_true(high >= 5000);
    assert_int_equal(fdtable_get(high, &b), FDT_NVIDIA);
    assert_true(a.file_id == b.file_id);
    assert_int_equal(shim_close(r, copy), 0);
    assert_int_equal(fk_stats().live_clients, 1);

    /* The last one frees the client and its memory. */
    assert_int_equal(shim_close(r, high), 0);
    struct objtree_stats s = fk_stats();
    assert_int_equal(s.live_clients, 0);
    assert_int_equal(s.vidmem_now, 0);
    assert_int_equal(fakedrv_live_clients(), 0);
}

static void test_dup2_over_nvidia(void **state)
{
    (void)state;
    const struct shim_real *r = shim_fake_setup();
    int a = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    int b = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    uint32_t ca, cb, dev, sub, mem = 0;
    fk_context(r, a, &ca, &dev, &sub);
    fk_context(r, b, &cb, &dev, &sub);
    assert_int_equal(fk_vidmem(r, b, cb, dev, &mem, 2u << 20, false), 0);
    assert_int_equal(fk_stats().live_clients, 2);

    /* dup2 of a plain file onto b closes b's file: its client goes. */
    int null = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/null", O_RDWR, 0);
    assert_int_equal(shim_dup2(r, null, b), b);
    assert_int_equal(fdtable_get(b, NULL), FDT_OTHER); /* classified with null */
    struct objtree_stats s = fk_stats();
    assert_int_equal(s.live_clients, 1);
    assert_int_equal(s.vidmem_now, 0);

    /* dup3 of a onto b: b now shares a's file; dup2(a, a) changes nothing. */
    assert_int_equal(shim_dup3(r, a, b, O_CLOEXEC), b);
    struct fdt_info fa, fb;
    assert_int_equal(fdtable_get(b, &fb), FDT_NVIDIA);
    assert_int_equal(fdtable_get(a, &fa), FDT_NVIDIA);
    assert_true(fa.file_id == fb.file_id);
    assert_int_equal(shim_dup2(r, a, a), a);
    assert_int_equal(shim_close(r, a), 0);
    assert_int_equal(fk_stats().live_clients, 1);
    assert_int_equal(shim_close(r, b), 0);
    assert_int_equal(fk_stats().live_clients, 0);
    shim_close(r, null);

    /* Failures are the real call's, errno included. */
    errno = 0;
    assert_int_equal(shim_dup2(r, 987654, 5), -1);
    assert_int_equal(errno, EBADF);
    errno = 0;
    assert_int_equal(shim_close(r, 987654), -1);
    assert_int_equal(errno, EBADF);
    errno = 0;
    assert_int_equal(shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidia7", O_RDWR, 0), -1);
    assert_int_equal(errno, ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify_path),
        cmocka_unit_test(test_open_and_lazy),
        cmocka_unit_test(test_dup_close),
        cmocka_unit_test(test_dup2_over_nvidia),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
