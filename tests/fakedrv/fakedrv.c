/* fakedrv.c - the fake NVIDIA driver's state and its emulation of RM (fakedrv.h).
 *
 * Owns the fake open files (indexed by descriptor, shared by dups with a
 * reference count), the RM objects (client, handle, parent, class, bytes, GPU)
 * and the per-GPU free-memory counters. Calls on descriptors it does not own go
 * to the kernel by raw syscall, so this file works both linked into a unit test
 * and inside libkairos_fakedrv.so under any interposer.
 */
#include "fakedrv.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/rm_abi.h"
#include "core/rm_names.h"

struct fk_file {
    int hup;               /* the fake's end of the file's socket pair */
    dev_t dev;             /* the caller's end's identity: what its descriptors fstat to */
    ino_t ino;
    enum rm_node node;
    int minor;
    bool uvm_ready;
    bool map_pending, mapped;
    uint64_t map_len;
    uint32_t map_client, map_memory; /* what the pending RM_MAP_MEMORY named */
    uint64_t map_offset;
};

struct fk_obj {
    uint32_t client, handle, parent, cls;
    uint64_t bytes;
    int gpu;
    struct fk_file *file; /* clients: the ctl file they were made on */
    uint64_t timeslice_us; /* channel groups: the last SET_TIMESLICE (0: never set) */
    bool disabled;         /* channels: FIFO_DISABLE_CHANNELS bDisable=1 last */
    uint32_t userd_mem;    /* channels: hUserdMemory[0] of the allocation (0: none) */
    uint64_t userd_off;    /* channels: userdOffset[0] */
    uint64_t ino;          /* the file it was made on (its caller end's inode), for the journal */
    bool dup;              /* made by RM_DUP_OBJECT: the source's memory, none of its own */
};

/* A CPU mapping of a memory object (RM_MAP_MEMORY + mmap), for the USERD model. */
struct fk_map {
    uint64_t addr, len;
    uint32_t client, memory;
    uint64_t offset;
};
#define FK_MAPS_MAX 256
static struct fk_map maps[FK_MAPS_MAX];
static size_t n_maps;

/* UVM's VA ranges (the process's va_space): managed ranges made by an mmap of the
 * UVM file, semaphore pools and external ranges made by ioctls. */
enum fk_uvm_kind { FK_UVM_MANAGED = 1, FK_UVM_POOL, FK_UVM_EXTERNAL };
struct fk_uvm_range {
    uint64_t addr, len;
    enum fk_uvm_kind kind;
};
#define FK_UVM_MAX 1024
static struct fk_uvm_range uvm_ranges[FK_UVM_MAX];
static size_t n_uvm_ranges;
static uint64_t n_managed_made; /* managed ranges ever made */
static bool engine_started;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* A fork while another thread is inside the fake (a time control in flight) must
 * not leave the child's copy locked: the real driver has no such lock to inherit. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&mu);
}

static void fork_release(void)
{
    pthread_mutex_unlock(&mu);
}

static void fork_release_child(void)
{
    engine_started = false; /* the engine thread stayed in the parent */
    pthread_mutex_unlock(&mu);
}

__attribute__((constructor)) static void register_atfork(void)
{
    pthread_atfork(fork_prepare, fork_release, fork_release_child);
}
static bool configured;
static int n_gpus = 1;
static uint64_t fb_total[FAKEDRV_MAX_GPUS], fb_used[FAKEDRV_MAX_GPUS];
static struct fk_file **files;
static size_t n_files, files_cap;
static struct fk_obj *objs;
static size_t n_objs, objs_cap;
static uint32_t next_handle = 0xcaf00001u;
static atomic_bool reuse_handles; /* RM-chosen handles: the lowest free one */
static uint32_t clients_made; /* client handles are unique on the machine, as RM's */
static atomic_ulong n_ioctls;
static void (*_Atomic reply_hook)(void *ctx);
static void *_Atomic reply_hook_ctx;
static atomic_ulong n_fetched;
static atomic_ulong n_engine_passes;
#define FK_CTL_LOG_MAX 4096
static struct fakedrv_ctl_rec ctl_log[FK_CTL_LOG_MAX];
static size_t n_ctl_log;

/* Device instance of each fake GPU (by its place in PCI order); FAKEDRV_INSTANCES
 * ("1,0": the second GPU was initialised first) or the identity. */
static int instance_of[FAKEDRV_MAX_GPUS];

static void instances_locked(const char *list)
{
    int n = 0;
    for (int i = 0; i < FAKEDRV_MAX_GPUS; i++)
        instance_of[i] = i;
    while (list && *list && n < FAKEDRV_MAX_GPUS) {
        char *end;
        long v = strtol(list, &end, 10);
        if (end == list)
            break;
        if (v >= 0 && v < FAKEDRV_MAX_GPUS)
            instance_of[n] = (int)v;
        n++;
        list = *end == ',' ? end + 1 : end;
    }
}

/* The fake GPUs' gpuIds, made of their PCI location as the driver's: bus p + 1. */
static uint32_t gpu_id_of(int p)
{
    return (uint32_t)(p + 1) << 8;
}

static void configure_locked(void)
{
    if (configured)
        return;
    const char *g = getenv("FAKEDRV_GPUS"), *m = getenv("FAKEDRV_FB_MIB");
    int ngpus = g ? atoi(g) : 1;
    uint64_t mib = m ? strtoull(m, NULL, 10) : 16384;
    if (ngpus < 1 || ngpus > FAKEDRV_MAX_GPUS)
        ngpus = 1;
    n_gpus = ngpus;
    instances_locked(getenv("FAKEDRV_INSTANCES"));
    for (int i = 0; i < FAKEDRV_MAX_GPUS; i++) {
        fb_total[i] = mib << 20;
        fb_used[i] = 0;
    }
    configured = true;
}

void fakedrv_reset(int ngpus, uint64_t fb_bytes)
{
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_files; i++) {
        syscall(SYS_close, files[i]->hup);
        free(files[i]);
    }
    n_files = 0;
    n_objs = 0;
    next_handle = 0xcaf00001u;
    clients_made = 0;
    n_gpus = ngpus < 1 || ngpus > FAKEDRV_MAX_GPUS ? 1 : ngpus;
    instances_locked(NULL);
    for (int i = 0; i < FAKEDRV_MAX_GPUS; i++) {
        fb_total[i] = fb_bytes;
        fb_used[i] = 0;
    }
    configured = true;
    atomic_store(&n_ioctls, 0);
    n_ctl_log = 0;
    n_maps = 0;
    n_uvm_ranges = 0;
    n_managed_made = 0;
    pthread_mutex_unlock(&mu);
}

/* ---- descriptors -------------------------------------------------------------------- */

/* A fake file is a socket pair: the caller's descriptors are one end (dup, fork,
 * SCM_RIGHTS, exec and close_range share and drop them exactly as the kernel
 * does any file), the fake keeps the other, and the file's last reference is
 * gone when the fake's end reports POLLHUP. So the fake needs to see no close. */
static struct fk_file *file_of_locked(int fd)
{
    struct stat st;
    if (fd < 0 || n_files == 0 || syscall(SYS_fstat, fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return NULL;
    for (size_t i = 0; i < n_files; i++)
        if (files[i]->dev == st.st_dev && files[i]->ino == st.st_ino && files[i]->hup != fd)
            return files[i];
    return NULL;
}

static void free_client_locked(uint32_t client);

/* The driver's release of a file: its clients and their objects go. */
static void release_file_locked(size_t index)
{
    struct fk_file *f = files[index];
    for (size_t i = 0; i < n_objs;) {
        if (objs[i].file == f && objs[i].handle == objs[i].client) {
            free_client_locked(objs[i].client);
            i = 0;
        } else {
            i++;
        }
    }
    syscall(SYS_close, f->hup);
    free(f);
    files[index] = files[--n_files];
}

/* Releases every file whose last descriptor is gone. */
static void reap_locked(void)
{
    for (size_t i = 0; i < n_files;) {
        struct pollfd p = {.fd = files[i]->hup, .events = POLLIN};
        if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLNVAL)))
            release_file_locked(i);
        else
            i++;
    }
}

bool fakedrv_owns(int fd)
{
    pthread_mutex_lock(&mu);
    bool owned = file_of_locked(fd) != NULL;
    pthread_mutex_unlock(&mu);
    return owned;
}

static enum rm_node node_of_path(const char *path, int *minor)
{
    *minor = 0;
    if (!path || strncmp(path, "/dev/nvidia", 11) != 0)
        return RM_NODE_NONE;
    const char *rest = path + 11;
    if (strcmp(rest, "ctl") == 0) {
        *minor = (int)RM_NV_CTL_MINOR;
        return RM_NODE_CTL;
    }
    if (strcmp(rest, "-uvm") == 0 || strcmp(rest, "-uvm-tools") == 0)
        return RM_NODE_UVM;
    char *end;
    long n = strtol(rest, &end, 10);
    if (rest[0] >= '0' && rest[0] <= '9' && !*end && n >= 0 && n < 254) {
        *minor = (int)n;
        return RM_NODE_DEV;
    }
    return RM_NODE_NONE;
}

