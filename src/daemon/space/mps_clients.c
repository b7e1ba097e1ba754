/* mps_clients.c - the MPS servers' clients against the fault domains' members (see
 * mps_clients.h). */
#include "daemon/space/mps_clients.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/base/log.h"
#include "daemon/base/loop.h"
#include "daemon/base/proc_stat.h"
#include "daemon/base/procscan.h"
#include "daemon/memory/ledger.h"
#include "daemon/space/client_end.h"
#include "daemon/space/fault_recovery.h"
#include "daemon/space/faults.h"
#include "daemon/space/mps_domains.h"
#include "daemon/tenants/settings_book.h"

/* One question in flight to a daemon. */
struct question {
    struct mps_clients *owner;
    char domain[KAIROS_NAME_MAX];
    uint32_t uid;
    pid_t client;              /* the control client; 0: none in flight */
    uint64_t asked_ms;         /* when it was started (CLOCK_MONOTONIC) */
    int fd;
    struct loop_watch *watch;
    char answer[MPS_CLIENTS_ANSWER_MAX];
    size_t len;
};

struct mps_clients {
    struct mps_clients_deps deps;
    struct loop_watch *timer;
    struct client_ends *ends; /* the MPS clients being ended: strangers', faulted ones' */
    struct question q[MPS_DOMAINS_MAX];
    uint32_t reported[MPS_CLIENTS_REPORTED_MAX];
    size_t next_reported;
    struct fault_recovery recovery;
    uint32_t listed[MPS_CLIENTS_ANSWER_MAX / 2]; /* the pids of the answer being read */
    struct mps_clients_counts counts;
};

static bool is_member_of(const struct ledger *l, const struct settings_book *sb, uint32_t pid,
                         const char *domain)
{
    const struct ledger_member *m = ledger_find_pid(l, pid);
    return m && !strcmp(settings_book_of(sb, m->tenant->id)->fault_domain, domain);
}

size_t mps_clients_pids(const char *answer, uint32_t *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = answer; *p && n < cap;) {
        char *end = (char *)p;
        unsigned long pid = *p >= '0' && *p <= '9' ? strtoul(p, &end, 10) : 0;
        if (end != p && (*end == '\n' || *end == 0) && pid > 0 && pid <= UINT32_MAX)
            out[n++] = (uint32_t)pid;
        p = end + strcspn(end, "\n");
        if (*p)
            p++;
    }
    return n;
}

size_t mps_clients_strangers(const struct ledger *l, const struct settings_book *sb,
                             const char *domain, const uint32_t *pids, size_t n_pids,
                             uint32_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < n_pids; i++)
        if (!is_member_of(l, sb, pids[i], domain)) {
            if (n < cap)
                out[n] = pids[i];
            n++;
        }
    return n;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Whether pid was reported already (else it is remembered as reported now). */
static bool reported_before(struct mps_clients *c, uint32_t pid)
{
    for (size_t i = 0; i < MPS_CLIENTS_REPORTED_MAX; i++)
        if (c->reported[i] == pid)
            return true;
    c->reported[c->next_reported++ % MPS_CLIENTS_REPORTED_MAX] = pid;
    return false;
}

static void stranger_ended(void *ctx, const struct client_end_outcome *o)
{
    struct mps_clients *c = ctx;
    c->counts.ended += o->ended;
    if (o->ended)
        log_warn("space: pid %u (%s): its MPS client was ended (terminate_client to the "
                 "control daemon of fault domain %s), being no member of the domain; its "
                 "next CUDA call fails", o->victim->pid, o->victim->comm, o->domain);
    else
        log_warn("space: pid %u (%s), no member of fault domain %s, is still a client of its "
                 "MPS server: terminate_client failed (%s); asked again at the next check",
                 o->victim->pid, o->victim->comm, o->domain, o->failure);
}

/* Ends a stranger's MPS client through the daemon q asked (its uid picks it, whatever
 * the stranger's own: root reaches any user's daemon), with no signal after. A start
 * the bounds refuse is said at warn the first time (first), else at debug. */
static void end_stranger(struct mps_clients *c, const struct question *q,
                         const struct procscan_proc *p, bool first)
{
    uint32_t ppid;
    uint64_t start;
    if (client_ends_pending(c->ends, p->pid) || proc_stat_read(c->deps.proc, p->pid, &ppid,
                                                               &start))
        return; /* on its way, or gone */
    struct client_end_order o = {.victim = *p, .start = start, .tenant = "", .domain = q->domain,
                                 .gpu = -1, .what = "no member of the domain", .signal = 0,
                                 .done = stranger_ended, .ctx = c};
    o.victim.uid = q->uid;
    char why[256];
    if (client_ends_start(c->ends, c->deps.mps, c->deps.proc, &o, why, sizeof why))
        log_write(first ? LOG_LEVEL_WARN : LOG_LEVEL_DEBUG, "space: pid %u (%s), no member of "
                  "fault domain %s, cannot have its MPS client ended now: %s; asked again at "
                  "the next check", p->pid, p->comm, q->domain, why);
}

