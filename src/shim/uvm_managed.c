/* uvm_managed.c - managed memory under a quota (see uvm_managed.h).
 *
 * Owns two tables: the managed ranges this process has mapped (address, length,
 * what was charged for them and on which GPUs) and the semaphore pools UVM made
 * for it (whose mmap is not managed memory). Charging itself is memguard's.
 */
#include "shim/uvm_managed.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/grow.h"
#include "core/objtree.h"
#include "core/rm_abi.h"
#include "shim/app_memory.h"
#include "shim/settings.h"
#include "shim/state.h"
#include "shim/tracer.h"

/* The UVM commands whose effect is recorded, and their arguments (rm_abi.h's list). */
#define UVM_FREE_CMD            34ul
#define UVM_FREE_SIZE           24u
#define UVM_FREE_STATUS         16u
#define UVM_SEM_POOL_CMD        68ul
#define UVM_SEM_POOL_SIZE       9248u
#define UVM_SEM_POOL_STATUS     9240u
#define UVM_REGISTER_GPU_CMD    37ul /* uuid, ..., status @36 (40) */
#define UVM_REGISTER_GPU_STATUS 36u
#define CPU_PAGE                4096ull
#define RANGE_MAX               (1ull << 52) /* beyond any GPU's memory and any user address */

struct managed_range {
    uint64_t addr, len;
    uint64_t charged; /* per GPU of gpus */
    uint32_t gpus;
};

struct pool {
    uint64_t addr, len;
};

static pthread_mutex_t um_mu = PTHREAD_MUTEX_INITIALIZER;
static struct managed_range *ranges;
static size_t n_ranges, cap_ranges;
static atomic_size_t n_ranges_seen; /* n_ranges, read without the lock by munmap */
static struct pool *pools;
static size_t n_pools, cap_pools;
static atomic_bool refusal_said;

static void forget_all_locked(void)
{
    free(ranges);
    free(pools);
    ranges = NULL;
    pools = NULL;
    n_ranges = cap_ranges = n_pools = cap_pools = 0;
    atomic_store(&n_ranges_seen, 0);
}

/* A forked child: the managed ranges are the parent's (UVM does not give the
 * child their memory), and so are the parent's charges (memguard). */
static void after_fork_in_child(void)
{
    pthread_mutex_init(&um_mu, NULL);
    forget_all_locked();
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

static void ensure_atfork(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_atfork);
}

/* ---- the tables ------------------------------------------------------------------ */

static bool pool_exact_locked(uint64_t addr, uint64_t len)
{
    for (size_t i = 0; i < n_pools; i++)
        if (pools[i].addr == addr && pools[i].len == len)
            return true;
    return false;
}

static void pool_add_locked(uint64_t addr, uint64_t len)
{
    struct pool *p = grow_for_one(pools, &cap_pools, n_pools, sizeof *p, 8);
    if (!p)
        return; /* unrecorded: its mmap is then charged as managed (never less) */
    pools = p;
    pools[n_pools++] = (struct pool){addr, len};
}

/* UVM_FREE over [addr, addr + len): every pool it may have freed is forgotten. */
static void pools_drop_locked(uint64_t addr, uint64_t len)
{
    for (size_t i = 0; i < n_pools;) {
        if (pools[i].addr < addr + len && addr < pools[i].addr + pools[i].len)
            pools[i] = pools[--n_pools];
        else
            i++;
    }
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
    if (v > RANGE_MAX)
        return UINT64_MAX; /* no quota grants it */
    return (v + to - 1) / to * to;
}

/* Every GPU this process has a device on (the object tree's devices); GPU 0 when
 * none is known yet. */
static uint32_t process_gpus(void)
{
    struct objtree_ref refs[4 * KAIROS_MAX_GPUS];
    uint32_t mask = 0;
    struct objtree *t = state_lock();
    size_t n = t ? objtree_list(t, RM_KIND_DEVICE, refs, sizeof refs / sizeof refs[0]) : 0;
    if (n > sizeof refs / sizeof refs[0])
        n = sizeof refs / sizeof refs[0];
    for (size_t i = 0; i < n; i++) {
        int g = objtree_gpu_of(t, refs[i].h_client, refs[i].h_object);
        if (g >= 0 && g < KAIROS_MAX_GPUS)
            mask |= 1u << g;
    }
    state_unlock();
    return mask ? mask : 1u;
}

