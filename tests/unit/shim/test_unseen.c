/* test_unseen.c - closes and opens the shim does not see as close() and open().
 *
 * Against a 64 MiB quota (KAIROS_MEM) on the fake driver, whose files are pipes
 * so the driver itself frees a file's memory at its last close however it
 * happens: close_range, closefrom and fclose release what they close (no false
 * refusal when the memory is asked again), CLOSE_RANGE_CLOEXEC keeps it; and a
 * /dev/nvidiactl descriptor that arrives where the shim cached "not NVIDIA" -
 * through fopen, SCM_RIGHTS (recvmsg seen, or a raw recvmsg unseen), or an open
 * the shim never saw (openat2 by syscall) - has every allocation counted:
 * 8 x 48 MiB under 64 MiB grants one; and a raw dup (unseen) that outlives
 * the close of its original keeps the memory charged. After every step what the
 * shim charged equals what the driver holds.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim/state.h"
#include "shim_fake.h"

#define MIB (1ull << 20)
#define QUOTA (64 * MIB)
#define ASK (48 * MIB)

static const struct shim_real *real;

static void assert_ledger_exact(void)
{
    assert_int_equal(fk_shim_charged(), fk_driver_holds());
    assert_true(fk_driver_holds() <= QUOTA);
}

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

/* A context and one 48 MiB allocation on fd; true when granted. */
static bool allocate_on(int fd)
{
    uint32_t client, device, subdevice, mem = 0;
    fk_context(real, fd, &client, &device, &subdevice);
    bool granted = fk_vidmem(real, fd, client, device, &mem, ASK, false) == 0;
    assert_ledger_exact();
    return granted;
}

