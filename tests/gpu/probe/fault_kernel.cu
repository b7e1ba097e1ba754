// fault_kernel.cu - a CUDA program that faults on purpose: after --after-ms of
// sleeping, one kernel writes to an address no allocation holds (an MMU fault, which
// the driver reports as an Xid naming the process), then it reports what the runtime
// said and, with --linger-s, runs on that long before exiting (a program that catches
// the error and goes on). For the space-mode fault probes (tests/gpu/probe/
// mps_fault.sh, mps_fault_recovery.sh).
// Usage: fault_kernel [--after-ms MS] [--linger-s S]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

__global__ void write_nowhere(int *p)
{
    *p = 42;
}

int main(int argc, char **argv)
{
    long after_ms = 0, linger_s = 0;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--after-ms"))
            after_ms = atol(argv[i + 1]);
        if (!strcmp(argv[i], "--linger-s"))
            linger_s = atol(argv[i + 1]);
    }
    cudaFree(0); // the context first, so the fault is the only thing timed
    usleep((useconds_t)after_ms * 1000);
    write_nowhere<<<1, 1>>>((int *)0x10);
    cudaError_t e = cudaDeviceSynchronize();
    printf("fault_kernel: pid %d: %s\n", (int)getpid(), cudaGetErrorString(e));
    fflush(stdout);
    sleep((unsigned)linger_s);
    return e == cudaSuccess ? 0 : 3;
}
