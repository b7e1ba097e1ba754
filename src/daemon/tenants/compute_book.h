/* compute_book.h - the tenants' compute policies, kept apart from their other records
 * and joined to them by the tenant's id (ledger_tenant.id, never reused by a kairosd):
 * a book of one entry per tenant with a policy on some GPU (struct compute_book), and
 * one tenant's policies, per GPU (struct compute_policies). What a policy means is
 * core/policy.h's and the scheduler's (time/sched.h); which one a tenant has, with its
 * source and the configuration's precedence, is the registry's (registry.h), the only
 * writer of the book; the time-share tick (time/timeshare.c), space mode's client
 * priority (space/client_settings.c), the metrics and `kairos ps` read it.
 *
 * A tenant without a policy anywhere has no entry; a tenant that goes is dropped
 * (compute_book_drop, tenants.c), so the book holds at most COMPUTE_BOOK_MAX entries,
 * sorted by id: a lookup is a binary search.
 *
 * Pure: no I/O, no globals.
 * Thread rules: a struct compute_book belongs to one thread (kairosd's loop: the
 * struct tenants, tenants.h, holds kairosd's).
 */
#ifndef KAIROS_DAEMON_COMPUTE_BOOK_H
#define KAIROS_DAEMON_COMPUTE_BOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/policy.h"
#include "daemon/base/id_book.h"
#include "kairos/proto.h"

#define COMPUTE_BOOK_MAX KAIROS_MAX_TENANTS /* as many as the ledger's tenants */

/* One tenant's compute policies. */
struct compute_policies {
    bool has[KAIROS_MAX_GPUS];               /* a policy on that GPU */
    struct sched_policy pol[KAIROS_MAX_GPUS]; /* checked by policy.c */
};

struct compute_entry {
    uint32_t tenant;
    struct compute_policies c;
};
struct compute_book {
    struct id_book ids; /* of struct compute_entry (id_book.h) */
};

void compute_book_init(struct compute_book *b);
void compute_book_fini(struct compute_book *b);
/* The policies of tenant, or NULL when it has none on any GPU. */
const struct compute_policies *compute_book_find(const struct compute_book *b, uint32_t tenant);
/* tenant's policy on gpu into out; false when it has none there (a GPU beyond
 * KAIROS_MAX_GPUS has none). */
bool compute_book_policy(const struct compute_book *b, uint32_t tenant, unsigned gpu,
                         struct sched_policy *out);
/* Sets (pol) or clears (pol NULL) tenant's policy on gpu; a tenant left without any
 * loses its entry. 0, -EINVAL (gpu >= KAIROS_MAX_GPUS), -ENOSPC (a new entry beyond
 * COMPUTE_BOOK_MAX) or -ENOMEM; a clear never fails. */
int compute_book_set(struct compute_book *b, uint32_t tenant, unsigned gpu,
                     const struct sched_policy *pol);
/* Replaces all of tenant's policies by c (NULL, or none set: the entry goes); what
 * compute_book_find gave, kept, puts a tenant back as it was. 0, -ENOSPC or -ENOMEM. */
int compute_book_put(struct compute_book *b, uint32_t tenant, const struct compute_policies *c);
/* The tenant is gone: its entry, if any, goes. */
void compute_book_drop(struct compute_book *b, uint32_t tenant);

#endif /* KAIROS_DAEMON_COMPUTE_BOOK_H */
