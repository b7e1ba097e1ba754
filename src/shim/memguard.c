/* memguard.c - quotas on device memory inside the tenant process (see memguard.h).
 *
 * Bookkeeping per GPU: charged = what this process holds as the ledger knows it,
 * pending = reservations whose allocation is in flight. A standalone process
 * checks charged + pending + size against its own quota; a tenant's process asks
 * kairosd, which sums all the tenant's processes. The object tree's effects are
 * the one source of what an allocation really took and what a free released.
 */
#include "shim/memguard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/rm_abi.h"
#include "shim/agent.h"
#include "shim/settings.h"
#include "shim/state.h"
#include "shim/tracer.h"

#define PAGE_2M (2ull << 20)
#define PAGE_512M (512ull << 20)
#define UNLIMITED UINT64_MAX

static pthread_mutex_t mg_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool mg_active;
static bool mg_registered;     /* HELLO answered (tenant mode) */
static bool mg_daemon_down;    /* fail-open fallback in force */
static uint64_t mg_quota[KAIROS_MAX_GPUS];
static uint64_t mg_charged[KAIROS_MAX_GPUS];
static uint64_t mg_pending[KAIROS_MAX_GPUS];
static uint64_t mg_refusals;
static uint64_t mg_next_token;
static uint64_t mg_epoch;      /* daemon connections made: a ticket knows its own */
static const struct shim_real *mg_real;
static bool mg_watcher_started;

static void say(const char *what)
{
    if (settings_get()->log_stderr)
        dprintf(2, "kairos[%d]: %s\n", (int)getpid(), what);
}

static void set_all_quotas(uint64_t q)
{
    for (int g = 0; g < KAIROS_MAX_GPUS; g++)
        mg_quota[g] = q;
}

static void after_fork_in_child(void);

static void memguard_register_atfork(void)
{
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

/* In a forked child: the parent's memory and connection are the parent's. */
static void after_fork_in_child(void)
{
    pthread_mutex_init(&mg_mu, NULL);
    agent_after_fork();
    mg_registered = false;
    mg_watcher_started = false; /* threads do not survive fork */
    memset(mg_charged, 0, sizeof mg_charged);
    memset(mg_pending, 0, sizeof mg_pending);
}

void memguard_init(void)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
    pthread_once(&atfork_once, memguard_register_atfork);
    const struct settings *s = settings_get();
    if (s->problem[0])
        dprintf(2, "kairos[%d]: %s\n", (int)getpid(), s->problem);
    set_all_quotas(s->mode == SETTINGS_STANDALONE ? s->standalone_quota : UNLIMITED);
    atomic_store(&mg_active, s->mode != SETTINGS_OFF);
}

bool memguard_active(void)
{
    return atomic_load_explicit(&mg_active, memory_order_relaxed);
}

/* ---- the daemon link -------------------------------------------------------------- */

static void fall_back_locked(const char *why)
{
    const struct settings *s = settings_get();
    mg_daemon_down = true;
    set_all_quotas(s->standalone_quota ? s->standalone_quota : UNLIMITED);
    char msg[512];
    snprintf(msg, sizeof msg, "kairosd unreachable (%s); on_daemon_down: open in %.200s: %s",
             why, s->conf_source,
             s->standalone_quota ? "local quota KAIROS_MEM in force" : "no quota in force");
    say(msg);
}

static int register_locked(bool reattach, char *err, size_t err_len)
{
    const struct settings *s = settings_get();
    struct agent_quota q;
    /* Reservations in flight count as held: their allocations may be in the
     * driver now, and the new connection cannot settle the old one's tokens
     * (settle_locked sends only the difference for them). */
    uint64_t holding[KAIROS_MAX_GPUS];
    for (int g = 0; g < KAIROS_MAX_GPUS; g++)
        holding[g] = mg_charged[g] + mg_pending[g] < mg_charged[g] ? UINT64_MAX
                                                                    : mg_charged[g] + mg_pending[g];
    int rc = agent_connect(mg_real, s->socket_path, s->tenant, holding, reattach, &q, err,
                           err_len);
    if (rc == 0) {
        mg_epoch++;
        set_all_quotas(0);
        memcpy(mg_quota, q.quota, sizeof(uint64_t) * q.n_gpus);
        mg_registered = true;
        mg_daemon_down = false;
    }
    return rc;
}

