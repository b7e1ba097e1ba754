/* heirs.c - who holds a process's NVIDIA files, as checked in /proc (see heirs.h). */
#include "daemon/memory/heirs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "core/grow.h"
#include "core/rm_abi.h"
#include "daemon/base/proc_stat.h"

#define KCMP_FILE_TYPE 0 /* KCMP_FILE of <linux/kcmp.h> */
/* Descriptors looked at per process and check: a process with more is answered
 * without the rest (a claim against it is refused; a holder counts as holding), so
 * no peer can make kairosd's loop scan without end. */
#define HEIRS_SCAN_MAX 4096
#define HEIRS_WALK_MAX 256 /* edges followed per question (see hold_from) */

void heirs_init(struct heirs *h, const char *proc, struct gpu_backend *gpu)
{
    memset(h, 0, sizeof *h);
    h->proc = proc ? proc : "/proc";
    h->gpu = gpu && gpu->ops ? gpu : NULL;
    h->prune_ms = HEIRS_PRUNE_MS;
    h->tenant_max = HEIRS_TENANT_MAX;
    h->uid_max = HEIRS_UID_MAX;
    snprintf(h->prefix, sizeof h->prefix, "/dev/nvidia");
    char node[64];
    if (h->gpu && h->gpu->ops->device_path &&
        h->gpu->ops->device_path(h->gpu, 0, node, sizeof node) == 0) {
        size_t len = strlen(node); /* "<dir>/nvidia0": the prefix is "<dir>/nvidia" */
        while (len && node[len - 1] >= '0' && node[len - 1] <= '9')
            len--;
        snprintf(h->prefix, sizeof h->prefix, "%.*s", (int)len, node);
    }
}

void heirs_fini(struct heirs *h)
{
    free(h->v);
    free(h->res);
    memset(h, 0, sizeof *h);
}

/* A node of the driver that holds RM clients or UVM state (not nvidia-modeset,
 * nvidia-caps: no memory lives there). */
static bool driver_link(const struct heirs *h, const char *link)
{
    size_t len = strlen(h->prefix);
    if (strncmp(link, h->prefix, len) != 0)
        return false;
    const char *rest = link + len;
    return strcmp(rest, "ctl") == 0 || strcmp(rest, "-uvm") == 0 ||
           (rest[0] >= '0' && rest[0] <= '9');
}

/* Walks <proc>/<pid>/fd: visit(h, ctx, fd, link) for each descriptor, link being
 * where it points ("" when unreadable) when with_links, else NULL, until visit
 * returns true or more than max descriptors were seen. The one walk of a process's
 * descriptors here, bounded so that no peer can make kairosd's loop scan without
 * end. -1: no such process (or unreadable); 0: all seen; 1: visit stopped it; 2:
 * more than max. */
static int walk_fds(struct heirs *h, uint32_t pid, unsigned max, bool with_links,
                    bool (*visit)(struct heirs *h, void *ctx, int fd, const char *link),
                    void *ctx)
{
    char dir[64];
    snprintf(dir, sizeof dir, "%s/%u/fd", h->proc, pid);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int rc = 0;
    unsigned seen = 0;
    for (struct dirent *e = readdir(d); e && !rc; e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        if (++seen > max) {
            rc = 2;
            break;
        }
        char link[128] = "";
        if (with_links) {
            char path[sizeof dir + sizeof e->d_name];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            ssize_t n = readlink(path, link, sizeof link - 1);
            link[n > 0 ? n : 0] = 0;
        }
        rc = visit(h, ctx, (int)strtol(e->d_name, NULL, 10), with_links ? link : NULL);
    }
    closedir(d);
    return rc;
}

static bool is_driver_link(struct heirs *h, void *ctx, int fd, const char *link)
{
    (void)ctx;
    (void)fd;
    return driver_link(h, link);
}

bool heirs_has_driver_file(struct heirs *h, uint32_t pid)
{
    bool open = false;
    if (h->gpu && h->gpu->ops->driver_file_open &&
        h->gpu->ops->driver_file_open(h->gpu, pid, &open) == 0)
        return open;
    /* more descriptors than are looked at: err towards charging */
    return walk_fds(h, pid, HEIRS_SCAN_MAX, true, is_driver_link, NULL) > 0;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Whether an edge leaves the process pid that started at start. */
static bool hands_on(const struct heirs *h, uint32_t pid, uint64_t start)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i].from_pid == pid && h->v[i].from_start == start)
            return true;
    return false;
}

