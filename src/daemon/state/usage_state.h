/* usage_state.h - the chargeback counters of every tenant (usage.h) across the
 * ledger: the memory integral taken every tick, what a save publishes, and the
 * "usage" section of the state file, {"usage": {"tenants": {"NAME": {...usage.h's
 * entry...}}}}. The section is read after the file's tenants, so an entry finds the
 * configuration's tenants and those created at run time alike; an entry for a tenant
 * kairosd does not know is dropped, an entry with any malformed part is dropped
 * whole (that tenant's counters begin again from 0 with a new "since", so that a
 * counter never goes back under the same creation time), a section that is not an
 * object loses every tenant's counters the same way: the tenants, the other tenants'
 * counters and the rest of the file are loaded either way. A file without the
 * section (one of before) loads as before, every counter beginning at 0.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_USAGE_STATE_H
#define KAIROS_DAEMON_USAGE_STATE_H

#include "daemon/memory/ledger.h"

#define USAGE_STATE_KEY "usage"

/* Each tenant's counters begin if they have not (now: seconds since the epoch), and
 * the memory each holds is counted for dt_s seconds. */
void usage_state_tick(struct ledger *l, double now, double dt_s);
/* A save succeeded: what it wrote becomes what the metrics show. */
void usage_state_published(struct ledger *l);

struct json_t;
/* The section for every tenant but skip (may be NULL), a new reference; NULL when
 * out of memory (then the state is saved without it). */
struct json_t *usage_state_json(const struct ledger *l, const struct ledger_tenant *skip);
/* Reads the section j (may be NULL: none) into the ledger's tenants; each part
 * refused is told to warn (may be NULL). now: seconds since the epoch. */
void usage_state_load(struct json_t *j, struct ledger *l, double now,
                      void (*warn)(void *ctx, const char *msg), void *warn_ctx);

#endif /* KAIROS_DAEMON_USAGE_STATE_H */
