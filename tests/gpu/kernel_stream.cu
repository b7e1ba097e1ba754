// kernel_stream.cu - a small CUDA program for the GPU suite: creates a context,
// allocates device memory, runs a steady stream of short kernels, frees, exits.
// It prints key=value lines (context time, memory seen, launches per second) so the
// suite can compare runs with and without Kairos.
// For the compute benchmark: --start-at T waits until CLOCK_REALTIME T (seconds) so
// that tenants start together; --stamps FILE writes, for every kernel, the time it
// ended (the GPU's global timer, moved onto CLOCK_REALTIME), one integer ns a line.
// --work N makes every kernel do N dependent multiply-adds per thread instead of
// spinning on the SM clock: a kernel preempted by a pause then takes longer by the
// time it was off the GPU (a clock-bounded spin finishes on time whatever happens,
// which made a 30 % limit look like 0.98 of solo for 200 ms kernels).
// --burst-ms ON --idle-ms OFF: a bursty tenant (an inference server's busy spells):
// launches for ON ms, then nothing for OFF ms (the process alive, its context
// idle), from the start; it prints burst_ms=ON idle_ms=OFF so that a caller can
// check that the binary knows the options.
// Usage: kernel_stream [--seconds S] [--alloc-mib M] [--cycles C | --work N] [--batch B]
//                      [--start-at T] [--stamps FILE] [--burst-ms ON --idle-ms OFF]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    printf("error=%s what=\"%s\"\n", cudaGetErrorString(e), what);
    return 1;
}

__device__ unsigned long long global_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Every block spins; the last block to finish counts the kernel and stamps its end.
__global__ void busy_wait(long long cycles, unsigned long long *done, unsigned *blocks_done,
                          unsigned long long *stamps, unsigned long long n_stamps)
{
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    __threadfence();
    if (atomicAdd(blocks_done, 1u) + 1 != gridDim.x)
        return;
    *blocks_done = 0;
    unsigned long long k = atomicAdd(done, 1ULL);
    if (k < n_stamps)
        stamps[k] = global_ns();
}

// The same, bounded by work: n dependent FMAs per thread, the result kept.
__global__ void busy_work(long long n, float *sink, unsigned long long *done,
                          unsigned *blocks_done, unsigned long long *stamps,
                          unsigned long long n_stamps)
{
    float x = threadIdx.x * 1e-3f, y = 1.0000001f;
    for (long long i = 0; i < n; i++)
        x = fmaf(x, y, 1e-7f);
    if (x == 12345.0f)
        *sink = x;
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    __threadfence();
    if (atomicAdd(blocks_done, 1u) + 1 != gridDim.x)
        return;
    *blocks_done = 0;
    unsigned long long k = atomicAdd(done, 1ULL);
    if (k < n_stamps)
        stamps[k] = global_ns();
}

__global__ void read_clock(unsigned long long *out)
{
    *out = global_ns();
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long long realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_until_realtime(double t)
{
    long long ns = (long long)(t * 1e9);
    struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL)) {
    }
}

// CLOCK_REALTIME minus the GPU's global timer, from the round trip of a one-thread
// kernel that reads it (the midpoint; the half round trip is the uncertainty).
static long long gpu_clock_offset(unsigned long long *dev)
{
    unsigned long long g = 0;
    long long best = 0, best_rtt = -1;
    for (int i = 0; i < 20; i++) {
        long long t0 = realtime_ns();
        read_clock<<<1, 1>>>(dev);
        cudaMemcpy(&g, dev, sizeof g, cudaMemcpyDeviceToHost);
        long long t1 = realtime_ns();
        if (best_rtt < 0 || t1 - t0 < best_rtt) {
            best_rtt = t1 - t0;
            best = (t0 + t1) / 2 - (long long)g;
        }
    }
    printf("clock_offset_ns=%lld clock_rtt_ns=%lld\n", best, best_rtt);
    return best;
}

static int write_stamps(const char *path, unsigned long long *dev, unsigned long long n,
                        long long offset)
{
    unsigned long long *host = (unsigned long long *)malloc(n * sizeof *host + 1);
    FILE *f = fopen(path, "w");
    if (!host || !f || cudaMemcpy(host, dev, n * sizeof *host, cudaMemcpyDeviceToHost)) {
        printf("error=stamps what=\"%s\"\n", path);
        return 1;
    }
    for (unsigned long long i = 0; i < n; i++)
        fprintf(f, "%lld\n", (long long)host[i] + offset);
    fclose(f);
    free(host);
    return 0;
}