/* Drops the edges that can keep nothing charged: both processes gone, or the holder
 * gone without having handed the files on (no edge leaves it). A pass at most once
 * per prune_ms (a full owner's reports must not make the loop read /proc without
 * end). */
static void prune(struct heirs *h)
{
    uint64_t now = mono_ms();
    if (h->pruned_ms && now - h->pruned_ms < h->prune_ms)
        return;
    h->pruned_ms = now;
    bool *drop = calloc(h->n ? h->n : 1, sizeof *drop);
    for (size_t i = 0; i < h->n; i++) {
        const struct heir_edge *e = &h->v[i];
        bool holder = proc_stat_alive(h->proc, e->pid, e->start);
        bool gone = !holder && !proc_stat_alive(h->proc, e->from_pid, e->from_start);
        if (!drop && gone) /* out of memory: only these go, in place */
            h->v[i].pid = 0;
        else if (drop)
            drop[i] = gone || (!holder && !hands_on(h, e->pid, e->start));
    }
    size_t w = 0;
    for (size_t i = 0; i < h->n; i++)
        if (drop ? !drop[i] : h->v[i].pid != 0)
            h->v[w++] = h->v[i];
    h->n = w;
    free(drop);
}

size_t heirs_count(const struct heirs *h, const struct heir_owner *owner, bool by_uid)
{
    size_t n = 0;
    for (size_t i = 0; i < h->n; i++)
        n += by_uid ? h->v[i].uid == owner->uid : h->v[i].tenant == owner->tenant;
    for (size_t i = 0; i < h->n_res; i++)
        if (by_uid ? h->res[i].owner.uid == owner->uid : h->res[i].owner.tenant == owner->tenant)
            n += h->res[i].n;
    return n;
}

static size_t room_in(size_t max, size_t used)
{
    return used < max ? max - used : 0;
}

/* The least room left in owner's tenant and uid shares and the node's table. */
static size_t owner_room(const struct heirs *h, const struct heir_owner *o)
{
    size_t r = room_in(HEIRS_MAX, h->n + h->reserved);
    size_t t = room_in(h->tenant_max, heirs_count(h, o, false));
    size_t u = room_in(h->uid_max, heirs_count(h, o, true));
    r = t < r ? t : r;
    return u < r ? u : r;
}

static struct heir_reserved *reserved_of(struct heirs *h, const struct heir_owner *o)
{
    for (size_t i = 0; i < h->n_res; i++)
        if (h->res[i].owner.tenant == o->tenant && h->res[i].owner.uid == o->uid)
            return &h->res[i];
    struct heir_reserved *grown = grow_for_one(h->res, &h->res_cap, h->n_res, sizeof *grown, 8);
    if (!grown)
        return NULL;
    h->res = grown;
    h->res[h->n_res] = (struct heir_reserved){.owner = *o};
    return &h->res[h->n_res++];
}

uint32_t heirs_reserve(struct heirs *h, const struct heir_owner *owner, uint32_t want,
                       uint32_t have)
{
    if (want == 0)
        return 0;
    if (owner_room(h, owner) < 2 * (size_t)want)
        prune(h);
    size_t room = owner_room(h, owner);
    size_t grant = room / 2;
    if (grant == 0 && have == 0 && room > 0)
        grant = 1; /* a fork with no ticket asks for one: any room answers it */
    grant = grant < want ? grant : want;
    struct heir_reserved *r = grant ? reserved_of(h, owner) : NULL;
    if (!r)
        return 0;
    r->n += (uint32_t)grant;
    h->reserved += grant;
    return (uint32_t)grant;
}

void heirs_unreserve(struct heirs *h, const struct heir_owner *owner, uint32_t n)
{
    for (size_t i = 0; n && i < h->n_res; i++) {
        struct heir_reserved *r = &h->res[i];
        if (r->owner.tenant != owner->tenant || r->owner.uid != owner->uid)
            continue;
        uint32_t k = n < r->n ? n : r->n;
        r->n -= k;
        h->reserved -= k;
        if (r->n == 0)
            h->res[i] = h->res[--h->n_res];
        return;
    }
}

