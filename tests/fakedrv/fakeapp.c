/* fakeapp.c - a program that talks to /dev/nvidia* the way CUDA context creation does.
 *
 * At the ioctl level it: opens /dev/nvidiactl and /dev/nvidia-uvm (UVM_INITIALIZE),
 * allocates a root client (0x41), a device (0x80), a subdevice (0x2080), a
 * context-sized vidmem block (0x40, NV_MEMORY_ALLOCATION_PARAMS size at +64,
 * LOCATION=VIDMEM), a VA space (0x90F1), a channel group (0xA06C) with two
 * channels (0xC86F), a usermode doorbell object (0xC661) mapped through
 * RM_MAP_MEMORY with a separately opened /dev/nvidia0 fd and mmap(0x10000), and
 * asks FB_GET_INFO_V2; then threads allocate vidmem, every other call wrapped
 * in IOCTL_XFER_CMD. Finally it frees half of those allocations and the
 * doorbell explicitly and leaves the rest to the close of the descriptors, or
 * with -k exits without freeing or closing anything.
 *
 * It prints one line of key=value counts (opens, ioctls, mmaps, vidmem bytes,
 * ...) so tests can compare what the shim or a trace saw. Runs on the fake
 * driver (libkairos_fakedrv.so) or, in principle, on a real one.
 *
 * With -u PHASES it also gives its channels a USERD the way CUDA does (a system
 * memory object mapped through its own /dev/nvidiactl descriptor, userdOffset
 * 0x2000 + 0x3000 i) and, after the allocations, runs the phases in order: each
 * "idle:SECONDS" (alive, nothing queued) or "busy:SECONDS" (keeps up to 4 entries
 * queued on channel 0: GPPut runs ahead of GPGet, which the fake driver moves only
 * while the channel is enabled). Each phase prints one line: "fakeapp: phase=NAME
 * start_ns=T (CLOCK_MONOTONIC) seconds=S fetched=N".
 *
 * -d N opens CUDA device N the way CUDA does: CUDA_VISIBLE_DEVICES (a list of
 * physical indexes, as with CUDA_DEVICE_ORDER=PCI_BUS_ID) picks the physical GPU
 * (its place in PCI order, whose /dev/nvidiaN is opened); its RM device instance,
 * asked from the driver (GET_PROBED_IDS, GET_ID_INFO_V2), goes into
 * NV0080_ALLOC_PARAMETERS.deviceId. The numbering the program sees starts at 0;
 * the driver sees the physical GPU. The line ends with device= (the physical GPU)
 * and instance= (its device instance).
 *
 * -V: first makes the version handshake (CHECK_VERSION_STR, strict) with the
 * release FAKEDRV_VERSION names (default 580.159.04), as a user-mode driver of the
 * same build as the kernel driver; a refused one prints "fakeapp: version
 * handshake: ERRNO-TEXT" and exits 1.
 *
 * usage: fakeapp [-t threads] [-n allocs per thread] [-s bytes] [-c context bytes] [-k]
 *                [-w seconds to hold the allocations before freeing] [-W] [-u PHASES]
 *                [-d CUDA device] [-F] [-L] [-M bytes] [-R rounds]
 *
 * -W holds the allocations until stdin ends (the test closes it), after the holding
 * line -w prints (printed with -W alone too): a hold that ends on the test's word, not
 * on the clock; -w's seconds follow it.
 *
 * -L prints the time each device-memory allocation took, all threads together:
 * "fakeapp: latency n=N p50_ns=.. p99_ns=.. max_ns=..".
 *
 * -R ROUNDS: after the hold (-w), every thread at once makes ROUNDS allocations of
 * -s bytes, each freed right after (cudaMalloc then cudaFree, as an allocator does
 * near its limit), timing each allocation; then prints "fakeapp: rounds n=N
 * failed=F p50_ns=.. p99_ns=.. max_ns=..", all threads together.
 *
 * -P: -R times each allocation together with its free (the lines say the same).
 *
 * -Y MAX: after the rounds, allocates one -s block again and again, with nothing in
 * between, until it is made (at most MAX attempts: an application that retries a
 * refused allocation), frees it and prints "fakeapp: retry attempts=K ok=0|1".
 *
 * -F plays a tenant that races the driver's answers about GPU identity (see
 * forge_answers) before it allocates.
 *
 * -M BYTES plays cudaMallocManaged(BYTES) as recorded on the H200: CUDA's
 * semaphore pool (UVM_ALLOC_SEMAPHORE_POOL of 2 MiB, then its mmap of the UVM
 * descriptor), then an mmap of BYTES of the UVM descriptor at an address equal to
 * its offset (the managed range), held until the end (munmap, or with -k left to
 * the exit). The lines then carry managed_bytes= (0 if refused) and
 * managed_errno= (the mmap's errno, 0 when it succeeded).
 *
 * -B: fork rounds (issue 25, item 9): once allocated, prints "fakeapp: ready" and
 * reads lines from stdin, each a count N: forks N times (each child _exits at once,
 * reaped before the next fork), timing each fork() call, then prints "fakeapp: forks
 * n=N failed=F eagain=E p50_ns=.. p99_ns=.. max_ns=.."; at the end of stdin goes on.
 *
 * -f SECONDS: once allocated, forks a child that keeps every descriptor (and so
 * the driver's memory) for SECONDS and exits; the parent prints "fakeapp: forked
 * child=PID vidmem_bytes=N" and goes on (with -k it exits at once). -x COMMAND:
 * once allocated, prints "fakeapp: exec vidmem_bytes=N", clears close-on-exec on
 * /dev/nvidiactl and execs `sh -c COMMAND`, which inherits it. -p COMMAND: the
 * same through posix_spawn (no fork the shim sees); prints "fakeapp: spawned
 * child=PID vidmem_bytes=N" and goes on. -S PATH: once allocated, connects to the
 * unix stream socket PATH, sends /dev/nvidiactl's descriptor (SCM_RIGHTS), waits
 * for one byte back, prints "fakeapp: sent vidmem_bytes=N" and goes on. -E: once
 * allocated, exports thread 0's allocations to a new /dev/nvidiactl file (NV0000
 * EXPORT_OBJECTS_TO_FD, as cuMemExportToShareableHandle does) and frees them, prints
 * "fakeapp: exported objects=K bytes=B"; with -S it sends that file instead and
 * closes its own descriptor of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/rm_abi.h"

struct app_thread {
    pthread_t thread;
    int index, count;
    uint32_t *handles;
    uint64_t *sizes;
    uint64_t *ns;      /* -L: each allocation's time */
    int made, failed;
    int rounds, rounds_failed; /* -R */
    uint64_t *round_ns;
};

