/* dispatch.c - the logic of every interposed call (see dispatch.h).
 *
 * Owns the order of things around a real call: classify the descriptor without
 * a lock; for an NVIDIA descriptor, capture the argument before the call only
 * when tracing, make the real call with no lock held, then read the argument
 * (unwrapping IOCTL_XFER_CMD), decode it, and apply it to the object tree under
 * the state lock; emit the trace line last. When a quota is in force, every
 * call the tree records is made on a copy the shim owns (shadow.h), so what is
 * charged is what the driver read and answered, whatever the application's
 * other threads or signal handlers write meanwhile. Other bytes are read
 * straight from the application's memory only after the driver accepted them
 * (ret == 0, and for parameters status NV_OK, so the driver itself copied them);
 * anything else is read only in trace mode, through app_memory_read, which
 * cannot fault.
 */
#include "shim/dispatch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/objtree.h"
#include "core/rm_decode.h"
#include "core/rm_names.h"
#include "shim/agent.h"
#include "shim/app_memory.h"
#include "shim/borrowed_vm.h"
#include "shim/driver_check.h"
#include "shim/fdtable.h"
#include "shim/gpumap.h"
#include "shim/inflight.h"
#include "shim/inherit.h"
#include "shim/ipc.h"
#include "shim/memguard.h"
#include "shim/reentry.h"
#include "shim/shadow.h"
#include "shim/state.h"
#include "shim/timectl.h"
#include "shim/tracer.h"
#include "shim/uvm_managed.h"

#define USER_ADDR_MAX (1ull << 47)

/* ---- descriptor classification ---------------------------------------------------- */

