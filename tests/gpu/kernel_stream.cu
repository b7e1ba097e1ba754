// kernel_stream.cu - a small CUDA program for the GPU suite: creates a context,
// allocates device memory, runs a steady stream of short kernels, frees, exits.
// It prints key=value lines (context time, memory seen, launches per second) so the
// suite can compare runs with and without Kairos.
// Usage: kernel_stream [--seconds S] [--alloc-mib M] [--cycles C] [--batch B]
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

__global__ void busy_wait(long long cycles, unsigned long long *done)
{
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    if (threadIdx.x == 0 && blockIdx.x == 0)
        atomicAdd(done, 1ULL);
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double run_s = 3;
    size_t alloc_mib = 1024;
    long long cycles = 200000; /* about 0.1 ms at 1.98 GHz */
    int batch = 8;             /* launches between synchronisations: a shallow queue */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds"))
            run_s = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--alloc-mib"))
            alloc_mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--cycles"))
            cycles = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            batch = atoi(argv[i + 1]);
    }
    double t0 = seconds_now();
    if (check(cudaFree(0), "context"))
        return 1;
    printf("context_s=%.4f\n", seconds_now() - t0);
    size_t free_b, total_b;
    if (check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"))
        return 1;
    printf("mem_total_mib=%.1f mem_free_mib=%.1f\n", total_b / 1048576.0, free_b / 1048576.0);
    void *block = NULL;
    unsigned long long *done = NULL;
    if (check(cudaMalloc(&block, alloc_mib << 20), "cudaMalloc block") ||
        check(cudaMalloc(&done, sizeof *done), "cudaMalloc counter") ||
        check(cudaMemset(done, 0, sizeof *done), "cudaMemset"))
        return 1;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    long launches = 0;
    double start = seconds_now();
    while (seconds_now() - start < run_s) {
        for (int i = 0; i < batch; i++)
            busy_wait<<<sms, 128>>>(cycles, done);
        if (check(cudaDeviceSynchronize(), "kernels"))
            return 1;
        launches += batch;
    }
    double elapsed = seconds_now() - start;
    printf("launches=%ld seconds=%.3f launches_per_s=%.1f\n", launches, elapsed,
           launches / elapsed);
    if (check(cudaFree(done), "cudaFree counter") || check(cudaFree(block), "cudaFree block"))
        return 1;
    return 0;
}