/* The watcher: notices at once when kairosd goes away (restart, upgrade) and
 * reattaches with what this process holds, so the new daemon's ledger is whole
 * again without waiting for this process's next allocation. */
static void *watch_daemon(void *unused)
{
    (void)unused;
    unsigned backoff_ms = 100;
    for (;;) {
        if (agent_service(1000) == 0)
            continue;
        pthread_mutex_lock(&mg_mu);
        char err[KAIROS_MSG_MAX];
        bool ok = agent_connected() || register_locked(true, err, sizeof err) == 0;
        pthread_mutex_unlock(&mg_mu);
        if (ok) {
            backoff_ms = 100;
            say("reattached to kairosd");
            continue;
        }
        usleep(backoff_ms * 1000);
        backoff_ms = backoff_ms < 2000 ? backoff_ms * 2 : 2000;
    }
    return NULL;
}

static void start_watcher_locked(void)
{
    if (mg_watcher_started)
        return;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the application's signals are not ours */
    mg_watcher_started = pthread_create(&t, &attr, watch_daemon, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}

int memguard_first_gpu_use(const struct shim_real *r)
{
    if (!memguard_active())
        return 0;
    const struct settings *s = settings_get();
    if (s->mode == SETTINGS_REFUSED) {
        dprintf(2, "kairos[%d]: GPU access refused: %s\n", (int)getpid(), s->refusal);
        return -EACCES;
    }
    if (s->mode != SETTINGS_TENANT)
        return 0;
    if (s->conf_problem[0]) {
        dprintf(2, "kairos[%d]: GPU access refused: the node's shim settings are unusable: "
                "%s. An administrator fixes the file (see libkairos(7)).\n", (int)getpid(),
                s->conf_problem);
        return -EACCES;
    }
    pthread_mutex_lock(&mg_mu);
    mg_real = r;
    int rc = 0;
    if (!mg_registered && !mg_daemon_down) {
        char err[KAIROS_MSG_MAX] = "";
        rc = register_locked(false, err, sizeof err);
        if (rc == -EPERM || rc == -EINVAL) {
            dprintf(2, "kairos[%d]: GPU access refused: %s\n", (int)getpid(), err);
            rc = -EACCES;
        } else if (rc < 0 && s->fail_open) {
            fall_back_locked(strerror(-rc));
            rc = 0;
        } else if (rc < 0) {
            dprintf(2,
                    "kairos[%d]: GPU access refused: kairosd is not reachable at %s (%s) for "
                    "tenant '%s' (socket from %s). Start kairosd; running without it needs "
                    "on_daemon_down: open in the node's shim.conf (an administrator's "
                    "choice, see libkairos(7)).\n",
                    (int)getpid(), s->socket_path, strerror(-rc),
                    s->tenant[0] ? s->tenant : "(none named)", s->conf_source);
            rc = -EACCES;
        }
    }
    if (rc == 0)
        start_watcher_locked();
    pthread_mutex_unlock(&mg_mu);
    return rc;
}

/* ---- recognising an allocation before the call ------------------------------------ */

/* Rounded up to the driver's page; a size no GPU has (beyond OBJTREE_MAX_BYTES)
 * reserves UINT64_MAX, which no quota grants, instead of wrapping to 0. */
static uint64_t round_up(uint64_t v, uint64_t to)
{
    if (v > OBJTREE_MAX_BYTES)
        return UINT64_MAX;
    return (v + to - 1) / to * to;
}

struct pending_alloc {
    uint32_t h_client, h_parent;
    uint64_t bytes;       /* requested, rounded to the driver's page */
};

static bool read_rm_alloc(uint32_t size, const void *arg, struct pending_alloc *a)
{
    uint8_t args[sizeof(struct rm_alloc64_args)];
    if (tracer_safe_copy(args, arg, size) != size)
        return false;
    if (bytes_u32(args + 12) != RM_CLASS_NV01_MEMORY_LOCAL_USER)
        return false;
    uint8_t params[sizeof(struct rm_memory_alloc_params)];
    const void *pp = (const void *)(uintptr_t)bytes_u64(args + 16);
    if (tracer_safe_copy(params, pp, sizeof params) != sizeof params)
        return false;
    uint32_t attr2 = bytes_u32(params + offsetof(struct rm_memory_alloc_params, attr2));
    uint64_t want = bytes_u64(params + offsetof(struct rm_memory_alloc_params, size));
    bool huge_512m = ((attr2 >> 20) & 3u) == 2u;
    a->h_client = bytes_u32(args);
    a->h_parent = bytes_u32(args + 4);
    a->bytes = round_up(want ? want : 1, huge_512m ? PAGE_512M : PAGE_2M);
    return true;
}

static bool read_vidheap_alloc(const void *arg, struct pending_alloc *a)
{
    uint8_t args[RM_VIDHEAP_SIZE];
    if (tracer_safe_copy(args, arg, sizeof args) != sizeof args)
        return false;
    uint32_t fn = bytes_u32(args + RM_VIDHEAP_OFF_FUNCTION);
    size_t off_attr = RM_VIDHEAP_OFF_ATTR, off_size = RM_VIDHEAP_OFF_SIZE;
    if (fn == RM_VIDHEAP_ALLOC_TILED_PITCH_HEIGHT)
        off_attr = RM_VIDHEAP_OFF_ATTR_TILED;
    else if (fn == RM_VIDHEAP_ALLOC_SIZE_RANGE)
        off_size = RM_VIDHEAP_OFF_SIZE_RANGE;
    else if (fn != RM_VIDHEAP_ALLOC_SIZE)
        return false;
    if ((bytes_u32(args + 52) & RM_MEMFLAG_VIRTUAL) ||
        RM_ATTR_LOCATION(bytes_u32(args + off_attr)) != RM_ATTR_LOCATION_VIDMEM)
        return false;
    a->h_client = bytes_u32(args + RM_VIDHEAP_OFF_CLIENT);
    a->h_parent = bytes_u32(args + RM_VIDHEAP_OFF_PARENT);
    a->bytes = round_up(bytes_u64(args + off_size) ? bytes_u64(args + off_size) : 1, PAGE_2M);
    return true;
}

static bool read_allocation(uint32_t req, const void *arg, struct pending_alloc *a)
{
    if (RM_IOC_TYPEOF(req) != RM_IOC_TYPE)
        return false;
    uint32_t nr = RM_IOC_NR(req), size = RM_IOC_SIZE(req);
    if (nr == RM_NR_ALLOC && (size == sizeof(struct rm_alloc_args) ||
                              size == sizeof(struct rm_alloc64_args)))
        return read_rm_alloc(size, arg, a);
    if (nr == RM_NR_VID_HEAP_CONTROL && size == RM_VIDHEAP_SIZE)
        return read_vidheap_alloc(arg, a);
    return false;
}

bool memguard_may_allocate(uint32_t req)
{
    if (RM_IOC_TYPEOF(req) != RM_IOC_TYPE)
        return false;
    uint32_t nr = RM_IOC_NR(req);
    return nr == RM_NR_ALLOC || nr == RM_NR_VID_HEAP_CONTROL || nr == RM_NR_ALLOC_MEMORY ||
           nr == RM_NR_XFER;
}

static uint32_t gpu_of_parent(uint32_t h_client, uint32_t h_parent)
{
    struct objtree *t = state_lock();
    int g = t ? objtree_gpu_of(t, h_client, h_parent) : -1;
    state_unlock();
    if (g < 0)
        return 0;
    return g < KAIROS_MAX_GPUS ? (uint32_t)g : KAIROS_MAX_GPUS - 1;
}

/* ---- reserving ------------------------------------------------------------------- */

static bool local_reserve_locked(uint32_t g, uint64_t bytes)
{
    if (mg_quota[g] != UNLIMITED && (mg_charged[g] + mg_pending[g] + bytes > mg_quota[g] ||
                                     mg_charged[g] + mg_pending[g] + bytes < bytes))
        return false;
    mg_pending[g] += bytes;
    return true;
}

/* How long an allocation waits for kairosd to come back (a restart, an
 * upgrade) before it is refused (fail-closed): a restart costs a pause, not an
 * out-of-memory error. The other threads' allocations wait behind it. */
#define MEMGUARD_RESTART_WAIT_MS 5000u

/* Reattaches and asks again until kairosd answers or the wait is over. */
static int charge_again_locked(uint32_t g, uint64_t bytes, uint64_t token, uint32_t flags,
                               struct kairos_grant *grant)
{
    unsigned waited = 0, step = 25;
    bool wait = !settings_get()->fail_open;
    for (;;) {
        char err[KAIROS_MSG_MAX];
        int rc = register_locked(true, err, sizeof err);
        if (rc == 0) {
            rc = agent_charge_flags(g, bytes, token, flags, grant);
            if (rc == 0 || rc == -EPROTO || !wait)
                return rc; /* answered (an error from kairosd is not an outage) */
        } else if (rc == -EPERM || rc == -EINVAL) {
            return rc;     /* kairosd is back and refuses this process */
        }
        if (!wait || waited >= MEMGUARD_RESTART_WAIT_MS)
            return -ENOTCONN;
        usleep(step * 1000u);
        waited += step;
        step = step < 400 ? step * 2 : 400;
    }
}

/* Tenant mode: ask the ledger; when the daemon went away, reattach and ask again
 * (waiting for it up to MEMGUARD_RESTART_WAIT_MS when fail-closed). flags are
 * CHARGE's (KAIROS_CHARGE_MANAGED); *reason the GRANT's when refused. A managed
 * range is never granted locally: without kairosd the tenant's policy is unknown. */
static bool daemon_reserve_locked(uint32_t g, uint64_t bytes, uint64_t token, uint32_t flags,
                                  uint32_t *reason)
{
    struct kairos_grant grant;
    int rc = agent_charge_flags(g, bytes, token, flags, &grant);
    if (rc < 0)
        rc = charge_again_locked(g, bytes, token, flags, &grant);
    if (rc < 0) {
        if (!settings_get()->fail_open) {
            say("kairosd did not come back within 5 s: allocation refused (fail-closed)");
            return false;
        }
        fall_back_locked(strerror(-rc));
        return !(flags & KAIROS_CHARGE_MANAGED) && local_reserve_locked(g, bytes);
    }
    if (!grant.granted) {
        *reason = grant.reason;
        return false;
    }
    mg_pending[g] += bytes;
    return true;
}

bool memguard_before(const struct shim_real *r, uint32_t req, void *arg,
                     struct memguard_ticket *t)
{
    memset(t, 0, sizeof *t);
    struct pending_alloc a;
    if (!memguard_active() || !read_allocation(req, arg, &a))
        return false;
    uint32_t g = gpu_of_parent(a.h_client, a.h_parent);
    pthread_mutex_lock(&mg_mu);
    mg_real = r;
    uint64_t token = ++mg_next_token;
    uint32_t reason = 0;
    bool ok = settings_get()->mode == SETTINGS_TENANT && !mg_daemon_down
                  ? daemon_reserve_locked(g, a.bytes, token, 0, &reason)
                  : local_reserve_locked(g, a.bytes);
    if (!ok)
        mg_refusals++;
    pthread_mutex_unlock(&mg_mu);
    if (ok)
        *t = (struct memguard_ticket){true, g, a.bytes, token, mg_epoch};
    return !ok;
}

int memguard_reserve_managed(const struct shim_real *r, uint32_t gpu, uint64_t bytes,
                             struct memguard_ticket *t)
{
    memset(t, 0, sizeof *t);
    if (!memguard_active())
        return 0;
    const struct settings *s = settings_get();
    uint32_t g = gpu < KAIROS_MAX_GPUS ? gpu : KAIROS_MAX_GPUS - 1;
    pthread_mutex_lock(&mg_mu);
    mg_real = r;
    uint64_t token = ++mg_next_token;
    uint32_t reason = 0;
    int rc;
    if (s->mode == SETTINGS_TENANT && !mg_daemon_down)
        rc = daemon_reserve_locked(g, bytes, token, KAIROS_CHARGE_MANAGED, &reason) ? 0
             : reason == KAIROS_GRANT_MANAGED_REFUSED                            ? -EPERM
                                                                                 : -ENOMEM;
    else if (s->mode == SETTINGS_TENANT)
        rc = -EPERM;  /* kairosd unreachable (fail-open): the tenant's policy is unknown */
    else if (!s->managed_charge)
        rc = -EPERM;  /* standalone: KAIROS_MANAGED=charge was not asked for */
    else
        rc = local_reserve_locked(g, bytes) ? 0 : -ENOMEM;
    if (rc == -ENOMEM)
        mg_refusals++;
    pthread_mutex_unlock(&mg_mu);
    if (rc == 0)
        *t = (struct memguard_ticket){true, g, bytes, token, mg_epoch};
    return rc;
}

void memguard_write_refusal(uint32_t req, void *arg)
{
    uint32_t nr = RM_IOC_NR(req), size = RM_IOC_SIZE(req);
    size_t off;
    if (nr == RM_NR_ALLOC && size == sizeof(struct rm_alloc64_args))
        off = offsetof(struct rm_alloc64_args, status);
    else if (nr == RM_NR_ALLOC)
        off = offsetof(struct rm_alloc_args, status);
    else
        off = RM_VIDHEAP_OFF_STATUS;
    uint32_t status = RM_NV_ERR_NO_MEMORY;
    memcpy((uint8_t *)arg + off, &status, sizeof status);
}

/* ---- settling ---------------------------------------------------------------------- */

/* A reservation made on an earlier connection was handed to the new daemon as
 * held when the shim reattached: only the difference from what was really
 * allocated (delta, on the ticket's GPU) is left to tell. */
static void tell_daemon_reattached(uint32_t g, int64_t delta, const struct memguard_ticket *t)
{
    uint64_t actual = delta > 0 ? (uint64_t)delta : 0;
    if (actual < t->reserved) {
        agent_release(g, t->reserved - actual);
    } else if (actual > t->reserved) {
        struct kairos_commit c = {.gpu = g, .ok = 1, .actual = actual - t->reserved};
        agent_commit(&c);
    }
    if (delta < 0)
        agent_release(g, (uint64_t)-delta);
}

static void tell_daemon(uint32_t g, int64_t delta, const struct memguard_ticket *t)
{
    if (settings_get()->mode != SETTINGS_TENANT || mg_daemon_down || !mg_registered)
        return;
    if (t && t->active && t->gpu == g && t->epoch != mg_epoch) {
        tell_daemon_reattached(g, delta, t);
    } else if (t && t->active && t->gpu == g) {
        struct kairos_commit c = {.gpu = g, .ok = delta > 0, .token = t->token,
                                  .reserved = t->reserved, .actual = delta > 0 ? (uint64_t)delta : 0};
        agent_commit(&c);
        if (delta < 0)
            agent_release(g, (uint64_t)-delta);
    } else if (delta > 0) {
        struct kairos_commit c = {.gpu = g, .ok = 1, .actual = (uint64_t)delta};
        agent_commit(&c); /* memory taken without a reservation (unreadable request) */
    } else if (delta < 0) {
        agent_release(g, (uint64_t)-delta);
    }
}

static void settle_locked(const struct memguard_ticket *t, const struct objtree_effect *e)
{
    if (t && t->active)
        mg_pending[t->gpu] -= t->reserved;
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++) {
        int64_t d = e ? e->vidmem_delta_gpu[g] : 0;
        if (d > 0)
            mg_charged[g] += (uint64_t)d;
        else if (d < 0)
            mg_charged[g] -= (uint64_t)-d > mg_charged[g] ? mg_charged[g] : (uint64_t)-d;
        if (d != 0 || (t && t->active && t->gpu == g))
            tell_daemon(g, d, t);
    }
}