static int ctl = -1;
static bool time_pairs; /* -P: -R times each allocation with its free */
static uint32_t h_client, h_device, h_subdevice;
static uint64_t alloc_size = 2u << 20;
static atomic_ulong n_ioctls;
static int n_opens, n_mmaps;

static int nv_ioctl(int fd, uint32_t request, void *arg)
{
    atomic_fetch_add(&n_ioctls, 1);
    return ioctl(fd, request, arg);
}

/* CUDA's numbering: device `logical` is the logical-th entry of CUDA_VISIBLE_DEVICES
 * (all GPUs, in order, when unset). -1 when there is no such device. */
static int physical_device(int logical)
{
    const char *list = getenv("CUDA_VISIBLE_DEVICES");
    if (!list)
        return logical;
    int n = 0;
    for (const char *p = list; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 255)
            return -1; /* CUDA stops at the first entry it cannot read */
        if (n++ == logical)
            return (int)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return -1;
}

static int open_node(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "fakeapp: open %s: %s\n", path, strerror(errno));
        exit(1);
    }
    n_opens++;
    return fd;
}

/* -V: the version handshake, strict, with FAKEDRV_VERSION's release. */
static void version_handshake(void)
{
    const char *v = getenv("FAKEDRV_VERSION");
    struct rm_check_version_args a = {.cmd = 0};
    snprintf(a.version, sizeof a.version, "%s", v && *v ? v : "580.159.04");
    if (ioctl(ctl, RM_IOWR(RM_NR_CHECK_VERSION_STR, sizeof a), &a) != 0) {
        fprintf(stderr, "fakeapp: version handshake: %s\n", strerror(errno));
        exit(1);
    }
}

/* RM_ALLOC; through XFER when xfer. Returns the RM status (0xffffffff: ioctl failed). */
static uint32_t rm_alloc(uint32_t parent, uint32_t *handle, uint32_t cls, void *params,
                         uint32_t params_size, bool nvos64, bool xfer)
{
    struct rm_alloc64_args a64;
    struct rm_alloc_args a32;
    void *arg;
    uint32_t size;
    if (nvos64) {
        memset(&a64, 0, sizeof a64);
        a64 = (struct rm_alloc64_args){.h_client = h_client, .h_parent = parent,
                                       .h_object = *handle, .h_class = cls,
                                       .params = (uintptr_t)params, .params_size = 0};
        (void)params_size; /* like CUDA: NVOS64 leaves paramsSize 0, RM knows the class's */
        arg = &a64;
        size = sizeof a64;
    } else {
        a32 = (struct rm_alloc_args){.h_client = h_client, .h_parent = parent,
                                     .h_object = *handle, .h_class = cls,
                                     .params = (uintptr_t)params, .params_size = params_size};
        arg = &a32;
        size = sizeof a32;
    }
    int r;
    if (xfer) {
        struct rm_xfer_args x = {.cmd = RM_NR_ALLOC, .size = size, .ptr = (uintptr_t)arg};
        r = nv_ioctl(ctl, RM_IOWR(RM_NR_XFER, sizeof x), &x);
    } else {
        r = nv_ioctl(ctl, RM_IOWR(RM_NR_ALLOC, size), arg);
    }
    if (r != 0)
        return 0xffffffffu;
    *handle = nvos64 ? a64.h_object : a32.h_object;
    return nvos64 ? a64.status : a32.status;
}

static void must(uint32_t status, const char *what)
{
    if (status != 0) {
        fprintf(stderr, "fakeapp: %s failed: status 0x%x\n", what, status);
        exit(1);
    }
}

