/* chargeback.h - the clock of the chargeback counters (usage.h): every second each
 * tenant's held memory is added to its byte-seconds, and every
 * usage_save_interval_ms (kairosd.conf(5), default 60 s) the state file is written,
 * which publishes the counters to the metrics; at the stop, a last count and a last
 * save, so that a restart loses nothing, and a crash at most one interval (which
 * the metrics never showed). The GPU time comes from the time-share scheduler
 * (timeshare.c).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_CHARGEBACK_H
#define KAIROS_DAEMON_CHARGEBACK_H

#include "daemon/config/config.h"
#include "daemon/base/loop.h"
#include "daemon/tenants/tenants.h"

#define CHARGEBACK_TICK_MS 1000u

struct chargeback;

/* cfg is read at every tick (a reload changes the interval). 0 or -errno. */
int chargeback_init(struct chargeback **out, struct loop *loop, struct tenants *ts,
                    const struct config *cfg);
/* One tick now (the timer calls it; tests may too). */
void chargeback_tick(struct chargeback *cb);
/* Counts up to now and saves (a failure is logged), then frees. NULL: nothing. */
void chargeback_fini(struct chargeback *cb);

#endif /* KAIROS_DAEMON_CHARGEBACK_H */
