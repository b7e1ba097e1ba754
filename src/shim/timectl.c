/* timectl.c - timeslices, pause/resume, the doorbell guard (see timectl.h).
 *
 * Owns the per-GPU policies, the paused state, the table of doorbell mappings
 * (fixed, of atomics, so the SIGSEGV handler can read it), the SIGSEGV handler
 * and its chain, and the control thread. Locks: tc_mu guards the policies and
 * the thread; tc_op_mu serialises pause/resume and the hooks that act on new
 * objects (it is held across the real ioctls: it is not the state lock, and the
 * state lock is never taken while waiting for it); tc_bell_mu serialises changes
 * to the doorbell table. Order: tc_mu is never held while taking the others
 * (the thread drops it before acting); tc_op_mu -> state lock; tc_op_mu ->
 * tc_bell_mu.
 */
#include "shim/timectl.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/objtree.h"
#include "core/rm_abi.h"
#include "core/rm_names.h"
#include "shim/agent.h"
#include "shim/fdtable.h"
#include "shim/settings.h"
#include "shim/state.h"

#define TC_CMD_SET_TIMESLICE 0xA06C0103u
#define TC_CMD_DISABLE_CHANNELS 0x2080110Bu
#define TC_DISABLE_PARAMS 536
#define TC_BATCH 64
#define TC_MAX_BELLS 64
#define TC_LIST_MAX 4096
#define TC_FAULT_WAIT_NS (10ull * 1000000000ull) /* a doorbell writer waits at most this */

/* ---- state -------------------------------------------------------------------------- */

struct tc_gpu {
    bool have;
    bool ts_dirty;
    struct kairos_time_policy pol;
};

static pthread_mutex_t tc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tc_cv;
static bool tc_cv_ready, tc_thread_running, tc_stop;
static pthread_t tc_thread;
static struct tc_gpu tc_gpus[KAIROS_MAX_GPUS];

static pthread_mutex_t tc_op_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool tc_on;
static _Atomic(const struct shim_real *) tc_real;
static _Atomic uint64_t tc_timeslice[KAIROS_MAX_GPUS]; /* current, 0: leave the driver's */
static atomic_bool tc_paused[KAIROS_MAX_GPUS];

struct tc_bell {
    _Atomic uint64_t addr, len;  /* len 0: free slot */
    atomic_int prot;
    atomic_int gpu;
    atomic_int guarded;          /* 1 while PROT_NONE by us (futex word) */
};
static pthread_mutex_t tc_bell_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tc_bell tc_bells[TC_MAX_BELLS];

static struct sigaction tc_chain[2]; /* the handler before ours; the live one is tc_chain_idx */
static atomic_int tc_chain_idx;
static atomic_bool tc_handler_installed;
static __thread int tc_depth __attribute__((tls_model("initial-exec")));

static _Atomic uint64_t st_pauses, st_resumes, st_failed, st_waits, st_chained;
static _Atomic uint64_t st_overridden; /* the application's own SET_TIMESLICE, undone */
static _Atomic uint64_t st_pause_ns, st_pause_max_ns, st_resume_ns, st_resume_max_ns;

/* ---- controls ----------------------------------------------------------------------- */

static uint32_t control(int fd, uint32_t client, uint32_t object, uint32_t cmd, void *params,
                        uint32_t size)
{
    const struct shim_real *r = atomic_load(&tc_real);
    if (!r || fd < 0) {
        atomic_fetch_add(&st_failed, 1);
        return RM_NV_ERR_INVALID_ARGUMENT;
    }
    struct rm_control_args a = {.h_client = client, .h_object = object, .cmd = cmd,
                                .flags = 0, .params = (uintptr_t)params, .params_size = size};
    int saved = errno;
    int ret = r->ioctl(fd, RM_IOWR(RM_NR_CONTROL, sizeof a), &a);
    errno = saved;
    uint32_t status = ret == 0 ? a.status : 0xffffffffu;
    if (status != RM_NV_OK)
        atomic_fetch_add(&st_failed, 1);
    return status;
}

