/* tc_pause.c - the channel pause and the timeslices: the mechanism of time control.
 *
 * Owns the paused state per GPU, the timeslice in force per GPU, the real-function
 * table controls go through, and tc_op_mu, which serialises pause/resume and the
 * hooks that act on new objects. A pause is NV2080 FIFO_DISABLE_CHANNELS
 * {bDisable=1, bOnlyDisableScheduling=0, bRewindGpPut=0} on every channel of the
 * process on the GPU (64 per call); a resume the same with bDisable=0. Nothing
 * else: the doorbells stay writable. Measured on the H200 (driver 580.159.04): a
 * doorbell rung while the channel is disabled is not lost (the work runs at
 * resume), and the disable preempts a running kernel (bench/results/
 * 2026-12-02-h200-probe), so no page protection and no SIGSEGV handler are needed.
 *
 * Timeslices: a policy's non-zero timeslice is set on every channel group of the
 * process on its GPU, on each one made later, and again over the application's
 * own SET_TIMESLICE. 0 means the application's own (native) timeslices: the value
 * it last set on each group (CUDA: 2048 us on a context's first, 1024 us on the
 * others) is recorded whether a policy is in force or not, and when the policy's
 * timeslice goes from non-zero to 0 each live group is given its value back; under
 * 0 the application's own SET_TIMESLICE stands. The value lives in the object tree,
 * as an attribute of the group's node (objtree_set_timeslice), not in a table here:
 * it goes with the node however the group goes (its free, its parent's, its
 * client's, its file's close), so a handle the driver hands out again never
 * inherits a stale value, and it is bounded by the tree itself (one word per
 * group), with no table to size or to evict from. A group the application never set
 * one on keeps the last timeslice Kairos set (the shim never saw its native value;
 * CUDA sets one on every group it makes). The value is read from the application's
 * parameters once the driver accepted them: a thread that rewrites them at once
 * only changes what it is given back under 0, where its own SET_TIMESLICE stands
 * anyway.
 *
 * Threads: pause/resume run on the control thread (timectl.c) or a test; the
 * allocation hooks on whichever application thread allocated, after its real
 * ioctl returned. tc_op_mu is held across the real ioctls; it is not the state
 * lock, which is taken under it (order: tc_op_mu -> state lock) and never held
 * while waiting for it. Signals: none are used or blocked here; the calls are
 * plain ioctls through the real table and work from any thread.
 * Fork: tc_pause_after_fork() (the child, single-threaded) forgets the paused
 * state and the timeslice, reinitialises tc_op_mu (another thread may have held
 * it at fork), and leaves alone the channels of files opened before the fork:
 * they are the parent's, which pauses them itself.
 */
#include "shim/tc_pause.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "core/objtree.h"
#include "core/rm_abi.h"
#include "core/rm_names.h"
#include "shim/fdtable.h"
#include "shim/state.h"
#include "shim/timectl.h"

#define TC_CMD_SET_TIMESLICE 0xA06C0103u
#define TC_CMD_DISABLE_CHANNELS 0x2080110Bu
#define TC_DISABLE_PARAMS 536
#define TC_BATCH 64
#define TC_LIST_MAX 4096

static pthread_mutex_t tc_op_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool tc_on;
static _Atomic(const struct shim_real *) tc_real;
static _Atomic uint64_t tc_timeslice[KAIROS_MAX_GPUS]; /* current, 0: the application's */
static atomic_bool tc_paused[KAIROS_MAX_GPUS];
/* Unpaused time per GPU (under tc_op_mu): summed since the last take, and when the
 * current unpaused stretch began (0: paused now). A process never paused counts
 * from its first take. */
static uint64_t tc_unpaused_ns[KAIROS_MAX_GPUS], tc_unpaused_since[KAIROS_MAX_GPUS];
static uint64_t tc_first_own_file; /* files with a lower id are a forking parent's */

static _Atomic uint64_t st_pauses, st_resumes, st_failed;
static _Atomic uint64_t st_overridden; /* the application's own SET_TIMESLICE, undone */
static _Atomic uint64_t st_restored;   /* channel groups given their own timeslice back */
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
    uint64_t app_us; /* channel groups: the application's own timeslice (0: none seen) */
};

/* The lists a pause works through: static, under tc_op_mu. The control thread
 * never calls malloc, so a fork can never catch it holding the allocator's lock
 * (the child of a fork would wait on it forever under allocators that do not
 * take their locks around fork; ASan's is one). */