bool fakedrv_is_path(const char *path)
{
    return path && strncmp(path, "/dev/nvidia", 11) == 0;
}

/* The caller's end gets an abstract name, "@kairos-fakedrv:NODE:MINOR:PID:N", so
 * that kairosd's scripted GPU backend can tell the fake's files among a process's
 * descriptors (through /proc/net/unix), as it tells a real node by its path, and
 * so that fstat in another process (one that inherited or received it) still sees
 * the node it is. */
static void name_file(int fd, enum rm_node node, int minor)
{
    static atomic_uint serial;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "kairos-fakedrv:%d:%d:%ld:%u",
                     (int)node, minor, (long)syscall(SYS_getpid), atomic_fetch_add(&serial, 1));
    if (fd >= 0 && n > 0)
        syscall(SYS_bind, fd, (struct sockaddr *)&sa,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n));
}

/* The fake driver's release: FAKEDRV_VERSION, else the one the GPU suite ran on. */
static const char *fake_version(void)
{
    const char *v = getenv("FAKEDRV_VERSION");
    return v && *v ? v : "580.159.04";
}

/* /proc/driver/nvidia/version as the kernel module writes it, in a memfd: while the
 * fake driver is loaded its release stands for the machine's. */
static int open_version_file(void)
{
    int fd = (int)syscall(SYS_memfd_create, "fakedrv-version", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    char text[256];
    int n = snprintf(text, sizeof text, "NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  "
                     "(fake driver)\nGCC version:  gcc\n", fake_version());
    if (write(fd, text, (size_t)n) != n || lseek(fd, 0, SEEK_SET) != 0) {
        syscall(SYS_close, fd);
        errno = EIO;
        return -1;
    }
    return fd;
}

static int open_common(int dirfd, const char *path, int flags, int mode)
{
    if (path && !strcmp(path, "/proc/driver/nvidia/version")) {
        if (!getenv("FAKEDRV_NO_PROC_VERSION"))
            return open_version_file();
        errno = ENOENT;
        return -1;
    }
    if (!fakedrv_is_path(path))
        return (int)syscall(SYS_openat, dirfd, path, flags, mode);
    int minor;
    enum rm_node node = node_of_path(path, &minor);
    pthread_mutex_lock(&mu);
    configure_locked();
    bool exists = node != RM_NODE_NONE && !(node == RM_NODE_DEV && minor >= n_gpus);
    pthread_mutex_unlock(&mu);
    if (!exists) {
        errno = ENOENT;
        return -1;
    }
    int ends[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0)
        return -1;
    /* The fake's end goes high, the caller's takes the lowest free number, as
     * an open's descriptor does. */
    struct rlimit lim;
    long high = getrlimit(RLIMIT_NOFILE, &lim) == 0 ? (long)(lim.rlim_cur / 2) : 512;
    int hup = (int)syscall(SYS_fcntl, ends[0], F_DUPFD_CLOEXEC, high < 64 ? 64 : high);
    syscall(SYS_close, ends[0]);
    int fd = hup < 0 ? -1 : (int)syscall(SYS_fcntl, ends[1], F_DUPFD_CLOEXEC, 0);
    syscall(SYS_close, ends[1]);
    name_file(fd, node, minor);
    if (fd < 0) {
        if (hup >= 0)
            syscall(SYS_close, hup);
        return -1;
    }
    ends[0] = hup;
    struct stat st;
    struct fk_file *f = calloc(1, sizeof *f);
    if (!(flags & O_CLOEXEC))
        syscall(SYS_fcntl, fd, F_SETFD, 0);
    pthread_mutex_lock(&mu);
    int rc = -1;
    if (f && syscall(SYS_fstat, fd, &st) == 0 && n_files < files_cap) {
        rc = 0;
    } else if (f && syscall(SYS_fstat, fd, &st) == 0) {
        size_t cap = files_cap ? files_cap * 2 : 64;
        struct fk_file **grown = realloc(files, cap * sizeof *grown);
        if (grown) {
            files = grown;
            files_cap = cap;
            rc = 0;
        }
    }
    if (rc == 0) {
        *f = (struct fk_file){.hup = ends[0], .dev = st.st_dev, .ino = st.st_ino,
                              .node = node, .minor = minor};
        files[n_files++] = f;
    }
    pthread_mutex_unlock(&mu);
    if (rc != 0) {
        free(f);
        syscall(SYS_close, ends[0]);
        syscall(SYS_close, fd);
        errno = ENOMEM;
        return -1;
    }
    return fd;
}

static int mode_of(int flags, va_list ap)
{
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
        return va_arg(ap, int);
    return 0;
}

int fakedrv_open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int mode = mode_of(flags, ap);
    va_end(ap);
    return open_common(AT_FDCWD, path, flags, mode);
}

int fakedrv_openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int mode = mode_of(flags, ap);
    va_end(ap);
    return open_common(dirfd, path, flags, mode);
}

int fakedrv_open_2(const char *path, int flags)
{
    return open_common(AT_FDCWD, path, flags, 0);
}

int fakedrv_openat_2(int dirfd, const char *path, int flags)
{
    return open_common(dirfd, path, flags, 0);
}

/* A close, dup or fork needs no bookkeeping: the socket counts references. */
/* fopen as glibc's: the open flags its mode implies, then a stream on the fd. */
FILE *fakedrv_fopen(const char *path, const char *mode)
{
    int flags = O_RDONLY;
    if (mode[0] == 'w')
        flags = O_WRONLY | O_CREAT | O_TRUNC;
    else if (mode[0] == 'a')
        flags = O_WRONLY | O_CREAT | O_APPEND;
    for (const char *m = mode + 1; *m; m++) {
        if (*m == '+')
            flags = (flags & ~O_ACCMODE) | O_RDWR;
        else if (*m == 'e')
            flags |= O_CLOEXEC;
    }
    int fd = open_common(AT_FDCWD, path, flags, 0666);
    if (fd < 0)
        return NULL;
    FILE *fp = fdopen(fd, mode);
    if (!fp)
        syscall(SYS_close, fd);
    return fp;
}

int fakedrv_close(int fd)
{
    int ret = (int)syscall(SYS_close, fd);
    pthread_mutex_lock(&mu);
    reap_locked();
    pthread_mutex_unlock(&mu);
    return ret;
}

static int note_dup(int fd, int nfd)
{
    (void)fd;
    pthread_mutex_lock(&mu);
    reap_locked(); /* a dup onto a descriptor closed what was there */
    pthread_mutex_unlock(&mu);
    return nfd;
}

int fakedrv_dup(int fd)
{
    return note_dup(fd, (int)syscall(SYS_dup, fd));
}

int fakedrv_dup2(int fd, int fd2)
{
    if (fd == fd2)
        return (int)syscall(SYS_fcntl, fd, F_GETFD) < 0 ? -1 : fd2;
    return note_dup(fd, (int)syscall(SYS_dup3, fd, fd2, 0));
}

int fakedrv_dup3(int fd, int fd2, int flags)
{
    return note_dup(fd, (int)syscall(SYS_dup3, fd, fd2, flags));
}

int fakedrv_fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    int ret = (int)syscall(SYS_fcntl, fd, cmd, arg);
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
        return note_dup(fd, ret);
    return ret;
}

/* A fake file another process opened (inherited, received): its name says its node. */
static bool foreign_file(int fd, enum rm_node *node, int *minor)
{
    struct sockaddr_un sa;
    socklen_t len = sizeof sa;
    memset(&sa, 0, sizeof sa);
    int n, m;
    if (syscall(SYS_getsockname, fd, (struct sockaddr *)&sa, &len) != 0 ||
        len <= offsetof(struct sockaddr_un, sun_path) + 1 || sa.sun_path[0] != 0 ||
        sscanf(sa.sun_path + 1, "kairos-fakedrv:%d:%d:", &n, &m) != 2)
        return false;
    *node = (enum rm_node)n;
    *minor = m;
    return true;
}

int fakedrv_fstat(int fd, struct stat *st)
{
    pthread_mutex_lock(&mu);
    struct fk_file *f = file_of_locked(fd);
    enum rm_node node = f ? f->node : RM_NODE_NONE;
    int minor = f ? f->minor : 0;
    pthread_mutex_unlock(&mu);
    if (!f && !foreign_file(fd, &node, &minor))
        return (int)syscall(SYS_fstat, fd, st);
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFCHR | 0666;
    st->st_rdev = node == RM_NODE_UVM ? makedev(FAKEDRV_UVM_MAJOR, 0)
                                      : makedev(RM_NV_MAJOR, (unsigned)minor);
    return 0;
}