static enum fdt_class classify_slow(const struct shim_real *r, int fd, struct fdt_info *info)
{
    int saved = errno;
    struct stat st;
    int minor = 0;
    if (fd < 0 || r->fstat(fd, &st) != 0) {
        errno = saved;
        return FDT_OTHER; /* not open: let the real call report it; cache nothing */
    }
    enum rm_node node = fdtable_classify_stat(&st, &minor);
    if (node == RM_NODE_NONE && S_ISCHR(st.st_mode)) {
        /* nvidia-uvm has a dynamic major: recognise it by its path. */
        char proc[40], path[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        ssize_t n = r->readlink(proc, path, sizeof path - 1);
        if (n > 0) {
            path[n] = '\0';
            node = fdtable_classify_path(AT_FDCWD, path, &minor);
            if (node != RM_NODE_UVM)
                node = RM_NODE_NONE;
        }
    }
    enum fdt_class cls = FDT_OTHER;
    if (node == RM_NODE_NONE) {
        fdtable_set_plain(fd, FDT_OTHER);
    } else {
        state_lock();
        uint64_t id = fdtable_open_locked(fd, node, minor);
        state_unlock();
        if (id) {
            cls = fdtable_get(fd, info);
        }
    }
    errno = saved;
    return cls;
}

static enum fdt_class classify(const struct shim_real *r, int fd, struct fdt_info *info)
{
    enum fdt_class cls = fdtable_get(fd, info);
    if (cls != FDT_UNKNOWN)
        return cls;
    return classify_slow(r, fd, info);
}

/* The number a /proc/self/fd entry names, or -1. */
static long fd_name(const char *name)
{
    long n = 0;
    if (name[0] < '0' || name[0] > '9')
        return -1;
    for (const char *p = name; *p; p++) {
        if (*p < '0' || *p > '9' || n > INT_MAX / 10)
            return -1;
        n = n * 10 + (*p - '0');
    }
    return n;
}

/* Another descriptor of this process on fd's open file that the shim does not
 * track (made by a raw dup, or received unseen), or -1. Descriptors in
 * [skip_lo, skip_hi] are about to close too. Scans /proc/self/fd with kcmp:
 * only when fd is its file's last known descriptor, so the driver's memory is
 * not released from the ledger while the file lives on. Async-signal-safe (raw
 * getdents64 into a buffer on the stack: no opendir, no allocation): it runs in
 * the close of a signal handler too. */
static int untracked_twin(int fd, int skip_lo, int skip_hi)
{
    int dir = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/fd",
                           O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return -1;
    int twin = -1;
    pid_t pid = getpid();
    _Alignas(8) char buf[2048];
    for (long got; twin < 0 && (got = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0;) {
        for (long off = 0; off < got && twin < 0;) {
            const char *ent = buf + off;
            unsigned short reclen;
            memcpy(&reclen, ent + 16, sizeof reclen); /* struct linux_dirent64 */
            off += reclen ? reclen : got;
            long n = fd_name(ent + 19);
            if (n < 0 || n == fd || n == dir || (n >= skip_lo && n <= skip_hi) ||
                fdtable_get((int)n, NULL) == FDT_NVIDIA)
                continue;
            if (syscall(SYS_kcmp, pid, pid, 0 /* KCMP_FILE */, fd, (int)n) == 0)
                twin = (int)n;
        }
    }
    syscall(SYS_close, dir);
    return twin;
}

/* fd is about to close: when it is the last descriptor of its file the shim
 * knows, a twin the shim did not see takes its place. */
static void adopt_twin(int fd, int skip_lo, int skip_hi)
{
    struct fdt_info cur;
    if (fdtable_get(fd, &cur) != FDT_NVIDIA)
        return;
    state_lock();
    bool last = fdtable_refs_locked(cur.file_id) == 1;
    state_unlock();
    if (!last)
        return;
    int twin = untracked_twin(fd, skip_lo, skip_hi);
    if (twin < 0)
        return;
    state_lock();
    if (fdtable_get(twin, NULL) != FDT_NVIDIA)
        fdtable_share_locked(twin, &cur);
    state_unlock();
}

/* The memory of a file whose last descriptor here closed is released, unless the
 * file was open at a fork or sent to another process (fdtable.h, shared): that
 * process may still hold it, and the driver frees it only at the file's last close
 * anywhere, so its charge stays with this process (and with kairosd's checks after
 * it, inherit.h) rather than be released too early. */
static void released_unless_shared(const struct objtree_effect *eff, bool shared)
{
    if (!shared)
        memguard_released(eff);
}

/* A detached NVIDIA descriptor (fdtable_detach) is gone: frees its file's clients
 * in the tree when it was the file's last. keep: its memory stays charged (a twin
 * the shim could not adopt may hold the file). */
static void forget_detached(const struct fdt_info *was, bool keep)
{
    reentry_enter(); /* memguard's lock below, and ipc's: reentry.h */
    bool last = false;
    struct objtree_effect eff = {.vidmem_delta = 0};
    struct objtree *t = state_lock();
    bool shared = keep || fdtable_shared_locked(was->file_id);
    fdtable_unref_locked(was->file_id, &last);
    if (last && t)
        objtree_close_file(t, was->file_id, &eff);
    state_unlock();
    released_unless_shared(&eff, shared);
    if (last)
        ipc_after_close(); /* imports dup'd on that file ended with it */
    reentry_leave();
}

/* Forgets an NVIDIA descriptor (close, or replaced by dup2); frees its file's
 * clients in the tree when it was the file's last descriptor. */
static bool forget_nvidia(int fd)
{
    struct fdt_info was;
    if (!fdtable_detach(fd, &was))
        return false;
    forget_detached(&was, false);
    return true;
}

/* ---- closes in a signal handler that interrupted the shim ---------------------------- */

/* A close that finds this thread inside the shim (reentry.h: the interrupted code may
 * hold the state lock, memguard's or the tracer's, or be inside malloc for the tree)
 * does only async-signal-safe work: it detaches the descriptor (lock-free) and queues
 * it here; the queue is drained, with the locks, when a call leaves the shim. A full
 * queue keeps the file's reference: its memory stays charged until the process ends. */
#define DEFERRED_MAX 64
enum { SLOT_EMPTY, SLOT_WRITING, SLOT_READY };
struct deferred_close {
    _Atomic int state;
    bool keep;
    struct fdt_info was;
};
static struct deferred_close deferred[DEFERRED_MAX];
static atomic_uint n_deferred;
static atomic_bool deferred_trace_stop;
/* A forked child that has not used the GPU since: it closes the same way (no lock,
 * no allocation), since its parent's other threads may have held malloc's locks or
 * an allocator's at the fork; most such children exec next. */
static atomic_bool light_closes;

void shim_fork_child_closes_lightly(void)
{
    atomic_store(&light_closes, true);
}

static void defer_close(const struct fdt_info *was, bool keep)
{
    for (int i = 0; i < DEFERRED_MAX; i++) {
        int expect = SLOT_EMPTY;
        if (!atomic_compare_exchange_strong(&deferred[i].state, &expect, SLOT_WRITING))
            continue;
        deferred[i].was = *was;
        deferred[i].keep = keep;
        atomic_store(&deferred[i].state, SLOT_READY);
        atomic_fetch_add(&n_deferred, 1);
        return;
    }
}

/* fd is closing inside the shim's own work on this thread (a signal handler). */
static void note_closing_reentered(int fd, int skip_lo, int skip_hi)
{
    if (tracer_owns_fd(fd))
        atomic_store(&deferred_trace_stop, true);
    if (agent_owns_fd(fd))
        agent_forget(); /* one atomic store */
    struct fdt_info was;
    enum fdt_class cls = fdtable_get(fd, &was);
    if (cls == FDT_OTHER)
        fdtable_set_plain(fd, FDT_UNKNOWN);
    if (cls != FDT_NVIDIA)
        return;
    bool twin = untracked_twin(fd, skip_lo, skip_hi) >= 0;
    if (fdtable_detach(fd, &was)) {
        defer_close(&was, twin);
    }
}

/* Records the closes queued by signal handlers; nothing while this thread is still
 * inside the shim. */
static void drain_deferred(void)
{
    if (reentry_inside())
        return;
    if (atomic_load_explicit(&light_closes, memory_order_relaxed))
        atomic_store(&light_closes, false); /* back to GPU work: allocating again */
    if (atomic_exchange(&deferred_trace_stop, false))
        tracer_stop();
    if (atomic_load(&n_deferred) == 0)
        return;
    for (int i = 0; i < DEFERRED_MAX; i++) {
        int expect = SLOT_READY;
        if (!atomic_compare_exchange_strong(&deferred[i].state, &expect, SLOT_WRITING))
            continue;
        struct fdt_info was = deferred[i].was;
        bool keep = deferred[i].keep;
        atomic_store(&deferred[i].state, SLOT_EMPTY);
        atomic_fetch_sub(&n_deferred, 1);
        int saved = errno;
        forget_detached(&was, keep);
        errno = saved;
    }
}

/* ---- open / close / dup ------------------------------------------------------------ */

bool shim_open_has_mode(int flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

static int call_open(const struct shim_real *r, enum shim_open_fn fn, int dirfd,
                     const char *path, int flags, mode_t mode)
{
    switch (fn) {
    case SHIM_OPEN:
        return r->open(path, flags, mode);
    case SHIM_OPEN64:
        return r->open64(path, flags, mode);
    case SHIM_OPENAT:
        return r->openat(dirfd, path, flags, mode);
    case SHIM_OPENAT64:
        return r->openat64(dirfd, path, flags, mode);
    case SHIM_OPEN_2:
        return r->__open_2(path, flags);
    case SHIM_OPEN64_2:
        return r->__open64_2(path, flags);
    case SHIM_OPENAT_2:
        return r->__openat_2(dirfd, path, flags);
    case SHIM_OPENAT64_2:
        return r->__openat64_2(dirfd, path, flags);
    }
    return r->openat(dirfd, path, flags, mode);
}

/* fd is a fresh descriptor (an open, a received one): whatever was cached for
 * its number is stale. path, when known, classifies it at once. */
static void note_opened(int fd, int dirfd, const char *path)
{
    int saved = errno;
    int minor;
    enum rm_node node = path ? fdtable_classify_path(dirfd, path, &minor) : RM_NODE_NONE;
    if (node == RM_NODE_NONE && fdtable_get(fd, NULL) == FDT_UNKNOWN) {
        errno = saved; /* nothing cached for the number, nothing to note: the common */
        return;        /* open of a file costs no check of whose memory this is */
    }
    if (borrowed_vm_now()) { /* a vfork child's descriptor table is not its parent's */
        errno = saved;
        return;
    }
    if (node == RM_NODE_NONE) {
        if (fdtable_get(fd, NULL) == FDT_NVIDIA)
            forget_nvidia(fd);
        fdtable_set_plain(fd, FDT_UNKNOWN);
    } else {
        state_lock();
        fdtable_open_locked(fd, node, minor);
        state_unlock();
        if (tracer_on())
            tracer_emit_open(fd, path);
    }
    errno = saved;
}

static bool open_refused(const struct shim_real *r, int dirfd, const char *path);

int shim_open(const struct shim_real *r, enum shim_open_fn fn, int dirfd, const char *path,
              int flags, mode_t mode)
{
    if (open_refused(r, dirfd, path)) {
        errno = EACCES; /* fail-closed: the tenant's daemon cannot be reached */
        return -1;
    }
    int fd = call_open(r, fn, dirfd, path, flags, mode);
    if (fd < 0)
        return fd;
    note_opened(fd, dirfd, path);
    return fd;
}

static void note_closing_known(int fd, int skip_lo, int skip_hi);

/* fd is about to be closed (by close, fclose, close_range over [skip_lo,
 * skip_hi], ...): forgets it. */
static void note_closing_in(int fd, int skip_lo, int skip_hi)
{
    if ((fdtable_get(fd, NULL) == FDT_NVIDIA || tracer_owns_fd(fd) || agent_owns_fd(fd)) &&
        borrowed_vm_now())
        return; /* a vfork child closing its copy: the state is its parent's */
    if (reentry_inside() || atomic_load_explicit(&light_closes, memory_order_relaxed)) {
        note_closing_reentered(fd, skip_lo, skip_hi); /* a handler inside the shim, or */
        return;                                       /* a fork child before its exec */
    }
    reentry_enter();
    note_closing_known(fd, skip_lo, skip_hi);
    reentry_leave();
    drain_deferred();
}

/* note_closing_in outside any other work of the shim on this thread. */
static void note_closing_known(int fd, int skip_lo, int skip_hi)
{
    adopt_twin(fd, skip_lo, skip_hi);
    if (tracer_owns_fd(fd))
        tracer_stop(); /* the application took its descriptor back */
    if (agent_owns_fd(fd))
        agent_forget(); /* the daemon link is gone; the next charge reconnects */
    struct fdt_info fi;
    enum fdt_class cls = fdtable_get(fd, &fi);
    if (cls == FDT_NVIDIA) {
        int saved = errno;
        if (forget_nvidia(fd) && tracer_on())
            tracer_emit_close(fd);
        errno = saved;
    } else if (cls == FDT_OTHER) {
        fdtable_set_plain(fd, FDT_UNKNOWN);
    }
}

static void note_closing(int fd)
{
    note_closing_in(fd, fd, fd);
}

int shim_close(const struct shim_real *r, int fd)
{
    note_closing(fd);
    return r->close(fd);
}

/* ---- descriptors opened or closed where the shim cannot see the call itself ---- */

/* The valid close_range flags: anything else fails with EINVAL and closes nothing. */
#define SHIM_CLOSE_RANGE_FLAGS ((1u << 1) | (1u << 2)) /* UNSHARE | CLOEXEC */
#define SHIM_CLOSE_RANGE_CLOEXEC (1u << 2)

static void note_range_closing(unsigned int first, unsigned int last)
{
    int hi = last > (unsigned)INT_MAX ? INT_MAX : (int)last;
    if (first > (unsigned)INT_MAX)
        return;
    for (int fd = fdtable_next_known((int)first, hi); fd >= 0 && fd <= hi;
         fd = fd == hi ? -1 : fdtable_next_known(fd + 1, hi))
        note_closing_in(fd, (int)first, hi);
}

int shim_close_range(const struct shim_real *r, unsigned int first, unsigned int last, int flags)
{
    bool closes = first <= last && !((unsigned)flags & ~SHIM_CLOSE_RANGE_FLAGS) &&
                  !((unsigned)flags & SHIM_CLOSE_RANGE_CLOEXEC);
    if (closes)
        note_range_closing(first, last);
    return r->close_range(first, last, flags);
}

void shim_closefrom(const struct shim_real *r, int lowfd)
{
    if (lowfd >= 0)
        note_range_closing((unsigned)lowfd, ~0u);
    r->closefrom(lowfd);
}

int shim_fclose(const struct shim_real *r, FILE *stream)
{
    int fd = stream ? fileno(stream) : -1;
    if (fd >= 0)
        note_closing(fd);
    return r->fclose(stream);
}

/* The first open of /dev/nvidiactl registers with kairosd (fail-closed). */
static bool open_refused(const struct shim_real *r, int dirfd, const char *path)
{
    int ctl_minor;
    if (!memguard_active() || !path ||
        fdtable_classify_path(dirfd, path, &ctl_minor) != RM_NODE_CTL || borrowed_vm_now())
        return false;
    reentry_enter(); /* registration takes memguard's locks: reentry.h */
    bool refused = driver_check_open(r) < 0 || memguard_first_gpu_use(r) < 0;
    int saved = errno;
    reentry_leave();
    drain_deferred();
    errno = saved;
    return refused;
}

FILE *shim_fopen(const struct shim_real *r, bool is64, const char *path, const char *mode)
{
    if (open_refused(r, AT_FDCWD, path)) {
        errno = EACCES;
        return NULL;
    }
    FILE *fp = is64 ? r->fopen64(path, mode) : r->fopen(path, mode);
    if (fp)
        note_opened(fileno(fp), AT_FDCWD, path);
    return fp;
}

FILE *shim_freopen(const struct shim_real *r, bool is64, const char *path, const char *mode,
                   FILE *stream)
{
    if (open_refused(r, AT_FDCWD, path)) {
        errno = EACCES;
        return NULL;
    }
    int old = stream ? fileno(stream) : -1;
    if (old >= 0)
        note_closing(old); /* the stream's file is closed whatever the outcome */
    FILE *fp = is64 ? r->freopen64(path, mode, stream) : r->freopen(path, mode, stream);
    if (fp)
        note_opened(fileno(fp), AT_FDCWD, path); /* path NULL: classified lazily */
    return fp;
}

ssize_t shim_recvmsg(const struct shim_real *r, int fd, struct msghdr *msg, int flags)
{
    ssize_t n = r->recvmsg(fd, msg, flags);
    if (n < 0 || !msg || msg->msg_controllen == 0)
        return n;
    int saved = errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
            c->cmsg_len < CMSG_LEN(0))
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int got[KAIROS_INHERITED_MAX_FDS];
        size_t kept = 0;
        for (size_t i = 0; i < count; i++) {
            int one;
            memcpy(&one, CMSG_DATA(c) + i * sizeof one, sizeof one);
            note_opened(one, AT_FDCWD, NULL);
            if (kept < KAIROS_INHERITED_MAX_FDS)
                got[kept++] = one;
        }
        reentry_enter(); /* the agent's lock, across its wait for kairosd: reentry.h */
        inherit_received(r, fd, got, kept); /* another process's NVIDIA files: tell kairosd */
        reentry_leave();
    }
    errno = saved;
    return n;
}

ssize_t shim_sendmsg(const struct shim_real *r, int fd, const struct msghdr *msg, int flags)
{
    ssize_t n = r->sendmsg(fd, msg, flags);
    if (n < 0 || !msg || msg->msg_controllen == 0)
        return n;
    int saved = errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
            c->cmsg_len < CMSG_LEN(0))
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int sent;
            struct fdt_info fi;
            memcpy(&sent, CMSG_DATA(c) + i * sizeof sent, sizeof sent);
            if (classify(r, sent, &fi) != FDT_NVIDIA)
                continue;
            state_lock(); /* another process may hold it now: its last close here is not */
            fdtable_mark_file_shared_locked(fi.file_id);
            state_unlock();
        }
    }
    errno = saved;
    return n;
}

