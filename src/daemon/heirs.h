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
 * descriptors is the same open file as one of from_pid's (kcmp(2)), and for EXEC
 * from_pid is the sender's parent. An edge never moves a charge to another tenant:
 * it only keeps the departed process's own tenant charged.
 *
 * Pids in a report are the sender's, as its pid namespace names them (a process in a
 * container): a forked child is found among the sender's children
 * (/proc/PID/task/TID/children, matched by NSpid), another process among those of
 * the sender's namespace.
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

#include "daemon/gpu.h"
#include "kairos/proto.h"

#define HEIRS_MAX 4096 /* edges remembered; the dead are pruned to make room */

struct heir_edge {
    uint32_t from_pid, pid;
    uint64_t from_start, start; /* /proc/<pid>/stat starttime: a reused pid is not them */
};

struct heirs {
    const char *proc;              /* "/proc" (tests: another root) */
    struct gpu_backend *gpu;       /* may be NULL */
    char prefix[64];               /* the driver's nodes: "<devdir>/nvidia" */
    struct heir_edge *v;
    size_t n, cap;
};

/* gpu may be NULL (then the driver's nodes are /dev/nvidia*). proc NULL: "/proc". */
void heirs_init(struct heirs *h, const char *proc, struct gpu_backend *gpu);
void heirs_fini(struct heirs *h);

/* FORKED from sender: 0, or a KAIROS_ERR_* code with why filled. */
int heirs_forked(struct heirs *h, uint32_t sender, const struct kairos_forked *m, char *why,
                 size_t why_len);
/* INHERITED from sender: 0, or a KAIROS_ERR_* code with why filled. */
int heirs_inherited(struct heirs *h, uint32_t sender, const struct kairos_inherited *m,
                    char *why, size_t why_len);

/* pid reattached after a kairosd restart (which forgot the hand-overs): its children
 * that hold a file it holds too (kcmp) are remembered again, as FORKED would. */
void heirs_adopt_children(struct heirs *h, uint32_t pid);

/* Whether the files of departed process pid may still be alive: pid or a process
 * it handed them on to (transitively) holds a driver file. */
bool heirs_hold(struct heirs *h, uint32_t pid);
/* The predicate for linger_set_holder_check (ctx: a struct heirs). */
bool heirs_hold_cb(void *ctx, uint32_t pid);

/* The processes whose files pid holds by a hand-over kairosd verified (edges into
 * pid, while pid is the process it was): up to cap into from; returns how many. */
size_t heirs_sources_of(struct heirs *h, uint32_t pid, uint32_t *from, size_t cap);

/* Whether process pid has a descriptor on a node of the driver open. */
bool heirs_has_driver_file(struct heirs *h, uint32_t pid);

#endif /* KAIROS_DAEMON_HEIRS_H */
