/* test_borrowed_vm.c - a child running in its parent's memory is told from one with
 * its own copy (src/shim/borrowed_vm.c), with kcmp and without it.
 *
 * The shim's state belongs to the process that loaded it or forked with atfork
 * handlers. A vfork or clone(CLONE_VM) child shares that memory and must be seen
 * as borrowing it; a raw clone without CLONE_VM (no atfork handler ran) has a copy
 * and must own it. Docker's default seccomp profile refuses kcmp: the tests run
 * each case a second time in a process whose seccomp filter makes kcmp fail with
 * EPERM, where a raw-clone child used to be taken for a vfork child (and refused
 * every allocation). Each child reports borrowed_vm_now() in its exit status.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shim/borrowed_vm.h"

enum { OWN_COPY = 10, BORROWED = 11 };

static int verdict(void)
{
    return borrowed_vm_now() ? BORROWED : OWN_COPY;
}

static int status_of(pid_t pid)
{
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

static int vfork_child(void)
{
    pid_t pid = vfork();
    if (pid == 0)
        _exit(verdict());
    return status_of(pid);
}

static char clone_stack[64 * 1024] __attribute__((aligned(16)));

static int clone_entry(void *arg)
{
    (void)arg;
    syscall(SYS_exit_group, verdict()); /* not _exit: ASan frowns on noreturn here */
    return 0;
}

static int clone_vm_child(void)
{
    pid_t pid = clone(clone_entry, clone_stack + sizeof clone_stack,
                      CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
    return status_of(pid);
}

/* Like glibc's _Fork: a copy of memory, no atfork handler. */
static int raw_clone_child(void)
{
    long pid = syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
    if (pid == 0) {
        int v = verdict();
        /* the copy now owns its state: asked again, it is not borrowed */
        syscall(SYS_exit_group, v == OWN_COPY && !borrowed_vm_now() ? OWN_COPY : BORROWED);
    }
    return status_of((pid_t)pid);
}

static int fork_child(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(verdict());
    return status_of(pid);
}

/* kcmp fails with EPERM from now on in this process and its children. */
static void refuse_kcmp(void)
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_kcmp, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        _exit(99);
    if (syscall(SYS_kcmp, getpid(), getpid(), 0 /* KCMP_FILE */, 0, 0) != -1 || errno != EPERM)
        _exit(98);
}

/* Runs child_of in a fresh process (with kcmp refused when asked): its verdict. */
static int in_fresh_process(int (*child_of)(void), bool without_kcmp)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (without_kcmp)
            refuse_kcmp();
        _exit(child_of());
    }
    return status_of(pid);
}

static void test_vfork_child_borrows(void **state)
{
    (void)state;
    assert_int_equal(in_fresh_process(vfork_child, false), BORROWED);
    assert_int_equal(in_fresh_process(vfork_child, true), BORROWED);
}

static void test_clone_vm_child_borrows(void **state)
{
    (void)state;
    assert_int_equal(in_fresh_process(clone_vm_child, false), BORROWED);
    assert_int_equal(in_fresh_process(clone_vm_child, true), BORROWED);
}

static void test_raw_clone_child_owns_its_copy(void **state)
{
    (void)state;
    assert_int_equal(in_fresh_process(raw_clone_child, false), OWN_COPY);
    assert_int_equal(in_fresh_process(raw_clone_child, true), OWN_COPY);
}

static void test_fork_child_owns_its_copy(void **state)
{
    (void)state;
    assert_int_equal(in_fresh_process(fork_child, false), OWN_COPY);
    assert_int_equal(in_fresh_process(fork_child, true), OWN_COPY);
}

static void test_the_owner_does_not_borrow(void **state)
{
    (void)state;
    assert_false(borrowed_vm_now());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_owner_does_not_borrow),
        cmocka_unit_test(test_vfork_child_borrows),
        cmocka_unit_test(test_clone_vm_child_borrows),
        cmocka_unit_test(test_raw_clone_child_owns_its_copy),
        cmocka_unit_test(test_fork_child_owns_its_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