static void set_timeslice(int fd, uint32_t client, uint32_t tsg, uint64_t us)
{
    uint64_t p = us;
    (void)control(fd, client, tsg, TC_CMD_SET_TIMESLICE, &p, sizeof p);
}

/* One FIFO_DISABLE_CHANNELS call: n <= 64 channels of client, never rewinding,
 * always preempting (bOnlyDisableScheduling=0 hung the process on the H200).
 * Returns the RM status. */
static uint32_t disable_batch(int fd, uint32_t client, uint32_t subdevice, const uint32_t *ch,
                              uint32_t n, bool disable)
{
    uint8_t p[TC_DISABLE_PARAMS];
    memset(p, 0, sizeof p);
    p[0] = disable;
    memcpy(p + 4, &n, 4);
    /* p[8] bOnlyDisableScheduling = 0, p[9] bRewindGpPut = 0, p+16 event = NULL */
    for (uint32_t i = 0; i < n; i++) {
        memcpy(p + 24 + 4 * i, &client, 4);
        memcpy(p + 280 + 4 * i, &ch[i], 4);
    }
    return control(fd, client, subdevice, TC_CMD_DISABLE_CHANNELS, p, sizeof p);
}

/* A batch the driver refuses as a whole (one of its channels was just freed by
 * another thread) is retried channel by channel, so that no live channel is left
 * disabled after a resume, or running after a pause. */
static void disable_channels(int fd, uint32_t client, uint32_t subdevice, const uint32_t *ch,
                             uint32_t n, bool disable)
{
    if (disable_batch(fd, client, subdevice, ch, n, disable) == RM_NV_OK || n == 1)
        return;
    for (uint32_t i = 0; i < n; i++)
        (void)disable_batch(fd, client, subdevice, &ch[i], 1, disable);
}

/* ---- object-tree lookups (under the state lock, briefly) ----------------------------- */

/* The GPU of an object; one the tree cannot place (its device's allocation was
 * not read) counts as GPU 0, the single-GPU case. */
static int gpu_of(const struct objtree *t, uint32_t client, uint32_t object)
{
    int g = objtree_gpu_of(t, client, object);
    return g < 0 ? 0 : g;
}

struct tc_target {
    uint32_t client, handle, subdevice;
    int fd;
};

/* Objects of kind on gpu with the descriptor their client's file has open and,
 * for channels, a subdevice of the same client on that GPU. Returns how many
 * (malloc'd in *out; 0 and NULL when none or out of memory). */
static size_t list_targets(enum rm_class_kind kind, uint32_t gpu, struct tc_target **out)
{
    *out = NULL;
    struct objtree_ref *refs = malloc(TC_LIST_MAX * sizeof *refs);
    struct objtree_ref *subs = malloc(TC_LIST_MAX * sizeof *subs);
    struct tc_target *tg = malloc(TC_LIST_MAX * sizeof *tg);
    size_t n = 0;
    if (!refs || !subs || !tg)
        goto done;
    struct objtree *t = state_lock();
    if (t) {
        size_t nr = objtree_list(t, kind, refs, TC_LIST_MAX);
        size_t ns = kind == RM_KIND_CHANNEL ? objtree_list(t, RM_KIND_SUBDEVICE, subs, TC_LIST_MAX)
                                            : 0;
        nr = nr < TC_LIST_MAX ? nr : TC_LIST_MAX;
        ns = ns < TC_LIST_MAX ? ns : TC_LIST_MAX;
        for (size_t i = 0; i < nr; i++) {
            if (gpu_of(t, refs[i].h_client, refs[i].h_object) != (int)gpu)
                continue;
            struct tc_target x = {refs[i].h_client, refs[i].h_object, 0, -1};
            if (kind == RM_KIND_CHANNEL) {
                for (size_t j = 0; j < ns && !x.subdevice; j++)
                    if (subs[j].h_client == x.client &&
                        gpu_of(t, subs[j].h_client, subs[j].h_object) == (int)gpu)
                        x.subdevice = subs[j].h_object;
                if (!x.subdevice)
                    continue;
            }
            x.fd = fdtable_fd_of_file(refs[i].file_id);
            if (x.fd >= 0)
                tg[n++] = x;
        }
    }
    state_unlock();
done:
    free(refs);
    free(subs);
    if (n == 0) {
        free(tg);
        return 0;
    }
    *out = tg;
    return n;
}

