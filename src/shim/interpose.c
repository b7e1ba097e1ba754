/* interpose.c - the exported entry points of libkairos.so.
 *
 * Owns the symbols the dynamic linker binds in place of libc's: one thin wrapper
 * per entry of SHIM_INTERPOSED (interposed.h) that unpacks variadic arguments
 * with the types the call's flags or command imply and hands the call to the
 * dispatch with the real table. The list declares every wrapper with default
 * visibility (a wrapper that disagrees with the list does not compile) and
 * references every one of them (shim_exported), and the library's constructor
 * reads the environment: trace mode, and the quota settings. Everything else in the library is
 * hidden. Failure rule: see dispatch.h; a wrapper never fails on its own.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim/dispatch.h"
#include "shim/inherit.h"
#include "shim/interposed.h"
#include "shim/memguard.h"
#include "shim/settings.h"
#include "shim/real.h"
#include "shim/timectl.h"
#include "shim/tracer.h"

#define SHIM_EXPORT __attribute__((visibility("default")))

/* Declares each wrapper as the list says; a definition below that differs is an error. */
#define SHIM_DECLARE(ret, name, params) SHIM_EXPORT ret name params;
SHIM_INTERPOSED(SHIM_DECLARE)
#undef SHIM_DECLARE

static mode_t mode_arg(int flags, va_list ap)
{
    return shim_open_has_mode(flags) ? (mode_t)va_arg(ap, int) : 0;
}

SHIM_EXPORT int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return shim_open(shim_real_get(), SHIM_OPEN, AT_FDCWD, path, flags, mode);
}

SHIM_EXPORT int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return shim_open(shim_real_get(), SHIM_OPEN64, AT_FDCWD, path, flags, mode);
}

SHIM_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return shim_open(shim_real_get(), SHIM_OPENAT, dirfd, path, flags, mode);
}

SHIM_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return shim_open(shim_real_get(), SHIM_OPENAT64, dirfd, path, flags, mode);
}

SHIM_EXPORT int __open_2(const char *path, int flags)
{
    return shim_open(shim_real_get(), SHIM_OPEN_2, AT_FDCWD, path, flags, 0);
}

SHIM_EXPORT int __open64_2(const char *path, int flags)
{
    return shim_open(shim_real_get(), SHIM_OPEN64_2, AT_FDCWD, path, flags, 0);
}

SHIM_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    return shim_open(shim_real_get(), SHIM_OPENAT_2, dirfd, path, flags, 0);
}

SHIM_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    return shim_open(shim_real_get(), SHIM_OPENAT64_2, dirfd, path, flags, 0);
}

SHIM_EXPORT int close(int fd)
{
    return shim_close(shim_real_get(), fd);
}

SHIM_EXPORT int dup(int fd)
{
    return shim_dup(shim_real_get(), fd);
}

SHIM_EXPORT int dup2(int fd, int fd2)
{
    return shim_dup2(shim_real_get(), fd, fd2);
}

SHIM_EXPORT int dup3(int fd, int fd2, int flags)
{
    return shim_dup3(shim_real_get(), fd, fd2, flags);
}

static int fcntl_common(bool is64, int fd, int cmd, va_list ap)
{
    int iarg = 0;
    void *parg = NULL;
    switch (shim_fcntl_arg_kind(cmd)) {
    case SHIM_FCNTL_NONE:
        break;
    case SHIM_FCNTL_INT:
        iarg = va_arg(ap, int);
        break;
    case SHIM_FCNTL_PTR:
        parg = va_arg(ap, void *);
        break;
    }
    return shim_fcntl(shim_real_get(), is64, fd, cmd, iarg, parg);
}

SHIM_EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    int ret = fcntl_common(false, fd, cmd, ap);
    va_end(ap);
    return ret;
}

SHIM_EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    int ret = fcntl_common(true, fd, cmd, ap);
    va_end(ap);
    return ret;
}

SHIM_EXPORT int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return shim_ioctl(shim_real_get(), fd, request, arg);
}

SHIM_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return shim_mmap(shim_real_get(), false, addr, len, prot, flags, fd, off);
}

SHIM_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    return shim_mmap(shim_real_get(), true, addr, len, prot, flags, fd, off);
}

SHIM_EXPORT int munmap(void *addr, size_t len)
{
    return shim_munmap(shim_real_get(), addr, len);
}

SHIM_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
    return shim_close_range(shim_real_get(), first, last, flags);
}

SHIM_EXPORT void closefrom(int lowfd)
{
    shim_closefrom(shim_real_get(), lowfd);
}

SHIM_EXPORT FILE *fopen(const char *path, const char *mode)
{
    return shim_fopen(shim_real_get(), false, path, mode);
}

SHIM_EXPORT FILE *fopen64(const char *path, const char *mode)
{
    return shim_fopen(shim_real_get(), true, path, mode);
}

SHIM_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
    return shim_freopen(shim_real_get(), false, path, mode, stream);
}

SHIM_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
    return shim_freopen(shim_real_get(), true, path, mode, stream);
}

SHIM_EXPORT int fclose(FILE *stream)
{
    return shim_fclose(shim_real_get(), stream);
}

SHIM_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    return shim_recvmsg(shim_real_get(), fd, msg, flags);
}

SHIM_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    return shim_sendmsg(shim_real_get(), fd, msg, flags);
}

SHIM_EXPORT pid_t fork(void)
{
    return shim_fork(shim_real_get());
}

SHIM_EXPORT int pidfd_getfd(int pidfd, int targetfd, unsigned int flags)
{
    return shim_pidfd_getfd(shim_real_get(), pidfd, targetfd, flags);
}

/* References every wrapper of the list, so a missing definition cannot go unnoticed. */
#define SHIM_REFERENCE(ret, name, params) (void (*)(void))name,
__attribute__((used)) static void (*const shim_exported[])(void) = {
    SHIM_INTERPOSED(SHIM_REFERENCE)
};
#undef SHIM_REFERENCE

__attribute__((constructor)) static void shim_load(void)
{
    tracer_start_from_env();
    settings_load();
    memguard_init();
    timectl_init();
    inherit_at_start(shim_real_get());
}