int shim_pidfd_getfd(const struct shim_real *r, int pidfd, int targetfd, unsigned int flags)
{
    int fd = r->pidfd_getfd(pidfd, targetfd, flags);
    if (fd >= 0) {
        int saved = errno;
        note_opened(fd, AT_FDCWD, NULL);
        reentry_enter();
        inherit_taken(r, pidfd, fd);
        reentry_leave();
        errno = saved;
    }
    return fd;
}

/* newfd now refers to oldfd's file (after a successful dup-like call). When
 * replaced, newfd may have been open before and was closed by the kernel. */
static void note_dup(const struct shim_real *r, int oldfd, int newfd, bool replaced)
{
    int saved = errno;
    if (borrowed_vm_now()) {
        errno = saved;
        return;
    }
    if (replaced && tracer_owns_fd(newfd))
        tracer_stop();
    if (replaced && agent_owns_fd(newfd))
        agent_forget();
    struct fdt_info oi, ni;
    enum fdt_class oc = classify(r, oldfd, &oi);
    enum fdt_class nc = fdtable_get(newfd, &ni);
    if (oc != FDT_NVIDIA && nc != FDT_NVIDIA) {
        fdtable_set_plain(newfd, oc == FDT_OTHER ? FDT_OTHER : FDT_UNKNOWN);
        errno = saved;
        return;
    }
    struct fdt_info closed;
    bool last = false, shared = false, replaced_shared = false;
    struct objtree_effect eff = {.vidmem_delta = 0};
    struct objtree *t = state_lock();
    if (nc == FDT_NVIDIA)
        replaced_shared = fdtable_shared_locked(ni.file_id);
    bool was_nv = fdtable_drop_locked(newfd, &closed, &last);
    if (was_nv && last && t)
        objtree_close_file(t, closed.file_id, &eff);
    if (oc == FDT_NVIDIA)
        shared = fdtable_share_locked(newfd, &oi);
    state_unlock();
    released_unless_shared(&eff, replaced_shared);
    if (oc == FDT_OTHER)
        fdtable_set_plain(newfd, FDT_OTHER);
    if (tracer_on()) {
        if (was_nv)
            tracer_emit_close(newfd);
        if (shared)
            tracer_emit_dup(oldfd, newfd);
    }
    errno = saved;
}

