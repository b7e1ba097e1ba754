/* imports.h - legacy CUDA IPC: which processes hold, by a dup, memory another
 * process shared.
 *
 * cudaIpcGetMemHandle makes an RM memory object importable by other processes
 * (RM_SHARE or NV0000_CTRL_CMD_CLIENT_SHARE_OBJECT widen who may dup it); an
 * importer's cudaIpcOpenMemHandle dups it into a client of its own
 * (RM_DUP_OBJECT naming the exporter's client). The driver keeps the memory while
 * any handle to it lives, so it outlives the exporter's free and exit. The shims
 * report both sides (SHARED, IMPORTED in proto.h); this module remembers them and
 * answers whether a departed exporter's memory may still be held by an import,
 * so that linger.h keeps the exporter's charge (the project's decision,
 * docs/memory.md: the exporter stays charged, the importer is charged nothing).
 *
 * The exporter's free of a shared object (SHARED FREED) forgets its share; while
 * a verified import of it lives its bytes stay held back from the exporter's
 * tenant here (struct ipc_kept, the tenant's draining), released when the last
 * such import ends (the exporter's shim dropped them from its holdings).
 *
 * Nothing a client says is taken on trust. Only a tenant's member may send SHARED
 * and IMPORTED (handle_handovers.c). A SHARED names the device memory of the object (gpu,
 * bytes) and is refused unless the sender's shares on that GPU fit in what the
 * ledger charges it there (its holdings and credit, struct ipc_sender): kairosd has
 * no record of objects, but a process holding no memory shares none (bytes 0: an
 * object with no device memory, which can admit imports but never keeps a charge).
 * It only ever keeps the sender's own tenant charged; its FREED keeps at most the
 * bytes its share named, and only for imports of the sender's own share.
 * IMPORTED BEGIN is accepted for an object a live member reported SHARED, with
 * a scope that admits the sender (the same euid, its client, its pid); never for
 * the sender's own object. An import never charges the importer and never moves a
 * charge to another tenant: it only keeps the charge of an exporter whose share
 * admits it (whoever else claims to share the object).
 * An NVIDIA MPS client dups objects of its MPS server, which is no member and
 * shares nothing: a BEGIN of an object no live member reported SHARED is accepted
 * too when an MPS server (mps_server.h: root's binary) runs as the sender's uid or
 * as root (a multi-user server). Such an import (struct ipc_import's mps) keeps no
 * charge and moves none; it is recorded only so that its END is taken and the
 * bounds below count it, and no member's later share makes it keep a charge (but
 * one that arrives within a restart's provisional window, as for any BEGIN). uid
 * B's client cannot ride on uid A's server; what kairosd cannot tell about servers
 * is in docs/security.md. /proc is scanned for servers at most every
 * IMPORTS_MPS_RESCAN_MS. An import ends with
 * IMPORTED END, or when its importer departs and no process it handed its files to
 * (heirs.h) holds a driver file.
 *
 * Bounds, checked before an entry is added, never by forgetting one: per process
 * KAIROS_SHARED_PER_PROCESS shares and KAIROS_IMPORTS_PER_PROCESS imports, per
 * tenant KAIROS_IPC_PER_TENANT of each, per uid KAIROS_IPC_PER_UID of each, per
 * node KAIROS_SHARED_MAX / KAIROS_IMPORTS_MAX, beyond which a tenant that has fewer
 * than KAIROS_IPC_RESERVED still gets them: a full table refuses the tenant (or uid)
 * that filled it, not another. A BEGIN of an object the sender imports already is
 * one entry (counted: as many ENDs end it); MPS clients' imports count as any. A
 * refusal is a refusal in the shim: the
 * import fails (src/shim/ipc.c), so no memory outlives its exporter's charge
 * because a table was full.
 *
 * Processes are kept as (pid, start time), so a reused pid is not them; a member
 * counts as alive until its connection hangs up (imports_member_left), so the checks
 * read /proc only when a claim arrives and for importers that departed while
 * holding a driver file. Nothing
 * here survives a kairosd restart: the shims report it again when they reattach,
 * importers possibly before their exporters (imports_imported's provisional_ms).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_IMPORTS_H
#define KAIROS_DAEMON_IMPORTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/base/mps_server.h"
#include "daemon/memory/heirs.h"
#include "daemon/memory/ledger.h"
#include "kairos/proto.h"

/* How long a BEGIN that no share explains yet is kept when its importer reattached
 * after a kairosd restart (its exporter reattaches about as soon). */
#define IMPORTS_PROVISIONAL_MS 3000

/* How long a scan of /proc for MPS servers answers BEGINs no share explains: a
 * tenant's stream of such BEGINs costs one scan per interval, not one each. A
 * server exec'd since the last scan is missed for at most that long, while its
 * clients wait for it to create its CUDA contexts (longer) before they dup. */
#define IMPORTS_MPS_RESCAN_MS 100

/* *exporter after a BEGIN taken as an MPS client's import (no pid is this). */
#define IMPORTS_FROM_MPS UINT32_MAX

/* Who sends a SHARED or IMPORTED: a member of a tenant. */
struct ipc_sender {
    uint32_t pid, uid;
    uint32_t tenant;              /* its tenant's id (the bounds per tenant) */
    uint64_t charged[KAIROS_MAX_GPUS]; /* what the ledger charges it (held + credit) */
};

struct ipc_share {
    uint32_t pid, uid, tenant;
    uint64_t start;
    bool departed;                /* its connection hung up */
    uint64_t seq;                 /* when it was first reported (imports' counter) */
    struct kairos_shared what;
};

