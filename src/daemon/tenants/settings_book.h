/* settings_book.h - what kairosd keeps with a tenant besides its memory (the ledger's,
 * memory/ledger.h) and its compute policies (compute_book.h), joined to it by the
 * tenant's id (ledger_tenant.id, never reused by a kairosd): its members rules, its
 * managed-memory policy, its fault domain and SM share there, the source of each of its settings
 * (quotas and compute policies included: struct tenant_sources), and the owner of an
 * ephemeral tenant. A book of one entry per tenant that has any of those (struct
 * settings_book); what they mean, their precedence and their only writes are the
 * registry's (registry.h), but for the owner's liveness, which transport/owners.c
 * watches; membership, space mode, the audit, the metrics and `kairos ps` read them.
 *
 * A tenant without an entry has the defaults (no rules, managed memory refused, no
 * fault domain, every source unset, no owner): settings_book_of never fails. An
 * entry is made by the first write and goes with its tenant (settings_book_drop,
 * tenants.c), so the book holds at most SETTINGS_BOOK_MAX entries (an id book,
 * id_book.h: a lookup is a binary search). Each record is allocated on its own, so a
 * pointer to it stays valid while other tenants come and go.
 *
 * Pure: no I/O, no globals.
 * Thread rules: a struct settings_book belongs to one thread (kairosd's loop: the
 * struct tenants, tenants.h, holds kairosd's).
 */
#ifndef KAIROS_DAEMON_SETTINGS_BOOK_H
#define KAIROS_DAEMON_SETTINGS_BOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/base/id_book.h"
#include "daemon/config/members_config.h"
#include "daemon/config/setting_source.h"
#include "kairos/proto.h"

#define SETTINGS_BOOK_MAX KAIROS_MAX_TENANTS /* as many as the ledger's tenants */

/* One tenant's record. */
struct tenant_settings {
    uint32_t tenant;               /* its tenant's id */
    struct member_rules members;   /* who may join (members_config.h; decided by members.h) */
    bool managed_charge;           /* managed memory allowed and charged (else refused) */
    char fault_domain[KAIROS_NAME_MAX]; /* space mode's domain (registry.h); "" none */
    uint8_t sms_pct;               /* sms: of the configuration, its MPS clients' active
                                    * thread percentage (1-100); 0: not set, all SMs */
    struct tenant_sources src;     /* where each setting came from (setting_source.h) */
    uint32_t owner_pid;            /* ephemeral: the kairos run process that created it */
    bool owner_alive;              /* an ephemeral tenant goes when its owner and members
                                    * are gone (transport/owners.c watches it) */
};

/* The book's entry: the record apart, so that the book's moves do not move it. */
struct settings_entry {
    uint32_t tenant;
    struct tenant_settings *rec;
};
struct settings_book {
    struct id_book ids; /* of struct settings_entry (id_book.h) */
};

void settings_book_init(struct settings_book *b);
void settings_book_fini(struct settings_book *b);
/* tenant's record, or the defaults (a shared record never written) when it has none;
 * never NULL. */
const struct tenant_settings *settings_book_of(const struct settings_book *b, uint32_t tenant);
/* tenant's record to change, or NULL when it has none. */
struct tenant_settings *settings_book_entry(struct settings_book *b, uint32_t tenant);
/* tenant's record to change, made with the defaults when it has none: 0, -ENOSPC (a
 * new entry beyond SETTINGS_BOOK_MAX) or -ENOMEM (*out NULL, nothing changes). */
int settings_book_get(struct settings_book *b, uint32_t tenant, struct tenant_settings **out);
/* The tenant is gone: its record, if any, goes. */
void settings_book_drop(struct settings_book *b, uint32_t tenant);

#endif /* KAIROS_DAEMON_SETTINGS_BOOK_H */