/* Whether e's owner has room for one more edge (restored edges have no owner). */
static bool owner_has_room(const struct heirs *h, const struct heir_edge *e)
{
    struct heir_owner o = {.tenant = e->tenant, .uid = e->uid};
    return (e->tenant == HEIRS_NO_TENANT || heirs_count(h, &o, false) < h->tenant_max) &&
           (e->uid == HEIRS_NO_UID || heirs_count(h, &o, true) < h->uid_max);
}

static int no_room(const struct heirs *h, const struct heir_edge *e, char *why, size_t why_len)
{
    struct heir_owner o = {.tenant = e->tenant, .uid = e->uid};
    if (h->n + h->reserved >= HEIRS_MAX)
        snprintf(why, why_len, "kairosd follows no more than %u hand-overs of NVIDIA files in "
                 "all; try again when processes have exited", HEIRS_MAX);
    else if (e->tenant != HEIRS_NO_TENANT && heirs_count(h, &o, false) >= h->tenant_max)
        snprintf(why, why_len, "your tenant's processes already have %u live hand-overs of "
                 "NVIDIA files (forks, inherited or received files), the most kairosd follows "
                 "for one tenant; let some of those processes exit first", h->tenant_max);
    else
        snprintf(why, why_len, "uid %u's processes already have %u live hand-overs of NVIDIA "
                 "files (forks, inherited or received files), the most kairosd follows for "
                 "one user; let some of those processes exit first", e->uid, h->uid_max);
    return KAIROS_ERR_BUSY;
}

/* Adds e, or merges it into the same edge held already (whoever reported that). */
static int add_edge(struct heirs *h, const struct heir_edge *e, char *why, size_t why_len)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i].from_pid == e->from_pid && h->v[i].from_start == e->from_start &&
            h->v[i].pid == e->pid && h->v[i].start == e->start)
            return 0;
    if (h->n + h->reserved >= HEIRS_MAX || !owner_has_room(h, e))
        prune(h);
    if (h->n + h->reserved >= HEIRS_MAX || !owner_has_room(h, e))
        return no_room(h, e, why, why_len);
    struct heir_edge *grown = grow_for_one(h->v, &h->cap, h->n, sizeof *grown, 16);
    if (!grown) {
        snprintf(why, why_len, "kairosd is out of memory");
        return KAIROS_ERR_BUSY;
    }
    h->v = grown;
    h->v[h->n++] = *e;
    if (h->changed)
        h->changed(h->changed_ctx);
    return 0;
}

void heirs_set_changed_hook(struct heirs *h, void (*fn)(void *ctx), void *ctx)
{
    h->changed = fn;
    h->changed_ctx = ctx;
}

static const char *const kind_names[HEIR_KINDS] = {"forked", "exec", "received", "adopted"};

const char *heir_kind_name(enum heir_kind k)
{
    return (unsigned)k < HEIR_KINDS ? kind_names[k] : "?";
}

enum heir_kind heir_kind_parse(const char *name)
{
    unsigned k = 0;
    while (k < HEIR_KINDS && (!name || strcmp(name, kind_names[k])))
        k++;
    return (enum heir_kind)k;
}

/* ---- pids as a process in another pid namespace (a container) names them ---------- */

/* The innermost of pid's pids (the last of NSpid in <proc>/<pid>/status: what it is
 * called in its own namespace), or pid itself when the line is absent; 0: gone. */
static uint32_t inner_pid(const char *proc, uint32_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "%s/%u/status", proc, pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    uint32_t inner = pid;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "NSpid:", 6) != 0)
            continue;
        char *save = NULL;
        for (char *tok = strtok_r(line + 6, " \t\n", &save); tok;
             tok = strtok_r(NULL, " \t\n", &save))
            inner = (uint32_t)strtoul(tok, NULL, 10);
        break;
    }
    fclose(f);
    return inner;
}

/* The child of sender (any of its threads) named ns_pid: by kairosd's pid (inner
 * false), or by the last pid of its NSpid (true, a status file read per child). */
