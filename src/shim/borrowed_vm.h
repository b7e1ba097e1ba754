/* borrowed_vm.h - is the caller a child running in its parent's memory?
 *
 * vfork() and clone(CLONE_VM) make a child that runs on its parent's address
 * space until it execs or exits, without pthread_atfork handlers. Python's
 * subprocess does exactly this, then closes every inherited descriptor before
 * exec: had the shim recorded those closes, the parent's object tree, descriptor
 * table and kairosd link (all in the shared memory) would say the parent closed
 * its NVIDIA files, and the parent's charges would be released while the parent
 * still holds the memory (measured on the H200: PyTorch calling nvidia-smi
 * through subprocess was charged 0 MiB for 520 MiB).
 *
 * So in such a child the shim keeps its hands off its parent's state: descriptor
 * calls go straight to libc, and a device-memory allocation or a managed-memory
 * mapping is refused (the memory would live in the parent's RM client or address
 * space, charged to no one).
 *
 * A child with its own copy of the memory that ran no atfork handler (a raw clone
 * without CLONE_VM, glibc's _Fork) is told apart by kcmp(KCMP_VM) or, where kcmp
 * is refused (Docker's default seccomp profile), by a page of the owner's mapped
 * MADV_DONTFORK that a copy does not have; it then owns its state.
 *
 * Thread and signal rules: async-signal-safe (getpid, kcmp, mincore; mmap and
 * madvise only when the caller becomes the owner); no lock.
 */
#ifndef KAIROS_SHIM_BORROWED_VM_H
#define KAIROS_SHIM_BORROWED_VM_H

#include <stdbool.h>

/* True when the calling process is not the one whose memory the shim's state
 * belongs to and shares that memory (or sharing cannot be ruled out: kcmp
 * refused and no marker page). A child that has its own copy of memory without having run the
 * atfork handlers (a raw clone without CLONE_VM) becomes the owner. */
bool borrowed_vm_now(void);
/* The pid of the process the state belongs to: getpid() of a caller for whom
 * borrowed_vm_now() just returned false (no system call). */
int borrowed_vm_owner(void);

#endif
