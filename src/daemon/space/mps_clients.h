/* mps_clients.h - who the MPS servers of kairosd's fault domains serve, checked against
 * the domains' members. A client that is no member of the server's domain reached it
 * around kairosd's routing (a getenv of its own preloaded before the shim's, or a
 * libcuda that reads its environment another way): user space cannot stop that, since
 * the pipe folder is the uid's, so kairosd reports each such client, once, and (space:
 * strangers: end, the default) ends its MPS client through the daemon that named it
 * (client_end.h, with no signal after), at every check that finds it (docs/security.md).
 * The same checks end the MPS clients a fault of their server left without their work
 * once space: fault_recovery_ms has passed (fault_recovery.h).
 *
 * Every space: client_check_ms (default 5 s), each running daemon is asked
 * `get_client_list SERVER` for the server it started, asynchronously, one question in
 * flight per daemon (a check finds one in flight: no new one), the answer bounded
 * (MPS_CLIENTS_ANSWER_MAX) and given MPS_CLIENTS_ANSWER_WAIT_MS to come, after which
 * the next check kills its control client and asks again.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_MPS_CLIENTS_H
#define KAIROS_DAEMON_MPS_CLIENTS_H

#include <stddef.h>
#include <stdint.h>

#define MPS_CLIENTS_ANSWER_MAX 16384
#define MPS_CLIENTS_REPORTED_MAX 256 /* the strangers remembered as reported */
#define MPS_CLIENTS_ANSWER_WAIT_MS 2000 /* a question unanswered for longer is given up */

struct loop;
struct ledger;
struct mps_domains;
struct settings_book;
struct mps_clients;

struct mps_clients_deps {
    struct loop *loop;
    struct mps_domains *mps;
    const struct ledger *ledger;
    const struct settings_book *settings; /* the tenants' fault domains (settings_book.h) */
    const char *proc;          /* "/proc", or a test's copy */
    unsigned interval_ms;      /* 0: no check */
    unsigned fault_recovery_ms; /* 0: a fault's clients are never ended (fault_recovery.h) */
};

/* The pids of answer (get_client_list's, one per line), into out (at most cap); returns
 * how many went there. Anything in answer that is not a pid is skipped. */
size_t mps_clients_pids(const char *answer, uint32_t *out, size_t cap);

/* Of pids (n_pids of a server's clients), those that are no member of a tenant of
 * domain (its fault domain in sb), into out (at most cap); returns how many there are. */
size_t mps_clients_strangers(const struct ledger *l, const struct settings_book *sb,
                             const char *domain, const uint32_t *pids, size_t n_pids,
                             uint32_t *out, size_t cap);

/* Since kairosd started: the strangers found (each pid once), the MPS clients of
 * strangers ended, and those of clients a fault left ended (terminate_client answered
 * well). */
struct mps_clients_counts {
    uint64_t found, ended, fault_ended;
};
/* c's counts (NULL: no checks, all 0). */
struct mps_clients_counts mps_clients_counts(const struct mps_clients *c);

/* A fault of ev's domain on its GPU (faults.h): the domain's processes with memory
 * there that are still clients of its server fault_recovery_ms later are ended at the
 * first check after that (fault_recovery.h). Nothing when c is NULL or ev unset. */
struct fault_domain_event;
void mps_clients_after_fault(struct mps_clients *c, const struct fault_domain_event *ev);

/* Starts the checks (none when interval_ms is 0: *out NULL). 0, or -errno. */
int mps_clients_open(struct mps_clients **out, const struct mps_clients_deps *deps);
void mps_clients_close(struct mps_clients *c);

#endif /* KAIROS_DAEMON_MPS_CLIENTS_H */
