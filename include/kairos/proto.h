/* proto.h - the wire protocol between kairosd and its peers (shims and the CLI).
 *
 * Transport: a unix SOCK_SEQPACKET socket (default /run/kairos/kairosd.sock), so
 * every message arrives whole, the daemon learns each peer's pid/uid with
 * SO_PEERCRED, and a process's death is seen at once as a hang-up of its socket.
 * Messages are fixed little-endian structs of our own, because the shim links
 * nothing but libc: a header, then one body whose size is exact for its type.
 * A peer that sends a wrong size, an unknown type or a bad field gets an ERROR and
 * is disconnected; it never takes the daemon down.
 *
 * Requests carry a sequence number; every reply echoes it. Only the messages marked
 * "no reply" are one-way.
 *
 * Change history:
 *   1 (0.1.0) first version: HELLO, CHARGE/COMMIT/RELEASE, TENANT_SET, TENANT_DEL,
 *             PS, STATUS.
 *   1 (0.1.0, daemon branch) compatible additions, same version number:
 *             - kairos_tenant_set.pad became .flags, with KAIROS_TENANT_EPHEMERAL
 *               (0 keeps the old meaning); other bits are refused.
 *             - bodies documented: PS and OK have an empty body (size 0); a PS
 *               on a daemon without tenants is answered by one PS_REPLY with an
 *               empty tenant name, KAIROS_PS_LAST, and n_gpus = the node's GPU
 *               count (so a client always learns it); nothing else is set.
 *             - KAIROS_BYTES_MAX: byte counts above it are refused as absurd.
 *             - a CHARGE of 0 bytes is a query: the GRANT carries the tenant's
 *               quota and holdings on that GPU, nothing is reserved and no COMMIT
 *               follows (the shim's memory view used it; it now reads the CREDIT
 *               replies it keeps, and kairosd still answers the query).
 *             - TIME_POLICY (daemon -> shim, unsolicited, no reply): the time
 *               control a process applies to its channel groups on one GPU. A
 *               shim receives it between the replies it waits for, on the same
 *               connection, and must accept it at any time after WELCOME.
 *             - PS_REPLY grew from 720 to 1424 bytes: per GPU the tenant's
 *               compute policy (share, limit, priority), its target, what it got
 *               over the last period and the last minute, its pause window and
 *               the periods it spent paused (kairos ps, kairos top). A CLI and a
 *               daemon of before and after this change do not understand each
 *               other's PS (the exact-size rule): upgrade them together.
 *             - TENANT_SET grew compute[KAIROS_MAX_GPUS] (struct kairos_compute:
 *               share, limit and priority per GPU for tenants created at run
 *               time), from 200 to 392 bytes. The 200-byte body of an older
 *               kairos is still accepted (no compute change); an older kairosd
 *               refuses the 392-byte one by its size.
 *   2 (issue 10) membership decided by kairosd; a version-1 peer is refused
 *             (KAIROS_ERR_VERSION) and must be upgraded with kairosd:
 *             - HELLO's tenant is a request: kairosd admits the peer only when
 *               SO_PEERCRED (uid, gid, pid) and /proc/<pid>/cgroup match the
 *               tenant's members rules, the peer or an ancestor was admitted
 *               (TENANT_ADMIT), or the peer is an administrator; otherwise
 *               ERROR KAIROS_ERR_PERMISSION naming the rule to change.
 *             - HELLO flag KAIROS_HELLO_PLACE with an empty tenant: the process
 *               names none (a node whose shim.conf says register: always);
 *               kairosd places it by admission or cgroups rule, or refuses it.
 *             - TENANT_MEMBERS (19, administrators): a tenant's members rules
 *               (users, groups, cgroups), replacing those it had.
 *             - TENANT_ADMIT (20): admit a process (and its descendants) to a
 *               tenant; administrators for any pid, others for themselves when
 *               the tenant's rules allow them. An admission binds: an admitted
 *               process joins its tenant whatever HELLO names.
 *             - PS_REPLY pids/n_pids: every member process for administrators;
 *               for others only the processes running under their own uid.
 *             - TENANT_SET quota[i] may be KAIROS_QUOTA_PERCENT | ppm: kairosd
 *               resolves the percentage with the GPU's memory (kairos run --mem
 *               80% no longer needs NVML in the CLI).
 *             - REATTACH held[] is bounded: never more than the tenant's quota
 *               leaves, nor than the GPU backend reports for the process where
 *               it can (what is counted is logged).
 *             - RUNNABLE (7, shim -> daemon, no reply) and the time-policy flag
 *               KAIROS_TIME_REPORT that asks for it (issue 11): a daemon
 *               that never sets the flag never receives one.
 *   3 (issue 9)
 *             - managed memory: CHARGE flags KAIROS_CHARGE_MANAGED and GRANT
 *               reason (both were pad, 0), TENANT_SET flags
 *               KAIROS_TENANT_MANAGED_CHARGE / _REFUSE (the tenant's policy);
 *               a granted managed range is held at once (no COMMIT).
 *             - credit: CREDIT (21, both ways) and CREDIT_RECALL (22, daemon ->
 *               shim): a process allocates within credit granted ahead, with no
 *               round trip (docs/memory.md); REATTACH held[] includes its credit.
 *             - FORKED (5) and INHERITED (6): who else holds a process's NVIDIA
 *               files (a forked child, a program started with inherited or
 *               received descriptors), checked by kairosd through /proc, so that
 *               a departed process's charge stays while they hold its memory.
 *   3, compatible additions (issues 9 and 11, third session of 2026-12-03): the
 *             number stays 3, since no existing layout changed and a shim of
 *             before sends none of them (so processes running through a kairosd
 *             upgrade keep working); a kairosd of before refuses them as unknown,
 *             so upgrade libkairos.so and kairosd together:
 *             - RUNNABLE flag KAIROS_RUNNABLE_WAKE: a process back from an idle
 *               report has work queued (sent only to a daemon whose policy asks
 *               for reports).
 *             - SHARED (24, shim -> daemon, reply OK/ERROR): the sender made one of
 *               its RM objects importable by other processes (RM_SHARE,
 *               NV0000_CTRL_CMD_CLIENT_SHARE_OBJECT).
 *             - IMPORTED (23, shim -> daemon, reply OK/ERROR): the sender is about
 *               to dup another process's shared object (RM_DUP_OBJECT naming a
 *               client it does not own: cudaIpcOpenMemHandle), or that import
 *               ended; kairosd keeps the exporter's charge while it lives.
 *             - CREDIT reply flag KAIROS_CREDIT_ALL: near the quota, with no
 *               other member contending, all the room left is granted and kept
 *               (no round trip per allocation; a shim of before takes it as
 *               plain credit).
 *             - CREDIT flag KAIROS_CREDIT_REVOKED from a shim: it read the
 *               revocation; until then kairosd keeps counting revoked credit (a
 *               shim of before never says so: its revoked credit stays counted
 *               until it leaves, and what waits for that room is refused after
 *               1 s).
 *             - SHARED grew flags, gpu, bytes (16 -> 32 bytes; only this
 *               session's shims send SHARED at all) and the flag
 *               KAIROS_SHARED_FREED: the sender freed a shared object (no reply);
 *               kairosd keeps its bytes charged to the sender's tenant while a
 *               verified import of it lives, else nothing.
 *             - CREDIT flag KAIROS_CREDIT_LAST (shim -> daemon, on the message
 *               a process sends as it exits): kairosd counts no credit for it
 *               after that message, so credit granted in a reply that crossed it
 *               is not charged to the tenant while the process's memory lingers.
 *             - RUNNABLE.pad became .progress_us, with the flag
 *               KAIROS_RUNNABLE_PROGRESS: how long the channels moved (a shim of
 *               before sends neither, and kairosd falls back on NVML's use).
 *             - RUNNABLE flag KAIROS_RUNNABLE_IDLE: an early report once the
 *               process has had nothing queued for KAIROS_IDLE_EARLY_MS.
 *             - TIME_POLICY timeslice_us 0 (issue 23, same layout): the
 *               application's own timeslices, given back to each channel group
 *               if the shim had set others; a shim of before left the last one
 *               it set.
 *   3, compatible additions (issue 23): the number stays 3, and a kairos and a
 *             kairosd of before and after understand each other's PS:
 *             - PS may carry a body, struct kairos_ps, whose flag KAIROS_PS_HOLDS
 *               asks for whole PS_REPLYs: 3024 bytes, the 1424 of before
 *               (KAIROS_PS_REPLY_SIZE_V1) then per GPU what held the tenant back
 *               from running as it would natively (another tenant's share, its
 *               limit, the yield beside a latency tenant: KAIROS_HOLD_*), now,
 *               over the last minute and since it got its policy, with
 *               compute_flags KAIROS_PS_COMPUTE_HOLDS. A PS without a body (a
 *               kairos of before) is answered as before, by the first 1424 bytes
 *               of each reply. A kairosd of before refuses a PS with a body (its
 *               exact-size rule: ERROR KAIROS_ERR_PROTOCOL, connection closed);
 *               kairos then asks again without one on a new connection and shows
 *               the holds as unknown.
 *   3, compatible changes (issue 25, items 1 and 4): the number stays 3, no layout
 *             changed:
 *             - FORKED and INHERITED only from a tenant's member: ERROR
 *               KAIROS_ERR_NOT_REGISTERED from any other peer (a receiver outside
 *               every tenant was a witness before; a shim registers first).
 *             - KAIROS_ERR_BUSY for FORKED and INHERITED: the sender's tenant or
 *               uid holds its share of live hand-overs; the shim fails the fork.
 *             - INHERITED counts only descriptors that are NVIDIA device files.
 *   3, compatible additions (issue 25): the number stays 3.
 *             - PS_REPLY flag KAIROS_PS_REMOVED: a tenant a configuration reload
 *               removed while it still had processes or memory; a kairos of before
 *               ignores the bit (it shows the tenant as before).
 *             - CREDIT held and COMMIT actual: counted only within what kairosd
 *               granted the process and the quota's room (no layout change).
 *   3, compatible additions (issue 25, item 2): the number stays 3. A shim of before
 *             names no bytes in SHARED: its shares are taken as of no device memory
 *             and keep no charge after a free; upgrade libkairos.so with kairosd:
 *             - SHARED without FREED carries the object's gpu and bytes (were 0);
 *               kairosd refuses a share that does not fit in what the ledger
 *               charges the sender, and a FREED keeps at most the bytes shared.
 *             - SHARED and IMPORTED are bounded per process, tenant, uid and node
 *               (KAIROS_IPC_*), refused beyond; a BEGIN of an object the sender
 *               imports already is one import, counted.
 *             - a refused BEGIN makes the shim fail the dup.
 *   3, compatible additions (issue 25, item 9): the number stays 3. Both kinds of
 *             shim work with both kinds of kairosd:
 *             - HELLO flag KAIROS_HELLO_FORK_TICKETS: the shim wants fork tickets.
 *               A kairosd of before refuses the flag (KAIROS_ERR_INVALID); the shim
 *               then says HELLO again without it and reports forks as before.
 *             - FORK_TICKETS (25, both ways, no reply by sequence): the shim asks to
 *               hold want tickets; kairosd pushes how many it holds (after the
 *               HELLO with the flag, and after each ask). A ticket is a hand-over
 *               reserved ahead in the sender's tenant and uid share (heirs.h).
 *             - FORKED.pad became .flags, with KAIROS_FORKED_TICKET: the report
 *               spends a ticket and has no reply (the fork did not wait for one).
 *               A shim of before sends flags 0 and waits for OK/ERROR as before.
 *   3, compatible additions (issue 25, item 10): the number stays 3; a shim and a
 *             kairosd of before and after work together (each new part is used only
 *             once both sides said they know it):
 *             - CREDIT reply flag KAIROS_CREDIT_NOTICES: this kairosd sends ROOM
 *               notices (a shim of before ignores the bit).
 *             - CREDIT flag KAIROS_CREDIT_NOTICE from a shim (only once a reply
 *               said NOTICES, so a kairosd of before never sees it): it reads ROOM.
 *               A refusal of such a request that grants nothing is followed, on the
 *               same connection, by one ROOM for that GPU when the room the member
 *               could have had grows or the quota changes; meanwhile the shim
 *               answers allocations at least as large as the refused one itself
 *               (out of memory, no message), for 1 s at most.
 *             - ROOM (26, daemon -> shim, unsolicited, no reply): the notice.
 *             - metrics: kairos_tenant_grant_requests_total (CREDIT requests and
 *               CHARGEs a tenant's processes made).
 *   3, compatible additions (issue 24, space mode): the number stays 3; a shim and a
 *             kairosd of before and after work together:
 *             - HELLO flag KAIROS_HELLO_SPACE: the shim will ask ROUTE. A kairosd of
 *               before refuses the flag (KAIROS_ERR_INVALID); the shim then says HELLO
 *               again without its new flags and runs its processes as time tenants.
 *             - ROUTE (27, shim -> daemon, members only, reply ROUTED or ERROR): how
 *               this process reaches the GPU: time sharing, or as an MPS client of its
 *               tenant's fault domain (the pipe folder of the domain's control daemon,
 *               which kairosd starts if needed, the active thread percentage and the
 *               client priority). An ERROR (MPS unavailable, a bound) refuses the
 *               process the GPU with its sentence.
 *   3, compatible additions (issue 24, kairos run --fault-domain): the number stays 3; a
 *             kairos and a kairosd of before and after work together but for the new
 *             option:
 *             - TENANT_SET grew fault_domain[KAIROS_NAME_MAX] after compute[] (from 392
 *               to 456 bytes): the tenant's fault domain (space mode), "" for none, for
 *               tenants created at run time, and only a domain the configuration
 *               declares (space: domains:). The 392-byte body
 *               (KAIROS_TENANT_SET_SIZE_V1) and the 200-byte one are still accepted and
 *               leave the domain as it is. A kairosd of before refuses the 456-byte
 *               body by its size (ERROR KAIROS_ERR_PROTOCOL, connection closed): kairos
 *               sends it only for --fault-domain, and then says that this kairosd is
 *               too old for the option.
 *   3, compatible additions (issue 24, faults): the number stays 3:
 *             - PS flag KAIROS_PS_FAULTS (with KAIROS_PS_HOLDS): every PS_REPLY is the
 *               whole struct kairos_ps_reply, the 3024 bytes of before
 *               (KAIROS_PS_REPLY_SIZE_V2) then the tenant's fault domain and the GPU
 *               faults kairosd attributed to it (caused, lost work, the last). A
 *               kairosd of before refuses the flag (KAIROS_ERR_INVALID); kairos asks
 *               again with KAIROS_PS_HOLDS alone and shows no faults.
 */
