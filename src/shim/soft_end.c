/* soft_end.c - SIGTERM to a fault domain's MPS client, after its client is ended (see
 * soft_end.h). */
#include "shim/soft_end.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kairos/proto.h"
#include "shim/own_thread.h"
#include "shim/settings.h"

static sem_t se_wake;                /* posted by the handler */
static atomic_int se_armed_pid;      /* the process whose handler this is; 0: none */
static soft_end_sender *se_send;
static pthread_once_t se_once = PTHREAD_ONCE_INIT;

static void default_back(void)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGTERM, &dfl, NULL);
}

/* Async-signal-safe only: sigaction, getpid, raise, sem_post. */
static void on_sigterm(int sig)
{
    int saved = errno;
    default_back(); /* a second SIGTERM, or kairosd's, ends the process */
    if (getpid() == atomic_load(&se_armed_pid))
        sem_post(&se_wake);
    else
        raise(sig); /* a vfork child's: pending until the handler returns, then its end */
    errno = saved;
}

static void say(const char *what)
{
    if (settings_get()->log_stderr)
        dprintf(2, "kairos[%d]: SIGTERM: %s\n", (int)getpid(), what);
}

/* Waits for kairosd's SIGTERM after ENDING, at most KAIROS_ENDING_WAIT_MS: a bounded
 * wait for this process's own end, nothing to poll. */
static void wait_for_the_end(void)
{
    struct timespec left = {.tv_sec = KAIROS_ENDING_WAIT_MS / 1000,
                            .tv_nsec = (KAIROS_ENDING_WAIT_MS % 1000) * 1000000L};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
}

/* The shim's thread (own_thread.h: every signal blocked). */
static void *await_sigterm(void *unused)
{
    (void)unused;
    while (sem_wait(&se_wake) != 0) {
    }
    int rc = se_send ? se_send() : -ENOTCONN;
    if (rc == 0) {
        say("asked kairosd to end this process's MPS client first");
        wait_for_the_end();
        say("kairosd did not end this process in time: ending it now");
    } else {
        char msg[128];
        snprintf(msg, sizeof msg, "kairosd cannot be told (%s): ending now", strerror(-rc));
        say(msg);
    }
    kill(getpid(), SIGTERM);
    return NULL;
}

static void after_fork_in_child(void)
{
    if (atomic_exchange(&se_armed_pid, 0)) {
        struct sigaction now;
        if (sigaction(SIGTERM, NULL, &now) == 0 && now.sa_handler == on_sigterm)
            default_back(); /* the child has no thread to wake */
    }
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

bool soft_end_arm(soft_end_sender *send)
{
    pthread_once(&se_once, register_atfork);
    int self = (int)getpid();
    int none = 0;
    if (!atomic_compare_exchange_strong(&se_armed_pid, &none, self))
        return none == self;
    struct sigaction now;
    if (sigaction(SIGTERM, NULL, &now) != 0 || now.sa_handler != SIG_DFL ||
        (now.sa_flags & SA_SIGINFO) || sem_init(&se_wake, 0, 0) != 0)
        goto not_armed;
    se_send = send;
    if (!own_thread_start(NULL, await_sigterm, NULL))
        goto not_armed;
    /* Swapped in one call, and put back if the application set a handler meanwhile
     * (the thread then waits for a post that never comes: harmless). */
    struct sigaction ours = {.sa_handler = on_sigterm, .sa_flags = SA_RESTART}, before;
    sigemptyset(&ours.sa_mask);
    if (sigaction(SIGTERM, &ours, &before) != 0)
        goto not_armed;
    if (before.sa_handler != SIG_DFL || (before.sa_flags & SA_SIGINFO)) {
        sigaction(SIGTERM, &before, NULL);
        goto not_armed;
    }
    return true;
not_armed:
    atomic_store(&se_armed_pid, 0);
    return false;
}
