// managed_alloc.cu - probe for the GPU suite: how managed memory (cudaMallocManaged)
// shows at the driver boundary. Allocates managed memory, touches it from the GPU,
// prints cudaMemGetInfo's free memory before and after, and exits.
// Usage: managed_alloc [MiB]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

__global__ void touch(char *p, size_t n)
{
    size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 4096;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x * 4096)
        p[i] = 1;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
    size_t free0, free1, free2, total;
    if (cudaFree(0) != cudaSuccess || cudaMemGetInfo(&free0, &total) != cudaSuccess)
        return 1;
    char *p = NULL;
    if (cudaMallocManaged(&p, mib << 20) != cudaSuccess) {
        printf("error=cudaMallocManaged\n");
        return 1;
    }
    cudaMemGetInfo(&free1, &total);
    touch<<<264, 256>>>(p, mib << 20);
    cudaDeviceSynchronize();
    cudaMemGetInfo(&free2, &total);
    printf("managed_mib=%zu free_drop_after_alloc_mib=%.1f free_drop_after_touch_mib=%.1f\n", mib,
           (free0 - free1) / 1048576.0, (free0 - free2) / 1048576.0);
    cudaFree(p);
    return 0;
}