void uvm_managed_unmapped(uint64_t addr, uint64_t len);

/* ---- mmap ----------------------------------------------------------------------- */

static void say_refused(int why)
{
    if (atomic_exchange(&refusal_said, true))
        return; /* once per process: a retry loop must not flood stderr */
    const struct settings *s = settings_get();
    if (why == -ENOMEM)
        dprintf(2,
                "kairos[%d]: managed memory (cudaMallocManaged) refused: the range, "
                "charged in full, does not fit in the quota; free memory or ask for a larger "
                "quota\n",
                (int)getpid());
    else if (s->mode == SETTINGS_TENANT)
        dprintf(2,
                "kairos[%d]: managed memory (cudaMallocManaged) refused: tenant '%s' does "
                "not allow it (managed: refuse, the default; or kairosd cannot be asked). An "
                "administrator allows it with 'managed: charge' for the tenant in "
                "kairosd.conf(5) or 'kairos tenant set %s --managed charge'; each managed range "
                "is then charged in full against the quota. Or use cudaMalloc.\n",
                (int)getpid(), s->tenant[0] ? s->tenant : "(placed by kairosd)",
                s->tenant[0] ? s->tenant : "NAME");
    else
        dprintf(2,
                "kairos[%d]: managed memory (cudaMallocManaged) refused under KAIROS_MEM: "
                "set KAIROS_MANAGED=charge to allow it (each managed range is charged in full "
                "against KAIROS_MEM), or use cudaMalloc.\n",
                (int)getpid());
}

/* Settles every GPU's reservation: done bytes each (0: the mmap failed). */
static void settle(struct uvm_mmap_ticket *t, uint64_t done)
{
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++) {
        if (!(t->gpus & (1u << g)) || !t->per_gpu[g].active)
            continue;
        struct objtree_effect eff;
        memset(&eff, 0, sizeof eff);
        eff.vidmem_delta = (int64_t)done;
        eff.vidmem_delta_gpu[g] = (int64_t)done;
        memguard_after(&t->per_gpu[g], &eff);
    }
}

bool uvm_managed_before_mmap(const struct shim_real *r, uint64_t addr, uint64_t len,
                             struct uvm_mmap_ticket *t)
{
    memset(t, 0, sizeof *t);
    if (!memguard_active())
        return true;
    ensure_atfork();
    t->len = len;
    pthread_mutex_lock(&um_mu);
    if (pool_exact_locked(addr, round_up(len, CPU_PAGE))) {
        t->kind = UVM_MMAP_POOL; /* held until the mmap returns: the pool cannot go */
        return true;
    }
    pthread_mutex_unlock(&um_mu);
    t->kind = UVM_MMAP_MANAGED;
    t->bytes = round_up(len ? len : 1, UVM_MANAGED_PAGE);
    uint32_t gpus = process_gpus();
    int rc = 0;
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS && rc == 0; g++) {
        if (!(gpus & (1u << g)))
            continue;
        rc = memguard_reserve_managed(r, g, t->bytes, &t->per_gpu[g]);
        if (rc == 0)
            t->gpus |= 1u << g;
    }
    if (rc == 0)
        return true;
    settle(t, 0); /* give back what the other GPUs reserved */
    t->kind = UVM_MMAP_PASS;
    say_refused(rc);
    errno = ENOMEM;
    return false;
}

void uvm_managed_after_mmap(struct uvm_mmap_ticket *t, void *p, bool fixed)
{
    if (t->kind == UVM_MMAP_POOL)
        pthread_mutex_unlock(&um_mu);
    if (fixed && p != MAP_FAILED)
        uvm_managed_unmapped((uint64_t)(uintptr_t)p, t->len); /* what it replaced */
    if (t->kind == UVM_MMAP_MANAGED) {
        bool ok = p != MAP_FAILED;
        settle(t, ok ? t->bytes : 0);
        if (ok) {
            pthread_mutex_lock(&um_mu);
            struct managed_range *v = grow_for_one(ranges, &cap_ranges, n_ranges, sizeof *v, 16);
            if (v) { /* else it stays charged until the process exits: never less */
                ranges = v;
                ranges[n_ranges++] = (struct managed_range){
                    (uint64_t)(uintptr_t)p, round_up(t->len, CPU_PAGE), t->bytes, t->gpus};
                atomic_store(&n_ranges_seen, n_ranges);
            }
            pthread_mutex_unlock(&um_mu);
        }
    }
    t->kind = UVM_MMAP_PASS;
}