ssize_t fakedrv_readlink(const char *path, char *buf, size_t len)
{
    int fd;
    char tail;
    if (path && sscanf(path, "/proc/self/fd/%d%c", &fd, &tail) == 1) {
        pthread_mutex_lock(&mu);
        struct fk_file *f = file_of_locked(fd);
        char name[32] = "";
        if (f && f->node == RM_NODE_UVM)
            snprintf(name, sizeof name, "/dev/nvidia-uvm");
        else if (f && f->node == RM_NODE_CTL)
            snprintf(name, sizeof name, "/dev/nvidiactl");
        else if (f)
            snprintf(name, sizeof name, "/dev/nvidia%d", f->minor);
        pthread_mutex_unlock(&mu);
        if (f) {
            size_t n = strlen(name) < len ? strlen(name) : len;
            memcpy(buf, name, n);
            return (ssize_t)n;
        }
    }
    return (ssize_t)syscall(SYS_readlinkat, AT_FDCWD, path, buf, len);
}

/* ---- RM objects ------------------------------------------------------------------- */

static struct fk_obj *find_locked(uint32_t client, uint32_t handle)
{
    for (size_t i = 0; i < n_objs; i++)
        if (objs[i].client == client && objs[i].handle == handle)
            return &objs[i];
    return NULL;
}

/* The handle RM chooses for a new object of client (hObjectNew 0). */
static uint32_t new_handle_locked(uint32_t client)
{
    if (!atomic_load(&reuse_handles))
        return next_handle++;
    uint32_t h = 0xcaf00001u;
    while (find_locked(client, h))
        h++;
    return h;
}

void fakedrv_set_handle_reuse(bool on)
{
    atomic_store(&reuse_handles, on);
}

/* FAKEDRV_JOURNAL: one line per device-memory allocation and free, appended by
 * every process, so a test can add up what "the driver" holds across processes
 * (fakedrv.h). Raw system calls: the fake never goes through an interposer. */
static void journal_locked(char what, const struct fk_obj *o)
{
    const char *path = getenv("FAKEDRV_JOURNAL");
    if (!path || !*path || (!o->bytes && !o->dup))
        return;
    char line[160];
    int n = what == 'A' ? snprintf(line, sizeof line, "A %llu %u %u %d %llu\n",
                                   (unsigned long long)o->ino, o->client, o->handle, o->gpu,
                                   (unsigned long long)o->bytes)
                        : snprintf(line, sizeof line, "F %llu %u %u\n",
                                   (unsigned long long)o->ino, o->client, o->handle);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
                          0600);
    if (fd < 0)
        return;
    if (n > 0)
        (void)!syscall(SYS_write, fd, line, (size_t)n);
    syscall(SYS_close, fd);
}

static void remove_at_locked(size_t i)
{
    journal_locked('F', &objs[i]);
    if (objs[i].bytes)
        fb_used[objs[i].gpu] -= objs[i].bytes;
    objs[i] = objs[--n_objs];
}

/* Frees (client, handle) and everything under it. */
static void free_subtree_locked(uint32_t client, uint32_t handle)
{
    for (size_t i = 0; i < n_objs;) {
        if (objs[i].client == client && objs[i].parent == handle && objs[i].handle != handle) {
            free_subtree_locked(client, objs[i].handle);
            i = 0;
        } else {
            i++;
        }
    }
    for (size_t i = 0; i < n_objs; i++) {
        if (objs[i].client == client && objs[i].handle == handle) {
            remove_at_locked(i);
            break;
        }
    }
}

static void free_client_locked(uint32_t client)
{
    for (size_t i = 0; i < n_objs;) {
        if (objs[i].client == client)
            remove_at_locked(i);
        else
            i++;
    }
}

/* RM numbers clients across the machine: another process's DUP_OBJECT names one. */
static uint32_t next_client_handle_locked(void)
{
    uint32_t pid = (uint32_t)syscall(SYS_getpid);
    return 0xc1000000u | (pid & 0xfffu) << 12 | (++clients_made & 0xfffu);
}

static bool is_root_class(uint32_t cls)
{
    return cls == 0x0 || cls == 0x1 || cls == 0x41;
}

/* A client named by a call must live on the caller's file. */
static bool client_ok_locked(uint32_t client, const struct fk_file *f)
{
    struct fk_obj *c = find_locked(client, client);
    return c && c->file == f;
}

/* The object (client, handle) a call on f names, or NULL with *status saying why:
 * the client is not the caller's, or there is no such object. */
static struct fk_obj *named_object_locked(const struct fk_file *f, uint32_t client,
                                          uint32_t handle, uint32_t *status)
{
    struct fk_obj *o = NULL;
    if (!client_ok_locked(client, f))
        *status = RM_NV_ERR_INVALID_CLIENT;
    else if (!(o = find_locked(client, handle)))
        *status = RM_NV_ERR_INVALID_OBJECT_HANDLE;
    return o;
}

/* Room in objs for one more object; false when out of memory. */
static bool objs_room_locked(void)
{
    if (n_objs < objs_cap)
        return true;
    size_t cap = objs_cap ? objs_cap * 2 : 256;
    struct fk_obj *grown = realloc(objs, cap * sizeof *grown);
    if (!grown)
        return false;
    objs = grown;
    objs_cap = cap;
    return true;
}

static uint32_t rm_alloc_locked(struct fk_file *f, uint32_t h_root, uint32_t h_parent,
                                uint32_t *h_new, uint32_t cls, uint8_t *params,
                                uint32_t params_size)
{
    if (is_root_class(cls)) {
        uint32_t h = *h_new ? *h_new : next_client_handle_locked();
        if (find_locked(h, h))
            return RM_NV_ERR_INSUFFICIENT_RESOURCES;
        if (!objs_room_locked())
            return RM_NV_ERR_NO_MEMORY;
        objs[n_objs++] = (struct fk_obj){h, h, 0, 0x41, 0, 0, f, 0, false, 0, 0, f->ino, false};
        *h_new = h;
        return RM_NV_OK;
    }
    uint32_t status;
    struct fk_obj *parent = named_object_locked(f, h_root, h_parent, &status);
    if (!parent)
        return status;
    /* Like RM: the class's own parameter size counts, not the caller's paramsSize
     * (CUDA passes 0 in NVOS64). */
    if (rm_class_params_size(cls))
        params_size = rm_class_params_size(cls);
    uint32_t h = *h_new ? *h_new : new_handle_locked(h_root);
    if (find_locked(h_root, h))
        return RM_NV_ERR_INVALID_ARGUMENT;
    int gpu = parent->gpu;
    uint64_t bytes = 0;
    if (cls == 0x80 && params && params_size >= 4) {
        uint32_t dev;
        memcpy(&dev, params, sizeof dev);
        if ((int)dev >= n_gpus)
            return RM_NV_ERR_INVALID_DEVICE;
        gpu = (int)dev;
    }
    if (cls == 0x40) {
        struct rm_memory_alloc_params mp;
        if (!params || params_size < sizeof mp)
            return RM_NV_ERR_INVALID_PARAM_STRUCT;
        memcpy(&mp, params, sizeof mp);
        if (RM_ATTR_LOCATION(mp.attr) != RM_ATTR_LOCATION_VIDMEM || (mp.flags & RM_MEMFLAG_VIRTUAL))
            return RM_NV_ERR_INVALID_ARGUMENT;
        if (mp.size == 0)
            return RM_NV_ERR_INVALID_ARGUMENT;
        if (mp.size > fb_total[gpu])
            return RM_NV_ERR_NO_MEMORY;
        bytes = (mp.size + FAKEDRV_PAGE - 1) / FAKEDRV_PAGE * FAKEDRV_PAGE;
        if (fb_total[gpu] - fb_used[gpu] < bytes)
            return RM_NV_ERR_NO_MEMORY;
        mp.size = bytes;
        mp.limit = bytes - 1;
        memcpy(params + offsetof(struct rm_memory_alloc_params, size), &mp.size, 8);
        memcpy(params + offsetof(struct rm_memory_alloc_params, limit), &mp.limit, 8);
    }
    if (!objs_room_locked())
        return RM_NV_ERR_NO_MEMORY;
    fb_used[gpu] += bytes;
    struct fk_obj o = {h_root, h, h_parent, cls, bytes, gpu, NULL, 0, false, 0, 0, f->ino, false};
    if (rm_class_kind(cls) == RM_KIND_CHANNEL && params && params_size >= 72) {
        memcpy(&o.userd_mem, params + 32, 4); /* NV_CHANNEL_ALLOC_PARAMS.hUserdMemory[0] */
        memcpy(&o.userd_off, params + 64, 8); /* .userdOffset[0] */
    }
    objs[n_objs++] = o;
    journal_locked('A', &o);
    *h_new = h;
    return RM_NV_OK;
}

/* As RM: the parameters are copied in (by the class's size), the allocation
 * works on the copy, and the copy goes back to the caller's memory. */
