/* ipc.c - legacy CUDA IPC in the shim: shares reported and held, their frees told
 * and released, imports reported before the driver sees them and when they end
 * (see ipc.h).
 *
 * Runs in the application's thread making the ioctl or close, in memguard's
 * watcher thread after a reattach, and in a forked child's atfork handler (which
 * forgets the parent's shares and imports). The tables of shares and imports are
 * guarded by the state lock; kairosd is called without it (tell_mu orders what it
 * hears of shares).
 */
#include "shim/ipc.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/objtree.h"
#include "shim/agent.h"
#include "shim/memguard.h"
#include "shim/settings.h"
#include "shim/state.h"

#define IPC_MAX_IMPORTS 1024 /* more are reported but end only with the process */
#define IPC_MAX_SHARES 1024  /* remembered to report again after a kairosd restart */

/* RM's RS_SHARE_POLICY (NVOS57 at offset 8, CLIENT_SHARE_OBJECT at offset 4):
 * u32 target, u32 accessMask, u16 type, u8 action. */
#define RS_SHARE_ACTION_REVOKE 0x1u

struct import {
    uint32_t client_src, object_src, client, object;
};
static struct import imports[IPC_MAX_IMPORTS]; /* under the state lock */
static size_t n_imports;
static struct kairos_shared shares[IPC_MAX_SHARES]; /* under the state lock */
static size_t n_shares;
static atomic_size_t n_imports_any; /* a hint read without the lock */
static _Atomic size_t n_shares_hint;
/* Orders what kairosd hears of shares: a freed share's FREED is sent before the
 * SHARED of an object made under its handle since (taken before the state lock,
 * held across the message; never taken under another lock of the shim). */
static pthread_mutex_t tell_mu = PTHREAD_MUTEX_INITIALIZER;

/* In a forked child: the imports are the parent's to end (kairosd knows them by
 * the parent's pid; the child's hold on the parent's files is FORKED's). */
static void forget_in_child(void)
{
    n_imports = 0;
    n_shares = 0;
    atomic_store(&n_imports_any, 0);
    n_shares_hint = 0;
    pthread_mutex_init(&tell_mu, NULL); /* another thread may have held it at the fork */
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, forget_in_child);
}

static bool tenant_process(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_atfork);
    return memguard_active() && settings_get()->mode == SETTINGS_TENANT;
}

static int report(const struct shim_real *r, uint16_t type, const void *body, uint32_t size,
                  char *err, size_t err_len)
{
    int saved = errno;
    int rc = agent_connected() ? 0 : memguard_first_gpu_use(r);
    if (rc == 0)
        rc = agent_report_handover(type, body, size, err, err_len);
    errno = saved;
    return rc;
}

static void say(const char *what, const char *err)
{
    if (settings_get()->log_stderr)
        dprintf(2, "kairos[%d]: %s: %s\n", (int)getpid(), what, err[0] ? err : "no daemon");
}

/* ---- exporter ------------------------------------------------------------------- */

/* RS_SHARE_POLICY as SHARED's scope; false for a revocation (nothing widened). */
static bool share_scope(const uint8_t *policy, struct kairos_shared *m)
{
    uint32_t target = bytes_u32(policy);
    uint16_t type = (uint16_t)(policy[8] | policy[9] << 8);
    uint8_t action = policy[10];
    if (action & RS_SHARE_ACTION_REVOKE)
        return false;
    bool with_target = type == KAIROS_SHARE_PID || type == KAIROS_SHARE_CLIENT;
    if (type == KAIROS_SHARE_SECURITY_TOKEN || (with_target && target)) {
        m->share_type = type;
        m->share_arg = with_target ? target : 0;
    } else {
        m->share_type = KAIROS_SHARE_ALL; /* GPU, SMC partition, ...: the widest */
        m->share_arg = 0;
    }
    return true;
}

/* Which object the call made importable, and to whom. */
static bool share_of(const struct rm_op *op, const uint8_t *arg, size_t arg_len,
                     const uint8_t *params, size_t params_len, struct kairos_shared *m)
{
    if (!op->ok)
        return false;
    if (op->kind == RM_OP_SHARE && arg && arg_len == sizeof(struct rm_share_args)) {
        m->h_client = bytes_u32(arg);
        m->h_object = bytes_u32(arg + 4);
        return share_scope(arg + 8, m);
    }
    if (op->kind == RM_OP_CONTROL && op->cmd == IPC_SHARE_CONTROL && params &&
        params_len == IPC_SHARE_CONTROL_SIZE && op->h_client == op->h_object) {
        m->h_client = op->h_client;
        m->h_object = bytes_u32(params);
        return share_scope(params + 4, m);
    }
    return false;
}

