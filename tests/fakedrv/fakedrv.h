/* fakedrv.h - a fake NVIDIA kernel driver (RM) for tests, with no GPU.
 *
 * Emulates enough of /dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm to drive
 * the shim: descriptors (each fake file is a socket pair underneath, so close, dup,
 * close_range, SCM_RIGHTS and fork share and drop it as the kernel does, and the
 * fake sees its last close wherever it happens), arguments and RM_ALLOC
 * parameters copied in and out as the kernel does (the caller's memory is read once, before the work, and written once, after),
 * RM_ALLOC on any node (NVOS21 and NVOS64; handles assigned when hObjectNew is 0;
 * class 0x40 takes device memory, rounded up to 2 MiB, NV_ERR_NO_MEMORY when the
 * fake GPU is full), RM_FREE (with the subtree), RM_CONTROL (FB_GET_INFO_V2
 * answers total and free; NV_OK otherwise), RM_MAP_MEMORY + mmap (an anonymous
 * mapping), IOCTL_XFER_CMD, UVM_INITIALIZE, client ownership per open file (as
 * the driver's strict validation), and the implicit free of a file's clients
 * when its last descriptor closes.
 *
 * Its release is FAKEDRV_VERSION (default 580.159.04): CHECK_VERSION_STR answers as
 * the driver does (a match gets reply 1, a mismatch the fake's release and EINVAL),
 * and an open of /proc/driver/nvidia/version gets the kernel module's line for it
 * (ENOENT with FAKEDRV_NO_PROC_VERSION set: a container without that file).
 *
 * The fakedrv_* functions have the signatures of the libc calls they replace, so
 * a unit test builds the shim's real-function table from them; on descriptors
 * and paths that are not fake they pass through to the kernel (raw syscalls).
 * libkairos_fakedrv.so (fakedrv_preload.c) exports them under the libc names.
 *
 * Time controls: NVA06C SET_TIMESLICE (0xA06C0103) on a channel group and NV2080
 * FIFO_DISABLE_CHANNELS (0x2080110B) on a subdevice are checked and recorded
 * (fakedrv_controls; and one line each to the file FAKEDRV_CTL_LOG names, for the
 * preloaded library; a disable line carries t_ns, CLOCK_MONOTONIC). FIFO_DISABLE_CHANNELS with bRewindGpPut, with
 * bOnlyDisableScheduling=1, with a non-NULL pRunlistPreemptEvent, with more than
 * 64 channels, or naming anything but a channel of that GPU owned through this
 * file answers NV_ERR_INVALID_ARGUMENT.
 *
 * The USERD model: a channel allocated with hUserdMemory[0]/userdOffset[0] (offsets
 * 32 and 64 of its parameters) has its USERD there; once that memory object is
 * CPU-mapped (RM_MAP_MEMORY + mmap), an engine thread (started with the first such
 * mapping, every FAKEDRV_FETCH_NS) "fetches" for every enabled channel: GPGet
 * (+0x88) = GPPut (+0x8C). A disabled channel fetches nothing: work queued while
 * paused stays pending, as on the H200.
 *
 * GPU identity: NV0000 GET_PROBED_IDS lists the GPUs' gpuIds (GPU p, in PCI order,
 * is bus p + 1: gpuId (p + 1) << 8; listed last first) and GET_ID_INFO_V2 answers a
 * gpuId's device instance: p, or the p-th entry of FAKEDRV_INSTANCES ("1,0": as a
 * driver without persistence mode that initialised the second GPU first). The
 * device instance is what NV0080_ALLOC_PARAMETERS.deviceId names and what the
 * fake's per-GPU memory is kept by.
 *
 * UVM (as recorded for cudaMallocManaged on the H200): an mmap of the UVM file at
 * an address equal to its offset makes a managed range, unless it is exactly a
 * semaphore pool (UVM_ALLOC_SEMAPHORE_POOL, 68), whose CPU mapping it then is; it
 * fails (EBUSY) over any other range. munmap, or a MAP_FIXED mapping over it,
 * destroys a managed range or the part it covers. UVM_CREATE_EXTERNAL_RANGE (73)
 * makes an external range, UVM_FREE (34) frees a pool or an external range (not
 * a managed one: NV_ERR_INVALID_ADDRESS), UVM_VALIDATE_VA_RANGE (72) answers
 * whether a range exists; every UVM call but UVM_INITIALIZE before it fails.
 *
 * Across processes: the fake's state is each process's own (a forked child starts
 * with a copy), but its files are real sockets shared as the kernel shares files.
 * So that a test can see what "the driver" holds on the whole machine, every
 * device-memory allocation and free is appended to the file FAKEDRV_JOURNAL names
 * ("A INO CLIENT HANDLE GPU BYTES", "F INO CLIENT HANDLE"; INO is the inode of the
 * caller's end of the file it lives on): what is held is what was allocated and not
 * freed on a file some process still has open (tests/system/harness.py,
 * driver_holds). NV0000 EXPORT_OBJECTS_TO_FD (0x3D0B, params as RM's) makes its
 * export file keep the objects' memory: "D INO 0 N SRC_INO CLIENT HANDLE" lines,
 * the memory living while the export file is open somewhere even after the
 * object is freed. Legacy CUDA IPC: RM_SHARE and NV0000 CLIENT_SHARE_OBJECT
 * (0xD06) on an object append "S INO CLIENT HANDLE TYPE TARGET PID EUID"; an
 * RM_DUP_OBJECT whose source is another process's reads the journal and succeeds
 * only while the source is allocated, not freed, its file open somewhere and
 * shared with the caller (RM's share types 1 all, 2 same euid, 3 client, 4 pid;
 * else NV_ERR_INSUFFICIENT_PERMISSIONS), appending "I INO CLIENT HANDLE SRC_INO
 * SRC_CLIENT SRC_HANDLE": the memory lives while the dup is not freed and its file
 * is open. Client handles are unique on the machine (the pid is part of them), as
 * RM's; other handles are numbered per process, so a forked child and its parent
 * must not both allocate on one client. The caller's end of each file is
 * bound to the abstract name "@kairos-fakedrv:PID:N", by which kairosd's scripted
 * GPU backend (gpu_fake.c) recognises it among a process's descriptors.
 *
 * Configuration: fakedrv_reset(), or on first use FAKEDRV_GPUS (default 1),
 * FAKEDRV_FB_MIB (device memory per GPU, default 16384) and FAKEDRV_INSTANCES;
 * FAKEDRV_ALLOC_DELAY_MS keeps each device-memory RM_ALLOC that long in the
 * driver (no lock held).
 *
 * Thread rules: every function is thread-safe (one internal mutex, taken around
 * fork by atfork handlers so a child never inherits it locked, never held
 * while calling anything but the kernel).
 */
