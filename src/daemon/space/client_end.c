/* client_end.c - signals that wait for a fault-domain member's MPS client to end (see
 * client_end.h). */
#include "daemon/space/client_end.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/base/key_rate.h"
#include "daemon/base/loop.h"
#include "daemon/base/proc_stat.h"
#include "daemon/space/mps_domains.h"

/* One signal waiting for its victim's MPS client to end. */
struct waiting {
    struct client_ends *owner;
    bool used;
    struct procscan_proc victim;
    int victim_fd;             /* pidfd of the victim, taken at the start */
    char tenant[KAIROS_NAME_MAX];
    char domain[KAIROS_NAME_MAX];
    int gpu;
    char what[256];
    int signal;
    void (*done)(void *ctx, const struct client_end_outcome *o);
    void *ctx;
    pid_t control;             /* the control client running terminate_client */
    int control_fd;            /* its pidfd, readable once it has exited */
    int answer_fd;             /* its output */
    struct loop_watch *exit;   /* control_fd */
    struct loop_watch *timer;  /* CLIENT_END_WAIT_MS after the start */
    char text[160];            /* the start of what the control client wrote */
    size_t len;
};

struct client_ends {
    struct loop *loop;
    struct waiting w[CLIENT_ENDS_MAX];
    struct key_rate_slot started[CLIENT_ENDS_MAX]; /* the starts of each tenant */
};

int client_ends_init(struct client_ends **out, struct loop *loop)
{
    struct client_ends *k = calloc(1, sizeof *k);
    if (!k)
        return -ENOMEM;
    k->loop = loop;
    *out = k;
    return 0;
}

bool client_ends_pending(const struct client_ends *k, uint32_t pid)
{
    for (size_t i = 0; k && i < CLIENT_ENDS_MAX; i++)
        if (k->w[i].used && k->w[i].victim.pid == pid)
            return true;
    return false;
}

/* The control client's end: reaped (killed first when it is out of time); whether it
 * exited 0 by itself. */