/* Disables or enables every channel of the process on gpu, per client, 64 at a time. */
static void all_channels(uint32_t gpu, bool disable)
{
    struct tc_target *tg;
    size_t n = list_targets(RM_KIND_CHANNEL, gpu, &tg);
    bool *done = n ? calloc(n, sizeof *done) : NULL;
    if (n && !done) {
        free(tg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        uint32_t batch[TC_BATCH];
        uint32_t k = 0;
        for (size_t j = i; j < n; j++) {
            if (done[j] || tg[j].client != tg[i].client)
                continue;
            done[j] = true;
            batch[k++] = tg[j].handle;
            if (k == TC_BATCH) {
                disable_channels(tg[i].fd, tg[i].client, tg[i].subdevice, batch, k, disable);
                k = 0;
            }
        }
        if (k)
            disable_channels(tg[i].fd, tg[i].client, tg[i].subdevice, batch, k, disable);
    }
    free(done);
    free(tg);
}

static void all_timeslices(uint32_t gpu, uint64_t us)
{
    struct tc_target *tg;
    size_t n = list_targets(RM_KIND_CHANNEL_GROUP, gpu, &tg);
    for (size_t i = 0; i < n; i++)
        set_timeslice(tg[i].fd, tg[i].client, tg[i].handle, us);
    free(tg);
}

/* ---- the doorbell guard and the SIGSEGV handler -------------------------------------- */

static bool bell_on_gpu(const struct tc_bell *b, uint32_t gpu)
{
    int g = atomic_load(&b->gpu);
    return g < 0 || g == (int)gpu;
}

static void futex_wake_all(atomic_int *w)
{
    syscall(SYS_futex, (int *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Protects (PROT_NONE) or gives back the doorbells of gpu. Call with tc_op_mu. */
static void guard_bells(uint32_t gpu, bool on)
{
    pthread_mutex_lock(&tc_bell_mu);
    for (int i = 0; i < TC_MAX_BELLS; i++) {
        struct tc_bell *b = &tc_bells[i];
        uint64_t len = atomic_load(&b->len);
        if (!len || !bell_on_gpu(b, gpu))
            continue;
        void *a = (void *)(uintptr_t)atomic_load(&b->addr);
        if (on && !atomic_load(&b->guarded)) {
            atomic_store(&b->guarded, 1); /* before the page closes: a fault finds it set */
            if (mprotect(a, len, PROT_NONE) != 0)
                atomic_store(&b->guarded, 0);
        } else if (!on && atomic_load(&b->guarded)) {
            /* a bell of unknown GPU stays closed while any GPU is paused */
            bool other = false;
            for (uint32_t g = 0; g < KAIROS_MAX_GPUS && atomic_load(&b->gpu) < 0; g++)
                other |= g != gpu && atomic_load(&tc_paused[g]);
            if (other)
                continue;
            (void)mprotect(a, len, atomic_load(&b->prot));
            atomic_store(&b->guarded, 0);
            futex_wake_all(&b->guarded);
        }
    }
    pthread_mutex_unlock(&tc_bell_mu);
}

static struct tc_bell *bell_at(uintptr_t addr)
{
    for (int i = 0; i < TC_MAX_BELLS; i++) {
        struct tc_bell *b = &tc_bells[i];
        uint64_t len = atomic_load(&b->len), a = atomic_load(&b->addr);
        if (len && addr >= a && addr - a < len)
            return b;
    }
    return NULL;
}

static void segv_default(int sig, const siginfo_t *si)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (si->si_code <= 0)
        raise(sig); /* sent, not a fault: delivered with the default action on return */
    /* a fault: returning re-executes the access, which now kills with SIGSEGV */
}

static void tc_segv(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    struct tc_bell *b = si->si_code > 0 ? bell_at((uintptr_t)si->si_addr) : NULL;
    if (b && tc_depth == 0) {
        /* A write to a doorbell we closed: wait for resume, then retry the write. */
        atomic_fetch_add(&st_waits, 1);
        uint64_t waited = 0;
        while (atomic_load(&b->guarded) && waited < TC_FAULT_WAIT_NS) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            syscall(SYS_futex, (int *)&b->guarded, FUTEX_WAIT, 1, &ts, NULL, 0);
            waited += 100 * 1000 * 1000;
        }
        if (atomic_load(&b->guarded)) /* paused too long: let this one writer go; the
                                          channels stay disabled, so no work runs */
            (void)mprotect((void *)(uintptr_t)atomic_load(&b->addr), atomic_load(&b->len),
                           atomic_load(&b->prot));
        errno = saved;
        return;
    }
    atomic_fetch_add(&st_chained, 1);
    const struct sigaction *c = &tc_chain[atomic_load(&tc_chain_idx)];
    if (tc_depth > 0) {
        segv_default(sig, si); /* the chained handler chained back to us */
    } else if ((c->sa_flags & SA_SIGINFO) && c->sa_sigaction) {
        tc_depth++;
        c->sa_sigaction(sig, si, uc);
        tc_depth--;
    } else if (!(c->sa_flags & SA_SIGINFO) && c->sa_handler != SIG_DFL &&
               c->sa_handler != SIG_IGN) {
        tc_depth++;
        c->sa_handler(sig);
        tc_depth--;
    } else {
        segv_default(sig, si); /* SIG_DFL; SIG_IGN cannot ignore a fault either */
    }
    errno = saved;
}

/* Makes ours the SIGSEGV handler, keeping the one in place as the one to chain
 * to. Re-checked at every pause, so a handler the application installed since is
 * chained to from then on. Call with tc_op_mu. */
static void ensure_handler(void)
{
    struct sigaction cur;
    if (sigaction(SIGSEGV, NULL, &cur) != 0)
        return;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == tc_segv)
        return;
    int next = !atomic_load(&tc_chain_idx);
    tc_chain[next] = cur;
    atomic_store(&tc_chain_idx, next);
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = tc_segv;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    if (sigaction(SIGSEGV, &ours, NULL) == 0)
        atomic_store(&tc_handler_installed, true);
}

void timectl_doorbell_mapped(uint64_t addr, uint64_t len, int prot, int gpu)
{
    if (gpu >= KAIROS_MAX_GPUS)
        gpu = -1;
    pthread_mutex_lock(&tc_op_mu);
    pthread_mutex_lock(&tc_bell_mu);
    struct tc_bell *b = NULL;
    for (int i = 0; i < TC_MAX_BELLS && !b; i++)
        if (!atomic_load(&tc_bells[i].len))
            b = &tc_bells[i];
    if (b) {
        atomic_store(&b->guarded, 0);
        atomic_store(&b->addr, addr);
        atomic_store(&b->prot, prot);
        atomic_store(&b->gpu, gpu);
        atomic_store(&b->len, len);
    }
    pthread_mutex_unlock(&tc_bell_mu);
    bool paused = false;
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++)
        if (atomic_load(&tc_paused[g]) && (gpu < 0 || (int)g == gpu)) {
            paused = true;
            guard_bells(g, true);
        }
    if (paused)
        ensure_handler();
    pthread_mutex_unlock(&tc_op_mu);
}

