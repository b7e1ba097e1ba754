/* ratelog.h - at most one log line per key (a tenant's refusals) per interval: the
 * first event of an interval is logged, the others are counted, and the next line
 * logged says how many were not. The caller owns one struct ratelog per key and
 * gives the time, so the rule is pure and testable.
 *
 * Thread rules: no shared state; one struct per key, used from one thread.
 */
#ifndef KAIROS_DAEMON_RATELOG_H
#define KAIROS_DAEMON_RATELOG_H

#include <stdbool.h>
#include <stdint.h>

#define RATELOG_INTERVAL_MS 10000 /* kairosd's refusal lines: one per tenant per 10 s */

struct ratelog {
    bool logged;         /* a line was logged at last_ms */
    uint64_t last_ms;
    uint64_t suppressed; /* events since then not logged */
};

/* An event at now_ms: true when it is to be logged, with *suppressed the number of
 * events not logged since the previous line (then reset); false when it is only
 * counted. */
bool ratelog_event(struct ratelog *r, uint64_t now_ms, uint64_t interval_ms,
                   uint64_t *suppressed);

#endif /* KAIROS_DAEMON_RATELOG_H */