/* ---- munmap ----------------------------------------------------------------------- */

/* What stays charged for the parts of r left outside [addr, end): each part
 * rounded up to 2 MiB, never more than r had (splitting does not add memory). */
static uint64_t kept_charge(const struct managed_range *r, uint64_t addr, uint64_t end,
                            uint64_t *left_len, uint64_t *right_len)
{
    uint64_t r_end = r->addr + r->len;
    *left_len = addr > r->addr ? addr - r->addr : 0;
    *right_len = end < r_end ? r_end - end : 0;
    uint64_t kept = (*left_len ? round_up(*left_len, UVM_MANAGED_PAGE) : 0) +
                    (*right_len ? round_up(*right_len, UVM_MANAGED_PAGE) : 0);
    return kept < r->charged ? kept : r->charged;
}

void uvm_managed_unmapped(uint64_t addr, uint64_t len)
{
    if (atomic_load_explicit(&n_ranges_seen, memory_order_acquire) == 0 || len == 0)
        return;
    uint64_t end = addr + round_up(len, CPU_PAGE);
    if (end < addr)
        end = UINT64_MAX;
    struct objtree_effect eff;
    memset(&eff, 0, sizeof eff);
    pthread_mutex_lock(&um_mu);
    for (size_t i = 0; i < n_ranges;) {
        struct managed_range r = ranges[i];
        if (!(r.addr < end && addr < r.addr + r.len)) {
            i++;
            continue;
        }
        uint64_t left, right;
        uint64_t kept = kept_charge(&r, addr, end, &left, &right);
        for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++)
            if (r.gpus & (1u << g)) {
                eff.vidmem_delta_gpu[g] -= (int64_t)(r.charged - kept);
                eff.vidmem_delta -= (int64_t)(r.charged - kept);
            }
        uint64_t left_round = left ? round_up(left, UVM_MANAGED_PAGE) : 0;
        uint64_t left_charge = kept < left_round ? kept : left_round;
        ranges[i] = ranges[--n_ranges]; /* the parts left come back below */
        size_t left_at = n_ranges;
        if (left)
            ranges[n_ranges++] = (struct managed_range){r.addr, left, left_charge, r.gpus};
        struct managed_range *v =
            right ? grow_for_one(ranges, &cap_ranges, n_ranges, sizeof *v, 16) : NULL;
        if (v) {
            ranges = v;
            ranges[n_ranges++] = (struct managed_range){end, right, kept - left_charge, r.gpus};
        } else if (right && left) {
            ranges[left_at].charged = kept; /* no room: the left part keeps it all */
        } /* (no room and no left part: the right part stays charged until exit) */
        if (left || right)
            i = 0; /* the table changed under the cursor: parts never overlap [addr, end) */
    }
    atomic_store(&n_ranges_seen, n_ranges);
    pthread_mutex_unlock(&um_mu);
    memguard_released(&eff);
}

/* ---- ioctls ------------------------------------------------------------------------ */

bool uvm_managed_wants(unsigned long request)
{
    return memguard_active() && (request == UVM_FREE_CMD || request == UVM_SEM_POOL_CMD ||
                                 request == UVM_REGISTER_GPU_CMD);
}

static void write_back(void *dst, const void *src, size_t len)
{
    app_memory_write_as(getpid(), dst, src, len);
}

/* ---- a GPU the process starts using after its managed ranges were made ---------- */

/* What the live ranges not yet charged on GPU g are charged elsewhere (each range's
 * own charge); with mark, g is added to those ranges' GPUs. Under um_mu. */
static uint64_t uncharged_on_locked(uint32_t g, bool mark)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n_ranges; i++) {
        if (ranges[i].gpus & (1u << g))
            continue;
        sum = sum + ranges[i].charged < sum ? UINT64_MAX : sum + ranges[i].charged;
        if (mark)
            ranges[i].gpus |= 1u << g;
    }
    return sum;
}

/* Charges on GPU g the live ranges that were made before the process used it; 0,
 * or -EPERM / -ENOMEM as memguard_reserve_managed. */
