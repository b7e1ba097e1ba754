/* real.c - resolution of the real functions below the shim, and their fallback.
 *
 * Owns the process-wide table of real functions. It is resolved once, on the
 * first interposed call, with dlsym(RTLD_NEXT) under pthread_once. dlsym may
 * itself call an interposed function (it allocates, and a foreign allocator or
 * a lower preload may open files); such a nested call comes from the resolving
 * thread, is recognised by its thread id and served by the raw-syscall
 * fallback instead of waiting on the pthread_once it is inside of. A symbol
 * that cannot be found is also served by the fallback. dlsym returns void *;
 * it is copied into the function pointer with memcpy, which ISO C allows
 * without the pedantic object-to-function pointer cast.
 */
#include "shim/real.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- raw-syscall fallback ------------------------------------------------------- */

static int fb_mode_of(int flags, va_list ap)
{
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
        return va_arg(ap, int);
    return 0;
}

static int fb_open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int mode = fb_mode_of(flags, ap);
    va_end(ap);
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static int fb_openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int mode = fb_mode_of(flags, ap);
    va_end(ap);
    return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

static int fb_open_2(const char *path, int flags)
{
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, 0);
}

static int fb_openat_2(int dirfd, const char *path, int flags)
{
    return (int)syscall(SYS_openat, dirfd, path, flags, 0);
}

static int fb_close(int fd)
{
    return (int)syscall(SYS_close, fd);
}

static int fb_dup(int fd)
{
    return (int)syscall(SYS_dup, fd);
}

static int fb_dup2(int fd, int fd2)
{
#ifdef SYS_dup2
    return (int)syscall(SYS_dup2, fd, fd2);
#else
    if (fd == fd2)
        return (int)syscall(SYS_fcntl, fd, F_GETFD) < 0 ? -1 : fd2;
    return (int)syscall(SYS_dup3, fd, fd2, 0);
#endif
}

static int fb_dup3(int fd, int fd2, int flags)
{
    return (int)syscall(SYS_dup3, fd, fd2, flags);
}

static int fb_fcntl(int fd, int cmd, ...)
{
    /* As glibc does: the third argument is read as a pointer-sized value. */
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

static int fb_ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return (int)syscall(SYS_ioctl, fd, request, arg);
}

static void *fb_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static void *fb_mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static int fb_munmap(void *addr, size_t len)
{
    return (int)syscall(SYS_munmap, addr, len);
}

static int fb_fstat(int fd, struct stat *st)
{
#ifdef SYS_fstat
    return (int)syscall(SYS_fstat, fd, st);
#else
    return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
#endif
}

static ssize_t fb_readlink(const char *path, char *buf, size_t len)
{
    return (ssize_t)syscall(SYS_readlinkat, AT_FDCWD, path, buf, len);
}

static int fb_close_range(unsigned int first, unsigned int last, int flags)
{
    return (int)syscall(SYS_close_range, first, last, flags);
}

static void fb_closefrom(int lowfd)
{
    syscall(SYS_close_range, (unsigned int)lowfd, ~0u, 0);
}

/* The open flags fopen's mode implies (as glibc reads it). */
static int fb_flags_of_mode(const char *mode)
{
    int flags = O_RDONLY;
    if (mode[0] == 'w')
        flags = O_WRONLY | O_CREAT | O_TRUNC;
    else if (mode[0] == 'a')
        flags = O_WRONLY | O_CREAT | O_APPEND;
    for (const char *m = mode + 1; *m && *m != ','; m++) {
        if (*m == '+')
            flags = (flags & ~O_ACCMODE) | O_RDWR;
        else if (*m == 'e')
            flags |= O_CLOEXEC;
        else if (*m == 'x')
            flags |= O_EXCL;
    }
    return flags;
}

static FILE *fb_fopen(const char *path, const char *mode)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, fb_flags_of_mode(mode), 0666);
    if (fd < 0)
        return NULL;
    FILE *fp = fdopen(fd, mode);
    if (!fp)
        syscall(SYS_close, fd);
    return fp;
}

/* freopen without libc's: the new file takes the stream's descriptor number. */
static FILE *fb_freopen(const char *path, const char *mode, FILE *stream)
{
    fflush(stream);
    if (!path) {
        errno = ENOSYS;
        return NULL;
    }
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, fb_flags_of_mode(mode), 0666);
    if (fd < 0)
        return NULL;
    int ok = (int)syscall(SYS_dup3, fd, fileno(stream), 0);
    syscall(SYS_close, fd);
    return ok < 0 ? NULL : stream;
}

