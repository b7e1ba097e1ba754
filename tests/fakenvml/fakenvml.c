/* fakenvml.c - a stand-in libnvidia-ml.so.1 for tests, so that kairosd's NVML backend
 * (src/daemon/gpu/gpu_nvml.c: dlopen, versioned symbols, the process list's
 * INSUFFICIENT_SIZE protocol, memory info, minor numbers) runs without a GPU.
 *
 * It answers from the file named by KAIROS_FAKE_NVML, re-read on every call, in the
 * fake GPU backend's format (gpu_fake.c): "gpu INDEX UUID TOTAL", "proc INDEX PID
 * USED", "used INDEX BYTES", "driver VERSION" (else 580.159.04). Minor numbers are INDEX + 10, so that a backend that
 * took the index for the minor would look for the wrong /dev node.
 * Only the calls kairosd makes are here. Thread rules: none (kairosd has one thread).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_UNKNOWN 999
#define FAKE_MAX_GPUS 16

typedef struct fake_device *nvml_device_t;
struct fake_device {
    unsigned index;
};
static struct fake_device devices[FAKE_MAX_GPUS];

struct nvml_memory {
    unsigned long long total, free, used;
};
struct nvml_process_info {
    unsigned pid;
    unsigned long long usedGpuMemory;
    unsigned gpuInstanceId, computeInstanceId;
};

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetCount_v2(unsigned *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvml_device_t *d);
int nvmlDeviceGetUUID(nvml_device_t d, char *out, unsigned len);
int nvmlDeviceGetMemoryInfo(nvml_device_t d, struct nvml_memory *m);
int nvmlDeviceGetComputeRunningProcesses_v3(nvml_device_t d, unsigned *count,
                                            struct nvml_process_info *infos);
int nvmlDeviceGetMinorNumber(nvml_device_t d, unsigned *minor);
int nvmlSystemGetDriverVersion(char *version, unsigned length);

/* Calls line_fn for every line of the file; returns NVML_ERROR_UNKNOWN without it. */
static int each_line(void (*line_fn)(const char *line, void *ctx), void *ctx)
{
    const char *path = getenv("KAIROS_FAKE_NVML");
    FILE *f = path ? fopen(path, "re") : NULL;
    if (!f)
        return NVML_ERROR_UNKNOWN;
    char line[512];
    while (fgets(line, sizeof line, f))
        line_fn(line, ctx);
    fclose(f);
    return NVML_SUCCESS;
}

struct gpu_info {
    unsigned index;
    int found;
    char uuid[96];
    unsigned long long total, used;
    unsigned n_procs, cap;
    struct nvml_process_info *procs;
    unsigned count;
};

static void gpu_line(const char *line, void *ctx)
{
    struct gpu_info *g = ctx;
    unsigned idx, pid;
    unsigned long long v;
    char uuid[96];
    if (sscanf(line, "gpu %u %95s %llu", &idx, uuid, &v) == 3) {
        g->count = idx + 1 > g->count ? idx + 1 : g->count;
        if (idx == g->index) {
            g->found = 1;
            snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
            g->total = v;
        }
    } else if (sscanf(line, "used %u %llu", &idx, &v) == 2 && idx == g->index) {
        g->used = v;
    } else if (sscanf(line, "proc %u %u %llu", &idx, &pid, &v) == 3 && idx == g->index) {
        if (g->n_procs < g->cap)
            g->procs[g->n_procs] = (struct nvml_process_info){pid, v, ~0u, ~0u};
        g->n_procs++;
    }
}

static int gpu_read(unsigned index, struct gpu_info *g, struct nvml_process_info *procs,
                    unsigned cap)
{
    memset(g, 0, sizeof *g);
    g->index = index;
    g->procs = procs;
    g->cap = cap;
    return each_line(gpu_line, g);
}

int nvmlInit_v2(void)
{
    struct gpu_info g;
    return gpu_read(0, &g, NULL, 0);
}

int nvmlShutdown(void)
{
    return NVML_SUCCESS;
}

int nvmlDeviceGetCount_v2(unsigned *count)
{
    struct gpu_info g;
    int rc = gpu_read(0, &g, NULL, 0);
    *count = g.count;
    return rc;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvml_device_t *d)
{
    struct gpu_info g;
    if (index >= FAKE_MAX_GPUS || gpu_read(index, &g, NULL, 0) || !g.found)
        return NVML_ERROR_INVALID_ARGUMENT;
    devices[index].index = index;
    *d = &devices[index];
    return NVML_SUCCESS;
}

int nvmlDeviceGetUUID(nvml_device_t d, char *out, unsigned len)
{
    struct gpu_info g;
    if (gpu_read(d->index, &g, NULL, 0))
        return NVML_ERROR_UNKNOWN;
    snprintf(out, len, "%s", g.uuid);
    return NVML_SUCCESS;
}

int nvmlDeviceGetMemoryInfo(nvml_device_t d, struct nvml_memory *m)
{
    struct gpu_info g;
    if (gpu_read(d->index, &g, NULL, 0))
        return NVML_ERROR_UNKNOWN;
    m->total = g.total;
    m->used = g.used;
    m->free = g.total - g.used;
    return NVML_SUCCESS;
}

/* NVML's protocol: fewer slots than processes gives INSUFFICIENT_SIZE and the count. */
int nvmlDeviceGetComputeRunningProcesses_v3(nvml_device_t d, unsigned *count,
                                            struct nvml_process_info *infos)
{
    struct gpu_info g;
    if (gpu_read(d->index, &g, infos, infos ? *count : 0))
        return NVML_ERROR_UNKNOWN;
    int rc = g.n_procs > *count ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *count = g.n_procs;
    return rc;
}

int nvmlDeviceGetMinorNumber(nvml_device_t d, unsigned *minor)
{
    *minor = d->index + 10;
    return NVML_SUCCESS;
}

static void driver_line(const char *line, void *ctx)
{
    char v[64];
    if (sscanf(line, "driver %63s", v) == 1)
        snprintf(ctx, 64, "%s", v);
}

int nvmlSystemGetDriverVersion(char *version, unsigned length)
{
    char v[64] = "580.159.04";
    int rc = each_line(driver_line, v);
    if (rc)
        return rc;
    if (strlen(v) >= length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(version, length, "%s", v);
    return NVML_SUCCESS;
}
