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
#include <sys/types.h>

#include "daemon/config.h"

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

/* Whether a new connection from uid in cgroup (config_is_admin) may be taken: 0, or
 * -EBUSY with msg saying which limit and what to do (for the refused client and the
 * log). */
int conn_limits_admit(const struct conn_limits *cl, const struct config *cfg, uid_t uid,
                      const char *cgroup, char *msg, size_t msg_len);
/* Counts a connection taken (0, -ENOMEM) and one closed. */
int conn_limits_add(struct conn_limits *cl, uid_t uid);
void conn_limits_remove(struct conn_limits *cl, uid_t uid);
/* Connections uid holds now. */
unsigned conn_limits_of(const struct conn_limits *cl, uid_t uid);

#endif /* KAIROS_DAEMON_CONN_LIMITS_H */
