/* gpu_nvml.c - the NVML backend, loaded with dlopen("libnvidia-ml.so.1") through
 * declarations of our own (no NVML headers at build time), newest versioned symbols
 * first. Absent library or driver: init fails with a reason and the daemon runs
 * without audit. */
#include "daemon/gpu/gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_return_t;               /* nvmlReturn_t: 0 = NVML_SUCCESS */
typedef struct nvml_device *nvml_device_t;

#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_NOT_FOUND 6
#define NVML_VALUE_NOT_AVAILABLE (~0ull)

struct nvml_memory {                     /* nvmlMemory_t */
    unsigned long long total, free, used;
};

struct nvml_utilization {               /* nvmlUtilization_t */
    unsigned gpu, memory;
};

#define NVML_TEMPERATURE_GPU 0

struct nvml_process_info {               /* nvmlProcessInfo_t (v2 and v3) */
    unsigned pid;
    unsigned long long usedGpuMemory;
    unsigned gpuInstanceId, computeInstanceId;
};

struct nvml_util_sample {               /* nvmlProcessUtilizationSample_t */
    unsigned pid;
    unsigned long long timeStamp;
    unsigned smUtil, memUtil, encUtil, decUtil;
};

struct nvml_pci_info {                   /* nvmlPciInfo_t (nvmlDeviceGetPciInfo_v3) */
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
};

struct nvml {
    void *lib;
    nvml_return_t (*init)(void);
    nvml_return_t (*shutdown)(void);
    nvml_return_t (*count)(unsigned *);
    nvml_return_t (*handle)(unsigned, nvml_device_t *);
    nvml_return_t (*uuid)(nvml_device_t, char *, unsigned);
    nvml_return_t (*memory)(nvml_device_t, struct nvml_memory *);
    nvml_return_t (*procs)(nvml_device_t, unsigned *, struct nvml_process_info *);
    nvml_return_t (*util)(nvml_device_t, struct nvml_util_sample *, unsigned *,
                          unsigned long long); /* optional */
    nvml_return_t (*persistence)(nvml_device_t, int *); /* nvmlEnableState_t; optional */
    /* optional, for the metrics endpoint */
    nvml_return_t (*rates)(nvml_device_t, struct nvml_utilization *);
    nvml_return_t (*temperature)(nvml_device_t, int, unsigned *);
    nvml_return_t (*power)(nvml_device_t, unsigned *);
    nvml_return_t (*minor)(nvml_device_t, unsigned *); /* optional */
    nvml_return_t (*driver)(char *, unsigned);         /* optional */
    nvml_return_t (*pci)(nvml_device_t, struct nvml_pci_info *); /* optional */
};

static void *sym(void *lib, const char *const *names)
{
    for (; *names; names++) {
        void *p = dlsym(lib, *names);
        if (p)
            return p;
    }
    return NULL;
}

static int nvml_init(struct gpu_backend *b)
{
    int rc = 0;
    struct nvml *n = calloc(1, sizeof *n);
    if (!n)
        return -ENOMEM;
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        snprintf(b->why, sizeof b->why, "NVML not available (%s)", dlerror());
        rc = -ENOENT;
        goto out;
    }
    static const char *const s_init[] = {"nvmlInit_v2", "nvmlInit", NULL};
    static const char *const s_shutdown[] = {"nvmlShutdown", NULL};
    static const char *const s_count[] = {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount", NULL};
    static const char *const s_handle[] = {"nvmlDeviceGetHandleByIndex_v2",
                                           "nvmlDeviceGetHandleByIndex", NULL};
    static const char *const s_uuid[] = {"nvmlDeviceGetUUID", NULL};
    static const char *const s_memory[] = {"nvmlDeviceGetMemoryInfo", NULL};
    static const char *const s_procs[] = {"nvmlDeviceGetComputeRunningProcesses_v3",
                                          "nvmlDeviceGetComputeRunningProcesses_v2", NULL};
    /* function pointers from dlsym: POSIX guarantees the conversion */
    *(void **)&n->init = sym(n->lib, s_init);
    *(void **)&n->shutdown = sym(n->lib, s_shutdown);
    *(void **)&n->count = sym(n->lib, s_count);
    *(void **)&n->handle = sym(n->lib, s_handle);
    *(void **)&n->uuid = sym(n->lib, s_uuid);
    *(void **)&n->memory = sym(n->lib, s_memory);
    *(void **)&n->procs = sym(n->lib, s_procs);
    static const char *const s_util[] = {"nvmlDeviceGetProcessUtilization", NULL};
    *(void **)&n->util = sym(n->lib, s_util);
    static const char *const s_persistence[] = {"nvmlDeviceGetPersistenceMode", NULL};
    *(void **)&n->persistence = sym(n->lib, s_persistence);
    static const char *const s_rates[] = {"nvmlDeviceGetUtilizationRates", NULL};
    static const char *const s_temp[] = {"nvmlDeviceGetTemperature", NULL};
    static const char *const s_power[] = {"nvmlDeviceGetPowerUsage", NULL};
    *(void **)&n->rates = sym(n->lib, s_rates);
    *(void **)&n->temperature = sym(n->lib, s_temp);
    *(void **)&n->power = sym(n->lib, s_power);
    static const char *const s_minor[] = {"nvmlDeviceGetMinorNumber", NULL};
    *(void **)&n->minor = sym(n->lib, s_minor);
    static const char *const s_driver[] = {"nvmlSystemGetDriverVersion", NULL};
    *(void **)&n->driver = sym(n->lib, s_driver);
    static const char *const s_pci[] = {"nvmlDeviceGetPciInfo_v3", NULL};
    *(void **)&n->pci = sym(n->lib, s_pci);
    if (!n->init || !n->shutdown || !n->count || !n->handle || !n->uuid || !n->memory ||
        !n->procs) {
        snprintf(b->why, sizeof b->why, "libnvidia-ml.so.1 lacks a symbol kairosd needs "
                 "(driver too old?)");
        rc = -ENOSYS;
        goto out;
    }
    nvml_return_t r = n->init();
    if (r) {
        snprintf(b->why, sizeof b->why, "nvmlInit failed (NVML error %d): no GPU or driver", r);
        rc = -ENODEV;
        goto out;
    }
    b->priv = n;
out:
    if (rc) {
        if (n->lib)
            dlclose(n->lib);
        free(n);
    }
    return rc;
}