static int open_ctl(void)
{
    int fd = shim_open(real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    assert_true(fd >= 0);
    return fd;
}

enum closer { BY_CLOSE_RANGE, BY_CLOSEFROM, BY_FCLOSE };

/* Eight rounds of: open, allocate 48 MiB, close the unusual way. Each round
 * must be granted: the previous round's memory was freed by the driver. */
static void rounds_closed_by(enum closer how)
{
    for (int i = 0; i < 8; i++) {
        FILE *fp = NULL;
        int fd;
        if (how == BY_FCLOSE) {
            fp = shim_fopen(real, false, "/dev/nvidiactl", "r+");
            assert_non_null(fp);
            fd = fileno(fp);
        } else {
            fd = open_ctl();
        }
        assert_true(allocate_on(fd));
        if (how == BY_CLOSE_RANGE)
            assert_int_equal(shim_close_range(real, (unsigned)fd, (unsigned)fd, 0), 0);
        else if (how == BY_CLOSEFROM)
            shim_closefrom(real, fd);
        else
            assert_int_equal(shim_fclose(real, fp), 0);
        assert_int_equal(fk_driver_holds(), 0);
        assert_ledger_exact();
    }
}

static void test_close_range_releases(void **state)
{
    (void)state;
    rounds_closed_by(BY_CLOSE_RANGE);
}

static void test_closefrom_releases(void **state)
{
    (void)state;
    rounds_closed_by(BY_CLOSEFROM);
}

static void test_fclose_releases(void **state)
{
    (void)state;
    rounds_closed_by(BY_FCLOSE);
}

/* CLOSE_RANGE_CLOEXEC closes nothing now: the memory stays held and charged. */
static void test_close_range_cloexec_keeps(void **state)
{
    (void)state;
    int fd = open_ctl();
    assert_true(allocate_on(fd));
    assert_int_equal(shim_close_range(real, (unsigned)fd, (unsigned)fd, 1 << 2), 0);
    assert_int_equal(fk_driver_holds(), ASK);
    assert_ledger_exact();
    assert_false(allocate_on(fd));
    assert_int_equal(shim_close(real, fd), 0);
    assert_int_equal(fk_driver_holds(), 0);
    assert_ledger_exact();
}

/* Makes the lowest free descriptor number one the shim caches as "not NVIDIA"
 * and closes it behind the shim's back; returns the number. */
static int stale_other_number(void)
{
    int fd = shim_open(real, SHIM_OPEN, AT_FDCWD, "/dev/null", O_RDWR, 0);
    assert_true(fd >= 0);
    int n;
    (void)shim_ioctl(real, fd, FIONREAD, &n); /* classified: not NVIDIA */
    syscall(SYS_close, fd);                  /* unseen */
    return fd;
}

static void eight_allocations_one_granted(int fd)
{
    int granted = 0;
    for (int i = 0; i < 8; i++)
        granted += allocate_on(fd);
    assert_int_equal(granted, 1);
    assert_int_equal(fk_driver_holds(), ASK);
}

static void test_fopen_onto_stale_number(void **state)
{
    (void)state;
    int stale = stale_other_number();
    FILE *fp = shim_fopen(real, false, "/dev/nvidiactl", "r+");
    assert_non_null(fp);
    assert_int_equal(fileno(fp), stale);
    eight_allocations_one_granted(fileno(fp));
    assert_int_equal(shim_fclose(real, fp), 0);
    assert_int_equal(fk_driver_holds(), 0);
    assert_ledger_exact();
}

/* An open the shim never sees (as openat2 through syscall()). */
static void test_unseen_open_onto_stale_number(void **state)
{
    (void)state;
    int stale = stale_other_number();
    int fd = real->open("/dev/nvidiactl", O_RDWR);
    assert_int_equal(fd, stale);
    eight_allocations_one_granted(fd);
    assert_int_equal(shim_close(real, fd), 0);
    assert_int_equal(fk_driver_holds(), 0);
    assert_ledger_exact();
}

static void send_fd(int sock, int fd)
{
    char data = 'x';
    struct iovec iov = {.iov_base = &data, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    assert_int_equal(sendmsg(sock, &m, 0), 1);
}

static int receive_fd(int sock, bool through_shim)
{
    char data;
    struct iovec iov = {.iov_base = &data, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    ssize_t n = through_shim ? shim_recvmsg(real, sock, &m, 0) : real->recvmsg(sock, &m, 0);
    assert_int_equal(n, 1);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    assert_non_null(c);
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

static void scm_rights_onto_stale_number(bool through_shim)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int ctl = real->open("/dev/nvidiactl", O_RDWR); /* the sender's, unseen */
    assert_true(ctl >= 0);
    send_fd(sv[0], ctl);
    syscall(SYS_close, ctl);
    int stale = stale_other_number();
    int got = receive_fd(sv[1], through_shim);
    assert_int_equal(got, stale);
    eight_allocations_one_granted(got);
    assert_int_equal(shim_close(real, got), 0);
    assert_int_equal(fk_driver_holds(), 0);
    assert_ledger_exact();
    close(sv[0]);
    close(sv[1]);
}

static void test_scm_rights_seen(void **state)
{
    (void)state;
    scm_rights_onto_stale_number(true);
}

static void test_scm_rights_unseen(void **state)
{
    (void)state;
    scm_rights_onto_stale_number(false);
}

/* The raw-dup attack: each round opens, takes the whole quota, dups the
 * descriptor behind the shim's back and closes the original. The driver keeps
 * the memory (the dup holds the file), so the shim must keep charging it: the
 * second round is refused, and the charge goes when the dup is closed. */
static void test_raw_dup_then_close_keeps_the_charge(void **state)
{
    (void)state;
    int dups[8];
    int granted = 0;
    for (int i = 0; i < 8; i++) {
        int fd = open_ctl();
        granted += allocate_on(fd);
        dups[i] = real->dup(fd); /* unseen */
        assert_true(dups[i] >= 0);
        assert_int_equal(shim_close(real, fd), 0);
        assert_ledger_exact();
    }
    assert_int_equal(granted, 1);
    assert_int_equal(fk_driver_holds(), ASK);
    for (int i = 0; i < 8; i++)
        assert_int_equal(shim_close(real, dups[i]), 0);
    assert_int_equal(fk_driver_holds(), 0);
    assert_ledger_exact();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_close_range_releases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_closefrom_releases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fclose_releases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_range_cloexec_keeps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fopen_onto_stale_number, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unseen_open_onto_stale_number, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scm_rights_seen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scm_rights_unseen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_dup_then_close_keeps_the_charge, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
