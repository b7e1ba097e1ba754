/* conn_limits.c - per-uid connection counts and the admission rule (conn_limits.h):
 * a non-administrator gets a connection while the total is below max_connections
 * less admin_reserve and its uid holds fewer than max_connections_per_user; an
 * administrator while the total is below max_connections; and when a peer that did
 * not register counts as idle. */
#include "daemon/transport/conn_limits.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "core/grow.h"
#include "daemon/tenants/members.h"

void conn_limits_init(struct conn_limits *cl, const struct config *cfg, char *warn,
                      size_t warn_len)
{
    *cl = (struct conn_limits){0};
    warn[0] = 0;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) {
        cl->fd_budget = UINT_MAX;
        return;
    }
    rlim_t want = (rlim_t)cfg->max_connections * 2 + CONN_LIMITS_FDS_SPARE;
    if (rl.rlim_cur < want && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        if (setrlimit(RLIMIT_NOFILE, &rl))
            getrlimit(RLIMIT_NOFILE, &rl);
    }
    rlim_t fit = rl.rlim_cur > CONN_LIMITS_FDS_SPARE ? (rl.rlim_cur - CONN_LIMITS_FDS_SPARE) / 2
                                                     : 1;
    cl->fd_budget = fit < UINT_MAX ? (unsigned)(fit ? fit : 1) : UINT_MAX;
    if (fit < cfg->max_connections)
        snprintf(warn, warn_len, "the descriptor limit (RLIMIT_NOFILE %llu) allows %u connections, "
                 "fewer than max_connections %u: raise LimitNOFILE= or ulimit -n",
                 (unsigned long long)rl.rlim_cur, cl->fd_budget, cfg->max_connections);
}

void conn_limits_fini(struct conn_limits *cl)
{
    free(cl->uids);
    *cl = (struct conn_limits){0};
}

unsigned conn_limits_max(const struct conn_limits *cl, const struct config *cfg)
{
    return cl->fd_budget < cfg->max_connections ? cl->fd_budget : cfg->max_connections;
}

static struct conn_uid *find(const struct conn_limits *cl, uid_t uid)
{
    for (size_t i = 0; i < cl->n_uids; i++)
        if (cl->uids[i].uid == uid)
            return &cl->uids[i];
    return NULL;
}

unsigned conn_limits_of(const struct conn_limits *cl, uid_t uid)
{
    const struct conn_uid *u = find(cl, uid);
    return u ? u->count : 0;
}

int conn_limits_admit(const struct conn_limits *cl, const struct config *cfg, uid_t uid,
                      const char *cgroup,
                      char *msg, size_t msg_len)
{
    unsigned max = conn_limits_max(cl, cfg);
    if (members_is_admin(cfg, uid, cgroup)) {
        if (cl->total < max)
            return 0;
        snprintf(msg, msg_len, "kairosd has too many connections (%u, all of them, the "
                 "administrators' reserve included); try again later or raise max_connections",
                 cl->total);
        return -EBUSY;
    }
    unsigned reserve = cfg->admin_reserve < max ? cfg->admin_reserve : max - 1;
    if (cl->total >= max - reserve) {
        snprintf(msg, msg_len, "kairosd has too many connections (%u; the last %u are kept for "
                 "administrators); try again later or raise max_connections", cl->total,
                 reserve);
        return -EBUSY;
    }
    unsigned mine = conn_limits_of(cl, uid);
    if (mine >= cfg->max_connections_per_user) {
        snprintf(msg, msg_len, "uid %u already holds %u connections to kairosd, the most one "
                 "user may (max_connections_per_user); close some (each process with a GPU "
                 "holds one) or ask an administrator to raise it", (unsigned)uid, mine);
        return -EBUSY;
    }
    return 0;
}

int conn_limits_add(struct conn_limits *cl, uid_t uid)
{
    struct conn_uid *u = find(cl, uid);
    if (!u) {
        struct conn_uid *grown =
            grow_for_one(cl->uids, &cl->cap_uids, cl->n_uids, sizeof *grown, 16);
        if (!grown)
            return -ENOMEM;
        cl->uids = grown;
        u = &cl->uids[cl->n_uids++];
        *u = (struct conn_uid){.uid = uid};
    }
    u->count++;
    cl->total++;
    return 0;
}

void conn_limits_remove(struct conn_limits *cl, uid_t uid)
{
    struct conn_uid *u = find(cl, uid);
    if (!u)
        return;
    cl->total--;
    if (--u->count == 0)
        *u = cl->uids[--cl->n_uids];
}

bool conn_limits_idle(const struct config *cfg, uint64_t idle_ms, bool replies_waiting)
{
    uint64_t limit = cfg->register_timeout_ms;
    if (replies_waiting && limit < CONN_LIMITS_REPLY_WAIT_MS)
        limit = CONN_LIMITS_REPLY_WAIT_MS;
    return idle_ms >= limit;
}