static void nvml_fini(struct gpu_backend *b)
{
    struct nvml *n = b->priv;
    if (!n)
        return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
    b->priv = NULL;
}

static int nvml_count(struct gpu_backend *b, unsigned *count)
{
    struct nvml *n = b->priv;
    return n->count(count) ? -EIO : 0;
}

static int nvml_device(struct gpu_backend *b, unsigned index, nvml_device_t *d)
{
    struct nvml *n = b->priv;
    return n->handle(index, d) ? -ENODEV : 0;
}

static int nvml_uuid(struct gpu_backend *b, unsigned index, char *out, size_t cap)
{
    struct nvml *n = b->priv;
    nvml_device_t d;
    if (nvml_device(b, index, &d))
        return -ENODEV;
    return n->uuid(d, out, (unsigned)cap) ? -EIO : 0;
}

static int nvml_total(struct gpu_backend *b, unsigned index, uint64_t *bytes)
{
    struct nvml *n = b->priv;
    nvml_device_t d;
    struct nvml_memory m;
    if (nvml_device(b, index, &d) || n->memory(d, &m))
        return -EIO;
    *bytes = m.total;
    return 0;
}

/* /dev/nvidiaN with N the device's minor number (not always its NVML index). */
static int nvml_device_path(struct gpu_backend *b, unsigned index, char *out, size_t cap)
{
    struct nvml *n = b->priv;
    nvml_device_t d;
    unsigned minor;
    if (!n->minor)
        return -ENOTSUP;
    if (nvml_device(b, index, &d) || n->minor(d, &minor))
        return -EIO;
    snprintf(out, cap, "/dev/nvidia%u", minor);
    return 0;
}

static int nvml_driver_version(struct gpu_backend *b, char *out, size_t cap)
{
    struct nvml *n = b->priv;
    char text[96] = "";
    if (!n->driver)
        return -ENOTSUP;
    if (n->driver(text, sizeof text))
        return -EIO;
    snprintf(out, cap, "%s", text);
    return 0;
}

static int nvml_processes(struct gpu_backend *b, unsigned index, struct gpu_proc *out, size_t cap,
                          size_t *count)
{
    struct nvml *n = b->priv;
    nvml_device_t d;
    *count = 0;
    if (nvml_device(b, index, &d))
        return -ENODEV;
    unsigned got = cap > UINT_MAX ? UINT_MAX : (unsigned)cap;
    struct nvml_process_info *infos = calloc(got ? got : 1, sizeof *infos);
    if (!infos)
        return -ENOMEM;
    int rc = 0;
    nvml_return_t r = n->procs(d, &got, infos);
    if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
        *count = got > cap ? got : cap + 1; /* how many NVML has now: ask again */
        rc = -E2BIG;
    } else if (r) {
        rc = -EIO;
    }
    for (unsigned i = 0; !rc && i < got && *count < cap; i++) {
        struct gpu_proc *p = &out[(*count)++];
        p->pid = infos[i].pid;
        p->used_valid = infos[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE;
        p->used = p->used_valid ? infos[i].usedGpuMemory : 0;
    }
    free(infos);
    return rc;
}

