// probe_load.cu - a known GPU workload for the GPU suite's `probe` section: phases of
// idle time, a deep queue, a shallow queue, a CUDA graph and one long kernel, each
// printed as "phase NAME start_ns end_ns" on CLOCK_MONOTONIC, so a sampler of the
// channels' USERD (userd_probe.so) can be read against what the GPU was doing.
// The long kernel writes the GPU's global timer every ~20 us into a buffer; printed as
// "long kernel_ns=... gaps=N gap_ms=... max_gap_ms=..." it shows whether the kernel
// was stopped while it ran (a pause that preempts leaves gaps; one that waits does not).
// Last, eight 100 ms kernels queued at once and one sync ("long8").
// Usage: probe_load [--only long] [--long-ms MS]
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STAMPS (1 << 20)

static unsigned long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}

__device__ unsigned long long global_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void spin_ns(unsigned long long ns)
{
    unsigned long long end = global_ns() + ns;
    while (global_ns() < end) {
    }
}

// Block 0 thread 0 stamps the global timer every ~20 us; the other blocks spin.
__global__ void long_kernel(unsigned long long ns, unsigned long long *stamps, unsigned *n)
{
    unsigned long long start = global_ns(), last = 0, t;
    while ((t = global_ns()) < start + ns) {
        if (blockIdx.x == 0 && threadIdx.x == 0 && t - last >= 20000 && *n < STAMPS) {
            stamps[(*n)++] = t;
            last = t;
        }
    }
}

static void phase(const char *name, unsigned long long t0)
{
    printf("phase %s %llu %llu\n", name, t0, mono_ns());
    fflush(stdout);
}

static void run_long(int long_ms)
{
    unsigned long long *stamps;
    unsigned *n;
    cudaMallocManaged(&n, sizeof *n);
    cudaMalloc(&stamps, STAMPS * sizeof *stamps);
    *n = 0;
    unsigned long long t0 = mono_ns();
    long_kernel<<<132, 128>>>((unsigned long long)long_ms * 1000000ull, stamps, n);
    cudaDeviceSynchronize();
    phase("long", t0);
    unsigned count = *n;
    unsigned long long *h = (unsigned long long *)malloc(count * sizeof *h);
    cudaMemcpy(h, stamps, count * sizeof *h, cudaMemcpyDeviceToHost);
    int gaps = 0;
    double gap_ms = 0, max_gap = 0;
    for (unsigned i = 1; i < count; i++) {
        double d = (h[i] - h[i - 1]) / 1e6;
        if (d > 1.0) {
            gaps++;
            gap_ms += d;
            if (d > max_gap)
                max_gap = d;
        }
    }
    printf("long kernel_ms=%.1f wall_ms=%.1f stamps=%u gaps=%d gap_ms=%.1f max_gap_ms=%.1f\n",
           count ? (h[count - 1] - h[0]) / 1e6 : 0.0, (mono_ns() - t0) / 1e6, count, gaps,
           gap_ms, max_gap);
    free(h);
    cudaFree(stamps);
    cudaFree(n);
}

int main(int argc, char **argv)
{
    int only_long = 0, long_ms = 300;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--only") && i + 1 < argc && !strcmp(argv[++i], "long"))
            only_long = 1;
        else if (!strcmp(argv[i], "--long-ms") && i + 1 < argc)
            long_ms = atoi(argv[++i]);
    }
    cudaFree(0);
    unsigned long long t;
    if (!only_long) {
        t = mono_ns(); sleep_ms(300); phase("idle", t);
        t = mono_ns();
        for (int i = 0; i < 300; i++)
            spin_ns<<<132, 128>>>(1000000);
        unsigned long long queued = mono_ns();
        cudaDeviceSynchronize();
        printf("deep queued_after_ms=%.2f\n", (queued - t) / 1e6);
        phase("deep", t);
        t = mono_ns(); sleep_ms(300); phase("idle", t);
        t = mono_ns();
        while (mono_ns() - t < 300000000ull) {
            spin_ns<<<132, 128>>>(1000000);
            cudaDeviceSynchronize();
            sleep_ms(1);
        }
        phase("shallow", t);
        t = mono_ns(); sleep_ms(200); phase("idle", t);
        cudaStream_t s;
        cudaGraph_t g;
        cudaGraphExec_t ge;
        cudaStreamCreate(&s);
        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        for (int i = 0; i < 20; i++)
            spin_ns<<<132, 128, 0, s>>>(1000000);
        cudaStreamEndCapture(s, &g);
        cudaGraphInstantiate(&ge, g, 0);
        t = mono_ns();
        for (int i = 0; i < 10; i++)
            cudaGraphLaunch(ge, s);
        cudaStreamSynchronize(s);
        phase("graph", t);
        t = mono_ns(); sleep_ms(200); phase("idle", t);
    }
    run_long(long_ms);
    t = mono_ns(); sleep_ms(200); phase("idle", t);
    if (!only_long) { // eight 100 ms kernels queued at once, then a sync (the `long` case)
        t = mono_ns();
        for (int i = 0; i < 8; i++)
            spin_ns<<<132, 128>>>(100000000ull);
        cudaDeviceSynchronize();
        phase("long8", t);
        t = mono_ns(); sleep_ms(200); phase("idle", t);
    }
    void (*stop)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "userd_probe_stop");
    if (stop)
        stop();
    return 0;
}