/* Allocates vidmem; returns the status and the size RM gave back. */
static uint32_t alloc_vidmem(uint32_t *handle, uint64_t size, bool xfer, uint64_t *got)
{
    struct rm_memory_alloc_params mp;
    memset(&mp, 0, sizeof mp);
    mp.size = size;
    mp.attr = RM_ATTR_LOCATION_VIDMEM << 25;
    uint32_t st = rm_alloc(h_device, handle, RM_CLASS_NV01_MEMORY_LOCAL_USER, &mp, sizeof mp,
                           true, xfer);
    *got = mp.size;
    return st;
}

static uint32_t rm_free(uint32_t handle)
{
    struct rm_free_args a = {.h_client = h_client, .h_parent = 0, .h_object = handle};
    if (nv_ioctl(ctl, RM_IOWR(RM_NR_FREE, sizeof a), &a) != 0)
        return 0xffffffffu;
    return a.status;
}

/* An RM_CONTROL of cmd on h_object with its parameters; fails the program (must) when
 * the call or the driver refuses it. */
static void rm_control(uint32_t h_object, uint32_t cmd, void *params, uint32_t size,
                       const char *what)
{
    struct rm_control_args a = {.h_client = h_client, .h_object = h_object, .cmd = cmd,
                                .params = (uintptr_t)params, .params_size = size};
    if (nv_ioctl(ctl, RM_IOWR(RM_NR_CONTROL, sizeof a), &a) != 0)
        must(0xffffffffu, what);
    must(a.status, what);
}

/* -E: exports thread 0's allocations to a new /dev/nvidiactl file (NV0000
 * EXPORT_OBJECTS_TO_FD, as cuMemExportToShareableHandle does), then frees them: the
 * export file keeps their memory. Returns the file; *bytes what it holds. */
static int export_and_free(struct app_thread *t, uint64_t *bytes)
{
    int xfd = open_node("/dev/nvidiactl");
    static struct rm_export_objects_to_fd_params p;
    memset(&p, 0, sizeof p);
    p.fd = xfd;
    p.h_device = h_device;
    p.max_objects = RM_EXPORT_FD_MAX_OBJECTS;
    *bytes = 0;
    for (int j = 0; j < t->made && j < RM_EXPORT_FD_MAX_OBJECTS; j++) {
        p.objects[p.num_objects++] = t->handles[j];
        *bytes += t->sizes[j];
    }
    rm_control(h_client, RM_CTRL_NV0000_OS_UNIX_EXPORT_OBJECTS_TO_FD, &p, sizeof p,
               "EXPORT_OBJECTS_TO_FD");
    for (unsigned j = 0; j < p.num_objects; j++)
        must(rm_free(p.objects[j]), "free of an exported object");
    t->made = 0; /* gone from this process; the export file keeps their memory */
    return xfd;
}

static void fb_info(uint32_t *total_kib, uint32_t *free_kib)
{
    struct rm_fb_get_info_v2_params p;
    memset(&p, 0, sizeof p);
    p.count = 2;
    p.entries[0].index = RM_FB_INFO_HEAP_SIZE;
    p.entries[1].index = RM_FB_INFO_HEAP_FREE;
    rm_control(h_subdevice, RM_CTRL_NV2080_FB_GET_INFO_V2, &p, sizeof p, "FB_GET_INFO_V2");
    *total_kib = p.entries[0].data;
    *free_kib = p.entries[1].data;
}

/* The first FB_GET_INFO, as Vulkan's driver asks it: the entries behind a pointer. */
static void fb_info_v1(uint32_t *ram_kib, uint32_t *total_kib)
{
    struct rm_fb_info_entry list[2] = {{.index = RM_FB_INFO_RAM_SIZE},
                                       {.index = RM_FB_INFO_TOTAL_RAM_SIZE}};
    struct rm_fb_get_info_params p = {.count = 2, .list = (uintptr_t)list};
    rm_control(h_subdevice, RM_CTRL_NV2080_FB_GET_INFO, &p, sizeof p, "FB_GET_INFO");
    *ram_kib = list[0].data;
    *total_kib = list[1].data;
}

/* The device instance of the physical GPU at place phys in PCI order, found as CUDA
 * does: GET_PROBED_IDS (the gpuIds, made of the PCI location: sorted, the PCI
 * order), then GET_ID_INFO_V2 of that gpuId. phys itself when the driver does not
 * say (a driver that leaves the probed table empty). */
static uint32_t probed_ids[32]; /* sorted, as device_instance_of found them */
static int n_probed_ids;

