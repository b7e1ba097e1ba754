/* gpu_fake.c - a scripted GPU backend for tests: a text file, re-read on every
 * call so a test can change the "GPU processes" while the daemon runs; and the
 * backend-independent calls of gpu.h (gpu_init, gpu_fini, gpu_processes_all).
 *
 *   # comment
 *   gpu INDEX UUID TOTAL_BYTES
 *   proc INDEX PID USED_BYTES      (USED_BYTES "-" when unknown)
 *   util INDEX PID SM_PERCENT      (per-process utilization)
 *   persistence INDEX 0|1          (persistence mode; unknown without such a line)
 *   status INDEX USED_BYTES GPU_PERCENT MEM_PERCENT TEMP_C POWER_MW
 *                                  (the GPU's own figures, USED_BYTES its
 *                                  memory.used by anyone; "-" for unknown)
 *   devdir PATH                    (the device nodes: PATH/nvidiaINDEX; /dev when absent)
 *   driver VERSION                 (the NVIDIA driver's release; unknown when absent)
 *   pci INDEX DOMAIN:BUS:DEVICE    (its PCI address in hex, as the kernel log writes it;
 *                                  unknown when absent)
 *
 * Write it atomically (temp file + rename) to avoid half-read scripts.
 *
 * The fake NVIDIA driver of the tests (tests/fakedrv) makes its files sockets bound
 * to abstract names "@kairos-fakedrv...": driver_file_open and driver_fd find them
 * (through /proc/net/unix and /proc/PID/fd), as a real node's link would be found.
 */
#include "daemon/gpu/gpu.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kairos/proto.h"

struct fake_gpu {
    bool present;
    char uuid[KAIROS_UUID_MAX];
    uint64_t total;
};

/* Reads the file: fills gpus, or out with the proc lines of GPU want (-E2BIG and
 * *n = how many there are when more than cap). */
static int fake_read(struct gpu_backend *b, struct fake_gpu *gpus, int want, struct gpu_proc *out,
                     size_t cap, size_t *n)
{
    FILE *f = fopen(b->fake_path, "re");
    if (!f) {
        snprintf(b->why, sizeof b->why, "fake GPU file %s: %s", b->fake_path, strerror(errno));
        return -errno;
    }
    char line[512];
    bool more = false;
    if (n)
        *n = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned idx, pid;
        unsigned long long total, used;
        char uuid[KAIROS_UUID_MAX], used_text[32];
        if (gpus && sscanf(line, "gpu %u %47s %llu", &idx, uuid, &total) == 3 &&
            idx < KAIROS_MAX_GPUS) {
            gpus[idx].present = true;
            snprintf(gpus[idx].uuid, sizeof gpus[idx].uuid, "%s", uuid);
            gpus[idx].total = total;
        } else if (want >= 0 && sscanf(line, "proc %u %u %31s", &idx, &pid, used_text) == 3 &&
                   (int)idx == want) {
            if ((*n)++ >= cap) {
                more = true; /* counted, not written: the caller asks again */
                continue;
            }
            struct gpu_proc *p = &out[*n - 1];
            p->pid = pid;
            p->used_valid = sscanf(used_text, "%llu", &used) == 1;
            p->used = p->used_valid ? used : 0;
        }
    }
    fclose(f);
    return more ? -E2BIG : 0;
}

