/* gpu.h - the GPUs of the node behind one ops struct: NVML (gpu_nvml.c) on a real
 * node, a scripted fake (gpu_fake.c) for tests. The rest of the daemon never knows
 * which one it has, and runs without any (no GPU, CI) with the count from the config.
 *
 * Every value comes with a valid bit where the backend may not know it, so that
 * "unknown" is never taken for 0.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_GPU_H
#define KAIROS_DAEMON_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The utilization samples timeshare.c asks for at once (processes() has no limit). */
#define GPU_MAX_PROCS 256

struct gpu_proc {
    uint32_t pid;
    uint64_t used;     /* bytes of device memory */
    bool used_valid;
};

/* A process's share of the SM time (percent) over the sampled interval. */
struct gpu_util {
    uint32_t pid;
    unsigned sm_percent;
};

/* What a GPU reports of itself (for the metrics endpoint); each value with its
 * valid bit. Utilization: percent of the last sample period (NVML's). */
struct gpu_status {
    bool memory_valid;
    uint64_t memory_used, memory_total; /* bytes */
    bool util_valid;
    unsigned util_percent;             /* time a kernel ran */
    unsigned memory_util_percent;      /* time device memory was read or written */
    bool temperature_valid;
    unsigned temperature_c;
    bool power_valid;
    unsigned power_mw;
};

/* A PCI address as the kernel writes it: domain:bus:device (the function is 0). */
struct gpu_pci {
    uint32_t domain, bus, device;
};

struct gpu_backend;

struct gpu_ops {
    const char *name;
    int (*init)(struct gpu_backend *b);   /* 0, or -errno when unavailable */
    void (*fini)(struct gpu_backend *b);
    int (*count)(struct gpu_backend *b, unsigned *n);
    int (*uuid)(struct gpu_backend *b, unsigned index, char *out, size_t cap);
    int (*total_memory)(struct gpu_backend *b, unsigned index, uint64_t *bytes);
    /* The compute processes on GPU index; *n set to how many were written. When the
     * backend has more than cap: -E2BIG with *n set to how many it has (the caller
     * grows its buffer and asks again); there is no fixed limit. */
    int (*processes)(struct gpu_backend *b, unsigned index, struct gpu_proc *out, size_t cap,
                     size_t *n);
    /* Per-process SM utilization on GPU index since since_us (wall clock, us; 0: what
     * the backend has), one entry per pid (samples averaged); *n set. -ENOTSUP when
     * the backend cannot tell. */
    int (*utilization)(struct gpu_backend *b, unsigned index, uint64_t since_us,
                       struct gpu_util *out, size_t cap, size_t *n);
    /* Whether GPU index is kept initialised (persistence mode); -ENOTSUP when the
     * backend cannot tell. May be NULL. gpu_numbering.c says why it matters. */
    int (*persistence)(struct gpu_backend *b, unsigned index, bool *on);
    /* The GPU's own figures (the metrics; memory_used is memory.used, by anyone, which
     * the audit reconciles); what the backend cannot tell stays invalid. 0 or -errno
     * (-ENODEV: no such GPU). */
    int (*status)(struct gpu_backend *b, unsigned index, struct gpu_status *out);
    /* The path of GPU index's device node ("/dev/nvidia3": minor 3). */
    int (*device_path)(struct gpu_backend *b, unsigned index, char *out, size_t cap);
    /* Whether process pid has a file of the driver open, where the backend knows its
     * own kind of driver file (the fake driver's sockets); -ENOTSUP where the link of
     * the descriptor under /proc says it (a node of the driver). May be NULL. */
    int (*driver_file_open)(struct gpu_backend *b, uint32_t pid, bool *open);
    /* The NVIDIA driver's version as it writes it ("580.159.04"); -ENOTSUP when the
     * backend cannot tell. May be NULL. */
    int (*driver_version)(struct gpu_backend *b, char *out, size_t cap);
    /* Whether descriptor fd of process pid is a file of the driver, where the backend
     * knows its own kind of driver file (the fake driver's sockets): 0 with *is set;
     * -ENOTSUP where the device node says it (heirs.c: its major). May be NULL. */
    int (*driver_fd)(struct gpu_backend *b, uint32_t pid, int fd, bool *is);
    /* GPU index's PCI address (the driver's Xid lines name a GPU by it): 0, or
     * -ENOTSUP when the backend cannot tell. May be NULL. */
    int (*pci_address)(struct gpu_backend *b, unsigned index, struct gpu_pci *out);
};

struct gpu_backend {
    const struct gpu_ops *ops;
    void *priv;
    const char *fake_path; /* for the fake backend */
    char why[256];         /* why init failed, for the log */
};

extern const struct gpu_ops gpu_nvml_ops;
extern const struct gpu_ops gpu_fake_ops;

/* Opens the fake backend when fake_path is set, else NVML. Returns 0, or -errno
 * with the reason in b->why (the daemon then runs without a backend). */
int gpu_init(struct gpu_backend *b, const char *fake_path);
void gpu_fini(struct gpu_backend *b);
/* b's processes on GPU index into *buf (malloc'd, *cap entries), grown to however
 * many the backend lists; *n set. 0 or -errno (-EAGAIN: the list kept growing). */
int gpu_processes_all(struct gpu_backend *b, unsigned index, struct gpu_proc **buf,
                      size_t *cap, size_t *n);
/* The index of the GPU of n_gpus at PCI address a: 0 with *index, -ENOENT when none
 * is there, -ENOTSUP when the backend cannot tell (b may have no backend). */
int gpu_index_at(struct gpu_backend *b, unsigned n_gpus, const struct gpu_pci *a,
                 unsigned *index);

#endif /* KAIROS_DAEMON_GPU_H */