int shim_dup(const struct shim_real *r, int fd)
{
    int nfd = r->dup(fd);
    if (nfd >= 0)
        note_dup(r, fd, nfd, false);
    return nfd;
}

int shim_dup2(const struct shim_real *r, int fd, int fd2)
{
    int nfd = r->dup2(fd, fd2);
    if (nfd >= 0 && fd != fd2)
        note_dup(r, fd, nfd, true);
    return nfd;
}

int shim_dup3(const struct shim_real *r, int fd, int fd2, int flags)
{
    int nfd = r->dup3(fd, fd2, flags);
    if (nfd >= 0 && fd != fd2)
        note_dup(r, fd, nfd, true);
    return nfd;
}

enum shim_fcntl_arg shim_fcntl_arg_kind(int cmd)
{
    switch (cmd) {
    case F_GETFD:
    case F_GETFL:
    case F_GETOWN:
    case F_GETSIG:
    case F_GETLEASE:
    case F_GETPIPE_SZ:
    case F_GET_SEALS:
        return SHIM_FCNTL_NONE;
    case F_DUPFD:
    case F_DUPFD_CLOEXEC:
    case F_SETFD:
    case F_SETFL:
    case F_SETOWN:
    case F_SETSIG:
    case F_SETLEASE:
    case F_NOTIFY:
    case F_SETPIPE_SZ:
    case F_ADD_SEALS:
        return SHIM_FCNTL_INT;
    default:
        return SHIM_FCNTL_PTR;
    }
}

