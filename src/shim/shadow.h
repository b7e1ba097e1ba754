/* shadow.h - shim-owned copies of the RM parameters the driver reads.
 *
 * The shim charges what an RM call allocates. If the driver read the
 * application's own memory, another thread or a signal handler could change a
 * size between what the shim read and what the driver read (or between the
 * driver's reply and the shim's read of it), and decide what is charged. So for
 * every RM escape on an NVIDIA descriptor whose effect the shim records (RM_ALLOC
 * with its class's parameters, RM_FREE, VID_HEAP_CONTROL, RM_ALLOC_MEMORY,
 * RM_DUP_OBJECT, RM_MAP_MEMORY, ... : every escape of at most SHADOW_ARG_MAX
 * bytes, the RM_CONTROL of NV0000 EXPORT_OBJECTS_TO_FD with its parameters, and
 * the IOCTL_XFER_CMD header that wraps one; and the version handshake, whose answer
 * decides whether the shim reads any of them: driver_check.h), the shim copies the
 * argument (and the allocation's parameters) into its own memory, points the
 * call at the copy, lets the driver read and answer the copy, and then copies
 * the reply back to the application. The shim decides and records from the copy
 * alone: what is charged is exactly what the driver was asked for and answered.
 *
 * Copies in go through process_vm_readv (app_memory.h): an unreadable
 * argument fails the call with EFAULT, as the driver would, without reaching the
 * driver. Copies back go through process_vm_writev; memory the application
 * unmapped meanwhile is left as it is.
 *
 * Thread rules: a struct shadow_call lives on the calling thread's stack (so a
 * signal handler's nested call has its own); no locks, no allocation.
 */
#ifndef KAIROS_SHIM_SHADOW_H
#define KAIROS_SHIM_SHADOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rm_abi.h"

#define SHADOW_ARG_MAX 256u    /* the largest escape argument copied */
#define SHADOW_PARAMS_MAX 2128u /* the largest parameters copied (an RM_ALLOC class's,
                                 * EXPORT_OBJECTS_TO_FD's) */

struct shadow_call {
    int pid;                 /* the caller's pid (set before shadow_capture; 0: getpid) */
    bool active;             /* the driver is called with the copy */
    bool xfer;               /* the copy is an IOCTL_XFER_CMD header + inner argument */
    uint32_t inner_req;      /* the call itself (XFER unwrapped) */
    size_t inner_len;
    void *app_arg;           /* the application's argument (the header for XFER) */
    void *app_inner;         /* the application's inner argument */
    uint64_t app_params;     /* the application's RM_ALLOC parameter pointer (0: none) */
    size_t params_off;       /* offset of the parameter pointer in the inner argument */
    size_t params_len;       /* bytes of parameters copied (0: none) */
    struct rm_xfer_args header;
    _Alignas(8) uint8_t inner[SHADOW_ARG_MAX];
    _Alignas(8) uint8_t params[SHADOW_PARAMS_MAX];
};

/* Copies the argument of request on a non-UVM NVIDIA descriptor into s.
 * Returns 0 when s->active (call the driver with shadow_arg(s)), 0 with
 * !s->active when the call needs no copy, or -EFAULT when the argument could
 * not be read (fail the call with EFAULT; the driver is not called). */
int shadow_capture(struct shadow_call *s, uint32_t request, void *arg);
/* What to pass the driver: the copy when active, else arg. */
void *shadow_arg(struct shadow_call *s, void *arg);
/* The inner argument as the shim owns it (XFER unwrapped); NULL when inactive. */
uint8_t *shadow_inner(struct shadow_call *s);
/* After the driver answered (or the shim answered for it): copies the reply
 * back into the application's memory, its own pointers restored. */
void shadow_reply(const struct shadow_call *s);
/* Whether [p, p + len) lies in the shim's own copy (readable with memcpy). */
bool shadow_owns(const struct shadow_call *s, const void *p, size_t len);

#endif /* KAIROS_SHIM_SHADOW_H */
