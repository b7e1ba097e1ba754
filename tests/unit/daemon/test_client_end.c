/* test_client_end.c - the victim of a signal that waits for its MPS client's end
 * (space/client_end.h) is pinned by a pidfd and checked against the start time its
 * caller knows: a process whose pid matches but whose start time does not (the pid
 * reused by another process) is refused and never signalled, as is a pid that is
 * gone; nothing waits then, nor without a loop to wait in. (The control daemon's side,
 * the bounds and the signal after the end: test_space.py's AuditKill and SoftEnd.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/base/loop.h"
#include "daemon/base/proc_stat.h"
#include "daemon/space/client_end.h"

static struct loop *loop;
static struct client_ends *ends;
static pid_t child;

static int setup(void **state)
{
    (void)state;
    assert_int_equal(loop_init(&loop), 0);
    assert_int_equal(client_ends_init(&ends, loop), 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        for (;;)
            pause();
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    client_ends_fini(ends);
    loop_fini(loop);
    return 0;
}

static struct client_end_order order(uint32_t pid, uint64_t start)
{
    return (struct client_end_order){.victim = {.pid = pid, .uid = (uint32_t)getuid()},
                                     .start = start, .tenant = "train", .domain = "infer",
                                     .gpu = -1, .what = "a test", .signal = SIGTERM};
}

/* Whether child is still running (not ended by a signal). */
static bool child_alive(void)
{
    int status;
    return waitpid(child, &status, WNOHANG) == 0;
}

static void test_a_reused_pid_is_refused_and_not_signalled(void **state)
{
    (void)state;
    uint32_t ppid;
    uint64_t start;
    assert_int_equal(proc_stat_read("/proc", (uint32_t)child, &ppid, &start), 0);
    struct client_end_order o = order((uint32_t)child, start + 1); /* another process's */
    char why[256] = "";
    assert_int_equal(client_ends_start(ends, NULL, "/proc", &o, why, sizeof why), -ESRCH);
    assert_non_null(strstr(why, "is gone"));
    assert_false(client_ends_pending(ends, (uint32_t)child));
    assert_true(child_alive());
}

static void test_a_pid_that_is_gone_is_refused(void **state)
{
    (void)state;
    pid_t gone = fork();
    assert_true(gone >= 0);
    if (gone == 0)
        _exit(0);
    assert_int_equal(waitpid(gone, NULL, 0), gone);
    struct client_end_order o = order((uint32_t)gone, 0);
    char why[256] = "";
    assert_int_equal(client_ends_start(ends, NULL, "/proc", &o, why, sizeof why), -ESRCH);
    assert_false(client_ends_pending(ends, (uint32_t)gone));
}

static void test_without_a_loop_nothing_starts(void **state)
{
    (void)state;
    struct client_ends *none;
    assert_int_equal(client_ends_init(&none, NULL), 0);
    struct client_end_order o = order((uint32_t)child, 0);
    char why[256] = "";
    assert_int_equal(client_ends_start(none, NULL, "/proc", &o, why, sizeof why), -EBUSY);
    assert_true(child_alive());
    client_ends_fini(none);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_reused_pid_is_refused_and_not_signalled, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_pid_that_is_gone_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_a_loop_nothing_starts, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
