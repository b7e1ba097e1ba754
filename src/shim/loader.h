/* loader.h - dlopen and dlmopen under the shim: no library binds its GPU calls below it.
 *
 * A library loaded with RTLD_DEEPBIND looks its symbols up in itself and its own
 * dependencies before the global scope, so its open/ioctl/mmap bind to libc's, below
 * libkairos.so (issue 25, item 12: 130 MiB granted in a 64 MiB quota). libkairos.so
 * exports dlopen and dlmopen (loader_stub.S, x86_64 and aarch64), which call the hooks
 * below with the arguments they saved and then jump to the real function the hook
 * returns: a tail jump, so glibc still sees the application as dlopen's caller (its
 * RUNPATH for a bare name, $ORIGIN, its namespace); a C wrapper calling the real dlopen
 * would make libkairos.so the caller and lose them.
 *
 *   dlopen, dlmopen(LM_ID_BASE): RTLD_DEEPBIND is taken out of the mode, so the library
 *     and its dependencies look up the global scope first, where libkairos.so is
 *     (enforced). Said once per process with KAIROS_LOG=stderr.
 *   dlmopen into any other namespace (LM_ID_NEWLM, or one made earlier): that namespace
 *     has its own libc and no libkairos.so, so GPU memory its code takes is not
 *     counted. The call goes on as asked, and one line on stderr (once per process,
 *     whenever a quota is in force) says so; kairosd's audit sees the memory after
 *     the fact, as for raw system calls (detected only, docs/security.md).
 *
 * A hook never fails: without a real function (dlsym found none) it returns one that
 * fails the load (NULL), as a libc without dlopen would.
 *
 * Thread rules: the hooks are thread-safe (the real functions are resolved with an
 * atomic store, the notes said once with an atomic flag).
 */
#ifndef KAIROS_SHIM_LOADER_H
#define KAIROS_SHIM_LOADER_H

#include <stdint.h>

/* The stub's saved argument registers, in order (dlopen: file, mode; dlmopen: nsid,
 * file, mode); a hook may change them before the stub jumps. */
struct shim_loader_call {
    uintptr_t arg[3];
};

typedef void shim_loader_fn(void);

/* Each returns the function the stub jumps to with the (possibly changed) arguments. */
shim_loader_fn *shim_loader_dlopen(struct shim_loader_call *call);
shim_loader_fn *shim_loader_dlmopen(struct shim_loader_call *call);

#endif /* KAIROS_SHIM_LOADER_H */
