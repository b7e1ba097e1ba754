/* heirs.h - which other processes hold a process's NVIDIA files.
 *
 * The driver frees an RM client's memory at the last close of the open file it
 * lives on, wherever that file went: a forked child shares it, an exec'd program
 * keeps a descriptor without O_CLOEXEC, SCM_RIGHTS hands one to another process.
 * This module remembers those hand-overs, as FORKED and INHERITED (proto.h)
 * report them and /proc confirms them, as edges (from pid and start time, to pid
 * and start time), and answers whether a departed process's files may still be
 * alive: the process itself still holds a driver file (it exec'd), or a process
 * it handed them to does (following the edges, so a grandchild counts), with a
 * descriptor on a node of the driver open. linger.h keeps the departed process's
 * charge while that is so. It errs towards "alive": a holder that closed the
 * inherited file but opened its own keeps the charge until it closes that too.
 *
 * Nothing a client says is taken on trust: FORKED is accepted only when /proc
 * says the sender is the child's parent (the shim reports before fork() returns
 * to the parent, so the parent is alive); INHERITED only when one of the sender's
 * descriptors is an NVIDIA device file (a character device of the driver's majors,
 * or the GPU backend's own kind of driver file) and the same open file as one of
 * from_pid's (kcmp(2)), and for EXEC from_pid is the sender's parent. An edge never
 * moves a charge to another tenant: it only keeps the departed process's own
 * tenant charged. (handle_handovers.c takes both only from a tenant's member.)
 *
 * Each edge has an owner, the tenant and uid of the member that reported it, and
 * no owner holds more than HEIRS_TENANT_MAX (a tenant) or HEIRS_UID_MAX (a uid)
 * edges: a tenant that fills its share is refused (KAIROS_ERR_BUSY) while the
 * others are not. A report of an edge already held is merged into it. Edges whose
 * holder is gone and which lead nowhere (it handed nothing on) are dropped when
 * room is needed, as are those both of whose processes are gone. Fork tickets
 * (heirs_reserve) are edges reserved ahead and count in the shares like edges.
 *
 * Pids in a report are the sender's, as its pid namespace names them (a process in a
 * container): a forked child is found among the sender's children
 * (/proc/PID/task/TID/children, matched by NSpid), another process among those of
 * the sender's namespace.
 *
 * The edges outlive a kairosd restart: handovers.h writes them into the state file
 * and, at start, gives them back through heirs_restore, which believes each only as
 * far as /proc can still check it.
 *
 * Which descriptors are the driver's: their link under /proc is a node of the
 * driver (the GPU backend's device directory, /dev by default), or, where the GPU
 * backend answers it (the scripted GPU of the tests, whose driver files are
 * sockets), what the backend says.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_HEIRS_H
#define KAIROS_DAEMON_HEIRS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/gpu/gpu.h"
#include "kairos/proto.h"

/* Edges remembered: in all (a memory guard: 32 uids filling their share reach it),
 * per tenant and per uid (a uid may serve several tenants); the dead are pruned to
 * make room, at most once per HEIRS_PRUNE_MS while full. */
#define HEIRS_MAX 65536
#define HEIRS_TENANT_MAX 1024
#define HEIRS_UID_MAX 2048
#define HEIRS_PRUNE_MS 200
#define HEIRS_NO_TENANT 0u       /* an edge of no tenant's (restored from the state file) */
#define HEIRS_NO_UID UINT32_MAX

/* How kairosd learnt of a hand-over (kept across a restart: handovers.h). */
enum heir_kind {
    HEIR_FORKED,   /* FORKED: pid is from_pid's child */
    HEIR_EXEC,     /* INHERITED, EXEC: pid was spawned by from_pid with its files */
    HEIR_RECEIVED, /* INHERITED, RECEIVED: pid received a file of from_pid's */
    HEIR_ADOPTED,  /* found at a reattach: from_pid's child sharing one of its files */
    HEIR_KINDS
};

struct heir_edge {
    uint32_t from_pid, pid;
    uint64_t from_start, start; /* /proc/<pid>/stat starttime: a reused pid is not them */
    enum heir_kind kind;
    uint32_t tenant, uid; /* the owner: who reported it (HEIRS_NO_*: restored) */
};

/* Whose a reported edge is: the reporting member's tenant (its ledger id) and uid. */
struct heir_owner {
    uint32_t tenant, uid;
};

/* Fork tickets an owner holds: edges reserved ahead, counted in its shares. */
struct heir_reserved {
    struct heir_owner owner;
    uint32_t n;
};

struct heirs {
    const char *proc;              /* "/proc" (tests: another root) */
    struct gpu_backend *gpu;       /* may be NULL */
    char prefix[64];               /* the driver's nodes: "<devdir>/nvidia" */
    struct heir_edge *v;
    size_t n, cap;
    void (*changed)(void *ctx); /* told when an edge is added (handovers.h saves them) */
    void *changed_ctx;
    uint64_t pruned_ms;         /* the last prune made for room (CLOCK_MONOTONIC) */
    unsigned prune_ms;          /* HEIRS_PRUNE_MS (tests: 0) */
    unsigned tenant_max, uid_max; /* HEIRS_TENANT_MAX, HEIRS_UID_MAX (tests: fewer) */
    struct heir_reserved *res;  /* fork tickets held, per owner (heirs_reserve) */
    size_t n_res, res_cap;
    size_t reserved;            /* their sum */
};