static void faulted_ended(void *ctx, const struct client_end_outcome *o)
{
    struct mps_clients *c = ctx;
    c->counts.fault_ended += o->ended;
    if (o->ended)
        log_warn("space: pid %u (%s) of tenant %s: its MPS client was ended (terminate_client "
                 "to the control daemon of fault domain %s), a client the fault on GPU %d "
                 "left without its work that had not exited; the server takes new clients "
                 "once no such client is left", o->victim->pid, o->victim->comm, o->tenant,
                 o->domain, o->gpu);
    else
        log_warn("space: pid %u (%s) of tenant %s, a client the fault on GPU %d left in fault "
                 "domain %s, could not have its MPS client ended (%s); the domain's server "
                 "may take no new client until it exits", o->victim->pid, o->victim->comm,
                 o->tenant, o->gpu, o->domain, o->failure);
}

/* Ends the MPS client of a process a fault of q's server left without its work (its
 * contexts are dead: nothing of its own is lost), with no signal after. */
static void end_faulted(struct mps_clients *c, const struct question *q,
                        const struct fault_recovery_end *e)
{
    const struct ledger_member *m = ledger_find_pid(c->deps.ledger, e->pid);
    struct procscan_proc p;
    if (!m || client_ends_pending(c->ends, e->pid))
        return; /* gone from the tenant (it exited), or on its way */
    procscan_describe(c->deps.proc, e->pid, &p);
    struct client_end_order o = {.victim = p, .start = e->start, .tenant = m->tenant->name,
                                 .domain = q->domain, .gpu = (int)e->gpu,
                                 .what = "a client its server's fault left without its work",
                                 .signal = 0, .done = faulted_ended, .ctx = c};
    o.victim.uid = q->uid;
    char why[256];
    if (client_ends_start(c->ends, c->deps.mps, c->deps.proc, &o, why, sizeof why))
        log_warn("space: pid %u (%s) of tenant %s, a client the fault on GPU %u left in fault "
                 "domain %s, cannot have its MPS client ended now: %s", e->pid, p.comm,
                 m->tenant->name, e->gpu, q->domain, why);
}

/* The clients a fault left that are still the server's once its grace is over. */
static void recover(struct mps_clients *c, const struct question *q, size_t n_listed)
{
    struct fault_recovery_end due[FAULT_RECOVERY_CLIENTS];
    size_t n = fault_recovery_due(&c->recovery, q->domain, c->listed, n_listed, now_ms(), due,
                                  FAULT_RECOVERY_CLIENTS);
    for (size_t i = 0; i < n; i++)
        end_faulted(c, q, &due[i]);
}

static void report(struct mps_clients *c, const struct question *q)
{
    size_t listed = mps_clients_pids(q->answer, c->listed,
                                     sizeof c->listed / sizeof c->listed[0]);
    recover(c, q, listed);
    uint32_t strangers[64];
    size_t n = mps_clients_strangers(c->deps.ledger, c->deps.settings, q->domain, c->listed,
                                     listed, strangers, 64);
    bool end = c->deps.mps->cfg->end_strangers;
    for (size_t i = 0; i < n && i < 64; i++) {
        struct procscan_proc p;
        procscan_describe(c->deps.proc, strangers[i], &p);
        bool first = !reported_before(c, strangers[i]);
        c->counts.found += first;
        if (first)
            log_warn("space: pid %u (%s) is a client of the MPS server of fault domain %s but "
                     "no member of the domain: it reached the server around kairosd's "
                     "routing (docs/security.md); %s", strangers[i], p.comm, q->domain,
                     end ? "its MPS client is ended (space: strangers: end)"
                         : "it shares that domain's fate (space: strangers: report)");
        if (end)
            end_stranger(c, q, &p, first);
    }
}

/* Ends q's question: the watch, the descriptor, the control client (killed when it
 * has not exited: a question outlived its time). */
static void end_question(struct mps_clients *c, struct question *q, bool answered)
{
    if (q->watch)
        loop_del(c->deps.loop, q->watch);
    q->watch = NULL;
    if (q->fd >= 0)
        close(q->fd);
    q->fd = -1;
    if (!answered)
        kill(q->client, SIGKILL);
    waitpid(q->client, NULL, 0);
    q->client = 0;
}

