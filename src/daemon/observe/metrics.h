/* metrics.h - kairosd's figures as Prometheus exposition text (text format 0.0.4):
 * per tenant and GPU its memory held and quota, refused allocations, compute policy,
 * target and what it got (last period, last minute), pauses and window, what held
 * it back (now; periods and time paused by reason, as counters); per tenant
 * its members; per GPU what the GPU backend reports (memory, utilization,
 * temperature, power); kairosd's build and health. docs/metrics.md lists every
 * metric; the per-tenant figures are those `kairos ps` shows (the same rule for
 * which GPUs a tenant has figures on, the same timeshare_ps), so the two agree.
 *
 * Reads the daemon's live structures: call it from the loop thread, which is the
 * only one that changes them, or from a child the loop thread forked, which sees
 * them as they were at fork() (metrics_snapshot.c does), so one scrape sees one
 * state.
 * Thread rules: the loop thread (or its forked renderer) only.
 */
#ifndef KAIROS_DAEMON_METRICS_H
#define KAIROS_DAEMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "daemon/gpu/gpu.h"
#include "kairos/proto.h"

struct tenants;
struct timeshare;
struct gpu_backend;
struct server;
struct config;

struct faults;
struct mps_clients;

struct metrics_sources {
    const struct tenants *ts;
    const struct timeshare *timeshare; /* NULL: no compute figures */
    struct gpu_backend *gpu;           /* NULL: no backend, no per-GPU status */
    const struct server *server;       /* NULL: 0 connections */
    const struct config *cfg;          /* NULL: no connection limit shown */
    double start_time;                 /* kairosd's start, seconds since the epoch */
    const char *version;
    const struct driver_release *driver; /* NULL or not known: no driver figure */
    const struct faults *faults;       /* NULL: no fault figures */
    const struct mps_clients *mps_clients; /* NULL: no strangers' figures */
};

/* What the GPU backend reports on each GPU, read before a render. */
struct metrics_gpus {
    unsigned n;
    bool ok[KAIROS_MAX_GPUS]; /* false: the backend had no figures for it */
    struct gpu_status st[KAIROS_MAX_GPUS];
};

/* Asks the backend (NVML: a driver call per figure) for every GPU's status. The
 * loop thread calls it; a forked renderer (metrics_snapshot.h) must not, since
 * NVML's handles belong to kairosd's process. */
void metrics_read_gpus(const struct metrics_sources *src, struct metrics_gpus *out);

/* The exposition text into a malloc'd NUL-terminated buffer (*len without the NUL),
 * with the GPU figures of gpus. 0 or -ENOMEM. */
int metrics_render_gpus(const struct metrics_sources *src, const struct metrics_gpus *gpus,
                        char **text, size_t *len);
/* The same, reading the GPUs first. */
int metrics_render(const struct metrics_sources *src, char **text, size_t *len);

/* A label value as the exposition format wants it between double quotes:
 * backslash, double quote and newline escaped (\\, \", \n). */
void metrics_write_label_value(FILE *f, const char *value);

#endif /* KAIROS_DAEMON_METRICS_H */