static struct objtree_ref tc_refs[TC_LIST_MAX], tc_subs[TC_LIST_MAX];
static struct tc_target tc_targets[TC_LIST_MAX];
static bool tc_done[TC_LIST_MAX];

/* Objects of kind on gpu with the descriptor their client's file has open and,
 * for channels, a subdevice of the same client on that GPU, into tc_targets.
 * Returns how many. Call with tc_op_mu. */
static size_t list_targets(enum rm_class_kind kind, uint32_t gpu)
{
    size_t n = 0;
    struct objtree *t = state_lock();
    if (t) {
        size_t nr = objtree_list(t, kind, tc_refs, TC_LIST_MAX);
        size_t ns = kind == RM_KIND_CHANNEL
                        ? objtree_list(t, RM_KIND_SUBDEVICE, tc_subs, TC_LIST_MAX)
                        : 0;
        nr = nr < TC_LIST_MAX ? nr : TC_LIST_MAX;
        ns = ns < TC_LIST_MAX ? ns : TC_LIST_MAX;
        for (size_t i = 0; i < nr; i++) {
            const struct objtree_ref *ref = &tc_refs[i];
            if (ref->file_id < tc_first_own_file ||
                gpu_of(t, ref->h_client, ref->h_object) != (int)gpu)
                continue;
            struct tc_target x = {ref->h_client, ref->h_object, 0, -1, 0};
            if (kind == RM_KIND_CHANNEL_GROUP)
                x.app_us = objtree_timeslice(t, x.client, x.handle);
            if (kind == RM_KIND_CHANNEL) {
                for (size_t j = 0; j < ns && !x.subdevice; j++)
                    if (tc_subs[j].h_client == x.client &&
                        gpu_of(t, tc_subs[j].h_client, tc_subs[j].h_object) == (int)gpu)
                        x.subdevice = tc_subs[j].h_object;
                if (!x.subdevice)
                    continue;
            }
            x.fd = fdtable_fd_of_file(ref->file_id);
            if (x.fd >= 0)
                tc_targets[n++] = x;
        }
    }
    state_unlock();
    return n;
}

/* Disables or enables every channel of the process on gpu, per client, 64 at a
 * time. Call with tc_op_mu. */
static void all_channels(uint32_t gpu, bool disable)
{
    size_t n = list_targets(RM_KIND_CHANNEL, gpu);
    const struct tc_target *tg = tc_targets;
    memset(tc_done, 0, n * sizeof *tc_done);
    for (size_t i = 0; i < n; i++) {
        if (tc_done[i])
            continue;
        uint32_t batch[TC_BATCH];
        uint32_t k = 0;
        for (size_t j = i; j < n; j++) {
            if (tc_done[j] || tg[j].client != tg[i].client)
                continue;
            tc_done[j] = true;
            batch[k++] = tg[j].handle;
            if (k == TC_BATCH) {
                disable_channels(tg[i].fd, tg[i].client, tg[i].subdevice, batch, k, disable);
                k = 0;
            }
        }
        if (k)
            disable_channels(tg[i].fd, tg[i].client, tg[i].subdevice, batch, k, disable);
    }
}

/* The application's own timeslice on a channel group, as the tree has it now. */
static uint64_t app_timeslice(uint32_t client, uint32_t tsg)
{
    struct objtree *t = state_lock();
    uint64_t us = t ? objtree_timeslice(t, client, tsg) : 0;
    state_unlock();
    return us;
}

/* Gives a channel group on gpu its own timeslice back, if the application set
 * one. Re-reads after setting: an application's SET_TIMESLICE racing with ours
 * either was recorded before the list or is seen here and set again (a few
 * times at most). Returns whether one was set. */
static bool restore_timeslice(const struct tc_target *x, uint32_t gpu)
{
    uint64_t us = x->app_us;
    for (int i = 0; i < 4 && us && !atomic_load(&tc_timeslice[gpu]); i++) {
        set_timeslice(x->fd, x->client, x->handle, us);
        uint64_t again = app_timeslice(x->client, x->handle);
        if (again == us)
            break;
        us = again;
    }
    return x->app_us != 0;
}