#ifndef KAIROS_PROTO_H
#define KAIROS_PROTO_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define KAIROS_PROTO_MAGIC 0x4b524f53u /* "KROS" */
#define KAIROS_PROTO_VERSION 3u
#define KAIROS_DEFAULT_SOCKET "/run/kairos/kairosd.sock"

#define KAIROS_NAME_MAX 64      /* tenant names, NUL-terminated, [A-Za-z0-9._-] */
#define KAIROS_UUID_MAX 48      /* "GPU-xxxxxxxx-..." */
#define KAIROS_MSG_MAX 256      /* human-readable error text */
#define KAIROS_MAX_GPUS 16
#define KAIROS_MAX_TENANTS 4096 /* tenants one kairosd keeps, declared and made at run time */
#define KAIROS_BYTES_MAX (1ull << 50) /* 1 PiB: any byte count above is refused as absurd */

enum kairos_msg_type {
    /* shim -> daemon */
    KAIROS_MSG_HELLO = 1,       /* register this process as a tenant's member */
    KAIROS_MSG_CHARGE = 2,      /* reserve bytes before a vidmem allocation */
    KAIROS_MSG_COMMIT = 3,      /* the allocation's outcome: keep (actual size) or undo; no reply */
    KAIROS_MSG_RELEASE = 4,     /* bytes freed; no reply */
    KAIROS_MSG_FORKED = 5,      /* a child of this process holds its NVIDIA files; reply OK */
    KAIROS_MSG_INHERITED = 6,   /* this process holds another's NVIDIA files; reply OK */
    KAIROS_MSG_RUNNABLE = 7,    /* runnable time on one GPU since the last; no reply */
    /* CLI -> daemon */
    KAIROS_MSG_TENANT_SET = 16, /* create a tenant or change its quotas (admin) */
    KAIROS_MSG_TENANT_DEL = 17, /* remove a tenant without processes (admin) */
    KAIROS_MSG_PS = 18,         /* list tenants, processes, memory */
    KAIROS_MSG_TENANT_MEMBERS = 19, /* who may join a tenant (admin) */
    KAIROS_MSG_TENANT_ADMIT = 20,   /* admit a process and its descendants to a tenant */
    /* shim <-> daemon */
    KAIROS_MSG_CREDIT = 21,     /* shim: report, give back, ask; daemon: the reply (same seq) */
    KAIROS_MSG_CREDIT_RECALL = 22, /* daemon -> shim, unsolicited: give back unused credit */
    KAIROS_MSG_IMPORTED = 23,   /* shim: dups another process's shared object, or that ended */
    KAIROS_MSG_SHARED = 24,     /* shim: made one of its objects importable; reply OK */
    KAIROS_MSG_FORK_TICKETS = 25, /* shim: hold this many fork tickets; daemon: how many it
                                   * holds (a push); see struct kairos_fork_tickets */
    KAIROS_MSG_ROOM = 26,       /* daemon -> shim, unsolicited, no reply: a refusal may
                                 * fit now (a later addition to 3) */
    KAIROS_MSG_ROUTE = 27,      /* shim: how does this process reach the GPU? (space mode) */
    KAIROS_MSG_ENDING = 28,     /* shim: a SIGTERM ends this MPS client's process; no reply */
    /* daemon -> peer */
    KAIROS_MSG_OK = 32,
    KAIROS_MSG_ERROR = 33,
    KAIROS_MSG_WELCOME = 34,    /* reply to HELLO */
    KAIROS_MSG_GRANT = 35,      /* reply to CHARGE */
    KAIROS_MSG_PS_REPLY = 36,   /* one tenant per message; the last has KAIROS_PS_LAST */
    KAIROS_MSG_TIME_POLICY = 37, /* daemon -> shim, unsolicited, no reply: time control */
    KAIROS_MSG_ROUTED = 39,     /* reply to ROUTE */
};

