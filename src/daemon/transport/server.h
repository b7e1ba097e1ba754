/* server.h - kairosd's unix socket: listening (mode 0666 under a directory it
 * creates), accepting up to a bound of connections, each peer's credentials
 * (SO_PEERCRED), pidfd and outbox, and framing; each whole message goes to the
 * request table (requests.h), whose handlers answer through the peer's outbox
 * (peer.h) and never touch the socket.
 *
 * A peer's death is seen at once, by the hang-up of its socket or its pidfd,
 * whichever comes first, and everything it held is released (later, when the GPU
 * still holds its memory: linger.h).
 * A malformed message gets an ERROR and the peer is disconnected; others go on.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_SERVER_H
#define KAIROS_DAEMON_SERVER_H

#include "daemon/config/config.h"
#include "daemon/base/loop.h"
#include "daemon/tenants/tenants.h"

struct server;
struct faults;
struct gpu_backend;
struct heirs;
struct imports;
struct linger_set;
struct mps_domains;

/* What the server hands requests to, given at init. A NULL service is off, as said. */
struct server_deps {
    struct loop *loop;
    struct tenants *ts;
    const struct config *cfg;     /* read at each use (admins, max_connections): a reload
                                   * applies at once */
    const char *socket_path;
    struct gpu_backend *gpu;      /* REATTACH claims are checked against it (reattach.h) */
    struct linger_set *linger;    /* departed members whose memory the GPU still holds
                                   * linger there (linger.h); NULL: released at once */
    struct heirs *heirs;          /* where FORKED and INHERITED go (heirs.h); NULL: refused */
    struct imports *imports;      /* where SHARED and IMPORTED go (imports.h); NULL: refused */
    struct mps_domains *mps;      /* where ROUTE finds the fault domains' MPS daemons
                                   * (mps_domains.h); NULL: a tenant in a fault domain is
                                   * refused the GPU */
    const struct faults *faults;  /* where PS finds the tenants' GPU faults (faults.h);
                                   * NULL: none shown */
    struct timeshare *timeshare;  /* compute policies: new members get those in force
                                   * right after WELCOME (timeshare.h); NULL: none */
};

int server_init(struct server **out, const struct server_deps *deps);
/* Closes every connection (their processes reattach when kairosd is back: nothing
 * they held lingers) and the socket. */
void server_fini(struct server *s);

/* Watches the owners of ephemeral tenants loaded from the state file. */
void server_watch_owners(struct server *s);

/* Connections open now (shims, kairos commands), for the metrics. */
unsigned server_connections(const struct server *s);

struct timeshare;
struct kairos_time_policy;
/* A timeshare_send_fn (ctx: the server): TIME_POLICY to every member process of
 * tenant; a process that cannot take it is disconnected. */
void server_send_time_policy(void *ctx, const char *tenant, const struct kairos_time_policy *p);

#endif /* KAIROS_DAEMON_SERVER_H */
