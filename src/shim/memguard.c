/* memguard.c - quotas on device memory inside the tenant process (see memguard.h).
 *
 * A standalone process (or one fallen back with on_daemon_down: open) checks
 * charged + pending + size against its own quota. A tenant's process allocates
 * within the credit kairosd granted it (credit.h), with no message; a sender
 * thread tells kairosd what it holds and asks for more ahead, and a watcher
 * thread reads kairosd's replies and recalls and reattaches after a restart. The
 * object tree's effects are the one source of what an allocation really took and
 * what a free released.
 *
 * Threads: memguard_before/after/released and the memory view run in the
 * application's threads (the ioctl path); the sender and the watcher are the
 * shim's own, with every signal blocked.
 */
#include "shim/memguard.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/rm_abi.h"
#include "shim/agent.h"
#include "shim/app_memory.h"
#include "shim/ipc.h"
#include "shim/own_thread.h"
#include "shim/credit.h"
#include "shim/settings.h"
#include "shim/soft_end.h"
#include "shim/space_route.h"
#include "shim/state.h"
#include "shim/tracer.h"

#define PAGE_2M (2ull << 20)
#define PAGE_512M (512ull << 20)
#define UNLIMITED UINT64_MAX

/* mg_mu guards everything below; it is never held across I/O: the allocation path
 * does none (tenant mode: credit, waiting on mg_cv when it must), the credit
 * sender and the watcher talk to kairosd without it. Lock order: reg_mu, then
 * the agent's mutex, then mg_mu. */
static pthread_mutex_t mg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mg_cv;       /* allocations waiting for credit */
static pthread_cond_t mg_send_cv;  /* the credit sender waiting for work */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER; /* one registration at a time */
static atomic_bool mg_active;
static bool mg_registered;     /* HELLO answered (tenant mode) */
static bool mg_daemon_down;    /* fail-open fallback in force */
static bool mg_connected;      /* tenant mode: the connection is up */
static uint64_t mg_quota[KAIROS_MAX_GPUS];
static uint32_t mg_n_gpus;     /* tenant mode: the node's GPUs, from WELCOME */
static uint64_t mg_charged[KAIROS_MAX_GPUS]; /* standalone or fallen back: held */
static uint64_t mg_pending[KAIROS_MAX_GPUS]; /* ... and reserved, in the driver */
static struct credit_gpu mg_credit[KAIROS_MAX_GPUS]; /* tenant mode */
static uint64_t mg_refusals;
static uint64_t mg_next_token;
static const struct shim_real *mg_real;
static bool mg_threads_started;
static bool mg_sender_idle;    /* the sender sleeps until signalled */
static bool mg_sender_sending; /* the sender holds messages built, not sent yet: a
                                * request sent meanwhile could overtake a return
                                * kairosd needs to count first */

/* Reports that only say what is held go at most this often (requests, returns
 * and recall answers go at once). They move bytes between held and credit within
 * what kairosd granted (the quota holds either way), so they feed only views
 * (kairos ps, the neighbours' memory view), which tools and tests expect within a
 * few milliseconds; every 2 ms they cost an allocation loop a sender wake-up, a
 * send, kairosd's reply and a watcher wake-up per two allocations (issue 25, item
 * 13: 20 ms took that to one in 14, but kairos ps then lagged visibly). */
#define MEMGUARD_REPORT_MIN_MS 2
/* The memory view asks for a fresh figure at most this often. */
#define MEMGUARD_VIEW_REFRESH_MS 50

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

static void init_conds(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&mg_cv, &a);
    pthread_cond_init(&mg_send_cv, &a);
    pthread_condattr_destroy(&a);
}

static void after_fork_in_child(void);
static void on_credit_message(const struct kairos_credit *reply,
                              const struct kairos_credit_recall *recall);
static void on_room(uint32_t gpu);

