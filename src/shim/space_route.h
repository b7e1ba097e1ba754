/* space_route.h - where a tenant's process finds MPS (space mode, docs/space.md).
 *
 * libcuda asks getenv for CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
 * CUDA_MPS_CLIENT_PRIORITY when it initialises. The shim exports getenv and
 * secure_getenv (read from environ as glibc does) and answers those three names for a
 * tenant's process from kairosd's ROUTED, never from the environment: a process of a
 * fault domain gets its domain's pipe folder (once the control daemon's pipe is
 * there, waited for up to SPACE_ROUTE_WAIT_MS), its thread percentage and priority,
 * and says so once under KAIROS_LOG=stderr ("space: fault domain ..."); a process of
 * no domain keeps its environment's MPS, except a pipe folder inside kairosd's
 * domains' folder, which it does not get. The question registers the process with
 * kairosd first when it has not yet (the registrar memguard.c sets). Other names, and
 * processes that are no tenant's, get the environment's value.
 *
 * Thread rules: the route is set once, at the first registration, before it is read
 * (release/acquire); getenv is thread-safe as glibc's is.
 */
#ifndef KAIROS_SHIM_SPACE_ROUTE_H
#define KAIROS_SHIM_SPACE_ROUTE_H

#include "kairos/proto.h"

#define SPACE_ROUTE_WAIT_MS 5000

/* Registers this tenant's process with kairosd if it has not yet: 0, or < 0 where
 * no route is to be had (not a tenant's process, refused). */
typedef int space_route_registrar(void);
void space_route_set_registrar(space_route_registrar *fn);

/* kairosd's answer to this process's ROUTE (memguard.c, at the first registration). */
void space_route_set(const struct kairos_routed *r);
/* The answer for name (a CUDA_MPS_* name), given the environment's value env. */
const char *space_route_answer(const char *name, const char *env);

#endif /* KAIROS_SHIM_SPACE_ROUTE_H */
