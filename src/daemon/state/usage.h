/* usage.h - the tenants' chargeback counters, kept here apart from their other records
 * and joined to them by the tenant's id (ledger_tenant.id, never reused by a kairosd):
 * a book of one entry per tenant (struct usage_book), and one tenant's counters, per
 * GPU (struct usage): the GPU time charged to its work (timeshare.c: for a tenant
 * with a compute policy on the GPU, what the scheduler charged it each period, as
 * kairos ps shows; for the others, their processes' measured utilization), and the
 * integral over time of the device memory it held (usage_state.c, every second);
 * when they began; and what the metrics show of them: their values at the last save
 * of the state file, so that no scrape shows a figure a restart could take back, a
 * crash included. The allocations refused are the ledger's counter
 * (ledger_tenant.refusals), saved and restored with these.
 *
 * Saved under "usage" in the state file, per tenant: {"since": 1764921600.5,
 * "gpus": {"0": {"gpu_us": 12000000, "memory_byte_seconds": 1.2e12, "refusals":
 * 3}}} (a GPU only when one of its counters is not 0).
 *
 * Pure: no I/O, no clock (callers pass the time), no globals.
 * Thread rules: a struct usage_book belongs to one thread (kairosd's loop: the
 * struct tenants, tenants.h, holds kairosd's).
 */
#ifndef KAIROS_DAEMON_USAGE_H
#define KAIROS_DAEMON_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/base/id_book.h"
#include "kairos/proto.h"

struct usage {
    double since;                         /* seconds since the epoch; 0: not begun */
    uint64_t gpu_us[KAIROS_MAX_GPUS];     /* GPU time charged, in microseconds */
    double mem_byte_s[KAIROS_MAX_GPUS];   /* held memory over time, in byte-seconds */
    uint64_t shown_gpu_us[KAIROS_MAX_GPUS];   /* the same as of the last save: what */
    double shown_mem_byte_s[KAIROS_MAX_GPUS]; /* the metrics show */
};

/* The counters begin now (seconds since the epoch) unless they have begun. */
void usage_begin(struct usage *u, double now);
/* us of GPU time charged on gpu (saturating; a GPU beyond KAIROS_MAX_GPUS ignored). */
void usage_add_gpu(struct usage *u, unsigned gpu, uint64_t us);
/* held[g] bytes held on each of n_gpus GPUs for dt_s seconds (dt_s <= 0 or not
 * finite: nothing). */
void usage_add_memory(struct usage *u, const uint64_t *held, unsigned n_gpus, double dt_s);
/* What a successful save wrote becomes what the metrics show. */
void usage_publish(struct usage *u);

/* Every tenant's counters, by tenant id (sorted by it). A tenant without an entry has
 * counters not begun (all 0); the entry of a tenant gone stays until usage_book_keep. */
struct usage_entry {
    uint32_t tenant;
    struct usage u;
};
struct usage_book {
    struct id_book ids; /* of struct usage_entry (id_book.h) */
};

void usage_book_init(struct usage_book *b);
void usage_book_fini(struct usage_book *b);
/* The counters of tenant, or NULL when it has none yet. */
const struct usage *usage_book_find(const struct usage_book *b, uint32_t tenant);
/* The counters of tenant, made (not begun) when it has none; NULL when out of memory. */
struct usage *usage_book_get(struct usage_book *b, uint32_t tenant);
/* Drops the counters of every tenant not among the n ids of live (any order). 0, or
 * -ENOMEM (then nothing is dropped). */
int usage_book_keep(struct usage_book *b, const uint32_t *live, size_t n);
/* usage_publish for every tenant of the book. */
void usage_book_publish(struct usage_book *b);

struct json_t;
/* The counters and refusals (per GPU, n_gpus of them) as saved, a new reference;
 * NULL when out of memory. */
struct json_t *usage_json(const struct usage *u, const uint64_t *refusals, unsigned n_gpus);
/* Reads a saved entry into u (live and shown alike) and refusals, checking every
 * part (a GPU the node has, counters that are whole numbers or for memory finite
 * numbers, none negative, "since" a time after 2000 and not after now + a day); 0,
 * or -EINVAL with why naming the first part refused (then u and refusals hold a
 * mix: the caller drops them, usage_state.h). */
int usage_parse(struct json_t *j, unsigned n_gpus, double now, struct usage *u,
                uint64_t *refusals, char *why, size_t why_len);

#endif /* KAIROS_DAEMON_USAGE_H */
