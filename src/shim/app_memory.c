/* app_memory.c - reads and writes of the application's memory that cannot fault (see
 * app_memory.h). */
#include "shim/app_memory.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static atomic_bool vm_calls_refused; /* a seccomp profile refused process_vm_*: memcpy */

/* A system call that cannot be made here: from now on, plausible pointers are trusted. */
static bool refused(ssize_t n)
{
    if (n >= 0 || errno == EFAULT)
        return false;
    atomic_store(&vm_calls_refused, true);
    return true;
}

size_t app_memory_read(void *dst, const void *src, size_t len)
{
    return app_memory_read_as(getpid(), dst, src, len);
}

size_t app_memory_read_as(int pid, void *dst, const void *src, size_t len)
{
    if (!src || len == 0 || (uintptr_t)src < 4096)
        return 0;
    if (!atomic_load_explicit(&vm_calls_refused, memory_order_relaxed)) {
        struct iovec local = {.iov_base = dst, .iov_len = len};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)src, .iov_len = len};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (!refused(n))
            return n > 0 ? (size_t)n : 0;
    }
    memcpy(dst, src, len);
    return len;
}

bool app_memory_write_as(int pid, void *dst, const void *src, size_t len)
{
    if (!dst || len == 0 || (uintptr_t)dst < 4096)
        return false;
    if (!atomic_load_explicit(&vm_calls_refused, memory_order_relaxed)) {
        struct iovec local = {.iov_base = (void *)(uintptr_t)src, .iov_len = len};
        struct iovec remote = {.iov_base = dst, .iov_len = len};
        ssize_t n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
        if (!refused(n))
            return n == (ssize_t)len;
    }
    memcpy(dst, src, len);
    return true;
}
