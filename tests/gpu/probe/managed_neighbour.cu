// managed_neighbour.cu - what managed memory (cudaMallocManaged) does to a neighbour,
// for the GPU suite's `probe` section. Two roles, run as two processes:
//   hold MIB SECONDS: allocate MIB of managed memory, touch it from the GPU, then keep
//                     touching it for SECONDS, printing each pass's time and the free
//                     memory cudaMemGetInfo reports ("pass i ms=... free_mib=...")
//   fill MAX_MIB:     cudaMalloc 1 GiB blocks until refused or MAX_MIB is reached, print
//                     what it got ("filled_mib=..."), hold it 3 s, touch it, free it
//   tenant MIB SECONDS: as a Kairos tenant (tests/gpu/managed.sh): cudaMallocManaged(MIB)
//                     ("managed=ok" or "managed=<the error>"), touch it all from the GPU,
//                     then a plain cudaMalloc of 64 MiB ("plain=...": the context still
//                     works), print "holding" and hold both SECONDS
// If `fill` gets more than the free memory seen before `hold` touched its pages, the
// driver evicted managed pages for the neighbour's plain allocations.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__global__ void touch(char *p, size_t n)
{
    size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 4096;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x * 4096)
        p[i] += 1;
}

static size_t free_mib(void)
{
    size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);
    return f >> 20;
}

static int hold(size_t mib, int seconds)
{
    char *p;
    if (cudaMallocManaged(&p, mib << 20) != cudaSuccess) {
        printf("error=cudaMallocManaged\n");
        return 1;
    }
    printf("hold before_touch free_mib=%zu\n", free_mib());
    double end = now_ms() + seconds * 1e3;
    for (int i = 0; now_ms() < end; i++) {
        double t = now_ms();
        touch<<<264, 256>>>(p, mib << 20);
        cudaError_t e = cudaDeviceSynchronize();
        printf("pass %d ms=%.1f free_mib=%zu%s%s\n", i, now_ms() - t, free_mib(),
               e ? " error=" : "", e ? cudaGetErrorString(e) : "");
        fflush(stdout);
        if (e)
            return 1;
        usleep(200000);
    }
    return 0;
}

static int fill(size_t max_mib)
{
    std::vector<void *> blocks;
    size_t got = 0;
    printf("fill start free_mib=%zu\n", free_mib());
    while (got + 1024 <= max_mib) {
        void *b;
        if (cudaMalloc(&b, 1ull << 30) != cudaSuccess)
            break;
        cudaMemset(b, 1, 1ull << 30);
        blocks.push_back(b);
        got += 1024;
    }
    cudaGetLastError();
    printf("filled_mib=%zu free_mib=%zu\n", got, free_mib());
    fflush(stdout);
    sleep(3);
    for (void *b : blocks)
        cudaFree(b);
    return 0;
}

static int tenant(size_t mib, int seconds)
{
    size_t f0 = 0, total = 0;
    cudaFree(0);
    cudaMemGetInfo(&f0, &total);
    char *p = NULL, *q = NULL;
    cudaError_t e = cudaMallocManaged(&p, mib << 20);
    printf("tenant total_mib=%zu free_mib=%zu managed_mib=%zu managed=%s\n", total >> 20,
           f0 >> 20, mib, e ? cudaGetErrorName(e) : "ok");
    cudaGetLastError();
    if (!e) {
        touch<<<264, 256>>>(p, mib << 20);
        cudaError_t t = cudaDeviceSynchronize();
        printf("touched=%s free_mib=%zu\n", t ? cudaGetErrorName(t) : "ok", free_mib());
    }
    cudaError_t m = cudaMalloc(&q, 64 << 20);
    printf("plain=%s\nholding\n", m ? cudaGetErrorName(m) : "ok");
    fflush(stdout);
    sleep(seconds);
    if (p)
        cudaFree(p);
    if (q)
        cudaFree(q);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "tenant"))
        return tenant(strtoull(argv[2], NULL, 10), atoi(argv[3]));
    if (argc >= 4 && !strcmp(argv[1], "hold"))
        return hold(strtoull(argv[2], NULL, 10), atoi(argv[3]));
    if (argc >= 3 && !strcmp(argv[1], "fill"))
        return fill(strtoull(argv[2], NULL, 10));
    fprintf(stderr,
            "usage: managed_neighbour hold MIB SECONDS | fill MAX_MIB | tenant MIB SECONDS\n");
    return 2;
}