/* glibc's other name for fclose, which the shim does not interpose. */
extern int _IO_fclose(FILE *stream);

static int fb_fclose(FILE *stream)
{
    return _IO_fclose(stream);
}

static ssize_t fb_recvmsg(int fd, struct msghdr *msg, int flags)
{
    return (ssize_t)syscall(SYS_recvmsg, fd, msg, flags);
}

/* glibc's fork without its atfork handlers: the child's thread bookkeeping is
 * still right, which a raw clone would not keep. */
extern pid_t _Fork(void);
static pid_t fb_fork(void)
{
    return _Fork();
}

static ssize_t fb_sendmsg(int fd, const struct msghdr *msg, int flags)
{
    return (ssize_t)syscall(SYS_sendmsg, fd, msg, flags);
}

static int fb_pidfd_getfd(int pidfd, int targetfd, unsigned int flags)
{
#ifdef SYS_pidfd_getfd
    return (int)syscall(SYS_pidfd_getfd, pidfd, targetfd, flags);
#else
    (void)pidfd, (void)targetfd, (void)flags;
    errno = ENOSYS;
    return -1;
#endif
}

static const struct shim_real fallback = {
    .open = fb_open,
    .open64 = fb_open,
    .openat = fb_openat,
    .openat64 = fb_openat,
    .__open_2 = fb_open_2,
    .__open64_2 = fb_open_2,
    .__openat_2 = fb_openat_2,
    .__openat64_2 = fb_openat_2,
    .close = fb_close,
    .dup = fb_dup,
    .dup2 = fb_dup2,
    .dup3 = fb_dup3,
    .fcntl = fb_fcntl,
    .fcntl64 = fb_fcntl,
    .ioctl = fb_ioctl,
    .mmap = fb_mmap,
    .mmap64 = fb_mmap64,
    .munmap = fb_munmap,
    .close_range = fb_close_range,
    .closefrom = fb_closefrom,
    .fopen = fb_fopen,
    .fopen64 = fb_fopen,
    .freopen = fb_freopen,
    .freopen64 = fb_freopen,
    .fclose = fb_fclose,
    .recvmsg = fb_recvmsg,
    .sendmsg = fb_sendmsg,
    .fork = fb_fork,
    .pidfd_getfd = fb_pidfd_getfd,
    .fstat = fb_fstat,
    .readlink = fb_readlink,
};

const struct shim_real *shim_real_fallback(void)
{
    return &fallback;
}

void shim_real_fill(struct shim_real *t)
{
#define REAL_FILL(ret, name, params)                                                     \
    if (!t->name)                                                                        \
        t->name = fallback.name;
    SHIM_INTERPOSED(REAL_FILL)
    SHIM_HELPERS(REAL_FILL)
#undef REAL_FILL
}

/* ---- resolution ------------------------------------------------------------------ */

static struct shim_real resolved;
static atomic_bool resolved_ready;
static atomic_long resolver_tid;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

static void real_resolve(void)
{
    struct shim_real t;
    memset(&t, 0, sizeof t);
    atomic_store(&resolver_tid, (long)syscall(SYS_gettid));
#define REAL_RESOLVE(ret, name, params)                                                  \
    {                                                                                    \
        void *sym = dlsym(RTLD_NEXT, #name);                                             \
        if (sym)                                                                         \
            memcpy(&t.name, &sym, sizeof t.name);                                        \
    }
    SHIM_INTERPOSED(REAL_RESOLVE)
    SHIM_HELPERS(REAL_RESOLVE)
#undef REAL_RESOLVE
    shim_real_fill(&t);
    resolved = t;
    atomic_store_explicit(&resolved_ready, true, memory_order_release);
    atomic_store(&resolver_tid, 0);
}

const struct shim_real *shim_real_get(void)
{
    if (atomic_load_explicit(&resolved_ready, memory_order_acquire))
        return &resolved;
    long self = (long)syscall(SYS_gettid);
    if (atomic_load_explicit(&resolver_tid, memory_order_relaxed) == self)
        return &fallback; /* dlsym called back into us */
    int saved = errno;
    /* The thread that runs real_resolve marks itself there; the others wait. */
    pthread_once(&resolve_once, real_resolve);
    errno = saved;
    return &resolved;
}
