/* stop_forked_child.c - a test preload for kairosd: every child its fork() makes
 * stops itself with SIGSTOP before doing anything, so that a system test can hold
 * a metrics renderer (src/daemon/observe/metrics_snapshot.c) for as long as it likes and
 * check what kairosd does meanwhile (test_metrics.py). Not for anything else. */
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

pid_t fork(void)
{
    void *sym = dlsym(RTLD_NEXT, "fork");
    pid_t (*real_fork)(void) = NULL;
    memcpy(&real_fork, &sym, sizeof sym); /* dlsym's object pointer to a function's */
    pid_t pid = real_fork ? real_fork() : -1;
    if (pid == 0)
        raise(SIGSTOP);
    return pid;
}
