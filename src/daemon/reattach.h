/* reattach.h - how much of what a reattaching process says it holds kairosd counts.
 *
 * After a restart, a member's shim reattaches (HELLO with REATTACH) and claims
 * what it holds per GPU; the daemon kept no holdings. A claim is the process's
 * word, so it is bounded: never more than the tenant's quota leaves on that GPU
 * (a claim of 1 PiB cannot lock a tenant out beyond its own quota), and never
 * more than the GPU backend reports for that process, when the backend lists the
 * GPU's processes with their memory (NVML; the fake backend in tests).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_REATTACH_H
#define KAIROS_DAEMON_REATTACH_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/gpu.h"
#include "daemon/ledger.h"

/* The bytes of claim to count for pid on GPU g of tenant t (gpu may be NULL: no
 * backend). why says what bounded it, "" when the claim counts whole. */
uint64_t reattach_bound(const struct ledger_tenant *t, unsigned g, uint64_t claim, uint32_t pid,
                        struct gpu_backend *gpu, char *why, size_t why_len);

#endif /* KAIROS_DAEMON_REATTACH_H */
