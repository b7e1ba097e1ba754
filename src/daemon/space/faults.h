/* faults.h - which tenant a GPU fault came from and which tenants lost work to it,
 * from the driver's Xid reports (gpu/xid.h) and what kairosd knows of its members and
 * its MPS daemons; counted per tenant for kairos ps and the metrics.
 *
 * The rule (docs/space.md, "Faults"):
 *  - the Xid names a member of a tenant in no fault domain: that tenant caused it (its
 *    contexts are its own; nobody else lost work);
 *  - it names a member of a tenant in a fault domain, or the MPS server of one of
 *    kairosd's domains: the fault was in that domain's server, and the driver does not
 *    say which client caused it (under MPS it names one client of the server whichever
 *    faulted: on an H100 the server's first client, bench/results/2026-12-07-h100-mps-
 *    fault). The domain's only tenant with a process on that GPU caused it; where there
 *    are several, the culprit is unknown and every one of them lost work;
 *  - it names no process, or one outside every tenant: nobody of Kairos's caused it.
 * Further Xid lines of the same domain and GPU within FAULTS_SAME_EVENT_MS of the first
 * are the same event (the driver may report each affected channel): nothing more is
 * counted for them.
 *
 * Records are kept per tenant name, at most one per tenant of the ledger (those of
 * tenants that are gone are dropped when room is needed).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_FAULTS_H
#define KAIROS_DAEMON_FAULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/gpu/xid.h"
#include "kairos/proto.h"

#define FAULTS_SAME_EVENT_MS 1000
#define FAULTS_GPU_UNKNOWN UINT32_MAX

struct ledger;
struct mps_domains;
struct settings_book;

struct fault_record {
    char tenant[KAIROS_NAME_MAX];
    uint64_t caused;       /* faults one of its processes caused */
    uint64_t lost;         /* faults in its domain, of another or unknown, that ended its work */
    unsigned last_xid;
    uint32_t last_gpu;     /* FAULTS_GPU_UNKNOWN: the Xid's GPU is none kairosd knows */
    uint64_t last_unix_ms;
    bool last_caused;      /* the last one: caused (else lost) */
};

/* The last fault event of a domain on a GPU, for FAULTS_SAME_EVENT_MS. */
struct fault_event {
    char domain[KAIROS_NAME_MAX];
    uint32_t gpu;
    uint64_t mono_ms;
};

struct faults {
    struct fault_record *v;
    size_t n, cap;
    struct fault_event recent[8]; /* the latest events, oldest overwritten */
    size_t next_recent;
    uint64_t outside;             /* Xid lines of no tenant's process */
    uint64_t total;               /* every Xid line read */
};

/* What the caller knows of the Xid's context: its GPU (FAULTS_GPU_UNKNOWN when the PCI
 * address is none of the node's), the clocks, and proc ("/proc" or a test's copy) for
 * an MPS server's parent. */
struct fault_context {
    uint32_t gpu;
    uint64_t mono_ms, unix_ms;
    const char *proc;
};

void faults_init(struct faults *f);
void faults_fini(struct faults *f);

/* The first report of a fault in a domain's server on one of kairosd's GPUs (its
 * repeats within FAULTS_SAME_EVENT_MS, faults outside every domain and those of a GPU
 * kairosd does not know leave it unset): what a recovery acts on (fault_recovery.h). */
struct fault_domain_event {
    bool set;
    char domain[KAIROS_NAME_MAX];
    uint32_t gpu;
};

/* Attributes x (see the rule above), counts it, and writes the sentence kairosd logs
 * into line; ev (may be NULL) says whether it began an event in a domain. */
void faults_on_xid(struct faults *f, const struct ledger *l, const struct settings_book *sb,
                   const struct mps_domains *m, const struct xid_report *x,
                   const struct fault_context *c, struct fault_domain_event *ev, char *line,
                   size_t cap);

/* The pids of the processes of domain's tenants that hold memory on gpu: those whose
 * work a fault of the domain's server there ended. At most cap into out; returns how
 * many there are. */
size_t faults_domain_members_on(const struct ledger *l, const struct settings_book *sb,
                                const char *domain, uint32_t gpu, uint32_t *out, size_t cap);

/* tenant's record, or NULL when it has had no fault. */
const struct fault_record *faults_find(const struct faults *f, const char *tenant);

#endif /* KAIROS_DAEMON_FAULTS_H */
