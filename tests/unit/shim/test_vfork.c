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
#include "quota_fixture.h"
#include "shim/dispatch.h"
#include "shim_fake.h"

struct parent_ctx {
    int fd;
    uint32_t client, device;
};

/* The parent: a context and 48 MiB on a fresh /dev/nvidiactl descriptor. */
static struct parent_ctx parent_holding_48(void)
{
    struct parent_ctx p;
    p.fd = qf_open_ctl();
    assert_true(qf_allocate_48(p.fd, &p.client, &p.device));
    assert_int_equal(fk_driver_holds(), QF_ASK);
    assert_int_equal(fk_shim_charged(), QF_ASK);
    return p;
}

static void assert_parent_still_charged(const struct parent_ctx *p)
{
    assert_int_equal(fk_driver_holds(), QF_ASK);
    assert_int_equal(fk_shim_charged(), QF_ASK);
    uint32_t mem = 0; /* 48 + 48 > 64: the first 48 MiB is still counted */
    assert_int_not_equal(fk_vidmem(qf_real, p->fd, p->client, p->device, &mem, QF_ASK, false), 0);
    assert_int_equal(fk_driver_holds(), QF_ASK);
    qf_assert_ledger_exact();
}

enum child_close { BY_CLOSE, BY_CLOSE_RANGE, BY_CLOSEFROM, BY_FCLOSE, BY_DUP2 };

static void child_closes(int fd, enum child_close how)
{
    switch (how) {
    case BY_CLOSE:
        shim_close(qf_real, fd);
        break;
    case BY_CLOSE_RANGE:
        shim_close_range(qf_real, 3, ~0u, 0);
        break;
    case BY_CLOSEFROM:
        shim_closefrom(qf_real, 3);
        break;
    case BY_FCLOSE: {
        FILE *f = fdopen(fd, "r+");
        if (f)
            shim_fclose(qf_real, f);
        break;
    }
    case BY_DUP2:
        shim_dup2(qf_real, 0, fd);
        break;
    }
}

static void vfork_child_closing(void **state)
{
    enum child_close how = *(enum child_close *)*state;
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
    qf_close_releases_all(p.fd);
}

/* The child allocates on the shared descriptor: refused, nothing more held. */
static void test_vfork_child_allocation_refused(void **state)
{
    (void)state;
    struct parent_ctx p = parent_holding_48();
    shim_close(qf_real, p.fd);
    p = parent_holding_48();
    static volatile uint32_t child_status;
    static volatile int child_errno;
    child_status = 0;
    pid_t pid = vfork();
    if (pid == 0) {
        uint32_t mem = 0;
        errno = 0;
        child_status = fk_vidmem(qf_real, p.fd, p.client, p.device, &mem, 8 * QF_MIB, false);
        child_errno = errno;
        _exit(0);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_int_equal(child_status, 0xffffffffu); /* the ioctl failed */
    assert_int_equal(child_errno, EPERM);
    assert_int_equal(fk_driver_holds(), QF_ASK);
    assert_int_equal(fk_shim_charged(), QF_ASK);
    qf_close_releases_all(p.fd);
}

/* A forked child has its own copy of the state: its close is its own. */
static void test_fork_child_close(void **state)
{
    (void)state;
    struct parent_ctx p = parent_holding_48();
    pid_t pid = fork();
    if (pid == 0) {
        shim_close_range(qf_real, 3, ~0u, 0);
        _exit(0);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_parent_still_charged(&p);
    qf_close_releases_all(p.fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        QF_CASE(vfork_child_closing, enum child_close, BY_CLOSE),
        QF_CASE(vfork_child_closing, enum child_close, BY_CLOSE_RANGE),
        QF_CASE(vfork_child_closing, enum child_close, BY_CLOSEFROM),
        QF_CASE(vfork_child_closing, enum child_close, BY_FCLOSE),
        QF_CASE(vfork_child_closing, enum child_close, BY_DUP2),
        QF_TEST(test_vfork_child_allocation_refused),
        QF_TEST(test_fork_child_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
