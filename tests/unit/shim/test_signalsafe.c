/* test_signalsafe.c - close() where POSIX promises only async-signal-safe calls
 * (issue 25, item 11): in a signal handler that interrupted the shim, and in the
 * child of a multithreaded process, under a 64 MiB quota (KAIROS_MEM) on the fake
 * driver.
 *
 * A handler that closes an NVIDIA descriptor holding 16 MiB while its thread holds
 * the shim's state lock deadlocked before (the lock is not recursive); one run while
 * the thread is inside an ioctl must be recorded once the ioctl leaves the shim.
 * Forks while another thread opens, allocates and closes through the shim, each
 * child closing the parent's descriptor and exec'ing, must all finish. Each case
 * runs in a child process watched with a deadline (a deadlock fails, it does not
 * hang the suite) and checks the ledger afterwards.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim/inherit.h"
#include "shim/state.h"
#include "shim_fake.h"

#define MIB (1ull << 20)
#define DEADLINE_S 60

static struct shim_real real;
static int ctl, victim;
static uint32_t client, device, subdevice;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs body in a child process; fails when it does not exit 0 within DEADLINE_S
 * (killed: a deadlock). */
static void in_child_by_deadline(int (*body)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(body());
    int status = 0;
    double deadline = now_s() + DEADLINE_S;
    pid_t got;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && now_s() < deadline) {
        struct timespec pause = {0, 5 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("did not finish within %d s: deadlocked", DEADLINE_S);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("child: %s %d (see its body's return codes)",
                 WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* 64 MiB quota; ctl with a context; victim: a second /dev/nvidiactl with a context
 * and 16 MiB. Returns 0 when all went through. */
static int set_up_victim(void)
{
    real = *fk_quota_setup("64M");
    real.fork = fork;
    ctl = shim_open(&real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    victim = shim_open(&real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    if (ctl < 0 || victim < 0)
        return 1;
    fk_context(&real, ctl, &client, &device, &subdevice);
    uint32_t c, d, s, h = 0;
    fk_context(&real, victim, &c, &d, &s);
    if (fk_vidmem(&real, victim, c, d, &h, 16 * MIB, false) != 0)
        return 2;
    return fk_shim_charged() == 16 * MIB && fk_driver_holds() == 16 * MIB ? 0 : 3;
}

static void close_victim(int sig)
{
    (void)sig;
    shim_close(&real, victim);
}

static void on_sigusr1(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigaction(SIGUSR1, &sa, NULL);
}

/* What is left once the victim is closed: nothing charged, nothing held, one file. */
static int victim_gone(void)
{
    uint32_t files = 0, descriptors = 0;
    state_fd_counts(&files, &descriptors);
    if (files != 1 || descriptors != 1)
        return 10;
    if (fk_driver_holds() != 0)
        return 11;
    return fk_shim_charged() == 0 ? 0 : 12;
}

static int handler_closes_under_state_lock(void)
{
    int rc = set_up_victim();
    if (rc)
        return rc;
    on_sigusr1(close_victim);
    state_lock(); /* as inside the shim's bookkeeping of a call */
    raise(SIGUSR1);
    state_unlock();
    /* recorded when a call leaves the shim: the next one */
    uint32_t total, avail;
    if (fk_fb_info(&real, ctl, client, subdevice, &total, &avail) != 0)
        return 4;
    return victim_gone();
}

/* The handler closes the victim while its thread holds the state lock. */
static void test_handler_closes_under_state_lock(void **state)
{
    (void)state;
    in_child_by_deadline(handler_closes_under_state_lock);
}

static void raise_once(void *ctx)
{
    (void)ctx;
    fakedrv_set_reply_hook(NULL, NULL);
    raise(SIGUSR1);
}

static int handler_closes_inside_ioctl(void)
{
    int rc = set_up_victim();
    if (rc)
        return rc;
    on_sigusr1(close_victim);
    fakedrv_set_reply_hook(raise_once, NULL);
    uint32_t h = 0;
    if (fk_vidmem(&real, ctl, client, device, &h, 8 * MIB, false) != 0)
        return 5;
    fakedrv_set_reply_hook(NULL, NULL);
    /* the victim's close was recorded as the allocation left the shim */
    if (fk_driver_holds() != 8 * MIB || fk_shim_charged() != 8 * MIB)
        return 6;
    if (fk_free(&real, ctl, client, h) != 0)
        return 7;
    return victim_gone();
}

/* The handler closes the victim while its thread is inside an ioctl of the shim. */
static void test_handler_closes_inside_ioctl(void **state)
{
    (void)state;
    in_child_by_deadline(handler_closes_inside_ioctl);
}

/* Another thread in the shim's open, allocation and close paths all the time. */
static atomic_bool churning;

static void *churn(void *unused)
{
    (void)unused;
    while (atomic_load(&churning)) {
        int fd = shim_open(&real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
        uint32_t c, d, s, h = 0;
        fk_context(&real, fd, &c, &d, &s);
        (void)fk_vidmem(&real, fd, c, d, &h, 2 * MIB, false);
        int twin = shim_dup(&real, fd);
        shim_close(&real, fd);
        shim_close(&real, twin);
    }
    return NULL;
}

#define FORKS 40

static int forks_while_closing(void)
{
    int rc = set_up_victim();
    if (rc)
        return rc;
    pthread_t t;
    atomic_store(&churning, true);
    if (pthread_create(&t, NULL, churn, NULL) != 0)
        return 20;
    int failed = 0;
    for (int i = 0; i < FORKS && !failed; i++) {
        pid_t pid = shim_fork(&real);
        if (pid == 0) { /* the child closes what it inherited, as before an exec */
            shim_close(&real, victim);
            shim_close(&real, ctl);
            shim_close_range(&real, 3, ~0u, 0);
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int status = 0;
        failed = pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
                 WEXITSTATUS(status) != 0;
    }
    atomic_store(&churning, false);
    pthread_join(t, NULL);
    if (failed)
        return 21;
    /* nothing escaped: what the driver holds is charged (the victim's 16 MiB, kept
     * charged since forked children shared its file) */
    if (fk_driver_holds() != 16 * MIB || fk_shim_charged() < fk_driver_holds())
        return 22;
    shim_close(&real, victim);
    return fk_driver_holds() == 0 ? 0 : 23;
}

/* Children forked while another thread is in the close path close and exec. */
static void test_fork_child_closes_while_thread_closes(void **state)
{
    (void)state;
    in_child_by_deadline(forks_while_closing);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handler_closes_under_state_lock),
        cmocka_unit_test(test_handler_closes_inside_ioctl),
        cmocka_unit_test(test_fork_child_closes_while_thread_closes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
