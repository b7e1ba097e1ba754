/* state.h - the state file: tenants created at run time (kairos run --mem,
 * TENANT_SET), so that a restarted kairosd still knows them when their processes
 * reattach. Holdings are not stored: the reattaching processes report them, so
 * nothing is counted twice and processes that died meanwhile count nothing.
 *
 * JSON (jansson): {"version": 1, "tenants": [{"name": "job", "ephemeral": false,
 * "quota": {"0": 8589934592}, "compute": {"0": {"share_ppm": 300000,
 * "limit_ppm": 500000, "priority": "latency"}}}]} ("compute" only for a tenant
 * with compute policies; limit_ppm 0: none). Written atomically (temp file, fsync,
 * rename, fsync of the directory). A file that cannot be read as such is set aside
 * as PATH.corrupt-<unix time> and reported; the daemon goes on without it. A bad
 * compute policy (malformed, out of range, share above limit, a GPU the node
 * lacks) is refused alone: the tenant and the rest of the file are kept.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_STATE_H
#define KAIROS_DAEMON_STATE_H

#include <stddef.h>

#include "daemon/ledger.h"

/* Writes every tenant without LEDGER_TENANT_CONFIG. 0 or -errno (err says why). */
int state_save(const char *path, const struct ledger *l, char *err, size_t err_len);

/* Told of each compute policy refused alone (msg names the tenant, the GPU, what
 * is wrong); ctx as given to state_load. */
typedef void (*state_warn_fn)(void *ctx, const char *msg);

/* Adds the file's tenants to l (skipping names l already has: the configuration
 * wins), with their compute policies (a refused one is told to warn, may be NULL).
 * Returns the number of tenants added; 0 when there is no file; -EINVAL when the
 * file is corrupt, after renaming it to set_aside (err says what and where). */
int state_load(const char *path, struct ledger *l, state_warn_fn warn, void *warn_ctx, char *err,
               size_t err_len, char *set_aside, size_t set_aside_len);

#endif /* KAIROS_DAEMON_STATE_H */
