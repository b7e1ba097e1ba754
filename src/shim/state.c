/* state.c - the process state of the shim and its lock.
 *
 * Owns the state lock, its condition (calls waiting for a handle another thread
 * has in the driver: inflight.h), the object tree and the mapping bounding box,
 * and the fork handlers: prepare takes the lock, parent and child release it, so
 * the child's copy is consistent and unlocked (and the child forgets the calls
 * its parent's other threads had in flight). Creation is lazy (pthread_once) so
 * no constructor ordering matters. Holding the lock counts as being inside the
 * shim (reentry.h).
 */
#include "shim/state.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "shim/fdtable.h"
#include "shim/inflight.h"
#include "shim/reentry.h"

static pthread_mutex_t state_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t state_cv = PTHREAD_COND_INITIALIZER;
static pthread_once_t state_once = PTHREAD_ONCE_INIT;
static struct objtree *tree;
static _Atomic uint64_t map_lo = UINT64_MAX, map_hi;

static void state_prepare(void)
{
    pthread_mutex_lock(&state_mutex);
}

static void state_release(void)
{
    pthread_mutex_unlock(&state_mutex);
}

/* The child: the calls in flight were its parent's other threads' (none waits
 * here, and none will end). */
static void state_release_in_child(void)
{
    inflight_reset_locked();
    pthread_cond_init(&state_cv, NULL);
    pthread_mutex_unlock(&state_mutex);
}

static void state_create(void)
{
    tree = objtree_new();
    pthread_atfork(state_prepare, state_release, state_release_in_child);
}

struct objtree *state_lock(void)
{
    reentry_enter(); /* before the lock: a handler never finds it held unmarked */
    pthread_once(&state_once, state_create);
    pthread_mutex_lock(&state_mutex);
    if (!tree)
        tree = objtree_new(); /* a retry after an earlier out-of-memory */
    return tree;
}

void state_unlock(void)
{
    pthread_mutex_unlock(&state_mutex);
    reentry_leave();
}

void state_wait(void)
{
    pthread_cond_wait(&state_cv, &state_mutex);
}

void state_wake(void)
{
    pthread_cond_broadcast(&state_cv);
}

void state_note_mapping_locked(uint64_t addr, uint64_t len)
{
    if (addr < atomic_load(&map_lo))
        atomic_store(&map_lo, addr);
    if (addr + len > atomic_load(&map_hi))
        atomic_store(&map_hi, addr + len);
}

bool state_may_hold_mapping(uint64_t addr, uint64_t len)
{
    uint64_t lo = atomic_load_explicit(&map_lo, memory_order_relaxed);
    uint64_t hi = atomic_load_explicit(&map_hi, memory_order_relaxed);
    return addr < hi && addr + len > lo;
}

void state_stats(struct objtree_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    struct objtree *t = state_lock();
    if (t)
        objtree_stats(t, stats);
    state_unlock();
}

void state_fd_counts(uint32_t *files, uint32_t *descriptors)
{
    state_lock();
    fdtable_counts_locked(files, descriptors);
    state_unlock();
}

void state_reset(void)
{
    state_lock();
    objtree_free(tree);
    tree = objtree_new();
    fdtable_reset_locked();
    inflight_reset_locked();
    atomic_store(&map_lo, UINT64_MAX);
    atomic_store(&map_hi, 0);
    state_unlock();
}
