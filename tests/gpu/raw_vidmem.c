/* raw_vidmem.c - takes GPU memory with raw ioctls to the NVIDIA driver, without CUDA
 * and without a context: what the audit must find (tests/gpu/audit.sh). Such memory
 * shows in the GPU's memory.used but in no NVML process list (held-back H200 finding).
 *
 * The sequence is CUDA's own, as recorded on the H200 (the nvtrace fixtures;
 * docs/rm-abi-facts.md): open /dev/nvidiactl; RM_ALLOC a root client (0x41); the
 * GPU's id from NV0000 GPU_GET_PROBED_IDS, attached with GPU_ATTACH_IDS, its device
 * instance from GPU_GET_ID_INFO_V2; open /dev/nvidiaN and REGISTER_FD it; RM_ALLOC
 * the device (0x80) and subdevice (0x2080); then NV01_MEMORY_LOCAL_USER (0x40) blocks
 * with CUDA's NV_MEMORY_ALLOCATION_PARAMS (vidmem, huge pages, non-contiguous), or,
 * when the driver refuses that, through VID_HEAP_CONTROL ALLOC_SIZE.
 * Nothing is mapped, no channel made. Everything is freed by the driver at exit.
 *
 * usage: raw_vidmem [-m MIB] [-g PROBED_INDEX] [-d /dev/nvidiaN] [-s SECONDS]
 * Prints "raw_vidmem: pid=P allocated_mib=M method=...", then holds the memory SECONDS
 * (default 60) or until killed. Exit 1 with the failing step and RM status.
 * Build: cc -std=c17 -O2 -Isrc -o raw_vidmem tests/gpu/raw_vidmem.c
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/rm_abi.h"

#define CLASS_ROOT_CLIENT 0x41u
#define CLASS_DEVICE 0x80u
#define CLASS_SUBDEVICE 0x2080u
#define CLASS_MEMORY_LOCAL_USER 0x40u
#define CTRL_GPU_GET_ID_INFO_V2 0x205u
#define CTRL_GPU_GET_PROBED_IDS 0x214u
#define CTRL_GPU_ATTACH_IDS 0x215u
#define NR_REGISTER_FD 0xC9u
#define INVALID_GPU_ID 0xffffffffu
#define CHUNK (256ull << 20)

static int ctl = -1;
static uint32_t h_client;

static void fail(const char *what, uint32_t status)
{
    fprintf(stderr, "raw_vidmem: %s failed: %s (RM status 0x%x)\n", what,
            status == UINT32_MAX ? strerror(errno) : "refused by the driver", status);
    exit(1);
}

/* RM_ALLOC as CUDA issues it: NVOS64, paramsSize 0 (RM knows each class's size). */
static uint32_t rm_alloc(uint32_t parent, uint32_t handle, uint32_t cls, void *params)
{
    struct rm_alloc64_args a = {.h_client = h_client, .h_parent = parent, .h_object = handle,
                                .h_class = cls, .params = (uintptr_t)params};
    if (ioctl(ctl, RM_IOWR(RM_NR_ALLOC, sizeof a), &a))
        return UINT32_MAX;
    if (cls == CLASS_ROOT_CLIENT && !a.status)
        h_client = a.h_object;
    return a.status;
}

static uint32_t rm_control(uint32_t object, uint32_t cmd, void *params, uint32_t size)
{
    struct rm_control_args a = {.h_client = h_client, .h_object = object, .cmd = cmd,
                                .params = (uintptr_t)params, .params_size = size};
    if (ioctl(ctl, RM_IOWR(RM_NR_CONTROL, sizeof a), &a))
        return UINT32_MAX;
    return a.status;
}

/* One block of CHUNK bytes, class 0x40 with CUDA's parameters. */
static uint32_t alloc_rm(uint32_t h_device, uint32_t handle, uint64_t *size)
{
    struct rm_memory_alloc_params mp;
    memset(&mp, 0, sizeof mp);
    mp.owner = h_client;
    mp.flags = 0x1c101u;   /* CUDA's (handle provided, map not required, ...) */
    mp.attr = 0x11800000u; /* VIDMEM, huge pages, non-contiguous allowed */
    mp.attr2 = 0x100005u;  /* 2 MiB huge pages */
    mp.format = 6;
    mp.size = CHUNK;
    mp.alignment = 2u << 20;
    uint32_t st = rm_alloc(h_device, handle, CLASS_MEMORY_LOCAL_USER, &mp);
    *size = mp.size;
    return st;
}