static void memguard_register_atfork(void)
{
    init_conds();
    agent_set_credit_handler(on_credit_message);
    agent_set_room_handler(on_room);
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

/* In a forked child: the parent's memory, credit and connection are the parent's. */
static void after_fork_in_child(void)
{
    pthread_mutex_init(&mg_mu, NULL);
    pthread_mutex_init(&reg_mu, NULL);
    init_conds();
    agent_after_fork();
    mg_registered = false;
    mg_connected = false;
    mg_threads_started = false; /* threads do not survive fork */
    mg_sender_idle = false;
    mg_sender_sending = false;
    memset(mg_charged, 0, sizeof mg_charged);
    memset(mg_pending, 0, sizeof mg_pending);
    memset(mg_credit, 0, sizeof mg_credit);
}

static int register_for_route(void);

void memguard_init(void)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
    pthread_once(&atfork_once, memguard_register_atfork);
    const struct settings *s = settings_get();
    if (s->problem[0])
        dprintf(2, "kairos[%d]: %s\n", (int)getpid(), s->problem);
    set_all_quotas(s->mode == SETTINGS_STANDALONE ? s->standalone_quota : UNLIMITED);
    atomic_store(&mg_active, s->mode != SETTINGS_OFF);
    space_route_set_registrar(register_for_route);
}

bool memguard_active(void)
{
    return atomic_load_explicit(&mg_active, memory_order_relaxed);
}

