/* audit_mps_kill.c - kills that wait for a fault-domain member's MPS client to end
 * (see audit_mps_kill.h). */
#include "daemon/observe/audit_mps_kill.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/base/loop.h"
#include "daemon/observe/audit_action.h"
#include "daemon/space/mps_domains.h"

/* One kill waiting for its victim's MPS client to end. */
struct waiting {
    struct audit_mps_kills *owner;
    bool used;
    struct procscan_proc victim;
    int victim_fd;             /* pidfd of the victim, taken at the start */
    char tenant[KAIROS_NAME_MAX];
    char domain[KAIROS_NAME_MAX];
    int gpu;
    char what[256];
    pid_t control;             /* the control client running terminate_client */
    int control_fd;            /* its pidfd, readable once it has exited */
    int answer_fd;             /* its output */
    struct loop_watch *exit;   /* control_fd */
    struct loop_watch *timer;  /* AUDIT_MPS_KILL_WAIT_MS after the start */
    char text[160];            /* the start of what the control client wrote */
    size_t len;
};

struct audit_mps_kills {
    struct loop *loop;
    struct waiting w[AUDIT_MPS_KILLS_MAX];
};

int audit_mps_kills_init(struct audit_mps_kills **out, struct loop *loop)
{
    struct audit_mps_kills *k = calloc(1, sizeof *k);
    if (!k)
        return -ENOMEM;
    k->loop = loop;
    *out = k;
    return 0;
}

bool audit_mps_kills_pending(const struct audit_mps_kills *k, uint32_t pid)
{
    for (size_t i = 0; k && i < AUDIT_MPS_KILLS_MAX; i++)
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

/* The line saying whether the client was ended first. */
static void log_client_end(const struct waiting *w, enum end end, bool ended)
{
    if (ended) {
        audit_warn(w->tenant, w->victim.pid, w->gpu, "audit: pid %u of tenant %s: its MPS "
                   "client was ended first (terminate_client), so that the kill spares fault "
                   "domain %s", w->victim.pid, w->tenant, w->domain);
        return;
    }
    char text[sizeof w->text];
    snprintf(text, sizeof text, "%.*s", (int)w->len, w->text);
    for (char *c = text; *c; c++) /* the tenant's uid runs that client: printable only */
        *c = *c >= 0x20 && *c < 0x7f ? *c : ' ';
    char how[64];
    if (end == STOPPING)
        snprintf(how, sizeof how, "kairosd is stopping");
    else if (end == OUT_OF_TIME)
        snprintf(how, sizeof how, "no answer within %d ms", AUDIT_MPS_KILL_WAIT_MS);
    else
        snprintf(how, sizeof how, "it failed");
    audit_warn(w->tenant, w->victim.pid, w->gpu, "audit: pid %u of tenant %s: its MPS client "
               "could not be ended first (terminate_client to the control daemon of fault "
               "domain %s: %s%s%s); the kill may end the work of fault domain %s",
               w->victim.pid, w->tenant, w->domain, how, text[0] ? ": " : "", text, w->domain);
}

/* The kill, by the pidfd, its line, and the slot freed. */
static void finish(struct waiting *w, enum end end)
{
    struct loop *loop = w->owner->loop;
    loop_del(loop, w->exit);
    close(w->control_fd);
    loop_del_close(loop, w->timer);
    bool well = control_exited_well(w->control, end == EXITED);
    read_answer(w);
    close(w->answer_fd);
    log_client_end(w, end, well);
    int err = syscall(SYS_pidfd_send_signal, w->victim_fd, SIGKILL, NULL, 0) ? errno : 0;
    close(w->victim_fd);
    audit_killed(&w->victim, w->tenant, w->gpu, w->what, err);
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

/* A free slot for tenant's kill; NULL with why when a bound is reached. */
static struct waiting *free_slot(struct audit_mps_kills *k, const char *tenant, char *why,
                                 size_t why_len)
{
    struct waiting *free = NULL;
    unsigned of_tenant = 0;
    for (size_t i = 0; i < AUDIT_MPS_KILLS_MAX; i++) {
        if (!k->w[i].used)
            free = free ? free : &k->w[i];
        else
            of_tenant += !strcmp(k->w[i].tenant, tenant);
    }
    if (of_tenant >= AUDIT_MPS_KILLS_PER_TENANT) {
        snprintf(why, why_len, "%d kills of tenant %s wait for their MPS clients already",
                 AUDIT_MPS_KILLS_PER_TENANT, tenant);
        return NULL;
    }
    if (!free)
        snprintf(why, why_len, "%d kills wait for their MPS clients already",
                 AUDIT_MPS_KILLS_MAX);
    return free;
}

/* Watches w's control client for its exit (a pidfd: its output may close before it
 * exits, or never) and its deadline; false (nothing left watched) on failure. */
static bool watch(struct audit_mps_kills *k, struct waiting *w)
{
    w->control_fd = (int)syscall(SYS_pidfd_open, w->control, 0);
    w->exit = w->control_fd >= 0 ? loop_add(k->loop, w->control_fd, EPOLLIN, on_control_exit, w) : NULL;
    w->timer = w->exit ? loop_add_timer(k->loop, 0, on_deadline, w) : NULL;
    if (w->timer && !loop_timer_after_ms(w->timer, AUDIT_MPS_KILL_WAIT_MS))
        return true;
    loop_del_close(k->loop, w->timer);
    if (w->exit)
        loop_del(k->loop, w->exit);
    if (w->control_fd >= 0)
        close(w->control_fd);
    return false;
}

int audit_mps_kills_start(struct audit_mps_kills *k, const struct mps_domains *m,
                          const char *proc, const struct procscan_proc *p, const char *tenant,
                          const char *domain, int gpu, const char *what, char *why,
                          size_t why_len)
{
    if (!k || !k->loop) {
        snprintf(why, why_len, "no loop to wait in");
        return -EBUSY;
    }
    struct waiting *w = free_slot(k, tenant, why, why_len);
    if (!w)
        return -EBUSY;
    int victim_fd = (int)syscall(SYS_pidfd_open, (pid_t)p->pid, 0);
    if (victim_fd < 0) {
        snprintf(why, why_len, "pid %u is gone", p->pid);
        return -ESRCH;
    }
    *w = (struct waiting){.owner = k, .used = true, .victim = *p, .victim_fd = victim_fd,
                          .gpu = gpu, .control_fd = -1, .answer_fd = -1};
    snprintf(w->tenant, sizeof w->tenant, "%s", tenant);
    snprintf(w->domain, sizeof w->domain, "%s", domain);
    snprintf(w->what, sizeof w->what, "%s", what);
    w->control = mps_domains_terminate_client(m, proc, domain, p->uid, p->pid, &w->answer_fd,
                                              why, why_len);
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

void audit_mps_kills_fini(struct audit_mps_kills *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < AUDIT_MPS_KILLS_MAX; i++)
        if (k->w[i].used)
            finish(&k->w[i], STOPPING);
    free(k);
}