static uint32_t device_instance_of(int phys)
{
    uint32_t probed[96];
    memset(probed, 0, sizeof probed);
    struct rm_control_args a = {.h_client = h_client, .h_object = h_client,
                                .cmd = RM_CTRL_NV0000_GPU_GET_PROBED_IDS,
                                .params = (uintptr_t)probed, .params_size = sizeof probed};
    if (nv_ioctl(ctl, RM_IOWR(RM_NR_CONTROL, sizeof a), &a) != 0 || a.status != 0)
        return (uint32_t)phys;
    uint32_t ids[32];
    int n = 0;
    for (int i = 0; i < 32; i++) {
        if (probed[i] == 0xffffffffu || probed[i] == 0)
            continue;
        int k = n++;
        for (; k > 0 && ids[k - 1] > probed[i]; k--)
            ids[k] = ids[k - 1];
        ids[k] = probed[i];
    }
    if (phys >= n)
        return (uint32_t)phys;
    n_probed_ids = n;
    memcpy(probed_ids, ids, sizeof ids);
    uint32_t info[8] = {ids[phys], 0, 0, 0, 0, 0, 0, 0};
    a = (struct rm_control_args){.h_client = h_client, .h_object = h_client,
                                 .cmd = RM_CTRL_NV0000_GPU_GET_ID_INFO_V2,
                                 .params = (uintptr_t)info, .params_size = sizeof info};
    if (nv_ioctl(ctl, RM_IOWR(RM_NR_CONTROL, sizeof a), &a) != 0)
        must(0xffffffffu, "GET_ID_INFO_V2");
    must(a.status, "GET_ID_INFO_V2");
    return info[2]; /* deviceInstance */
}

/* -F: the attacker. While the main thread asks GET_ID_INFO_V2 again and again, a
 * second thread keeps writing into the same buffer a forged answer: the device
 * instance of the GPU in use paired with the gpuId of another GPU, so that a shim
 * reading the application's copy of the answer would charge the GPU in use to
 * the other one. */
static volatile uint32_t forge_buf[8];
static atomic_bool forge_stop;
static uint32_t forge_id, forge_inst;

static void *forger(void *unused)
{
    (void)unused;
    while (!atomic_load(&forge_stop)) {
        forge_buf[0] = forge_id;
        forge_buf[2] = forge_inst;
    }
    return NULL;
}

static void forge_answers(uint32_t instance, uint32_t other_gpu_id)
{
    forge_id = other_gpu_id;
    forge_inst = instance;
    pthread_t t;
    if (pthread_create(&t, NULL, forger, NULL) != 0)
        exit(1);
    for (int i = 0; i < 2000; i++) {
        struct rm_control_args a = {.h_client = h_client, .h_object = h_client,
                                    .cmd = RM_CTRL_NV0000_GPU_GET_ID_INFO_V2,
                                    .params = (uintptr_t)forge_buf,
                                    .params_size = sizeof forge_buf};
        nv_ioctl(ctl, RM_IOWR(RM_NR_CONTROL, sizeof a), &a);
    }
    atomic_store(&forge_stop, true);
    pthread_join(t, NULL);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *thread_main(void *arg)
{
    struct app_thread *t = arg;
    for (int i = 0; i < t->count; i++) {
        uint32_t h = (i % 2) ? 0 : (0xa0000000u | ((uint32_t)t->index << 16) | (uint32_t)i);
        uint64_t got = 0, t0 = mono_ns();
        uint32_t st = alloc_vidmem(&h, alloc_size, i % 2 == 1, &got);
        if (t->ns)
            t->ns[i] = mono_ns() - t0;
        if (st == 0) {
            t->handles[t->made] = h;
            t->sizes[t->made] = got;
            t->made++;
        } else {
            t->failed++;
        }
    }
    return NULL;
}

/* -R: allocate and free one block, rounds times, timing each allocation. */
static void *rounds_main(void *arg)
{
    struct app_thread *t = arg;
    for (int i = 0; i < t->rounds; i++) {
        uint32_t h = 0xb0000000u | ((uint32_t)t->index << 16) | (uint32_t)i;
        uint64_t got = 0, t0 = mono_ns();
        uint32_t st = alloc_vidmem(&h, alloc_size, false, &got);
        t->round_ns[i] = mono_ns() - t0;
        if (st != 0)
            t->rounds_failed++;
        else if (rm_free(h) != 0)
            must(1, "free");
        if (time_pairs)
            t->round_ns[i] = mono_ns() - t0; /* -P: the allocation and its free */
    }
    return NULL;
}

/* -Y: one allocation tried until it is made (max attempts at most), then freed. */
static void retry_one(long max)
{
    long attempts = 0;
    uint32_t st = 1;
    uint32_t h = 0xb8000000u;
    uint64_t got = 0;
    while (st != 0 && attempts < max) {
        attempts++;
        st = alloc_vidmem(&h, alloc_size, false, &got);
    }
    if (st == 0 && rm_free(h) != 0)
        must(1, "free");
    printf("fakeapp: retry attempts=%ld ok=%d\n", attempts, st == 0);
    fflush(stdout);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* -L and -R: the allocations' latency, all threads together (nearest-rank
 * percentiles), on one line that starts with head. */
/* -B: rounds of n timed forks, n read from stdin until its end. */
static void fork_rounds(void)
{
    printf("fakeapp: ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strtoul(line, NULL, 10), failed = 0, eagain = 0, k = 0;
        uint64_t *ns = calloc(n ? n : 1, sizeof *ns);
        for (size_t i = 0; ns && i < n; i++) {
            uint64_t t0 = mono_ns();
            pid_t c = fork();
            uint64_t t1 = mono_ns();
            if (c == 0)
                _exit(0);
            if (c < 0) {
                failed++;
                eagain += errno == EAGAIN;
            } else {
                waitpid(c, NULL, 0);
            }
            ns[k++] = t1 - t0;
        }
        if (ns && k) {
            qsort(ns, k, sizeof *ns, cmp_u64);
            printf("fakeapp: forks n=%zu failed=%zu eagain=%zu p50_ns=%llu p99_ns=%llu "
                   "max_ns=%llu\n", k, failed, eagain, (unsigned long long)ns[(k - 1) / 2],
                   (unsigned long long)ns[(k * 99 + 99) / 100 - 1],
                   (unsigned long long)ns[k - 1]);
        }
        fflush(stdout);
        free(ns);
    }
}

static void print_latency(struct app_thread *ts, int threads, int count, bool rounds,
                          const char *head)
{
    size_t n = (size_t)threads * (size_t)count, k = 0;
    uint64_t *all = calloc(n ? n : 1, sizeof *all);
    if (!all)
        return;
    for (int i = 0; i < threads; i++)
        for (int j = 0; j < count; j++)
            all[k++] = rounds ? ts[i].round_ns[j] : ts[i].ns[j];
    qsort(all, n, sizeof *all, cmp_u64);
    if (n)
        printf("%s n=%zu p50_ns=%llu p99_ns=%llu max_ns=%llu\n", head, n,
               (unsigned long long)all[(n - 1) / 2], (unsigned long long)all[(n * 99 + 99) / 100 - 1],
               (unsigned long long)all[n - 1]);
    free(all);
}

/* -R: every thread's rounds at once, then their line. */
static void run_rounds(struct app_thread *ts, int threads, int rounds)
{
    int failed = 0;
    for (int i = 0; i < threads; i++) {
        ts[i].rounds = rounds;
        ts[i].round_ns = calloc((size_t)rounds + 1, sizeof *ts[i].round_ns);
        if (!ts[i].round_ns || pthread_create(&ts[i].thread, NULL, rounds_main, &ts[i]) != 0)
            must(1, "rounds");
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(ts[i].thread, NULL);
        failed += ts[i].rounds_failed;
    }
    char head[64];
    snprintf(head, sizeof head, "fakeapp: rounds failed=%d", failed);
    print_latency(ts, threads, rounds, true, head);
    fflush(stdout);
    for (int i = 0; i < threads; i++)
        free(ts[i].round_ns);
}

/* MAP_MEMORY of h_memory (under parent) naming fd, then the mmap of fd, as CUDA maps
 * a USERD block or the doorbell: the address, or NULL (said on stderr) when the mmap
 * fails, with RM's linear address of the mapping in *linear (for UNMAP_MEMORY). An RM
 * failure ends fakeapp (must); what names the object in the messages. */
static void *map_rm_memory(uint32_t parent, uint32_t h_memory, int fd, const char *what,
                           uint64_t *linear)
{
    char label[64];
    snprintf(label, sizeof label, "MAP_MEMORY %s", what);
    struct rm_map_memory_args map = {.h_client = h_client, .h_device = parent,
                                     .h_memory = h_memory, .length = 0x10000, .fd = fd};
    if (nv_ioctl(ctl, RM_IOWR(RM_NR_MAP_MEMORY, sizeof map), &map) != 0)
        must(0xffffffffu, label);
    must(map.status, label);
    *linear = map.linear_address;
    void *p = mmap(NULL, 0x10000, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "fakeapp: mmap %s: %s\n", what, strerror(errno));
        return NULL;
    }
    n_mmaps++;
    return p;
}