#ifndef KAIROS_TESTS_FAKEDRV_H
#define KAIROS_TESTS_FAKEDRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#define FAKEDRV_MAX_GPUS 8
#define FAKEDRV_PAGE (2u << 20) /* device memory is handed out in 2 MiB pages */
#define FAKEDRV_UVM_MAJOR 238u
#define FAKEDRV_FETCH_NS 100000L /* the engine fetches every 100 us */

/* Forgets every object and fake file (descriptors stay open as sockets) and
 * sets the number of GPUs and their memory. */
void fakedrv_reset(int ngpus, uint64_t fb_bytes);

bool fakedrv_owns(int fd);
bool fakedrv_is_path(const char *path);

int fakedrv_open(const char *path, int flags, ...);
int fakedrv_openat(int dirfd, const char *path, int flags, ...);
int fakedrv_open_2(const char *path, int flags);
int fakedrv_openat_2(int dirfd, const char *path, int flags);
int fakedrv_close(int fd);
FILE *fakedrv_fopen(const char *path, const char *mode);
int fakedrv_dup(int fd);
int fakedrv_dup2(int fd, int fd2);
int fakedrv_dup3(int fd, int fd2, int flags);
int fakedrv_fcntl(int fd, int cmd, ...);
int fakedrv_ioctl(int fd, unsigned long request, ...);
void *fakedrv_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *fakedrv_mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off);
int fakedrv_munmap(void *addr, size_t len);
int fakedrv_fstat(int fd, struct stat *st);
ssize_t fakedrv_readlink(const char *path, char *buf, size_t len);

/* Tests: hook(ctx) runs after every ioctl on a fake descriptor has been served
 * and its reply copied out, before the ioctl returns: where a signal handler or
 * another thread of the caller runs at the return to user space. NULL: none. */
void fakedrv_set_reply_hook(void (*hook)(void *ctx), void *ctx);

/* Tests: RM-chosen handles (hObjectNew 0) are the lowest handle free in the client
 * (from 0xcaf00001), so a handle just freed is handed out again at once, as RM may;
 * off (the default): every handle is new. Not reset by fakedrv_reset. */
void fakedrv_set_handle_reuse(bool on);

/* Inspection, for tests. */
uint64_t fakedrv_fb_total(int gpu);
uint64_t fakedrv_fb_free(int gpu);
uint32_t fakedrv_live_objects(void);
uint32_t fakedrv_live_clients(void);
uint64_t fakedrv_ioctls(void); /* ioctls served on fake descriptors */
uint64_t fakedrv_fetches(void); /* channel fetches the engine made (GPGet moved) */
uint64_t fakedrv_engine_passes(void); /* passes the engine finished over all channels */
/* UVM: bytes of the live managed ranges, each rounded up to 2 MiB (what UVM may
 * make resident on the GPU as it touches them), and how many there are. */
uint64_t fakedrv_managed_bytes(void);
uint32_t fakedrv_managed_ranges(void);
uint64_t fakedrv_managed_made(void); /* managed ranges made since the last reset */

enum fakedrv_ctl_cmd {
    FAKEDRV_CTL_SET_TIMESLICE = 1,
    FAKEDRV_CTL_DISABLE_CHANNELS = 2,
};
struct fakedrv_ctl_rec {
    enum fakedrv_ctl_cmd cmd;
    uint32_t client, object;  /* hClient, hObject of the control */
    uint32_t status;          /* what the fake answered */
    uint64_t timeslice_us;    /* SET_TIMESLICE */
    bool disable, only_disable_scheduling, rewind_gp_put; /* FIFO_DISABLE_CHANNELS */
    uint32_t n_channels;
    uint32_t clients[64], channels[64];
};
/* The time controls received since the last reset, oldest first: copies up to max
 * and returns how many there are (the log keeps the first 4096). */
size_t fakedrv_controls(struct fakedrv_ctl_rec *out, size_t max);
/* Every FIFO_DISABLE_CHANNELS takes us microseconds from now on (0: none; not
 * reset by fakedrv_reset). */
void fakedrv_set_control_delay(uint32_t us);
/* A channel group's last timeslice (0: never set or no such group). */
uint64_t fakedrv_timeslice(uint32_t client, uint32_t tsg);
/* 1 if the channel is disabled, 0 if not, -1 if there is no such channel. */
int fakedrv_channel_disabled(uint32_t client, uint32_t channel);

#endif /* KAIROS_TESTS_FAKEDRV_H */
