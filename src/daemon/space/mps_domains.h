/* mps_domains.h - the MPS control daemons kairosd runs for space mode (docs/space.md).
 *
 * One nvidia-cuda-mps-control per fault domain and uid (per domain with
 * shared_uids: one multi-user daemon, -M, as root), started when the domain's first
 * process of that uid registers, in the foreground of a session of its own, as that
 * uid (nothing of root's opens a file in a folder the user owns), with private
 * folders under kairosd's runtime directory:
 *   ROOT/DOMAIN@UID/pipe      CUDA_MPS_PIPE_DIRECTORY (owned by UID, mode 0700: no
 *                             other user reaches the daemon; @all: root's, 0755)
 *   ROOT/DOMAIN@UID/log       CUDA_MPS_LOG_DIRECTORY (owned by UID; @all: root's)
 *   ROOT/DOMAIN@UID/control.pid  its pid, for the next kairosd
 * kairosd notices a daemon's exit at once (a pidfd in the loop), logs it, and starts
 * it again at the domain's next process. A kairosd that stops leaves its daemons
 * running (their clients keep working); the next one adopts those whose pid file
 * names a live process of the same program. A daemon whose domain no tenant names
 * any more is asked to quit (the `quit` command: it waits for its clients to end).
 * No other MPS daemon on the node is touched.
 *
 * Bounds: MPS_DOMAINS_MAX daemons in all and MPS_DOMAIN_UIDS_MAX uids per domain;
 * beyond them a process is refused with a sentence saying which bound.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_MPS_DOMAINS_H
#define KAIROS_DAEMON_MPS_DOMAINS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/config/space_config.h"

#define MPS_DOMAINS_MAX 256
#define MPS_DOMAIN_UIDS_MAX 32
#define MPS_SHARED_UID UINT32_MAX /* the daemon of a shared_uids domain */
#define MPS_ROOT_MAX 200          /* the folder of the daemons' folders */
#define MPS_DIR_MAX 300

struct loop;
struct loop_watch;

struct mps_daemon {
    char domain[KAIROS_NAME_MAX];
    uint32_t uid;             /* MPS_SHARED_UID: multi-user */
    char dir[MPS_DIR_MAX];    /* ROOT/DOMAIN@UID */
    pid_t pid;                /* 0: not running */
    int pidfd;                /* -1 when not running */
    struct loop_watch *watch;
    unsigned starts;          /* by this kairosd */
    bool adopted;             /* found running at start */
    bool quitting;            /* asked to quit (its domain named by no tenant, or all) */
    struct mps_domains *owner;
};

struct mps_domains {
    char root[MPS_ROOT_MAX];
    const struct space_config *cfg; /* the configuration in force (replaced at reload) */
    struct loop *loop;              /* NULL: no exit watch (tests) */
    struct mps_daemon *v[MPS_DOMAINS_MAX];
    size_t n;
};

/* The daemons' folder of the kairosd listening on socket_path: its folder's mps/. */
void mps_domains_root_of(const char *socket_path, char *out, size_t cap);
/* Makes root (0711; shorter than MPS_ROOT_MAX) and adopts the daemons a previous
 * kairosd left there. 0, or -errno with why. */
int mps_domains_open(struct mps_domains *m, const char *root, struct loop *loop,
                     const struct space_config *cfg, char *why, size_t why_len);
/* Stops watching; leaves every daemon running. */
void mps_domains_close(struct mps_domains *m);

/* The pipe folder of domain's daemon for uid (shared: the domain's multi-user one),
 * started if it does not run. 0, or -errno with a sentence for the process in why
 * (MPS not installed, a bound reached, a start that failed, a daemon asked to quit
 * that still waits for its clients: MPS takes no new client then). */
int mps_domains_route(struct mps_domains *m, const char *domain, uint32_t uid, char *pipe_dir,
                      size_t cap, char *why, size_t why_len);

/* Asks the daemons of every domain not in named[0..n) to quit. */
void mps_domains_retire(struct mps_domains *m, const char *const *named, size_t n);
/* Asks every daemon that runs and was not asked yet to quit (kairosd --quit-domains);
 * how many were asked. */
size_t mps_domains_quit_all(struct mps_domains *m);
struct ledger;
struct settings_book;
/* The same for the domains no tenant of l names (its fault domain in sb; after a
 * reload, a tenant's domain changed at run time, a tenant removed). */
void mps_domains_retire_unnamed(struct mps_domains *m, const struct ledger *l,
                                const struct settings_book *sb);

/* The daemon of domain and uid as known now (NULL: none). */
const struct mps_daemon *mps_domains_find(const struct mps_domains *m, const char *domain,
                                          uint32_t uid);

/* Whether pid (under proc: "/proc" or a test's copy) is a child of one of these
 * daemons (an MPS server they started); its domain into domain when it is. */
bool mps_domains_server_domain(const struct mps_domains *m, const char *proc, uint32_t pid,
                               char *domain, size_t cap);

/* The MPS server daemon d started (its child under proc, "/proc" or a test's copy);
 * 0 when it runs none. */
uint32_t mps_domains_server(const struct mps_daemon *d, const char *proc);

/* Starts d's control client (as d's uid) with command on its stdin; its answer comes on
 * *answer_fd (nonblocking; ends when the client exits). The client's pid (the caller
 * reaps it), or -errno. */
pid_t mps_domains_ask(const struct mps_domains *m, const struct mps_daemon *d,
                      const char *command, int *answer_fd);

/* Starts ending MPS client pid's contexts through its domain's control daemon (for
 * uid, else the domain's multi-user one): `terminate_client SERVER PID`, SERVER the
 * daemon's child under proc, as MPS documents for ending one client without harming
 * the server or its other clients (a signal to a client with work in flight may fault
 * them all). Does not wait: the control client's pid (the caller reaps it; its answer
 * on *answer_fd ends when it exits), or -errno with why. */
pid_t mps_domains_terminate_client(const struct mps_domains *m, const char *proc,
                                   const char *domain, uint32_t uid, uint32_t client,
                                   int *answer_fd, char *why, size_t why_len);

#endif /* KAIROS_DAEMON_MPS_DOMAINS_H */