/* The value of the first line "KEY INDEX VALUE" (or "KEY VALUE" when index < 0). */
static int fake_value(struct gpu_backend *b, const char *key, int index, char *out, size_t cap)
{
    FILE *f = fopen(b->fake_path, "re");
    if (!f)
        return -errno;
    char line[512], k[16], v[256];
    unsigned idx;
    int rc = -ENOENT;
    while (rc && fgets(line, sizeof line, f)) {
        bool hit = index < 0 ? sscanf(line, "%15s %255s", k, v) == 2
                             : sscanf(line, "%15s %u %255s", k, &idx, v) == 3 && (int)idx == index;
        if (hit && !strcmp(k, key)) {
            snprintf(out, cap, "%s", v);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

static int fake_device_path(struct gpu_backend *b, unsigned index, char *out, size_t cap)
{
    char dir[256];
    if (fake_value(b, "devdir", -1, dir, sizeof dir))
        snprintf(dir, sizeof dir, "/dev");
    snprintf(out, cap, "%s/nvidia%u", dir, index);
    return 0;
}

static int fake_driver_version(struct gpu_backend *b, char *out, size_t cap)
{
    return fake_value(b, "driver", -1, out, cap) ? -ENOTSUP : 0;
}

static int fake_pci_address(struct gpu_backend *b, unsigned index, struct gpu_pci *out)
{
    char text[64];
    if (fake_value(b, "pci", (int)index, text, sizeof text))
        return -ENOTSUP;
    return sscanf(text, "%x:%x:%x", &out->domain, &out->bus, &out->device) == 3 ? 0 : -ENOTSUP;
}

static int fake_init(struct gpu_backend *b)
{
    if (!b->fake_path)
        return -EINVAL;
    struct fake_gpu *gpus = calloc(KAIROS_MAX_GPUS, sizeof *gpus);
    if (!gpus)
        return -ENOMEM;
    int rc = fake_read(b, gpus, -1, NULL, 0, NULL);
    if (rc) {
        free(gpus);
        return rc;
    }
    b->priv = gpus;
    return 0;
}

static void fake_fini(struct gpu_backend *b)
{
    free(b->priv);
    b->priv = NULL;
}

static int fake_count(struct gpu_backend *b, unsigned *n)
{
    const struct fake_gpu *gpus = b->priv;
    *n = 0;
    while (*n < KAIROS_MAX_GPUS && gpus[*n].present)
        (*n)++;
    return 0;
}

static int fake_uuid(struct gpu_backend *b, unsigned index, char *out, size_t cap)
{
    const struct fake_gpu *gpus = b->priv;
    if (index >= KAIROS_MAX_GPUS || !gpus[index].present)
        return -ENODEV;
    snprintf(out, cap, "%s", gpus[index].uuid);
    return 0;
}

static int fake_total(struct gpu_backend *b, unsigned index, uint64_t *bytes)
{
    const struct fake_gpu *gpus = b->priv;
    if (index >= KAIROS_MAX_GPUS || !gpus[index].present)
        return -ENODEV;
    *bytes = gpus[index].total;
    return 0;
}

static int fake_processes(struct gpu_backend *b, unsigned index, struct gpu_proc *out, size_t cap,
                          size_t *n)
{
    return fake_read(b, NULL, (int)index, out, cap, n);
}

static int fake_utilization(struct gpu_backend *b, unsigned index, uint64_t since_us,
                            struct gpu_util *out, size_t cap, size_t *n)
{
    FILE *f = fopen(b->fake_path, "re");
    *n = 0;
    if (!f)
        return -errno;
    char line[512];
    unsigned idx, pid, sm;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "util %u %u %u", &idx, &pid, &sm) == 3 && idx == index && *n < cap)
            out[(*n)++] = (struct gpu_util){.pid = pid, .sm_percent = sm > 100 ? 100 : sm};
    fclose(f);
    return 0;
}

static int fake_persistence(struct gpu_backend *b, unsigned index, bool *on)
{
    FILE *f = fopen(b->fake_path, "re");
    if (!f)
        return -errno;
    char line[512];
    unsigned idx, mode;
    int rc = -ENOTSUP;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "persistence %u %u", &idx, &mode) == 2 && idx == index) {
            *on = mode != 0;
            rc = 0;
        }
    fclose(f);
    return rc;
}

/* "-" or a number into *v; *valid says which. */
static void fake_field(const char *text, unsigned long long *v, bool *valid)
{
    *valid = sscanf(text, "%llu", v) == 1;
    if (!*valid)
        *v = 0;
}

static int fake_status(struct gpu_backend *b, unsigned index, struct gpu_status *out)
{
    const struct fake_gpu *gpus = b->priv;
    memset(out, 0, sizeof *out);
    if (index >= KAIROS_MAX_GPUS || !gpus[index].present)
        return -ENODEV;
    FILE *f = fopen(b->fake_path, "re");
    if (!f)
        return -errno;
    char line[512], used[32], util[32], mutil[32], temp[32], power[32];
    unsigned idx;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "status %u %31s %31s %31s %31s %31s", &idx, used, util, mutil, temp,
                   power) != 6 || idx != index)
            continue;
        unsigned long long v[5];
        bool ok[5];
        fake_field(used, &v[0], &ok[0]);
        fake_field(util, &v[1], &ok[1]);
        fake_field(mutil, &v[2], &ok[2]);
        fake_field(temp, &v[3], &ok[3]);
        fake_field(power, &v[4], &ok[4]);
        out->memory_valid = ok[0];
        out->memory_used = v[0];
        out->memory_total = gpus[index].total;
        out->util_valid = ok[1] && ok[2] && v[1] <= 100 && v[2] <= 100;
        out->util_percent = out->util_valid ? (unsigned)v[1] : 0;
        out->memory_util_percent = out->util_valid ? (unsigned)v[2] : 0;
        out->temperature_valid = ok[3] && v[3] < 1000;
        out->temperature_c = out->temperature_valid ? (unsigned)v[3] : 0;
        out->power_valid = ok[4] && v[4] <= UINT32_MAX;
        out->power_mw = out->power_valid ? (unsigned)v[4] : 0;
    }
    fclose(f);
    return 0;
}