static uint32_t rm_alloc_copied_locked(struct fk_file *f, uint32_t h_root, uint32_t h_parent,
                                       uint32_t *h_new, uint32_t cls, uint64_t params_ptr,
                                       uint32_t params_size)
{
    uint8_t copy[1024];
    uint32_t len = rm_class_params_size(cls) ? rm_class_params_size(cls) : params_size;
    uint8_t *user = (uint8_t *)(uintptr_t)params_ptr;
    if (!user || len == 0)
        return rm_alloc_locked(f, h_root, h_parent, h_new, cls, NULL, 0);
    if (len > sizeof copy)
        return RM_NV_ERR_INVALID_ARGUMENT;
    memcpy(copy, user, len);
    uint32_t status = rm_alloc_locked(f, h_root, h_parent, h_new, cls, copy, len);
    memcpy(user, copy, len);
    return status;
}

/* Appends a time-control record to the in-process log and, when FAKEDRV_CTL_LOG
 * names a file, as one line to it (for tests of the preloaded library). */
static void log_ctl_locked(const struct fakedrv_ctl_rec *rec)
{
    if (n_ctl_log < FK_CTL_LOG_MAX)
        ctl_log[n_ctl_log++] = *rec;
    const char *path = getenv("FAKEDRV_CTL_LOG");
    if (!path || !*path)
        return;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                          0644);
    if (fd < 0)
        return;
    char line[1400];
    int n;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    unsigned long long t_ns = (unsigned long long)now.tv_sec * 1000000000ull +
                              (unsigned long long)now.tv_nsec;
    if (rec->cmd == FAKEDRV_CTL_SET_TIMESLICE) {
        n = snprintf(line, sizeof line, "timeslice pid=%d client=0x%x tsg=0x%x us=%llu status=%u\n",
                     (int)getpid(), rec->client, rec->object,
                     (unsigned long long)rec->timeslice_us, rec->status);
    } else {
        n = snprintf(line, sizeof line,
                     "disable pid=%d t_ns=%llu client=0x%x subdevice=0x%x disable=%d n=%u "
                     "status=%u channels=",
                     (int)getpid(), t_ns, rec->client, rec->object, rec->disable ? 1 : 0,
                     rec->n_channels, rec->status);
        for (uint32_t i = 0; i < rec->n_channels && i < 64 && n > 0 && n < (int)sizeof line - 24;
             i++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%s0x%x", i ? "," : "",
                          rec->channels[i]);
        if (n > 0 && n < (int)sizeof line - 1)
            line[n++] = '\n';
    }
    if (n > 0)
        (void)!syscall(SYS_write, fd, line, (size_t)n);
    syscall(SYS_close, fd);
}

/* NVA06C SET_TIMESLICE on a channel group. */
static uint32_t ctl_set_timeslice_locked(struct fk_obj *o, const struct rm_control_args *a)
{
    struct fakedrv_ctl_rec rec = {.cmd = FAKEDRV_CTL_SET_TIMESLICE, .client = a->h_client,
                                  .object = a->h_object};
    if (o->cls != 0xA06C)
        rec.status = RM_NV_ERR_INVALID_OBJECT_HANDLE;
    else if (a->params_size != 8 || !a->params)
        rec.status = RM_NV_ERR_INVALID_PARAM_STRUCT;
    else {
        memcpy(&rec.timeslice_us, (const void *)(uintptr_t)a->params, 8);
        o->timeslice_us = rec.timeslice_us;
        rec.status = RM_NV_OK;
    }
    log_ctl_locked(&rec);
    return rec.status;
}

/* NV2080 FIFO_DISABLE_CHANNELS on a subdevice: the checks of the real driver
 * plus the ones our rules demand (never rewind, never scheduling-only). */
static uint32_t ctl_disable_channels_locked(struct fk_file *f, struct fk_obj *o,
                                            const struct rm_control_args *a)
{
    struct fakedrv_ctl_rec rec = {.cmd = FAKEDRV_CTL_DISABLE_CHANNELS, .client = a->h_client,
                                  .object = a->h_object};
    uint8_t p[536];
    if (o->cls != 0x2080) {
        rec.status = RM_NV_ERR_INVALID_OBJECT_HANDLE;
        goto out;
    }
    if (a->params_size != sizeof p || !a->params) {
        rec.status = RM_NV_ERR_INVALID_PARAM_STRUCT;
        goto out;
    }
    memcpy(p, (const void *)(uintptr_t)a->params, sizeof p);
    uint64_t event;
    memcpy(&rec.n_channels, p + 4, 4);
    memcpy(&event, p + 16, 8);
    rec.disable = p[0] != 0;
    rec.only_disable_scheduling = p[8] != 0;
    rec.rewind_gp_put = p[9] != 0;
    if (rec.n_channels > 64 || rec.only_disable_scheduling || rec.rewind_gp_put || event) {
        rec.status = RM_NV_ERR_INVALID_ARGUMENT;
        goto out;
    }
    memcpy(rec.clients, p + 24, 4 * 64);
    memcpy(rec.channels, p + 280, 4 * 64);
    for (uint32_t i = 0; i < rec.n_channels; i++) {
        struct fk_obj *ch = find_locked(rec.clients[i], rec.channels[i]);
        if (!client_ok_locked(rec.clients[i], f) || !ch || ch->cls != 0xC86F ||
            ch->gpu != o->gpu) {
            rec.status = RM_NV_ERR_INVALID_ARGUMENT;
            goto out;
        }
    }
    for (uint32_t i = 0; i < rec.n_channels; i++)
        find_locked(rec.clients[i], rec.channels[i])->disabled = rec.disable;
    rec.status = RM_NV_OK;
out:
    log_ctl_locked(&rec);
    return rec.status;
}

/* NV0000 GET_PROBED_IDS: gpuIds[32], excludedGpuIds[32], gpuFlags[32]; the GPUs
 * listed last first, so that a reader must sort them to get the PCI order. */
static uint32_t ctl_probed_ids_locked(struct rm_control_args *a)
{
    uint32_t p[96];
    if (a->params_size != sizeof p || !a->params)
        return RM_NV_ERR_INVALID_PARAM_STRUCT;
    memset(p, 0xff, sizeof p);
    for (int i = 0; i < n_gpus; i++)
        p[i] = gpu_id_of(n_gpus - 1 - i);
    memset(&p[64], 0, 32 * sizeof *p);
    memcpy((void *)(uintptr_t)a->params, p, sizeof p);
    return RM_NV_OK;
}

/* NV0000 GET_ID_INFO_V2: gpuId in; gpuFlags, deviceInstance, subDeviceInstance,
 * sliStatus, boardId, gpuInstance, numaId out. */
static uint32_t ctl_id_info_locked(struct rm_control_args *a)
{
    uint32_t p[8];
    if (a->params_size != sizeof p || !a->params)
        return RM_NV_ERR_INVALID_PARAM_STRUCT;
    memcpy(p, (const void *)(uintptr_t)a->params, sizeof p);
    for (int i = 0; i < n_gpus; i++)
        if (gpu_id_of(i) == p[0]) {
            uint32_t inst = (uint32_t)instance_of[i];
            uint32_t out[8] = {p[0], 1, inst, 0, 0, 0, inst, 0xffffffffu};
            memcpy((void *)(uintptr_t)a->params, out, sizeof out);
            return RM_NV_OK;
        }
    return RM_NV_ERR_INVALID_ARGUMENT;
}

/* NV0000 EXPORT_OBJECTS_TO_FD: the objects must be the client's and params.fd one of
 * this process's /dev/nvidiactl files; the export file then keeps their memory:
 * a journal line "D INO 0 N SRC_INO CLIENT HANDLE" per object says so (fakedrv.h). */
static uint32_t ctl_export_locked(struct rm_control_args *a)
{
    static uint32_t serial;
    struct rm_export_objects_to_fd_params *p = (void *)(uintptr_t)a->params;
    if (a->params_size != sizeof *p || !p || p->num_objects > RM_EXPORT_FD_MAX_OBJECTS)
        return RM_NV_ERR_INVALID_PARAM_STRUCT;
    struct fk_file *xf = file_of_locked(p->fd);
    if (!xf || xf->node != RM_NODE_CTL)
        return RM_NV_ERR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < p->num_objects; i++)
        if (!find_locked(a->h_client, p->objects[i]))
            return RM_NV_ERR_OBJECT_NOT_FOUND;
    const char *path = getenv("FAKEDRV_JOURNAL");
    for (unsigned i = 0; path && *path && i < p->num_objects; i++) {
        const struct fk_obj *o = find_locked(a->h_client, p->objects[i]);
        char line[160];
        int n = snprintf(line, sizeof line, "D %llu 0 %u %llu %u %u\n",
                         (unsigned long long)xf->ino, ++serial, (unsigned long long)o->ino,
                         o->client, o->handle);
        int fd = (int)syscall(SYS_openat, AT_FDCWD, path,
                              O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0 && n > 0)
            (void)!syscall(SYS_write, fd, line, (size_t)n);
        if (fd >= 0)
            syscall(SYS_close, fd);
    }
    return RM_NV_OK;
}

