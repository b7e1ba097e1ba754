/* test_soft_end.c - the shim's SIGTERM handler of space mode (shim/soft_end.h), in a
 * child process each (a SIGTERM ends it): armed over SIG_DFL, a SIGTERM wakes the
 * shim's thread, which tells kairosd (here a sender that writes to a pipe) and, with no
 * SIGTERM from kairosd within KAIROS_ENDING_WAIT_MS, ends the process by SIGTERM
 * itself; a sender that fails ends it at once; an application's own handler, or
 * SIG_IGN, is never replaced; a child made without fork's handlers (a raw clone, as a
 * vfork child runs none) that catches the parent's handler ends at once, and does not
 * wake the parent's thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kairos/proto.h"
#include "shim/soft_end.h"

static int told[2]; /* the senders write a byte to told[1] */

static int send_ok(void)
{
    return write(told[1], "s", 1) == 1 ? 0 : -EIO;
}

static int send_fails(void)
{
    (void)!write(told[1], "f", 1);
    return -ENOTCONN;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs body in a child; returns its wait status. */
static int in_child(void (*body)(void))
{
    assert_int_equal(pipe(told), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(told[0]);
        body();
        _exit(0);
    }
    close(told[1]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static char told_byte(void)
{
    char c = 0;
    ssize_t n = read(told[0], &c, 1);
    close(told[0]);
    return n == 1 ? c : 0;
}

static void armed_then_sigterm(void)
{
    if (!soft_end_arm(send_ok))
        _exit(3);
    raise(SIGTERM);
    for (;;)
        pause(); /* the shim's thread ends this process */
}

static void test_a_sigterm_tells_kairosd_then_ends_the_process(void **state)
{
    (void)state;
    double t0 = now_s();
    int status = in_child(armed_then_sigterm);
    double took = now_s() - t0;
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGTERM);
    assert_int_equal(told_byte(), 's');
    /* nobody sent the second SIGTERM: the shim's own, after the wait (a lower bound
     * only: the machine's load can only make it later) */
    assert_true(took >= KAIROS_ENDING_WAIT_MS / 1000.0 * 0.9);
}

static void armed_sender_fails(void)
{
    if (!soft_end_arm(send_fails))
        _exit(3);
    raise(SIGTERM);
    for (;;)
        pause();
}

static void test_kairosd_out_of_reach_ends_it_at_once(void **state)
{
    (void)state;
    int status = in_child(armed_sender_fails);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGTERM);
    assert_int_equal(told_byte(), 'f');
}

static volatile sig_atomic_t own_ran;

static void own_handler(int sig)
{
    (void)sig;
    own_ran = 1;
}

static void own_handler_kept(void)
{
    signal(SIGTERM, own_handler);
    if (soft_end_arm(send_ok))
        _exit(3);
    raise(SIGTERM);
    _exit(own_ran ? 0 : 4);
}

static void ignored_kept(void)
{
    signal(SIGTERM, SIG_IGN);
    if (soft_end_arm(send_ok))
        _exit(3);
    raise(SIGTERM);
    _exit(0); /* still ignored */
}

static void test_the_applications_disposition_is_never_replaced(void **state)
{
    (void)state;
    int status = in_child(own_handler_kept);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(told_byte(), 0); /* nothing told: the pipe's end closed unwritten */
    status = in_child(ignored_kept);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(told_byte(), 0);
}

static void clone_child_catches_it(void)
{
    if (!soft_end_arm(send_ok))
        _exit(3);
    /* a raw clone runs no pthread_atfork handler, as a vfork child runs none */
    pid_t c = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL);
    if (c == 0) {
        raise(SIGTERM);
        for (;;)
            pause(); /* not reached: the handler raises SIGTERM again, default now */
    }
    int status;
    if (c < 0 || waitpid(c, &status, 0) != c)
        _exit(5);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGTERM)
        _exit(6);
    struct sigaction now;
    sigaction(SIGTERM, NULL, &now);
    _exit(now.sa_handler != SIG_DFL ? 0 : 7); /* the parent is still armed */
}

static void test_a_child_without_forks_handlers_ends_alone(void **state)
{
    (void)state;
    int status = in_child(clone_child_catches_it);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(told_byte(), 0); /* nothing told (without the pid check the clone
                                       * would not end: it posts to its own copy) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_sigterm_tells_kairosd_then_ends_the_process),
        cmocka_unit_test(test_kairosd_out_of_reach_ends_it_at_once),
        cmocka_unit_test(test_the_applications_disposition_is_never_replaced),
        cmocka_unit_test(test_a_child_without_forks_handlers_ends_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
