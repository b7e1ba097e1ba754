/* tenants.h - which tenants exist and the checks on their settings, around the
 * ledger: tenants from the configuration (resolving sizes, percentages and GPU
 * UUIDs against the node's GPUs), tenants created at run time (persisted in the
 * state file), and the administrator's TENANT_SET / TENANT_DEL with replies that
 * say what happened. The settings themselves, with their sources and the
 * precedence of the configuration over run time, are the registry's (registry.h);
 * kairosd resolves percentages here, so the CLI sends them as they are
 * (KAIROS_QUOTA_PERCENT).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_TENANTS_H
#define KAIROS_DAEMON_TENANTS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/config/config.h"
#include "daemon/state/handovers_state.h"
#include "daemon/memory/ledger.h"
#include "daemon/state/usage.h"
#include "daemon/tenants/compute_book.h"
#include "daemon/tenants/settings_book.h"

struct tenants {
    struct ledger ledger;
    struct usage_book usage;  /* the tenants' chargeback counters by id (usage.h) */
    struct compute_book compute; /* the tenants' compute policies by id (compute_book.h;
                                  * written through the registry, registry.h) */
    struct settings_book settings; /* their other settings, sources and owners by id
                                    * (settings_book.h; written through the registry) */
    unsigned n_gpus;
    bool gpu_known;                               /* a GPU backend told us the following */
    uint64_t gpu_total[KAIROS_MAX_GPUS];
    char gpu_uuid[KAIROS_MAX_GPUS][KAIROS_UUID_MAX];
    char state_path[PATH_MAX];
    /* the hand-overs' section of the state file (handovers.h): what the file held at
     * start, for handovers_restore, and how to write it with each save */
    struct handovers_saved saved_handovers;
    struct json_t *(*handovers_json)(void *ctx); /* a new reference, or NULL */
    void *handovers_ctx;
};

struct json_t;
int tenants_init(struct tenants *ts, unsigned n_gpus, const char *state_path);
void tenants_fini(struct tenants *ts);

/* Applies the configuration's tenants: all resolved first (an error changes
 * nothing and says file:line:column), and refused when its compute shares with
 * those of the tenants created at run time would add up above 100 % on a GPU; then
 * created or updated by the registry's precedence (registry.h: what the file
 * declares replaces what run time set, a run-time quota on a GPU it does not declare
 * is kept). A config tenant no longer declared is removed at once when it has no
 * member (live or lingering) and nothing draining; otherwise it is marked removed
 * (LEDGER_TENANT_REMOVED, logged, shown by kairos ps), keeps its quotas until its
 * members leave and its memory drains, and no process may join it; declared again,
 * it is a config tenant as before. The state file records the outcome. A run-time
 * tenant the configuration now declares follows the configuration's compute policy
 * and members rules (its own are dropped, logged). A reload that declares no tenant
 * at all is refused before this (config_reload_check). */
int tenants_apply_config(struct tenants *ts, const struct config *c, char *err, size_t err_len);

/* Loads the state file's tenants, and the settings made at run time of configured
 * ones (those the configuration does not own: registry.h); a corrupt file is set
 * aside and reported. A run-time tenant's compute policy that
 * is malformed, or would take one GPU's shares above 100 % with c's (and those
 * loaded before it), is dropped and logged; the tenant stays. A run-time fault domain
 * c does not declare is kept with a warning (so is one a reload stops declaring:
 * tenants_apply_config). Logs what it did. */
void tenants_load_state(struct tenants *ts, const struct config *c);
/* Writes the state file, without skip (may be NULL: a tenant about to go); logs a
 * failure. 0 or -errno (err says why). */
int tenants_save_state(struct tenants *ts, const struct ledger_tenant *skip, char *err,
                       size_t err_len);

/* TENANT_SET (checked by proto_check) / TENANT_DEL from uid (already checked as
 * admin). Return 0 or a KAIROS_ERR_* code; msg says what happened or what to do.
 * domain: the fault domain m carries (NULL for a body of before: unchanged; "" none),
 * taken for a tenant created at run time, refused for a configured one whose own it
 * is not, for a domain c does not declare under space: domains:, and (KAIROS_ERR_BUSY)
 * while the tenant has processes, whose routes are decided already. An
 * ephemeral tenant records owner_pid (the sender: kairos run, which then execs the
 * command) and is removed once that process and all members are gone. Compute
 * policies are taken for tenants created at run time only (a configured tenant's
 * quotas may change, each recorded as set at run time), and refused (nothing
 * changes) when one GPU's shares, with c's and the other run-time tenants', would
 * add up above 100 %; compute_changed says whether the tenant's or its fault domain
 * changed (then the time-share scheduler must be told, timeshare_reconfigure, and a
 * domain no tenant names any more retired). A change that the
 * state file cannot record (disk full, read-only: a configured tenant's quota
 * included, the state file keeping it) is undone and
 * refused (KAIROS_ERR_BUSY, msg says why), and so is a TENANT_DEL: what kairosd
 * answers is what a restart finds. */
int tenants_set(struct tenants *ts, const struct config *c, const struct kairos_tenant_set *m,
                const char *domain, uint32_t uid, uint32_t owner_pid, bool *compute_changed,
                char *msg, size_t msg_len);
int tenants_del(struct tenants *ts, const char *name, uint32_t uid, char *msg, size_t msg_len);

/* After a member or the owner left: removes an ephemeral tenant left empty, or a
 * removed one with no member left and nothing draining (and saves); true when it
 * did. */
bool tenants_after_leave(struct tenants *ts, struct ledger_tenant *t);
/* Removes the removed tenants with no member left and nothing draining (their
 * memory drained since their last member left); how many it removed. */
size_t tenants_sweep_removed(struct tenants *ts);
/* Whether a process may join t (HELLO, TENANT_ADMIT) or t may be set (TENANT_SET):
 * not when the configuration removed it. false with msg saying why and what to do. */
bool tenants_joinable(const struct ledger_tenant *t, const struct config *c, char *msg,
                      size_t msg_len);

/* t's settings record (settings_book.h): its members rules, managed memory, fault
 * domain, sources and owner; the defaults when it has none. Never NULL. */
const struct tenant_settings *tenants_settings_of(const struct tenants *ts,
                                                  const struct ledger_tenant *t);

/* "7.50 GiB" etc. into buf; for log lines. */
const char *tenants_size(uint64_t bytes, char *buf, size_t cap);

#endif /* KAIROS_DAEMON_TENANTS_H */
