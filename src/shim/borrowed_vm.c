/* borrowed_vm.c - telling a vfork child from its parent (see borrowed_vm.h). */
#include "shim/borrowed_vm.h"

#include <errno.h>
#include <linux/kcmp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The process whose memory holds the shim's state: set when the library loads
 * and in each forked child (pthread_atfork; a vfork child runs no handler). */
static _Atomic pid_t state_owner;

/* One page of the owner's, mapped MADV_DONTFORK: a copy of the owner's memory (a
 * fork, a raw clone without CLONE_VM) does not have it, a child running in the
 * owner's memory does. This tells them apart where kcmp is refused (Docker's
 * default seccomp profile refuses it without CAP_SYS_PTRACE). NULL: none. */
static void *_Atomic owner_marker;

static void place_marker(void)
{
    long page = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED && madvise(p, (size_t)page, MADV_DONTFORK) != 0) {
        munmap(p, (size_t)page);
        p = MAP_FAILED;
    }
    atomic_store(&owner_marker, p == MAP_FAILED ? NULL : p);
}

static void become_owner(void)
{
    atomic_store(&state_owner, getpid());
    place_marker(); /* a forked child has no copy of its parent's */
}

__attribute__((constructor)) static void borrowed_vm_init(void)
{
    become_owner();
    pthread_atfork(NULL, NULL, become_owner);
}

/* 1: the caller's memory has the owner's marker page (shares the owner's memory);
 * 0: it does not (its own copy); -1: cannot tell. mincore reports ENOMEM for an
 * address with no mapping, without a fault. */
static int has_owner_marker(void)
{
    void *marker = atomic_load(&owner_marker);
    unsigned char resident;
    if (!marker)
        return -1;
    if (mincore(marker, (size_t)sysconf(_SC_PAGESIZE), &resident) == 0)
        return 1;
    return errno == ENOMEM ? 0 : -1;
}

int borrowed_vm_owner(void)
{
    return (int)atomic_load(&state_owner);
}

bool borrowed_vm_now(void)
{
    pid_t owner = atomic_load(&state_owner), me = getpid();
    if (owner == 0 || me == owner)
        return false;
    long same = syscall(SYS_kcmp, owner, me, KCMP_VM, 0, 0);
    if (same == 0 || (same < 0 && has_owner_marker() != 0))
        return true; /* shares the owner's memory, or cannot be told apart */
    /* A private copy made without the atfork handlers: its state is its own. */
    if (atomic_compare_exchange_strong(&state_owner, &owner, me))
        place_marker();
    return false;
}
