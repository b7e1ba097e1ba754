/* borrowed_vm.c - telling a vfork child from its parent (see borrowed_vm.h). */
#include "shim/borrowed_vm.h"

#include <linux/kcmp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The process whose memory holds the shim's state: set when the library loads
 * and in each forked child (pthread_atfork; a vfork child runs no handler). */
static _Atomic pid_t state_owner;

static void become_owner(void)
{
    atomic_store(&state_owner, getpid());
}

__attribute__((constructor)) static void borrowed_vm_init(void)
{
    become_owner();
    pthread_atfork(NULL, NULL, become_owner);
}

bool borrowed_vm_now(void)
{
    pid_t owner = atomic_load(&state_owner), me = getpid();
    if (owner == 0 || me == owner)
        return false;
    long same = syscall(SYS_kcmp, owner, me, KCMP_VM, 0, 0);
    if (same == 0 || same < 0)
        return true; /* shares the owner's memory, or cannot be told apart */
    /* A private copy made without the atfork handlers: its state is its own. */
    atomic_compare_exchange_strong(&state_owner, &owner, me);
    return false;
}