static uint32_t child_named_pass(const struct heirs *h, uint32_t sender, uint32_t ns_pid,
                                 bool inner)
{
    char dir[64];
    snprintf(dir, sizeof dir, "%s/%u/task", h->proc, sender);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    uint32_t found = 0;
    unsigned seen = 0;
    for (struct dirent *e = readdir(d); e && !found && seen < HEIRS_SCAN_MAX; e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[sizeof dir + 2 * sizeof e->d_name];
        snprintf(path, sizeof path, "%s/%s/children", dir, e->d_name);
        FILE *f = fopen(path, "re");
        unsigned long c;
        while (f && !found && seen++ < HEIRS_SCAN_MAX && fscanf(f, "%lu", &c) == 1)
            if (inner ? inner_pid(h->proc, (uint32_t)c) == ns_pid : c == ns_pid)
                found = (uint32_t)c;
        if (f)
            fclose(f);
    }
    closedir(d);
    return found;
}

/* The child of sender (any of its threads) that sender's pid namespace calls
 * ns_pid, as kairosd's pid; 0 when it has none. Through
 * <proc>/<sender>/task/<tid>/children, so a containerised parent's report names its
 * child as it knows it; its own pid first, so that a parent of many children in
 * kairosd's namespace costs no status file per child. */
static uint32_t child_named(const struct heirs *h, uint32_t sender, uint32_t ns_pid)
{
    uint32_t found = child_named_pass(h, sender, ns_pid, false);
    return found ? found : child_named_pass(h, sender, ns_pid, true);
}

/* The process of ref's pid namespace that it calls ns_pid, as kairosd's pid: ns_pid
 * itself when ref is in kairosd's namespace (or it cannot be told), else found
 * among at most HEIRS_SCAN_MAX processes of /proc; 0 when none. */
static uint32_t pid_as_named_by(const struct heirs *h, uint32_t ref, uint32_t ns_pid)
{
    char path[64], ref_ns[64], own_ns[64], ns[64];
    snprintf(path, sizeof path, "%s/%u/ns/pid", h->proc, ref);
    ssize_t n = readlink(path, ref_ns, sizeof ref_ns - 1);
    ssize_t m = readlink("/proc/self/ns/pid", own_ns, sizeof own_ns - 1);
    if (n <= 0 || m <= 0)
        return ns_pid;
    ref_ns[n] = own_ns[m] = 0;
    if (strcmp(ref_ns, own_ns) == 0)
        return ns_pid;
    DIR *d = opendir(h->proc);
    if (!d)
        return 0;
    uint32_t found = 0;
    unsigned seen = 0;
    for (struct dirent *e = readdir(d); e && !found && seen < 16 * HEIRS_SCAN_MAX;
         e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        seen++;
        char link[sizeof e->d_name + 64];
        snprintf(link, sizeof link, "%s/%s/ns/pid", h->proc, e->d_name);
        ssize_t k = readlink(link, ns, sizeof ns - 1);
        if (k <= 0)
            continue;
        ns[k] = 0;
        uint32_t pid = (uint32_t)strtoul(e->d_name, NULL, 10);
        if (strcmp(ns, ref_ns) == 0 && inner_pid(h->proc, pid) == ns_pid)
            found = pid;
    }
    closedir(d);
    return found;
}

int heirs_forked(struct heirs *h, uint32_t sender, const struct heir_owner *owner,
                 const struct kairos_forked *m, char *why, size_t why_len)
{
    uint32_t child = child_named(h, sender, m->child_pid);
    struct heir_edge e = {.from_pid = sender, .pid = child ? child : m->child_pid,
                          .kind = HEIR_FORKED, .tenant = owner->tenant, .uid = owner->uid};
    uint32_t ppid, unused;
    if (proc_stat_read(h->proc, e.pid, &ppid, &e.start) != 0) {
        snprintf(why, why_len, "FORKED: process %u does not exist (any more)", m->child_pid);
        return KAIROS_ERR_INVALID;
    }
    if (ppid != sender || proc_stat_read(h->proc, sender, &unused, &e.from_start) != 0) {
        snprintf(why, why_len, "FORKED: process %u is not your child (its parent is %u); "
                 "report a fork before fork() returns to the parent", m->child_pid, ppid);
        return KAIROS_ERR_PERMISSION;
    }
    return add_edge(h, &e, why, why_len);
}

