/* fdtable.h - which descriptors are NVIDIA nodes, and which open file each is.
 *
 * Maps a descriptor to {node, device minor, file id}. A file id names one open
 * file description: dup()'d descriptors share it, with a reference count, so the
 * core learns that a /dev/nvidiactl file is gone (objtree_close_file) only when
 * its last descriptor closes. Descriptors are classified at open by path, or
 * lazily (fstat: char major 195; readlink for nvidia-uvm) the first time one is
 * seen at ioctl or mmap; "not NVIDIA" is cached too, and forgotten on close.
 *
 * The table is two-level (chunks of 1024 entries allocated on demand), so large
 * descriptor numbers work; descriptors at or above FDT_MAX_FD are never tracked
 * and pass through as "not NVIDIA".
 *
 * Thread rules: fdtable_get, fdtable_set_plain and the classifiers are lock-free
 * and may be called from any thread; the *_locked functions need the state lock
 * (state.h).
 */
#ifndef KAIROS_SHIM_FDTABLE_H
#define KAIROS_SHIM_FDTABLE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "core/rm_abi.h"

#define FDT_MAX_FD (4096 * 1024)

enum fdt_class {
    FDT_UNKNOWN = 0, /* never seen, or forgotten: classify lazily */
    FDT_OTHER = 1,   /* known not to be an NVIDIA node */
    FDT_NVIDIA = 2,
};

struct fdt_info {
    enum rm_node node;
    int minor;        /* device minor: N for /dev/nvidiaN, 255 for ctl, 0 for uvm */
    uint64_t file_id; /* open file description */
};

/* Lock-free lookup. info is filled for FDT_NVIDIA. */
enum fdt_class fdtable_get(int fd, struct fdt_info *info);

/* Lock-free: records FDT_UNKNOWN or FDT_OTHER for fd, but never overwrites an
 * FDT_NVIDIA entry (that needs the lock, to drop its file reference). */
void fdtable_set_plain(int fd, enum fdt_class cls);

/* Classifies a path given to open/openat: /dev/nvidiactl, /dev/nvidiaN,
 * /dev/nvidia-uvm, /dev/nvidia-uvm-tools. dirfd matters only for relative paths,
 * which are not classified (RM_NODE_NONE; the fd is classified lazily later). */
enum rm_node fdtable_classify_path(int dirfd, const char *path, int *minor);

/* Classifies an fstat result: char major 195 (minor 255 ctl, 254 modeset = none,
 * else device). RM_NODE_NONE for anything else. */
enum rm_node fdtable_classify_stat(const struct stat *st, int *minor);

/* Lock-free: the lowest descriptor of an open file (for controls issued on the
 * file a client lives on), or -1 when none is open. Scans the table: for the
 * time control's occasional use, not for the fast path. */
int fdtable_fd_of_file(uint64_t file_id);

/* Lock-free: the lowest descriptor in [from, last] the table knows anything of
 * (NVIDIA or "not NVIDIA"), or -1. Skips chunks never allocated: for closes of
 * descriptor ranges (close_range, closefrom). */
int fdtable_next_known(int from, int last);

/* Lock-free: whether this process ever had an NVIDIA file tracked (a fork of a
 * process that never had one needs no bookkeeping). */
bool fdtable_had_files(void);

/* The id the next file opened will get: every file opened so far has a lower one.
 * Read without the lock: for a forked child's atfork handler (one thread, and the
 * state lock was held across the fork, so the value is whole). */
uint64_t fdtable_next_file_id(void);

/* Lock-free and async-signal-safe: forgets fd when it is an NVIDIA descriptor and
 * says which it was (*was), leaving its file's reference to fdtable_unref_locked
 * (a close in a signal handler: dispatch.c records it later). */
bool fdtable_detach(int fd, struct fdt_info *was);

/* ---- under the state lock ------------------------------------------------------------ */

/* A descriptor of the file, detached, is gone: *last when it was the file's last. */
void fdtable_unref_locked(uint64_t file_id, bool *last);

/* fd was just opened on an NVIDIA node: gives it a new file (refs 1), unless a
 * racing lazy classification already did, and returns its id (0: out of memory,
 * the fd stays untracked). */
uint64_t fdtable_open_locked(int fd, enum rm_node node, int minor);

/* Forgets fd. Returns true if it was an NVIDIA descriptor; then *was describes it
 * and *last says whether it was the last descriptor of its file. */
bool fdtable_drop_locked(int fd, struct fdt_info *was, bool *last);

/* newfd now shares the file of info (a dup); newfd must have been dropped. */
bool fdtable_share_locked(int newfd, const struct fdt_info *info);

/* This process just forked: every NVIDIA file open now is shared with a child, so
 * its last descriptor here is not necessarily its last (inherit.h). */
void fdtable_mark_shared_locked(void);
/* The file was sent to another process (SCM_RIGHTS): shared the same way. */
void fdtable_mark_file_shared_locked(uint64_t file_id);
/* Whether the file was open at a fork of this process, or sent away. */
bool fdtable_shared_locked(uint64_t file_id);

/* How many tracked descriptors the file has (0: not a live file). */
uint32_t fdtable_refs_locked(uint64_t file_id);

/* Live NVIDIA files and descriptors, for tests and summaries. */
void fdtable_counts_locked(uint32_t *files, uint32_t *descriptors);

/* Forgets everything (tests; and never while other threads use the shim). */
void fdtable_reset_locked(void);

#endif /* KAIROS_SHIM_FDTABLE_H */