struct kairos_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t size;   /* of the body that follows */
    uint32_t seq;
};

/* Error codes (ERROR.code), each with a message saying what to do. */
enum kairos_err {
    KAIROS_ERR_PROTOCOL = 1,    /* malformed message */
    KAIROS_ERR_VERSION = 2,     /* unsupported protocol version */
    KAIROS_ERR_NO_TENANT = 3,   /* unknown tenant */
    KAIROS_ERR_PERMISSION = 4,  /* not an administrator, or not allowed into the tenant */
    KAIROS_ERR_INVALID = 5,     /* bad field value (name, size, gpu) */
    KAIROS_ERR_BUSY = 6,        /* tenant still has processes */
    KAIROS_ERR_NOT_REGISTERED = 7,
};

struct kairos_error {
    uint32_t code;
    char message[KAIROS_MSG_MAX];
};

/* HELLO: flags */
#define KAIROS_HELLO_REATTACH 0x1u /* the daemon restarted: held[] is what we hold */
#define KAIROS_HELLO_PLACE 0x2u    /* tenant "": kairosd places the process (admission,
                                    * cgroups rule) or refuses it (protocol 2) */
#define KAIROS_HELLO_FORK_TICKETS 0x4u /* send fork tickets (FORK_TICKETS) after WELCOME */
#define KAIROS_HELLO_SPACE 0x8u        /* the shim asks ROUTE after WELCOME (space mode) */

struct kairos_hello {
    uint32_t flags;
    uint32_t pid;                     /* informational; the daemon trusts SO_PEERCRED */
    char tenant[KAIROS_NAME_MAX];
    uint64_t held[KAIROS_MAX_GPUS];   /* bytes this process holds per GPU, its unused
                                       * credit included (REATTACH) */
};

struct kairos_welcome {
    uint32_t tenant_id;
    uint32_t n_gpus;
    uint64_t quota[KAIROS_MAX_GPUS];  /* bytes; 0 = no access to that GPU */
};

/* CHARGE: ask for bytes on a GPU (kairosd's index: the shim numbers the GPUs by PCI
 * order from the driver's answers, docs/multi-gpu.md).
 * bytes 0: only ask what the tenant holds and may hold there (no COMMIT follows).
 * flags KAIROS_CHARGE_MANAGED (protocol 3): the bytes are a managed range
 * (cudaMallocManaged), granted only where the tenant's managed-memory policy is
 * charge; otherwise GRANT says granted 0 with reason KAIROS_GRANT_MANAGED_REFUSED.
 * A granted managed range counts at once as the process's holdings (no COMMIT
 * follows): the shim's CREDIT reports include it from then on. */
#define KAIROS_CHARGE_MANAGED 0x1u
struct kairos_charge {
    uint32_t gpu;
    uint32_t flags;                   /* KAIROS_CHARGE_*; was pad (0) */
    uint64_t bytes;
    uint64_t token;                   /* chosen by the shim, echoed by COMMIT */
};

/* GRANT reason (protocol 3): why a charge was refused, 0 for the quota. */
#define KAIROS_GRANT_MANAGED_REFUSED 1u /* the tenant's policy is managed: refuse */
struct kairos_grant {
    uint32_t granted;                 /* 1 yes, 0 refused */
    uint32_t reason;                  /* KAIROS_GRANT_* when refused; was pad (0) */
    uint64_t quota;                   /* the tenant's quota on that GPU */
    uint64_t held;                    /* the tenant's holdings after this charge */
};

/* COMMIT: the outcome of the allocation a CHARGE reserved for. */
struct kairos_commit {
    uint32_t gpu;
    uint32_t ok;                      /* 1: allocation made; 0: driver refused, undo */
    uint64_t token;
    uint64_t reserved;                /* what CHARGE asked */
    uint64_t actual;                  /* what the driver returned (ok); counted above
                                       * reserved only within the quota's room */
};