/* Whether pid has exited: gone from proc, or a zombie (its children reparented). */
static bool exited(const char *proc, uint32_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "%s/%u/stat", proc, pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *paren = strrchr(buf, ')'); /* the name may hold anything */
    return !paren || paren[1] != ' ' || paren[2] == 'Z' || paren[2] == 'X';
}

int heirs_forked_ticket(struct heirs *h, uint32_t sender, uint64_t sender_start,
                        const struct heir_owner *owner, const struct kairos_forked *m,
                        char *why, size_t why_len)
{
    int code = heirs_forked(h, sender, owner, m, why, why_len);
    if (code != KAIROS_ERR_PERMISSION || !sender_start || !exited(h->proc, sender))
        return code;
    /* the sender exited before kairosd read its report: its child was reparented */
    struct heir_edge e = {.from_pid = sender, .from_start = sender_start, .pid = m->child_pid,
                          .kind = HEIR_FORKED, .tenant = owner->tenant, .uid = owner->uid};
    uint32_t ppid;
    if (proc_stat_read(h->proc, e.pid, &ppid, &e.start) != 0 || e.start < sender_start) {
        snprintf(why, why_len, "FORKED: process %u is not a child of the exited pid %u",
                 m->child_pid, sender);
        return KAIROS_ERR_PERMISSION;
    }
    return add_edge(h, &e, why, why_len);
}

struct same_file {
    uint32_t pid, from; /* fd of pid against from's descriptors */
    int fd;
};

static bool is_same_file(struct heirs *h, void *ctx, int other, const char *link)
{
    (void)h;
    (void)link;
    const struct same_file *q = ctx;
    return syscall(SYS_kcmp, (pid_t)q->pid, (pid_t)q->from, KCMP_FILE_TYPE, q->fd, other) == 0;
}

/* Whether descriptor fd of pid is the same open file as one of from's descriptors
 * (at most HEIRS_SCAN_MAX of them are looked at). */
static bool same_file_as_one_of(struct heirs *h, uint32_t pid, int fd, uint32_t from)
{
    struct same_file q = {.pid = pid, .from = from, .fd = fd};
    return walk_fds(h, from, HEIRS_SCAN_MAX, false, is_same_file, &q) == 1;
}

/* The major of the character devices named name in <proc>/devices; 0: none. */
static unsigned chr_major(const struct heirs *h, const char *name)
{
    char path[64], line[128], dev[64];
    snprintf(path, sizeof path, "%s/devices", h->proc);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    unsigned major = 0, m;
    bool chr = false;
    while (!major && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Character devices:", 18) == 0 || strncmp(line, "Block", 5) == 0)
            chr = line[0] == 'C';
        else if (chr && sscanf(line, "%u %63s", &m, dev) == 2 && strcmp(dev, name) == 0)
            major = m;
    }
    fclose(f);
    return major;
}

/* Whether descriptor fd of pid is an NVIDIA device file where memory lives: the GPU
 * backend's own kind of driver file where it knows one (the fake driver's sockets),
 * else a character device of the driver (nvidiactl, nvidiaN: major 195 but for
 * nvidia-modeset; nvidia-uvm's major, as <proc>/devices names it). stat() of the
 * descriptor's /proc link: what it is, not what it is called. */
static bool nvidia_fd(struct heirs *h, uint32_t pid, int fd)
{
    bool is = false;
    if (h->gpu && h->gpu->ops->driver_fd && h->gpu->ops->driver_fd(h->gpu, pid, fd, &is) == 0)
        return is;
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "%s/%u/fd/%d", h->proc, pid, fd);
    if (fd < 0 || stat(path, &st) != 0 || !S_ISCHR(st.st_mode))
        return false;
    unsigned maj = major(st.st_rdev), min = minor(st.st_rdev);
    if (maj == RM_NV_MAJOR)
        return min != 254; /* nvidia-modeset: no memory lives there */
    unsigned uvm = chr_major(h, "nvidia-uvm");
    return uvm && maj == uvm;
}

/* Whether descriptor fd of sender is an NVIDIA device file and the same open file as
 * one of from's descriptors; why filled when it is no such device file. */
static bool holds_file_of(struct heirs *h, uint32_t sender, int fd, uint32_t from, char *why,
                          size_t why_len)
{
    if (!nvidia_fd(h, sender, fd)) {
        snprintf(why, why_len, "INHERITED: your descriptor %d is not an NVIDIA device file "
                 "(/dev/nvidiactl, /dev/nvidiaN, /dev/nvidia-uvm); only those are followed",
                 fd);
        return false;
    }
    return same_file_as_one_of(h, sender, fd, from);
}