/* gpu may be NULL (then the driver's nodes are /dev/nvidia*). proc NULL: "/proc". */
void heirs_init(struct heirs *h, const char *proc, struct gpu_backend *gpu);
void heirs_fini(struct heirs *h);

/* FORKED from sender, a member of owner: 0, or a KAIROS_ERR_* code with why filled
 * (KAIROS_ERR_BUSY: the owner holds its share of edges). */
int heirs_forked(struct heirs *h, uint32_t sender, const struct heir_owner *owner,
                 const struct kairos_forked *m, char *why, size_t why_len);
/* FORKED with KAIROS_FORKED_TICKET from sender (started at sender_start), which
 * spent one of owner's tickets (the caller unreserved it first). As heirs_forked
 * while sender lives; once it has exited (its child reparented), the child is
 * believed when it lives and started no earlier than sender: an edge can only keep
 * sender's own tenant charged. */
int heirs_forked_ticket(struct heirs *h, uint32_t sender, uint64_t sender_start,
                        const struct heir_owner *owner, const struct kairos_forked *m,
                        char *why, size_t why_len);

/* Fork tickets (issue 25, item 9): up to want edges reserved for owner ahead of its
 * forks, counted in its tenant and uid shares (and the node's) like edges. Grants
 * at most half the room left in each (so tickets never fill a share), but one to an
 * owner holding none (have 0) while any room is left; returns how many. */
uint32_t heirs_reserve(struct heirs *h, const struct heir_owner *owner, uint32_t want,
                       uint32_t have);
/* Gives n of owner's tickets back (spent, or its connection closed). */
void heirs_unreserve(struct heirs *h, const struct heir_owner *owner, uint32_t n);

/* INHERITED from sender, a member of owner: as heirs_forked. */
int heirs_inherited(struct heirs *h, uint32_t sender, const struct heir_owner *owner,
                    const struct kairos_inherited *m, char *why, size_t why_len);

/* pid (a member of owner) reattached after a kairosd restart (which forgot the
 * hand-overs): its children that hold a file it holds too (kcmp) are remembered
 * again, as FORKED would, within owner's share. */
void heirs_adopt_children(struct heirs *h, uint32_t pid, const struct heir_owner *owner);
/* How many edges owner's tenant (by_uid false) or uid (true) holds now. */
size_t heirs_count(const struct heirs *h, const struct heir_owner *owner, bool by_uid);

/* Whether the files of departed process pid may still be alive: pid or a process
 * it handed them on to (transitively) holds a driver file. */
bool heirs_hold(struct heirs *h, uint32_t pid);
/* heirs_hold for the process pid that started at start (0: unknown, as heirs_hold):
 * only edges from that process count, and pid itself only while it is that process. */
bool heirs_hold_as(struct heirs *h, uint32_t pid, uint64_t start);
/* The start time of process pid as kairosd knows it: /proc's while it lives, else
 * that of the newest edge from it; 0 when unknown. */
uint64_t heirs_start_of(struct heirs *h, uint32_t pid);

/* fn(ctx) after each edge added (may be NULL). */
void heirs_set_changed_hook(struct heirs *h, void (*fn)(void *ctx), void *ctx);
/* An edge saved before a restart (handovers.h), believed only as far as /proc can
 * still check it: each process named is the one it was (pid and start time) or gone;
 * a forked, exec'd or adopted holder started no earlier than its source, and while
 * both live it is the source's child; while both live a receiver's descriptor is
 * one of the source's open files (kcmp). 0: restored; 1: both processes are gone
 * (nothing to keep); a KAIROS_ERR_* code with why filled: refused. */
int heirs_restore(struct heirs *h, const struct heir_edge *e, char *why, size_t why_len);
/* "forked", "exec", "received", "adopted"; heir_kind_parse: the kind of a name, or
 * HEIR_KINDS for none. */
const char *heir_kind_name(enum heir_kind k);
enum heir_kind heir_kind_parse(const char *name);
/* The predicate for linger_deps.holds (ctx: a struct heirs). */
bool heirs_hold_cb(void *ctx, uint32_t pid);

/* The processes whose files pid holds by a hand-over kairosd verified (edges into
 * pid, while pid is the process it was): up to cap into from; returns how many. */
size_t heirs_sources_of(struct heirs *h, uint32_t pid, uint32_t *from, size_t cap);

/* Whether process pid has a descriptor on a node of the driver open. */
bool heirs_has_driver_file(struct heirs *h, uint32_t pid);

#endif /* KAIROS_DAEMON_HEIRS_H */
