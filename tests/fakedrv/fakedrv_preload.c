/* fakedrv_preload.c - libkairos_fakedrv.so: the fake driver as an LD_PRELOAD library.
 *
 * Exports the libc calls a user-mode driver makes on /dev/nvidia* (the open
 * family, close, dup family, fcntl, ioctl, mmap, and fstat, which also knows the
 * fake files a process inherited or received) and serves them from the fake
 * driver (fakedrv.c) when the path or descriptor is a fake NVIDIA node; any
 * other call goes to the next definition (libc) through dlsym(RTLD_NEXT). With
 * LD_PRELOAD="libkairos.so libkairos_fakedrv.so" the shim's own RTLD_NEXT lookup
 * lands here, so the real shim runs above the fake driver on a machine with no
 * GPU.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>

#include "fakedrv.h"

#define FK_EXPORT __attribute__((visibility("default")))

struct fk_next {
    int (*openat)(int, const char *, int, ...);
    int (*close)(int);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*fcntl)(int, int, ...);
    int (*ioctl)(int, unsigned long, ...);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
};
static struct fk_next next_fns = {
    fakedrv_openat, fakedrv_close, fakedrv_dup, fakedrv_dup2, fakedrv_dup3,
    fakedrv_fcntl,  fakedrv_ioctl, fakedrv_mmap,
};
static pthread_once_t next_once = PTHREAD_ONCE_INIT;

#define FK_RESOLVE(field, name)                                                          \
    {                                                                                    \
        void *sym = dlsym(RTLD_NEXT, name);                                              \
        if (sym)                                                                         \
            memcpy(&t.field, &sym, sizeof t.field);                                      \
    }

static void resolve(void)
{
    struct fk_next t = next_fns;
    FK_RESOLVE(openat, "openat")
    FK_RESOLVE(close, "close")
    FK_RESOLVE(dup, "dup")
    FK_RESOLVE(dup2, "dup2")
    FK_RESOLVE(dup3, "dup3")
    FK_RESOLVE(fcntl, "fcntl")
    FK_RESOLVE(ioctl, "ioctl")
    FK_RESOLVE(mmap, "mmap")
    next_fns = t;
}

static const struct fk_next *next(void)
{
    pthread_once(&next_once, resolve);
    return &next_fns;
}

static int mode_of(int flags, va_list ap)
{
    return ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? va_arg(ap, int) : 0;
}

static int open_at(int dirfd, const char *path, int flags, int mode)
{
    if (fakedrv_is_path(path))
        return fakedrv_openat(dirfd, path, flags, mode);
    return next()->openat(dirfd, path, flags, mode);
}

FK_EXPORT int open(const char *path, int flags, ...);
FK_EXPORT int open64(const char *path, int flags, ...);
FK_EXPORT int openat(int dirfd, const char *path, int flags, ...);
FK_EXPORT int openat64(int dirfd, const char *path, int flags, ...);
FK_EXPORT int __open_2(const char *path, int flags);
FK_EXPORT int __open64_2(const char *path, int flags);
FK_EXPORT int __openat_2(int dirfd, const char *path, int flags);
FK_EXPORT int __openat64_2(int dirfd, const char *path, int flags);
FK_EXPORT int close(int fd);
FK_EXPORT int dup(int fd);
FK_EXPORT int dup2(int fd, int fd2);
FK_EXPORT int dup3(int fd, int fd2, int flags);
FK_EXPORT int fcntl(int fd, int cmd, ...);
FK_EXPORT int fcntl64(int fd, int cmd, ...);
FK_EXPORT int ioctl(int fd, unsigned long request, ...);
FK_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
FK_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off);
FK_EXPORT int fstat(int fd, struct stat *st);

int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int mode = mode_of(flags, ap);
    va_end(ap);
    return open_at(AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int mode = mode_of(flags, ap);
    va_end(ap);
    return open_at(AT_FDCWD, path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int mode = mode_of(flags, ap);
    va_end(ap);
    return open_at(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int mode = mode_of(flags, ap);
    va_end(ap);
    return open_at(dirfd, path, flags, mode);
}

int __open_2(const char *path, int flags)
{
    return open_at(AT_FDCWD, path, flags, 0);
}

int __open64_2(const char *path, int flags)
{
    return open_at(AT_FDCWD, path, flags, 0);
}

int __openat_2(int dirfd, const char *path, int flags)
{
    return open_at(dirfd, path, flags, 0);
}

int __openat64_2(int dirfd, const char *path, int flags)
{
    return open_at(dirfd, path, flags, 0);
}

int close(int fd)
{
    return fakedrv_owns(fd) ? fakedrv_close(fd) : next()->close(fd);
}

int dup(int fd)
{
    return fakedrv_owns(fd) ? fakedrv_dup(fd) : next()->dup(fd);
}

int dup2(int fd, int fd2)
{
    return fakedrv_owns(fd) || fakedrv_owns(fd2) ? fakedrv_dup2(fd, fd2) : next()->dup2(fd, fd2);
}

int dup3(int fd, int fd2, int flags)
{
    return fakedrv_owns(fd) || fakedrv_owns(fd2) ? fakedrv_dup3(fd, fd2, flags)
                                                 : next()->dup3(fd, fd2, flags);
}

static int fcntl_common(int fd, int cmd, void *arg)
{
    return fakedrv_owns(fd) ? fakedrv_fcntl(fd, cmd, arg) : next()->fcntl(fd, cmd, arg);
}

int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *); /* as glibc reads it */
    va_end(ap);
    return fcntl_common(fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_common(fd, cmd, arg);
}

int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fakedrv_owns(fd) ? fakedrv_ioctl(fd, request, arg) : next()->ioctl(fd, request, arg);
}

/* Internal calls never go through an exported name: the shim above us would see
 * them a second time. */
static void *mmap_common(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return fakedrv_owns(fd) ? fakedrv_mmap(addr, len, prot, flags, fd, off)
                            : next()->mmap(addr, len, prot, flags, fd, off);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap_common(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    return mmap_common(addr, len, prot, flags, fd, (off_t)off);
}

/* fstat: a fake file, this process's or one it inherited or received, is a
 * character device of the driver, as the shim's lazy classification expects. */
int fstat(int fd, struct stat *st)
{
    return fakedrv_fstat(fd, st);
}
