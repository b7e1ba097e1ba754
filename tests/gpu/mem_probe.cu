// mem_probe.cu - the memory quota seen from a CUDA program, for the GPU suite.
//   fill:    allocate 2 MiB blocks until refused; print what cudaMemGetInfo shows,
//            how much the program got, and whether the context still works after
//            the refusal (free one block, allocate again, run a kernel, copy back)
//   latency: time cudaMalloc + cudaFree of 64 MiB blocks; print p50/p99 in us
//   attack:  create a context and allocate 1 GiB (one attacker process of many)
// Usage: mem_probe fill | latency N | attack
#include <algorithm>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

static double now_us()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

__global__ void add_one(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

static int fill()
{
    size_t free0, total;
    if (cudaMemGetInfo(&free0, &total) != cudaSuccess) {
        printf("error=context\n");
        return 1;
    }
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("view_total_mib=%.1f view_free_mib=%.1f total_global_mem_mib=%.1f\n",
           total / 1048576.0, free0 / 1048576.0, prop.totalGlobalMem / 1048576.0);
    std::vector<void *> blocks;
    cudaError_t e = cudaSuccess;
    for (;;) {
        void *p;
        e = cudaMalloc(&p, 2u << 20);
        if (e != cudaSuccess)
            break;
        blocks.push_back(p);
    }
    size_t free1;
    cudaGetLastError();
    cudaMemGetInfo(&free1, &total);
    printf("allocated_mib=%zu refusal=\"%s\" free_at_refusal_kib=%zu\n", blocks.size() * 2,
           cudaGetErrorString(e), free1 / 1024);
    // the context must keep working
    cudaFree(blocks.back());
    blocks.pop_back();
    int *p = NULL;
    int ok = cudaMalloc(&p, 1u << 20) == cudaSuccess;
    int host[256] = {0};
    ok = ok && cudaMemcpy(p, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess;
    add_one<<<1, 256>>>(p, 256);
    ok = ok && cudaDeviceSynchronize() == cudaSuccess;
    ok = ok && cudaMemcpy(host, p, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess;
    ok = ok && host[0] == 1 && host[255] == 1;
    printf("works_after_refusal=%d\n", ok);
    for (void *b : blocks)
        cudaFree(b);
    cudaFree(p);
    return ok ? 0 : 1;
}

static int latency(int n)
{
    std::vector<double> t;
    void *p;
    cudaFree(0);
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        if (cudaMalloc(&p, 64u << 20) != cudaSuccess) {
            printf("error=cudaMalloc\n");
            return 1;
        }
        double t1 = now_us();
        cudaFree(p);
        t.push_back(t1 - t0);
    }
    std::sort(t.begin(), t.end());
    double total = 0;
    for (double v : t)
        total += v;
    printf("alloc_p50_us=%.1f alloc_p99_us=%.1f allocs_per_s=%.0f\n", t[t.size() / 2],
           t[(size_t)(t.size() * 0.99)], n / (total / 1e6));
    return 0;
}

static int attack()
{
    void *p;
    cudaError_t e = cudaFree(0);
    if (e != cudaSuccess) {
        printf("attacker context=refused error=\"%s\"\n", cudaGetErrorString(e));
        return 0;
    }
    e = cudaMalloc(&p, 1u << 30);
    printf("attacker context=ok alloc_1g=%s\n", e == cudaSuccess ? "ok" : "refused");
    fflush(stdout);
    struct timespec ts = {3, 0};
    nanosleep(&ts, NULL); // hold it while the others come
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "fill"))
        return fill();
    if (argc > 1 && !strcmp(argv[1], "latency"))
        return latency(argc > 2 ? atoi(argv[2]) : 200);
    if (argc > 1 && !strcmp(argv[1], "attack"))
        return attack();
    fprintf(stderr, "usage: mem_probe fill | latency N | attack\n");
    return 2;
}
