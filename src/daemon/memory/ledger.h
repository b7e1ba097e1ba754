/* ledger.h - the memory ledger: the authority on what each tenant holds on each GPU.
 *
 * A tenant is a named group of processes sharing one quota per GPU. Each process
 * (one connection of a shim) is a member; the ledger tracks what each member holds,
 * including reservations made by CHARGE and not yet settled by COMMIT, so that a
 * member's exit releases exactly what it held, whether or not frees were seen.
 *
 * Rules (the contract of kairos_charge/commit/release in proto.h):
 *  - CHARGE is granted iff held + draining + credit + bytes <= quota, exactly at the
 *    byte (draining: memory of departed members the GPU still holds, set by linger.c);
 *    a granted charge counts at once (as a reservation named by the shim's token).
 *  - Credit (credit.h) is a member's reservation ahead of need: it counts against
 *    the quota like holdings, and is not shown as held.
 *  - COMMIT ok replaces the reservation by the actual size, counted above the
 *    reservation only as far as the quota has room (a shim's word never takes a
 *    tenant above its quota); COMMIT not ok undoes it.
 *  - RELEASE never takes a member below zero.
 *  - A member that reattaches after a daemon restart brings its holdings, counted
 *    as given (the server bounds the process's claim first: reattach.h); the
 *    daemon persists no holdings, so nothing counts twice.
 *  - A quota may be lowered below current holdings: charges are refused until the
 *    holdings drop below it.
 *
 * A tenant's record here holds what the ledger owns: its name, id, flags, quotas
 * (the registry's to write, tenants/registry.h, whatever set them; the ledger reads
 * them), holdings, draining memory, credit, members and refusals. The rest kairosd
 * keeps with a tenant is kept in books by the tenant's id that struct tenants holds:
 * its chargeback counters (state/usage.h), its compute policies
 * (tenants/compute_book.h), and its other settings with the source of each setting
 * and the owner of an ephemeral tenant (tenants/settings_book.h).
 *
 * Pure: no I/O, no logging, no globals; callers log the outcomes.
 * Thread rules: not thread-safe; the daemon uses it from its one loop thread.
 */
#ifndef KAIROS_DAEMON_LEDGER_H
#define KAIROS_DAEMON_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/base/ratelog.h"
#include "daemon/memory/credit_member.h"
#include "kairos/proto.h"

#define LEDGER_TENANT_CONFIG 0x1u    /* declared by the configuration file */
#define LEDGER_TENANT_EPHEMERAL 0x2u /* removed when its last member leaves */
#define LEDGER_TENANT_REMOVED 0x4u   /* no longer in the configuration: kept while its members
                                      * (live or lingering) or its draining memory last, and
                                      * no process may join it (tenants.h) */
#define LEDGER_MAX_TENANTS KAIROS_MAX_TENANTS
#define LEDGER_MAX_RESERVATIONS 256  /* per member, CHARGEs awaiting their COMMIT */

struct ledger_member;

struct ledger_tenant {
    char name[KAIROS_NAME_MAX];
    uint32_t id;
    unsigned flags;
    uint64_t quota[KAIROS_MAX_GPUS];
    uint64_t held[KAIROS_MAX_GPUS];
    uint64_t draining[KAIROS_MAX_GPUS]; /* what departed members held that the GPU has not
                                         * freed yet (linger.c): counts against the quota */
    uint64_t credit[KAIROS_MAX_GPUS]; /* its members' unused credit (credit.h) */
    uint64_t refusals[KAIROS_MAX_GPUS];
    uint64_t requests[KAIROS_MAX_GPUS]; /* handle_memory.c: CREDIT requests and CHARGEs its members
                                         * made (kairos_tenant_grant_requests_total) */
    unsigned n_members;
    bool had_member;
    struct ratelog refusal_log;  /* handle_memory.c: its refusals logged once per interval */
    uint64_t lies[KAIROS_MAX_GPUS]; /* its members' claims beyond what they were granted and
                                     * the quota leaves (handle_memory.c: not counted, logged) */
    struct ratelog lie_log;      /* handle_memory.c: those logged once per interval */
};