void timectl_unmapped(uint64_t addr, uint64_t len)
{
    pthread_mutex_lock(&tc_bell_mu);
    for (int i = 0; i < TC_MAX_BELLS; i++) {
        struct tc_bell *b = &tc_bells[i];
        uint64_t a = atomic_load(&b->addr), l = atomic_load(&b->len);
        if (l && a < addr + len && addr < a + l) {
            atomic_store(&b->len, 0);
            atomic_store(&b->guarded, 0);
            futex_wake_all(&b->guarded);
        }
    }
    pthread_mutex_unlock(&tc_bell_mu);
}

/* ---- pause / resume / hooks ---------------------------------------------------------- */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One pause or resume made, and how long its driver calls took. */
static void count_transition(_Atomic uint64_t *n, _Atomic uint64_t *total,
                             _Atomic uint64_t *max, uint64_t ns)
{
    atomic_fetch_add(n, 1);
    atomic_fetch_add(total, ns);
    uint64_t m = atomic_load(max);
    while (ns > m && !atomic_compare_exchange_weak(max, &m, ns)) {
    }
}

int timectl_pause(uint32_t gpu)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return -EINVAL;
    atomic_store(&tc_on, true); /* the allocation hooks now matter */
    pthread_mutex_lock(&tc_op_mu);
    if (!atomic_load(&tc_paused[gpu])) {
        ensure_handler();
        uint64_t t0 = mono_ns();
        atomic_store(&tc_paused[gpu], true); /* first: channels made now get disabled */
        all_channels(gpu, true);
        guard_bells(gpu, true);
        count_transition(&st_pauses, &st_pause_ns, &st_pause_max_ns, mono_ns() - t0);
    }
    pthread_mutex_unlock(&tc_op_mu);
    return 0;
}

