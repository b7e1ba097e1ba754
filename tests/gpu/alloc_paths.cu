// alloc_paths.cu - is every allocation path charged exactly, and what does an
// allocation cost, native vs under the shim (the GPU suite's memory section, m7, m8).
//   paths MIB: allocates MIB through cudaMalloc, cuMemCreate + cuMemMap (VMM),
//       cudaMallocAsync (the default pool), VMM with a POSIX-descriptor handle
//       type (what PyTorch's expandable segments ask for) and a CUDA graph's memory
//       allocation node (the graph memory pool), and frees it again; for each prints
//       what the process's own memory view (cudaMemGetInfo: under a quota, the
//       ledger's figure for the tenant) and the GPU (nvidia-smi memory.used, run
//       without the shim) say was taken and given back, in MiB
//   latency THREADS N: THREADS threads each cudaMalloc + cudaFree 64 MiB N times;
//       prints alloc_p50_us, alloc_p99_us and allocs_per_s over all of them
// Build: nvcc -arch=sm_90 -O2 -o alloc_paths alloc_paths.cu -lcuda -lpthread
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
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

// What the GPU really has in use, in MiB, asked of nvidia-smi outside the shim.
static long gpu_used_mib()
{
    FILE *p = popen("env -u LD_PRELOAD nvidia-smi -i 0 --query-gpu=memory.used "
                    "--format=csv,noheader,nounits",
                    "r");
    long v = -1;
    if (p) {
        if (fscanf(p, "%ld", &v) != 1)
            v = -1;
        pclose(p);
    }
    return v;
}

static double view_free_mib()
{
    size_t free_b = 0, total = 0;
    cudaDeviceSynchronize();
    cudaMemGetInfo(&free_b, &total);
    return free_b / 1048576.0;
}

struct vmm_block {
    CUdeviceptr va;
    size_t size;
    CUmemGenericAllocationHandle h;
};

static bool vmm_alloc(size_t bytes, vmm_block *b, bool shareable)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    if (shareable) /* as PyTorch's expandable segments ask, to share them by IPC */
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    if (cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
        return false;
    b->size = (bytes + gran - 1) / gran * gran;
    if (cuMemCreate(&b->h, b->size, &prop, 0) != CUDA_SUCCESS)
        return false;
    if (cuMemAddressReserve(&b->va, b->size, 0, 0, 0) != CUDA_SUCCESS)
        return false;
    if (cuMemMap(b->va, b->size, 0, b->h, 0) != CUDA_SUCCESS)
        return false;
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return cuMemSetAccess(b->va, b->size, &access, 1) == CUDA_SUCCESS;
}

static void vmm_free(vmm_block *b)
{
    cuMemUnmap(b->va, b->size);
    cuMemRelease(b->h);
    cuMemAddressFree(b->va, b->size);
}

// A graph whose one node allocates bytes from the graph memory pool, launched on s;
// the allocation outlives the launch until freed (cudaFreeAsync) and trimmed.
struct graph_block {
    cudaGraph_t g;
    cudaGraphExec_t e;
    void *p;
};

