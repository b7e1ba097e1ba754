/* dispatch.h - what the shim does for each interposed call.
 *
 * Each function performs one call through a table of real functions (real.h:
 * the libc below us, or a fake driver in tests) and feeds what it did to the
 * core: descriptor classification (fdtable.h), decoding (core/rm_decode.h) and
 * the object tree (core/objtree.h), and to the tracer when tracing. Around the
 * call it asks and tells the modules that act on it: the driver's version check
 * (driver_check.h), quotas (memguard.h; managed mappings, uvm_managed.h) on the
 * shim's copy of the argument (shadow.h), handles in the driver (inflight.h),
 * which GPU a device is (gpumap.h), legacy CUDA IPC (ipc.h), the reports of forks
 * and of inherited, received and taken files (inherit.h), time control's hooks
 * (timectl.h), and a vfork child's hands-off rule (borrowed_vm.h).
 *
 * Failure rule: the real call is made as the application asked (under a quota,
 * an RM call the shim records is made on the shim's copy of its argument,
 * shadow.h, with the same bytes; an unreadable one fails with EFAULT as the
 * driver would fail it) and its return value and errno are returned unchanged,
 * with two exceptions, both by policy: a device-memory allocation beyond the
 * tenant's quota, or refused by kairosd, is answered as the driver answers an
 * out-of-memory (memguard.h), and an allocation that finds kairosd restarting
 * waits for it a bounded time (at most 5 s) before that refusal. The shim's own
 * work happens around the call, never holds the state lock across it, preserves
 * errno, and on any failure of its own (out of memory, unreadable bytes) records
 * less: it never fails or aborts a call for a fault of its own.
 * Calls on descriptors that are not NVIDIA nodes pass straight through; after
 * the first ioctl/mmap on a descriptor (one fstat) that costs one atomic load.
 *
 * Thread rules: all functions are thread-safe. close, close_range and closefrom
 * are async-signal-safe where it matters: a close in a signal handler that
 * interrupted the shim on its thread (reentry.h), or in a forked child before its
 * next GPU call, detaches the descriptor without a lock or an allocation and
 * leaves the rest to the next call that leaves the shim (issue 25, item 11).
 */
#ifndef KAIROS_SHIM_DISPATCH_H
#define KAIROS_SHIM_DISPATCH_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "shim/real.h"

/* Which open entry point the application called. */
enum shim_open_fn {
    SHIM_OPEN,
    SHIM_OPEN64,
    SHIM_OPENAT,
    SHIM_OPENAT64,
    SHIM_OPEN_2,     /* __open_2 (_FORTIFY_SOURCE) */
    SHIM_OPEN64_2,
    SHIM_OPENAT_2,
    SHIM_OPENAT64_2,
};

/* True when open's flags say a mode argument follows (O_CREAT, O_TMPFILE). */
bool shim_open_has_mode(int flags);

/* How fcntl's third argument is passed for a command. */
enum shim_fcntl_arg {
    SHIM_FCNTL_NONE,
    SHIM_FCNTL_INT,
    SHIM_FCNTL_PTR, /* pointers, and commands we do not know (as glibc reads them) */
};
enum shim_fcntl_arg shim_fcntl_arg_kind(int cmd);

int shim_open(const struct shim_real *r, enum shim_open_fn fn, int dirfd, const char *path,
              int flags, mode_t mode);
int shim_close(const struct shim_real *r, int fd);
int shim_dup(const struct shim_real *r, int fd);
int shim_dup2(const struct shim_real *r, int fd, int fd2);
int shim_dup3(const struct shim_real *r, int fd, int fd2, int flags);
/* fcntl/fcntl64: iarg is used for SHIM_FCNTL_INT commands, parg for pointer ones. */
int shim_fcntl(const struct shim_real *r, bool is64, int fd, int cmd, int iarg, void *parg);
int shim_ioctl(const struct shim_real *r, int fd, unsigned long request, void *arg);
void *shim_mmap(const struct shim_real *r, bool is64, void *addr, size_t len, int prot,
                int flags, int fd, off64_t off);
int shim_munmap(const struct shim_real *r, void *addr, size_t len);

/* Closes and opens that do not go through the calls above inside libc (glibc's
 * fclose, fopen and freopen use its internal open and close): each forgets what
 * was known of the descriptors it closes before the real call, and learns the
 * ones it opens after it. close_range with CLOSE_RANGE_CLOEXEC closes nothing
 * now (exec does). recvmsg learns the descriptors SCM_RIGHTS delivers (any
 * cached classification of their numbers is stale). Not interposable, so not
 * seen: raw syscalls (syscall(SYS_openat2), SYS_close, SYS_close_range); the
 * dispatch revalidates a number cached as "not NVIDIA" when an RM request
 * ('F') arrives on it, so such an open is still counted. */
int shim_close_range(const struct shim_real *r, unsigned int first, unsigned int last, int flags);
void shim_closefrom(const struct shim_real *r, int lowfd);
int shim_fclose(const struct shim_real *r, FILE *stream);
FILE *shim_fopen(const struct shim_real *r, bool is64, const char *path, const char *mode);
FILE *shim_freopen(const struct shim_real *r, bool is64, const char *path, const char *mode,
                   FILE *stream);
ssize_t shim_recvmsg(const struct shim_real *r, int fd, struct msghdr *msg, int flags);
/* sendmsg: NVIDIA files sent by SCM_RIGHTS are marked shared (fdtable.h): the
 * receiver may keep their memory after their last close here. */
ssize_t shim_sendmsg(const struct shim_real *r, int fd, const struct msghdr *msg, int flags);
/* pidfd_getfd: the descriptor taken is learnt and, when it is an NVIDIA file,
 * reported to kairosd as the other process's (inherit.h). */
int shim_pidfd_getfd(const struct shim_real *r, int pidfd, int targetfd, unsigned int flags);

/* In a forked child (shim_fork): until its next ioctl, mmap or open of the driver,
 * its closes of NVIDIA descriptors do only async-signal-safe work (no lock, no
 * allocation: another thread of the parent may have held one at the fork), their
 * bookkeeping left for that call; a child that execs first does none. */
void shim_fork_child_closes_lightly(void);

#endif /* KAIROS_SHIM_DISPATCH_H */