int timectl_resume(uint32_t gpu)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return -EINVAL;
    pthread_mutex_lock(&tc_op_mu);
    if (atomic_load(&tc_paused[gpu])) {
        uint64_t t0 = mono_ns();
        atomic_store(&tc_paused[gpu], false);
        all_channels(gpu, false);
        guard_bells(gpu, false);
        count_transition(&st_resumes, &st_resume_ns, &st_resume_max_ns, mono_ns() - t0);
    }
    pthread_mutex_unlock(&tc_op_mu);
    return 0;
}

bool timectl_is_paused(uint32_t gpu)
{
    return gpu < KAIROS_MAX_GPUS && atomic_load(&tc_paused[gpu]);
}

/* Sets the policy's timeslice on one channel group, if one is in force. Re-reads
 * after setting: a policy change racing with us either listed this group itself
 * or is seen here. Returns whether one was set. */
static bool enforce_timeslice(int fd, uint32_t client, uint32_t tsg, uint32_t gpu)
{
    uint64_t us = atomic_load(&tc_timeslice[gpu]);
    bool set = us != 0;
    while (us) {
        set_timeslice(fd, client, tsg, us);
        uint64_t again = atomic_load(&tc_timeslice[gpu]);
        if (again == us)
            break;
        us = again;
    }
    return set;
}

void timectl_after_app_timeslice(uint32_t h_client, uint32_t h_tsg)
{
    if (!atomic_load(&tc_on))
        return;
    int gpu = -1, fd = -1;
    struct objtree_ref ref;
    struct objtree *t = state_lock();
    if (t && objtree_lookup(t, h_client, h_tsg, &ref)) {
        gpu = gpu_of(t, h_client, h_tsg);
        fd = fdtable_fd_of_file(ref.file_id);
    }
    state_unlock();
    if (gpu >= 0 && gpu < KAIROS_MAX_GPUS && fd >= 0 &&
        enforce_timeslice(fd, h_client, h_tsg, (uint32_t)gpu))
        atomic_fetch_add(&st_overridden, 1);
}

void timectl_after_alloc(uint32_t h_client, uint32_t h_object, uint32_t h_class)
{
    if (!atomic_load(&tc_on))
        return;
    bool tsg = h_class == RM_CLASS_KEPLER_CHANNEL_GROUP_A;
    if (!tsg && rm_class_kind(h_class) != RM_KIND_CHANNEL)
        return;
    int gpu = -1, fd = -1;
    uint32_t subdevice = 0;
    struct objtree_ref ref;
    struct objtree *t = state_lock();
    if (t && objtree_lookup(t, h_client, h_object, &ref)) {
        gpu = gpu_of(t, h_client, h_object);
        fd = fdtable_fd_of_file(ref.file_id);
        if (!tsg && gpu >= 0) {
            struct objtree_ref subs[64];
            size_t ns = objtree_list(t, RM_KIND_SUBDEVICE, subs, 64);
            for (size_t j = 0; j < ns && j < 64 && !subdevice; j++)
                if (subs[j].h_client == h_client &&
                    gpu_of(t, subs[j].h_client, subs[j].h_object) == gpu)
                    subdevice = subs[j].h_object;
        }
    }
    state_unlock();
    if (gpu < 0 || gpu >= KAIROS_MAX_GPUS || fd < 0)
        return;
    if (tsg) {
        (void)enforce_timeslice(fd, h_client, h_object, (uint32_t)gpu);
        return;
    }
    if (!subdevice)
        return;
    pthread_mutex_lock(&tc_op_mu); /* against a resume racing with this disable */
    if (atomic_load(&tc_paused[gpu]))
        disable_channels(fd, h_client, subdevice, &h_object, 1, true);
    pthread_mutex_unlock(&tc_op_mu);
}