static int charge_new_gpu(const struct shim_real *r, uint32_t g)
{
    pthread_mutex_lock(&um_mu);
    uint64_t need = uncharged_on_locked(g, false);
    pthread_mutex_unlock(&um_mu);
    if (need == 0)
        return 0;
    struct memguard_ticket t;
    int rc = memguard_reserve_managed(r, g, need, &t);
    if (rc)
        return rc;
    pthread_mutex_lock(&um_mu);
    uint64_t got = uncharged_on_locked(g, true); /* ranges may have gone meanwhile */
    pthread_mutex_unlock(&um_mu);
    struct objtree_effect eff;
    memset(&eff, 0, sizeof eff);
    eff.vidmem_delta_gpu[g] = (int64_t)(got < need ? got : need);
    eff.vidmem_delta = eff.vidmem_delta_gpu[g];
    memguard_after(&t, &eff);
    return 0;
}

/* Before UVM_REGISTER_GPU: the managed ranges may become resident on the GPU being
 * registered too, so they are charged there first (the GPUs with a device now that
 * none of the ranges is charged on). True when that does not fit: the
 * registration is answered NV_ERR_NO_MEMORY without reaching the driver. */
static bool register_refused(const struct shim_real *r, void *arg)
{
    if (atomic_load_explicit(&n_ranges_seen, memory_order_acquire) == 0)
        return false;
    uint32_t gpus = process_gpus();
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++) {
        if (!(gpus & (1u << g)))
            continue;
        int rc = charge_new_gpu(r, g);
        if (rc == 0)
            continue;
        if (!atomic_exchange(&refusal_said, true))
            dprintf(2,
                    "kairos[%d]: GPU %u refused to this process: its managed memory "
                    "(cudaMallocManaged), charged in full on every GPU it uses, does not fit "
                    "the quota there%s; free managed memory before using another GPU\n",
                    (int)getpid(), g, rc == -EPERM ? " (kairosd cannot be asked)" : "");
        uint32_t status = RM_NV_ERR_NO_MEMORY;
        write_back((uint8_t *)arg + UVM_REGISTER_GPU_STATUS, &status, sizeof status);
        return true;
    }
    return false;
}

int uvm_managed_ioctl(const struct shim_real *r, int fd, unsigned long request, void *arg)
{
    ensure_atfork();
    if (request == UVM_REGISTER_GPU_CMD)
        return arg && register_refused(r, arg) ? 0 : r->ioctl(fd, request, arg);
    size_t len = request == UVM_SEM_POOL_CMD ? UVM_SEM_POOL_SIZE : UVM_FREE_SIZE;
    size_t off_status = request == UVM_SEM_POOL_CMD ? UVM_SEM_POOL_STATUS : UVM_FREE_STATUS;
    _Alignas(8) uint8_t copy[UVM_SEM_POOL_SIZE];
    if (!arg || app_memory_read(copy, arg, len) != len) {
        errno = EFAULT; /* as the driver answers an unreadable argument */
        return -1;
    }
    uint64_t base = bytes_u64(copy), length = bytes_u64(copy + 8);
    pthread_mutex_lock(&um_mu);
    int ret = r->ioctl(fd, request, copy);
    int saved = errno;
    if (request == UVM_FREE_CMD)
        pools_drop_locked(base, length); /* whatever the outcome: never a pool too many */
    else if (ret == 0 && bytes_u32(copy + off_status) == RM_NV_OK)
        pool_add_locked(base, round_up(length, CPU_PAGE));
    pthread_mutex_unlock(&um_mu);
    write_back(arg, copy, len);
    errno = saved;
    return ret;
}

/* ---- introspection ------------------------------------------------------------------- */

void uvm_managed_stats(uint32_t *n, uint64_t *charged_per_gpu)
{
    pthread_mutex_lock(&um_mu);
    *n = (uint32_t)n_ranges;
    memset(charged_per_gpu, 0, sizeof(uint64_t) * KAIROS_MAX_GPUS);
    for (size_t i = 0; i < n_ranges; i++)
        for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++)
            if (ranges[i].gpus & (1u << g))
                charged_per_gpu[g] += ranges[i].charged;
    pthread_mutex_unlock(&um_mu);
}

void uvm_managed_reset(void)
{
    pthread_mutex_lock(&um_mu);
    forget_all_locked();
    atomic_store(&refusal_said, false);
    pthread_mutex_unlock(&um_mu);
}
