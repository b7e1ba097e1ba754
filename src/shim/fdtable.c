/* fdtable.c - descriptor classification and open-file reference counts.
 *
 * Owns the descriptor table (lock-free reads on the ioctl fast path) and the
 * reference counts of NVIDIA open files (under the state lock). An entry is one
 * 64-bit word: 0 unknown, 1 other, or for NVIDIA (file_id << 12 | minor << 4 |
 * node << 2 | 2). Readers do one atomic load; chunks are published with a
 * compare-and-swap and freed only by fdtable_reset_locked.
 */
#include "shim/fdtable.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "core/grow.h"

#define FDT_CHUNK_BITS 10
#define FDT_CHUNK (1u << FDT_CHUNK_BITS)
#define FDT_TOP (FDT_MAX_FD / FDT_CHUNK)

typedef _Atomic uint64_t fdt_entry;

static _Atomic(fdt_entry *) fdt_top[FDT_TOP];

struct fdt_file {
    uint64_t id;
    uint32_t refs;
    bool shared; /* open when this process forked: a child may hold it too */
};
static struct fdt_file *files;   /* live NVIDIA files, unordered */
static size_t files_len, files_cap;
static uint64_t next_file_id = 1;
static atomic_bool had_files; /* an NVIDIA file was ever tracked (lock-free reads) */
static uint32_t live_descriptors;

static uint64_t entry_pack(const struct fdt_info *info)
{
    return (info->file_id << 12) | ((uint64_t)(info->minor & 0xff) << 4) |
           ((uint64_t)info->node << 2) | FDT_NVIDIA;
}

static enum fdt_class entry_unpack(uint64_t e, struct fdt_info *info)
{
    if ((e & 3u) != FDT_NVIDIA)
        return (enum fdt_class)(e & 3u);
    if (info) {
        info->node = (enum rm_node)((e >> 2) & 3u);
        info->minor = (int)((e >> 4) & 0xffu);
        info->file_id = e >> 12;
    }
    return FDT_NVIDIA;
}

static fdt_entry *slot(int fd, bool create)
{
    if (fd < 0 || fd >= FDT_MAX_FD)
        return NULL;
    unsigned hi = (unsigned)fd >> FDT_CHUNK_BITS, lo = (unsigned)fd & (FDT_CHUNK - 1);
    fdt_entry *chunk = atomic_load_explicit(&fdt_top[hi], memory_order_acquire);
    if (!chunk) {
        if (!create)
            return NULL;
        fdt_entry *fresh = calloc(FDT_CHUNK, sizeof *fresh);
        if (!fresh)
            return NULL;
        fdt_entry *expected = NULL;
        if (atomic_compare_exchange_strong_explicit(&fdt_top[hi], &expected, fresh,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire)) {
            chunk = fresh;
        } else {
            free(fresh);
            chunk = expected;
        }
    }
    return &chunk[lo];
}

enum fdt_class fdtable_get(int fd, struct fdt_info *info)
{
    fdt_entry *e = slot(fd, false);
    if (!e)
        return fd >= FDT_MAX_FD ? FDT_OTHER : FDT_UNKNOWN;
    return entry_unpack(atomic_load_explicit(e, memory_order_acquire), info);
}

void fdtable_set_plain(int fd, enum fdt_class cls)
{
    fdt_entry *e = slot(fd, cls != FDT_UNKNOWN);
    if (!e)
        return;
    uint64_t cur = atomic_load_explicit(e, memory_order_relaxed);
    while ((cur & 3u) != FDT_NVIDIA && cur != (uint64_t)cls) {
        if (atomic_compare_exchange_weak_explicit(e, &cur, (uint64_t)cls, memory_order_release,
                                                  memory_order_relaxed))
            break;
    }
}

enum rm_node fdtable_classify_path(int dirfd, const char *path, int *minor)
{
    static const char prefix[] = "/dev/nvidia";
    (void)dirfd;
    *minor = 0;
    if (!path || strncmp(path, prefix, sizeof prefix - 1) != 0)
        return RM_NODE_NONE;
    const char *rest = path + sizeof prefix - 1;
    if (strcmp(rest, "ctl") == 0) {
        *minor = (int)RM_NV_CTL_MINOR;
        return RM_NODE_CTL;
    }
    if (strcmp(rest, "-uvm") == 0 || strcmp(rest, "-uvm-tools") == 0)
        return RM_NODE_UVM;
    if (rest[0] < '0' || rest[0] > '9')
        return RM_NODE_NONE;
    int n = 0;
    for (const char *p = rest; *p; p++) {
        if (*p < '0' || *p > '9' || n > 253)
            return RM_NODE_NONE;
        n = n * 10 + (*p - '0');
    }
    if (n > 253 || (rest[0] == '0' && rest[1]))
        return RM_NODE_NONE;
    *minor = n;
    return RM_NODE_DEV;
}

enum rm_node fdtable_classify_stat(const struct stat *st, int *minor)
{
    *minor = 0;
    if (!S_ISCHR(st->st_mode) || major(st->st_rdev) != RM_NV_MAJOR)
        return RM_NODE_NONE;
    unsigned m = minor(st->st_rdev);
    if (m == RM_NV_CTL_MINOR) {
        *minor = (int)m;
        return RM_NODE_CTL;
    }
    if (m >= 254) /* 254 is nvidia-modeset: its own ioctls, not RM */
        return RM_NODE_NONE;
    *minor = (int)m;
    return RM_NODE_DEV;
}

/* ---- reference counts (state lock held) -------------------------------------------- */

static struct fdt_file *file_find(uint64_t id)
{
    for (size_t i = 0; i < files_len; i++)
        if (files[i].id == id)
            return &files[i];
    return NULL;
}