/* Kept (under the state lock) while its client lives, to tell a restarted kairosd. */
static void remember_share_locked(const struct kairos_shared *m)
{
    for (size_t i = 0; i < n_shares; i++)
        if (shares[i].h_client == m->h_client && shares[i].h_object == m->h_object) {
            shares[i] = *m;
            return;
        }
    if (n_shares < IPC_MAX_SHARES)
        shares[n_shares++] = *m;
}

/* The share's device memory (kairosd checks it against what it charges us). */
static void memory_of_locked(const struct objtree *t, struct kairos_shared *m)
{
    uint64_t bytes = 0;
    int gpu = 0;
    if (!objtree_memory_of(t, m->h_client, m->h_object, &bytes, &gpu) || gpu < 0 ||
        gpu >= KAIROS_MAX_GPUS)
        bytes = 0, gpu = 0;
    m->bytes = bytes;
    m->gpu = (uint32_t)gpu;
}

static void note_share(const struct shim_real *r, const struct kairos_shared *scope)
{
    struct kairos_shared m = *scope;
    struct objtree_ref client;
    int held = 0;
    pthread_mutex_lock(&tell_mu);
    struct objtree *t = state_lock();
    if (t && objtree_lookup(t, m.h_client, m.h_client, &client))
        held = objtree_hold_in_file(t, client.file_id, m.h_client, m.h_object);
    if (held > 0) {
        memory_of_locked(t, &m);
        remember_share_locked(&m);
    }
    n_shares_hint = n_shares;
    state_unlock();
    char err[KAIROS_MSG_MAX] = "";
    if (held > 0 && tenant_process() && /* else no memory of ours, or no kairosd */
        report(r, KAIROS_MSG_SHARED, &m, sizeof m, err, sizeof err) < 0)
        say("kairosd did not take this process's share of memory with other processes: their "
            "imports of it are refused", err);
    pthread_mutex_unlock(&tell_mu);
}

/* ---- importer ------------------------------------------------------------------- */

/* The dup is answered as the driver answers one it does not allow, and the
 * application told why (one line, as for any refusal). */
static void refuse_dup(uint8_t *arg, const char *why)
{
    uint32_t status = RM_NV_ERR_INSUFFICIENT_PERMISSIONS;
    memcpy(arg + offsetof(struct rm_dup_object_args, status), &status, sizeof status);
    dprintf(2, "kairos[%d]: CUDA IPC import refused: %s\n", (int)getpid(), why);
}

/* Whether the dup goes on after kairosd's answer rc (err: its reason). */
static bool import_allowed(int rc, const char *err, uint8_t *arg)
{
    if (rc == 0)
        return true;
    /* An MPS client's import from its server (memory no member of a tenant shared)
     * is admitted by kairosd when an MPS server runs as this uid or as root
     * (imports.h); a refusal here is one kairosd meant. */
    if (rc == -EPERM || rc == -EACCES) { /* kairosd's refusal, or GPU use refused */
        refuse_dup(arg, err[0] ? err : "GPU use is refused to this process");
        return false;
    }
    if (settings_get()->fail_open) { /* no kairosd, and the node runs on without it */
        say("kairosd did not take this process's CUDA IPC import (the exporter's charge may "
            "go with the exporter)", err);
        return true;
    }
    refuse_dup(arg, "kairosd is not reachable, and an import it does not follow could outlive "
               "its exporter's charge (on_daemon_down: closed in the node's shim.conf); try "
               "again once kairosd is back");
    return false;
}

