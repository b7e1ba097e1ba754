/* interposed.h - the one list of the symbols libkairos.so interposes.
 *
 * SHIM_INTERPOSED(X) names every libc entry point the shim exports, as
 * X(return type, name, (parameters)). The same list declares the table of the
 * real functions below us (real.h), declares and checks the exported wrappers
 * (interpose.c) and is what the export test compares `nm -D` against, so the
 * real table, the wrappers and the exported symbols cannot drift apart. The
 * linker version script (libkairos.map) repeats the names; the export test
 * catches a difference.
 *
 * SHIM_HELPERS(X) lists functions below us that the shim calls for its own
 * work but does not interpose (lazy classification of descriptors); they are in
 * the real table so tests can fake them.
 *
 * SHIM_LOADER(X) lists the entry points that are assembly stubs jumping to the real
 * function (loader_stub.S, loader.h) rather than C wrappers over the real table: they
 * are exported where the stub is ported (x86_64, aarch64) and checked by the export
 * test the same way.
 *
 * Thread rules: declarations only.
 */
#ifndef KAIROS_SHIM_INTERPOSED_H
#define KAIROS_SHIM_INTERPOSED_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#define SHIM_INTERPOSED(X)                                                                    \
    X(int, open, (const char *path, int flags, ...))                                          \
    X(int, open64, (const char *path, int flags, ...))                                        \
    X(int, openat, (int dirfd, const char *path, int flags, ...))                             \
    X(int, openat64, (int dirfd, const char *path, int flags, ...))                           \
    X(int, __open_2, (const char *path, int flags))                                           \
    X(int, __open64_2, (const char *path, int flags))                                         \
    X(int, __openat_2, (int dirfd, const char *path, int flags))                              \
    X(int, __openat64_2, (int dirfd, const char *path, int flags))                            \
    X(int, close, (int fd))                                                                   \
    X(int, dup, (int fd))                                                                     \
    X(int, dup2, (int fd, int fd2))                                                           \
    X(int, dup3, (int fd, int fd2, int flags))                                                \
    X(int, fcntl, (int fd, int cmd, ...))                                                     \
    X(int, fcntl64, (int fd, int cmd, ...))                                                   \
    X(int, ioctl, (int fd, unsigned long request, ...))                                       \
    X(void *, mmap, (void *addr, size_t len, int prot, int flags, int fd, off_t off))         \
    X(void *, mmap64, (void *addr, size_t len, int prot, int flags, int fd, off64_t off))     \
    X(int, munmap, (void *addr, size_t len))                                                  \
    X(int, close_range, (unsigned int first, unsigned int last, int flags))                   \
    X(void, closefrom, (int lowfd))                                                           \
    X(FILE *, fopen, (const char *path, const char *mode))                                    \
    X(FILE *, fopen64, (const char *path, const char *mode))                                  \
    X(FILE *, freopen, (const char *path, const char *mode, FILE *stream))                    \
    X(FILE *, freopen64, (const char *path, const char *mode, FILE *stream))                  \
    X(int, fclose, (FILE *stream))                                                            \
    X(ssize_t, recvmsg, (int fd, struct msghdr *msg, int flags))                              \
    X(ssize_t, sendmsg, (int fd, const struct msghdr *msg, int flags))                        \
    X(pid_t, fork, (void))                                                                    \
    X(int, pidfd_getfd, (int pidfd, int targetfd, unsigned int flags))

#define SHIM_HELPERS(X)                                                                       \
    X(int, fstat, (int fd, struct stat *st))                                                  \
    X(ssize_t, readlink, (const char *path, char *buf, size_t len))

#define SHIM_LOADER(X)                                                                        \
    X(void *, dlopen, (const char *file, int mode))                                           \
    X(void *, dlmopen, (Lmid_t nsid, const char *file, int mode))

/* SHIM_OWN(X): entry points the shim implements itself, with no real function below
 * (env_hooks.c: getenv read from environ, space_route.h). */
#define SHIM_OWN(X)                                                                           \
    X(char *, getenv, (const char *name))                                                     \
    X(char *, secure_getenv, (const char *name))

#endif /* KAIROS_SHIM_INTERPOSED_H */