int main(int argc, char **argv)
{
    double run_s = 3;
    size_t alloc_mib = 1024;
    long long cycles = 200000; /* about 0.1 ms at 1.98 GHz */
    long long work = 0;        /* --work: FMAs per thread instead of a clock spin */
    int batch = 8;             /* launches between synchronisations: a shallow queue */
    double start_at = 0;
    const char *stamps_path = NULL;
    double burst_ms = 0, idle_ms = 0; /* --burst-ms/--idle-ms: busy spells */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds"))
            run_s = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--alloc-mib"))
            alloc_mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--cycles"))
            cycles = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--work"))
            work = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--start-at"))
            start_at = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--stamps"))
            stamps_path = argv[i + 1];
        else if (!strcmp(argv[i], "--burst-ms"))
            burst_ms = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--idle-ms"))
            idle_ms = atof(argv[i + 1]);
    }
    if (burst_ms > 0)
        printf("burst_ms=%.1f idle_ms=%.1f\n", burst_ms, idle_ms);
    double t0 = seconds_now();
    if (check(cudaFree(0), "context"))
        return 1;
    printf("context_s=%.4f\n", seconds_now() - t0);
    size_t free_b, total_b;
    if (check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"))
        return 1;
    printf("mem_total_mib=%.1f mem_free_mib=%.1f\n", total_b / 1048576.0, free_b / 1048576.0);
    void *block = NULL;
    unsigned long long *done = NULL, *stamps = NULL;
    unsigned *blocks_done = NULL;
    unsigned long long n_stamps = stamps_path ? (unsigned long long)(run_s * 40000) + 4096 : 0;
    if (check(cudaMalloc(&block, alloc_mib << 20), "cudaMalloc block") ||
        check(cudaMalloc(&done, sizeof *done), "cudaMalloc counter") ||
        check(cudaMalloc(&blocks_done, sizeof *blocks_done), "cudaMalloc block counter") ||
        check(cudaMalloc(&stamps, (n_stamps + 1) * sizeof *stamps), "cudaMalloc stamps") ||
        check(cudaMemset(done, 0, sizeof *done), "cudaMemset") ||
        check(cudaMemset(blocks_done, 0, sizeof *blocks_done), "cudaMemset"))
        return 1;
    long long offset = stamps_path ? gpu_clock_offset(stamps) : 0;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    if (start_at > 0)
        sleep_until_realtime(start_at);
    long launches = 0;
    double start = seconds_now();
    while (seconds_now() - start < run_s) {
        double cycle_s = (burst_ms + idle_ms) / 1e3;
        if (burst_ms > 0 && idle_ms > 0) { /* in an idle spell: sleep until the next burst */
            double at = seconds_now() - start;
            double in_cycle = at - cycle_s * (long long)(at / cycle_s);
            if (in_cycle >= burst_ms / 1e3) {
                double wake = start + (at - in_cycle) + cycle_s;
                struct timespec ts = {(time_t)wake, (long)((wake - (time_t)wake) * 1e9)};
                while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) {
                }
                continue;
            }
        }
        for (int i = 0; i < batch; i++) {
            if (work)
                busy_work<<<sms, 128>>>(work, (float *)block, done, blocks_done, stamps,
                                        n_stamps);
            else
                busy_wait<<<sms, 128>>>(cycles, done, blocks_done, stamps, n_stamps);
        }
        if (check(cudaDeviceSynchronize(), "kernels"))
            return 1;
        launches += batch;
    }
    double elapsed = seconds_now() - start;
    printf("launches=%ld seconds=%.3f launches_per_s=%.1f\n", launches, elapsed,
           launches / elapsed);
    if (stamps_path) {
        unsigned long long n = (unsigned long long)launches < n_stamps ? launches : n_stamps;
        if (write_stamps(stamps_path, stamps, n, offset))
            return 1;
    }
    if (check(cudaFree(done), "cudaFree counter") || check(cudaFree(block), "cudaFree block"))
        return 1;
    return 0;
}