bool ipc_before(const struct shim_real *r, uint32_t req, uint8_t *arg, size_t len,
                struct ipc_pending *pending)
{
    memset(pending, 0, sizeof *pending);
    if (RM_IOC_NR(req) != RM_NR_DUP_OBJECT || !arg || len != sizeof(struct rm_dup_object_args) ||
        !tenant_process())
        return false;
    struct rm_dup_object_args d;
    memcpy(&d, arg, sizeof d);
    if (!d.h_client || !d.h_client_src || !d.h_object_src || d.h_client_src == d.h_client)
        return false;
    struct objtree *t = state_lock();
    bool own = !t || objtree_lookup(t, d.h_client_src, d.h_client_src, NULL);
    state_unlock();
    if (own)
        return false;
    struct kairos_imported m = {.flags = KAIROS_IMPORT_BEGIN, .h_client_src = d.h_client_src,
                                .h_object_src = d.h_object_src, .h_client = d.h_client,
                                .h_object = d.h_object};
    char err[KAIROS_MSG_MAX] = "";
    int rc = report(r, KAIROS_MSG_IMPORTED, &m, sizeof m, err, sizeof err);
    if (!import_allowed(rc, err, arg))
        return true;
    if (rc == 0)
        *pending = (struct ipc_pending){true, d.h_client_src, d.h_object_src, d.h_client,
                                        d.h_object};
    return false;
}

static void send_end(const struct import *im)
{
    struct kairos_imported m = {.flags = KAIROS_IMPORT_END, .h_client_src = im->client_src,
                                .h_object_src = im->object_src, .h_client = im->client,
                                .h_object = im->object};
    char err[KAIROS_MSG_MAX] = "";
    int saved = errno;
    if (agent_report_handover(KAIROS_MSG_IMPORTED, &m, sizeof m, err, sizeof err) < 0 &&
        settings_get()->log_stderr)
        dprintf(2, "kairos[%d]: kairosd did not take the end of a CUDA IPC import: %s\n",
                (int)getpid(), err[0] ? err : "no daemon");
    errno = saved;
}

/* ---- the exporter's free of a shared object ---------------------------------------- */

struct freed_share {
    struct kairos_shared share; /* as remembered: told again if kairosd is not told */
    struct kairos_shared m;     /* flags KAIROS_SHARED_FREED, gpu, bytes */
};

/* Takes (under the state lock) up to max shares whose object is gone while the
 * hold note_share made lives on: they are told to kairosd as freed. */
static size_t take_freed_locked(struct objtree *t, struct freed_share *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; t && i < n_shares && n < max;) {
        uint64_t bytes;
        int gpu;
        if (!objtree_hold_left(t, shares[i].h_client, shares[i].h_object, &bytes, &gpu)) {
            i++;
            continue;
        }
        out[n].share = shares[i];
        out[n++].m = (struct kairos_shared){.h_client = shares[i].h_client,
                                            .h_object = shares[i].h_object,
                                            .flags = KAIROS_SHARED_FREED,
                                            .gpu = (uint32_t)gpu, .bytes = bytes};
        shares[i] = shares[--n_shares];
    }
    n_shares_hint = n_shares;
    return n;
}

/* The hold of a freed share goes, and what it held is released, once kairosd was
 * told (on the socket, before the credit report that lowers what this process
 * holds): kairosd keeps the bytes charged itself while a verified import lives.
 * A hold that would free nothing (another reference of ours keeps the block)
 * goes without a word. False when kairosd could not be told: the hold stays. */
static bool release_freed(const struct freed_share *f)
{
    if (f->m.bytes && (!agent_connected() ||
                       agent_tell(KAIROS_MSG_SHARED, &f->m, sizeof f->m) < 0))
        return false;
    struct objtree_effect e;
    struct objtree *t = state_lock();
    if (t)
        objtree_release_hold(t, f->m.h_client, f->m.h_object, &e);
    state_unlock();
    if (t)
        memguard_released(&e);
    return true;
}

/* After a free: the shared objects it freed (themselves, their parent or client).
 * Not told (kairosd unreachable: a restart), a share stays remembered with its
 * hold, told again to the restarted kairosd and settled at a later free or at the
 * file's close; a standalone process keeps its holds until the file closes. */
static void settle_freed_shares(void)
{
    if (!n_shares_hint || !tenant_process())
        return;
    struct freed_share f[16];
    size_t n, told;
    do {
        pthread_mutex_lock(&tell_mu);
        struct objtree *t = state_lock();
        n = take_freed_locked(t, f, 16);
        state_unlock();
        int saved = errno;
        for (told = 0; told < n && release_freed(&f[told]); told++)
            ;
        errno = saved;
        state_lock();
        for (size_t i = told; i < n; i++)
            remember_share_locked(&f[i].share);
        n_shares_hint = n_shares;
        state_unlock();
        pthread_mutex_unlock(&tell_mu);
    } while (n == 16 && told == n);
}