/* ---- sharing and DUP_OBJECT across processes ------------------------------------
 * RM lets a client dup an object of another client when the object's share policy
 * grants it (RM_SHARE, NV0000 CLIENT_SHARE_OBJECT; by default only to clients of
 * the same process). The fake's objects are each process's own, so a share is a
 * journal line "S INO CLIENT HANDLE TYPE TARGET PID EUID", and another process's
 * dup reads the journal: the source must be allocated ("A"), not freed ("F"),
 * its file open somewhere, and shared with the caller. The dup is then a line
 * "I INO CLIENT HANDLE SRC_INO SRC_CLIENT SRC_HANDLE": the memory lives while the
 * dup is not freed and its file is open (tests/system/harness.py, driver_holds). */

static void journal_write(const char *line, int n)
{
    const char *path = getenv("FAKEDRV_JOURNAL");
    if (!path || !*path || n <= 0)
        return;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
                          0600);
    if (fd < 0)
        return;
    (void)!syscall(SYS_write, fd, line, (size_t)n);
    syscall(SYS_close, fd);
}

/* RS_SHARE_POLICY {u32 target; u32 accessMask; u16 type; u8 action} on (client, object). */
static uint32_t share_locked(struct fk_file *f, uint32_t client, uint32_t object,
                             const uint8_t *policy)
{
    uint32_t status;
    const struct fk_obj *o = named_object_locked(f, client, object, &status);
    if (!o)
        return status;
    if (object == client)
        return RM_NV_ERR_INVALID_OBJECT_HANDLE;
    uint32_t target;
    uint16_t type;
    memcpy(&target, policy, 4);
    memcpy(&type, policy + 8, 2);
    if (type == 0 || type > 7)
        return RM_NV_ERR_INVALID_ARGUMENT;
    char line[200];
    int n = snprintf(line, sizeof line, "S %llu %u %u %u %u %ld %ld\n",
                     (unsigned long long)o->ino, client, object, type, target,
                     (long)syscall(SYS_getpid), (long)syscall(SYS_geteuid));
    journal_write(line, n);
    return RM_NV_OK;
}

/* The names in directory path (raw getdents64: the fake calls nothing that an
 * interposer may route back into it while it holds its mutex): fn(name, ctx) for
 * each until it returns true; whether one did. */
static bool each_name(const char *path, bool (*fn)(const char *name, void *ctx), void *ctx)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[4096];
    bool done = false;
    long n;
    while (!done && (n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
        for (long off = 0; off < n && !done;) {
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen); /* d_reclen */
            const char *name = buf + off + 19;              /* d_name */
            if (name[0] != '.')
                done = fn(name, ctx);
            off += reclen;
        }
    syscall(SYS_close, fd);
    return done;
}

struct ino_search {
    char want[48];
    char dir[64];
};

static bool fd_is(const char *name, void *ctx)
{
    struct ino_search *q = ctx;
    char path[160], link[64];
    snprintf(path, sizeof path, "%s/%s", q->dir, name);
    long k = syscall(SYS_readlinkat, AT_FDCWD, path, link, sizeof link - 1);
    if (k <= 0)
        return false;
    link[k] = 0;
    return strcmp(link, q->want) == 0;
}

static bool process_has(const char *name, void *ctx)
{
    struct ino_search *q = ctx;
    if (name[0] < '0' || name[0] > '9')
        return false;
    snprintf(q->dir, sizeof q->dir, "/proc/%.16s/fd", name);
    return each_name(q->dir, fd_is, q);
}

/* Whether a socket inode is open in some process this user can see. */
static bool ino_open(uint64_t ino)
{
    struct ino_search q;
    snprintf(q.want, sizeof q.want, "socket:[%llu]", (unsigned long long)ino);
    return each_name("/proc", process_has, &q);
}

/* The journal's text (malloc'd, NUL-terminated), or NULL. */
static char *journal_text(void)
{
    const char *path = getenv("FAKEDRV_JOURNAL");
    int fd = path && *path ? (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    long n;
    while (text && (n = syscall(SYS_read, fd, text + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 2) {
            char *grown = realloc(text, cap * 2);
            if (!grown) {
                free(text);
                text = NULL;
                break;
            }
            text = grown;
            cap *= 2;
        }
    }
    syscall(SYS_close, fd);
    if (text)
        text[len] = 0;
    return text;
}

/* Another process's object, as the journal tells it: 0 and its file's inode when
 * it lives and is shared with a client dst_client of this process; an RM status. */
static uint32_t foreign_source(uint32_t client, uint32_t object, uint32_t dst_client,
                               uint64_t *src_ino)
{
    char *text = journal_text();
    if (!text)
        return RM_NV_ERR_INVALID_OBJECT_HANDLE;
    bool alive = false, shared = false;
    uint64_t ino = 0;
    long pid = (long)syscall(SYS_getpid), euid = (long)syscall(SYS_geteuid);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        unsigned long long i, bytes;
        unsigned c, h, type, target;
        long spid, seuid;
        int gpu;
        if (sscanf(line, "A %llu %u %u %d %llu", &i, &c, &h, &gpu, &bytes) == 5 &&
            c == client && h == object) {
            alive = true;
            ino = i;
            shared = false; /* a handle used again: only later shares count */
        } else if (sscanf(line, "F %llu %u %u", &i, &c, &h) == 3 && c == client &&
                   h == object && i == ino) {
            alive = false;
        } else if (sscanf(line, "S %llu %u %u %u %u %ld %ld", &i, &c, &h, &type, &target, &spid,
                          &seuid) == 7 &&
                   c == client && h == object && i == ino) {
            shared |= type == 1 || (type == 2 && seuid == euid) ||
                      (type == 3 && target == dst_client) || (type == 4 && target == pid);
        }
    }
    free(text);
    if (!alive || !ino_open(ino))
        return RM_NV_ERR_INVALID_OBJECT_HANDLE; /* freed, or its client went with its file */
    if (!shared)
        return RM_NV_ERR_INSUFFICIENT_PERMISSIONS;
    *src_ino = ino;
    return RM_NV_OK;
}

static uint32_t dup_locked(struct fk_file *f, struct rm_dup_object_args *a)
{
    uint32_t status;
    const struct fk_obj *parent = named_object_locked(f, a->h_client, a->h_parent, &status);
    if (!parent)
        return status;
    uint64_t src_ino = 0;
    const struct fk_obj *src = find_locked(a->h_client_src, a->h_object_src);
    if (src && a->h_object_src != a->h_client_src) {
        src_ino = src->ino; /* a client of this process: allowed by default */
    } else {
        uint32_t st = foreign_source(a->h_client_src, a->h_object_src, a->h_client, &src_ino);
        if (st != RM_NV_OK)
            return st;
    }
    uint32_t h = a->h_object ? a->h_object : new_handle_locked(a->h_client);
    if (find_locked(a->h_client, h))
        return RM_NV_ERR_INVALID_ARGUMENT;
    if (!objs_room_locked())
        return RM_NV_ERR_NO_MEMORY;
    objs[n_objs++] = (struct fk_obj){.client = a->h_client, .handle = h, .parent = a->h_parent,
                                     .cls = 0x40, .gpu = parent->gpu, .ino = f->ino,
                                     .dup = true};
    char line[200];
    int n = snprintf(line, sizeof line, "I %llu %u %u %llu %u %u\n", (unsigned long long)f->ino,
                     a->h_client, h, (unsigned long long)src_ino, a->h_client_src,
                     a->h_object_src);
    journal_write(line, n);
    a->h_object = h;
    return RM_NV_OK;
}

/* FB_GET_INFO's and FB_GET_INFO_V2's answers, in KiB: the sizes GPU gpu's memory,
 * the free part what is not allocated; an index this driver does not know reads 0. */
static void fb_info_entries_locked(int gpu, struct rm_fb_info_entry *e, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        switch (e[i].index) {
        case RM_FB_INFO_RAM_SIZE:
        case RM_FB_INFO_TOTAL_RAM_SIZE:
        case RM_FB_INFO_HEAP_SIZE:
        case RM_FB_INFO_USABLE_RAM_SIZE:
            e[i].data = (uint32_t)(fb_total[gpu] >> 10);
            break;
        case RM_FB_INFO_HEAP_FREE:
            e[i].data = (uint32_t)((fb_total[gpu] - fb_used[gpu]) >> 10);
            break;
        default:
            e[i].data = 0;
        }
    }
}