struct kairos_release {
    uint32_t gpu;
    uint32_t pad;
    uint64_t bytes;
};

/* FORKED (a tenant's member; reply OK or ERROR): the sender forked child_pid while holding
 * NVIDIA files (the child shares them: the driver frees their memory only when
 * the last process holding them closes them). kairosd checks in /proc that the
 * sender is child_pid's parent (the shim reports before fork() returns to the
 * parent, so the parent is alive) and remembers the child (pid and start time):
 * when the sender's member departs, its charge stays while the child, or a
 * process the child handed them on to, holds an NVIDIA file (docs/memory.md).
 * Nothing is charged to the child, and no charge moves to another tenant. pad 0.
 * From a peer that is no tenant's member: ERROR KAIROS_ERR_NOT_REGISTERED. When the
 * sender's tenant (or uid) holds its share of live hand-overs (heirs.h):
 * KAIROS_ERR_BUSY, and the shim fails the fork (EAGAIN, the child killed).
 * flags KAIROS_FORKED_TICKET: the sender spends one of its fork tickets (a hand-over
 * reserved ahead, FORK_TICKETS) and waits for no reply: kairosd answers nothing, and
 * logs a report it does not believe. The socket is ordered, so kairosd reads it before
 * the sender's hang-up; when the sender has exited by then, kairosd believes the
 * child as far as /proc still can (it lives, started no earlier than the sender):
 * an edge only ever keeps the sender's own tenant charged. */
#define KAIROS_FORKED_TICKET 0x1u
struct kairos_forked {
    uint32_t child_pid;
    uint32_t flags;
};

/* FORK_TICKETS (issue 25, item 9). Shim -> daemon (only after a HELLO with
 * KAIROS_HELLO_FORK_TICKETS; no reply by sequence): hold want tickets (at most
 * KAIROS_FORK_TICKETS_MAX); spent: how many KAIROS_FORKED_TICKET reports this
 * connection has sent so far. Daemon -> shim (a push): held, the tickets the
 * connection holds now, every FORKED before the ask counted; spent echoes the ask's
 * (0 for the push after WELCOME), so the shim knows which of its reports held counts.
 * kairosd grants at most half of the room left in the sender's tenant and uid
 * shares (heirs.h), so tickets never fill a share; held 0 after an ask: no room. */
#define KAIROS_FORK_TICKETS_MAX 32
struct kairos_fork_tickets {
    uint32_t want;
    uint32_t held;
    uint32_t spent;
    uint32_t pad;
};

/* INHERITED (a tenant's member; reply OK or ERROR): the sender holds descriptors fds[0..n_fds)
 * on NVIDIA files of process from_pid: KAIROS_INHERITED_EXEC, found open when this
 * program started (from_pid is its parent: posix_spawn, vfork, a fork the parent's
 * shim did not report); KAIROS_INHERITED_RECEIVED, received over a unix socket
 * (SCM_RIGHTS; from_pid is the socket's peer). kairosd believes only what it can
 * check: from_pid must be alive, the sender's parent for EXEC, and at least one
 * of fds[] must be an NVIDIA device file (a character device of the driver's) and
 * the same open file as one of from_pid's descriptors (kcmp(2)); as for FORKED,
 * KAIROS_ERR_NOT_REGISTERED from a non-member and KAIROS_ERR_BUSY past the share;
 * then the sender counts as holding from_pid's files, as a forked child does
 * (FORKED). Exactly one flag; 1 <= n_fds <= KAIROS_INHERITED_MAX_FDS; fds beyond
 * n_fds and pad 0. */
#define KAIROS_INHERITED_EXEC 0x1u
#define KAIROS_INHERITED_RECEIVED 0x2u
#define KAIROS_INHERITED_MAX_FDS 16
struct kairos_inherited {
    uint32_t from_pid;
    uint32_t flags;
    uint32_t n_fds;
    uint32_t pad;
    int32_t fds[KAIROS_INHERITED_MAX_FDS];
};

/* CREDIT (protocol 3): a process's reservation ahead of need on one GPU, charged to
 * its tenant in the ledger, so that the tenant's holdings plus all its members'
 * credit never exceed the quota; the process allocates within it without asking.
 * Shim -> daemon (every one is answered by a CREDIT with the same seq, possibly
 * later: kairosd holds the answer while it recalls credit from other members or
 * while it waits for the members to reattach after a restart):
 *   report    increases with every CREDIT the process sends (the newest held wins)
 *   held      what the process holds on gpu now (allocations made, or in flight);
 *             kairosd counts it only within what it granted the process (its
 *             charges, credit and reattach less what came back) and, above that,
 *             the room its tenant's quota has; the rest is not counted (logged)
 *   returned  unused credit given back with this message (counted once)
 *   need      what its waiting allocations need (0: a report only)
 *   least     the smallest waiting allocation (0 when need is 0; <= need)
 *   quota     0
 *   flags     KAIROS_CREDIT_AHEAD: credit beyond need is welcome (far from the
 *             quota kairosd adds a chunk, near it all the room left);
 *             KAIROS_CREDIT_RECALLED: the answer to a CREDIT_RECALL (returned says
 *             how much came back); KAIROS_CREDIT_REVOKED (a later addition): built after
 *             the process read a revocation, so it holds no credit (every CREDIT it
 *             sends says so until one of them is answered).
 * Daemon -> shim (the reply):
 *   report    echoed; held: the tenant's holdings on gpu (what departed members
 *             left that the GPU still holds included); returned: what of them
 *             kairosd counts as this process's (its memory view shows held minus
 *             returned plus what it holds now, so that its own frees and unused
 *             credit count as free at once);
 *   need      credit granted with this reply (added to the process's credit);
 *   least     the chunk: the credit kairosd grants ahead (the shim asks again when
 *             its credit falls below half of it, and keeps at most two chunks of
 *             what it frees); quota: the tenant's quota on gpu;
 *   flags     KAIROS_CREDIT_REFUSED: need could not be met (what was granted, if
 *             anything, is at least least); KAIROS_CREDIT_EXACT: members of the
 *             tenant contend for the room (another one waits, or was recalled in
 *             the last second), or this process was revoked: no credit ahead, the
 *             process keeps none of what it frees and asks for each allocation,
 *             until a reply without it; KAIROS_CREDIT_ALL (a later addition): the tenant is
 *             near its quota and no other member contends: the grant is all the
 *             room left, the process keeps what it frees (up to two chunks) and
 *             asks ahead no more (another member's need recalls it), until a
 *             reply without it.
 * A shim that is recalled asks for nothing ahead until a reply without EXACT. */
#define KAIROS_CREDIT_AHEAD 0x1u
#define KAIROS_CREDIT_RECALLED 0x2u
#define KAIROS_CREDIT_LAST 0x4u /* shim -> daemon: the process exits; this message
                                 * returns all its credit, a grant in a reply it has
                                 * not read is void, and it asks for nothing more */
#define KAIROS_CREDIT_REFUSED 0x100u
#define KAIROS_CREDIT_EXACT 0x200u
#define KAIROS_CREDIT_REVOKED 0x400u /* daemon -> shim, unsolicited (seq 0, report 0):
                                      * a recall went unanswered; the credit is gone;
                                      * shim -> daemon: the process read that */
