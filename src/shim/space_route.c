/* space_route.c - getenv answered from kairosd's route for the MPS names (see
 * space_route.h). */
#include "shim/space_route.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim/settings.h"

extern char **environ;

static struct kairos_routed sr_route;
static atomic_bool sr_ready;
static atomic_bool sr_said;
static char sr_pct[12], sr_prio[12];
static _Atomic(space_route_registrar *) sr_register;

void space_route_set_registrar(space_route_registrar *fn)
{
    atomic_store(&sr_register, fn);
}

void space_route_set(const struct kairos_routed *r)
{
    if (atomic_load_explicit(&sr_ready, memory_order_acquire))
        return; /* set once: libcuda may have read it */
    sr_route = *r;
    snprintf(sr_pct, sizeof sr_pct, "%u", r->thread_pct);
    snprintf(sr_prio, sizeof sr_prio, "%u", r->priority);
    atomic_store_explicit(&sr_ready, true, memory_order_release);
}

/* Waits (bounded) for the control daemon's pipe in dir: it was started just now. */
static void wait_for_pipe(const char *dir)
{
    char path[KAIROS_ROUTE_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/control", dir);
    struct stat st;
    for (int waited = 0; waited < SPACE_ROUTE_WAIT_MS && stat(path, &st); waited += 10)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
}

static const char *mps_answer(const char *name, const char *env)
{
    const struct kairos_routed *r = &sr_route;
    if (!strcmp(name, "CUDA_MPS_PIPE_DIRECTORY")) {
        if (!atomic_exchange(&sr_said, true)) {
            wait_for_pipe(r->pipe_dir);
            if (settings_get()->log_stderr)
                dprintf(2, "kairos[%d]: space: fault domain %s, MPS pipe %s, active thread "
                        "percentage %u, priority %u\n", (int)getpid(), r->domain, r->pipe_dir,
                        r->thread_pct, r->priority);
        }
        return r->pipe_dir;
    }
    if (!strcmp(name, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"))
        return sr_pct;
    if (!strcmp(name, "CUDA_MPS_CLIENT_PRIORITY"))
        return sr_prio;
    return env;
}

const char *space_route_answer(const char *name, const char *env)
{
    space_route_registrar *reg = atomic_load(&sr_register);
    if (!reg)
        return env; /* not loaded as a tenant's shim */
    if (!atomic_load_explicit(&sr_ready, memory_order_acquire) && reg() < 0)
        return env; /* no tenant's process, or refused (the driver's files are too) */
    if (!atomic_load_explicit(&sr_ready, memory_order_acquire))
        return env; /* a kairosd of before, or down with on_daemon_down: open */
    if (sr_route.mode == KAIROS_ROUTE_MPS)
        return mps_answer(name, env);
    size_t n = strlen(sr_route.pipe_dir);
    if (!strcmp(name, "CUDA_MPS_PIPE_DIRECTORY") && env && n &&
        !strncmp(env, sr_route.pipe_dir, n))
        return NULL; /* no domain's server for a process of none */
    return env;
}