/* Forgets the shares whose client is gone (its file closed). */
static void forget_gone_shares(void)
{
    if (!n_shares_hint)
        return;
    struct objtree *t = state_lock();
    for (size_t i = 0; t && i < n_shares;)
        if (objtree_lookup(t, shares[i].h_client, shares[i].h_client, NULL))
            i++;
        else
            shares[i] = shares[--n_shares]; /* its client, and the hold, are gone */
    n_shares_hint = n_shares;
    state_unlock();
}

/* Ends the imports whose dup the tree no longer has (freed with its parent or
 * client, or its file closed). */
static void end_gone(void)
{
    if (!atomic_load(&n_imports_any))
        return;
    struct import gone[16];
    size_t n;
    do {
        n = 0;
        struct objtree *t = state_lock();
        for (size_t i = 0; t && i < n_imports && n < 16;) {
            if (objtree_lookup(t, imports[i].client, imports[i].object, NULL)) {
                i++;
                continue;
            }
            gone[n++] = imports[i];
            imports[i] = imports[--n_imports];
        }
        atomic_store(&n_imports_any, n_imports);
        state_unlock();
        for (size_t i = 0; i < n; i++)
            send_end(&gone[i]);
    } while (n == 16);
}

static void import_done(const struct rm_op *op, const struct ipc_pending *p)
{
    struct import im = {p->client_src, p->object_src, p->client, p->object};
    if (!op->ok || op->kind != RM_OP_DUP) {
        send_end(&im); /* the driver refused the dup: nothing was imported */
        return;
    }
    im.object = op->h_object; /* the handle the driver chose */
    state_lock();
    bool kept = n_imports < IPC_MAX_IMPORTS;
    if (kept)
        imports[n_imports++] = im;
    atomic_store(&n_imports_any, n_imports);
    state_unlock();
}

void ipc_after(const struct shim_real *r, const struct rm_op *op, const uint8_t *arg,
               size_t arg_len, const uint8_t *params, size_t params_len,
               const struct ipc_pending *pending)
{
    if (pending && pending->import)
        import_done(op, pending);
    struct kairos_shared m = {0};
    if (memguard_active() && share_of(op, arg, arg_len, params, params_len, &m))
        note_share(r, &m);
    if (op->ok && (op->kind == RM_OP_FREE || op->kind == RM_OP_VIDHEAP_FREE)) {
        settle_freed_shares(); /* before end_gone: nothing waits for a reply */
        end_gone();
    }
}

void ipc_after_close(void)
{
    forget_gone_shares();
    end_gone();
}

/* Copies what is to be told again, under the state lock, into malloc'd arrays. */
static void snapshot(struct kairos_shared **sh, size_t *n_sh, struct import **im, size_t *n_im)
{
    state_lock();
    *sh = n_shares ? malloc(n_shares * sizeof **sh) : NULL;
    *im = n_imports ? malloc(n_imports * sizeof **im) : NULL;
    *n_sh = *sh ? n_shares : 0;
    *n_im = *im ? n_imports : 0;
    if (*sh)
        memcpy(*sh, shares, *n_sh * sizeof **sh);
    if (*im)
        memcpy(*im, imports, *n_im * sizeof **im);
    state_unlock();
}

void ipc_after_reattach(void)
{
    if (!tenant_process())
        return;
    struct kairos_shared *sh;
    struct import *im;
    size_t n_sh, n_im;
    snapshot(&sh, &n_sh, &im, &n_im);
    char err[KAIROS_MSG_MAX] = "";
    for (size_t i = 0; i < n_sh; i++)
        if (agent_report_handover(KAIROS_MSG_SHARED, &sh[i], sizeof sh[i], err, sizeof err) < 0)
            say("could not tell the restarted kairosd what this process shares", err);
    for (size_t i = 0; i < n_im; i++) {
        struct kairos_imported m = {.flags = KAIROS_IMPORT_BEGIN,
                                    .h_client_src = im[i].client_src,
                                    .h_object_src = im[i].object_src,
                                    .h_client = im[i].client, .h_object = im[i].object};
        if (agent_report_handover(KAIROS_MSG_IMPORTED, &m, sizeof m, err, sizeof err) < 0)
            say("could not tell the restarted kairosd of a CUDA IPC import", err);
    }
    free(sh);
    free(im);
}

size_t ipc_imports(void)
{
    return atomic_load(&n_imports_any);
}
