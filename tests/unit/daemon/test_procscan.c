/* test_procscan.c - the /proc scan finds a process that holds a GPU's node open (and
 * one with only another node of the driver), with its pid, uid and command, also
 * when only a thread with a descriptor table of its own has it open; a process
 * without them is not found; the budget cuts a scan and says so; a pid
 * /proc does not have is described as absent.
 *
 * With "--bench N" (not a test): N sleeping processes with 16 descriptors each, and
 * the time one scan of /proc takes (docs/audit.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/base/procscan.h"

static char dir[32];
static struct procscan_nodes nodes;
static pid_t kids[16]; /* killed at teardown, also after a failed test */
static int n_kids;

/* In the child: nothing of the test's output pipes kept (the runner waits on them). */
static void quiet_child(void)
{
    int nul = open("/dev/null", O_WRONLY);
    dup2(nul, 1);
    dup2(nul, 2);
}

static pid_t remember(pid_t pid)
{
    if (n_kids < 16)
        kids[n_kids++] = pid;
    return pid;
}

/* A child that opens the given paths, names itself comm and waits to be killed. */
static pid_t holder(const char *comm, const char *a, const char *b)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        quiet_child();
        prctl(PR_SET_NAME, comm);
        if (a)
            (void)!open(a, O_RDONLY);
        if (b)
            (void)!open(b, O_RDONLY);
        (void)!write(p[1], "r", 1);
        for (;;)
            pause();
    }
    char c;
    close(p[1]);
    assert_int_equal(read(p[0], &c, 1), 1);
    close(p[0]);
    return remember(pid);
}

static const char *thread_path;
static int thread_ready[2];

static void *unshared_opener(void *arg)
{
    (void)arg;
    if (unshare(CLONE_FILES) == 0)
        (void)!open(thread_path, O_RDONLY);
    (void)!write(thread_ready[1], "r", 1);
    for (;;)
        pause();
    return NULL;
}

/* A child whose second thread opens path in a descriptor table of its own. */
static pid_t thread_holder(const char *path)
{
    assert_int_equal(pipe(thread_ready), 0);
    thread_path = path;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        quiet_child();
        prctl(PR_SET_NAME, "threadonly");
        pthread_t t;
        pthread_create(&t, NULL, unshared_opener, NULL);
        for (;;)
            pause();
    }
    char c;
    close(thread_ready[1]);
    assert_int_equal(read(thread_ready[0], &c, 1), 1);
    close(thread_ready[0]);
    return remember(pid);
}

static void reap(pid_t pid)
{
    for (int i = 0; i < n_kids; i++)
        if (kids[i] == pid)
            kids[i] = 0; /* reaped: its pid may be another process's soon */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/procscan-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    const char *names[] = {"nvidia0", "nvidia1", "nvidiactl"};
    for (int i = 0; i < 3; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        close(open(path, O_CREAT | O_WRONLY, 0644));
    }
    nodes.n = 2;
    snprintf(nodes.node[0], sizeof nodes.node[0], "%s/nvidia0", dir);
    snprintf(nodes.node[1], sizeof nodes.node[1], "%s/nvidia1", dir);
    snprintf(nodes.prefix, sizeof nodes.prefix, "%s/nvidia", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < n_kids; i++)
        if (kids[i] > 0)
            reap(kids[i]);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

static void test_openers_found_with_uid_and_command(void **state)
{
    (void)state;
    char ctl[128];
    snprintf(ctl, sizeof ctl, "%s/nvidiactl", dir);
    pid_t gpu1 = holder("rawalloc", nodes.node[1], ctl);
    pid_t ctl_only = holder("ctlonly", ctl, NULL);
    pid_t none = holder("bystander", "/dev/null", NULL);
    struct procscan s = {0};
    assert_int_equal(procscan_run(&s, "/proc", &nodes, 1u << 24), 0);
    assert_false(s.cut);
    assert_true(s.processes >= 3);
    const struct procscan_opener *o = procscan_find(&s, (uint32_t)gpu1);
    assert_non_null(o);
    assert_int_equal(o->gpus, 1u << 1);
    assert_true(o->driver);
    assert_string_equal(o->proc.comm, "rawalloc");
    assert_int_equal(o->proc.uid, getuid());
    assert_true(o->proc.exists);
    assert_false(o->proc.exiting);
    o = procscan_find(&s, (uint32_t)ctl_only);
    assert_non_null(o);
    assert_int_equal(o->gpus, 0);
    assert_true(o->driver);
    assert_null(procscan_find(&s, (uint32_t)none));
    reap(gpu1);
    reap(ctl_only);
    reap(none);
    procscan_fini(&s);
}

static void test_a_thread_with_its_own_descriptor_table_is_seen(void **state)
{
    (void)state;
    pid_t pid = thread_holder(nodes.node[0]);
    struct procscan s = {0};
    assert_int_equal(procscan_run(&s, "/proc", &nodes, 1u << 24), 0);
    const struct procscan_opener *o = procscan_find(&s, (uint32_t)pid);
    assert_non_null(o);
    assert_int_equal(o->gpus, 1u << 0);
    assert_string_equal(o->proc.comm, "threadonly");
    reap(pid);
    procscan_fini(&s);
}

static void test_budget_cuts_the_scan_and_says_so(void **state)
{
    (void)state;
    pid_t gpu0 = holder("rawalloc", nodes.node[0], NULL);
    struct procscan s = {0};
    assert_int_equal(procscan_run(&s, "/proc", &nodes, 0), 0);
    assert_true(s.cut);
    assert_null(procscan_find(&s, (uint32_t)gpu0));
    reap(gpu0);
    procscan_fini(&s);
}

static void test_describe_self_and_absent(void **state)
{
    (void)state;
    struct procscan_proc p;
    procscan_describe("/proc", (uint32_t)getpid(), &p);
    assert_true(p.exists);
    assert_int_equal(p.uid, getuid());
    assert_false(p.exiting);
    procscan_describe("/proc", 4194304u + 77, &p); /* above any pid_max */
    assert_false(p.exists);
    assert_string_equal(p.comm, "?");
    struct procscan s = {0};
    assert_int_equal(procscan_run(&s, "/nonexistent-proc", &nodes, 100), -2 /* -ENOENT */);
    procscan_fini(&s);
}

static int bench(int n)
{
    if (setup(NULL))
        return 1;
    pid_t *sleepers = calloc((size_t)n, sizeof *sleepers);
    for (int i = 0; i < n; i++) {
        sleepers[i] = fork();
        if (sleepers[i] == 0) {
            for (int k = 0; k < 16; k++)
                (void)!open("/dev/null", O_RDONLY);
            for (;;)
                pause();
        }
    }
    usleep(200000);
    struct procscan s = {0};
    struct timespec t0, t1;
    int runs = 20;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < runs; r++)
        procscan_run(&s, "/proc", &nodes, 1u << 24);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) /
                runs;
    printf("processes=%zu descriptors=%zu ms_per_scan=%.2f\n", s.processes, s.descriptors, ms);
    for (int i = 0; i < n; i++)
        reap(sleepers[i]);
    free(sleepers);
    procscan_fini(&s);
    teardown(NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--bench"))
        return bench(atoi(argv[2]));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openers_found_with_uid_and_command),
        cmocka_unit_test(test_a_thread_with_its_own_descriptor_table_is_seen),
        cmocka_unit_test(test_budget_cuts_the_scan_and_says_so),
        cmocka_unit_test(test_describe_self_and_absent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
