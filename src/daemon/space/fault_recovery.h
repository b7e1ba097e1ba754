/* fault_recovery.h - the MPS clients a fault of their domain's server left behind,
 * ended once the fault is old enough (docs/space.md, "After a fault").
 *
 * After a fatal fault MPS ends the work of every client of the server on that GPU and
 * takes no new client of the server until each of those has exited; a process that
 * catches the CUDA error and runs on (a serving loop that logs it, a debugger's stop)
 * keeps the whole domain from starting anything. Its contexts are dead already, so
 * ending its MPS client (terminate_client, no signal) costs it nothing it still had.
 * This file keeps, per event (faults.h, struct fault_domain_event), the processes the
 * fault cost their work (the domain's members with memory on that GPU, each with its
 * start time, so that a reused pid is never taken for one of them) and says, for a
 * server's client list, which of them are still its clients once the grace has
 * passed; mps_clients.c asks at each client check and ends them (client_end.h).
 *
 * Bounds: FAULT_RECOVERY_EVENTS events at once (a new one takes the oldest's place),
 * FAULT_RECOVERY_CLIENTS processes per event; each process is asked to end once, and
 * an event is dropped FAULT_RECOVERY_WINDOW_MS after its grace.
 *
 * Pure: no I/O, no clock (the caller passes the time). Thread rules: the loop thread.
 */
#ifndef KAIROS_DAEMON_FAULT_RECOVERY_H
#define KAIROS_DAEMON_FAULT_RECOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kairos/proto.h"

#define FAULT_RECOVERY_EVENTS 8
#define FAULT_RECOVERY_CLIENTS 64
#define FAULT_RECOVERY_WINDOW_MS 60000u

/* A process the fault cost its work. */
struct fault_recovery_client {
    uint32_t pid;
    uint64_t start;    /* its start time (proc_stat.h) when the fault came */
    bool asked;        /* its end was asked for: never again */
};

struct fault_recovery_event {
    char domain[KAIROS_NAME_MAX]; /* "": a free slot */
    uint32_t gpu;
    uint64_t due_ms, until_ms;    /* the grace's end, and the event's */
    struct fault_recovery_client c[FAULT_RECOVERY_CLIENTS];
    size_t n;
};

struct fault_recovery {
    struct fault_recovery_event v[FAULT_RECOVERY_EVENTS];
};

/* One client to end: who, and the fault's GPU (for the lines). */
struct fault_recovery_end {
    uint32_t pid;
    uint64_t start;
    uint32_t gpu;
};

/* A fault of domain's server on gpu at now_ms: clients (n of them, at most
 * FAULT_RECOVERY_CLIENTS kept) are ended if still clients after grace_ms. */
void fault_recovery_note(struct fault_recovery *r, const char *domain, uint32_t gpu,
                         uint64_t now_ms, unsigned grace_ms,
                         const struct fault_recovery_client *clients, size_t n);

/* The server of domain lists pids (n of them) as its clients at now_ms: those of them
 * an event of the domain past its grace holds and has not asked to end, into out (at
 * most cap), each marked asked; events past their window are dropped first. Returns how
 * many went into out. */
size_t fault_recovery_due(struct fault_recovery *r, const char *domain, const uint32_t *pids,
                          size_t n, uint64_t now_ms, struct fault_recovery_end *out,
                          size_t cap);

/* Events still held (for tests and the lines). */
size_t fault_recovery_pending(const struct fault_recovery *r);

#endif /* KAIROS_DAEMON_FAULT_RECOVERY_H */
