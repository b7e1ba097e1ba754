/* app_memory.h - the shim's reads and writes of the application's memory that cannot
 * fault: the ioctl arguments and parameters a call points at (dispatch.c, memguard.c,
 * shadow.c, uvm_managed.c, the tracer) come from a program that may pass any pointer,
 * or change the memory while the shim reads it. process_vm_readv/writev on the
 * process itself report an unreadable address as EFAULT instead of a SIGSEGV; where
 * a seccomp profile forbids them, the first refusal switches to memcpy for good
 * (plausible pointers trusted: the driver would read the same memory).
 *
 * Thread rules: thread-safe (one atomic flag).
 */
#ifndef KAIROS_SHIM_APP_MEMORY_H
#define KAIROS_SHIM_APP_MEMORY_H

#include <stdbool.h>
#include <stddef.h>

/* Copies up to len bytes from src in this process; the bytes copied (0 when src is not
 * readable, NULL or in the first page). */
size_t app_memory_read(void *dst, const void *src, size_t len);
/* The same for a caller that knows the pid (getpid(), as the ioctl path knows it from
 * borrowed_vm_owner): one system call instead of two. */
size_t app_memory_read_as(int pid, void *dst, const void *src, size_t len);
/* Writes len bytes of src to dst in process pid (this one); nothing where dst is not
 * writable. Whether they were written. */
bool app_memory_write_as(int pid, void *dst, const void *src, size_t len);

#endif /* KAIROS_SHIM_APP_MEMORY_H */
