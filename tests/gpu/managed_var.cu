// managed_var.cu - a program with a __managed__ variable, for the GPU suite's
// `managed` section: does CUDA map managed memory for it when it loads the module,
// and what does the program see when the tenant refuses managed memory?
// Prints "managed_var=<value>" after a kernel added 1 to it 1000 times, or
// "managed_var_error=<what CUDA returned>".
#include <cuda_runtime.h>
#include <stdio.h>

__managed__ int counter;

__global__ void add(void)
{
    atomicAdd(&counter, 1);
}

int main(void)
{
    add<<<1, 1000>>>();
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("managed_var_error=%s\n", cudaGetErrorName(e));
        return 1;
    }
    printf("managed_var=%d\n", counter);
    return 0;
}