void tc_pause_set_timeslice(uint32_t gpu, uint64_t us)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return;
    uint64_t was = atomic_exchange(&tc_timeslice[gpu], us);
    if (!us && !was)
        return; /* the application's own are in force already */
    pthread_mutex_lock(&tc_op_mu);
    size_t n = list_targets(RM_KIND_CHANNEL_GROUP, gpu);
    for (size_t i = 0; i < n; i++) {
        const struct tc_target *x = &tc_targets[i];
        if (us)
            set_timeslice(x->fd, x->client, x->handle, us);
        else if (restore_timeslice(x, gpu))
            atomic_fetch_add(&st_restored, 1);
    }
    pthread_mutex_unlock(&tc_op_mu);
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
        uint64_t t0 = mono_ns();
        atomic_store(&tc_paused[gpu], true); /* first: channels made now get disabled */
        all_channels(gpu, true);
        uint64_t t1 = mono_ns();
        count_transition(&st_pauses, &st_pause_ns, &st_pause_max_ns, t1 - t0);
        if (tc_unpaused_since[gpu]) /* it ran until the disable returned */
            tc_unpaused_ns[gpu] += t1 - tc_unpaused_since[gpu];
        tc_unpaused_since[gpu] = 0;
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
        uint64_t t1 = mono_ns();
        count_transition(&st_resumes, &st_resume_ns, &st_resume_max_ns, t1 - t0);
        tc_unpaused_since[gpu] = t1; /* it runs once the enable returned */
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

void timectl_after_app_timeslice(uint32_t h_client, uint32_t h_tsg, uint64_t us)
{
    int gpu = -1, fd = -1;
    struct objtree_ref ref;
    struct objtree *t = state_lock();
    if (t && objtree_set_timeslice(t, h_client, h_tsg, us) && atomic_load(&tc_on) &&
        objtree_lookup(t, h_client, h_tsg, &ref) && ref.file_id >= tc_first_own_file) {
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
    if (t && objtree_lookup(t, h_client, h_object, &ref) && ref.file_id >= tc_first_own_file) {
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


void timectl_set_real(const struct shim_real *r)
{
    if (atomic_load_explicit(&tc_real, memory_order_relaxed) != r)
        atomic_store(&tc_real, r);
}

bool timectl_active(void)
{
    return atomic_load(&tc_on);
}

uint64_t tc_pause_unpaused(uint32_t gpu, uint64_t now_ns, uint64_t since_ns, bool restart)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return 0;
    pthread_mutex_lock(&tc_op_mu);
    if (!atomic_load(&tc_paused[gpu]) && !tc_unpaused_since[gpu])
        tc_unpaused_since[gpu] = since_ns; /* never paused: unpaused all along */
    uint64_t ns = tc_unpaused_ns[gpu];
    if (tc_unpaused_since[gpu] && now_ns > tc_unpaused_since[gpu])
        ns += now_ns - tc_unpaused_since[gpu];
    if (restart) {
        tc_unpaused_ns[gpu] = 0;
        if (tc_unpaused_since[gpu])
            tc_unpaused_since[gpu] = now_ns;
    }
    pthread_mutex_unlock(&tc_op_mu);
    return ns;
}

uint64_t tc_pause_first_own_file(void)
{
    return tc_first_own_file;
}

void tc_pause_activate(void)
{
    atomic_store(&tc_on, true);
}

void tc_pause_stats(struct timectl_stats *s)
{
    s->pauses = atomic_load(&st_pauses);
    s->resumes = atomic_load(&st_resumes);
    s->controls_failed = atomic_load(&st_failed);
    s->timeslices_overridden = atomic_load(&st_overridden);
    s->timeslices_restored = atomic_load(&st_restored);
    s->pause_ns = atomic_load(&st_pause_ns);
    s->pause_max_ns = atomic_load(&st_pause_max_ns);
    s->resume_ns = atomic_load(&st_resume_ns);
    s->resume_max_ns = atomic_load(&st_resume_max_ns);
}

static void forget_all(void)
{
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++) {
        atomic_store(&tc_timeslice[g], 0);
        atomic_store(&tc_paused[g], false);
        tc_unpaused_ns[g] = tc_unpaused_since[g] = 0;
    }
    atomic_store(&tc_on, false);
    atomic_store(&st_pauses, 0);
    atomic_store(&st_resumes, 0);
    atomic_store(&st_failed, 0);
    atomic_store(&st_overridden, 0);
    atomic_store(&st_restored, 0);
    atomic_store(&st_pause_ns, 0);
    atomic_store(&st_pause_max_ns, 0);
    atomic_store(&st_resume_ns, 0);
    atomic_store(&st_resume_max_ns, 0);
}

void tc_pause_reset(void)
{
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++)
        timectl_resume(g);
    pthread_mutex_lock(&tc_op_mu);
    forget_all();
    tc_first_own_file = 0;
    pthread_mutex_unlock(&tc_op_mu);
}

void tc_pause_after_fork(void)
{
    pthread_mutex_init(&tc_op_mu, NULL);
    forget_all();
    tc_first_own_file = fdtable_next_file_id();
}
