/* test_managed.c - managed memory (cudaMallocManaged) under a quota.
 *
 * The fake driver models UVM as recorded on the H200 (fakedrv.h): an mmap of the
 * /dev/nvidia-uvm descriptor at an address equal to its offset makes a managed
 * range unless it is exactly a semaphore pool. Standalone (KAIROS_MEM=64M):
 * refused by default (the mmap fails with ENOMEM, the driver never makes the
 * range, nothing charged), while CUDA's own semaphore pool still maps; with
 * KAIROS_MANAGED=charge each range is charged in full (rounded to 2 MiB) and
 * released by munmap, a partial munmap or a MAP_FIXED mapping over it. The
 * attacker calls UVM in other orders - a pool freed then mapped, a pool mapped
 * with another length, the pool's argument rewritten after the driver answered,
 * two threads freeing and mapping a pool at once - and never holds a managed
 * range uncharged: under refuse none is ever made, under charge what is charged
 * equals the managed bytes the driver holds, and ordinary allocations plus
 * managed ranges never exceed the quota. The UVM calls recorded for
 * cudaMallocManaged(1 GiB) on the H200, played through the shim: CUDA's own
 * semaphore pool maps under either policy, the 1 GiB range is refused by default
 * and charged 1 GiB when allowed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim/memguard.h"
#include "shim/state.h"
#include "shim/uvm_managed.h"
#include "shim_fake.h"

#define MIB          (1ull << 20)
#define QUOTA        (64 * MIB)
#define UVM_FREE     34ul
#define UVM_SEM_POOL 68ul

static const struct shim_real *real;
static int ctl, uvm;
static uint32_t client, device, subdevice;
static uint8_t *arena; /* VA reserved for the ranges below */
#define ARENA (256 * MIB)