/* ---- the policy and the control thread ---------------------------------------------- */

bool timectl_window_paused(const struct kairos_time_policy *p, uint64_t now_ns,
                           uint64_t *next_ns)
{
    *next_ns = UINT64_MAX;
    if (p->period_us == 0 || p->duty_us >= p->period_us)
        return false;
    if (p->duty_us == 0)
        return true;
    uint64_t period = (uint64_t)p->period_us * 1000, duty = (uint64_t)p->duty_us * 1000;
    uint64_t phase = (uint64_t)p->phase_us * 1000 % period;
    /* position in the period, counted from the window's start; now may precede epoch */
    uint64_t since = now_ns >= p->epoch_ns ? (now_ns - p->epoch_ns) % period
                                           : (period - (p->epoch_ns - now_ns) % period) % period;
    uint64_t pos = (since + period - phase) % period;
    if (pos < duty) {
        *next_ns = now_ns + (duty - pos);
        return false;
    }
    *next_ns = now_ns + (period - pos);
    return true;
}

static void *control_thread(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&tc_mu);
    while (!tc_stop) {
        bool acted = false;
        uint64_t deadline = UINT64_MAX;
        for (uint32_t g = 0; g < KAIROS_MAX_GPUS && !acted; g++) {
            struct tc_gpu *s = &tc_gpus[g];
            if (!s->have)
                continue;
            if (s->ts_dirty) {
                s->ts_dirty = false;
                uint64_t us = s->pol.timeslice_us;
                if (us) { /* 0 leaves what was set (the driver's own, or ours before) */
                    atomic_store(&tc_timeslice[g], us);
                    pthread_mutex_unlock(&tc_mu);
                    all_timeslices(g, us);
                    pthread_mutex_lock(&tc_mu);
                    acted = true;
                    continue;
                }
            }
            uint64_t next;
            bool want = timectl_window_paused(&s->pol, mono_ns(), &next);
            if (want != timectl_is_paused(g)) {
                pthread_mutex_unlock(&tc_mu);
                if (want)
                    timectl_pause(g);
                else
                    timectl_resume(g);
                pthread_mutex_lock(&tc_mu);
                acted = true;
                continue;
            }
            if (next < deadline)
                deadline = next;
        }
        if (acted || tc_stop)
            continue;
        if (deadline == UINT64_MAX) {
            pthread_cond_wait(&tc_cv, &tc_mu);
        } else {
            struct timespec ts = {(time_t)(deadline / 1000000000ull),
                                  (long)(deadline % 1000000000ull)};
            pthread_cond_timedwait(&tc_cv, &tc_mu, &ts);
        }
    }
    pthread_mutex_unlock(&tc_mu);
    return NULL;
}

static void init_cv_locked(void)
{
    if (tc_cv_ready)
        return;
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC); /* windows are on CLOCK_MONOTONIC */
    pthread_cond_init(&tc_cv, &a);
    pthread_condattr_destroy(&a);
    tc_cv_ready = true;
}