/* The system-memory block holding the channels' USERD, mapped as CUDA maps it. */
static uint8_t *map_userd(uint32_t h_mem)
{
    uint8_t mem_params[128] = {0};
    must(rm_alloc(h_device, &h_mem, RM_CLASS_NV01_MEMORY_SYSTEM, mem_params, sizeof mem_params,
                  true, false),
         "USERD memory");
    uint64_t linear;
    uint8_t *p = map_rm_memory(h_device, h_mem, open_node("/dev/nvidiactl"), "USERD", &linear);
    if (!p)
        exit(1);
    return p;
}

/* Runs "idle:S,busy:S,..." on channel 0's USERD; 0, or 2 for a malformed list. */
static int run_phases(const char *phases, uint8_t *userd)
{
    volatile uint32_t *get = (volatile uint32_t *)(void *)(userd + 0x2000 + 0x88);
    volatile uint32_t *put = (volatile uint32_t *)(void *)(userd + 0x2000 + 0x8C);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", phases);
    for (char *save = NULL, *ph = strtok_r(buf, ",", &save); ph; ph = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(ph, ':');
        if (!colon)
            return 2;
        *colon = 0;
        double seconds = atof(colon + 1);
        bool busy = !strcmp(ph, "busy");
        if ((!busy && strcmp(ph, "idle")) || seconds <= 0)
            return 2;
        uint64_t start = mono_ns(), end = start + (uint64_t)(seconds * 1e9);
        uint32_t got0 = *get;
        while (mono_ns() < end) {
            if (busy && *put - *get < 4)
                *put = *put + 1;
            struct timespec ts = {0, busy ? 50000 : 5000000};
            nanosleep(&ts, NULL);
        }
        printf("fakeapp: phase=%s start_ns=%llu seconds=%.3f fetched=%u\n", ph,
               (unsigned long long)start, seconds, *get - got0);
        fflush(stdout);
    }
    return 0;
}

