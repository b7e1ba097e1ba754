/* credit_member.h - what a member of a tenant carries for credit (credit.h): its
 * reports, recalls, revocation and the request kairosd holds the answer to, per GPU.
 * Plain values, embedded in the ledger's record of the member (struct ledger_member,
 * ledger.h), so that the ledger needs nothing of credit.c, which works on them and
 * on the ledger's records (credit.h says how).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_CREDIT_MEMBER_H
#define KAIROS_DAEMON_CREDIT_MEMBER_H

#include <stdbool.h>
#include <stdint.h>

#include "kairos/proto.h"

/* A request kairosd holds the answer to (one per member and GPU). */
struct credit_wait {
    bool active;
    uint32_t seq;         /* of the CREDIT it answers */
    uint32_t flags;       /* the request's KAIROS_CREDIT_* */
    uint64_t report;
    uint64_t need, least;
    unsigned rounds;      /* recalls sent for it */
};

/* What a member carries for credit (embedded in struct ledger_member). */
struct credit_member {
    uint64_t report[KAIROS_MAX_GPUS];         /* the newest report taken */
    bool reported[KAIROS_MAX_GPUS];           /* held was reported at least once */
    bool ended[KAIROS_MAX_GPUS];              /* it sent LAST (it exits): no credit from
                                               * then on, whatever it sends after */
    bool revoked[KAIROS_MAX_GPUS];            /* a recall went unanswered */
    bool unacked[KAIROS_MAX_GPUS];            /* revoked, its credit still counted: it
                                               * has not said it read the revocation */
    uint64_t recall_deadline_ms[KAIROS_MAX_GPUS]; /* 0: no recall outstanding */
    uint64_t recalled_at_ms[KAIROS_MAX_GPUS]; /* the last recall sent it (0: none) */
    uint64_t ack_deadline_ms[KAIROS_MAX_GPUS];/* 0: no waiting on its word */
    struct credit_wait wait[KAIROS_MAX_GPUS];
    /* A refusal it remembers (it asked with KAIROS_CREDIT_NOTICE): one ROOM is owed
     * once the tenant's memory not held there grows beyond notice_avail. */
    bool notice[KAIROS_MAX_GPUS];
    uint64_t notice_avail[KAIROS_MAX_GPUS];
    void *peer;                               /* the member's struct peer (transport) */
};

#endif /* KAIROS_DAEMON_CREDIT_MEMBER_H */
