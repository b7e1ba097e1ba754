/* registry.h - the one home of a tenant's settings, whatever set them.
 *
 * A tenant's settings are its memory quota on each GPU, its compute policy on each
 * GPU, its members rules (who may join: members.h), its managed-memory policy
 * (refuse or charge: docs/memory.md) and its fault domain (space mode, docs/space.md).
 * The quotas live in the tenant's record in the ledger (struct ledger_tenant, the
 * ledger enforces them); the compute policies in a book by the tenant's id
 * (compute_book.h); the other settings, with the source of each setting (struct
 * tenant_sources, a plain type of config/setting_source.h), in the tenant's settings
 * record, a book by id of its own (settings_book.h); both books are held by struct
 * tenants. A source is the configuration file, or run time (an administrator's
 * TENANT_SET or TENANT_MEMBERS, from `kairos run` or `kairos tenant`, and the state
 * file that keeps them across a restart). This module is the only writer of those
 * settings and the only reader that needs to know where they came from; the ledger
 * (quotas), the scheduler (timeshare.c: policies), membership (rules), space mode
 * (fault domains), the metrics, `kairos ps`, the audit and the state file read them
 * from the record and the books. The configuration's structures (config.h) are read
 * once, when the configuration is applied (registry_apply_config), and never
 * consulted after.
 *
 * Precedence (kairosd.conf(5), "Settings set at run time"): the configuration owns
 * what it declares. At start and at each reload every setting it declares for a
 * tenant takes its value, replacing one set at run time (logged with both values);
 * a setting it no longer declares is cleared; a setting set at run time that it
 * does not declare is kept (and kept in the state file, so a restart finds it as a
 * reload does). A configured tenant's compute policies and members rules are the
 * configuration's as a whole (TENANT_SET's compute and TENANT_MEMBERS are refused
 * for it); its quotas may be changed at run time GPU by GPU. A fault domain is
 * set at run time for tenants created at run time only (TENANT_SET refuses one for
 * a configured tenant, whose domain is the configuration's: none when it names
 * none); a reload leaves a run-time tenant's domain as it is, and a run-time
 * tenant the configuration comes to declare takes the configuration's.
 *
 * Adding a setting (say "managed"): a field in struct tenant_settings
 * (settings_book.h; or a book of its own keyed by the tenant's id, as
 * compute_book.h) and its source in
 * struct tenant_sources (setting_source.h); a registry_set_<x>() here; its line in
 * registry_apply_config() (config value, or keep the run-time one); its field in
 * struct state_settings (state.h), read and put back by registry_state_io() here, and
 * its key in state.c (compute_json / load_compute show the pattern) and the
 * round-trip test in
 * tests/unit/daemon/test_registry.c; TENANT_SET's field if administrators set it at
 * run time (proto.h, proto_check.c, tenants_set()).
 *
 * No I/O but the log: each change of a setting that an operator did not ask for
 * directly (a reload replacing or keeping a run-time value) is logged.
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_REGISTRY_H
#define KAIROS_DAEMON_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/policy.h"
#include "daemon/config/setting_source.h"
#include "daemon/state/state.h"
#include "daemon/tenants/compute_book.h"
#include "daemon/tenants/members.h"
#include "daemon/tenants/settings_book.h"
#include "kairos/proto.h"

struct ledger;
struct ledger_tenant;
struct config_tenant;

/* "unset", "configuration", "run time". */
const char *setting_source_name(enum setting_source s);

/* The books the registry writes, both held by struct tenants (tenants.h). */
struct registry_books {
    struct compute_book *compute;
    struct settings_book *settings;
};

/* Each setter below writes t's record in sb (settings_book.h), made by the first
 * write that needs one: -ENOMEM or -ENOSPC (logged; nothing changes) when it cannot
 * be. */

/* Sets t's quota on gpu from source s. Returns what ledger_tenant_set_quota does:
 * 1 when t now holds more than bytes there, 0 if not, -EINVAL for a GPU the node
 * lacks; or -ENOMEM / -ENOSPC. */
int registry_set_quota(struct ledger *l, struct settings_book *sb, struct ledger_tenant *t,
                       unsigned gpu, uint64_t bytes, enum setting_source s);
/* Sets (pol) or clears (pol NULL) t's compute policy on gpu (< KAIROS_MAX_GPUS) in
 * book b, from source s (a clear leaves SETTING_UNSET). pol is checked by the caller.
 * 0, or what compute_book_set says (-ENOMEM, -ENOSPC: nothing changes); a clear never
 * fails. */
int registry_set_compute(struct compute_book *b, struct settings_book *sb,
                         struct ledger_tenant *t, unsigned gpu, const struct sched_policy *pol,
                         enum setting_source s);
/* Sets t's fault domain ("" or NULL: none, SETTING_UNSET, which never fails) from
 * source s; domain is a valid name (checked by the caller). */
int registry_set_fault_domain(struct settings_book *sb, struct ledger_tenant *t,
                              const char *domain, enum setting_source s);
/* Sets t's members rules (r NULL: none) from source s. */
int registry_set_members(struct settings_book *sb, struct ledger_tenant *t,
                         const struct member_rules *r, enum setting_source s);
/* Sets whether t's managed memory is charged (else refused) from source s. */
int registry_set_managed(struct settings_book *sb, struct ledger_tenant *t, bool charge,
                         enum setting_source s);
/* Records pid (0: none) as the owner of ephemeral tenant t, alive or not yet known
 * to be (the server watches it: transport/owners.h). */
int registry_set_owner(struct settings_book *sb, struct ledger_tenant *t, uint32_t pid,
                       bool alive);
/* t's compute policy on gpu in book b, whatever its source; false when it has none
 * (or t is NULL). */
bool registry_policy(const struct compute_book *b, const struct ledger_tenant *t, unsigned gpu,
                     struct sched_policy *out);
/* Whether t has a setting set at run time (the state file keeps those). */
bool registry_has_runtime(const struct settings_book *sb, const struct ledger_tenant *t,
                          unsigned n_gpus);

/* Applies one tenant's declaration in the configuration to its record, by the
 * precedence above: quota[g] for each GPU where declared[g] (resolved by
 * tenants.c), the declaration's compute policies, members rules and fault domain.
 * Settings the configuration owned and no longer declares are cleared; run-time
 * quotas on GPUs it does not declare are kept; run-time compute policies, members
 * rules and fault domain give way to the configuration's (logged). The caller says
 * where a quota is now below what t holds. */
void registry_apply_config(struct ledger *l, struct compute_book *cb, struct settings_book *sb,
                           struct ledger_tenant *t, const struct config_tenant *ct,
                           const uint64_t *quota, const bool *declared);

/* The configuration no longer declares t, which stays until its members leave:
 * its quotas and members rules stay, now as if set at run time (the state file
 * keeps them); its compute policies go, as the configuration's shares no longer
 * count them, and so does the fault domain the configuration gave it. */
void registry_undeclared(struct compute_book *b, struct settings_book *sb,
                         struct ledger_tenant *t);

/* How the state file (state.h) reads the settings to save and puts back those it
 * loads, as set at run time, into the books b (which must outlast the io's use):
 * the settings it keeps are those whose source is run time (all quotas of a tenant
 * the configuration does not declare); a configured tenant takes only quotas, on
 * GPUs the configuration does not declare. */
struct state_settings_io registry_state_io(const struct registry_books *b);

#endif /* KAIROS_DAEMON_REGISTRY_H */