/* cudaMallocManaged as recorded: CUDA's semaphore pool (made once, mapped), then
 * the range, an mmap of the UVM descriptor at an address equal to its offset.
 * NULL with *err the mmap's errno when refused. */
static void *malloc_managed(int uvm, uint64_t bytes, int *err)
{
    static uint8_t pool_arg[9248];
    uint8_t *va = mmap(NULL, bytes + (4u << 20), PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (va == MAP_FAILED) {
        *err = errno;
        return NULL;
    }
    uint8_t *pool = (uint8_t *)(((uintptr_t)va + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
    uint64_t base = (uint64_t)(uintptr_t)pool, len = 2u << 20;
    memcpy(pool_arg, &base, 8);
    memcpy(pool_arg + 8, &len, 8);
    uint32_t status = 1;
    if (nv_ioctl(uvm, 68, pool_arg) == 0)
        memcpy(&status, pool_arg + 9240, 4);
    if (status != 0 || mmap(pool, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, uvm,
                            (off_t)base) == MAP_FAILED) {
        fprintf(stderr, "fakeapp: the semaphore pool could not be made or mapped\n");
        exit(1);
    }
    uint8_t *range = pool + len;
    void *p = mmap(range, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, uvm,
                   (off_t)(uintptr_t)range);
    if (p == MAP_FAILED) {
        *err = errno;
        return NULL;
    }
    return p;
}

/* -S: /dev/nvidiactl's descriptor to the receiver listening on path; waits for its
 * one-byte answer (it has taken the descriptor). 0 or -1. */
static int send_fd(const char *path, int sent)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) != 0)
        return -1;
    char byte = 'f', ack;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {&byte, 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &sent, sizeof sent);
    int rc = sendmsg(s, &m, 0) == 1 && read(s, &ack, 1) == 1 ? 0 : -1;
    close(s);
    return rc;
}