struct ipc_import {
    uint32_t pid, uid, tenant;    /* the importer */
    uint64_t start;
    uint32_t begun;               /* BEGINs not yet ended (duplicates are one entry) */
    uint32_t exporter_pid;        /* the first share that admitted it (0: provisional) */
    uint64_t exporter_start;
    uint64_t seq;                 /* when it began (imports' counter) */
    bool verified;                /* a share admitting it was found */
    bool mps;                     /* taken as an MPS client's: lives unverified, no charge */
    uint64_t provisional_until_ms; /* unverified: dropped after (CLOCK_MONOTONIC) */
    bool departed;                /* its connection hung up */
    bool heirs_hold;              /* departed: its files lived on then (heirs_hold) */
    uint32_t h_client_src, h_object_src, h_client, h_object;
};

/* A shared object its exporter freed while verified imports of it lived: its
 * bytes stay held back from the exporter's tenant's quota (its draining) until the
 * last of those imports (begun after its share, before its free) ends. Freed again
 * under the same handle (and scope), one record covers both objects' imports and
 * bytes. The tenant is found again by name and id: it may be removed meanwhile. */
struct ipc_kept {
    uint32_t pid, uid;            /* the exporter */
    uint64_t start;
    struct kairos_shared scope;   /* its share's: the imports it admits hold it */
    uint32_t h_client, h_object;
    uint64_t since, seq;          /* imports begun between these hold it */
    unsigned gpu;
    uint64_t bytes;
    char tenant[KAIROS_NAME_MAX];
    uint32_t tenant_id;
};

struct imports {
    const char *proc;             /* "/proc" (tests: another root) */
    struct heirs *heirs;          /* may be NULL: a departed importer's imports end */
    struct ledger *ledger;        /* where kept charges go (NULL: none are kept) */
    uint64_t seq;                 /* counts BEGINs and FREEDs */
    size_t max_shares, max_imports; /* the node's bounds: KAIROS_*_MAX (tests: fewer) */
    uint32_t mps_owner;           /* who owns the MPS server's binary: root (tests: theirs) */
    unsigned mps_rescan_ms;       /* IMPORTS_MPS_RESCAN_MS (tests: 0, every BEGIN) */
    uint64_t mps_scanned_ms;      /* the last scan (CLOCK_MONOTONIC; 0: none yet) */
    struct mps_servers mps;       /* what it found */
    struct ipc_kept *kept;
    size_t n_kept, cap_kept;
    struct ipc_share *shares;
    size_t n_shares, cap_shares;
    struct ipc_import *v;
    size_t n, cap;
};

/* proc NULL: "/proc". heirs may be NULL. Kept charges (struct ipc_kept) go to
 * ledger's tenants (NULL: none are kept). */
void imports_init(struct imports *im, const char *proc, struct heirs *heirs,
                  struct ledger *ledger);
void imports_fini(struct imports *im);

/* SHARED from a member: 0, or a KAIROS_ERR_* code with why filled. */
int imports_shared(struct imports *im, const struct ipc_sender *who,
                   const struct kairos_shared *m, char *why, size_t why_len);
/* IMPORTED from a member: 0, or a KAIROS_ERR_* code with why filled.
 * *exporter (may be NULL) is set to the exporter's pid (0: not known yet;
 * IMPORTS_FROM_MPS: taken as an MPS client's import), for END the ended import's.
 * provisional_ms: after a kairosd restart (the reattach window), when the shims
 * report again what they share and import in no particular order, a BEGIN naming
 * an object nobody reported shared yet is kept that many ms, as if verified, for
 * its exporter's SHARED to arrive (then checked as any BEGIN); 0: refused at once,
 * unless an MPS server serves the sender's uid (above). */
int imports_imported(struct imports *im, const struct ipc_sender *who,
                     const struct kairos_imported *m, uint64_t provisional_ms,
                     uint32_t *exporter, char *why, size_t why_len);

/* SHARED with KAIROS_SHARED_FREED from member pid of tenant t: the share of that
 * object is forgotten; while a verified import of it (begun before now, admitted by
 * that share) lives, its bytes, at most what the share named, are held back from t's
 * quota (t->draining), released when the last such import ends. Nothing is kept
 * for an object pid did not share. Never refused (a lie only keeps the sender's own
 * tenant charged, by no more than it was charged for the object, and at most one
 * record per live import); returns whether a charge was kept. */
bool imports_freed(struct imports *im, uint32_t pid, struct ledger_tenant *t,
                   const struct kairos_shared *m);

/* What kairosd keeps charged to tenant t on gpu for freed shared objects (a part of
 * t->draining[gpu]; kairos ps shows it as held). */
uint64_t imports_kept(const struct imports *im, const struct ledger_tenant *t, unsigned gpu);

/* Ends kept charges whose imports ended (an importer's heirs gone); kairosd calls it
 * at each server tick while some are kept. Returns how many are kept now. */
size_t imports_check(struct imports *im);

/* Member pid's connection hung up: its shares stay only while imports name them;
 * its imports live on only while it, or a process it handed its files to, holds a
 * driver file (asked once now, then at each check while so). */
void imports_member_left(struct imports *im, uint32_t pid);

/* Whether memory that process pid shared may still be held by a verified import
 * (the predicate linger.h asks about a departed process, with heirs_hold). */
bool imports_hold(struct imports *im, uint32_t pid);

/* The predicate for linger_deps.holds (ctx: a struct imports): heirs_hold
 * (when heirs were given) or imports_hold. */
bool imports_holder_cb(void *ctx, uint32_t pid);

/* Verified imports that live now (tests, logs). */
size_t imports_count(struct imports *im);

#endif /* KAIROS_DAEMON_IMPORTS_H */