static uint32_t rm_control_locked(struct fk_file *f, struct rm_control_args *a)
{
    uint32_t status;
    struct fk_obj *o = named_object_locked(f, a->h_client, a->h_object, &status);
    if (!o)
        return status;
    if (a->cmd == 0xA06C0103u)
        return ctl_set_timeslice_locked(o, a);
    if (a->cmd == 0x2080110Bu)
        return ctl_disable_channels_locked(f, o, a);
    if (a->cmd == RM_CTRL_NV0000_GPU_GET_PROBED_IDS && a->h_object == a->h_client)
        return ctl_probed_ids_locked(a);
    if (a->cmd == RM_CTRL_NV0000_GPU_GET_ID_INFO_V2 && a->h_object == a->h_client)
        return ctl_id_info_locked(a);
    if (a->cmd == RM_CTRL_NV0000_OS_UNIX_EXPORT_OBJECTS_TO_FD && a->h_object == a->h_client)
        return ctl_export_locked(a);
    if (a->cmd == RM_CTRL_NV0000_CLIENT_SHARE_OBJECT && a->h_object == a->h_client) {
        const uint8_t *p = (const uint8_t *)(uintptr_t)a->params;
        if (a->params_size != 16 || !p)
            return RM_NV_ERR_INVALID_PARAM_STRUCT;
        uint32_t object;
        memcpy(&object, p, 4);
        return share_locked(f, a->h_client, object, p + 4);
    }
    if (a->cmd == RM_CTRL_NV2080_FB_GET_INFO_V2) {
        if (a->params_size != sizeof(struct rm_fb_get_info_v2_params) || !a->params)
            return RM_NV_ERR_INVALID_PARAM_STRUCT;
        struct rm_fb_get_info_v2_params *p = (void *)(uintptr_t)a->params;
        if (p->count > RM_FB_INFO_MAX)
            return RM_NV_ERR_INVALID_ARGUMENT;
        fb_info_entries_locked(o->gpu, p->entries, p->count);
    }
    if (a->cmd == RM_CTRL_NV2080_FB_GET_INFO) { /* the entries behind a pointer */
        if (a->params_size != sizeof(struct rm_fb_get_info_params) || !a->params)
            return RM_NV_ERR_INVALID_PARAM_STRUCT;
        const struct rm_fb_get_info_params *p = (const void *)(uintptr_t)a->params;
        if (p->count > RM_FB_INFO_MAX || (p->count && !p->list))
            return RM_NV_ERR_INVALID_ARGUMENT;
        fb_info_entries_locked(o->gpu, (struct rm_fb_info_entry *)(uintptr_t)p->list, p->count);
    }
    return RM_NV_OK;
}

static _Atomic uint32_t control_delay_us;

void fakedrv_set_control_delay(uint32_t us)
{
    atomic_store(&control_delay_us, us);
}

/* A FIFO_DISABLE_CHANNELS takes as long as fakedrv_set_control_delay says, before
 * the fake's mutex is taken (the H200 takes ~0.66 ms to pause, 0.38 to resume). */
static void control_delay(unsigned nr, unsigned size, const uint8_t *arg)
{
    uint32_t us = atomic_load(&control_delay_us);
    if (!us || nr != RM_NR_CONTROL || size != sizeof(struct rm_control_args) ||
        ((const struct rm_control_args *)(const void *)arg)->cmd != 0x2080110Bu)
        return;
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The escapes served on /dev/nvidiactl only, each with the exact size of its
 * argument (RM_ALLOC, served on any node, checks its own two sizes). */
static const struct {
    unsigned nr;
    size_t size;
} ctl_escapes[] = {
    {RM_NR_FREE, sizeof(struct rm_free_args)},
    {RM_NR_CONTROL, sizeof(struct rm_control_args)},
    {RM_NR_MAP_MEMORY, sizeof(struct rm_map_memory_args)},
    {RM_NR_DUP_OBJECT, sizeof(struct rm_dup_object_args)},
    {RM_NR_SHARE, sizeof(struct rm_share_args)},
    {RM_NR_UNMAP_MEMORY, sizeof(struct rm_unmap_memory_args)},
    {RM_NR_CHECK_VERSION_STR, sizeof(struct rm_check_version_args)},
};

/* The size escape nr must have, 0 for one not in ctl_escapes. */
static size_t ctl_escape_size(unsigned nr)
{
    for (size_t i = 0; i < sizeof ctl_escapes / sizeof *ctl_escapes; i++)
        if (ctl_escapes[i].nr == nr)
            return ctl_escapes[i].size;
    return 0;
}

static uint32_t rm_free_locked(struct fk_file *f, const struct rm_free_args *a)
{
    uint32_t status;
    if (!named_object_locked(f, a->h_client, a->h_object, &status))
        return status;
    if (a->h_object == a->h_client)
        free_client_locked(a->h_client);
    else
        free_subtree_locked(a->h_client, a->h_object);
    return RM_NV_OK;
}

/* MAP_MEMORY: the file of the descriptor it names (a->fd) remembers the mapping for
 * the mmap to follow, one at a time. */
static uint32_t rm_map_memory_locked(struct fk_file *f, struct rm_map_memory_args *a)
{
    uint32_t status;
    if (!named_object_locked(f, a->h_client, a->h_memory, &status))
        return status;
    struct fk_file *mf = file_of_locked(a->fd);
    if (!mf)
        return RM_NV_ERR_INVALID_OBJECT_HANDLE;
    if (mf->map_pending || mf->mapped)
        return RM_NV_ERR_STATE_IN_USE;
    mf->map_pending = true;
    mf->map_len = a->length;
    mf->map_client = a->h_client;
    mf->map_memory = a->h_memory;
    mf->map_offset = a->offset;
    a->linear_address = 0xf000000000ull + a->offset;
    return RM_NV_OK;
}

/* The version handshake as the driver answers it: a strict one (cmd 0) or a relaxed
 * one ('1': the part before the first '.') that matches the fake's release gets
 * reply 1; a mismatch gets the fake's release written over the caller's and
 * -EINVAL. */
static int check_version(struct rm_check_version_args *a)
{
    const char *mine = fake_version();
    size_t cmp = sizeof a->version;
    if (a->cmd == '1') {
        const char *dot = strchr(mine, '.');
        cmp = dot ? (size_t)(dot - mine) : strlen(mine);
    }
    bool same = a->cmd == '1' ? !strncmp(a->version, mine, cmp) && a->version[cmp] == '.'
                              : !strncmp(a->version, mine, sizeof a->version);
    a->reply = same ? 1 : 0;
    if (same)
        return 0;
    memset(a->version, 0, sizeof a->version);
    snprintf(a->version, sizeof a->version, "%s", mine);
    return -EINVAL;
}

/* Serves one (unwrapped) escape on a fake file; returns the ioctl result. */
static int rm_escape(struct fk_file *f, unsigned nr, unsigned size, uint8_t *arg)
{
    control_delay(nr, size, arg);
    size_t want = ctl_escape_size(nr);
    if (want && (f->node != RM_NODE_CTL || size != want))
        return -EINVAL;
    int ret = 0;
    pthread_mutex_lock(&mu);
    switch (nr) {
    case RM_NR_ALLOC:
        if (size != 32 && size != 48) {
            ret = -EINVAL;
        } else if (size == 32) {
            struct rm_alloc_args *a = (void *)arg;
            a->status = rm_alloc_copied_locked(f, a->h_client, a->h_parent, &a->h_object,
                                               a->h_class, a->params, a->params_size);
        } else {
            struct rm_alloc64_args *a = (void *)arg;
            a->status = rm_alloc_copied_locked(f, a->h_client, a->h_parent, &a->h_object,
                                               a->h_class, a->params, a->params_size);
        }
        break;
    case RM_NR_FREE:
        ((struct rm_free_args *)arg)->status = rm_free_locked(f, (struct rm_free_args *)arg);
        break;
    case RM_NR_CONTROL:
        ((struct rm_control_args *)arg)->status =
            rm_control_locked(f, (struct rm_control_args *)arg);
        break;
    case RM_NR_MAP_MEMORY:
        ((struct rm_map_memory_args *)arg)->status =
            rm_map_memory_locked(f, (struct rm_map_memory_args *)arg);
        break;
    case RM_NR_DUP_OBJECT:
        ((struct rm_dup_object_args *)arg)->status =
            dup_locked(f, (struct rm_dup_object_args *)arg);
        break;
    case RM_NR_SHARE: {
        struct rm_share_args *a = (void *)arg;
        a->status = share_locked(f, a->h_client, a->h_object, arg + 8);
        break;
    }
    case RM_NR_UNMAP_MEMORY:
        ((struct rm_unmap_memory_args *)arg)->status = RM_NV_OK;
        break;
    case RM_NR_CHECK_VERSION_STR:
        ret = check_version((struct rm_check_version_args *)arg);
        break;
    default:
        break; /* other escapes: accepted, nothing to emulate */
    }
    pthread_mutex_unlock(&mu);
    return ret;
}

/* As the kernel: the argument is copied in, served, and copied back out. */
static int rm_escape_copied(struct fk_file *f, unsigned nr, unsigned size, uint8_t *user)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, user, size);
    int ret = rm_escape(f, nr, size, copy);
    memcpy(user, copy, size);
    free(copy);
    return ret;
}

