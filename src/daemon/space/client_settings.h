/* client_settings.h - what kairosd gives an MPS client of a fault domain
 * (docs/space.md, "Priorities and shares"): its client priority, from the priorities
 * of its domain's tenants, and its active thread percentage.
 *
 * MPS has two client priorities (0 normal, 1 below normal). A tenant whose priority
 * class (latency above normal above batch) is below the highest class among the
 * tenants of its domain gets 1, every other 0: a latency tenant beside training gets
 * the first call on the SMs, and tenants of one class are equal. A tenant's class is
 * that of its policy on the lowest-numbered GPU it has one on (normal without any):
 * MPS sets a client's priority once, for all its devices. The thread percentage is
 * the tenant's sms: where its configuration sets one, else 100: a cap on SMs made both
 * sides of the measured mix slower (docs/space.md), so it is the operator's choice;
 * shares and limits are the time control's.
 *
 * Pure: reads the ledger and the compute policies (tenants/compute_book.h), no I/O.
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_CLIENT_SETTINGS_H
#define KAIROS_DAEMON_CLIENT_SETTINGS_H

#include "daemon/memory/ledger.h"
#include "daemon/tenants/compute_book.h"
#include "daemon/tenants/settings_book.h"

#define SPACE_THREAD_PCT 100u

/* 0 or 1 for a tenant of a fault domain (its fault_domain in sb not ""), the tenants'
 * compute policies in cb. */
unsigned space_client_priority(const struct ledger *l, const struct compute_book *cb,
                               const struct settings_book *sb, const struct ledger_tenant *t);
/* 1-100: the active thread percentage of t's MPS clients (its sms:, else all). */
unsigned space_client_threads(const struct settings_book *sb, const struct ledger_tenant *t);

#endif /* KAIROS_DAEMON_CLIENT_SETTINGS_H */
