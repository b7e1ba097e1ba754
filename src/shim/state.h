/* state.h - the shim's process state: object tree, descriptor table, one lock.
 *
 * One mutex (the state lock) guards the object tree, the mutations of the
 * descriptor table (fdtable.h), the handles in the driver (inflight.h) and the
 * bounding box of the process's NVIDIA mappings. It is held only around
 * bookkeeping, never across a real ioctl, mmap or close; a call that must wait for
 * a handle another thread has in the driver waits on its condition (state_wait,
 * state_wake). pthread_atfork handlers take it around fork() so a child forked
 * while another thread held it does not inherit a locked mutex. The state is
 * created on first use.
 *
 * Thread rules: state_lock (which returns the object tree) and state_unlock
 * bracket every use of the tree and of the fdtable and inflight *_locked functions.
 */
#ifndef KAIROS_SHIM_STATE_H
#define KAIROS_SHIM_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/objtree.h"

/* Takes the state lock; returns the object tree, or NULL when it could not be
 * created (out of memory: the shim then only passes calls through). */
struct objtree *state_lock(void);
void state_unlock(void);
/* With the lock held: waits for state_wake (the lock let go meanwhile). */
void state_wait(void);
/* Wakes every state_wait (the lock held or not). */
void state_wake(void);

/* Grow-only bounding box of the NVIDIA mappings ever made, read without the lock
 * so munmap of unrelated memory costs no lock. */
void state_note_mapping_locked(uint64_t addr, uint64_t len);
bool state_may_hold_mapping(uint64_t addr, uint64_t len);

/* Object tree statistics and fd counts, under the lock. */
void state_stats(struct objtree_stats *stats);
void state_fd_counts(uint32_t *files, uint32_t *descriptors);

/* Throws all state away and starts afresh (tests only: no other thread may be
 * inside the shim). */
void state_reset(void);

#endif /* KAIROS_SHIM_STATE_H */
