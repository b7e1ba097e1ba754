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
 * The other way round, a process that holds another's NVIDIA files says so
 * (INHERITED): found open at its start, received by SCM_RIGHTS (recvmsg is
 * interposed), or taken with pidfd_getfd (interposed). kairosd checks each claim
 * with kcmp(2) and keeps the other process's charge while this one holds them.
 * These reports cost a round trip, only when an NVIDIA file arrives.
 *
 * A report that fails (kairosd down or refusing the claim) never fails the fork; it
 * is said on stderr when the shim logs there. One exception, failing closed (issue
 * 25, item 1): when kairosd follows no more hand-overs for this process's tenant or
 * user (KAIROS_ERR_BUSY), a child it does not know of would keep this process's
 * memory alive uncharged once this process has gone, so the child is killed
 * (SIGKILL) and reaped before fork() returns -1 with errno EAGAIN, as when a
 * process limit is met; it says so on stderr. The child may have run for as long as
 * the report took; its memory is this process's charge meanwhile.
 *
 * Thread rules: shim_fork, inherit_received and inherit_taken run in whichever
 * thread calls, never with the state lock held (the fork report in the parent
 * only); inherit_at_start in the library constructor.
 */
#ifndef KAIROS_SHIM_INHERIT_H
#define KAIROS_SHIM_INHERIT_H

#include <sys/types.h>

#include "shim/real.h"

/* fork(): the real fork, then the parent's report (see above). */
pid_t shim_fork(const struct shim_real *r);

/* At load (the constructor, before main): a named tenant's program that starts
 * with descriptors on NVIDIA files its parent also holds (posix_spawn, vfork, an
 * unreported fork, kept across exec) reports them (INHERITED, EXEC), so that the
 * parent's charge stays while this program holds them. Nothing is sent when none
 * is found (the common case: CUDA opens with O_CLOEXEC) or when they are only this
 * process's own from before an exec (kairosd sees those itself). */
void inherit_at_start(const struct shim_real *r);
/* fds arrived by SCM_RIGHTS on unix socket sock: those on NVIDIA files are
 * reported (INHERITED, RECEIVED) as the socket peer's (SO_PEERCRED). */
void inherit_received(const struct shim_real *r, int sock, const int *fds, size_t n);
/* fd was taken with pidfd_getfd from the process pidfd names: reported the same way. */
void inherit_taken(const struct shim_real *r, int pidfd, int fd);

#endif /* KAIROS_SHIM_INHERIT_H */