static void start(bool allow)
{
    if (allow)
        setenv("KAIROS_MANAGED", "charge", 1);
    else
        unsetenv("KAIROS_MANAGED");
    real = fk_quota_setup("64M");
    uvm_managed_reset();
    ctl = shim_open(real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    assert_true(ctl >= 0);
    fk_context(real, ctl, &client, &device, &subdevice);
    uvm = shim_open(real, SHIM_OPEN, AT_FDCWD, "/dev/nvidia-uvm", O_RDWR, 0);
    assert_true(uvm >= 0);
    uint8_t init[16] = {0};
    assert_int_equal(shim_ioctl(real, uvm, 0x30000001ul, init), 0);
    arena = mmap(NULL, ARENA, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    assert_true(arena != MAP_FAILED);
}

static int setup_refuse(void **state)
{
    (void)state;
    start(false);
    return 0;
}

static int setup_charge(void **state)
{
    (void)state;
    start(true);
    return 0;
}

/* What the shim charged equals what the driver holds, managed ranges included,
 * and never more than the quota. */
static void assert_exact(void)
{
    assert_int_equal(fk_shim_charged(), fk_driver_holds() + fakedrv_managed_bytes());
    assert_true(fk_shim_charged() <= QUOTA);
}

static int teardown(void **state)
{
    (void)state;
    fakedrv_set_reply_hook(NULL, NULL);
    shim_munmap(real, arena, ARENA); /* every managed range goes with it */
    assert_int_equal(fakedrv_managed_ranges(), 0);
    shim_close(real, uvm);
    shim_close(real, ctl);
    assert_int_equal(fk_driver_holds(), 0);
    assert_int_equal(fk_shim_charged(), 0);
    unsetenv("KAIROS_MANAGED");
    fk_quota_end();
    return 0;
}

/* cudaMallocManaged's mmap: len bytes at arena + at, offset = address. */
static void *managed_map(uint64_t at, uint64_t len)
{
    return shim_mmap(real, false, arena + at, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                     uvm, (off64_t)(uintptr_t)(arena + at));
}

static uint32_t uvm_range_call(unsigned long cmd, uint64_t at, uint64_t len)
{
    static _Alignas(8) uint8_t arg[9248];
    memset(arg, 0, sizeof arg);
    uint64_t base = (uint64_t)(uintptr_t)(arena + at);
    memcpy(arg, &base, 8);
    memcpy(arg + 8, &len, 8);
    assert_int_equal(shim_ioctl(real, uvm, cmd, arg), 0);
    uint32_t status;
    memcpy(&status, arg + (cmd == UVM_SEM_POOL ? 9240 : 16), 4);
    return status;
}

/* ---- refused by default ----------------------------------------------------------- */

static void test_refused_by_default(void **state)
{
    (void)state;
    errno = 0;
    assert_true(managed_map(0, 8 * MIB) == MAP_FAILED);
    assert_int_equal(errno, ENOMEM);
    assert_int_equal(fakedrv_managed_made(), 0); /* the driver never saw it */
    assert_int_equal(fk_shim_charged(), 0);
    /* ordinary allocations go on as before */
    uint32_t mem = 0;
    assert_int_equal(fk_vidmem(real, ctl, client, device, &mem, 32 * MIB, false), 0);
    assert_exact();
    assert_int_equal(fk_free(real, ctl, client, mem), 0);
}

static void test_semaphore_pool_maps_under_refuse(void **state)
{
    (void)state;
    assert_int_equal(uvm_range_call(UVM_SEM_POOL, 0, 2 * MIB), 0);
    assert_true(managed_map(0, 2 * MIB) != MAP_FAILED); /* CUDA's own pool: system memory */
    assert_int_equal(fakedrv_managed_made(), 0);
    assert_int_equal(fk_shim_charged(), 0);
    assert_int_equal(shim_munmap(real, arena, 2 * MIB), 0);
    assert_int_equal(uvm_range_call(UVM_FREE, 0, 2 * MIB), 0);
}

/* The attacker's orders under refuse: none makes a managed range. */
static void test_refuse_attacker_orders(void **state)
{
    (void)state;
    /* a pool freed, then its range mapped */
    assert_int_equal(uvm_range_call(UVM_SEM_POOL, 0, 2 * MIB), 0);
    assert_int_equal(uvm_range_call(UVM_FREE, 0, 2 * MIB), 0);
    assert_true(managed_map(0, 2 * MIB) == MAP_FAILED);
    /* a pool mapped with another length, or at another address */
    assert_int_equal(uvm_range_call(UVM_SEM_POOL, 16 * MIB, 2 * MIB), 0);
    assert_true(managed_map(16 * MIB, 4 * MIB) == MAP_FAILED);
    assert_true(managed_map(18 * MIB, 2 * MIB) == MAP_FAILED);
    /* an offset that is not the address, no MAP_FIXED */
    assert_true(shim_mmap(real, false, NULL, 2 * MIB, PROT_READ, MAP_SHARED, uvm, 0) == MAP_FAILED);
    assert_int_equal(fakedrv_managed_made(), 0);
    assert_int_equal(fk_shim_charged(), 0);
    assert_int_equal(uvm_range_call(UVM_FREE, 16 * MIB, 2 * MIB), 0);
}

/* The pool's argument rewritten after the driver answered (a signal handler or
 * another thread at the ioctl's return): the shim records the pool the driver
 * made, so a mapping at the forged address is still managed memory. */
static void *forge_at;
static void forge_base(void *ctx)
{
    uint64_t forged = (uint64_t)(uintptr_t)forge_at;
    memcpy(ctx, &forged, 8);
}

static void test_refuse_pool_rewritten(void **state)
{
    (void)state;
    static _Alignas(8) uint8_t arg[9248];
    memset(arg, 0, sizeof arg);
    uint64_t base = (uint64_t)(uintptr_t)(arena + 32 * MIB), len = 2 * MIB;
    memcpy(arg, &base, 8);
    memcpy(arg + 8, &len, 8);
    forge_at = arena + 40 * MIB;
    fakedrv_set_reply_hook(forge_base, arg);
    assert_int_equal(shim_ioctl(real, uvm, UVM_SEM_POOL, arg), 0);
    fakedrv_set_reply_hook(NULL, NULL);
    assert_true(managed_map(40 * MIB, 2 * MIB) == MAP_FAILED);
    assert_true(managed_map(32 * MIB, 2 * MIB) != MAP_FAILED); /* the real pool */
    assert_int_equal(fakedrv_managed_made(), 0);
    assert_int_equal(uvm_range_call(UVM_FREE, 32 * MIB, 2 * MIB), 0);
}

/* Two threads: one frees and re-creates a pool, the other maps its range.
 * Whatever the interleaving, no managed range is made (refuse). */
static atomic_bool racing;
static void *pool_churn(void *unused)
{
    (void)unused;
    while (atomic_load(&racing)) {
        uvm_range_call(UVM_SEM_POOL, 64 * MIB, 2 * MIB);
        uvm_range_call(UVM_FREE, 64 * MIB, 2 * MIB);
    }
    return NULL;
}

static void test_refuse_pool_race(void **state)
{
    (void)state;
    atomic_store(&racing, true);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pool_churn, NULL), 0);
    int mapped = 0;
    for (int i = 0; i < 4000; i++) {
        void *p = managed_map(64 * MIB, 2 * MIB);
        if (p != MAP_FAILED) {
            mapped++;
            shim_munmap(real, p, 2 * MIB);
        }
    }
    atomic_store(&racing, false);
    pthread_join(t, NULL);
    assert_int_equal(fakedrv_managed_made(), 0);
    assert_int_equal(fk_shim_charged(), 0);
    print_message("pool race: %d pool mappings, 0 managed ranges\n", mapped);
    uvm_range_call(UVM_FREE, 64 * MIB, 2 * MIB);
}

