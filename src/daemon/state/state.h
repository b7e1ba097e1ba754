/* state.h - the state file: tenants created at run time (kairos run --mem,
 * TENANT_SET), and the settings an administrator made at run time for configured
 * tenants (a quota on a GPU the configuration does not declare: registry.h), so
 * that a restarted kairosd still knows them when their processes reattach. Holdings
 * are not stored: the reattaching processes report them, so
 * nothing is counted twice and processes that died meanwhile count nothing. The
 * exception: departed members whose charge lingers for a holder of their files, and
 * the hand-overs that keep them, are stored under "handovers" (handovers_state.h),
 * since those processes never reattach. Every tenant's chargeback counters, the
 * configuration's included, are stored under "usage" (usage_state.h), from and into
 * the book of them the caller gives (usage.h; none: the section is neither written
 * nor read): a save publishes them to the metrics.
 *
 * JSON (jansson): {"version": 1, "tenants": [{"name": "job", "ephemeral": false,
 * "quota": {"0": 8589934592}, "compute": {"0": {"share_ppm": 300000,
 * "limit_ppm": 500000, "priority": "latency"}}, "fault_domain": "infer"}]} ("compute"
 * only for a tenant with compute policies, limit_ppm 0: none; "fault_domain" only for
 * one set at run time, absent: none). Written atomically (temp file, fsync,
 * rename, fsync of the directory); a write that fails leaves the previous file, and
 * the caller undoes the change it meant to record. A file that cannot be read as
 * such (not JSON, another version, larger than STATE_MAX_BYTES, not a regular
 * file) is set aside as PATH.corrupt-<unix time> and reported; the daemon goes on
 * without it. One bad entry (malformed, a quota on a GPU the node no longer has, a
 * run-time tenant named twice, a tenant beyond LEDGER_MAX_TENANTS) is set aside
 * alone, logged and written to PATH.set-aside-<unix time> (a state file of its
 * own); the other entries are loaded. An entry for a tenant the configuration
 * declares gives it its quotas on the GPUs the configuration does not declare; its
 * compute policies, members rules and fault domain, the configuration's, are dropped
 * (warned). A bad compute policy (malformed, out of range, share above limit, a GPU
 * the node lacks), members rules or fault domain (not a string, not a valid name,
 * too long) is refused alone: the tenant (in no fault domain) and the rest of the
 * file are kept.
 *
 * The settings themselves live above the state file (the registry's, tenants/
 * registry.h): a save reads them, and a load hands back what it found, through the
 * callbacks of struct state_settings_io that the caller passes, so that this module
 * knows their saved form and never where or how they are kept.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_STATE_H
#define KAIROS_DAEMON_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/policy.h"
#include "daemon/config/members_config.h"
#include "daemon/memory/ledger.h"
#include "daemon/state/usage.h"

/* The largest state file read or written: LEDGER_MAX_TENANTS run-time tenants with
 * a quota and a compute policy on every GPU take under half of it. */
#define STATE_MAX_BYTES (16 << 20)

/* A tenant's settings as its entry in the state file holds them. */
struct state_settings {
    bool has_quota[KAIROS_MAX_GPUS];  /* a quota written (saved) or read (loaded) there */
    uint64_t quota[KAIROS_MAX_GPUS];
    bool has_compute[KAIROS_MAX_GPUS];
    struct sched_policy compute[KAIROS_MAX_GPUS];
    bool has_members;
    struct member_rules members;
    bool managed_charge;               /* false: refuse, the default */
    char fault_domain[KAIROS_NAME_MAX]; /* "": none */
    uint32_t owner_pid;                /* an ephemeral tenant's owner; 0: none */
};

/* Where the tenants' settings are kept: the caller's (tenants/registry.h gives them). */
struct state_settings_io {
    /* What a save writes of t: the settings set at run time (every quota of a tenant
     * the configuration does not declare); false when a configured tenant has none
     * (then it is not written). */
    bool (*get)(void *ctx, const struct ledger *l, const struct ledger_tenant *t,
                struct state_settings *out);
    /* What a load read for t, a tenant it added (all of s) or one the configuration
     * declares (only s's quotas on GPUs the configuration does not declare), taken as
     * set at run time. */
    void (*put)(void *ctx, struct ledger *l, struct ledger_tenant *t,
                const struct state_settings *s);
    void *ctx;
};