static struct fdt_file *file_new(void)
{
    struct fdt_file *grown = grow_for_one(files, &files_cap, files_len, sizeof *grown, 64);
    if (!grown)
        return NULL;
    files = grown;
    struct fdt_file *f = &files[files_len++];
    f->id = next_file_id++;
    f->refs = 0;
    f->shared = false;
    atomic_store_explicit(&had_files, true, memory_order_relaxed);
    return f;
}

uint64_t fdtable_open_locked(int fd, enum rm_node node, int minor)
{
    fdt_entry *e = slot(fd, true);
    if (!e)
        return 0;
    struct fdt_info cur = {RM_NODE_NONE, 0, 0};
    if (entry_unpack(atomic_load_explicit(e, memory_order_relaxed), &cur) == FDT_NVIDIA) {
        if (cur.node == node)
            return cur.file_id; /* a racing lazy classification got here first */
        struct fdt_info was;
        bool last;
        fdtable_drop_locked(fd, &was, &last);
    }
    struct fdt_file *f = file_new();
    if (!f)
        return 0;
    f->refs = 1;
    live_descriptors++;
    struct fdt_info info = {.node = node, .minor = minor, .file_id = f->id};
    atomic_store_explicit(e, entry_pack(&info), memory_order_release);
    return f->id;
}

bool fdtable_detach(int fd, struct fdt_info *was)
{
    fdt_entry *e = slot(fd, false);
    if (!e)
        return false;
    uint64_t cur = atomic_load_explicit(e, memory_order_acquire);
    while ((cur & 3u) == FDT_NVIDIA) {
        if (atomic_compare_exchange_weak_explicit(e, &cur, FDT_UNKNOWN, memory_order_acq_rel,
                                                  memory_order_acquire))
            return entry_unpack(cur, was) == FDT_NVIDIA;
    }
    return false;
}

void fdtable_unref_locked(uint64_t file_id, bool *last)
{
    *last = false;
    live_descriptors--;
    struct fdt_file *f = file_find(file_id);
    if (f && --f->refs == 0) {
        *f = files[--files_len];
        *last = true;
    } else if (!f) {
        *last = true; /* unknown file: treat as gone */
    }
}

bool fdtable_drop_locked(int fd, struct fdt_info *was, bool *last)
{
    *last = false;
    fdt_entry *e = slot(fd, false);
    if (!e)
        return false;
    uint64_t old = atomic_exchange_explicit(e, FDT_UNKNOWN, memory_order_acq_rel);
    if (entry_unpack(old, was) != FDT_NVIDIA)
        return false;
    fdtable_unref_locked(was->file_id, last);
    return true;
}

bool fdtable_share_locked(int newfd, const struct fdt_info *info)
{
    fdt_entry *e = slot(newfd, true);
    struct fdt_file *f = file_find(info->file_id);
    if (!e || !f)
        return false;
    f->refs++;
    live_descriptors++;
    atomic_store_explicit(e, entry_pack(info), memory_order_release);
    return true;
}

void fdtable_mark_shared_locked(void)
{
    for (size_t i = 0; i < files_len; i++)
        files[i].shared = true;
}

void fdtable_mark_file_shared_locked(uint64_t file_id)
{
    struct fdt_file *f = file_find(file_id);
    if (f)
        f->shared = true;
}

bool fdtable_shared_locked(uint64_t file_id)
{
    struct fdt_file *f = file_find(file_id);
    return f && f->shared;
}

void fdtable_counts_locked(uint32_t *nfiles, uint32_t *descriptors)
{
    *nfiles = (uint32_t)files_len;
    *descriptors = live_descriptors;
}

void fdtable_reset_locked(void)
{
    for (unsigned i = 0; i < FDT_TOP; i++) {
        fdt_entry *chunk = atomic_exchange(&fdt_top[i], NULL);
        free(chunk);
    }
    free(files);
    files = NULL;
    files_len = files_cap = 0;
    live_descriptors = 0;
}

bool fdtable_had_files(void)
{
    return atomic_load_explicit(&had_files, memory_order_relaxed);
}

uint64_t fdtable_next_file_id(void)
{
    return next_file_id;
}

int fdtable_fd_of_file(uint64_t file_id)
{
    if (!file_id)
        return -1;
    for (unsigned hi = 0; hi < FDT_TOP; hi++) {
        fdt_entry *chunk = atomic_load_explicit(&fdt_top[hi], memory_order_acquire);
        if (!chunk)
            continue;
        for (unsigned lo = 0; lo < FDT_CHUNK; lo++) {
            struct fdt_info info = {.file_id = 0};
            if (entry_unpack(atomic_load(&chunk[lo]), &info) == FDT_NVIDIA &&
                info.file_id == file_id)
                return (int)(hi << FDT_CHUNK_BITS | lo);
        }
    }
    return -1;
}

int fdtable_next_known(int from, int last)
{
    if (from < 0)
        from = 0;
    if (last >= FDT_MAX_FD)
        last = FDT_MAX_FD - 1;
    for (int fd = from; fd <= last;) {
        unsigned hi = (unsigned)fd >> FDT_CHUNK_BITS, lo = (unsigned)fd & (FDT_CHUNK - 1);
        fdt_entry *chunk = atomic_load_explicit(&fdt_top[hi], memory_order_acquire);
        if (!chunk) {
            fd = (int)((hi + 1) << FDT_CHUNK_BITS);
            continue;
        }
        if (atomic_load_explicit(&chunk[lo], memory_order_acquire) != FDT_UNKNOWN)
            return fd;
        fd++;
    }
    return -1;
}

uint32_t fdtable_refs_locked(uint64_t file_id)
{
    struct fdt_file *f = file_find(file_id);
    return f ? f->refs : 0;
}