#define KAIROS_CREDIT_ALL 0x800u     /* daemon -> shim: all the room left (a later addition) */
/* Refusal notices (a later addition, issue 25, item 10). KAIROS_CREDIT_NOTICES on a
 * reply: this kairosd sends ROOM. KAIROS_CREDIT_NOTICE on a shim's CREDIT (sent only
 * to a kairosd whose replies said NOTICES): the shim reads ROOM. A reply flagged
 * REFUSED that grants nothing (need 0) to a request flagged NOTICE promises one ROOM
 * for that GPU once the room the member could have had at the refusal (the tenant's
 * room plus its other members' unused credit) grows, or the quota there changes.
 * The shim may then answer allocations on that GPU at least as large as the
 * smallest it had waiting (as the request's least said) with out of memory itself,
 * and asks again at the ROOM, after any change of its own (a free, a reconnection,
 * another quota in a reply), and after KAIROS_REFUSAL_MEMORY_MS in any case: a
 * notice lost or late costs a round trip, never memory beyond the quota. */
#define KAIROS_CREDIT_NOTICE 0x8u       /* shim -> daemon: it reads ROOM */
#define KAIROS_CREDIT_NOTICES 0x1000u   /* daemon -> shim: it sends ROOM */
#define KAIROS_REFUSAL_MEMORY_MS 1000u  /* the longest a shim answers a refusal itself */
struct kairos_credit {
    uint32_t gpu;
    uint32_t flags;
    uint64_t report;
    uint64_t held;
    uint64_t returned;
    uint64_t need;
    uint64_t least;
    uint64_t quota;
};

/* CREDIT_RECALL (daemon -> shim, no reply of its own): another member of the tenant
 * needs room; give back up to bytes of unused credit on gpu now, with a CREDIT
 * flagged KAIROS_CREDIT_RECALLED (returned 0 if none is left). A process that does
 * not answer within 500 ms loses its credit there: kairosd grants that process no
 * credit ahead any more and tells it with a CREDIT flagged KAIROS_CREDIT_REVOKED
 * (granted 0), after which the shim holds no credit there; kairosd keeps counting
 * that credit (the process may have allocated from it before it read that) until a
 * CREDIT of the process flagged KAIROS_CREDIT_REVOKED says what it holds, or it
 * leaves (a later addition; before, the credit was no longer counted at once).
 * pad is 0. */
struct kairos_credit_recall {
    uint32_t gpu;
    uint32_t pad;
    uint64_t bytes;
};

/* ROOM (daemon -> shim, unsolicited, no reply; a later addition to 3): sent only to a
 * shim whose refused request was flagged KAIROS_CREDIT_NOTICE, once per such refusal:
 * what the member could have had on gpu grew, or the tenant's quota there changed
 * (a free or credit given back by any member, a departure, memory of a departed one
 * drained, a quota change or a reload), so an allocation refused there may fit now.
 * It grants nothing: the shim asks again with CREDIT. flags and pad are 0. */
struct kairos_room {
    uint32_t gpu;
    uint32_t flags;
};

/* SHARED (protocol 3, a later addition; members only; reply OK or ERROR): the sender
 * widened who may dup its RM object (h_client, h_object) (RM_SHARE, or
 * NV0000_CTRL_CMD_CLIENT_SHARE_OBJECT: what cudaIpcGetMemHandle makes), to
 * share_type (RM's RS_SHARE_TYPE: KAIROS_SHARE_ALL any process,
 * KAIROS_SHARE_SECURITY_TOKEN the same euid, KAIROS_SHARE_CLIENT the client
 * share_arg, KAIROS_SHARE_PID the process share_arg; other types are reported as
 * ALL, the widest); the object's device memory is bytes on GPU gpu (0: none, as
 * for system memory). kairosd remembers it for the sender's life, to check the
 * IMPORTED claims naming it, and refuses it (KAIROS_ERR_INVALID) when the sender's
 * shares on gpu would exceed what the ledger charges the sender there (its
 * holdings and credit), or beyond the bounds below (per process, tenant, uid,
 * node: a tenant keeps KAIROS_IPC_RESERVED with the node's table full). Shared
 * again, the same object is one entry with the newest scope. h_client and h_object
 * not 0. */
#define KAIROS_SHARE_ALL 1u
#define KAIROS_SHARE_SECURITY_TOKEN 2u
#define KAIROS_SHARE_CLIENT 3u
#define KAIROS_SHARE_PID 4u
#define KAIROS_SHARED_PER_PROCESS 1024 /* shares remembered per process; more refused */
#define KAIROS_SHARED_MAX 65536        /* per node (KAIROS_IPC_RESERVED beyond it) */
#define KAIROS_IPC_PER_TENANT 4096     /* shares, and imports, per tenant; more refused */
#define KAIROS_IPC_PER_UID 8192        /* shares, and imports, per uid; more refused */
#define KAIROS_IPC_RESERVED 64         /* a tenant's, even when the node's table is full */
/* With flags KAIROS_SHARED_FREED (no reply: the sender does not wait; only a
 * malformed one gets an ERROR, like any message): the sender freed its shared object
 * (h_client, h_object), whose
 * memory was bytes (1 .. KAIROS_BYTES_MAX) on GPU gpu, and lowers its holdings by
 * them in its next CREDIT report, sent after this on the same socket. kairosd
 * keeps those bytes, at most what the sender's SHARED of it named on that GPU,
 * charged to the sender's tenant (held back from its quota, as draining) while a
 * verified import of that object made before this message, and admitted by the
 * sender's share, lives, and forgets the share; with no such import, or no share of
 * the sender's, nothing is kept. share_type and share_arg 0. */
#define KAIROS_SHARED_FREED 0x1u
struct kairos_shared {
    uint32_t h_client;
    uint32_t h_object;
    uint32_t share_type;              /* KAIROS_SHARE_*; 0 with KAIROS_SHARED_FREED */
    uint32_t share_arg;               /* PID: the pid (the sharer's namespace);
                                       * CLIENT: the client handle; otherwise 0 */
    uint32_t flags;                   /* 0 or KAIROS_SHARED_FREED */
    uint32_t gpu;                     /* FREED: the GPU the memory was on */
    uint64_t bytes;                   /* FREED: what the object held */
};

/* IMPORTED (protocol 3, a later addition; members only; reply OK or ERROR): legacy CUDA IPC
 *   KAIROS_IMPORT_BEGIN  the sender is about to dup (RM_DUP_OBJECT) the object
 *                        (h_client_src, h_object_src) of another process into its
 *                        own (h_client, h_object; h_object 0 when the driver picks
 *                        it). Sent before the driver sees the dup, so kairosd
 *                        knows of the import before it exists. kairosd accepts it
 *                        only when a live member reported that object SHARED with
 *                        a scope that admits the sender (any, same euid, its
 *                        client h_client, or its pid);
 *                        then, while the import lives, the exporter's charge stays
 *                        after the exporter departs (as for FORKED). Nothing is
 *                        ever charged to the importer, and no charge moves to
 *                        another tenant.
 *   KAIROS_IMPORT_END    the dup failed, or it is gone (freed with its parent or
 *                        client, its file closed); h_client and h_object as given
 *                        with BEGIN (h_object: the handle the driver chose).
 * The importer's departure (hang-up) ends its imports, unless a process it handed
 * its files to (FORKED, INHERITED) still holds a driver file. A BEGIN of an object
 * the sender imports already adds to that import (as many ENDs end it). A BEGIN
 * beyond the bounds (per importer, per tenant, per uid, per node as for SHARED) is
 * refused, and a refused BEGIN is a refused dup: the shim fails the call
 * (NV_ERR_INSUFFICIENT_PERMISSIONS) rather than import what kairosd cannot follow.
 * Exactly one flag; h_client_src, h_object_src and h_client not 0; pad 0. */
