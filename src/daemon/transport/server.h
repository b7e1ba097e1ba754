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

/* cfg is read at each use (admins, max_connections), so a reload applies at once. */
int server_init(struct server **out, struct loop *loop, struct tenants *ts,
                const struct config *cfg, const char *socket_path);
void server_fini(struct server *s);

/* Watches the owners of ephemeral tenants loaded from the state file. */
void server_watch_owners(struct server *s);

struct linger_set;
/* Departed members whose memory the GPU still holds linger there (linger.h);
 * NULL: every departure releases at once. */
void server_set_linger(struct server *s, struct linger_set *lg);

struct heirs;
/* Where FORKED and INHERITED go (heirs.h); NULL: they are refused. */
void server_set_heirs(struct server *s, struct heirs *h);

struct imports;
/* Where SHARED and IMPORTED go (imports.h); NULL: they are refused. */
void server_set_imports(struct server *s, struct imports *im);

struct mps_domains;
/* Where ROUTE finds the fault domains' MPS daemons (mps_domains.h); NULL: a tenant in
 * a fault domain is refused the GPU. */
void server_set_mps(struct server *s, struct mps_domains *m);
struct faults;
/* Where PS finds the tenants' GPU faults (faults.h); NULL: none shown. */
void server_set_faults(struct server *s, const struct faults *f);

/* Connections open now (shims, kairos commands), for the metrics. */
unsigned server_connections(const struct server *s);

struct timeshare;
struct kairos_time_policy;
/* New members get the time policies in force right after WELCOME. */
void server_set_timeshare(struct server *s, struct timeshare *t);
struct gpu_backend;
/* The GPU backend REATTACH claims are checked against (reattach.h), or NULL. */
void server_set_gpu(struct server *s, struct gpu_backend *gpu);
/* A timeshare_send_fn (ctx: the server): TIME_POLICY to every member process of
 * tenant; a process that cannot take it is disconnected. */
void server_send_time_policy(void *ctx, const char *tenant, const struct kairos_time_policy *p);

#endif /* KAIROS_DAEMON_SERVER_H */