/* FAKEDRV_ALLOC_DELAY_MS: a device-memory RM_ALLOC (direct or through XFER)
 * stays that long in the driver, with no lock held: the window in which a test
 * restarts kairosd with the allocation in flight. */
static void delay_memory_alloc(unsigned long request, const uint8_t *arg)
{
    static long delay_ms = -1;
    if (delay_ms < 0) {
        const char *v = getenv("FAKEDRV_ALLOC_DELAY_MS");
        delay_ms = v ? atol(v) : 0;
    }
    if (delay_ms <= 0)
        return;
    const uint8_t *inner = arg;
    unsigned nr = RM_IOC_NR(request);
    if (nr == RM_NR_XFER && RM_IOC_SIZE(request) == sizeof(struct rm_xfer_args)) {
        struct rm_xfer_args x;
        memcpy(&x, arg, sizeof x);
        nr = x.cmd;
        inner = (const uint8_t *)(uintptr_t)x.ptr;
    }
    uint32_t cls;
    if (nr != RM_NR_ALLOC || !inner)
        return;
    memcpy(&cls, inner + 12, sizeof cls);
    if (cls == 0x40)
        usleep((useconds_t)delay_ms * 1000);
}

void fakedrv_set_reply_hook(void (*hook)(void *ctx), void *ctx)
{
    atomic_store(&reply_hook_ctx, ctx);
    atomic_store(&reply_hook, hook);
}

/* ---- the UVM model ---------------------------------------------------------------- */

#define FK_UVM_CMD_FREE 34ul                 /* {u64 base, length; u32 status @16} (24) */
#define FK_UVM_CMD_SEM_POOL 68ul             /* base, length, ..., status @9240 (9248) */
#define FK_UVM_CMD_VALIDATE 72ul             /* {u64 base, length; u32 status @16} (24) */
#define FK_UVM_CMD_EXTERNAL 73ul             /* {u64 base, length; u32 status @16} (24) */
#define FK_NV_ERR_INVALID_ADDRESS 0x1eu
#define FK_NV_ERR_INVALID_STATE 0x40u
#define FK_NV_ERR_UVM_ADDRESS_IN_USE 0x65u

static struct fk_uvm_range *uvm_find_locked(uint64_t addr, uint64_t len, bool exact)
{
    for (size_t i = 0; i < n_uvm_ranges; i++) {
        struct fk_uvm_range *r = &uvm_ranges[i];
        bool hit = exact ? r->addr == addr && r->len == len
                         : r->addr < addr + len && addr < r->addr + r->len;
        if (hit)
            return r;
    }
    return NULL;
}

static bool uvm_add_locked(uint64_t addr, uint64_t len, enum fk_uvm_kind kind)
{
    if (n_uvm_ranges == FK_UVM_MAX || len == 0 || uvm_find_locked(addr, len, false))
        return false;
    uvm_ranges[n_uvm_ranges++] = (struct fk_uvm_range){addr, len, kind};
    return true;
}

/* The managed parts of [addr, addr + len) go, as UVM destroys them when their
 * mapping goes (munmap, or a MAP_FIXED mapping over them); a range cut in the
 * middle leaves its two ends. */
static void uvm_unmap_locked(uint64_t addr, uint64_t len)
{
    uint64_t end = addr + len;
    for (size_t i = 0; i < n_uvm_ranges;) {
        struct fk_uvm_range r = uvm_ranges[i];
        if (r.kind != FK_UVM_MANAGED || !(r.addr < end && addr < r.addr + r.len)) {
            i++;
            continue;
        }
        uvm_ranges[i] = uvm_ranges[--n_uvm_ranges];
        if (addr > r.addr)
            uvm_ranges[n_uvm_ranges++] = (struct fk_uvm_range){r.addr, addr - r.addr, r.kind};
        if (end < r.addr + r.len && n_uvm_ranges < FK_UVM_MAX)
            uvm_ranges[n_uvm_ranges++] = (struct fk_uvm_range){end, r.addr + r.len - end, r.kind};
        i = 0;
    }
}

static uint32_t uvm_range_call_locked(unsigned long request, uint64_t base, uint64_t length)
{
    struct fk_uvm_range *r;
    switch (request) {
    case FK_UVM_CMD_SEM_POOL:
        return uvm_add_locked(base, length, FK_UVM_POOL) ? RM_NV_OK : FK_NV_ERR_UVM_ADDRESS_IN_USE;
    case FK_UVM_CMD_EXTERNAL:
        return uvm_add_locked(base, length, FK_UVM_EXTERNAL) ? RM_NV_OK
                                                             : FK_NV_ERR_UVM_ADDRESS_IN_USE;
    case FK_UVM_CMD_VALIDATE:
        return uvm_find_locked(base, length, true) ? RM_NV_OK : FK_NV_ERR_INVALID_ADDRESS;
    case FK_UVM_CMD_FREE: /* external ranges and semaphore pools; managed ones go by munmap */
        r = uvm_find_locked(base, length, true);
        if (!r || r->kind == FK_UVM_MANAGED)
            return FK_NV_ERR_INVALID_ADDRESS;
        *r = uvm_ranges[--n_uvm_ranges];
        return RM_NV_OK;
    default:
        return RM_NV_OK;
    }
}

static int uvm_ioctl(struct fk_file *f, unsigned long request, uint8_t *arg)
{
    if (request == 0x30000001ul) { /* UVM_INITIALIZE: {u64 flags; u32 status} */
        uint32_t ok = 0;
        memcpy(arg + 8, &ok, sizeof ok);
        pthread_mutex_lock(&mu);
        f->uvm_ready = true;
        pthread_mutex_unlock(&mu);
        return 0;
    }
    size_t len = request == FK_UVM_CMD_SEM_POOL ? 9248u : 24u;
    size_t off_status = request == FK_UVM_CMD_SEM_POOL ? 9240u : 16u;
    if (request != FK_UVM_CMD_SEM_POOL && request != FK_UVM_CMD_EXTERNAL &&
        request != FK_UVM_CMD_VALIDATE && request != FK_UVM_CMD_FREE)
        return 0;
    uint8_t *copy = malloc(len); /* read once, as the kernel copies it in */
    if (!copy)
        return -ENOMEM;
    memcpy(copy, arg, len);
    uint64_t base, length;
    memcpy(&base, copy, sizeof base);
    memcpy(&length, copy + 8, sizeof length);
    pthread_mutex_lock(&mu);
    uint32_t status = f->uvm_ready ? uvm_range_call_locked(request, base, length)
                                   : FK_NV_ERR_INVALID_STATE;
    pthread_mutex_unlock(&mu);
    memcpy(copy + off_status, &status, sizeof status);
    memcpy(arg, copy, len); /* written once, as the kernel copies it out */
    free(copy);
    return 0;
}

/* An mmap of the UVM file: the offset must be the address (UVM's rule); exactly a
 * semaphore pool maps the pool, anything else overlapping a range is refused, and
 * the rest becomes a managed range (device memory UVM may take as the GPU touches
 * it: fakedrv_managed_bytes). */
static void *uvm_mmap(struct fk_file *f, void *addr, size_t len, int prot, int flags, off_t off)
{
    uint64_t a = (uint64_t)(uintptr_t)addr;
    if (!f->uvm_ready || !addr || (uint64_t)off != a || len == 0 || (a & 4095u)) {
        errno = EINVAL;
        return MAP_FAILED;
    }
    uint64_t l = (len + 4095u) & ~4095ull;
    pthread_mutex_lock(&mu);
    uvm_unmap_locked(a, l); /* MAP_FIXED: the kernel unmaps what was there first */
    struct fk_uvm_range *r = uvm_find_locked(a, l, false);
    bool pool = r && r->kind == FK_UVM_POOL && r->addr == a && r->len == l;
    bool ok = pool || !r;
    pthread_mutex_unlock(&mu);
    if (!ok) {
        errno = EBUSY;
        return MAP_FAILED;
    }
    void *p = (void *)syscall(SYS_mmap, addr, len, prot,
                              (flags & ~(MAP_PRIVATE | MAP_SHARED)) | MAP_SHARED | MAP_ANONYMOUS |
                                  MAP_FIXED, -1, 0);
    if (p == MAP_FAILED || pool)
        return p;
    pthread_mutex_lock(&mu);
    if (!uvm_add_locked(a, l, FK_UVM_MANAGED)) {
        pthread_mutex_unlock(&mu);
        syscall(SYS_munmap, p, len);
        errno = ENOMEM;
        return MAP_FAILED;
    }
    n_managed_made++;
    pthread_mutex_unlock(&mu);
    return p;
}

uint64_t fakedrv_managed_made(void)
{
    pthread_mutex_lock(&mu);
    uint64_t n = n_managed_made;
    pthread_mutex_unlock(&mu);
    return n;
}