/* ---- charged when allowed ----------------------------------------------------------- */

static void test_charged_in_full(void **state)
{
    (void)state;
    assert_true(managed_map(0, 8 * MIB) != MAP_FAILED);
    assert_int_equal(fk_shim_charged(), 8 * MIB);
    assert_true(managed_map(8 * MIB, 1) != MAP_FAILED); /* one byte: a 2 MiB page */
    assert_int_equal(fk_shim_charged(), 10 * MIB);
    assert_exact();
    /* the quota holds across both kinds */
    uint32_t mem = 0;
    assert_int_equal(fk_vidmem(real, ctl, client, device, &mem, 48 * MIB, false), 0);
    assert_exact();
    assert_true(managed_map(16 * MIB, 8 * MIB) == MAP_FAILED); /* 58 + 8 > 64 */
    assert_int_equal(errno, ENOMEM);
    uint32_t more = 0;
    assert_int_equal(fk_vidmem(real, ctl, client, device, &more, 8 * MIB, false),
                     RM_NV_ERR_NO_MEMORY);
    assert_exact();
    assert_int_equal(fk_free(real, ctl, client, mem), 0);
    assert_int_equal(fakedrv_managed_ranges(), 2);
}

static void test_released_on_munmap(void **state)
{
    (void)state;
    assert_true(managed_map(0, 8 * MIB) != MAP_FAILED);
    assert_int_equal(shim_munmap(real, arena + 2 * MIB, 2 * MIB), 0); /* the middle */
    assert_int_equal(fk_shim_charged(), 6 * MIB);
    assert_exact();
    assert_int_equal(shim_munmap(real, arena, 8 * MIB), 0);
    assert_int_equal(fk_shim_charged(), 0);
    assert_exact();
    /* again and again: nothing is lost, nothing refused */
    for (int i = 0; i < 50; i++) {
        assert_true(managed_map(0, 60 * MIB) != MAP_FAILED);
        assert_exact();
        assert_int_equal(shim_munmap(real, arena, 60 * MIB), 0);
    }
    assert_int_equal(fk_shim_charged(), 0);
}

static void test_released_by_map_fixed_over_it(void **state)
{
    (void)state;
    assert_true(managed_map(0, 32 * MIB) != MAP_FAILED);
    void *p = shim_mmap(real, false, arena, 16 * MIB, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    assert_true(p != MAP_FAILED);
    assert_int_equal(fk_shim_charged(), 16 * MIB);
    assert_exact();
    /* a managed mapping over part of a managed one: that part goes, the new is charged */
    assert_true(managed_map(16 * MIB, 8 * MIB) != MAP_FAILED);
    assert_int_equal(fk_shim_charged(), 16 * MIB);
    assert_exact();
}

/* Under charge, the attacker's orders never leave a range uncharged. */
static void test_charge_attacker_orders(void **state)
{
    (void)state;
    assert_int_equal(uvm_range_call(UVM_SEM_POOL, 0, 2 * MIB), 0);
    assert_int_equal(uvm_range_call(UVM_FREE, 0, 2 * MIB), 0);
    assert_true(managed_map(0, 2 * MIB) != MAP_FAILED);
    assert_exact();
    assert_int_equal(uvm_range_call(UVM_SEM_POOL, 16 * MIB, 2 * MIB), 0);
    assert_true(managed_map(16 * MIB, 4 * MIB) == MAP_FAILED); /* EBUSY from the driver */
    assert_exact();                                            /* the reservation undone */
    /* UVM_FREE cannot free a managed range: it stays charged */
    assert_int_equal(uvm_range_call(UVM_FREE, 0, 2 * MIB), 0x1eu);
    assert_exact();
    assert_int_equal(uvm_range_call(UVM_FREE, 16 * MIB, 2 * MIB), 0);
}

static void test_charge_pool_race(void **state)
{
    (void)state;
    atomic_store(&racing, true);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pool_churn, NULL), 0);
    int managed = 0;
    for (int i = 0; i < 4000; i++) {
        void *p = managed_map(64 * MIB, 2 * MIB);
        if (p != MAP_FAILED) {
            managed += fakedrv_managed_ranges() > 0;
            assert_true(fk_shim_charged() >= fakedrv_managed_bytes());
            shim_munmap(real, p, 2 * MIB);
        }
    }
    atomic_store(&racing, false);
    pthread_join(t, NULL);
    assert_exact();
    print_message("pool race under charge: %d managed mappings, all charged\n", managed);
    uvm_range_call(UVM_FREE, 64 * MIB, 2 * MIB);
}