/* One block through VID_HEAP_CONTROL ALLOC_SIZE (NVOS32, read by offset). */
static uint32_t alloc_vidheap(uint32_t h_device, uint32_t handle, uint64_t *size)
{
    uint8_t a[RM_VIDHEAP_SIZE];
    memset(a, 0, sizeof a);
    uint32_t u;
    uint64_t q;
#define PUT32(off, v) (u = (v), memcpy(a + (off), &u, 4))
#define PUT64(off, v) (q = (v), memcpy(a + (off), &q, 8))
    PUT32(RM_VIDHEAP_OFF_CLIENT, h_client);
    PUT32(RM_VIDHEAP_OFF_PARENT, h_device);
    PUT32(RM_VIDHEAP_OFF_FUNCTION, RM_VIDHEAP_ALLOC_SIZE);
    PUT32(40, h_client);                /* owner */
    PUT32(RM_VIDHEAP_OFF_HMEMORY, handle);
    PUT32(52, 0x4000u);                 /* flags: MEMORY_HANDLE_PROVIDED */
    PUT32(RM_VIDHEAP_OFF_ATTR, 0x10000000u); /* VIDMEM, non-contiguous allowed */
    PUT64(RM_VIDHEAP_OFF_SIZE, CHUNK);
    PUT64(96, 2u << 20);                /* alignment */
#undef PUT32
#undef PUT64
    if (ioctl(ctl, RM_IOWR(RM_NR_VID_HEAP_CONTROL, sizeof a), a))
        return UINT32_MAX;
    memcpy(&u, a + RM_VIDHEAP_OFF_STATUS, 4);
    memcpy(size, a + RM_VIDHEAP_OFF_SIZE, 8);
    return u;
}

int main(int argc, char **argv)
{
    unsigned long long mib = 2048;
    unsigned probed = 0;
    const char *dev_path = "/dev/nvidia0";
    double seconds = 60;
    int opt;
    while ((opt = getopt(argc, argv, "m:g:d:s:")) != -1) {
        if (opt == 'm')
            mib = strtoull(optarg, NULL, 0);
        else if (opt == 'g')
            probed = (unsigned)atoi(optarg);
        else if (opt == 'd')
            dev_path = optarg;
        else if (opt == 's')
            seconds = atof(optarg);
        else {
            fprintf(stderr, "usage: raw_vidmem [-m MIB] [-g PROBED_INDEX] [-d /dev/nvidiaN] "
                            "[-s SECONDS]\n");
            return 2;
        }
    }
    ctl = open("/dev/nvidiactl", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        fail("open /dev/nvidiactl", UINT32_MAX);
    uint32_t st = rm_alloc(0, 0, CLASS_ROOT_CLIENT, NULL);
    if (st)
        fail("RM_ALLOC root client", st);

    uint32_t ids[96];
    memset(ids, 0xff, sizeof ids);
    if ((st = rm_control(h_client, CTRL_GPU_GET_PROBED_IDS, ids, sizeof ids)))
        fail("GPU_GET_PROBED_IDS", st);
    if (probed >= 32 || ids[probed] == INVALID_GPU_ID) {
        fprintf(stderr, "raw_vidmem: no probed GPU %u\n", probed);
        return 1;
    }
    uint32_t gpu_id = ids[probed];
    uint32_t attach[33];
    memset(attach, 0xff, sizeof attach);
    attach[0] = gpu_id;
    if ((st = rm_control(h_client, CTRL_GPU_ATTACH_IDS, attach, sizeof attach)))
        fail("GPU_ATTACH_IDS", st);
    uint32_t info[8] = {gpu_id};
    if ((st = rm_control(h_client, CTRL_GPU_GET_ID_INFO_V2, info, sizeof info)))
        fail("GPU_GET_ID_INFO_V2", st);
    uint32_t device_instance = info[2];

    int dev = open(dev_path, O_RDWR | O_CLOEXEC);
    if (dev < 0)
        fail(dev_path, UINT32_MAX);
    int ctl_fd = ctl;
    if (ioctl(dev, RM_IOWR(NR_REGISTER_FD, sizeof ctl_fd), &ctl_fd))
        fail("REGISTER_FD", UINT32_MAX);

    uint32_t h_device = 0x5c000002u, h_subdevice = 0x5c000003u;
    uint32_t dev_params[14] = {device_instance}; /* NV0080_ALLOC_PARAMETERS (56) */
    if ((st = rm_alloc(h_client, h_device, CLASS_DEVICE, dev_params)))
        fail("RM_ALLOC device", st);
    uint32_t sub_params = 0; /* NV2080_ALLOC_PARAMETERS: subDeviceId 0 */
    if ((st = rm_alloc(h_device, h_subdevice, CLASS_SUBDEVICE, &sub_params)))
        fail("RM_ALLOC subdevice", st);

    unsigned long long got = 0;
    const char *method = "RM_ALLOC";
    for (uint32_t i = 0; got < mib << 20; i++) {
        uint64_t size = 0;
        uint32_t handle = 0x5d000000u + i;
        bool heap = strcmp(method, "RM_ALLOC") != 0;
        st = heap ? alloc_vidheap(h_device, handle, &size) : alloc_rm(h_device, handle, &size);
        if (st && i == 0 && !heap) { /* not CUDA's way on this driver: VID_HEAP_CONTROL's */
            fprintf(stderr, "raw_vidmem: RM_ALLOC 0x40 refused (0x%x); VID_HEAP_CONTROL\n", st);
            method = "VID_HEAP_CONTROL";
            st = alloc_vidheap(h_device, handle, &size);
        }
        if (st)
            fail(i ? "allocation of one more block" : "RM_ALLOC 0x40 and VID_HEAP_CONTROL", st);
        got += size ? size : CHUNK;
    }
    printf("raw_vidmem: pid=%d allocated_mib=%llu method=%s\n", (int)getpid(), got >> 20, method);
    fflush(stdout);
    for (double left = seconds; left > 0; left -= 0.1)
        usleep(100000);
    return 0;
}
