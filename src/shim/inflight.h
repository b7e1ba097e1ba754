/* inflight.h - the RM handles whose allocation or free is in the driver right now.
 *
 * RM object handles are reused: the client chooses hObjectNew, or RM hands out a
 * handle that a free just gave back. The shim records an RM call after the driver
 * answered it (dispatch.h), so a free done in the driver but not yet recorded (one
 * thread) and an allocation that received the same handle and was recorded first
 * (another thread) would have the free's record destroy the new object: its
 * memory released from the charge while the driver holds it (issue 25, item 11).
 * So, under the state lock:
 * - before the driver sees a free (RM_FREE, VID_HEAP_CONTROL FREE) or an
 *   allocation that names its handle, the call registers (client, handle); a call
 *   of another thread on a handle already registered waits until that one is
 *   recorded (inflight_begin_locked says -EBUSY: wait with state_wait), so the
 *   calls on one handle are recorded in the order the driver saw them;
 * - an allocation recorded with a handle that a registered free names (RM chose
 *   the handle, so nothing could wait) proves that free done: the free is marked
 *   superseded, the allocation's record destroys the old object as stale (as it
 *   always did), and the free's own record then destroys nothing.
 * A call registered by this very thread (a signal handler's call inside another
 * call on the same handle) is never waited for.
 *
 * Thread rules: every function needs the state lock (state.h). No allocation: a
 * fixed table; when it is full a call is not registered and is recorded as before.
 */
#ifndef KAIROS_SHIM_INFLIGHT_H
#define KAIROS_SHIM_INFLIGHT_H

#include <stdbool.h>
#include <stdint.h>

#define INFLIGHT_MAX 256

enum inflight_kind {
    INFLIGHT_NONE = 0,
    INFLIGHT_FREE,
    INFLIGHT_ALLOC, /* an allocation (or dup) that names its new handle */
};

/* Registers a call of kind on (client, handle): 0 with *slot its entry (or -1 when
 * the table is full: not registered), or -EBUSY when another thread's call on the
 * same handle is registered (nothing registered: wait and try again). */
int inflight_begin_locked(enum inflight_kind kind, uint32_t client, uint32_t handle, int *slot);

/* An allocation on (client, handle) was recorded: every other registered free of
 * that handle is superseded (the driver had finished it). */
void inflight_allocated_locked(uint32_t client, uint32_t handle, int own_slot);

/* Whether the registered free in slot was superseded (its record must destroy
 * nothing). False for slot -1. */
bool inflight_superseded_locked(int slot);

/* The call in slot was recorded: its entry is freed. True when a call waits for
 * it (wake the waiters: state_wake). Nothing for slot -1. */
bool inflight_end_locked(int slot);

/* How many times a call found its handle busy (tests; read without the lock). */
unsigned long inflight_waits(void);

/* Forgets every entry (a forked child: their threads are the parent's). */
void inflight_reset_locked(void);

#endif /* KAIROS_SHIM_INFLIGHT_H */
