/* conn_limits.h - who may hold how many of kairosd's connections, so that no user
 * can starve the others: a per-uid limit (max_connections_per_user), a reserve of
 * connections that only administrators (root and admins:) may take (admin_reserve),
 * within a total (max_connections) that the descriptors kairosd may open also bound.
 * Administrators are not limited per uid. Decides and counts; server.c accepts,
 * refuses with the message given here, and closes.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_CONN_LIMITS_H
#define KAIROS_DAEMON_CONN_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/config/config.h"

/* Descriptors kept for what is not a connection (state file, pidfds of owners,
 * timers, the GPU backend, logging). Each connection takes two (its socket, the
 * pidfd of its process). */
#define CONN_LIMITS_FDS_SPARE 64

struct conn_uid {
    uid_t uid;
    unsigned count;
};

struct conn_limits {
    struct conn_uid *uids; /* the uids with connections, unordered */
    size_t n_uids, cap_uids;
    unsigned total;
    unsigned fd_budget;    /* connections the descriptor limit allows (a reload may
                            * raise max_connections up to it, not beyond) */
};

/* Reads RLIMIT_NOFILE (raising the soft limit to the hard one when that helps) to
 * know how many connections kairosd can hold; fills warn when that is fewer than
 * cfg->max_connections (warn[0] == 0 otherwise). */
void conn_limits_init(struct conn_limits *cl, const struct config *cfg, char *warn,
                      size_t warn_len);
void conn_limits_fini(struct conn_limits *cl);

/* The connections kairosd takes in all: max_connections, or fewer when the
 * descriptor limit says so. */
unsigned conn_limits_max(const struct conn_limits *cl, const struct config *cfg);

/* Whether a new connection from uid in cgroup (members_is_admin) may be taken: 0, or
 * -EBUSY with msg saying which limit and what to do (for the refused client and the
 * log). */
int conn_limits_admit(const struct conn_limits *cl, const struct config *cfg, uid_t uid,
                      const char *cgroup, char *msg, size_t msg_len);
/* Counts a connection taken (0, -ENOMEM) and one closed. */
int conn_limits_add(struct conn_limits *cl, uid_t uid);
void conn_limits_remove(struct conn_limits *cl, uid_t uid);
/* Connections uid holds now. */
unsigned conn_limits_of(const struct conn_limits *cl, uid_t uid);

/* A peer that did not register and has replies waiting for it (a listing under
 * way) is closed only once it took none for the longer of register_timeout_ms and
 * this: such a peer asked and is being answered, and a reader the machine's load
 * holds back a few seconds (kairos ps of thousands of tenants on a loaded node) is
 * not idle; a peer that never reads still goes, its memory bounded meanwhile. */
#define CONN_LIMITS_REPLY_WAIT_MS 10000u

/* Whether a peer that did not register is idle and goes: it neither sent a request
 * nor took a reply for idle_ms, beyond register_timeout_ms, or beyond the longer of
 * that and CONN_LIMITS_REPLY_WAIT_MS while replies wait for it (replies_waiting). */
bool conn_limits_idle(const struct config *cfg, uint64_t idle_ms, bool replies_waiting);

#endif /* KAIROS_DAEMON_CONN_LIMITS_H */
