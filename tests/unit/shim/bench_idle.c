/* bench_idle.c - what an idle process under a time policy costs: a figure, not a test.
 *
 * Issue 23, "idle costs nothing": a process that lives but queues nothing, under a
 * policy that asks for runnable reports, should cost (next to) no CPU. This builds
 * a CUDA-like object tree over the fake driver (4 channel groups, 20 channels
 * whose USERD the sensor samples, 100 device-memory objects), gives it such a
 * policy, lets it settle, then measures the shim's control thread alone over
 * BENCH_SECONDS (argv[1], default 5; argv[2] "quick": the policy has
 * KAIROS_TIME_QUICK_WAKE, as in windows, beside a latency tenant or under a limit,
 * where the idle sampling is every 20 ms rather than once a report period): its
 * runs (wakeups: each return from its wait is one) and its CPU time, both from
 * /proc/self/task/TID/schedstat (nanoseconds; getrusage cannot name another
 * thread, and the process's own figure includes the fake driver's engine thread,
 * which wakes every 100 us). Prints one
 * line: "bench-idle: seconds=S wakeups_per_s=W cpu_pct=C us_per_wakeup=U turns_per_s=T
 * samples_per_s=N". Run with `meson test -C build --benchmark shim-idle` (an
 * optimised build gives the figure that matters).
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim/timectl.h"
#include "shim_fake.h"

#define BENCH_TIDS 64
#define BENCH_CHANNELS 20
#define BENCH_TSGS 4
#define BENCH_VIDMEM 100

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The process's thread ids, into tids; how many. */
static size_t list_tids(long *tids, size_t max)
{
    size_t n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;)
        if (e->d_name[0] != '.')
            tids[n++] = atol(e->d_name);
    closedir(d);
    return n;
}

/* A thread in now[] that is not in before[]; 0 if none. */
static long new_tid(const long *before, size_t nb, const long *now, size_t nn)
{
    for (size_t i = 0; i < nn; i++) {
        size_t j = 0;
        while (j < nb && before[j] != now[i])
            j++;
        if (j == nb)
            return now[i];
    }
    return 0;
}

/* A thread's CPU time (ns) and runs, from schedstat; false if unreadable. */
static bool schedstat(long tid, uint64_t *cpu_ns, uint64_t *runs)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    unsigned long long cpu = 0, wait = 0, n = 0;
    bool ok = fscanf(f, "%llu %llu %llu", &cpu, &wait, &n) == 3;
    fclose(f);
    *cpu_ns = cpu;
    *runs = n;
    return ok;
}

/* CUDA's object tree, as far as the sensor and the pause care: channel groups,
 * channels with their USERD in one mapped system-memory object, device memory. */
static void build_context(const struct shim_real *r)
{
    int ctl = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    uint32_t client, device, subdevice, mem = 0;
    fk_context(r, ctl, &client, &device, &subdevice);
    uint8_t mp[128] = {0};
    fk_alloc(r, ctl, client, device, &mem, RM_CLASS_NV01_MEMORY_SYSTEM, mp, sizeof mp, true,
             false);
    int fd = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    struct rm_map_memory_args map = {.h_client = client, .h_device = device, .h_memory = mem,
                                     .length = 0x40000, .fd = fd};
    shim_ioctl(r, ctl, RM_IOWR(RM_NR_MAP_MEMORY, sizeof map), &map);
    shim_mmap(r, false, NULL, 0x40000, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    uint32_t tsg[BENCH_TSGS];
    for (int i = 0; i < BENCH_TSGS; i++) {
        uint32_t params[5] = {0};
        tsg[i] = 0;
        fk_alloc(r, ctl, client, device, &tsg[i], RM_CLASS_KEPLER_CHANNEL_GROUP_A, params,
                 sizeof params, true, false);
    }
    for (uint64_t i = 0; i < BENCH_CHANNELS; i++) {
        uint8_t params[368] = {0};
        uint64_t off = 0x2000 + 0x3000 * i;
        uint32_t h = 0;
        memcpy(params + 32, &mem, 4);
        memcpy(params + 64, &off, 8);
        fk_alloc(r, ctl, client, tsg[i < 8 ? 0 : 1 + i % 3], &h,
                 RM_CLASS_HOPPER_CHANNEL_GPFIFO_A, params, sizeof params, true, false);
    }
    for (int i = 0; i < BENCH_VIDMEM; i++) {
        uint32_t h = 0;
        fk_vidmem(r, ctl, client, device, &h, 2u << 20, false);
    }
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 5.0;
    const struct shim_real *r = shim_fake_setup();
    build_context(r);
    long before[BENCH_TIDS], now[BENCH_TIDS];
    size_t nb = list_tids(before, BENCH_TIDS);
    bool quick = argc > 2 && !strcmp(argv[2], "quick");
    struct kairos_time_policy p = {.gpu = 0, .seq = 1, .epoch_ns = mono_ns(),
                                   .flags = KAIROS_TIME_REPORT |
                                            (quick ? KAIROS_TIME_QUICK_WAKE : 0u)};
    timectl_policy(&p);
    long tid = 0;
    for (uint64_t t0 = mono_ns(); !tid && mono_ns() - t0 < 5000000000ull;)
        tid = new_tid(before, nb, now, list_tids(now, BENCH_TIDS));
    sleep_ns(500000000ull); /* settled: past the first report and any fast sampling */
    uint64_t cpu0, runs0, cpu1, runs1;
    struct timectl_stats s0, s1;
    timectl_stats(&s0);
    uint64_t t0 = mono_ns();
    if (!tid || !schedstat(tid, &cpu0, &runs0)) {
        fprintf(stderr, "bench-idle: cannot find the control thread's schedstat\n");
        return 1;
    }
    sleep_ns((uint64_t)(seconds * 1e9));
    schedstat(tid, &cpu1, &runs1);
    timectl_stats(&s1);
    double dt = (double)(mono_ns() - t0) / 1e9;
    double wakeups = (double)(runs1 - runs0);
    printf("bench-idle: seconds=%.2f wakeups_per_s=%.1f cpu_pct=%.4f us_per_wakeup=%.2f "
           "turns_per_s=%.1f samples_per_s=%.1f\n",
           dt, wakeups / dt, (double)(cpu1 - cpu0) / 1e9 / dt * 100.0,
           wakeups ? (double)(cpu1 - cpu0) / 1e3 / wakeups : 0.0,
           (double)(s1.turns - s0.turns) / dt, (double)(s1.samples - s0.samples) / dt);
    timectl_reset();
    return 0;
}