uint64_t fakedrv_managed_bytes(void)
{
    uint64_t sum = 0;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_uvm_ranges; i++)
        if (uvm_ranges[i].kind == FK_UVM_MANAGED)
            sum += (uvm_ranges[i].len + FAKEDRV_PAGE - 1) / FAKEDRV_PAGE * FAKEDRV_PAGE;
    pthread_mutex_unlock(&mu);
    return sum;
}

uint32_t fakedrv_managed_ranges(void)
{
    uint32_t n = 0;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_uvm_ranges; i++)
        n += uvm_ranges[i].kind == FK_UVM_MANAGED;
    pthread_mutex_unlock(&mu);
    return n;
}

int fakedrv_ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *argp = va_arg(ap, void *);
    va_end(ap);
    pthread_mutex_lock(&mu);
    reap_locked();
    struct fk_file *f = file_of_locked(fd);
    pthread_mutex_unlock(&mu);
    if (!f)
        return (int)syscall(SYS_ioctl, fd, request, argp);
    atomic_fetch_add(&n_ioctls, 1);
    uint8_t *arg = argp;
    if (!arg) {
        errno = EFAULT;
        return -1;
    }
    delay_memory_alloc(request, arg);
    int ret;
    if (f->node == RM_NODE_UVM) {
        ret = uvm_ioctl(f, request, arg);
    } else if (RM_IOC_NR(request) == RM_NR_XFER) {
        struct rm_xfer_args x;
        if (RM_IOC_SIZE(request) != sizeof x) {
            ret = -EINVAL;
        } else {
            memcpy(&x, arg, sizeof x);
            if (x.size > RM_XFER_MAX || x.cmd == RM_NR_XFER)
                ret = -EINVAL;
            else if (!x.ptr)
                ret = -EFAULT;
            else
                ret = rm_escape_copied(f, x.cmd, x.size, (uint8_t *)(uintptr_t)x.ptr);
        }
    } else {
        ret = rm_escape_copied(f, RM_IOC_NR(request), RM_IOC_SIZE(request), arg);
    }
    void (*hook)(void *) = atomic_load(&reply_hook);
    if (hook) /* what runs at the return to user space: a signal, another thread */
        hook(atomic_load(&reply_hook_ctx));
    if (ret < 0) {
        errno = -ret;
        return -1;
    }
    return 0;
}

/* ---- the USERD model ------------------------------------------------------------------ */

/* The host's fetch: every enabled channel whose USERD is mapped has everything
 * queued fetched (GPGet = GPPut); a disabled channel fetches nothing, so work
 * queued while paused stays pending, as on the H200. */
static void fetch_locked(void)
{
    for (size_t i = 0; i < n_objs; i++) {
        const struct fk_obj *o = &objs[i];
        if (o->disabled || !o->userd_mem)
            continue;
        for (size_t j = 0; j < n_maps; j++) {
            const struct fk_map *m = &maps[j];
            if (m->client != o->client || m->memory != o->userd_mem || o->userd_off < m->offset ||
                o->userd_off - m->offset + 0x90 > m->len)
                continue;
            volatile uint32_t *u = (volatile uint32_t *)(uintptr_t)(m->addr + o->userd_off -
                                                                   m->offset);
            uint32_t put = u[0x8C / 4];
            if (u[0x88 / 4] != put) {
                u[0x88 / 4] = put;
                atomic_fetch_add(&n_fetched, 1);
            }
            break;
        }
    }
}

static void *engine_main(void *unused)
{
    (void)unused;
    for (;;) {
        struct timespec ts = {0, FAKEDRV_FETCH_NS};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&mu);
        fetch_locked();
        pthread_mutex_unlock(&mu);
        atomic_fetch_add(&n_engine_passes, 1);
    }
    return NULL;
}

/* The engine starts with the first CPU mapping of a memory object. */
static void start_engine_locked(void)
{
    if (engine_started)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    engine_started = pthread_create(&t, NULL, engine_main, NULL) == 0;
    if (engine_started)
        pthread_detach(t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

uint64_t fakedrv_fetches(void)
{
    return atomic_load(&n_fetched);
}

uint64_t fakedrv_engine_passes(void)
{
    return atomic_load(&n_engine_passes);
}

void *fakedrv_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    pthread_mutex_lock(&mu);
    struct fk_file *f = (flags & MAP_ANONYMOUS) ? NULL : file_of_locked(fd);
    bool ok = f && f->node != RM_NODE_UVM && f->map_pending && f->map_len == len && off == 0;
    if (ok) {
        f->map_pending = false;
        f->mapped = true;
    }
    pthread_mutex_unlock(&mu);
    if (f && f->node == RM_NODE_UVM)
        return uvm_mmap(f, addr, len, prot, flags, off);
    if (!f) {
        void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
        if (p != MAP_FAILED && (flags & MAP_FIXED)) {
            pthread_mutex_lock(&mu);
            uvm_unmap_locked((uint64_t)(uintptr_t)p, len); /* replaced managed memory */
            pthread_mutex_unlock(&mu);
        }
        return p;
    }
    if (!ok) {
        errno = EINVAL;
        return MAP_FAILED;
    }
    void *p = (void *)syscall(SYS_mmap, addr, len, prot,
                              (flags & ~(MAP_PRIVATE | MAP_SHARED)) | MAP_SHARED | MAP_ANONYMOUS,
                              -1, 0);
    if (p != MAP_FAILED) {
        pthread_mutex_lock(&mu);
        if (n_maps < FK_MAPS_MAX)
            maps[n_maps++] = (struct fk_map){(uint64_t)(uintptr_t)p, len, f->map_client,
                                             f->map_memory, f->map_offset};
        start_engine_locked();
        pthread_mutex_unlock(&mu);
    }
    return p;
}

void *fakedrv_mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    return fakedrv_mmap(addr, len, prot, flags, fd, (off_t)off);
}

int fakedrv_munmap(void *addr, size_t len)
{
    uint64_t a = (uint64_t)(uintptr_t)addr;
    pthread_mutex_lock(&mu); /* the engine never writes a page about to go */
    for (size_t i = 0; i < n_maps;) {
        if (maps[i].addr < a + len && a < maps[i].addr + maps[i].len)
            maps[i] = maps[--n_maps];
        else
            i++;
    }
    pthread_mutex_unlock(&mu);
    int ret = (int)syscall(SYS_munmap, addr, len);
    if (ret == 0) {
        pthread_mutex_lock(&mu);
        uvm_unmap_locked(a, (len + 4095u) & ~(uint64_t)4095u);
        pthread_mutex_unlock(&mu);
    }
    return ret;
}

/* ---- inspection ---------------------------------------------------------------------- */

uint64_t fakedrv_fb_total(int gpu)
{
    pthread_mutex_lock(&mu);
    configure_locked();
    uint64_t v = gpu >= 0 && gpu < FAKEDRV_MAX_GPUS ? fb_total[gpu] : 0;
    pthread_mutex_unlock(&mu);
    return v;
}

uint64_t fakedrv_fb_free(int gpu)
{
    pthread_mutex_lock(&mu);
    configure_locked();
    reap_locked();
    uint64_t v = gpu >= 0 && gpu < FAKEDRV_MAX_GPUS ? fb_total[gpu] - fb_used[gpu] : 0;
    pthread_mutex_unlock(&mu);
    return v;
}

uint32_t fakedrv_live_objects(void)
{
    pthread_mutex_lock(&mu);
    reap_locked();
    uint32_t n = (uint32_t)n_objs;
    pthread_mutex_unlock(&mu);
    return n;
}

uint32_t fakedrv_live_clients(void)
{
    pthread_mutex_lock(&mu);
    reap_locked();
    uint32_t n = 0;
    for (size_t i = 0; i < n_objs; i++)
        n += objs[i].handle == objs[i].client;
    pthread_mutex_unlock(&mu);
    return n;
}

uint64_t fakedrv_ioctls(void)
{
    return atomic_load(&n_ioctls);
}

size_t fakedrv_controls(struct fakedrv_ctl_rec *out, size_t max)
{
    pthread_mutex_lock(&mu);
    size_t n = n_ctl_log;
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = ctl_log[i];
    pthread_mutex_unlock(&mu);
    return n;
}

uint64_t fakedrv_timeslice(uint32_t client, uint32_t tsg)
{
    pthread_mutex_lock(&mu);
    struct fk_obj *o = find_locked(client, tsg);
    uint64_t v = o ? o->timeslice_us : 0;
    pthread_mutex_unlock(&mu);
    return v;
}

int fakedrv_channel_disabled(uint32_t client, uint32_t channel)
{
    pthread_mutex_lock(&mu);
    struct fk_obj *o = find_locked(client, channel);
    int v = !o || o->cls != 0xC86F ? -1 : o->disabled;
    pthread_mutex_unlock(&mu);
    return v;
}
