/* inflight.c - the RM handles whose allocation or free is in the driver right now
 * (see inflight.h). Owns one fixed table, guarded by the state lock. */
#include "shim/inflight.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

struct inflight {
    bool used;
    bool superseded;
    enum inflight_kind kind;
    uint32_t client, handle;
    pthread_t owner;
};

static struct inflight table[INFLIGHT_MAX];
static unsigned waiters; /* calls that found their handle busy since the last end */
static atomic_ulong waits;

static bool same_key(const struct inflight *e, uint32_t client, uint32_t handle)
{
    return e->used && e->client == client && e->handle == handle;
}

int inflight_begin_locked(enum inflight_kind kind, uint32_t client, uint32_t handle, int *slot)
{
    *slot = -1;
    int free_slot = -1;
    pthread_t self = pthread_self();
    for (int i = 0; i < INFLIGHT_MAX; i++) {
        if (same_key(&table[i], client, handle) && !pthread_equal(table[i].owner, self)) {
            waiters++;
            atomic_fetch_add(&waits, 1);
            return -EBUSY;
        }
        if (!table[i].used && free_slot < 0)
            free_slot = i;
    }
    if (free_slot < 0)
        return 0;
    table[free_slot] = (struct inflight){.used = true, .kind = kind, .client = client,
                                         .handle = handle, .owner = self};
    *slot = free_slot;
    return 0;
}

void inflight_allocated_locked(uint32_t client, uint32_t handle, int own_slot)
{
    for (int i = 0; i < INFLIGHT_MAX; i++)
        if (i != own_slot && same_key(&table[i], client, handle) &&
            table[i].kind == INFLIGHT_FREE)
            table[i].superseded = true;
}

bool inflight_superseded_locked(int slot)
{
    return slot >= 0 && slot < INFLIGHT_MAX && table[slot].used && table[slot].superseded;
}

bool inflight_end_locked(int slot)
{
    if (slot < 0 || slot >= INFLIGHT_MAX)
        return false;
    table[slot].used = false;
    bool wake = waiters > 0;
    waiters = 0;
    return wake;
}

unsigned long inflight_waits(void)
{
    return atomic_load(&waits);
}

void inflight_reset_locked(void)
{
    memset(table, 0, sizeof table);
    waiters = 0;
}