/* Writes every tenant without LEDGER_TENANT_CONFIG, and the settings of the others
 * that were made at run time (registry.h), but skip (may be NULL: a tenant about
 * to be removed); settings are read through io; no chargeback counters. 0 or
 * -errno (err says why); on failure the previous file is left as it was. */
int state_save(const char *path, const struct ledger *l, const struct state_settings_io *io,
               const struct ledger_tenant *skip, char *err, size_t err_len);
struct json_t;
/* state_save with the hand-overs' section (handovers_state.h; may be NULL: none). */
int state_save_all(const char *path, const struct ledger *l, const struct state_settings_io *io,
                   const struct ledger_tenant *skip, struct json_t *handovers, char *err,
                   size_t err_len);
/* state_save_all with the chargeback counters of usage (may be NULL: none) under
 * "usage", that says in usage_saved (may be NULL) whether they were written: a state
 * that would exceed STATE_MAX_BYTES with them is written without them (the tenants
 * matter more; the counters wait for a save with room), and then usage_saved is
 * false. */
int state_save_counted(const char *path, const struct ledger *l,
                       const struct state_settings_io *io, const struct usage_book *usage,
                       const struct ledger_tenant *skip,
                       struct json_t *handovers, bool *usage_saved, char *err,
                       size_t err_len);

/* Told of each compute policy refused alone (msg names the tenant, the GPU, what
 * is wrong); ctx as given to state_load. */
typedef void (*state_warn_fn)(void *ctx, const char *msg);

/* Adds the file's tenants to l, their settings handed to io (not the chargeback
 * counters: state_load_all). Each entry refused alone (see above: names l already
 * has among them, the configuration winning) and each refused compute policy is told
 * to warn (may be NULL); the entries refused go to PATH.set-aside-<time>, named in
 * set_aside. Returns the number of tenants
 * added; 0 when there is no file; -EINVAL when the file is unreadable as a whole,
 * after renaming it to PATH.corrupt-<time>, named in set_aside (err says what and
 * where); another -errno when it cannot be read (err says why). */
int state_load(const char *path, struct ledger *l, const struct state_settings_io *io,
               state_warn_fn warn, void *warn_ctx, char *err, size_t err_len, char *set_aside,
               size_t set_aside_len);
struct handovers_saved;
/* state_load that also reads the chargeback counters into usage (may be NULL: not
 * read), with the refusals into l (usage_state.h), and the hand-overs' section into
 * saved (may be NULL; free it with handovers_saved_free): checked for form only, its
 * entries refused alone; a malformed section loses only the hand-overs. */
int state_load_all(const char *path, struct ledger *l, const struct state_settings_io *io,
                   struct usage_book *usage, struct handovers_saved *saved, state_warn_fn warn,
                   void *warn_ctx, char *err, size_t err_len, char *set_aside,
                   size_t set_aside_len);

/* state_load's work on text in memory (for the fuzz target): the entries refused
 * are appended to aside (a JSON array, may be NULL). The number of tenants added,
 * or -EINVAL / -EFBIG / -ENOMEM with err saying why. */
int state_parse(const char *text, size_t len, struct ledger *l,
                const struct state_settings_io *io, state_warn_fn warn, void *warn_ctx,
                struct json_t *aside, char *err, size_t err_len);
/* state_parse that also reads the counters into usage and the hand-overs' section into
 * saved (each may be NULL), as state_load_all does. */
int state_parse_all(const char *text, size_t len, struct ledger *l,
                    const struct state_settings_io *io, struct usage_book *usage,
                    state_warn_fn warn, void *warn_ctx, struct json_t *aside,
                    struct handovers_saved *saved, char *err, size_t err_len);

#endif /* KAIROS_DAEMON_STATE_H */
