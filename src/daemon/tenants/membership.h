/* membership.h - kairosd's side of membership requests, apart from the socket code
 * (handle_members.c only sends what these return): which tenant a HELLO joins, TENANT_ADMIT
 * and TENANT_MEMBERS, with the admissions they keep (members.h) and their file
 * (admissions_file.h). Each answer is a tenant or 0, or a KAIROS_ERR_* code with a
 * message saying what to do; refusals are logged here.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_MEMBERSHIP_H
#define KAIROS_DAEMON_MEMBERSHIP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/config/config.h"
#include "daemon/tenants/members.h"
#include "daemon/tenants/tenants.h"

struct membership {
    struct tenants *ts;
    const struct config *cfg;
    struct admissions admissions;
    char path[PATH_MAX + 16];  /* STATE.admissions */
};

/* The peer as SO_PEERCRED gave it. */
struct peer_cred {
    uint32_t pid, uid, gid;
    const char *cgroup;        /* its cgroup when it connected ("" unknown): members_is_admin */
};

/* Loads the admissions kept from before a restart (logged). */
void membership_init(struct membership *m, struct tenants *ts, const struct config *cfg);
void membership_fini(struct membership *m);

/* HELLO for tenant asked ("" with KAIROS_HELLO_PLACE): the tenant the peer joins
 * (the one an admission or a cgroups rule binds it to, else asked), or NULL with
 * *code (NO_TENANT, PERMISSION) and msg. */
struct ledger_tenant *membership_hello(struct membership *m, const struct peer_cred *p,
                                       const char *asked, uint32_t *code, char *msg,
                                       size_t msg_len);

/* TENANT_ADMIT: 0 or a KAIROS_ERR_* code with msg. */
int membership_admit(struct membership *m, const struct peer_cred *p,
                     const struct kairos_tenant_admit *a, char *msg, size_t msg_len);

/* TENANT_MEMBERS from an administrator (checked by the caller): 0 or a code. */
int membership_set_rules(struct membership *m, const struct peer_cred *p,
                         const struct kairos_tenant_members *r, char *msg, size_t msg_len);

/* The tenant was removed: its admissions go. */
void membership_tenant_removed(struct membership *m, const char *tenant);

#endif /* KAIROS_DAEMON_MEMBERSHIP_H */
