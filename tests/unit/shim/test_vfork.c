/* test_vfork.c - a child running in its parent's memory (vfork) cannot move the
 * parent's charges.
 *
 * Found on the H200: PyTorch calling nvidia-smi through subprocess (vfork, then
 * every inherited descriptor closed before exec) was charged 0 MiB for 520 MiB
 * it held, because the child's closes were recorded in the state it shares
 * with its parent. Against a 64 MiB quota (KAIROS_MEM) on the fake driver, whose
 * files are pipes: a vfork child that closes the parent's /dev/nvidiactl
 * descriptor (close, close_range, closefrom, fclose after fdopen, dup2 over it)
 * leaves the parent's 48 MiB charged, so a second 48 MiB is refused and what the
 * shim charged equals what the driver holds; a vfork child's own allocation on
 * the shared descriptor is refused (EPERM) and the driver holds nothing more; a
 * fork child closing its copy (atfork handlers ran) changes nothing either.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim_fake.h"

#define MIB (1ull << 20)
#define ASK (48 * MIB)

static const struct shim_real *real;

static int setup(void **state)
{
    (void)state;
    real = fk_quota_setup("64M");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fk_quota_end();
    return 0;
}

struct parent_ctx {
    int fd;
    uint32_t client, device;
};

/* The parent: a context and 48 MiB on a fresh /dev/nvidiactl descriptor. */
static struct parent_ctx parent_holding_48(void)
{
    struct parent_ctx p;
    uint32_t subdevice, mem = 0;
    p.fd = shim_open(real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    assert_true(p.fd >= 0);
    fk_context(real, p.fd, &p.client, &p.device, &subdevice);
    assert_int_equal(fk_vidmem(real, p.fd, p.client, p.device, &mem, ASK, false), 0);
    assert_int_equal(fk_driver_holds(), ASK);
    assert_int_equal(fk_shim_charged(), ASK);
    return p;
}

static void assert_parent_still_charged(const struct parent_ctx *p)
{
    assert_int_equal(fk_driver_holds(), ASK);
    assert_int_equal(fk_shim_charged(), ASK);
    uint32_t mem = 0; /* 48 + 48 > 64: the first 48 MiB is still counted */
    assert_int_not_equal(fk_vidmem(real, p->fd, p->client, p->device, &mem, ASK, false), 0);
    assert_int_equal(fk_driver_holds(), ASK);
    assert_int_equal(fk_shim_charged(), fk_driver_holds());
}

enum child_close { BY_CLOSE, BY_CLOSE_RANGE, BY_CLOSEFROM, BY_FCLOSE, BY_DUP2 };

static void child_closes(int fd, enum child_close how)
{
    switch (how) {
    case BY_CLOSE:
        shim_close(real, fd);
        break;
    case BY_CLOSE_RANGE:
        shim_close_range(real, 3, ~0u, 0);
        break;
    case BY_CLOSEFROM:
        shim_closefrom(real, 3);
        break;
    case BY_FCLOSE: {
        FILE *f = fdopen(fd, "r+");
        if (f)
            shim_fclose(real, f);
        break;
    }
    case BY_DUP2:
        shim_dup2(real, 0, fd);
        break;
    }
}

static void vfork_child_closing(enum child_close how)
{
    struct parent_ctx p = parent_holding_48();
    pid_t pid = vfork();
    if (pid == 0) {
        child_closes(p.fd, how);
        _exit(0);
    }
    assert_true(pid > 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_parent_still_charged(&p);
    shim_close(real, p.fd);
    assert_int_equal(fk_driver_holds(), 0);
    assert_int_equal(fk_shim_charged(), 0);
}

static void test_vfork_close(void **state)
{
    (void)state;
    vfork_child_closing(BY_CLOSE);
}

static void test_vfork_close_range(void **state)
{
    (void)state;
    vfork_child_closing(BY_CLOSE_RANGE);
}

static void test_vfork_closefrom(void **state)
{
    (void)state;
    vfork_child_closing(BY_CLOSEFROM);
}

static void test_vfork_fclose(void **state)
{
    (void)state;
    vfork_child_closing(BY_FCLOSE);
}

static void test_vfork_dup2_over(void **state)
{
    (void)state;
    vfork_child_closing(BY_DUP2);
}

/* The child allocates on the shared descriptor: refused, nothing more held. */
static void test_vfork_child_allocation_refused(void **state)
{
    (void)state;
    struct parent_ctx p = parent_holding_48();
    shim_close(real, p.fd);
    p = parent_holding_48();
    static volatile uint32_t child_status;
    static volatile int child_errno;
    child_status = 0;
    pid_t pid = vfork();
    if (pid == 0) {
        uint32_t mem = 0;
        errno = 0;
        child_status = fk_vidmem(real, p.fd, p.client, p.device, &mem, 8 * MIB, false);
        child_errno = errno;
        _exit(0);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_int_equal(child_status, 0xffffffffu); /* the ioctl failed */
    assert_int_equal(child_errno, EPERM);
    assert_int_equal(fk_driver_holds(), ASK);
    assert_int_equal(fk_shim_charged(), ASK);
    shim_close(real, p.fd);
}

/* A forked child has its own copy of the state: its close is its own. */
static void test_fork_child_close(void **state)
{
    (void)state;
    struct parent_ctx p = parent_holding_48();
    pid_t pid = fork();
    if (pid == 0) {
        shim_close_range(real, 3, ~0u, 0);
        _exit(0);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_parent_still_charged(&p);
    shim_close(real, p.fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_vfork_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vfork_close_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vfork_closefrom, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vfork_fclose, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vfork_dup2_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vfork_child_allocation_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_child_close, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