static bool tenant_mode_locked(void)
{
    return settings_get()->mode == SETTINGS_TENANT && !mg_daemon_down;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct timespec in_ms(uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* ---- the daemon link -------------------------------------------------------------- */

/* Wakes the credit sender when g has something to say and the sender sleeps. */
static void wake_sender_locked(uint32_t g)
{
    bool request;
    if (mg_sender_idle && mg_connected && credit_has_message(&mg_credit[g], &request)) {
        mg_sender_idle = false;
        pthread_cond_signal(&mg_send_cv);
    }
}

/* A CREDIT reply or a CREDIT_RECALL (the agent's mutex held: no agent calls). */
static void on_credit_message(const struct kairos_credit *reply,
                              const struct kairos_credit_recall *recall)
{
    pthread_mutex_lock(&mg_mu);
    uint32_t g = reply ? reply->gpu : recall->gpu;
    if (reply) {
        credit_on_reply(&mg_credit[g], reply, now_ms());
        if (reply->quota)
            mg_quota[g] = reply->quota;
        pthread_cond_broadcast(&mg_cv);
    } else {
        credit_recall(&mg_credit[g], recall->bytes);
    }
    wake_sender_locked(g);
    pthread_mutex_unlock(&mg_mu);
}

/* A ROOM: a refusal on gpu may fit now (the agent's mutex held: no agent calls). */
static void on_room(uint32_t gpu)
{
    pthread_mutex_lock(&mg_mu);
    credit_on_room(&mg_credit[gpu]);
    pthread_mutex_unlock(&mg_mu);
}

static void fall_back_locked(const char *why)
{
    const struct settings *s = settings_get();
    mg_daemon_down = true;
    set_all_quotas(s->standalone_quota ? s->standalone_quota : UNLIMITED);
    /* what this process holds stays counted against the local quota */
    for (int g = 0; g < KAIROS_MAX_GPUS; g++)
        mg_charged[g] = mg_credit[g].held;
    pthread_cond_broadcast(&mg_cv);
    char msg[512];
    snprintf(msg, sizeof msg, "kairosd unreachable (%s); on_daemon_down: open in %.200s: %s",
             why, s->conf_source,
             s->standalone_quota ? "local quota KAIROS_MEM in force" : "no quota in force");
    say(msg);
}

/* HELLO (REATTACH with what this process holds and its unused credit). Called with
 * reg_mu held, never mg_mu. */
static int register_with_daemon(bool reattach, char *err, size_t err_len)
{
    const struct settings *s = settings_get();
    struct agent_quota q;
    uint64_t claim[KAIROS_MAX_GPUS];
    pthread_mutex_lock(&mg_mu);
    for (int g = 0; g < KAIROS_MAX_GPUS; g++) {
        claim[g] = credit_claim(&mg_credit[g]);
        mg_credit[g].returning = 0; /* the new daemon counts only the claim */
    }
    pthread_mutex_unlock(&mg_mu);
    int rc = agent_connect(mg_real, s->socket_path, s->tenant, claim, reattach, &q, err,
                           err_len);
    if (rc == 0) {
        pthread_mutex_lock(&mg_mu);
        set_all_quotas(0);
        memcpy(mg_quota, q.quota, sizeof(uint64_t) * q.n_gpus);
        if (q.routed)
            space_route_set(&q.route);
        if (q.routed && q.route.mode == KAIROS_ROUTE_MPS)
            soft_end_arm(agent_send_ending); /* its SIGTERM spares its fault domain */
        mg_n_gpus = q.n_gpus;
        for (int g = 0; g < KAIROS_MAX_GPUS; g++)
            credit_reconnected(&mg_credit[g]);
        mg_registered = true;
        mg_daemon_down = false;
        mg_connected = true;
        mg_sender_idle = false;
        pthread_cond_signal(&mg_send_cv);
        pthread_cond_broadcast(&mg_cv);
        pthread_mutex_unlock(&mg_mu);
    }
    return rc;
}

/* The watcher: reads what kairosd pushes (credit replies, recalls, time
 * policies), notices at once when it goes away (restart, upgrade) and
 * reattaches with what this process holds, so the new daemon's ledger is whole
 * again without waiting for this process's next allocation. Retries after 50 ms,
 * the wait doubling to 250 ms: the new daemon grants nothing until its members
 * are back. */
static void *watch_daemon(void *unused)
{
    (void)unused;
    unsigned backoff_ms = 50;
    for (;;) {
        if (agent_service(1000) == 0)
            continue;
        pthread_mutex_lock(&mg_mu);
        mg_connected = false;
        bool fallen = mg_daemon_down;
        pthread_mutex_unlock(&mg_mu);
        if (fallen)
            return NULL; /* on_daemon_down: open took over: the local quota holds */
        pthread_mutex_lock(&reg_mu);
        char err[KAIROS_MSG_MAX];
        bool ok = agent_connected() || register_with_daemon(true, err, sizeof err) == 0;
        pthread_mutex_unlock(&reg_mu);
        if (ok) {
            backoff_ms = 50;
            say("reattached to kairosd");
            ipc_after_reattach(); /* the new kairosd knows no share or import (ipc.h) */
            continue;
        }
        usleep(backoff_ms * 1000);
        backoff_ms = backoff_ms < 250 ? backoff_ms * 2 : 250;
    }
    return NULL;
}

/* The credit sender: builds CREDIT messages under mg_mu and sends them without it.
 * Requests, returns and recall answers go at once; reports of held only at most
 * every MEMGUARD_REPORT_MIN_MS. */
static void *send_credit(void *unused)
{
    (void)unused;
    uint64_t last_report_ms = 0;
    pthread_mutex_lock(&mg_mu);
    for (;;) {
        struct kairos_credit msgs[KAIROS_MAX_GPUS];
        unsigned n = 0;
        bool later = false;
        for (uint32_t g = 0; mg_connected && !mg_daemon_down && g < mg_n_gpus; g++) {
            struct credit_gpu *c = &mg_credit[g];
            bool request;
            if (!credit_has_message(c, &request))
                continue;
            bool urgent = request || c->returning || c->recalled;
            if (!urgent && now_ms() < last_report_ms + MEMGUARD_REPORT_MIN_MS) {
                later = true;
                continue;
            }
            credit_next_message(c, g, &msgs[n++]);
        }
        if (!n) {
            if (later) {
                struct timespec ts = in_ms(MEMGUARD_REPORT_MIN_MS);
                pthread_cond_timedwait(&mg_send_cv, &mg_mu, &ts);
            } else {
                mg_sender_idle = true;
                pthread_cond_wait(&mg_send_cv, &mg_mu);
                mg_sender_idle = false;
            }
            continue;
        }
        mg_sender_sending = true;
        pthread_mutex_unlock(&mg_mu);
        int rc = 0;
        unsigned sent = 0;
        for (; sent < n && rc == 0; sent++)
            rc = agent_send_credit(&msgs[sent]);
        if (rc == 0)
            last_report_ms = now_ms();
        pthread_mutex_lock(&mg_mu);
        mg_sender_sending = false; /* a request that waited for this goes next */
        if (rc < 0) { /* the failed one and those after it wait for the next try */
            for (unsigned i = sent - 1; i < n; i++)
                credit_unsend(&mg_credit[msgs[i].gpu], &msgs[i]);
            if (rc != -EAGAIN)
                mg_connected = false; /* the watcher reattaches and wakes us */
            else {
                struct timespec ts = in_ms(1);
                pthread_cond_timedwait(&mg_send_cv, &mg_mu, &ts);
            }
        }
    }
    return NULL;
}

static void start_threads(void)
{
    pthread_mutex_lock(&mg_mu);
    bool start = !mg_threads_started;
    mg_threads_started = true;
    pthread_mutex_unlock(&mg_mu);
    if (start) {
        own_thread_start(NULL, send_credit, NULL);
        own_thread_start(NULL, watch_daemon, NULL);
    }
}

/* space_route.h's registrar: a tenant's process registers at libcuda's question. */
static int register_for_route(void)
{
    if (!memguard_active() || settings_get()->mode != SETTINGS_TENANT)
        return -1;
    return memguard_first_gpu_use(shim_real_get());
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
    pthread_mutex_lock(&reg_mu);
    pthread_mutex_lock(&mg_mu);
    mg_real = r;
    bool needed = !mg_registered && !mg_daemon_down;
    pthread_mutex_unlock(&mg_mu);
    int rc = 0;
    if (needed) {
        char err[KAIROS_MSG_MAX] = "";
        rc = register_with_daemon(false, err, sizeof err);
        if (rc == -EPERM || rc == -EINVAL) {
            dprintf(2, "kairos[%d]: GPU access refused: %s\n", (int)getpid(), err);
            rc = -EACCES;
        } else if (rc < 0 && s->fail_open) {
            pthread_mutex_lock(&mg_mu);
            fall_back_locked(strerror(-rc));
            pthread_mutex_unlock(&mg_mu);
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
    pthread_mutex_unlock(&reg_mu);
    if (rc == 0 && mg_registered)
        start_threads();
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

/* Copies len bytes of the call's argument or parameters: from the shim's own copy
 * with memcpy, else (the application's memory) with a copy that cannot fault. */
static bool copy_in(const struct shadow_call *sh, void *dst, const void *src, size_t len)
{
    if (shadow_owns(sh, src, len)) {
        memcpy(dst, src, len);
        return true;
    }
    return app_memory_read(dst, src, len) == len;
}

static bool read_rm_alloc(const struct shadow_call *sh, uint32_t size, const void *arg,
                          struct pending_alloc *a)
{
    uint8_t args[sizeof(struct rm_alloc64_args)];
    if (!copy_in(sh, args, arg, size))
        return false;
    if (bytes_u32(args + 12) != RM_CLASS_NV01_MEMORY_LOCAL_USER)
        return false;
    uint8_t params[sizeof(struct rm_memory_alloc_params)];
    const void *pp = (const void *)(uintptr_t)bytes_u64(args + 16);
    if (!copy_in(sh, params, pp, sizeof params))
        return false;
    uint32_t attr2 = bytes_u32(params + offsetof(struct rm_memory_alloc_params, attr2));
    uint64_t want = bytes_u64(params + offsetof(struct rm_memory_alloc_params, size));
    bool huge_512m = ((attr2 >> 20) & 3u) == 2u;
    a->h_client = bytes_u32(args);
    a->h_parent = bytes_u32(args + 4);
    a->bytes = round_up(want ? want : 1, huge_512m ? PAGE_512M : PAGE_2M);
    return true;
}

static bool read_vidheap_alloc(const struct shadow_call *sh, const void *arg,
                               struct pending_alloc *a)
{
    uint8_t args[RM_VIDHEAP_SIZE];
    if (!copy_in(sh, args, arg, sizeof args))
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

static bool read_allocation(const struct shadow_call *sh, uint32_t req, const void *arg,
                            struct pending_alloc *a)
{
    if (RM_IOC_TYPEOF(req) != RM_IOC_TYPE)
        return false;
    uint32_t nr = RM_IOC_NR(req), size = RM_IOC_SIZE(req);
    if (nr == RM_NR_ALLOC && (size == sizeof(struct rm_alloc_args) ||
                              size == sizeof(struct rm_alloc64_args)))
        return read_rm_alloc(sh, size, arg, a);
    if (nr == RM_NR_VID_HEAP_CONTROL && size == RM_VIDHEAP_SIZE)
        return read_vidheap_alloc(sh, arg, a);
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

/* How long an allocation waits for credit when kairosd does not answer (a
 * restart, an upgrade) before it is refused (fail-closed): a restart costs a
 * pause, not an out-of-memory error. Only this allocation waits: the others go
 * on within the credit their process holds. */
#define MEMGUARD_RESTART_WAIT_MS 5000u
#define MEMGUARD_MANAGED_GIVE_BACKS 3 /* credit given back for one range, at most */

enum reserve_outcome { RESERVE_CREDIT, RESERVE_LOCAL, RESERVE_REFUSED };

/* A waiting allocation sends the request for its GPU itself (one thread hand-off
 * less than waking the sender); mg_mu is let go for the send. Not while the sender
 * holds messages it built before: a request must not overtake a report giving
 * credit back (kairosd would count that credit as still held and refuse the
 * request below the quota); the sender builds the request next, in order. */
static void send_own_request_locked(uint32_t g)
{
    struct credit_gpu *c = &mg_credit[g];
    bool request;
    struct kairos_credit m;
    if (!mg_connected || mg_sender_sending || !credit_has_message(c, &request) ||
        !request || !credit_next_message(c, g, &m))
        return;
    pthread_mutex_unlock(&mg_mu);
    int rc = agent_try_send_credit(&m);
    pthread_mutex_lock(&mg_mu);
    if (rc < 0) {
        credit_unsend(c, &m);
        mg_sender_idle = false; /* the sender retries (or waits for the reattach) */
        pthread_cond_signal(&mg_send_cv);
    }
}

/* Waits for kairosd's answer, which the watcher reads (mg_mu let go). */
static int wait_for_answer_locked(const struct timespec *deadline)
{
    return pthread_cond_timedwait(&mg_cv, &mg_mu, deadline);
}

/* Tenant mode: from credit, with no message when it fits; else ask and wait
 * (without mg_mu) for the answer. */
static enum reserve_outcome credit_reserve_locked(uint32_t g, uint64_t bytes)
{
    struct credit_gpu *c = &mg_credit[g];
    if (credit_take(c, bytes)) {
        wake_sender_locked(g); /* below half a chunk: ask ahead */
        return RESERVE_CREDIT;
    }
    if (credit_refusal_holds(c, bytes, now_ms()))
        return RESERVE_REFUSED; /* kairosd refused as much and told of no change since */
    uint64_t gen = credit_wait_begin(c, bytes);
    send_own_request_locked(g);
    struct timespec deadline = in_ms(MEMGUARD_RESTART_WAIT_MS);
    enum reserve_outcome out = RESERVE_REFUSED;
    bool timed_out = false;
    for (;;) {
        if (mg_daemon_down)
            break;
        if (credit_take(c, bytes)) {
            out = RESERVE_CREDIT;
            break;
        }
        if (credit_wait_refused(c, gen))
            break;
        if (wait_for_answer_locked(&deadline) == ETIMEDOUT) {
            timed_out = !credit_take(c, bytes);
            out = timed_out ? RESERVE_REFUSED : RESERVE_CREDIT;
            break;
        }
    }
    credit_wait_end(c, bytes);
    wake_sender_locked(g);
    if (timed_out && settings_get()->fail_open && !mg_daemon_down)
        fall_back_locked("no answer within 5 s");
    else if (timed_out)
        say("kairosd did not answer within 5 s: allocation refused (fail-closed)");
    if (out == RESERVE_REFUSED && mg_daemon_down)
        return local_reserve_locked(g, bytes) ? RESERVE_LOCAL : RESERVE_REFUSED;
    return out;
}

bool memguard_before(const struct shim_real *r, uint32_t req, void *arg,
                     const struct shadow_call *sh, struct memguard_ticket *t)
{
    memset(t, 0, sizeof *t);
    struct pending_alloc a;
    if (!memguard_active() || !read_allocation(sh, req, arg, &a))
        return false;
    uint32_t g = gpu_of_parent(a.h_client, a.h_parent);
    pthread_mutex_lock(&mg_mu);
    mg_real = r;
    uint64_t token = ++mg_next_token;
    enum reserve_outcome out = tenant_mode_locked() ? credit_reserve_locked(g, a.bytes)
                               : local_reserve_locked(g, a.bytes) ? RESERVE_LOCAL
                                                                  : RESERVE_REFUSED;
    if (out == RESERVE_REFUSED)
        mg_refusals++;
    pthread_mutex_unlock(&mg_mu);
    if (out != RESERVE_REFUSED)
        *t = (struct memguard_ticket){true, g, a.bytes, token, out == RESERVE_CREDIT};
    return out == RESERVE_REFUSED;
}

/* Gives back all of this process's unused credit on g at once, in a report this
 * thread sends before its next request (the same socket keeps the order), with
 * nothing asked ahead until kairosd's next reply says. False when there was none
 * (or it could not be sent now: the sender tells it later). */
static bool give_credit_back(uint32_t g)
{
    struct credit_gpu *c = &mg_credit[g];
    struct kairos_credit m;
    pthread_mutex_lock(&mg_mu);
    bool had = c->credit > 0 && mg_connected;
    if (had) {
        c->returning += c->credit;
        c->credit = 0;
        c->exact = true; /* as after a recall: no request ahead races the range */
        c->all = false;
        c->dirty = true;
        had = credit_next_message(c, g, &m);
    }
    pthread_mutex_unlock(&mg_mu);
    if (!had)
        return false;
    int rc = agent_send_credit(&m);
    if (rc < 0) {
        pthread_mutex_lock(&mg_mu);
        credit_unsend(c, &m);
        wake_sender_locked(g);
        pthread_mutex_unlock(&mg_mu);
    }
    return rc == 0;
}

/* A managed range on GPU g in tenant mode: kairosd decides each one (the tenant's
 * policy, then held + draining + credit + bytes <= quota) with a CHARGE flagged
 * KAIROS_CHARGE_MANAGED, never from credit. This thread sends it without mg_mu
 * (lock order: the agent's mutex before mg_mu): the agent's exchange owns the
 * socket until the GRANT, so the watcher reads nothing meanwhile, and credit
 * pushes met on the way go to on_credit_message. kairosd counts a granted range
 * as this process's holdings at once (no COMMIT follows); here it becomes held as
 * if taken from credit, so that the next report says the same and the ticket
 * settles like one from credit. Refused for want of room while this process holds
 * unused credit there, it gives that back and asks again (at most
 * MEMGUARD_MANAGED_GIVE_BACKS times): its own credit does not stand in the way.
 * While kairosd cannot be asked (a restart, its reattach window) it asks again
 * every 25 ms or as the watcher reattaches, for
 * MEMGUARD_RESTART_WAIT_MS at most. 0, -EPERM (the policy refuses, or kairosd
 * cannot be asked), -ENOMEM (beyond the quota, or no answer). */
static int managed_charge_asking(uint32_t g, uint64_t bytes, uint64_t token)
{
    uint64_t give_up_ms = now_ms() + MEMGUARD_RESTART_WAIT_MS;
    unsigned gave_back = 0;
    for (;;) {
        struct kairos_grant grant;
        int rc = agent_charge_flags(g, bytes, token, KAIROS_CHARGE_MANAGED, &grant);
        if (rc == 0 && !grant.granted && grant.reason != KAIROS_GRANT_MANAGED_REFUSED &&
            gave_back < MEMGUARD_MANAGED_GIVE_BACKS) {
            gave_back++;
            if (give_credit_back(g))
                continue;
        }
        pthread_mutex_lock(&mg_mu);
        if (rc == 0 && grant.granted) {
            struct credit_gpu *c = &mg_credit[g];
            c->credit += bytes; /* kairosd counts it: taken as an allocation takes */
            credit_take(c, bytes);
            wake_sender_locked(g);
        }
        bool down = mg_daemon_down, late = rc < 0 && now_ms() >= give_up_ms;
        if (rc < 0 && !down && !late) {
            struct timespec again = in_ms(25); /* or sooner, woken by a reattach */
            pthread_cond_timedwait(&mg_cv, &mg_mu, &again);
        }
        if (late && settings_get()->fail_open && !down)
            fall_back_locked("no answer within 5 s");
        pthread_mutex_unlock(&mg_mu);
        if (rc == 0)
            return grant.granted                                  ? 0
                   : grant.reason == KAIROS_GRANT_MANAGED_REFUSED ? -EPERM
                                                                  : -ENOMEM;
        if (down)
            return -EPERM; /* fallen back (fail-open): the tenant's policy is unknown */
        if (late) {
            say("kairosd did not answer within 5 s: managed memory refused");
            return -ENOMEM;
        }
    }
}

/* managed_charge_asking with nothing asked ahead meanwhile: a chunk ahead granted
 * between its give-back and its CHARGE (an answer to an earlier report clears the
 * give-back's exact) would refuse the range again (test_memory.py's Managed test
 * saw it 1 run in 40 under load). A request ahead already in flight is met by a
 * second give-back. */
static int managed_charge(uint32_t g, uint64_t bytes, uint64_t token)
{
    pthread_mutex_lock(&mg_mu);
    mg_credit[g].ahead_off++;
    pthread_mutex_unlock(&mg_mu);
    int rc = managed_charge_asking(g, bytes, token);
    pthread_mutex_lock(&mg_mu);
    if (mg_credit[g].ahead_off) /* 0 when a fork reset it meanwhile: not ours */
        mg_credit[g].ahead_off--;
    wake_sender_locked(g); /* it may ask ahead again */
    pthread_mutex_unlock(&mg_mu);
    return rc;
}

int memguard_reserve_managed(const struct shim_real *r, uint32_t gpu, uint64_t bytes,
                             struct memguard_ticket *t)
{
    memset(t, 0, sizeof *t);
    if (!memguard_active())
        return 0;
    const struct settings *s = settings_get();
    uint32_t g = gpu < KAIROS_MAX_GPUS ? gpu : KAIROS_MAX_GPUS - 1;
    if (s->mode == SETTINGS_TENANT && memguard_first_gpu_use(r) < 0)
        return -EPERM; /* not a member: no GPU memory at all */
    pthread_mutex_lock(&mg_mu);
    mg_real = r;
    uint64_t token = ++mg_next_token;
    bool tenant = tenant_mode_locked() && mg_registered;
    int rc = 0;
    if (!tenant && s->mode == SETTINGS_TENANT)
        rc = -EPERM; /* kairosd unreachable (fail-open): the tenant's policy is unknown */
    else if (!tenant && !s->managed_charge)
        rc = -EPERM; /* standalone: KAIROS_MANAGED=charge was not asked for */
    else if (!tenant)
        rc = local_reserve_locked(g, bytes) ? 0 : -ENOMEM;
    pthread_mutex_unlock(&mg_mu);
    if (tenant)
        rc = managed_charge(g, bytes, token);
    if (rc == -ENOMEM) {
        pthread_mutex_lock(&mg_mu);
        mg_refusals++;
        pthread_mutex_unlock(&mg_mu);
    }
    if (rc == 0)
        *t = (struct memguard_ticket){true, g, bytes, token, tenant};
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

/* The tree's effect on GPU g, in tenant mode: into credit (kairosd hears of it in
 * the next report). */
static void settle_credit_locked(uint32_t g, int64_t d, const struct memguard_ticket *t)
{
    struct credit_gpu *c = &mg_credit[g];
    uint64_t actual = d > 0 ? (uint64_t)d : 0;
    if (t && t->active && t->from_credit && t->gpu == g)
        credit_settle(c, t->reserved, actual);
    else if (actual)
        credit_settle(c, 0, actual); /* memory taken without a reservation */
    if (d < 0)
        credit_release(c, (uint64_t)-d);
    wake_sender_locked(g);
}

static void settle_locked(const struct memguard_ticket *t, const struct objtree_effect *e)
{
    if (t && t->active && !t->from_credit)
        mg_pending[t->gpu] -= t->reserved < mg_pending[t->gpu] ? t->reserved : mg_pending[t->gpu];
    bool tenant = tenant_mode_locked() && mg_registered;
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++) {
        int64_t d = e ? e->vidmem_delta_gpu[g] : 0;
        if (d > 0)
            mg_charged[g] += (uint64_t)d;
        else if (d < 0)
            mg_charged[g] -= (uint64_t)-d > mg_charged[g] ? mg_charged[g] : (uint64_t)-d;
        if (tenant && (d != 0 || (t && t->active && t->from_credit && t->gpu == g)))
            settle_credit_locked(g, d, t);
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

/* What the whole tenant holds on GPU g, from the cache the credit replies refresh
 * (no round trip: an old cache asks the sender for a report, whose reply
 * refreshes it); a standalone process knows its own. */
static uint64_t tenant_held_locked(uint32_t g)
{
    static uint64_t asked_ms[KAIROS_MAX_GPUS];
    if (tenant_mode_locked() && mg_registered) {
        struct credit_gpu *c = &mg_credit[g];
        uint64_t now = now_ms();
        if (now - asked_ms[g] >= MEMGUARD_VIEW_REFRESH_MS) {
            asked_ms[g] = now;
            c->dirty = true; /* a report, answered with the tenant's holdings */
            wake_sender_locked(g);
        }
        return credit_tenant_held(c);
    }
    return mg_charged[g];
}

void memguard_rewrite_fb_entries(uint8_t *entries, uint32_t count, int gpu)
{
    if (!memguard_active())
        return;
    uint32_t g = gpu < 0 ? 0 : gpu < KAIROS_MAX_GPUS ? (uint32_t)gpu : KAIROS_MAX_GPUS - 1;
    pthread_mutex_lock(&mg_mu);
    uint64_t quota = mg_quota[g];
    uint64_t held = quota == UNLIMITED ? 0 : tenant_held_locked(g);
    pthread_mutex_unlock(&mg_mu);
    if (quota == UNLIMITED)
        return;
    uint64_t free_kib = held >= quota ? 0 : (quota - held) >> 10;
    if (count > RM_FB_INFO_MAX)
        count = RM_FB_INFO_MAX;
    for (uint32_t i = 0; i < count; i++) {
        uint8_t *entry = entries + 8 * i;
        uint32_t index = bytes_u32(entry), data = bytes_u32(entry + 4);
        uint64_t shown = data;
        if (index == RM_FB_INFO_HEAP_SIZE || index == RM_FB_INFO_TOTAL_RAM_SIZE ||
            index == RM_FB_INFO_RAM_SIZE || index == RM_FB_INFO_USABLE_RAM_SIZE)
            shown = (quota >> 10) < data ? quota >> 10 : data;
        else if (index == RM_FB_INFO_HEAP_FREE)
            shown = free_kib < data ? free_kib : data;
        uint32_t v = (uint32_t)shown;
        memcpy(entry + 4, &v, sizeof v);
    }
}

/* At a normal exit: tell kairosd exactly what this process holds and give its credit
 * back (one-way, never waiting), before the hang-up that releases or, while the GPU
 * still holds the memory (a child keeps the descriptors), keeps its charge. */
__attribute__((destructor)) static void report_at_exit(void)
{
    if (!memguard_active())
        return;
    struct kairos_credit msgs[KAIROS_MAX_GPUS];
    unsigned n = 0;
    pthread_mutex_lock(&mg_mu);
    if (tenant_mode_locked() && mg_registered && mg_connected)
        for (uint32_t g = 0; g < mg_n_gpus; g++)
            if (credit_last_message(&mg_credit[g], g, &msgs[n]))
                n++;
    pthread_mutex_unlock(&mg_mu);
    /* the watcher may hold the connection's mutex for a moment, or the socket be full
     * for one (the sender's reports before this one): 100 ms at most for both */
    for (unsigned i = 0, tries = 0; i < n; i++)
        for (int rc; (rc = agent_try_send_credit(&msgs[i])) == -EBUSY || rc == -EAGAIN;) {
            if (tries++ >= 100)
                break;
            usleep(1000);
        }
}

/* ---- introspection ------------------------------------------------------------------ */

void memguard_stats(struct memguard_stats *s)
{
    pthread_mutex_lock(&mg_mu);
    memcpy(s->charged, mg_charged, sizeof s->charged);
    for (int g = 0; g < KAIROS_MAX_GPUS; g++)
        s->credit[g] = mg_credit[g].credit;
    memcpy(s->quota, mg_quota, sizeof s->quota);
    s->refusals = mg_refusals;
    pthread_mutex_unlock(&mg_mu);
}

void memguard_reset(void)
{
    pthread_mutex_lock(&mg_mu);
    agent_forget();
    mg_registered = mg_daemon_down = mg_connected = false;
    memset(mg_charged, 0, sizeof mg_charged);
    memset(mg_pending, 0, sizeof mg_pending);
    memset(mg_credit, 0, sizeof mg_credit);
    mg_refusals = 0;
    pthread_mutex_unlock(&mg_mu);
    settings_load();
    memguard_init();
}