int main(int argc, char **argv)
{
    int threads = 1, count = 4;
    uint64_t ctx_size = 8u << 20;
    bool keep = false;
    int hold_ms = 0; /* -w: hold the allocations this long before freeing */
    bool hold_stdin = false; /* -W: hold them until stdin ends, first */
    const char *phases = NULL; /* -u: work phases on a sensed channel */
    int logical = 0;           /* -d: the CUDA device number */
    bool forge = false;
    int fork_hold_ms = 0;      /* -f: a child holds the files this long */
    bool fork_bench = false;   /* -B: timed fork rounds, counts from stdin */
    const char *exec_cmd = NULL; /* -x: exec this, keeping /dev/nvidiactl */
    const char *spawn_cmd = NULL; /* -p: posix_spawn this, keeping /dev/nvidiactl */
    const char *send_to = NULL;   /* -S: send /dev/nvidiactl's descriptor there */
    bool export_first = false;    /* -E: export thread 0's allocations, then free them */
    int opt;
    uint64_t managed_ask = 0;
    bool latency = false;      /* -L: print the allocations' latency percentiles */
    bool handshake = false;    /* -V: the version handshake first */
    int rounds = 0;            /* -R: allocate-and-free rounds after the hold */
    long retries = 0;          /* -Y: attempts at one allocation after them */
    while ((opt = getopt(argc, argv, "t:n:s:c:kw:Wu:d:FM:Lf:x:p:S:ER:Y:PVB")) != -1) {
        switch (opt) {
        case 't':
            threads = atoi(optarg);
            break;
        case 'n':
            count = atoi(optarg);
            break;
        case 's':
            alloc_size = strtoull(optarg, NULL, 0);
            break;
        case 'c':
            ctx_size = strtoull(optarg, NULL, 0);
            break;
        case 'k':
            keep = true;
            break;
        case 'w':
            hold_ms = (int)(atof(optarg) * 1000);
            break;
        case 'W':
            hold_stdin = true;
            break;
        case 'u':
            phases = optarg;
            break;
        case 'd':
            logical = atoi(optarg);
            break;
        case 'F':
            forge = true;
            break;
        case 'M':
            managed_ask = strtoull(optarg, NULL, 0);
            break;
        case 'f':
            fork_hold_ms = (int)(atof(optarg) * 1000);
            break;
        case 'x':
            exec_cmd = optarg;
            break;
        case 'p':
            spawn_cmd = optarg;
            break;
        case 'S':
            send_to = optarg;
            break;
        case 'E':
            export_first = true;
            break;
        case 'R':
            rounds = atoi(optarg);
            break;
        case 'B':
            fork_bench = true;
            break;
        case 'Y':
            retries = atol(optarg);
            break;
        case 'P':
            time_pairs = true;
            break;
        case 'L':
            latency = true;
            break;
        case 'V':
            handshake = true;
            break;
        default:
            fprintf(stderr, "usage: fakeapp [-t threads] [-n allocs] [-s bytes] [-c bytes] [-k] "
                            "[-w seconds] [-W] [-u idle:S,busy:S,...] [-d CUDA device] [-F] [-L] "
                            "[-M bytes] [-f seconds] [-x command] [-p command] [-S socket] "
                            "[-E] [-R rounds] [-P] [-Y attempts] [-V]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 256 || count < 0 || alloc_size == 0) {
        fprintf(stderr, "fakeapp: bad arguments\n");
        return 2;
    }
    int device = physical_device(logical);
    if (device < 0) {
        fprintf(stderr, "fakeapp: no CUDA device %d (CUDA_VISIBLE_DEVICES=%s)\n", logical,
                getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "");
        return 2;
    }

    ctl = open_node("/dev/nvidiactl");
    if (handshake)
        version_handshake();
    int uvm = open_node("/dev/nvidia-uvm");
    struct {
        uint64_t flags;
        uint32_t status, pad;
    } uvm_init = {0, 0, 0};
    if (nv_ioctl(uvm, 0x30000001u, &uvm_init) != 0 || uvm_init.status != 0)
        must(1, "UVM_INITIALIZE");

    uint32_t h = 0;
    must(rm_alloc(0, &h, RM_CLASS_NV01_ROOT_CLIENT, NULL, 0, false, false), "client");
    h_client = h;
    uint8_t dev_params[56] = {0};
    uint32_t device_instance = device_instance_of(device);
    if (forge && n_probed_ids > 1)
        forge_answers(device_instance, probed_ids[device == 0 ? 1 : 0]);
    memcpy(dev_params, &device_instance, sizeof device_instance); /* deviceId */
    h_device = 0;
    must(rm_alloc(h_client, &h_device, RM_CLASS_NV01_DEVICE_0, dev_params, sizeof dev_params,
                  true, false),
         "device");
    uint32_t sub_params = 0;
    h_subdevice = 0x5c000001u;
    must(rm_alloc(h_device, &h_subdevice, RM_CLASS_NV20_SUBDEVICE_0, &sub_params,
                  sizeof sub_params, false, false),
         "subdevice");
    uint32_t fb_total_kib, fb_free_kib, fb_free_after_kib, fb_v1_ram_kib, fb_v1_total_kib;
    fb_info(&fb_total_kib, &fb_free_kib);
    fb_info_v1(&fb_v1_ram_kib, &fb_v1_total_kib);

    uint64_t vidmem = 0, freed = 0;
    int allocs = 0, failed = 0, freed_allocs = 0;
    uint32_t h_ctx = 0x5c000002u;
    uint64_t got;
    must(alloc_vidmem(&h_ctx, ctx_size, false, &got), "context memory");
    vidmem += got;
    allocs++;

    uint32_t h_va = 0x5c000003u;
    must(rm_alloc(h_device, &h_va, RM_CLASS_FERMI_VASPACE_A, NULL, 0, true, false), "vaspace");
    uint32_t tsg_params[5] = {0, 0, h_va, 1, 0};
    uint32_t h_tsg = 0x5c000004u;
    must(rm_alloc(h_device, &h_tsg, RM_CLASS_KEPLER_CHANNEL_GROUP_A, tsg_params,
                  sizeof tsg_params, true, false),
         "channel group");
    uint8_t ch_params[368] = {0};
    uint8_t *userd = NULL;
    if (phases) {
        uint32_t h_mem = 0x5c000030u;
        userd = map_userd(h_mem);
        memcpy(ch_params + 32, &h_mem, 4); /* hUserdMemory[0] */
    }
    for (int i = 0; i < 2; i++) {
        uint32_t h_ch = 0x5c000010u + (uint32_t)i;
        uint64_t userd_off = 0x2000 + 0x3000 * (uint64_t)i;
        memcpy(ch_params + 64, &userd_off, 8); /* userdOffset[0] */
        must(rm_alloc(h_tsg, &h_ch, RM_CLASS_HOPPER_CHANNEL_GPFIFO_A, ch_params,
                      sizeof ch_params, true, i == 1),
             "channel");
    }
    uint8_t um_params[2] = {0, 0};
    uint32_t h_um = 0x5c000020u;
    must(rm_alloc(h_subdevice, &h_um, RM_CLASS_HOPPER_USERMODE_A, um_params, sizeof um_params,
                  true, false),
         "usermode");
    char node[32];
    snprintf(node, sizeof node, "/dev/nvidia%d", device);
    int dev0 = open_node(node);
    uint64_t doorbell_linear;
    void *doorbell = map_rm_memory(h_subdevice, h_um, dev0, "doorbell", &doorbell_linear);
    if (!doorbell)
        return 1;

    int managed_errno = 0;
    uint64_t managed_bytes = 0;
    void *managed = managed_ask ? malloc_managed(uvm, managed_ask, &managed_errno) : NULL;
    if (managed)
        managed_bytes = managed_ask;

    struct app_thread *ts = calloc((size_t)threads, sizeof *ts);
    if (!ts)
        return 1;
    for (int i = 0; i < threads; i++) {
        ts[i].index = i;
        ts[i].count = count;
        ts[i].handles = calloc((size_t)count + 1, sizeof *ts[i].handles);
        ts[i].sizes = calloc((size_t)count + 1, sizeof *ts[i].sizes);
        ts[i].ns = latency ? calloc((size_t)count + 1, sizeof *ts[i].ns) : NULL;
        if (!ts[i].handles || !ts[i].sizes ||
            pthread_create(&ts[i].thread, NULL, thread_main, &ts[i]) != 0)
            return 1;
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(ts[i].thread, NULL);
        allocs += ts[i].made;
        failed += ts[i].failed;
        for (int j = 0; j < ts[i].made; j++)
            vidmem += ts[i].sizes[j];
    }
    fb_info(&fb_total_kib, &fb_free_after_kib);
    if (latency)
        print_latency(ts, threads, count, false, "fakeapp: latency");
    if (phases && run_phases(phases, userd) != 0) {
        fprintf(stderr, "fakeapp: -u wants idle:SECONDS or busy:SECONDS, comma-separated\n");
        return 2;
    }
    if (fork_bench)
        fork_rounds();
    if (fork_hold_ms > 0) {
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            int null = open("/dev/null", O_RDWR); /* not the parent's output: a reader */
            dup2(null, 1);                        /* waits for the parent, not for it */
            dup2(null, 2);
            usleep((useconds_t)fork_hold_ms * 1000);
            _exit(0); /* the descriptors close with it */
        }
        printf("fakeapp: forked child=%d vidmem_bytes=%llu\n", (int)child,
               (unsigned long long)vidmem);
        fflush(stdout);
    }
    if (spawn_cmd) {
        fcntl(ctl, F_SETFD, 0);
        pid_t child;
        char *const args[] = {"sh", "-c", (char *)spawn_cmd, NULL};
        extern char **environ;
        if (posix_spawn(&child, "/bin/sh", NULL, NULL, args, environ) != 0)
            must(1, "posix_spawn");
        printf("fakeapp: spawned child=%d vidmem_bytes=%llu\n", (int)child,
               (unsigned long long)vidmem);
        fflush(stdout);
    }
    int xfd = -1;
    if (export_first) {
        uint64_t xbytes;
        int objects = ts[0].made;
        xfd = export_and_free(&ts[0], &xbytes);
        printf("fakeapp: exported objects=%d bytes=%llu\n", objects, (unsigned long long)xbytes);
        fflush(stdout);
    }
    if (send_to && send_fd(send_to, xfd >= 0 ? xfd : ctl) != 0)
        must(1, "send");
    if (send_to && xfd >= 0) {
        close(xfd); /* the receiver holds the export file now */
        xfd = -1;
    }
    if (send_to) {
        printf("fakeapp: sent vidmem_bytes=%llu\n", (unsigned long long)vidmem);
        fflush(stdout);
    }
    if (exec_cmd) {
        printf("fakeapp: exec vidmem_bytes=%llu\n", (unsigned long long)vidmem);
        fflush(stdout);
        fcntl(ctl, F_SETFD, 0);
        execl("/bin/sh", "sh", "-c", exec_cmd, (char *)NULL);
        must(1, "exec");
    }
    if (hold_ms > 0 || hold_stdin) {
        printf("fakeapp: holding allocs=%d failed=%d vidmem_bytes=%llu managed_bytes=%llu "
               "managed_errno=%d\n", allocs, failed, (unsigned long long)vidmem,
               (unsigned long long)managed_bytes, managed_errno);
        fflush(stdout);
        char buf[64];
        while (hold_stdin && read(0, buf, sizeof buf) > 0)
            ;
        usleep((useconds_t)hold_ms * 1000);
    }
    if (rounds > 0)
        run_rounds(ts, threads, rounds);
    if (retries > 0)
        retry_one(retries);

    if (!keep) {
        for (int i = 0; i < threads; i++) {
            for (int j = 0; j < ts[i].made; j += 2) {
                must(rm_free(ts[i].handles[j]), "free");
                freed += ts[i].sizes[j];
                freed_allocs++;
            }
        }
        struct rm_unmap_memory_args um = {.h_client = h_client, .h_device = h_subdevice,
                                          .h_memory = h_um,
                                          .linear_address = doorbell_linear};
        nv_ioctl(ctl, RM_IOWR(RM_NR_UNMAP_MEMORY, sizeof um), &um);
        munmap(doorbell, 0x10000);
        if (managed)
            munmap(managed, managed_ask);
    }
    printf("fakeapp: opens=%d ioctls=%lu mmaps=%d threads=%d allocs=%d failed=%d "
           "vidmem_bytes=%llu freed_allocs=%d freed_bytes=%llu kept_bytes=%llu "
           "fb_total_kib=%u fb_free_kib=%u fb_free_after_kib=%u fb_v1_ram_kib=%u "
           "fb_v1_total_kib=%u keep=%d device=%d instance=%u "
           "managed_bytes=%llu managed_errno=%d\n",
           n_opens, (unsigned long)atomic_load(&n_ioctls), n_mmaps, threads, allocs, failed,
           (unsigned long long)vidmem, freed_allocs, (unsigned long long)freed,
           (unsigned long long)(vidmem - freed), fb_total_kib, fb_free_kib, fb_free_after_kib,
           fb_v1_ram_kib, fb_v1_total_kib, keep, device, device_instance, (unsigned long long)managed_bytes, managed_errno);
    fflush(stdout);
    if (keep)
        exit(0);
    close(dev0);
    close(uvm);
    if (xfd >= 0)
        close(xfd);
    close(ctl);
    for (int i = 0; i < threads; i++) {
        free(ts[i].handles);
        free(ts[i].sizes);
    }
    free(ts);
    return 0;
}