/* nvmlDeviceGetProcessUtilization: a first call sizes the sample buffer (the H200
 * measurements: it fails until then); samples of one pid are averaged. */
static int nvml_utilization(struct gpu_backend *b, unsigned index, uint64_t since_us,
                            struct gpu_util *out, size_t cap, size_t *count)
{
    struct nvml *n = b->priv;
    nvml_device_t d;
    unsigned got = 0;
    *count = 0;
    if (!n->util)
        return -ENOTSUP;
    if (nvml_device(b, index, &d))
        return -ENODEV;
    nvml_return_t r = n->util(d, NULL, &got, since_us);
    if (r && r != NVML_ERROR_INSUFFICIENT_SIZE)
        return r == NVML_ERROR_NOT_FOUND ? 0 : -EIO; /* NOT_FOUND: no sample since */
    if (!got)
        return 0;
    got += 16; /* processes may start between the calls */
    struct nvml_util_sample *v = calloc(got, sizeof *v);
    unsigned *hits = calloc(cap ? cap : 1, sizeof *hits);
    unsigned long long *sums = calloc(cap ? cap : 1, sizeof *sums);
    int rc = 0;
    if (!v || !hits || !sums) {
        rc = -ENOMEM;
        goto out;
    }
    r = n->util(d, v, &got, since_us);
    if (r) {
        rc = r == NVML_ERROR_NOT_FOUND ? 0 : -EIO;
        goto out;
    }
    for (unsigned i = 0; i < got; i++) {
        size_t k = 0;
        while (k < *count && out[k].pid != v[i].pid)
            k++;
        if (k == *count) {
            if (*count == cap)
                continue;
            out[(*count)++] = (struct gpu_util){.pid = v[i].pid};
        }
        hits[k]++;
        sums[k] += v[i].smUtil;
    }
    for (size_t k = 0; k < *count; k++) {
        unsigned long long mean = sums[k] / hits[k];
        out[k].sm_percent = mean > 100 ? 100 : (unsigned)mean;
    }
out:
    free(v);
    free(hits);
    free(sums);
    return rc;
}

static int nvml_persistence(struct gpu_backend *b, unsigned index, bool *on)
{
    struct nvml *n = b->priv;
    nvml_device_t d;
    int mode = 0;
    if (!n->persistence)
        return -ENOTSUP;
    if (nvml_device(b, index, &d))
        return -ENODEV;
    if (n->persistence(d, &mode))
        return -ENOTSUP;
    *on = mode == 1; /* NVML_FEATURE_ENABLED */
    return 0;
}

/* Memory, utilization rates, temperature and power; each query that fails (not
 * supported on this GPU, a MIG instance...) leaves its value invalid. */
static int nvml_status(struct gpu_backend *b, unsigned index, struct gpu_status *out)
{
    struct nvml *n = b->priv;
    nvml_device_t d;
    memset(out, 0, sizeof *out);
    if (nvml_device(b, index, &d))
        return -ENODEV;
    struct nvml_memory m;
    if (!n->memory(d, &m)) {
        out->memory_valid = true;
        out->memory_used = m.used;
        out->memory_total = m.total;
    }
    struct nvml_utilization u;
    if (n->rates && !n->rates(d, &u) && u.gpu <= 100 && u.memory <= 100) {
        out->util_valid = true;
        out->util_percent = u.gpu;
        out->memory_util_percent = u.memory;
    }
    out->temperature_valid = n->temperature &&
                             !n->temperature(d, NVML_TEMPERATURE_GPU, &out->temperature_c);
    out->power_valid = n->power && !n->power(d, &out->power_mw);
    return 0;
}

static int nvml_pci_address(struct gpu_backend *b, unsigned index, struct gpu_pci *out)
{
    struct nvml *n = b->priv;
    nvml_device_t d;
    struct nvml_pci_info p;
    if (!n->pci)
        return -ENOTSUP;
    if (nvml_device(b, index, &d) || n->pci(d, &p))
        return -EIO;
    *out = (struct gpu_pci){.domain = p.domain, .bus = p.bus, .device = p.device};
    return 0;
}

const struct gpu_ops gpu_nvml_ops = {
    .name = "nvml",
    .init = nvml_init,
    .fini = nvml_fini,
    .count = nvml_count,
    .uuid = nvml_uuid,
    .total_memory = nvml_total,
    .processes = nvml_processes,
    .utilization = nvml_utilization,
    .persistence = nvml_persistence,
    .status = nvml_status,
    .device_path = nvml_device_path,
    .driver_version = nvml_driver_version,
    .pci_address = nvml_pci_address,
};
