/* usage_state.h - the chargeback counters of every tenant (usage.h's book, joined to
 * the ledger's tenants by their ids): the memory integral taken every tick, what a
 * save publishes, and the "usage" section of the state file, {"usage": {"tenants":
 * {"NAME": {...usage.h's entry...}}}}. The section is read after the file's
 * tenants, so an entry finds the configuration's tenants and those created at run
 * time alike; an entry for a tenant kairosd does not know is dropped, an entry with
 * any malformed part is dropped whole (that tenant's counters begin again from 0
 * with a new "since", so that a counter never goes back under the same creation
 * time), a section that is not an object loses every tenant's counters the same
 * way: the tenants, the other tenants' counters and the rest of the file are loaded
 * either way. A file without the section (one of before) loads as before, every
 * counter beginning at 0. The counters of a tenant the ledger no longer has are
 * dropped at the next tick.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_USAGE_STATE_H
#define KAIROS_DAEMON_USAGE_STATE_H

#include "daemon/memory/ledger.h"
#include "daemon/state/usage.h"

#define USAGE_STATE_KEY "usage"

/* Each tenant's counters in b begin if they have not (now: seconds since the epoch),
 * and the memory each holds in l is counted for dt_s seconds; the counters of tenants
 * l no longer has are dropped. */
void usage_state_tick(struct usage_book *b, const struct ledger *l, double now, double dt_s);
/* A save succeeded: what it wrote becomes what the metrics show. */
void usage_state_published(struct usage_book *b);

struct json_t;
/* The section for every tenant of l but skip (may be NULL), with its counters in b
 * and its refusals, a new reference; NULL when out of memory (then the state is
 * saved without it). */
struct json_t *usage_state_json(const struct usage_book *b, const struct ledger *l,
                                const struct ledger_tenant *skip);
/* Reads the section j (may be NULL: none) into b, for the tenants l has, and their
 * refusals into l; each part refused is told to warn (may be NULL). now: seconds
 * since the epoch. */
void usage_state_load(struct json_t *j, struct usage_book *b, struct ledger *l, double now,
                      void (*warn)(void *ctx, const char *msg), void *warn_ctx);

#endif /* KAIROS_DAEMON_USAGE_STATE_H */
