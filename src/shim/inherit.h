/* inherit.h - telling kairosd who else holds this process's NVIDIA files.
 *
 * The driver frees an RM client's memory at the last close of its open file, so a
 * child forked while this process has NVIDIA files open keeps that memory alive
 * after this process has gone. fork() is interposed: in the parent, after a
 * successful fork and before fork() returns, a process of a named tenant that has
 * NVIDIA files open reports the child (FORKED, proto.h) and waits for kairosd's
 * answer, so kairosd checks in /proc, while the parent is surely alive, that the
 * child is its child. When this process's member departs, kairosd keeps its charge
 * while the child (or one the child hands them on to) holds a file of the driver
 * (docs/memory.md). The child itself does nothing here: it may exec or exit at
 * once, and it need not run the shim at all.
 *
 * In both processes, the NVIDIA files open at the fork are marked shared
 * (fdtable.h): the last close of one here is not the driver's last close, so its
 * memory is not released from the charge then; it stays charged to this process
 * until it exits (erring towards charging: kairosd then keeps it while a holder
 * has a driver file open).
 *
 * A report that fails (kairosd down or refusing) never fails the fork; it is said
 * on stderr when the shim logs there.
 *
 * Thread rules: shim_fork runs in whichever thread forks, never with the state
 * lock held; the report happens in the parent only.
 */
#ifndef KAIROS_SHIM_INHERIT_H
#define KAIROS_SHIM_INHERIT_H

#include <sys/types.h>

#include "shim/real.h"

/* fork(): the real fork, then the parent's report (see above). */
pid_t shim_fork(const struct shim_real *r);

#endif /* KAIROS_SHIM_INHERIT_H */