#define KAIROS_IMPORT_BEGIN 0x1u
#define KAIROS_IMPORT_END 0x2u
#define KAIROS_IMPORTS_PER_PROCESS 1024 /* imports remembered per importer; more refused */
#define KAIROS_IMPORTS_MAX 65536        /* per node (KAIROS_IPC_RESERVED beyond it) */
struct kairos_imported {
    uint32_t flags;
    uint32_t h_client_src;
    uint32_t h_object_src;
    uint32_t h_client;
    uint32_t h_object;
    uint32_t pad;
};

/* A compute policy on one GPU (docs/scheduler.md), as TENANT_SET carries it.
 *   flags 0                    keep the tenant's policy there (every field 0);
 *   KAIROS_COMPUTE_SET         the tenant's policy there becomes this one:
 *     share_ppm  GPU time guaranteed whenever others compete, in parts per million
 *                (0: best effort); the shares of one GPU's tenants, configured and
 *                created at run time, add up to at most KAIROS_PPM;
 *     limit_ppm  a cap held even on an idle GPU (0: none), not below share_ppm;
 *     priority   KAIROS_PRIO_*;
 *   KAIROS_COMPUTE_CLEAR       the tenant has no policy there any more (fields 0).
 * pad is 0. */
#define KAIROS_COMPUTE_SET 0x1u
#define KAIROS_COMPUTE_CLEAR 0x2u
#define KAIROS_PPM 1000000u
enum kairos_priority { KAIROS_PRIO_NORMAL = 0, KAIROS_PRIO_LATENCY = 1, KAIROS_PRIO_BATCH = 2 };
struct kairos_compute {
    uint32_t share_ppm;
    uint32_t limit_ppm;
    uint8_t priority;
    uint8_t flags;                    /* KAIROS_COMPUTE_* */
    uint16_t pad;
};

/* TENANT_SET: quota[i] in bytes, or KAIROS_QUOTA_KEEP to leave it, or 0 for none;
 * compute[i] as above. Entries at or beyond n_gpus: quota ignored, compute all 0.
 * fault_domain: the tenant's fault domain (space mode, docs/space.md), NUL-terminated,
 * "" for none; a domain the configuration does not declare under space: domains: is
 * refused (KAIROS_ERR_INVALID), and so is a change of domain while the tenant has
 * processes (KAIROS_ERR_BUSY: they are routed already). A body of an earlier size
 * (KAIROS_TENANT_SET_SIZE_V0, _V1) leaves the domain as it is.
 * Reply: OK (empty body) or ERROR. A new tenant's KEEP quotas are 0 and it has no
 * compute policy but those SET. A tenant of the configuration takes no compute
 * policy and no fault domain here (its own are in the configuration). */
#define KAIROS_QUOTA_KEEP UINT64_MAX
/* quota[i] = KAIROS_QUOTA_PERCENT | ppm: ppm parts per million (1..KAIROS_PPM) of that
 * GPU's memory, resolved by kairosd with the GPU's total (NVML); refused
 * (KAIROS_ERR_INVALID) where kairosd does not know it. (KEEP is not one.) */