struct ledger_resv {
    uint64_t token;
    uint64_t bytes;
    uint32_t gpu;
};

struct ledger_member {
    struct ledger_tenant *tenant;
    uint32_t pid;
    uint64_t held[KAIROS_MAX_GPUS]; /* including pending reservations */
    uint64_t credit[KAIROS_MAX_GPUS]; /* unused credit granted ahead */
    struct credit_member cr;        /* credit.c's record of it (credit_member.h) */
    struct ledger_resv *resv;
    size_t n_resv, cap_resv;
    struct ledger_member *next;     /* the ledger's list of members */
};

struct ledger {
    unsigned n_gpus;
    struct ledger_tenant **tenants;
    size_t n_tenants, cap_tenants;
    struct ledger_member *members;
    uint32_t next_id;
};

/* Outcome of a charge, as GRANT reports it. */
struct ledger_grant {
    bool granted;
    uint64_t quota;
    uint64_t held; /* the tenant's holdings after the charge */
};

int ledger_init(struct ledger *l, unsigned n_gpus);
void ledger_fini(struct ledger *l);

/* Adds a tenant (quota may be NULL: none anywhere). -EEXIST, -EINVAL (name),
 * -ENOSPC (too many tenants), -ENOMEM. */
int ledger_tenant_add(struct ledger *l, const char *name, const uint64_t *quota, unsigned flags,
                      struct ledger_tenant **out);
struct ledger_tenant *ledger_tenant_find(const struct ledger *l, const char *name);
/* Sets one quota; returns 1 if the tenant now holds more than the new quota, 0 if
 * not, -EINVAL for a GPU the node does not have. */
int ledger_tenant_set_quota(struct ledger *l, struct ledger_tenant *t, unsigned gpu,
                            uint64_t bytes);
/* Removes a tenant without members (-EBUSY otherwise). */
int ledger_tenant_remove(struct ledger *l, struct ledger_tenant *t);

/* Joins a process to a tenant. held (may be NULL) is what a reattaching process
 * already holds per GPU; it is counted even above quota. */
int ledger_join(struct ledger *l, struct ledger_tenant *t, uint32_t pid, const uint64_t *held,
                struct ledger_member **out);
/* The member leaves (its process exited or hung up): everything it held is released
 * and reported in freed (may be NULL), its credit with it. The member is freed.
 * Returns the tenant, which the caller may remove if it is ephemeral and empty. */
struct ledger_tenant *ledger_leave(struct ledger *l, struct ledger_member *m, uint64_t *freed);

/* 0 (see out->granted), -EINVAL (GPU out of range or 0 bytes), -ENOSPC (too many
 * reservations awaiting COMMIT), -ENOMEM. A refusal is counted in refusals[gpu]. */
int ledger_charge(struct ledger *l, struct ledger_member *m, unsigned gpu, uint64_t bytes,
                  uint64_t token, struct ledger_grant *out);
/* Settles the reservation named by token on gpu: ok keeps actual bytes, !ok undoes.
 * actual above the reservation (the driver took more, or the shim lies) is counted
 * only as far as the quota has room; *beyond (may be NULL) gets what is not counted.
 * -ENOENT when no such reservation (nothing changes). */
int ledger_commit(struct ledger *l, struct ledger_member *m, unsigned gpu, uint64_t token, bool ok,
                  uint64_t actual, uint64_t *beyond);
/* Releases bytes on gpu; at most what the member holds there (released says how
 * much). Returns -ERANGE when asked for more than held, -EINVAL for a bad GPU. */
int ledger_release(struct ledger *l, struct ledger_member *m, unsigned gpu, uint64_t bytes,
                   uint64_t *released);

/* The first member whose process is pid, or NULL. */
struct ledger_member *ledger_find_pid(const struct ledger *l, uint32_t pid);

/* Checks the ledger's invariant (each tenant's held and credit = the sums of its
 * members', member counts agree); returns 0 or -EPROTO. For tests and debug builds. */
int ledger_check(const struct ledger *l);

/* Tenant names: 1..63 characters of [A-Za-z0-9._-], not starting with '.' or '-'. */
bool ledger_name_valid(const char *name);

#endif /* KAIROS_DAEMON_LEDGER_H */
