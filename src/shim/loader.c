/* loader.c - what libkairos.so's dlopen and dlmopen decide before the real ones run
 * (see loader.h; the entry points themselves are loader_stub.S).
 *
 * Owns the real dlopen and dlmopen (dlsym(RTLD_NEXT), resolved on first use) and the
 * two once-per-process notes.
 */
#include "shim/loader.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shim/settings.h"

static _Atomic(shim_loader_fn *) real_dlopen, real_dlmopen;
static atomic_bool deepbind_said, namespace_said;

static void *no_dlopen(const char *file, int mode)
{
    (void)file, (void)mode;
    return NULL;
}

static void *no_dlmopen(Lmid_t nsid, const char *file, int mode)
{
    (void)nsid, (void)file, (void)mode;
    return NULL;
}

/* The next definition of name below libkairos.so, else fallback. Two threads may both
 * look it up: they find the same one. */
static shim_loader_fn *resolve(_Atomic(shim_loader_fn *) *slot, const char *name,
                               shim_loader_fn *fallback)
{
    shim_loader_fn *fn = atomic_load_explicit(slot, memory_order_acquire);
    if (fn)
        return fn;
    void *sym = dlsym(RTLD_NEXT, name);
    if (sym)
        memcpy(&fn, &sym, sizeof fn);
    else
        fn = fallback;
    atomic_store_explicit(slot, fn, memory_order_release);
    return fn;
}

static const char *name_of(uintptr_t file)
{
    return file ? (const char *)file : "(the program)";
}

static void say_deepbind(const char *call, const char *file)
{
    if (!settings_get()->log_stderr || atomic_exchange(&deepbind_said, true))
        return;
    dprintf(2,
            "kairos[%d]: %s(\"%s\") with RTLD_DEEPBIND: loaded without it, so the library "
            "and its dependencies bind their GPU calls to libkairos.so first (said once; "
            "docs/security.md)\n",
            (int)getpid(), call, file);
}

static bool quota_in_force(void)
{
    enum settings_mode m = settings_get()->mode;
    return m == SETTINGS_TENANT || m == SETTINGS_STANDALONE;
}

static void say_namespace(const char *file)
{
    if (!(quota_in_force() || settings_get()->log_stderr) ||
        atomic_exchange(&namespace_said, true))
        return;
    dprintf(2,
            "kairos[%d]: dlmopen(\"%s\") into another link-map namespace: libkairos.so is "
            "not loaded there, so GPU memory taken by code in it is not counted against "
            "the quota; kairosd's audit sees it only after the fact. Load GPU libraries "
            "with dlopen (said once; docs/security.md)\n",
            (int)getpid(), file);
}

/* The mode without RTLD_DEEPBIND, said once. */
static uintptr_t shallow(uintptr_t mode, const char *call, uintptr_t file)
{
    if (!((int)mode & RTLD_DEEPBIND))
        return mode;
    say_deepbind(call, name_of(file));
    return (uintptr_t)(unsigned int)((int)mode & ~RTLD_DEEPBIND);
}

shim_loader_fn *shim_loader_dlopen(struct shim_loader_call *call)
{
    call->arg[1] = shallow(call->arg[1], "dlopen", call->arg[0]);
    return resolve(&real_dlopen, "dlopen", (shim_loader_fn *)no_dlopen);
}

shim_loader_fn *shim_loader_dlmopen(struct shim_loader_call *call)
{
    if ((Lmid_t)call->arg[0] == LM_ID_BASE)
        call->arg[2] = shallow(call->arg[2], "dlmopen", call->arg[1]);
    else
        say_namespace(name_of(call->arg[1]));
    return resolve(&real_dlmopen, "dlmopen", (shim_loader_fn *)no_dlmopen);
}
