/* audit_findings.h - what the audit has found, as (who, GPU, kind), who a pid or a
 * tenant id: each finding is recorded at first sight, reported once when it has lasted
 * long enough, and not again while it stays; one that is no longer seen is forgotten,
 * so a reused pid (or a tenant over its quota again) is reported again. What only the
 * /proc scan sees stays until the next scan.
 *
 * A pass of the audit: audit_findings_begin, then the findings seen (get or due),
 * then audit_findings_end.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_AUDIT_FINDINGS_H
#define KAIROS_DAEMON_AUDIT_FINDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum audit_kind {
    AUDIT_UNREGISTERED = 1, /* listed by the backend, not a member */
    AUDIT_TENANT_OVER,      /* a tenant's processes above its quota (who: tenant id) */
    AUDIT_OPENER,           /* a device node open, not a member, not listed */
    AUDIT_UNEXPLAINED,      /* memory.used above what is known (who: 0) */
    AUDIT_HOLDER,           /* an opener named as a holder of unexplained memory */
    AUDIT_MPS_SERVER,       /* an MPS server the backend lists (noted, no finding) */
    AUDIT_MPS_OPENER,       /* an MPS server seen by the /proc scan only (noted) */
    AUDIT_MPS_OVER,         /* an MPS server above audit mps_server_max */
};

struct audit_seen {
    uint32_t who;
    unsigned gpu;
    enum audit_kind kind;
    uint64_t since_ms;
    bool reported;
    bool still; /* seen in this pass */
};

struct audit_findings {
    struct audit_seen *v;
    size_t n, cap;
};

/* A new pass: nothing seen in it yet. */
void audit_findings_begin(struct audit_findings *f);
/* The finding (who, gpu, kind), recorded at now_ms if new, and marked as seen in this
 * pass; NULL when out of memory. */
struct audit_seen *audit_findings_get(struct audit_findings *f, uint32_t who, unsigned gpu,
                                      enum audit_kind kind, uint64_t now_ms);
/* Whether s (NULL: unknown, taken as lasted) has lasted delay_ms at now_ms. */
bool audit_findings_lasted(const struct audit_seen *s, uint64_t now_ms, uint64_t delay_ms);
/* true once, when the finding has lasted delay_ms (0: at first sight); out of memory,
 * true at first sight only (reported again next pass rather than never). */
bool audit_findings_due(struct audit_findings *f, uint32_t who, unsigned gpu,
                        enum audit_kind kind, uint64_t now_ms, uint64_t delay_ms);
/* The end of the pass: the findings not seen in it are forgotten, except those only
 * a scan sees when this pass did not scan (scanned false). */
void audit_findings_end(struct audit_findings *f, bool scanned);
void audit_findings_free(struct audit_findings *f);

#endif /* KAIROS_DAEMON_AUDIT_FINDINGS_H */