#define KAIROS_QUOTA_PERCENT (1ull << 63)
#define KAIROS_TENANT_EPHEMERAL 0x1u  /* removed when its last process leaves (kairos run) */
#define KAIROS_TENANT_MANAGED_CHARGE 0x2u /* managed memory allowed, charged in full (3) */
#define KAIROS_TENANT_MANAGED_REFUSE 0x4u /* managed memory refused (3); neither bit: kept
                                           * (a new tenant's is refuse); both: invalid */
#define KAIROS_TENANT_SET_SIZE_V0 200u /* the body before compute[]: still accepted, as
                                        * if every compute[i] were 0 */
#define KAIROS_TENANT_SET_SIZE_V1 392u /* the body before fault_domain: still accepted, the
                                        * domain left as it is */
struct kairos_tenant_set {
    char tenant[KAIROS_NAME_MAX];
    uint32_t n_gpus;
    uint32_t flags;                   /* KAIROS_TENANT_*; was pad (0) */
    uint64_t quota[KAIROS_MAX_GPUS];
    struct kairos_compute compute[KAIROS_MAX_GPUS];
    char fault_domain[KAIROS_NAME_MAX]; /* "" none; absent from a body of before */
};

struct kairos_tenant_del {
    char tenant[KAIROS_NAME_MAX];
};

/* TENANT_MEMBERS (administrators): the tenant's members rules become these (n_* = 0
 * everywhere: no rules, only administrators and admitted processes may join).
 * A process may join when its uid is in users[], its gid or one of its
 * supplementary groups is in groups[], or its cgroup (v2 path, as
 * /proc/<pid>/cgroup says, e.g. /slurm/job_42) or one of that cgroup's ancestors
 * matches a pattern of cgroups[] (fnmatch(3), '*' does not cross '/'). cgroups[i]
 * are NUL-terminated and begin with '/'. Entries beyond the counts are 0.
 * Reply: OK or ERROR. */
#define KAIROS_MEMBERS_MAX_IDS 16
#define KAIROS_MEMBERS_MAX_CGROUPS 4
#define KAIROS_CGROUP_MAX 128
struct kairos_tenant_members {
    char tenant[KAIROS_NAME_MAX];
    uint32_t n_users;
    uint32_t n_groups;
    uint32_t n_cgroups;
    uint32_t pad;                     /* 0 */
    uint32_t users[KAIROS_MEMBERS_MAX_IDS];
    uint32_t groups[KAIROS_MEMBERS_MAX_IDS];
    char cgroups[KAIROS_MEMBERS_MAX_CGROUPS][KAIROS_CGROUP_MAX];
};

/* TENANT_ADMIT: the process pid (0: the sender) and its descendants (found by the
 * parent chain, see docs/security.md) may join tenant. Administrators admit any
 * process; another sender only itself, and only into a tenant whose members rules
 * allow it. An admission ends with the process (pid and start time).
 * Reply: OK or ERROR. */
struct kairos_tenant_admit {
    char tenant[KAIROS_NAME_MAX];
    uint32_t pid;
    uint32_t pad;                     /* 0 */
};

/* PS -> one PS_REPLY per tenant, the last with KAIROS_PS_LAST; n_gpus is the node's
 * GPU count. No tenants: one PS_REPLY with tenant "" (see history). The body is
 * struct kairos_ps, or empty (a kairos of before: as if flags were 0). flags
 * KAIROS_PS_HOLDS: every PS_REPLY is its first KAIROS_PS_REPLY_SIZE_V2 bytes (up to
 * the faults), with KAIROS_PS_FAULTS too the whole struct kairos_ps_reply; without
 * them each is its first KAIROS_PS_REPLY_SIZE_V1 bytes (up to pauses[]). pad 0. */
#define KAIROS_PS_HOLDS 0x1u
#define KAIROS_PS_FAULTS 0x2u /* with HOLDS: replies carry the faults (a later addition to 3) */
struct kairos_ps {
    uint32_t flags;
    uint32_t pad;
};
#define KAIROS_PS_REPLY_SIZE_V1 1424u
#define KAIROS_PS_REPLY_SIZE_V2 3024u
#define KAIROS_PS_LAST 0x1u
#define KAIROS_PS_REMOVED 0x2u /* the tenant is no longer in the configuration: it goes once
                                * its processes leave and the GPU frees its memory, and no
                                * process may join it (a later addition to 3) */
#define KAIROS_PS_MAX_PIDS 64
/* Compute figures per GPU (index g of each array), valid when compute_flags[g] has
 * KAIROS_PS_COMPUTE_POLICY. Shares are parts per million of the GPU's time.
 *   share_ppm, limit_ppm, priority   the policy (limit 0: none; KAIROS_PRIO_*)
 *   target_ppm     what the scheduler entitles it to now (0 while it is idle)
 *   window_ppm     what it used over the last period (100 ms)
 *   minute_ppm     the same, averaged over the last 600 periods (or those so far)
 *                  window and minute are valid only with KAIROS_PS_COMPUTE_MEASURED
 *                  (the GPU backend reports per-process utilization)
 *   period_us, duty_us   its pause window: period 0, never paused; else it may run
 *                  duty_us of every period_us
 *   pauses         periods it spent with a window shorter than the period
 * Whole replies only (KAIROS_PS_HOLDS), valid with KAIROS_PS_COMPUTE_HOLDS: what
 * held the tenant back from running as it would natively, by reason r
 * (KAIROS_HOLD_*, the index of each inner array):
 *   hold           the reason in force now (KAIROS_HOLD_NONE: nothing holds it)
 *   hold_period_ppm[r]  the part of the last minute's periods (600, or those so
 *                  far) that r held it back in ([KAIROS_HOLD_NONE]: nothing did)
 *   hold_time_ppm[r]    the part of the last minute's time r kept it paused (its
 *                  window; a hold by timeslices alone pauses nothing: periods held,
 *                  no time); [KAIROS_HOLD_NONE] 0
 *                  both minute figures valid only with KAIROS_PS_COMPUTE_MEASURED
 *   hold_periods[r], hold_time_us[r]   the same since kairosd gave it the policy
 *                  on that GPU: periods, and microseconds paused (never down but
 *                  when the policy goes and comes back) */
#define KAIROS_PS_COMPUTE_POLICY 0x1u   /* compute_flags: a compute policy on this GPU */
#define KAIROS_PS_COMPUTE_MEASURED 0x2u /* compute_flags: window/minute are measured */
#define KAIROS_PS_COMPUTE_HOLDS 0x4u    /* compute_flags: the hold figures are there */
#define KAIROS_HOLD_NONE 0u   /* runs as it would natively */
#define KAIROS_HOLD_SHARE 1u  /* another tenant below its share waited behind it: weighted
                               * timeslices or a window of its share */
#define KAIROS_HOLD_LIMIT 2u  /* its limit's window */
#define KAIROS_HOLD_YIELD 3u  /* the short yield slice beside a latency tenant */
#define KAIROS_HOLD_REASONS 4
#define KAIROS_PRIO_NORMAL 0u
#define KAIROS_PRIO_LATENCY 1u
#define KAIROS_PRIO_BATCH 2u
struct kairos_ps_reply {
    uint32_t flags;
    uint32_t n_gpus;
    char tenant[KAIROS_NAME_MAX];
    uint64_t quota[KAIROS_MAX_GPUS];
    uint64_t held[KAIROS_MAX_GPUS];
    uint64_t refusals[KAIROS_MAX_GPUS];
    uint32_t n_pids;                  /* may exceed KAIROS_PS_MAX_PIDS; pids[] holds the first;
                                       * non-administrators: their own uid's only */
    uint32_t pids[KAIROS_PS_MAX_PIDS];
    uint32_t compute_flags[KAIROS_MAX_GPUS]; /* KAIROS_PS_COMPUTE_* */
    uint32_t share_ppm[KAIROS_MAX_GPUS];
    uint32_t limit_ppm[KAIROS_MAX_GPUS];
    uint32_t priority[KAIROS_MAX_GPUS];
    uint32_t target_ppm[KAIROS_MAX_GPUS];
    uint32_t window_ppm[KAIROS_MAX_GPUS];
    uint32_t minute_ppm[KAIROS_MAX_GPUS];
    uint32_t period_us[KAIROS_MAX_GPUS];
    uint32_t duty_us[KAIROS_MAX_GPUS];
    uint32_t pad;                     /* 0 */
    uint64_t pauses[KAIROS_MAX_GPUS];
    /* KAIROS_PS_REPLY_SIZE_V1 ends here; the rest only with KAIROS_PS_HOLDS */
    uint32_t hold[KAIROS_MAX_GPUS];   /* KAIROS_HOLD_* */
    uint32_t hold_period_ppm[KAIROS_MAX_GPUS][KAIROS_HOLD_REASONS];
    uint32_t hold_time_ppm[KAIROS_MAX_GPUS][KAIROS_HOLD_REASONS];
    uint64_t hold_periods[KAIROS_MAX_GPUS][KAIROS_HOLD_REASONS];
    uint64_t hold_time_us[KAIROS_MAX_GPUS][KAIROS_HOLD_REASONS];
    /* KAIROS_PS_REPLY_SIZE_V2 ends here; the rest only with KAIROS_PS_FAULTS: */
    char fault_domain[KAIROS_NAME_MAX]; /* "" when the tenant is in none */
    uint64_t faults_caused;           /* GPU faults one of its processes caused */
    uint64_t faults_lost;             /* faults in its domain that ended its work */
    uint32_t last_fault_xid;          /* the last of either (0: none): its Xid, */
    uint32_t last_fault_gpu;          /* its GPU (UINT32_MAX: none of the node's), */
    uint64_t last_fault_unix_ms;      /* when (ms since 1970), */
    uint32_t last_fault_caused;       /* 1: it caused it, 0: it lost work */
    uint32_t sm_percent;              /* sms: of its configuration, the part of the SMs its
                                       * MPS clients may run on (1-100); 0: no such limit
                                       * (0 from a kairosd of before too) */
};

/* TIME_POLICY: what a process does with its channel groups on one GPU.
 *   timeslice_us   set on every channel group (SET_TIMESLICE), including later ones,
 *                  and again over the application's own SET_TIMESLICE;
 *                  0: the application's own timeslices; restored if Kairos had
 *                  set others (each group gets back the one the application last
 *                  set on it), and the application's later ones stand.
 *   period_us > 0  strict windows: the process may run only in
 *                  [phase_us, phase_us + duty_us) of every period, counted from
 *                  epoch_ns on CLOCK_MONOTONIC (the daemon's clock, the same on the
 *                  node), so the windows of different processes line up without a
 *                  message per window; outside them it is paused (channels
 *                  disabled). duty_us == period_us: never
 *                  paused; duty_us == 0: always paused.
 *   period_us == 0 no windows: never paused.
 *   seq            increases with every policy; a shim ignores an older one. */
#define KAIROS_TIME_LATENCY 0x1u /* flags: a latency tenant (informational) */
#define KAIROS_TIME_REPORT 0x2u  /* flags: send KAIROS_MSG_RUNNABLE for this GPU */
/* flags: kairosd acts on this process's wake at once (its GPU is in windows, has a
 * latency tenant, or the tenant has a limit): an idle process is sampled every
 * TC_SENSE_IDLE_NS so that the wake comes soon; without it, once a report period */
#define KAIROS_TIME_QUICK_WAKE 0x4u
struct kairos_time_policy {
    uint32_t gpu;
    uint32_t flags;
    uint64_t seq;
    uint64_t timeslice_us;
    uint64_t epoch_ns;
    uint32_t period_us;
    uint32_t phase_us;
    uint32_t duty_us;
    uint32_t pad;
};

/* RUNNABLE (shim -> daemon, no reply; sent while the GPU's policy has
 * KAIROS_TIME_REPORT, about once a period): how long, of interval_us ending now,
 * this process had work queued that the GPU had not fetched, on any of its
 * channels on gpu (a channel's USERD GPPut != GPGet, sampled by the shim's control
 * thread; a paused process with work waiting counts). samples and pending_samples
 * say how it was measured; channels how many channels were sampled. flags
 * KAIROS_RUNNABLE_PARTIAL: some channels of that GPU could not be sampled (their
 * USERD is not mapped where the shim can see it): the figure is a lower bound.
 * unpaused_us: of interval_us, how long its channels on gpu were enabled (from the
 * return of each resume to the return of the next pause: a pause that lands late
 * shows here, and kairosd charges the overrun to the next periods).
 * runnable_us, unpaused_us <= interval_us; pending_samples <= samples.
 * progress_us (with KAIROS_RUNNABLE_PROGRESS, else 0): of interval_us, how long
 * the GPU moved through this process's work on gpu: the time of the samples that
 * saw a channel's GPGet or pushbuffer Get move since the sample before (the host
 * fetched or processed its methods, which it does only for a channel on the GPU).
 * A kernel longer than a sample interval moves nothing while it runs, so this is
 * a lower bound of the process's time on the GPU; progress_us <= runnable_us. */
#define KAIROS_RUNNABLE_PARTIAL 0x1u
/* KAIROS_RUNNABLE_WAKE: sent at once, not at the period's end, by a shim whose
 * last report was idle (under 2 % runnable) when a sample sees work queued (an
 * idle shim samples every 20 ms, so within 20 ms of the work's arrival): the
 * figures are the interval so far, which the next regular report covers again
 * (kairosd takes it as a wake, not as a report: docs/scheduler.md "Coming back
 * from an idle spell"). */
#define KAIROS_RUNNABLE_WAKE 0x2u
#define KAIROS_RUNNABLE_PROGRESS 0x4u /* progress_us is measured */
/* KAIROS_RUNNABLE_IDLE: sent at once by a shim whose last report was busy, once
 * nothing has been queued on that GPU for KAIROS_IDLE_EARLY_MS: kairosd may lend
 * the tenant's window now rather than after a whole idle period. Like a wake, its
 * figures are the interval so far, which the next regular report covers again.
 * Not with KAIROS_RUNNABLE_WAKE. */
#define KAIROS_RUNNABLE_IDLE 0x8u
#define KAIROS_IDLE_EARLY_MS 20u
struct kairos_runnable {
    uint32_t gpu;
    uint32_t flags;
    uint64_t interval_us;
    uint64_t runnable_us;
    uint32_t samples;
    uint32_t pending_samples;
    uint32_t channels;
    uint32_t progress_us;       /* with KAIROS_RUNNABLE_PROGRESS; was pad (0) */
    uint64_t unpaused_us;
};

static_assert(sizeof(struct kairos_hdr) == 16, "header");
static_assert(sizeof(struct kairos_runnable) == 48, "runnable");
static_assert(sizeof(struct kairos_time_policy) == 48, "time policy");
/* ROUTE (flags and pad 0) and its reply ROUTED. mode KAIROS_ROUTE_TIME: no MPS of
 * kairosd's (pipe_dir: the folder of the domains' daemons, "" when none, where the
 * process must not go; the other fields 0); KAIROS_ROUTE_MPS: an MPS client of the control daemon
 * listening in pipe_dir, for fault domain domain, with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
 * thread_pct (1-100) and CUDA_MPS_CLIENT_PRIORITY priority (0 normal, 1 below). */
#define KAIROS_ROUTE_TIME 0u
#define KAIROS_ROUTE_MPS 1u
#define KAIROS_ROUTE_PATH_MAX 256
struct kairos_route {
    uint32_t flags;
    uint32_t pad;
};
struct kairos_routed {
    uint32_t mode;
    uint32_t thread_pct;
    uint32_t priority;
    uint32_t pad;
    char domain[KAIROS_NAME_MAX];
    char pipe_dir[KAIROS_ROUTE_PATH_MAX];
};

/* ENDING (flags and pad 0), one-way: this process, an MPS client of its tenant's fault
 * domain, got a SIGTERM it leaves to its default action. kairosd ends its MPS client
 * (terminate_client) and then sends it SIGTERM again, which it no longer catches; a
 * signal to a client with work in flight could fault the domain's other clients. The
 * shim raises SIGTERM itself if none comes within KAIROS_ENDING_WAIT_MS. */
#define KAIROS_ENDING_WAIT_MS 3000
struct kairos_ending {
    uint32_t flags;
    uint32_t pad;
};

static_assert(sizeof(struct kairos_charge) == 24, "charge");
static_assert(sizeof(struct kairos_route) == 8, "route");
static_assert(sizeof(struct kairos_ending) == 8, "ending");
static_assert(sizeof(struct kairos_routed) == 336, "routed");
static_assert(sizeof(struct kairos_commit) == 32, "commit");
static_assert(sizeof(struct kairos_hello) == 200, "hello");
static_assert(sizeof(struct kairos_welcome) == 136, "welcome");
static_assert(sizeof(struct kairos_grant) == 24, "grant");
static_assert(sizeof(struct kairos_release) == 16, "release");
static_assert(sizeof(struct kairos_forked) == 8, "forked");
static_assert(sizeof(struct kairos_fork_tickets) == 16, "fork_tickets");
static_assert(sizeof(struct kairos_inherited) == 80, "inherited");
static_assert(sizeof(struct kairos_error) == 260, "error");
static_assert(sizeof(struct kairos_compute) == 12, "compute");
static_assert(sizeof(struct kairos_tenant_set) == 456, "tenant_set");
static_assert(offsetof(struct kairos_tenant_set, compute) == KAIROS_TENANT_SET_SIZE_V0,
              "tenant_set: compute[] follows the version-0 body");
static_assert(KAIROS_TENANT_SET_SIZE_V1 == 392 &&
              offsetof(struct kairos_tenant_set, fault_domain) == KAIROS_TENANT_SET_SIZE_V1,
              "tenant_set: fault_domain follows the 392-byte body of before");
static_assert(sizeof(struct kairos_tenant_del) == 64, "tenant_del");
static_assert(sizeof(struct kairos_ps) == 8, "ps");
static_assert(sizeof(struct kairos_ps_reply) == 3128, "ps_reply");
static_assert(offsetof(struct kairos_ps_reply, fault_domain) == KAIROS_PS_REPLY_SIZE_V2,
              "ps_reply: the faults follow the holds");
static_assert(offsetof(struct kairos_ps_reply, hold) == KAIROS_PS_REPLY_SIZE_V1,
              "ps_reply: the holds follow the body of before");
static_assert(sizeof(struct kairos_tenant_members) == 720, "tenant_members");
static_assert(sizeof(struct kairos_tenant_admit) == 72, "tenant_admit");
static_assert(sizeof(struct kairos_credit) == 56, "credit");
static_assert(sizeof(struct kairos_credit_recall) == 16, "credit_recall");
static_assert(sizeof(struct kairos_shared) == 32, "shared");
static_assert(sizeof(struct kairos_room) == 8, "room");
static_assert(sizeof(struct kairos_imported) == 24, "imported");

#endif /* KAIROS_PROTO_H */