static bool control_exited_well(pid_t control, bool exited)
{
    int status = 0;
    if (!exited)
        kill(control, SIGKILL);
    return waitpid(control, &status, 0) == control && exited && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

/* What the control client wrote (at most w->text's size), read once it has ended. */
static void read_answer(struct waiting *w)
{
    ssize_t n;
    while (w->len < sizeof w->text &&
           (n = read(w->answer_fd, w->text + w->len, sizeof w->text - w->len)) > 0)
        w->len += (size_t)n;
}

enum end { EXITED, OUT_OF_TIME, STOPPING };

/* Why the client could not be ended, from how the wait ended and what the control
 * client wrote (the tenant's uid runs it: printable characters only). */
static void failure_text(const struct waiting *w, enum end end, char *out, size_t cap)
{
    char text[sizeof w->text];
    snprintf(text, sizeof text, "%.*s", (int)w->len, w->text);
    for (char *c = text; *c; c++)
        *c = *c >= 0x20 && *c < 0x7f ? *c : ' ';
    const char *how = end == STOPPING ? "kairosd is stopping"
                    : end == EXITED   ? "it failed"
                                      : NULL;
    if (how)
        snprintf(out, cap, "%s%s%s", how, text[0] ? ": " : "", text);
    else
        snprintf(out, cap, "no answer within %d ms%s%s", CLIENT_END_WAIT_MS,
                 text[0] ? ": " : "", text);
}

/* The signal, by the pidfd, the caller told, and the slot freed. */
static void finish(struct waiting *w, enum end end)
{
    struct loop *loop = w->owner->loop;
    loop_del(loop, w->exit);
    close(w->control_fd);
    loop_del_close(loop, w->timer);
    bool well = control_exited_well(w->control, end == EXITED);
    read_answer(w);
    close(w->answer_fd);
    char failure[sizeof w->text + 64] = "";
    if (!well)
        failure_text(w, end, failure, sizeof failure);
    int err = syscall(SYS_pidfd_send_signal, w->victim_fd, w->signal, NULL, 0) ? errno : 0;
    close(w->victim_fd);
    struct client_end_outcome o = {.victim = &w->victim, .tenant = w->tenant,
                                   .domain = w->domain, .what = w->what, .gpu = w->gpu,
                                   .ended = well, .failure = failure, .signal_err = err};
    if (w->done)
        w->done(w->ctx, &o);
    *w = (struct waiting){0};
}

static void on_control_exit(void *ctx, int fd, uint32_t events)
{
    (void)fd;
    (void)events;
    finish(ctx, EXITED);
}

static void on_deadline(void *ctx, int fd, uint32_t events)
{
    (void)fd;
    (void)events;
    finish(ctx, OUT_OF_TIME);
}

static uint64_t monotonic_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* A free slot for tenant's kill; NULL with why when a bound is reached. */
static struct waiting *free_slot(struct client_ends *k, const char *tenant, char *why,
                                 size_t why_len)
{
    /* counted first, so that a flood's refused tries count too */
    if (!key_rate_take(k->started, CLIENT_ENDS_MAX, tenant, monotonic_ms(), 1000,
                       CLIENT_ENDS_PER_TENANT_PER_S)) {
        snprintf(why, why_len, "tenant %s asked for %d ends in the last second already",
                 tenant, CLIENT_ENDS_PER_TENANT_PER_S);
        return NULL;
    }
    struct waiting *free = NULL;
    unsigned of_tenant = 0;
    for (size_t i = 0; i < CLIENT_ENDS_MAX; i++) {
        if (!k->w[i].used)
            free = free ? free : &k->w[i];
        else
            of_tenant += !strcmp(k->w[i].tenant, tenant);
    }
    if (of_tenant >= CLIENT_ENDS_PER_TENANT) {
        snprintf(why, why_len, "%d ends of tenant %s wait for their MPS clients already",
                 CLIENT_ENDS_PER_TENANT, tenant);
        return NULL;
    }
    if (!free)
        snprintf(why, why_len, "%d ends wait for their MPS clients already", CLIENT_ENDS_MAX);
    return free;
}

/* Watches w's control client for its exit (a pidfd: its output may close before it
 * exits, or never) and its deadline; false (nothing left watched) on failure. */
static bool watch(struct client_ends *k, struct waiting *w)
{
    w->control_fd = (int)syscall(SYS_pidfd_open, w->control, 0);
    w->exit = w->control_fd >= 0 ? loop_add(k->loop, w->control_fd, EPOLLIN, on_control_exit, w) : NULL;
    w->timer = w->exit ? loop_add_timer(k->loop, 0, on_deadline, w) : NULL;
    if (w->timer && !loop_timer_after_ms(w->timer, CLIENT_END_WAIT_MS))
        return true;
    loop_del_close(k->loop, w->timer);
    if (w->exit)
        loop_del(k->loop, w->exit);
    if (w->control_fd >= 0)
        close(w->control_fd);
    return false;
}

/* A pidfd of pid, which is the process that started at start (0: unchecked); -1
 * otherwise. Checked after the open, while the pidfd shows it alive: a pid reused
 * before the open reads another start time, and none can be reused after it. */
static int pin_victim(const char *proc, uint32_t pid, uint64_t start)
{
    int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (fd < 0 || !start)
        return fd;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (proc_stat_alive(proc, pid, start) && poll(&p, 1, 0) == 0)
        return fd;
    close(fd);
    return -1;
}

int client_ends_start(struct client_ends *k, const struct mps_domains *m, const char *proc,
                      const struct client_end_order *o, char *why, size_t why_len)
{
    if (!k || !k->loop) {
        snprintf(why, why_len, "no loop to wait in");
        return -EBUSY;
    }
    struct waiting *w = free_slot(k, o->tenant, why, why_len);
    if (!w)
        return -EBUSY;
    int victim_fd = pin_victim(proc, o->victim.pid, o->start);
    if (victim_fd < 0) {
        snprintf(why, why_len, "pid %u is gone", o->victim.pid);
        return -ESRCH;
    }
    *w = (struct waiting){.owner = k, .used = true, .victim = o->victim,
                          .victim_fd = victim_fd, .gpu = o->gpu, .signal = o->signal,
                          .done = o->done, .ctx = o->ctx, .control_fd = -1, .answer_fd = -1};
    snprintf(w->tenant, sizeof w->tenant, "%s", o->tenant);
    snprintf(w->domain, sizeof w->domain, "%s", o->domain);
    snprintf(w->what, sizeof w->what, "%s", o->what ? o->what : "");
    w->control = mps_domains_terminate_client(m, proc, o->domain, o->victim.uid,
                                              o->victim.pid, &w->answer_fd, why, why_len);
    int rc = w->control < 0 ? (int)w->control : 0;
    if (!rc && !watch(k, w)) {
        rc = -ENOMEM;
        snprintf(why, why_len, "the loop could not watch the MPS control client");
        kill(w->control, SIGKILL);
        waitpid(w->control, NULL, 0);
        close(w->answer_fd);
    }
    if (rc) {
        close(victim_fd);
        *w = (struct waiting){0};
    }
    return rc;
}

void client_ends_fini(struct client_ends *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < CLIENT_ENDS_MAX; i++)
        if (k->w[i].used)
            finish(&k->w[i], STOPPING);
    free(k);
}
