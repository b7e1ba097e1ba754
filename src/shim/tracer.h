/* tracer.h - trace mode: one recording line per event at the driver boundary.
 *
 * With KAIROS_TRACE_FD=N in the environment (an inherited descriptor: the CLI's
 * SOCK_SEQPACKET socket, or a plain file), the shim writes every NVIDIA event in
 * the recording format of core/trace_record.h: an S line before the process's
 * first event, then O/X/D/I/M/U lines with p=PID. Each line is one write (one
 * send with MSG_NOSIGNAL on a socket), writers are serialised in the process,
 * and the descriptor is treated as the tracer's: when the application closes or
 * replaces it, or a write fails, tracing stops for good.
 *
 * Thread rules: all functions are thread-safe. tracer_on() is one atomic load;
 * everything else is called only when it returned true.
 */
#ifndef KAIROS_SHIM_TRACER_H
#define KAIROS_SHIM_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/trace_record.h"

/* Starts tracing to fd (tests; the library calls tracer_start_from_env at load).
 * Returns 0 or -errno (-EBADF when fd is not open, -ENOMEM). */
int tracer_start(int fd);
void tracer_start_from_env(void);
void tracer_stop(void);
bool tracer_on(void);
/* True when fd is the trace descriptor (close and dup2 onto it stop tracing). */
bool tracer_owns_fd(int fd);

double tracer_now_us(void);

/* Per-thread buffers for the bytes of one ioctl; NULL when out of memory. */
struct tracer_scratch {
    uint8_t before[TRACE_MAX_BYTES];
    uint8_t after[TRACE_MAX_BYTES];
    uint8_t params[TRACE_MAX_BYTES];
};
struct tracer_scratch *tracer_scratch(void);


void tracer_emit_open(int fd, const char *path);
void tracer_emit_close(int fd);
void tracer_emit_dup(int fd, int new_fd);
void tracer_emit_ioctl(const struct trace_rec *rec);
void tracer_emit_mmap(const struct trace_rec *rec);
void tracer_emit_munmap(uint64_t addr, uint64_t len);

#endif /* KAIROS_SHIM_TRACER_H */
