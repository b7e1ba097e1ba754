/* real.h - the functions below the shim: libc (or the next preloaded library).
 *
 * Every interposed call ends in the real function of the same name. The table is
 * generated from interposed.h, resolved once with dlsym(RTLD_NEXT), and passed to
 * the dispatch (dispatch.h), so unit tests can hand the dispatch a fake driver
 * instead. A symbol dlsym cannot find, or a call made while this thread is itself
 * resolving the table (dlsym recursing into an interposed function), goes to a
 * raw-syscall fallback, so no path ever calls through a NULL pointer.
 *
 * Thread rules: shim_real_get() is thread-safe and lock-free once resolved.
 */
#ifndef KAIROS_SHIM_REAL_H
#define KAIROS_SHIM_REAL_H

#include "shim/interposed.h"

#define SHIM_REAL_TYPEDEF(ret, name, params) typedef ret shim_##name##_fn params;
SHIM_INTERPOSED(SHIM_REAL_TYPEDEF)
SHIM_HELPERS(SHIM_REAL_TYPEDEF)
#undef SHIM_REAL_TYPEDEF

struct shim_real {
#define SHIM_REAL_SLOT(ret, name, params) shim_##name##_fn *name;
    SHIM_INTERPOSED(SHIM_REAL_SLOT)
    SHIM_HELPERS(SHIM_REAL_SLOT)
#undef SHIM_REAL_SLOT
};

/* The resolved table (resolving it on first use). Never NULL; no slot is NULL. */
const struct shim_real *shim_real_get(void);

/* The raw-syscall table used as fallback; also fills holes in a fake table. */
const struct shim_real *shim_real_fallback(void);

/* Copies the fallback into every NULL slot of t (for partial fake tables). */
void shim_real_fill(struct shim_real *t);

#endif /* KAIROS_SHIM_REAL_H */
