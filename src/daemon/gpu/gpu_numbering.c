/* gpu_numbering.c - the start-up warning of gpu_numbering.h.
 *
 * Why persistence mode: the kernel driver gives a GPU its instance (and the
 * device instance of NV0080_ALLOC_PARAMETERS) when it initialises the GPU, taking
 * the lowest free number (RmInitAdapter -> osInitNvMapping, gpumgrAllocGpuInstance
 * and gpumgrCreateDevice in NVIDIA's open kernel modules). With persistence mode
 * every GPU is initialised once, at boot, in probe order, so the instance is the
 * /dev minor and the NVML index. Without it a GPU is initialised at its first open
 * after being idle, so a program that opens only GPU 1 on an idle node may find
 * it numbered 0. The shim renumbers devices from the driver's answers to CUDA
 * (src/shim/gpumap.c); a program that does not ask them would have its memory
 * charged to GPU 0's quota. */
#include "daemon/gpu/gpu_numbering.h"

#include "daemon/base/log.h"

unsigned gpu_numbering_check(struct gpu_backend *b, unsigned n)
{
    unsigned warned = 0;
    if (n < 2 || !b->ops || !b->ops->persistence)
        return 0;
    for (unsigned g = 0; g < n; g++) {
        bool on = false;
        if (b->ops->persistence(b, g, &on) || on)
            continue;
        log_warn("GPU %u: persistence mode is off: on a node with %u GPUs the driver then "
                 "numbers GPUs in the order they are first opened, and a tenant's memory may "
                 "be charged to another GPU's quota; turn it on (nvidia-persistenced, or "
                 "nvidia-smi -pm 1)",
                 g, n);
        warned++;
    }
    return warned;
}