/* Whether /proc/net/unix names socket inode ino as one of the fake driver's files. */
static bool fakedrv_socket(unsigned long long ino)
{
    FILE *f = fopen("/proc/net/unix", "re");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long i;
        char name[256];
        found = sscanf(line, "%*s %*s %*s %*s %*s %*s %llu %255s", &i, name) == 2 && i == ino &&
                strncmp(name, "@kairos-fakedrv", 15) == 0;
    }
    fclose(f);
    return found;
}

static int fake_driver_file_open(struct gpu_backend *b, uint32_t pid, bool *open)
{
    (void)b;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%u/fd", pid);
    DIR *d = opendir(dir);
    *open = false;
    if (!d)
        return -ENOTSUP;
    for (struct dirent *e = readdir(d); e && !*open; e = readdir(d)) {
        char path[sizeof dir + sizeof e->d_name], link[64];
        unsigned long long ino;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        *open = sscanf(link, "socket:[%llu]", &ino) == 1 && fakedrv_socket(ino);
    }
    closedir(d);
    return *open ? 0 : -ENOTSUP; /* none of its sockets: the nodes' links may say more */
}

static int fake_driver_fd(struct gpu_backend *b, uint32_t pid, int fd, bool *is)
{
    (void)b;
    char path[64], link[64];
    unsigned long long ino;
    snprintf(path, sizeof path, "/proc/%u/fd/%d", pid, fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    *is = false;
    if (n <= 0)
        return -ENOTSUP;
    link[n] = 0;
    *is = sscanf(link, "socket:[%llu]", &ino) == 1 && fakedrv_socket(ino);
    return *is ? 0 : -ENOTSUP; /* not one of its sockets: a node's major may say more */
}

const struct gpu_ops gpu_fake_ops = {
    .name = "fake",
    .init = fake_init,
    .fini = fake_fini,
    .count = fake_count,
    .uuid = fake_uuid,
    .total_memory = fake_total,
    .processes = fake_processes,
    .utilization = fake_utilization,
    .persistence = fake_persistence,
    .status = fake_status,
    .device_path = fake_device_path,
    .driver_file_open = fake_driver_file_open,
    .driver_version = fake_driver_version,
    .driver_fd = fake_driver_fd,
    .pci_address = fake_pci_address,
};

int gpu_index_at(struct gpu_backend *b, unsigned n_gpus, const struct gpu_pci *a,
                 unsigned *index)
{
    if (!b || !b->ops || !b->ops->pci_address)
        return -ENOTSUP;
    bool told = false;
    for (unsigned g = 0; g < n_gpus; g++) {
        struct gpu_pci p;
        if (b->ops->pci_address(b, g, &p))
            continue;
        told = true;
        if (p.domain == a->domain && p.bus == a->bus && p.device == a->device) {
            *index = g;
            return 0;
        }
    }
    return told ? -ENOENT : -ENOTSUP;
}

int gpu_init(struct gpu_backend *b, const char *fake_path)
{
    memset(b, 0, sizeof *b);
    b->fake_path = fake_path;
    const struct gpu_ops *ops = fake_path ? &gpu_fake_ops : &gpu_nvml_ops;
    int rc = ops->init(b);
    if (rc)
        return rc;
    b->ops = ops;
    return 0;
}

void gpu_fini(struct gpu_backend *b)
{
    if (b->ops)
        b->ops->fini(b);
    b->ops = NULL;
}

int gpu_processes_all(struct gpu_backend *b, unsigned index, struct gpu_proc **buf,
                      size_t *cap, size_t *n)
{
    for (int attempt = 0; attempt < 4; attempt++) {
        int rc = b->ops->processes(b, index, *buf, *cap, n);
        if (rc != -E2BIG)
            return rc;
        size_t want = *n + *n / 4 + 16; /* processes may start before the next call */
        struct gpu_proc *v = realloc(*buf, want * sizeof *v);
        if (!v)
            return -ENOMEM;
        *buf = v;
        *cap = want;
    }
    return -EAGAIN;
}
