/* owners.c - the owners of ephemeral tenants, each watched through its pidfd (see
 * owners.h). */
#include "daemon/transport/owners.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

struct owner {
    struct owners *set;
    int pidfd;
    struct loop_watch *w;
    char tenant[KAIROS_NAME_MAX];
    uint32_t pid;
    struct owner *next;
};

int owners_pidfd_open(uint32_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

void owners_init(struct owners *o, struct loop *loop, struct services *sv)
{
    *o = (struct owners){.loop = loop, .sv = sv};
}

static void owner_free(struct owners *set, struct owner *o)
{
    for (struct owner **p = &set->list; *p; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            break;
        }
    loop_del(set->loop, o->w);
    close(o->pidfd);
    free(o);
}

void owners_fini(struct owners *o)
{
    while (o->list)
        owner_free(o, o->list);
}

/* Records whether t's owner lives (its settings record: settings_book.h). */
static void set_alive(struct services *sv, const struct ledger_tenant *t, bool alive)
{
    struct tenant_settings *r = settings_book_entry(&sv->ts->settings, t->id);
    if (r)
        r->owner_alive = alive;
}

static void owner_gone(struct services *sv, const char *tenant, uint32_t pid)
{
    struct ledger_tenant *t = ledger_tenant_find(&sv->ts->ledger, tenant);
    if (t && tenants_settings_of(sv->ts, t)->owner_pid == pid) {
        set_alive(sv, t, false);
        if (tenants_after_leave(sv->ts, t))
            sv->io->compute_changed_later(sv);
    }
}

static void on_owner_exit(void *ctx, int fd, uint32_t events)
{
    struct owner *o = ctx;
    struct owners *set = o->set;
    char tenant[KAIROS_NAME_MAX];
    uint32_t pid = o->pid;
    memcpy(tenant, o->tenant, sizeof tenant);
    owner_free(set, o);
    owner_gone(set->sv, tenant, pid);
}

void owners_watch(struct owners *set, struct ledger_tenant *t)
{
    struct services *sv = set->sv;
    uint32_t pid = tenants_settings_of(sv->ts, t)->owner_pid;
    int fd = owners_pidfd_open(pid);
    if (fd < 0) {
        /* gone already, or no pidfd: fall back to the members' departures */
        set_alive(sv, t, errno == ENOSYS);
        return;
    }
    struct owner *o = calloc(1, sizeof *o);
    if (!o) {
        close(fd);
        set_alive(sv, t, false);
        return;
    }
    o->set = set;
    o->pidfd = fd;
    o->pid = pid;
    memcpy(o->tenant, t->name, sizeof o->tenant);
    o->w = loop_add(set->loop, fd, EPOLLIN, on_owner_exit, o);
    if (!o->w) {
        close(fd);
        free(o);
        set_alive(sv, t, false);
        return;
    }
    set_alive(sv, t, true);
    o->next = set->list;
    set->list = o;
}

void owners_watch_all(struct owners *set)
{
    struct ledger *l = &set->sv->ts->ledger;
    for (size_t i = 0; i < l->n_tenants; i++) {
        struct ledger_tenant *t = l->tenants[i];
        if ((t->flags & LEDGER_TENANT_EPHEMERAL) && tenants_settings_of(set->sv->ts, t)->owner_pid)
            owners_watch(set, t);
    }
}