int shim_fcntl(const struct shim_real *r, bool is64, int fd, int cmd, int iarg, void *parg)
{
    shim_fcntl_fn *fn = is64 ? r->fcntl64 : r->fcntl;
    int ret;
    switch (shim_fcntl_arg_kind(cmd)) {
    case SHIM_FCNTL_NONE:
        ret = fn(fd, cmd);
        break;
    case SHIM_FCNTL_INT:
        ret = fn(fd, cmd, iarg);
        break;
    default:
        ret = fn(fd, cmd, parg);
        break;
    }
    if (ret >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
        note_dup(r, fd, ret, false);
    return ret;
}

/* ---- ioctl ------------------------------------------------------------------------- */

/* The argument size the driver copies for a request on this node (0: unknown). */
static size_t arg_size(enum rm_node node, uint32_t request)
{
    if (node == RM_NODE_UVM)
        return rm_uvm_params_size(request);
    return RM_IOC_SIZE(request);
}

static bool is_xfer(enum rm_node node, uint32_t request)
{
    return node != RM_NODE_UVM && RM_IOC_NR(request) == RM_NR_XFER &&
           RM_IOC_SIZE(request) == sizeof(struct rm_xfer_args);
}

/* Where the params of an RM_ALLOC / RM_CONTROL argument are; false for others. */
static bool params_of(uint32_t request, const uint8_t *arg, size_t len, uint64_t *ptr,
                      uint32_t *size, uint32_t *status)
{
    unsigned nr = RM_IOC_NR(request), sz = RM_IOC_SIZE(request);
    size_t off_size, off_status;
    if ((nr == RM_NR_ALLOC && sz == sizeof(struct rm_alloc_args)) ||
        (nr == RM_NR_CONTROL && sz == sizeof(struct rm_control_args))) {
        off_size = 24;
        off_status = 28;
    } else if (nr == RM_NR_ALLOC && sz == sizeof(struct rm_alloc64_args)) {
        off_size = offsetof(struct rm_alloc64_args, params_size);
        off_status = offsetof(struct rm_alloc64_args, status);
    } else {
        return false;
    }
    if (!arg || len < sz)
        return false;
    *ptr = bytes_u64(arg + 16);
    *size = bytes_u32(arg + off_size);
    *status = bytes_u32(arg + off_status);
    /* RM copies an allocation's parameters by the class's own size, not paramsSize
     * (CUDA leaves paramsSize 0 in NVOS64), so read what RM wrote. */
    uint32_t class_size = nr == RM_NR_ALLOC ? rm_class_params_size(bytes_u32(arg + 12)) : 0;
    if (class_size)
        *size = class_size;
    return true;
}

static bool params_sane(uint64_t ptr, uint32_t size)
{
    return ptr >= 4096 && ptr < USER_ADDR_MAX && size > 0 && size <= RM_XFER_MAX;
}

/* Reads an XFER header: the inner request, argument and size. */
static bool xfer_unwrap(const struct rm_xfer_args *x, uint32_t *req, uint8_t **arg, size_t *len)
{
    if (x->size > RM_XFER_MAX || x->cmd > 0xff || x->ptr >= USER_ADDR_MAX)
        return false;
    *req = RM_IOWR(x->cmd, x->size);
    *arg = (uint8_t *)(uintptr_t)x->ptr;
    *len = x->size;
    return true;
}

/* The file id of the descriptor an RM_MAP_MEMORY / RM_ALLOC_MEMORY names for a
 * later mmap (0: none or not an NVIDIA descriptor). */
static uint64_t map_file_of(const struct shim_real *r, const struct rm_op *op)
{
    if ((op->kind != RM_OP_MAP && op->kind != RM_OP_ALLOC_MEMORY) || !op->ok || op->map_fd < 0)
        return 0;
    struct fdt_info mi;
    return classify(r, op->map_fd, &mi) == FDT_NVIDIA ? mi.file_id : 0;
}

/* One ioctl on an NVIDIA descriptor, as it goes through the shim. */
struct call_frame {
    const struct fdt_info *fi;
    int fd;
    uint32_t req;             /* the request as the application issued it */
    bool xfer;
    uint32_t in_req;          /* the call itself (XFER unwrapped) */
    uint8_t *in_arg;
    size_t in_len;
    int ret, err;
    bool refused;             /* memguard answered instead of the driver */
    const uint8_t *after;     /* argument after the call */
    size_t after_len;
    const uint8_t *params;    /* RM_ALLOC / RM_CONTROL parameters after the call */
    size_t params_len;
    bool has_params;
    uint8_t *params_rw;       /* the application's parameters, when safe to rewrite */
    int slot;                 /* its handle's entry in the calls in flight (inflight.h) */
};

/* Before the call, when tracing or guarding: which call an XFER wraps. */
static void unwrap_before(struct call_frame *f, void *arg)
{
    if (!f->xfer)
        return;
    struct rm_xfer_args x;
    if (app_memory_read(&x, arg, sizeof x) != sizeof x ||
        !xfer_unwrap(&x, &f->in_req, &f->in_arg, &f->in_len)) {
        f->in_arg = NULL;
        f->in_len = 0;
    }
}

/* After the call: the argument's bytes (read straight only if the driver took them). */
static void read_after(struct call_frame *f, void *arg, struct tracer_scratch *sc)
{
    if (f->xfer) {
        struct rm_xfer_args x;
        bool have = false;
        f->in_arg = NULL;
        f->in_len = 0;
        if (f->ret == 0) {
            memcpy(&x, arg, sizeof x);
            have = true;
        } else if (sc) {
            have = app_memory_read(&x, arg, sizeof x) == sizeof x;
        }
        if (!have || !xfer_unwrap(&x, &f->in_req, &f->in_arg, &f->in_len)) {
            f->in_arg = NULL;
            f->in_len = 0;
        }
    }
    if (!f->in_arg || !f->in_len)
        return;
    if (f->ret == 0) {
        f->after = f->in_arg;
        f->after_len = f->in_len;
    } else if (sc) {
        f->after_len = app_memory_read(sc->after, f->in_arg, f->in_len);
        f->after = sc->after;
    }
}

/* RM_ALLOC / RM_CONTROL parameters after the call. */
static void read_params(struct call_frame *f, struct tracer_scratch *sc)
{
    uint64_t pptr;
    uint32_t psize, pstatus;
    if (f->fi->node == RM_NODE_UVM ||
        !params_of(f->in_req, f->after, f->after_len, &pptr, &psize, &pstatus))
        return;
    f->has_params = true;
    if (!params_sane(pptr, psize))
        return;
    bool driver_wrote = f->ret == 0 && !f->refused && pstatus == RM_NV_OK;
    if (driver_wrote)
        f->params_rw = (uint8_t *)(uintptr_t)pptr;
    if (sc) {
        f->params_len = app_memory_read(sc->params, (const void *)(uintptr_t)pptr, psize);
        f->params = sc->params;
    } else if (driver_wrote) {
        f->params = f->params_rw;
        f->params_len = psize;
    }
}

/* The RM_CONTROL header of the call, once the driver has answered. */
static bool control_after(const struct call_frame *f, struct rm_control_args *c)
{
    if (RM_IOC_NR(f->in_req) != RM_NR_CONTROL || f->after_len < sizeof *c)
        return false;
    memcpy(c, f->after, sizeof *c);
    return true;
}

/* FB_GET_INFO's list of entries, which its parameters point to, rewritten for GPU gpu:
 * read into the shim's copy, rewritten there and written back (the application's
 * pointer may be anything: app_memory.h). */
static void rewrite_fb_info_list(const uint8_t *params, int gpu)
{
    struct rm_fb_get_info_params p;
    memcpy(&p, params, sizeof p);
    uint32_t n = p.count < RM_FB_INFO_MAX ? p.count : RM_FB_INFO_MAX;
    struct rm_fb_info_entry list[RM_FB_INFO_MAX];
    size_t len = n * sizeof list[0];
    void *at = (void *)(uintptr_t)p.list;
    if (!n || app_memory_read(list, at, len) != len)
        return;
    memguard_rewrite_fb_entries((uint8_t *)list, n, gpu);
    app_memory_write_as(getpid(), at, list, len);
}

/* The tenant's view of the GPU's memory: rewrite FB_GET_INFO_V2's entries, or those
 * FB_GET_INFO points to (Vulkan's driver asks that one), before anyone reads them. */
static void rewrite_memory_view(struct call_frame *f)
{
    struct rm_control_args c;
    if (!memguard_active() || !f->params_rw || !control_after(f, &c))
        return;
    bool v2 = c.cmd == RM_CTRL_NV2080_FB_GET_INFO_V2 &&
              c.params_size == sizeof(struct rm_fb_get_info_v2_params);
    bool v1 = c.cmd == RM_CTRL_NV2080_FB_GET_INFO &&
              c.params_size == sizeof(struct rm_fb_get_info_params);
    if (!v1 && !v2)
        return;
    struct objtree *t = state_lock();
    int gpu = t ? objtree_gpu_of(t, c.h_client, c.h_object) : -1;
    state_unlock();
    if (v1) {
        rewrite_fb_info_list(f->params_rw, gpu);
        return;
    }
    uint32_t count;
    memcpy(&count, f->params_rw, sizeof count);
    memguard_rewrite_fb_entries(f->params_rw + offsetof(struct rm_fb_get_info_v2_params, entries),
                                count, gpu);
}

/* The application's own SET_TIMESLICE (CUDA sets one on every channel group it
 * creates, after Kairos set the tenant's): recorded, so that a policy's 0 can give
 * it back, and set back while a policy's timeslice is in force. Read from the
 * application's parameters once the driver accepted them (params_rw). */
static void note_app_timeslice(const struct call_frame *f)
{
    struct rm_control_args c;
    uint64_t us;
    if (!f->params_rw || !control_after(f, &c) || c.cmd != RM_CTRL_NVA06C_SET_TIMESLICE ||
        c.params_size < sizeof us)
        return;
    memcpy(&us, f->params_rw, sizeof us);
    timectl_after_app_timeslice(c.h_client, c.h_object, us);
}

/* Which GPU a device instance is (gpumap.h): when the application asked the driver
 * for the probed gpuIds or a gpuId's device instance, ask again with a buffer of
 * the shim's, so that no other thread of the application can change the answer
 * before it is read. Untraced, like the time controls. */
static void observe_gpu_ids(const struct shim_real *r, const struct call_frame *f)
{
    struct rm_control_args c;
    if (f->fi->node != RM_NODE_CTL || f->ret != 0 || f->refused || !control_after(f, &c) ||
        c.status != RM_NV_OK || c.h_client != c.h_object)
        return;
    uint32_t own[96]; /* GET_PROBED_IDS: 384 bytes; GET_ID_INFO_V2: 32 */
    uint32_t len = c.cmd == RM_CTRL_NV0000_GPU_GET_PROBED_IDS  ? 384u
                   : c.cmd == RM_CTRL_NV0000_GPU_GET_ID_INFO_V2 ? 32u
                                                                : 0u;
    if (!len || c.params_size != len)
        return;
    memset(own, 0, sizeof own);
    if (c.cmd == RM_CTRL_NV0000_GPU_GET_ID_INFO_V2 && /* the question: the gpuId */
        app_memory_read(own, (const void *)(uintptr_t)c.params, sizeof own[0]) != sizeof own[0])
        return;
    struct rm_control_args mine = {.h_client = c.h_client, .h_object = c.h_object,
                                   .cmd = c.cmd, .params = (uintptr_t)own, .params_size = len};
    if (r->ioctl(f->fd, RM_IOWR(RM_NR_CONTROL, sizeof mine), &mine) == 0 &&
        mine.status == RM_NV_OK)
        gpumap_observe(c.cmd, (const uint8_t *)own, len);
}

/* NV0000 EXPORT_OBJECTS_TO_FD succeeded: the export file (params.fd, a
 * /dev/nvidiactl file) now keeps the exported objects' memory until its last close,
 * whatever this process frees meanwhile (docs/memory.md). Read from the shim's copy
 * (shadow.h), so the objects recorded are those the driver exported. */
static void note_export(const struct shim_real *r, const struct call_frame *f)
{
    struct rm_control_args c;
    struct rm_export_objects_to_fd_params p;
    if (f->ret != 0 || f->refused || !control_after(f, &c) || c.status != RM_NV_OK ||
        c.cmd != RM_CTRL_NV0000_OS_UNIX_EXPORT_OBJECTS_TO_FD || !f->params ||
        f->params_len != sizeof p)
        return;
    memcpy(&p, f->params, sizeof p);
    struct fdt_info fi;
    if (classify(r, p.fd, &fi) != FDT_NVIDIA)
        return;
    unsigned n = p.num_objects <= RM_EXPORT_FD_MAX_OBJECTS ? p.num_objects : 0;
    struct objtree *t = state_lock();
    for (unsigned i = 0; t && i < n; i++)
        (void)objtree_hold_in_file(t, fi.file_id, c.h_client, p.objects[i]);
    state_unlock();
}

/* ---- handles in the driver (inflight.h) -------------------------------------------- */

/* The handle a call frees or allocates: the client it lives in (a client's own
 * handle for a client) and the handle. */
static enum inflight_kind handle_use(const struct rm_op *op, uint32_t *client, uint32_t *handle)
{
    switch (op->kind) {
    case RM_OP_FREE:
    case RM_OP_VIDHEAP_FREE:
        *client = op->h_client;
        *handle = op->h_object;
        return INFLIGHT_FREE;
    case RM_OP_ALLOC:
    case RM_OP_ALLOC_MEMORY:
    case RM_OP_VIDHEAP_ALLOC:
    case RM_OP_DUP: {
        bool root = op->kind == RM_OP_ALLOC && rm_class_kind(op->h_class) == RM_KIND_CLIENT;
        *client = root ? op->h_object : op->h_client;
        *handle = op->h_object;
        return INFLIGHT_ALLOC;
    }
    default:
        return INFLIGHT_NONE;
    }
}

/* Before the driver sees the call (its argument the shim's own copy): registers
 * the handle it frees or names, after any call of another thread on that handle
 * was recorded. Its slot, or -1. */
static int register_handle(const struct call_frame *f)
{
    struct rm_call call = {.node = f->fi->node, .fd = f->fd, .request = f->in_req,
                           .xfer = f->xfer, .arg = f->in_arg, .arg_len = f->in_len};
    struct rm_op op = {0};
    uint32_t client = 0, handle = 0;
    /* the request alone says whether the call names a handle: most calls (controls,
     * maps) are not decoded twice */
    rm_decode_request(call.node, call.request, &op);
    if (handle_use(&op, &client, &handle) == INFLIGHT_NONE)
        return -1;
    rm_decode(&call, &op);
    enum inflight_kind kind = handle_use(&op, &client, &handle);
    if (kind == INFLIGHT_NONE || handle == 0) /* 0: RM chooses the handle */
        return -1;
    int slot = -1;
    state_lock();
    while (inflight_begin_locked(kind, client, handle, &slot) == -EBUSY)
        state_wait();
    state_unlock();
    return slot;
}

/* Under the state lock: the call in f->slot is recorded. A free that an allocation
 * of its handle superseded destroys nothing (inflight.h). True: wake the waiters. */
static bool apply_locked(struct objtree *t, const struct call_frame *f, uint64_t map_file,
                         const struct rm_op *op, struct objtree_effect *eff)
{
    uint32_t client = 0, handle = 0;
    if (t && !inflight_superseded_locked(f->slot))
        (void)objtree_apply(t, f->fi->file_id, map_file, op, eff);
    if (op->ok && handle_use(op, &client, &handle) == INFLIGHT_ALLOC)
        inflight_allocated_locked(client, handle, f->slot);
    return inflight_end_locked(f->slot);
}

/* Decodes the call (into op) and applies it to the object tree; returns what it did. */
static void apply_call(const struct shim_real *r, struct call_frame *f, struct rm_op *out,
                       struct objtree_effect *eff)
{
    struct rm_call call = {
        .node = f->fi->node,
        .fd = f->fd,
        .request = f->in_req,
        .xfer = f->xfer,
        .arg = f->after,
        .arg_len = f->after_len,
        .params = f->params,
        .params_len = f->params_len,
        .ret = f->ret,
        .err = f->err,
    };
    struct rm_op op;
    rm_decode(&call, &op);
    *out = op;
    if (op.kind == RM_OP_ALLOC && op.h_class == RM_CLASS_NV01_DEVICE_0 && op.device_id >= 0)
        op.device_id = gpumap_index(op.device_id); /* the node's GPU number */
    uint64_t map_file = map_file_of(r, &op);
    memset(eff, 0, sizeof *eff);
    struct objtree *t = state_lock();
    bool wake = apply_locked(t, f, map_file, &op, eff);
    state_unlock();
    if (wake)
        state_wake();
    if (op.kind == RM_OP_ALLOC && op.ok && timectl_active())
        timectl_after_alloc(op.h_client, op.h_object, op.h_class);
}

static void trace_call(const struct call_frame *f, struct tracer_scratch *sc, size_t before_len,
                       double t0, double t1)
{
    struct trace_rec rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = TREC_IOCTL;
    rec.fd = f->fd;
    rec.t_us = t0;
    rec.dt_us = t1 - t0;
    rec.tid = (long)gettid();
    rec.node = f->fi->node;
    rec.dev_minor = f->fi->minor;
    rec.request = f->in_req;
    rec.xfer = f->xfer;
    rec.ret = f->ret;
    rec.err = f->err;
    rec.before = sc->before;
    rec.before_len = before_len;
    rec.after = f->after;
    rec.after_len = f->after_len;
    rec.params = f->params;
    rec.params_len = f->params_len;
    rec.has_params = f->has_params;
    tracer_emit_ioctl(&rec);
}

/* A version handshake the driver accepted: its answer, in the shim's own copy,
 * decides whether the shim reads this driver at all (driver_check.h); a refusal
 * fails the call. */
static void check_handshake(struct call_frame *f, struct shadow_call *sh, int *saved)
{
    const uint8_t *answer = shadow_inner(sh);
    if (f->ret != 0 || !answer || RM_IOC_NR(f->in_req) != RM_NR_CHECK_VERSION_STR)
        return;
    if (driver_check_handshake(answer, RM_IOC_SIZE(f->in_req)) < 0) {
        f->ret = -1;
        f->err = *saved = errno;
    }
}

static int ioctl_nvidia(const struct shim_real *r, int fd, const struct fdt_info *fi,
                        unsigned long request, void *arg)
{
    struct call_frame f = {.fi = fi, .fd = fd, .req = (uint32_t)request, .slot = -1};
    timectl_set_real(r); /* time controls go through the same table, untraced */
    f.xfer = is_xfer(fi->node, f.req);
    f.in_req = f.req;
    f.in_arg = arg;
    f.in_len = arg_size(fi->node, f.req);
    struct tracer_scratch *sc = tracer_on() ? tracer_scratch() : NULL;
    bool guard = memguard_active() && fi->node != RM_NODE_UVM;
    size_t before_len = 0;
    double t0 = 0;
    /* Guarded: the driver reads only the shim's copy (shadow.h); every read below
     * of the argument, before and after the call, is of that copy. */
    /* the owner's pid: shim_ioctl checked that this is the owner (borrowed_vm.h) */
    struct shadow_call sh = {.active = false, .pid = borrowed_vm_owner()};
    if (guard && shadow_capture(&sh, f.req, arg) < 0) {
        errno = EFAULT; /* unreadable: as the driver answers it */
        return -1;
    }
    void *call_arg = shadow_arg(&sh, arg);
    f.in_arg = call_arg;
    if (sc || guard)
        unwrap_before(&f, call_arg);
    if (sc) {
        if (f.in_arg)
            before_len = app_memory_read(sc->before, f.in_arg, f.in_len);
        t0 = tracer_now_us();
    }

    struct ipc_pending ipc = {.import = false};
    /* an import is told to kairosd before it exists, and refused if kairosd refuses
     * it (ipc.h) */
    bool ipc_refused = guard && f.in_arg && ipc_before(r, f.in_req, f.in_arg, f.in_len, &ipc);
    struct memguard_ticket ticket = {.active = false};
    if (ipc_refused) {
        f.refused = true; /* the status is written: as the driver refuses a dup */
        f.ret = 0;
    } else if (guard && f.in_arg && memguard_before(r, f.in_req, f.in_arg, &sh, &ticket)) {
        memguard_write_refusal(f.in_req, f.in_arg); /* as the driver answers a full GPU */
        f.refused = true;
        f.ret = 0;
    } else if (fi->node == RM_NODE_UVM && uvm_managed_wants(request)) {
        f.ret = uvm_managed_ioctl(r, fd, request, arg); /* semaphore pools: uvm_managed.h */
    } else {
        if (sh.active && f.in_arg)
            f.slot = register_handle(&f);
        f.ret = r->ioctl(fd, request, call_arg);
    }
    int saved = errno;
    double t1 = sc ? tracer_now_us() : 0;
    f.err = f.ret < 0 ? saved : 0;
    shadow_reply(&sh);
    if (guard)
        check_handshake(&f, &sh, &saved);

    read_after(&f, call_arg, sc);
    read_params(&f, sc);
    rewrite_memory_view(&f);
    note_app_timeslice(&f);
    observe_gpu_ids(r, &f);
    if (sc && f.params_rw && f.params == sc->params) /* trace what the application sees */
        f.params_len = app_memory_read(sc->params, f.params_rw, f.params_len);
    struct objtree_effect eff;
    struct rm_op op;
    apply_call(r, &f, &op, &eff);
    if (guard)
        note_export(r, &f);
    memguard_after(&ticket, &eff);
    if (guard)
        ipc_after(r, &op, f.after, f.after_len, f.params, f.params_len, &ipc);
    if (sc)
        trace_call(&f, sc, before_len, t0, t1);
    errno = saved;
    return f.ret;
}

/* A vfork child's driver call: recorded nowhere (the state is its parent's). Under
 * a quota a call that can create memory is refused with EPERM, decided by its
 * number alone (the argument is shared with the parent's other threads): the
 * memory would outlive the child in a file its parent shares, charged to no one. */
static int ioctl_in_borrowed_vm(const struct shim_real *r, int fd, unsigned long request,
                                void *arg)
{
    if (memguard_active() && memguard_may_allocate((uint32_t)request)) {
        errno = EPERM;
        return -1;
    }
    return r->ioctl(fd, request, arg);
}

int shim_ioctl(const struct shim_real *r, int fd, unsigned long request, void *arg)
{
    struct fdt_info fi;
    enum fdt_class cls = fdtable_get(fd, &fi);
    /* "Not NVIDIA" may be stale when the number was reused by a call the shim
     * does not see (a raw syscall, openat2): an RM request ('F') looks again. */
    if (cls == FDT_UNKNOWN || (cls == FDT_OTHER && RM_IOC_TYPEOF(request) == RM_IOC_TYPE))
        cls = classify_slow(r, fd, &fi);
    if (cls != FDT_NVIDIA || driver_check_passthrough())
        return r->ioctl(fd, request, arg); /* passthrough: a driver the shim cannot read */
    if (borrowed_vm_now())
        return ioctl_in_borrowed_vm(r, fd, request, arg);
    reentry_enter(); /* the shim's locks are taken in there: reentry.h */
    int ret = ioctl_nvidia(r, fd, &fi, request, arg);
    int saved = errno;
    reentry_leave();
    drain_deferred();
    errno = saved;
    return ret;
}

/* ---- mmap / munmap ---------------------------------------------------------------- */

static void forget_range(uint64_t addr, uint64_t len)
{
    struct objtree *t = state_lock();
    bool had = t && objtree_munmap(t, addr, len);
    state_unlock();
    if (had && tracer_on())
        tracer_emit_munmap(addr, len);
}

static void *mmap_classified(const struct shim_real *r, bool is64, void *addr, size_t len,
                             int prot, int flags, int fd, off64_t off, enum fdt_class cls,
                             const struct fdt_info *fip);

void *shim_mmap(const struct shim_real *r, bool is64, void *addr, size_t len, int prot,
                int flags, int fd, off64_t off)
{
    struct fdt_info fi = {.node = RM_NODE_NONE};
    enum fdt_class cls = FDT_OTHER;
    if (!(flags & MAP_ANONYMOUS) && fd >= 0)
        cls = classify(r, fd, &fi);
    /* UVM's shape (offset = address) on a number cached as "not NVIDIA": the file
     * behind it may have changed unseen (a raw dup2): look again (one fstat). */
    if (cls == FDT_OTHER && memguard_active() && addr &&
        (uint64_t)off == (uint64_t)(uintptr_t)addr)
        cls = classify_slow(r, fd, &fi);
    if (cls != FDT_NVIDIA)
        return mmap_classified(r, is64, addr, len, prot, flags, fd, off, cls, &fi);
    reentry_enter(); /* memguard's and the tracer's locks: reentry.h */
    void *p = mmap_classified(r, is64, addr, len, prot, flags, fd, off, cls, &fi);
    int saved = errno;
    reentry_leave();
    drain_deferred();
    errno = saved;
    return p;
}

static void *mmap_classified(const struct shim_real *r, bool is64, void *addr, size_t len,
                             int prot, int flags, int fd, off64_t off, enum fdt_class cls,
                             const struct fdt_info *fip)
{
    struct fdt_info fi = *fip;
    bool tracing = cls == FDT_NVIDIA && tracer_on();
    double t0 = tracing ? tracer_now_us() : 0;
    /* A UVM mapping that is not a semaphore pool is managed memory: the policy
     * decides before the driver sees it (uvm_managed.h). */
    bool uvm = cls == FDT_NVIDIA && fi.node == RM_NODE_UVM;
    if (uvm && memguard_active() && borrowed_vm_now()) {
        errno = EPERM; /* a vfork child: managed memory is refused as its allocations are */
        return MAP_FAILED;
    }
    struct uvm_mmap_ticket ut = {.kind = UVM_MMAP_PASS};
    if (uvm && !uvm_managed_before_mmap(r, (uint64_t)(uintptr_t)addr, len, &ut))
        return MAP_FAILED; /* refused: errno ENOMEM */
    bool sensed = (flags & MAP_FIXED) && timectl_unmap_begin((uint64_t)(uintptr_t)addr, len);
    void *p = is64 ? r->mmap64(addr, len, prot, flags, fd, off)
                   : r->mmap(addr, len, prot, flags, fd, (off_t)off);
    int saved = errno;
    if (uvm)
        uvm_managed_after_mmap(&ut, p, flags & MAP_FIXED);
    else if (p != MAP_FAILED && (flags & MAP_FIXED))
        uvm_managed_unmapped((uint64_t)(uintptr_t)p, len); /* MAP_FIXED over managed memory */
    errno = saved;
    if (p == MAP_FAILED && cls != FDT_NVIDIA) {
        timectl_unmap_end(sensed);
        return p;
    }
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (p != MAP_FAILED && (flags & MAP_FIXED) && state_may_hold_mapping(a, len))
        forget_range(a, len); /* MAP_FIXED replaced what was there */
    timectl_unmap_end(sensed);
    if (cls == FDT_NVIDIA) {
        if (p != MAP_FAILED) {
            struct objtree *t = state_lock();
            if (t)
                (void)objtree_mmap(t, fi.file_id, a, len);
            state_note_mapping_locked(a, len);
            state_unlock();
        }
        if (tracing) {
            struct trace_rec rec;
            memset(&rec, 0, sizeof rec);
            rec.kind = TREC_MMAP;
            rec.fd = fd;
            rec.t_us = t0;
            rec.dt_us = tracer_now_us() - t0;
            rec.tid = (long)gettid();
            rec.node = fi.node;
            rec.dev_minor = fi.minor;
            rec.addr = a;
            rec.len = len;
            rec.off = (uint64_t)off;
            rec.prot = prot;
            rec.flags = flags;
            rec.ret = p == MAP_FAILED ? -1 : 0;
            rec.err = p == MAP_FAILED ? saved : 0;
            tracer_emit_mmap(&rec);
        }
    }
    errno = saved;
    return p;
}

int shim_munmap(const struct shim_real *r, void *addr, size_t len)
{
    uint64_t a = (uint64_t)(uintptr_t)addr;
    bool sensed = timectl_unmap_begin(a, len); /* no USERD read across the unmap */
    int ret = r->munmap(addr, len);
    if (ret == 0) {
        int saved = errno;
        uvm_managed_unmapped(a, len); /* one atomic load unless managed ranges live */
        errno = saved;
    }
    if (ret == 0 && state_may_hold_mapping(a, len)) {
        int saved = errno;
        forget_range(a, len);
        errno = saved;
    }
    timectl_unmap_end(sensed);
    return ret;
}
