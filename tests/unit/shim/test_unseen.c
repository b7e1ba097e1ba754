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
#include "quota_fixture.h"
#include "shim/dispatch.h"
#include "shim/state.h"
#include "shim_fake.h"

enum closer { BY_CLOSE_RANGE, BY_CLOSEFROM, BY_FCLOSE };

/* Eight rounds of: open, allocate 48 MiB, close the unusual way. Each round
 * must be granted: the previous round's memory was freed by the driver. */
static void rounds_closed_by(void **state)
{
    enum closer how = *(enum closer *)*state;
    for (int i = 0; i < 8; i++) {
        FILE *fp = NULL;
        int fd;
        if (how == BY_FCLOSE) {
            fp = shim_fopen(qf_real, false, "/dev/nvidiactl", "r+");
            assert_non_null(fp);
            fd = fileno(fp);
        } else {
            fd = qf_open_ctl();
        }
        assert_true(qf_allocate_48(fd, NULL, NULL));
        if (how == BY_CLOSE_RANGE)
            assert_int_equal(shim_close_range(qf_real, (unsigned)fd, (unsigned)fd, 0), 0);
        else if (how == BY_CLOSEFROM)
            shim_closefrom(qf_real, fd);
        else
            assert_int_equal(shim_fclose(qf_real, fp), 0);
        assert_int_equal(fk_driver_holds(), 0);
        qf_assert_ledger_exact();
    }
}

/* CLOSE_RANGE_CLOEXEC closes nothing now: the memory stays held and charged. */
static void test_close_range_cloexec_keeps(void **state)
{
    (void)state;
    int fd = qf_open_ctl();
    assert_true(qf_allocate_48(fd, NULL, NULL));
    assert_int_equal(shim_close_range(qf_real, (unsigned)fd, (unsigned)fd, 1 << 2), 0);
    assert_int_equal(fk_driver_holds(), QF_ASK);
    qf_assert_ledger_exact();
    assert_false(qf_allocate_48(fd, NULL, NULL));
    qf_close_releases_all(fd);
}

/* Makes the lowest free descriptor number one the shim caches as "not NVIDIA"
 * and closes it behind the shim's back; returns the number. */
static int stale_other_number(void)
{
    int fd = shim_open(qf_real, SHIM_OPEN, AT_FDCWD, "/dev/null", O_RDWR, 0);
    assert_true(fd >= 0);
    int n;
    (void)shim_ioctl(qf_real, fd, FIONREAD, &n); /* classified: not NVIDIA */
    syscall(SYS_close, fd);                      /* unseen */
    return fd;
}

static void eight_allocations_one_granted(int fd)
{
    int granted = 0;
    for (int i = 0; i < 8; i++)
        granted += qf_allocate_48(fd, NULL, NULL);
    assert_int_equal(granted, 1);
    assert_int_equal(fk_driver_holds(), QF_ASK);
}

static void test_fopen_onto_stale_number(void **state)
{
    (void)state;
    int stale = stale_other_number();
    FILE *fp = shim_fopen(qf_real, false, "/dev/nvidiactl", "r+");
    assert_non_null(fp);
    assert_int_equal(fileno(fp), stale);
    eight_allocations_one_granted(fileno(fp));
    assert_int_equal(shim_fclose(qf_real, fp), 0);
    assert_int_equal(fk_driver_holds(), 0);
    qf_assert_ledger_exact();
}

/* An open the shim never sees (as openat2 through syscall()). */
static void test_unseen_open_onto_stale_number(void **state)
{
    (void)state;
    int stale = stale_other_number();
    int fd = qf_real->open("/dev/nvidiactl", O_RDWR);
    assert_int_equal(fd, stale);
    eight_allocations_one_granted(fd);
    qf_close_releases_all(fd);
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
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
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
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t n = through_shim ? shim_recvmsg(qf_real, sock, &m, 0) : qf_real->recvmsg(sock, &m, 0);
    assert_int_equal(n, 1);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    assert_non_null(c);
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

/* The case is through_shim: the receiver's recvmsg is the shim's, or a raw one. */
static void scm_rights_onto_stale_number(void **state)
{
    bool through_shim = *(bool *)*state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int ctl = qf_real->open("/dev/nvidiactl", O_RDWR); /* the sender's, unseen */
    assert_true(ctl >= 0);
    send_fd(sv[0], ctl);
    syscall(SYS_close, ctl);
    int stale = stale_other_number();
    int got = receive_fd(sv[1], through_shim);
    assert_int_equal(got, stale);
    eight_allocations_one_granted(got);
    qf_close_releases_all(got);
    close(sv[0]);
    close(sv[1]);
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
        int fd = qf_open_ctl();
        granted += qf_allocate_48(fd, NULL, NULL);
        dups[i] = qf_real->dup(fd); /* unseen */
        assert_true(dups[i] >= 0);
        assert_int_equal(shim_close(qf_real, fd), 0);
        qf_assert_ledger_exact();
    }
    assert_int_equal(granted, 1);
    assert_int_equal(fk_driver_holds(), QF_ASK);
    for (int i = 0; i < 8; i++)
        assert_int_equal(shim_close(qf_real, dups[i]), 0);
    assert_int_equal(fk_driver_holds(), 0);
    qf_assert_ledger_exact();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        QF_CASE(rounds_closed_by, enum closer, BY_CLOSE_RANGE),
        QF_CASE(rounds_closed_by, enum closer, BY_CLOSEFROM),
        QF_CASE(rounds_closed_by, enum closer, BY_FCLOSE),
        QF_TEST(test_close_range_cloexec_keeps),
        QF_TEST(test_fopen_onto_stale_number),
        QF_TEST(test_unseen_open_onto_stale_number),
        QF_CASE(scm_rights_onto_stale_number, bool, true),
        QF_CASE(scm_rights_onto_stale_number, bool, false),
        QF_TEST(test_raw_dup_then_close_keeps_the_charge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