static bool graph_alloc(size_t bytes, cudaStream_t s, graph_block *b)
{
    cudaMemAllocNodeParams prm;
    memset(&prm, 0, sizeof prm);
    prm.poolProps.allocType = cudaMemAllocationTypePinned;
    prm.poolProps.location.type = cudaMemLocationTypeDevice;
    prm.poolProps.location.id = 0;
    prm.bytesize = bytes;
    cudaGraphNode_t node;
    b->e = NULL;
    if (cudaGraphCreate(&b->g, 0) != cudaSuccess)
        return false;
    if (cudaGraphAddMemAllocNode(&node, b->g, NULL, 0, &prm) != cudaSuccess ||
        cudaGraphInstantiate(&b->e, b->g, 0) != cudaSuccess) {
        cudaGraphDestroy(b->g);
        return false;
    }
    b->p = prm.dptr;
    return cudaGraphLaunch(b->e, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess;
}

static void graph_free(graph_block *b, cudaStream_t s)
{
    cudaFreeAsync(b->p, s);
    cudaStreamSynchronize(s);
    cudaGraphExecDestroy(b->e);
    cudaGraphDestroy(b->g);
    cudaDeviceGraphMemTrim(0);
}

static int paths(long mib)
{
    size_t bytes = (size_t)mib << 20;
    cudaFree(0);
    cudaStream_t s;
    cudaStreamCreate(&s);
    const char *names[] = {"cudaMalloc", "vmm", "cudaMallocAsync", "vmm_posix_fd", "graph"};
    for (int path = 0; path < 5; path++) {
        double v0 = view_free_mib();
        long g0 = gpu_used_mib();
        void *p = NULL;
        vmm_block b;
        graph_block gb;
        bool ok;
        if (path == 4)
            ok = graph_alloc(bytes, s, &gb);
        else if (path == 0)
            ok = cudaMalloc(&p, bytes) == cudaSuccess;
        else if (path == 1 || path == 3)
            ok = vmm_alloc(bytes, &b, path == 3);
        else
            ok = cudaMallocAsync(&p, bytes, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess;
        double v1 = view_free_mib();
        long g1 = gpu_used_mib();
        if (path == 4 && ok)
            graph_free(&gb, s);
        else if (path == 0 && ok)
            cudaFree(p);
        else if ((path == 1 || path == 3) && ok)
            vmm_free(&b);
        else if (path == 2 && ok) {
            cudaFreeAsync(p, s);
            cudaStreamSynchronize(s);
            cudaMemPool_t pool;
            cudaDeviceGetDefaultMemPool(&pool, 0);
            cudaMemPoolTrimTo(pool, 0);
        }
        double v2 = view_free_mib();
        long g2 = gpu_used_mib();
        printf("path=%s ok=%d requested_mib=%ld charged_mib=%.0f gpu_taken_mib=%ld "
               "released_mib=%.0f gpu_released_mib=%ld\n",
               names[path], ok ? 1 : 0, mib, v0 - v1, g1 - g0, v2 - v1, g1 - g2);
        fflush(stdout);
    }
    return 0;
}

struct lat_thread {
    pthread_t t;
    int n;
    std::vector<double> lat;
    int failed;
};

static void *lat_main(void *arg)
{
    lat_thread *w = (lat_thread *)arg;
    cudaSetDevice(0);
    for (int i = 0; i < w->n; i++) {
        void *p;
        double t0 = now_us();
        if (cudaMalloc(&p, 64u << 20) != cudaSuccess) {
            w->failed++;
            continue;
        }
        w->lat.push_back(now_us() - t0);
        cudaFree(p);
    }
    return NULL;
}

static int latency(int threads, int n)
{
    cudaFree(0);
    std::vector<lat_thread> w(threads);
    double t0 = now_us();
    for (auto &x : w) {
        x.n = n;
        x.failed = 0;
        pthread_create(&x.t, NULL, lat_main, &x);
    }
    std::vector<double> all;
    int failed = 0;
    for (auto &x : w) {
        pthread_join(x.t, NULL);
        all.insert(all.end(), x.lat.begin(), x.lat.end());
        failed += x.failed;
    }
    double wall = now_us() - t0;
    if (all.empty()) {
        printf("error=cudaMalloc\n");
        return 1;
    }
    std::sort(all.begin(), all.end());
    printf("threads=%d alloc_p50_us=%.1f alloc_p99_us=%.1f allocs_per_s=%.0f failed=%d\n", threads,
           all[all.size() / 2], all[all.size() * 99 / 100], all.size() / (wall / 1e6), failed);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "paths") == 0)
        return paths(atol(argv[2]));
    if (argc >= 4 && strcmp(argv[1], "latency") == 0)
        return latency(atoi(argv[2]), atoi(argv[3]));
    fprintf(stderr, "usage: alloc_paths paths MIB | latency THREADS N\n");
    return 2;
}
