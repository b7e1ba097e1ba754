/* node_fakes.h - the node as the linger and audit tests show it to their module: GPUs
 * behind the gpu.h ops struct, held in memory (each GPU's process list and
 * memory.used, and answers that fail), a clock the test sets, and the daemon's log
 * lines captured for a test to read (test_linger.c, test_audit.c). */
#ifndef KAIROS_TESTS_NODE_FAKES_H
#define KAIROS_TESTS_NODE_FAKES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/gpu/gpu.h"
#include "kairos/proto.h"

struct fake_gpu {
    bool status_fails;  /* status() answers -EIO */
    bool memory_valid;  /* memory.used is known (true after fake_gpu_reset) */
    uint64_t used;      /* memory.used, by anyone */
    bool list_fails;    /* processes() answers -EIO */
    struct gpu_proc *procs;
    size_t n_procs, cap_procs;
};

extern struct fake_gpu fake_gpus[KAIROS_MAX_GPUS];
/* The backend to hand to the module: its status and processes read fake_gpus. */
extern struct gpu_backend fake_gpu_backend;

/* Every GPU: memory.used known and 0, no process, nothing failing. */
void fake_gpu_reset(void);
/* Frees the process lists (a cmocka teardown calls it). */
void fake_gpu_free(void);
/* GPU g lists pid with used bytes (again: the figure changes). */
void fake_gpu_list(unsigned g, uint32_t pid, uint64_t used);
/* GPU g lists pid with its memory unknown. */
void fake_gpu_list_unknown(unsigned g, uint32_t pid);
/* GPU g no longer lists pid. */
void fake_gpu_forget(unsigned g, uint32_t pid);

/* The clock (ms) the module is given: fake_clock(ctx) answers fake_now. */
extern uint64_t fake_now;
uint64_t fake_clock(void *ctx);

/* The daemon's log (stderr) goes to a file from log_capture_begin until
 * log_capture_end, which keeps what was written for log_count. */
void log_capture_begin(void);
void log_capture_end(void);
/* How many captured lines contain every one of the given strings (NULL-terminated). */
unsigned log_count(const char *first, ...) __attribute__((sentinel));
/* The captured text, for a failing test's message. */
const char *log_captured(void);

#endif /* KAIROS_TESTS_NODE_FAKES_H */