int heirs_inherited(struct heirs *h, uint32_t sender, const struct heir_owner *owner,
                    const struct kairos_inherited *m, char *why, size_t why_len)
{
    /* from_pid as the sender's pid namespace names it */
    struct heir_edge e = {.from_pid = pid_as_named_by(h, sender, m->from_pid), .pid = sender,
                          .kind = m->flags & KAIROS_INHERITED_EXEC ? HEIR_EXEC : HEIR_RECEIVED,
                          .tenant = owner->tenant, .uid = owner->uid};
    uint32_t ppid, from_ppid;
    if (proc_stat_read(h->proc, sender, &ppid, &e.start) != 0 || !e.from_pid ||
        proc_stat_read(h->proc, e.from_pid, &from_ppid, &e.from_start) != 0) {
        snprintf(why, why_len, "INHERITED: process %u does not exist (any more)", m->from_pid);
        return KAIROS_ERR_INVALID;
    }
    if ((m->flags & KAIROS_INHERITED_EXEC) && ppid != e.from_pid) {
        snprintf(why, why_len, "INHERITED: process %u is not your parent (%u is)", m->from_pid,
                 ppid);
        return KAIROS_ERR_PERMISSION;
    }
    bool shared = false;
    why[0] = 0;
    for (uint32_t i = 0; i < m->n_fds && !shared; i++)
        shared = holds_file_of(h, sender, m->fds[i], e.from_pid, why, why_len);
    if (!shared) {
        if (!why[0])
            snprintf(why, why_len, "INHERITED: none of your %u descriptor(s) is an NVIDIA "
                     "file process %u has open (kcmp; at most %u of its descriptors are "
                     "looked at)", m->n_fds, m->from_pid, HEIRS_SCAN_MAX);
        return KAIROS_ERR_PERMISSION;
    }
    return add_edge(h, &e, why, why_len);
}

struct shared_file {
    uint32_t child, parent;
    bool sockets;   /* the backend knows its own kind of driver file: sockets count */
    unsigned tried; /* candidates compared so far */
    bool same;
};

static bool is_shared_candidate(struct heirs *h, void *ctx, int fd, const char *link)
{
    struct shared_file *q = ctx;
    if (!driver_link(h, link) && !(q->sockets && strncmp(link, "socket:", 7) == 0))
        return false;
    q->same = same_file_as_one_of(h, q->child, fd, q->parent);
    return q->same || ++q->tried >= 64;
}

/* Whether one of child's descriptors that may be a driver file (a node's link; a
 * socket too where the backend knows its own kind of driver file, as the tests'
 * fake driver's are sockets) is the same open file as one of parent's (kcmp). At
 * most 64 candidates are tried. */
static bool shares_a_file(struct heirs *h, uint32_t child, uint32_t parent)
{
    struct shared_file q = {.child = child, .parent = parent,
                            .sockets = h->gpu && h->gpu->ops->driver_file_open};
    walk_fds(h, child, HEIRS_SCAN_MAX, true, is_shared_candidate, &q);
    return q.same;
}

void heirs_adopt_children(struct heirs *h, uint32_t pid, const struct heir_owner *owner)
{
    uint64_t start;
    uint32_t unused;
    if (proc_stat_read(h->proc, pid, &unused, &start) != 0)
        return;
    char dir[64];
    snprintf(dir, sizeof dir, "%s/%u/task", h->proc, pid);
    DIR *d = opendir(dir);
    if (!d)
        return;
    unsigned seen = 0;
    for (struct dirent *e = readdir(d); e && seen < HEIRS_SCAN_MAX; e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[sizeof dir + 2 * sizeof e->d_name];
        snprintf(path, sizeof path, "%s/%s/children", dir, e->d_name);
        FILE *f = fopen(path, "re");
        unsigned long c;
        while (f && seen++ < HEIRS_SCAN_MAX && fscanf(f, "%lu", &c) == 1) {
            struct heir_edge edge = {.from_pid = pid, .from_start = start, .pid = (uint32_t)c,
                                     .kind = HEIR_ADOPTED, .tenant = owner->tenant,
                                     .uid = owner->uid};
            char why[KAIROS_MSG_MAX];
            if (heirs_has_driver_file(h, edge.pid) && shares_a_file(h, edge.pid, pid) &&
                proc_stat_read(h->proc, edge.pid, &unused, &edge.start) == 0)
                (void)add_edge(h, &edge, why, sizeof why);
        }
        if (f)
            fclose(f);
    }
    closedir(d);
}