void memguard_after(struct memguard_ticket *t, const struct objtree_effect *effect)
{
    if (!memguard_active() || (!t->active && (!effect || effect->vidmem_delta == 0)))
        return;
    pthread_mutex_lock(&mg_mu);
    settle_locked(t, effect);
    pthread_mutex_unlock(&mg_mu);
    t->active = false;
}

void memguard_released(const struct objtree_effect *effect)
{
    if (!memguard_active() || !effect || effect->vidmem_delta == 0)
        return;
    pthread_mutex_lock(&mg_mu);
    settle_locked(NULL, effect);
    pthread_mutex_unlock(&mg_mu);
}

/* ---- the memory view ----------------------------------------------------------------- */

/* What the whole tenant holds on GPU g: a charge of nothing asks the ledger (no
 * reservation, no COMMIT); a standalone process knows its own. */
static uint64_t tenant_held_locked(uint32_t g)
{
    if (settings_get()->mode == SETTINGS_TENANT && mg_registered && !mg_daemon_down) {
        struct kairos_grant grant;
        if (agent_charge(g, 0, 0, &grant) == 0)
            return grant.held;
    }
    return mg_charged[g];
}

void memguard_rewrite_fb_info(uint8_t *params, size_t len, int gpu)
{
    if (!memguard_active() || len < sizeof(struct rm_fb_get_info_v2_params))
        return;
    uint32_t g = gpu < 0 ? 0 : gpu < KAIROS_MAX_GPUS ? (uint32_t)gpu : KAIROS_MAX_GPUS - 1;
    pthread_mutex_lock(&mg_mu);
    uint64_t quota = mg_quota[g];
    uint64_t held = quota == UNLIMITED ? 0 : tenant_held_locked(g);
    pthread_mutex_unlock(&mg_mu);
    if (quota == UNLIMITED)
        return;
    uint64_t free_kib = held >= quota ? 0 : (quota - held) >> 10;
    uint32_t count = bytes_u32(params);
    if (count > RM_FB_INFO_MAX)
        count = RM_FB_INFO_MAX;
    for (uint32_t i = 0; i < count; i++) {
        uint8_t *entry = params + 4 + 8 * i;
        uint32_t index = bytes_u32(entry), data = bytes_u32(entry + 4);
        uint64_t shown = data;
        if (index == RM_FB_INFO_HEAP_SIZE || index == RM_FB_INFO_TOTAL_RAM_SIZE ||
            index == RM_FB_INFO_USABLE_RAM_SIZE)
            shown = (quota >> 10) < data ? quota >> 10 : data;
        else if (index == RM_FB_INFO_HEAP_FREE)
            shown = free_kib < data ? free_kib : data;
        uint32_t v = (uint32_t)shown;
        memcpy(entry + 4, &v, sizeof v);
    }
}

/* ---- introspection ------------------------------------------------------------------ */

void memguard_stats(struct memguard_stats *s)
{
    pthread_mutex_lock(&mg_mu);
    memcpy(s->charged, mg_charged, sizeof s->charged);
    memcpy(s->quota, mg_quota, sizeof s->quota);
    s->refusals = mg_refusals;
    pthread_mutex_unlock(&mg_mu);
}

void memguard_reset(void)
{
    pthread_mutex_lock(&mg_mu);
    agent_forget();
    mg_registered = mg_daemon_down = false;
    memset(mg_charged, 0, sizeof mg_charged);
    memset(mg_pending, 0, sizeof mg_pending);
    mg_refusals = 0;
    pthread_mutex_unlock(&mg_mu);
    settings_load();
    memguard_init();
}