/* A forked child holds none of the parent's managed memory: its own munmap of
 * those addresses releases nothing of the parent's. */
static void test_fork_child_releases_nothing(void **state)
{
    (void)state;
    assert_true(managed_map(0, 8 * MIB) != MAP_FAILED);
    pid_t pid = fork();
    if (pid == 0) {
        uint32_t n;
        uint64_t per[KAIROS_MAX_GPUS];
        uvm_managed_stats(&n, per);
        _exit(n == 0 && per[0] == 0 ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(fk_shim_charged(), 8 * MIB);
    assert_exact();
}

/* ---- the recorded sequence ---------------------------------------------------------- */

/* The UVM range calls and mmaps of the recording of cudaMallocManaged(1 GiB) on the
 * H200 (tests/fixtures/h200-580.159.04-cuda13.0-managed-1g.nvtrace), in order, with
 * their addresses moved into the arena (each recorded address keeps its place
 * relative to the first). */
struct recorded {
    bool is_mmap; /* else UVM_ALLOC_SEMAPHORE_POOL */
    uint64_t addr, len;
};

static size_t read_recording(struct recorded *out, size_t max)
{
    const char *dir = getenv("KAIROS_FIXTURES");
    char path[512];
    snprintf(path, sizeof path, "%s/h200-580.159.04-cuda13.0-managed-1g.nvtrace",
             dir ? dir : "tests/fixtures");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char line[70000];
    size_t n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        unsigned long long a, l, off;
        char *b;
        if (line[0] == 'M' && strstr(line, " u len=") &&
            sscanf(strstr(line, " u len="),
                   " u len=0x%llx prot=%*d flags=0x%*x off=0x%llx -> 0x%llx", &l, &off, &a) == 3) {
            out[n++] = (struct recorded){true, a, l};
        } else if (line[0] == 'I' && strstr(line, " u fd=") && strstr(line, " nr=0x44 ") &&
                   (b = strstr(line, " B=")) != NULL) {
            uint8_t bytes[16];
            for (int i = 0; i < 16; i++)
                assert_int_equal(sscanf(b + 3 + 2 * i, "%2hhx", &bytes[i]), 1);
            memcpy(&a, bytes, 8);
            memcpy(&l, bytes + 8, 8);
            out[n++] = (struct recorded){false, a, l};
        }
    }
    fclose(f);
    return n;
}

/* Plays the recording; returns the managed mmaps refused. */
static int replay_recording(uint64_t *managed_len)
{
    struct recorded rec[16];
    size_t n = read_recording(rec, 16);
    assert_int_equal(n, 3); /* the pool, its mapping, the managed range */
    uint64_t lo = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        lo = rec[i].addr < lo ? rec[i].addr : lo;
    int refused = 0;
    *managed_len = 0;
    for (size_t i = 0; i < n; i++) {
        /* the arena holds both: the pool first, the range 2 MiB after it */
        uint64_t at = rec[i].addr == lo ? 0 : 2 * MIB;
        if (!rec[i].is_mmap) {
            assert_int_equal(uvm_range_call(UVM_SEM_POOL, at, rec[i].len), 0);
        } else if (managed_map(at, rec[i].len) == MAP_FAILED) {
            refused++;
        } else if (at) {
            *managed_len += rec[i].len;
        }
    }
    return refused;
}

static void test_recorded_refused(void **state)
{
    (void)state;
    uint64_t len;
    assert_int_equal(replay_recording(&len), 1); /* the 1 GiB range, not CUDA's pool */
    assert_int_equal(fakedrv_managed_made(), 0);
    assert_int_equal(fk_shim_charged(), 0);
}

static int setup_charge_2g(void **state)
{
    (void)state;
    setenv("KAIROS_MANAGED", "charge", 1);
    real = fk_quota_setup("2G");
    uvm_managed_reset();
    ctl = shim_open(real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    fk_context(real, ctl, &client, &device, &subdevice);
    uvm = shim_open(real, SHIM_OPEN, AT_FDCWD, "/dev/nvidia-uvm", O_RDWR, 0);
    uint8_t init[16] = {0};
    assert_int_equal(shim_ioctl(real, uvm, 0x30000001ul, init), 0);
    arena =
        mmap(NULL, 2 * ARENA * 4, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    assert_true(arena != MAP_FAILED);
    return 0;
}

static int teardown_2g(void **state)
{
    (void)state;
    shim_munmap(real, arena, 2 * ARENA * 4);
    assert_int_equal(fakedrv_managed_ranges(), 0);
    shim_close(real, uvm);
    shim_close(real, ctl);
    assert_int_equal(fk_shim_charged(), 0);
    unsetenv("KAIROS_MANAGED");
    fk_quota_end();
    return 0;
}

static void test_recorded_charged(void **state)
{
    (void)state;
    uint64_t len;
    assert_int_equal(replay_recording(&len), 0);
    assert_int_equal(len, 1024 * MIB);
    assert_int_equal(fk_shim_charged(), 1024 * MIB); /* the range; the pool is not charged */
    assert_int_equal(fakedrv_managed_bytes(), 1024 * MIB);
}

/* ---- a GPU used after the ranges were made -------------------------------------------- */

static uint64_t charged_on(int g)
{
    struct memguard_stats st;
    memguard_stats(&st);
    return st.charged[g];
}

/* A device on GPU 1 (deviceId 1) under client; its handle. */
static uint32_t second_gpu(void)
{
    uint32_t dev_params[14] = {1}, dev1 = 0;
    assert_int_equal(fk_alloc(real, ctl, client, client, &dev1, RM_CLASS_NV01_DEVICE_0, dev_params,
                              sizeof dev_params, true, false),
                     0);
    return dev1;
}

static uint32_t register_gpu(void)
{
    uint8_t arg[40];
    memset(arg, 0, sizeof arg);
    assert_int_equal(shim_ioctl(real, uvm, 37, arg), 0);
    uint32_t status;
    memcpy(&status, arg + 36, 4);
    return status;
}

static void test_late_gpu_charged(void **state)
{
    (void)state;
    assert_true(managed_map(0, 8 * MIB) != MAP_FAILED);
    assert_int_equal(charged_on(1), 0);
    uint32_t dev1 = second_gpu();
    assert_int_equal(register_gpu(), 0);
    assert_int_equal(charged_on(1), 8 * MIB); /* may become resident there too */
    assert_int_equal(charged_on(0), 8 * MIB);
    assert_int_equal(register_gpu(), 0); /* again: nothing more */
    assert_int_equal(charged_on(1), 8 * MIB);
    assert_true(managed_map(8 * MIB, 4 * MIB) != MAP_FAILED); /* both GPUs now */
    assert_int_equal(charged_on(1), 12 * MIB);
    assert_int_equal(shim_munmap(real, arena, 12 * MIB), 0);
    assert_int_equal(charged_on(0), 0);
    assert_int_equal(charged_on(1), 0);
    assert_int_equal(fk_free(real, ctl, client, dev1), 0);
}

static void test_late_gpu_refused(void **state)
{
    (void)state;
    assert_true(managed_map(0, 8 * MIB) != MAP_FAILED);
    uint32_t dev1 = second_gpu(), mem = 0;
    assert_int_equal(fk_vidmem(real, ctl, client, dev1, &mem, 60 * MIB, false), 0);
    uint64_t served = fakedrv_ioctls();
    assert_int_equal(register_gpu(), RM_NV_ERR_NO_MEMORY); /* 60 + 8 > 64 on GPU 1 */
    assert_int_equal(fakedrv_ioctls(), served);            /* the driver never saw it */
    assert_int_equal(charged_on(1), 60 * MIB);
    assert_int_equal(fk_free(real, ctl, client, mem), 0);
    assert_int_equal(register_gpu(), 0);
    assert_int_equal(charged_on(1), 8 * MIB);
    assert_int_equal(shim_munmap(real, arena, 8 * MIB), 0);
    assert_int_equal(charged_on(1), 0);
    assert_int_equal(fk_free(real, ctl, client, dev1), 0);
}

/* ---- descriptors the shim did not see ---------------------------------------------- */

/* /dev/nvidia-uvm opened where the shim does not see it (a raw open): its mmap is
 * still recognised (fstat, and the path behind the descriptor). */
static void test_unseen_uvm_open(void **state)
{
    (void)state;
    int raw = fakedrv_open("/dev/nvidia-uvm", O_RDWR);
    assert_true(raw >= 0);
    uint8_t init[16] = {0};
    assert_int_equal(fakedrv_ioctl(raw, 0x30000001ul, init), 0);
    void *p = shim_mmap(real, false, arena, 2 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                        raw, (off64_t)(uintptr_t)arena);
    assert_true(p == MAP_FAILED);
    assert_int_equal(fakedrv_managed_made(), 0);
    fakedrv_close(raw);
}

/* A number the shim cached as "not NVIDIA" (an ordinary file it saw mapped), then
 * made a UVM descriptor by a dup2 the shim does not see: its UVM-shaped mmap is
 * looked at again, and refused. */
static void test_stale_number_becomes_uvm(void **state)
{
    (void)state;
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    int n = fileno(tmp);
    assert_int_equal(ftruncate(n, 4096), 0);
    void *q = shim_mmap(real, false, NULL, 4096, PROT_READ, MAP_SHARED, n, 0);
    assert_true(q != MAP_FAILED); /* cached: not NVIDIA */
    munmap(q, 4096);
    assert_int_equal(dup2(uvm, n), n); /* libc's, not the shim's: unseen */
    void *p = shim_mmap(real, false, arena, 2 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                        n, (off64_t)(uintptr_t)arena);
    assert_true(p == MAP_FAILED);
    assert_int_equal(fakedrv_managed_made(), 0);
    assert_int_equal(fk_shim_charged(), 0);
    shim_close(real, n);
    fclose(tmp); /* its descriptor is already closed: EBADF, nothing else */
}

/* A vfork child (running in its parent's memory) maps managed memory: refused
 * (EPERM), nothing charged or held, as its other allocations are (borrowed_vm.h). */
static void test_vfork_child_managed_refused(void **state)
{
    (void)state;
    static void *volatile got;
    static volatile int got_errno;
    pid_t pid = vfork();
    if (pid == 0) {
        errno = 0;
        got = managed_map(0, 8 * MIB);
        got_errno = errno;
        _exit(0);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_ptr_equal(got, MAP_FAILED);
    assert_int_equal(got_errno, EPERM);
    assert_int_equal(fakedrv_managed_ranges(), 0);
    assert_exact();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_vfork_child_managed_refused, setup_charge, teardown),
        cmocka_unit_test_setup_teardown(test_refused_by_default, setup_refuse, teardown),
        cmocka_unit_test_setup_teardown(test_semaphore_pool_maps_under_refuse, setup_refuse,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refuse_attacker_orders, setup_refuse, teardown),
        cmocka_unit_test_setup_teardown(test_refuse_pool_rewritten, setup_refuse, teardown),
        cmocka_unit_test_setup_teardown(test_refuse_pool_race, setup_refuse, teardown),
        cmocka_unit_test_setup_teardown(test_charged_in_full, setup_charge, teardown),
        cmocka_unit_test_setup_teardown(test_released_on_munmap, setup_charge, teardown),
        cmocka_unit_test_setup_teardown(test_released_by_map_fixed_over_it, setup_charge, teardown),
        cmocka_unit_test_setup_teardown(test_charge_attacker_orders, setup_charge, teardown),
        cmocka_unit_test_setup_teardown(test_charge_pool_race, setup_charge, teardown),
        cmocka_unit_test_setup_teardown(test_fork_child_releases_nothing, setup_charge, teardown),
        cmocka_unit_test_setup_teardown(test_late_gpu_charged, setup_charge, teardown),
        cmocka_unit_test_setup_teardown(test_late_gpu_refused, setup_charge, teardown),
        cmocka_unit_test_setup_teardown(test_unseen_uvm_open, setup_refuse, teardown),
        cmocka_unit_test_setup_teardown(test_stale_number_becomes_uvm, setup_refuse, teardown),
        cmocka_unit_test_setup_teardown(test_recorded_refused, setup_refuse, teardown),
        cmocka_unit_test_setup_teardown(test_recorded_charged, setup_charge_2g, teardown_2g),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