/* Whether a holder is reached from pid (start time start, or any when 0). *budget
 * bounds the edges looked at in one question (handovers can form a graph with many
 * paths, and pids are reused): when it runs out the answer is yes, erring towards
 * charging. */
static bool hold_from(struct heirs *h, uint32_t pid, uint64_t start, unsigned *budget)
{
    for (size_t i = 0; i < h->n; i++) {
        const struct heir_edge *e = &h->v[i];
        if (e->from_pid != pid || (start && e->from_start != start))
            continue;
        if (*budget == 0)
            return true;
        (*budget)--;
        if (proc_stat_alive(h->proc, e->pid, e->start) && heirs_has_driver_file(h, e->pid))
            return true;
        if (hold_from(h, e->pid, e->start, budget))
            return true;
    }
    return false;
}

bool heirs_hold(struct heirs *h, uint32_t pid)
{
    return heirs_hold_as(h, pid, 0);
}

bool heirs_hold_as(struct heirs *h, uint32_t pid, uint64_t start)
{
    if ((!start || proc_stat_alive(h->proc, pid, start)) && heirs_has_driver_file(h, pid))
        return true; /* the process itself, after an exec that kept a descriptor */
    unsigned budget = HEIRS_WALK_MAX;
    return hold_from(h, pid, start, &budget);
}

uint64_t heirs_start_of(struct heirs *h, uint32_t pid)
{
    uint32_t ppid;
    uint64_t start = 0;
    if (proc_stat_read(h->proc, pid, &ppid, &start) == 0)
        return start;
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i].from_pid == pid && h->v[i].from_start > start)
            start = h->v[i].from_start;
    return start;
}

int heirs_restore(struct heirs *h, const struct heir_edge *e, char *why, size_t why_len)
{
    uint32_t ppid = 0;
    uint64_t start;
    bool holder = proc_stat_read(h->proc, e->pid, &ppid, &start) == 0 && start == e->start;
    bool source = proc_stat_alive(h->proc, e->from_pid, e->from_start);
    if (!holder && !source)
        return 1;
    if ((unsigned)e->kind >= HEIR_KINDS) {
        snprintf(why, why_len, "unknown kind of hand-over");
        return KAIROS_ERR_INVALID;
    }
    if (e->kind != HEIR_RECEIVED && e->start < e->from_start) {
        snprintf(why, why_len, "process %u started before process %u, so it cannot have been "
                 "%s by it", e->pid, e->from_pid, e->kind == HEIR_EXEC ? "spawned" : "forked");
        return KAIROS_ERR_PERMISSION;
    }
    if (holder && source && e->kind != HEIR_RECEIVED && ppid != e->from_pid) {
        snprintf(why, why_len, "process %u is not a child of process %u (its parent is %u)",
                 e->pid, e->from_pid, ppid);
        return KAIROS_ERR_PERMISSION;
    }
    if (holder && source && e->kind == HEIR_RECEIVED && !shares_a_file(h, e->pid, e->from_pid)) {
        snprintf(why, why_len, "process %u has no file of process %u open (kcmp)", e->pid,
                 e->from_pid);
        return KAIROS_ERR_PERMISSION;
    }
    struct heir_edge mine = *e; /* the state file says no owner: counted as no one's */
    mine.tenant = HEIRS_NO_TENANT;
    mine.uid = HEIRS_NO_UID;
    return add_edge(h, &mine, why, why_len);
}

size_t heirs_sources_of(struct heirs *h, uint32_t pid, uint32_t *from, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < h->n && n < cap; i++)
        if (h->v[i].pid == pid && proc_stat_alive(h->proc, pid, h->v[i].start))
            from[n++] = h->v[i].from_pid;
    return n;
}

bool heirs_hold_cb(void *ctx, uint32_t pid)
{
    return heirs_hold(ctx, pid);
}