static void on_answer(void *ctx, int fd, uint32_t events)
{
    (void)events;
    struct question *q = ctx;
    for (;;) {
        size_t room = sizeof q->answer - 1 - q->len;
        ssize_t n = room ? read(fd, q->answer + q->len, room) : 0;
        if (n > 0) {
            q->len += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return; /* more to come */
        break;      /* the end (or a full buffer, or an error): what came is the answer */
    }
    q->answer[q->len] = 0;
    bool whole = q->len < sizeof q->answer - 1;
    end_question(q->owner, q, whole);
    report(q->owner, q);
}

static struct question *question_for(struct mps_clients *c, const struct mps_daemon *d)
{
    struct question *free_q = NULL;
    for (size_t i = 0; i < MPS_DOMAINS_MAX; i++) {
        struct question *q = &c->q[i];
        if (q->domain[0] && q->uid == d->uid && !strcmp(q->domain, d->domain))
            return q;
        if (!q->domain[0] && !free_q)
            free_q = q;
    }
    if (free_q) {
        snprintf(free_q->domain, sizeof free_q->domain, "%s", d->domain);
        free_q->uid = d->uid;
    }
    return free_q;
}

static void ask(struct mps_clients *c, const struct mps_daemon *d)
{
    struct question *q = question_for(c, d);
    if (!q)
        return;
    if (q->client && now_ms() - q->asked_ms < MPS_CLIENTS_ANSWER_WAIT_MS)
        return; /* still answering (a loaded machine, a slow control client) */
    if (q->client)
        end_question(c, q, false); /* no answer in time: given up */
    uint32_t server = mps_domains_server(d, c->deps.proc);
    if (!server)
        return; /* no client yet: the server starts with the first */
    char command[48];
    snprintf(command, sizeof command, "get_client_list %u\n", server);
    int fd = -1;
    pid_t pid = mps_domains_ask(c->deps.mps, d, command, &fd);
    if (pid < 0)
        return;
    q->owner = c;
    q->client = pid;
    q->asked_ms = now_ms();
    q->fd = fd;
    q->len = 0;
    q->watch = loop_add(c->deps.loop, fd, EPOLLIN, on_answer, q);
    if (!q->watch)
        end_question(c, q, false);
}

static void on_tick(void *ctx, int fd, uint32_t events)
{
    (void)events;
    struct mps_clients *c = ctx;
    uint64_t expirations;
    (void)!read(fd, &expirations, sizeof expirations);
    const struct mps_domains *m = c->deps.mps;
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i]->pid > 0)
            ask(c, m->v[i]);
}

int mps_clients_open(struct mps_clients **out, const struct mps_clients_deps *deps)
{
    *out = NULL;
    if (!deps->interval_ms)
        return 0;
    struct mps_clients *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->deps = *deps;
    for (size_t i = 0; i < MPS_DOMAINS_MAX; i++)
        c->q[i].fd = -1;
    int rc = client_ends_init(&c->ends, deps->loop);
    if (rc) {
        free(c);
        return rc;
    }
    c->timer = loop_add_timer(deps->loop, (uint64_t)deps->interval_ms * 1000, on_tick, c);
    if (!c->timer) {
        rc = -errno;
        client_ends_fini(c->ends);
        free(c);
        return rc ? rc : -ENOMEM;
    }
    *out = c;
    return 0;
}

void mps_clients_after_fault(struct mps_clients *c, const struct fault_domain_event *ev)
{
    if (!c || !ev->set || !c->deps.fault_recovery_ms)
        return;
    uint32_t pids[FAULT_RECOVERY_CLIENTS];
    size_t n = faults_domain_members_on(c->deps.ledger, c->deps.settings, ev->domain, ev->gpu,
                                        pids, FAULT_RECOVERY_CLIENTS);
    struct fault_recovery_client clients[FAULT_RECOVERY_CLIENTS] = {{0}};
    size_t kept = 0;
    for (size_t i = 0; i < n && i < FAULT_RECOVERY_CLIENTS; i++) {
        uint32_t ppid;
        if (!proc_stat_read(c->deps.proc, pids[i], &ppid, &clients[kept].start))
            clients[kept++].pid = pids[i]; /* else gone already */
    }
    if (!kept)
        return;
    fault_recovery_note(&c->recovery, ev->domain, ev->gpu, now_ms(), c->deps.fault_recovery_ms,
                        clients, kept);
    log_info("space: fault domain %s, GPU %u: %zu process(es) lost their work to the fault; "
             "those still clients of the domain's MPS server %u ms from now have their MPS "
             "client ended then (space: fault_recovery_ms), since MPS takes no new client "
             "of the server before every such client is gone", ev->domain, ev->gpu, kept,
             c->deps.fault_recovery_ms);
}

struct mps_clients_counts mps_clients_counts(const struct mps_clients *c)
{
    return c ? c->counts : (struct mps_clients_counts){0};
}

void mps_clients_close(struct mps_clients *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < MPS_DOMAINS_MAX; i++)
        if (c->q[i].client)
            end_question(c, &c->q[i], false);
    loop_del_close(c->deps.loop, c->timer);
    client_ends_fini(c->ends);
    free(c);
}