static void start_thread_locked(void)
{
    if (tc_thread_running)
        return;
    init_cv_locked();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the application's signals are not ours */
    tc_stop = false;
    tc_thread_running = pthread_create(&tc_thread, NULL, control_thread, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void timectl_policy(const struct kairos_time_policy *p)
{
    if (p->gpu >= KAIROS_MAX_GPUS)
        return;
    pthread_mutex_lock(&tc_mu);
    struct tc_gpu *s = &tc_gpus[p->gpu];
    if (!s->have || p->seq > s->pol.seq) {
        s->ts_dirty = !s->have || p->timeslice_us != s->pol.timeslice_us;
        s->have = true;
        s->pol = *p;
        atomic_store(&tc_on, true);
        start_thread_locked();
        if (tc_cv_ready)
            pthread_cond_signal(&tc_cv);
    }
    pthread_mutex_unlock(&tc_mu);
}

static void policy_from_agent(const struct kairos_time_policy *p)
{
    timectl_policy(p); /* quick: stores and wakes the thread, under the agent's mutex */
}

void timectl_init(void)
{
    agent_set_policy_handler(policy_from_agent);
}

void timectl_set_real(const struct shim_real *r)
{
    if (atomic_load_explicit(&tc_real, memory_order_relaxed) != r)
        atomic_store(&tc_real, r);
}

bool timectl_active(void)
{
    return atomic_load(&tc_on);
}

void timectl_stats(struct timectl_stats *s)
{
    s->pauses = atomic_load(&st_pauses);
    s->resumes = atomic_load(&st_resumes);
    s->controls_failed = atomic_load(&st_failed);
    s->doorbell_waits = atomic_load(&st_waits);
    s->chained = atomic_load(&st_chained);
    s->timeslices_overridden = atomic_load(&st_overridden);
    s->pause_ns = atomic_load(&st_pause_ns);
    s->pause_max_ns = atomic_load(&st_pause_max_ns);
    s->resume_ns = atomic_load(&st_resume_ns);
    s->resume_max_ns = atomic_load(&st_resume_max_ns);
}

/* With KAIROS_LOG=stderr, a process that was paused says at exit how often and how
 * long the driver took to pause and resume it (the GPU suite reads this line). */
__attribute__((destructor)) static void report_at_exit(void)
{
    struct timectl_stats s;
    timectl_stats(&s);
    if (!s.pauses || !settings_get()->log_stderr)
        return;
    dprintf(2,
            "kairos[%d]: time control: pauses=%llu pause_mean_us=%.1f pause_max_us=%.1f "
            "resumes=%llu resume_mean_us=%.1f resume_max_us=%.1f doorbell_waits=%llu\n",
            (int)getpid(), (unsigned long long)s.pauses, s.pause_ns / 1e3 / s.pauses,
            s.pause_max_ns / 1e3, (unsigned long long)s.resumes,
            s.resumes ? s.resume_ns / 1e3 / s.resumes : 0.0, s.resume_max_ns / 1e3,
            (unsigned long long)s.doorbell_waits);
}

void timectl_reset(void)
{
    pthread_mutex_lock(&tc_mu);
    bool join = tc_thread_running;
    tc_stop = true;
    if (tc_cv_ready)
        pthread_cond_signal(&tc_cv);
    pthread_mutex_unlock(&tc_mu);
    if (join)
        pthread_join(tc_thread, NULL);
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++)
        timectl_resume(g);
    pthread_mutex_lock(&tc_mu);
    tc_thread_running = false;
    tc_stop = false;
    memset(tc_gpus, 0, sizeof tc_gpus);
    pthread_mutex_unlock(&tc_mu);
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++)
        atomic_store(&tc_timeslice[g], 0);
    pthread_mutex_lock(&tc_bell_mu);
    for (int i = 0; i < TC_MAX_BELLS; i++)
        atomic_store(&tc_bells[i].len, 0);
    pthread_mutex_unlock(&tc_bell_mu);
    atomic_store(&tc_on, false);
    atomic_store(&st_pauses, 0);
    atomic_store(&st_resumes, 0);
    atomic_store(&st_failed, 0);
    atomic_store(&st_waits, 0);
    atomic_store(&st_chained, 0);
    atomic_store(&st_overridden, 0);
    atomic_store(&st_pause_ns, 0);
    atomic_store(&st_pause_max_ns, 0);
    atomic_store(&st_resume_ns, 0);
    atomic_store(&st_resume_max_ns, 0);
}
