/* test_timectl.c - the time control (timectl.h) over the fake driver.
 *
 * Timeslices on every channel group of the policy's GPU (and on one made later),
 * 0 giving each group back the application's own,
 * pause/resume with FIFO_DISABLE_CHANNELS on exactly the process's channels and
 * with the right flags, doorbells untouched by a pause (a write lands at once, a
 * thread with SIGSEGV blocked ringing one is not killed, no signal disposition
 * changes, a faulthandler-style crash handler ends the process once, natively; a
 * null write with no handler still kills), fork (a child forked while paused
 * starts clean and obeys its own policy; children forked while the control
 * thread is inside a pause never deadlock), the clock-aligned windows (30 % duty
 * of 100 ms measured over a second), the sensor's sampling rate (every 20 ms
 * while idle, every 1 ms once work shows, and a start after a sparse gap counted
 * as one fast interval), and many threads allocating while pausing and resuming.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim/tc_sense.h"
#include "shim/timectl.h"
#include "shim_fake.h"

static const struct shim_real *r;
static int ctl;
static uint32_t client, device, subdevice;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int setup(void **state)
{
    (void)state;
    timectl_reset();
    r = shim_fake_setup();
    ctl = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    assert_true(ctl >= 0);
    fk_context(r, ctl, &client, &device, &subdevice);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    timectl_reset();
    shim_close(r, ctl);
    return 0;
}

static uint32_t new_tsg(uint32_t dev)
{
    uint32_t h = 0, params[5] = {0};
    assert_int_equal(fk_alloc(r, ctl, client, dev, &h, RM_CLASS_KEPLER_CHANNEL_GROUP_A, params,
                              sizeof params, true, false),
                     0);
    return h;
}

static uint32_t new_channel(uint32_t tsg)
{
    uint32_t h = 0;
    uint8_t params[368] = {0};
    assert_int_equal(fk_alloc(r, ctl, client, tsg, &h, RM_CLASS_HOPPER_CHANNEL_GPFIFO_A, params,
                              sizeof params, true, false),
                     0);
    return h;
}

/* A second device (GPU 1) and its subdevice under the same client. */
static void gpu1(uint32_t *dev, uint32_t *sub)
{
    uint32_t dev_params[14] = {1};
    *dev = 0;
    assert_int_equal(fk_alloc(r, ctl, client, client, dev, RM_CLASS_NV01_DEVICE_0, dev_params,
                              sizeof dev_params, true, false),
                     0);
    uint32_t sub_params = 0;
    *sub = 0;
    assert_int_equal(fk_alloc(r, ctl, client, *dev, sub, RM_CLASS_NV20_SUBDEVICE_0, &sub_params,
                              sizeof sub_params, false, false),
                     0);
}

static void *map_doorbell(void)
{
    int dev0;
    void *bell = fk_doorbell(r, ctl, client, subdevice, &dev0);
    assert_int_equal(fk_stats().live_doorbell_mappings, 1);
    return bell;
}

static bool wait_timeslice(uint32_t tsg, uint64_t us)
{
    for (int i = 0; i < 2000; i++) {
        if (fakedrv_timeslice(client, tsg) == us)
            return true;
        sleep_ms(1);
    }
    return false;
}

static void test_timeslice(void **state)
{
    (void)state;
    uint32_t t1 = new_tsg(device), t2 = new_tsg(device);
    uint32_t dev1, sub1;
    gpu1(&dev1, &sub1);
    uint32_t other = new_tsg(dev1);
    struct kairos_time_policy p = {.gpu = 0, .seq = 1, .timeslice_us = 6000};
    timectl_policy(&p);
    assert_true(wait_timeslice(t1, 6000));
    assert_true(wait_timeslice(t2, 6000));
    uint32_t t3 = new_tsg(device); /* after the policy: set by the allocation hook */
    assert_int_equal(fakedrv_timeslice(client, t3), 6000);
    assert_int_equal(fakedrv_timeslice(client, other), 0); /* another GPU */

    /* An older policy is ignored; a newer one changes every group at once. */
    p.seq = 0;
    p.timeslice_us = 1;
    timectl_policy(&p);
    p.seq = 2;
    p.timeslice_us = 2000;
    timectl_policy(&p);
    assert_true(wait_timeslice(t1, 2000));
    assert_true(wait_timeslice(t3, 2000));
    struct timectl_stats s;
    timectl_stats(&s);
    assert_int_equal(s.controls_failed, 0);
}

/* The application's own SET_TIMESLICE, as CUDA makes right after creating a group. */
static uint32_t app_set_timeslice(uint32_t tsg, uint64_t us)
{
    struct rm_control_args a = {.h_client = client, .h_object = tsg,
                                .cmd = RM_CTRL_NVA06C_SET_TIMESLICE, .params = (uintptr_t)&us,
                                .params_size = sizeof us};
    assert_int_equal(shim_ioctl(r, ctl, RM_IOWR(RM_NR_CONTROL, sizeof a), &a), 0);
    return a.status;
}

static void test_application_cannot_override_timeslice(void **state)
{
    (void)state;
    /* No policy: the application's timeslice stands. */
    uint32_t t0 = new_tsg(device);
    assert_int_equal(app_set_timeslice(t0, 2048), 0);
    assert_int_equal(fakedrv_timeslice(client, t0), 2048);

    struct kairos_time_policy p = {.gpu = 0, .seq = 1, .timeslice_us = 1000};
    timectl_policy(&p);
    assert_true(wait_timeslice(t0, 1000));
    /* A group made under the policy, then CUDA's own 2048 us on it: set back. */
    uint32_t t1 = new_tsg(device);
    assert_int_equal(fakedrv_timeslice(client, t1), 1000);
    assert_int_equal(app_set_timeslice(t1, 2048), 0);
    assert_int_equal(fakedrv_timeslice(client, t1), 1000);
    assert_int_equal(app_set_timeslice(t0, 20000), 0); /* nor raised later */
    assert_int_equal(fakedrv_timeslice(client, t0), 1000);
    struct timectl_stats s;
    timectl_stats(&s);
    assert_int_equal(s.timeslices_overridden, 2);
}

/* Waits until every group of tsgs[n] has the timeslice us (false: not within 2 s). */
static bool wait_timeslices(const uint32_t *tsgs, size_t n, uint64_t us)
{
    for (size_t i = 0; i < n; i++)
        if (!wait_timeslice(tsgs[i], us))
            return false;
    return true;
}

/* A policy's timeslice (seq, us) on GPU 0. */
static void timeslice_policy(uint64_t seq, uint64_t us)
{
    struct kairos_time_policy p = {.gpu = 0, .seq = seq, .timeslice_us = us};
    timectl_policy(&p);
}

/* Issue 23, do no harm: timeslice 0 is the application's own (CUDA's 2048 us on
 * a context's first group, 1024 us on the others). Going from a non-zero one to 0
 * gives each group back what the application last set on it, a group made under
 * the policy included; under 0 the application's SET_TIMESLICE stands; a non-zero
 * policy overrides it again, and 0 then gives back its latest. A group the
 * application never set keeps Kairos's (its native value was never seen). */
static void test_zero_gives_back_the_applications_timeslices(void **state)
{
    (void)state;
    uint32_t tsg[3] = {new_tsg(device), new_tsg(device), 0};
    uint32_t bare = new_tsg(device);
    assert_int_equal(app_set_timeslice(tsg[0], 2048), 0); /* as CUDA, before any policy */
    assert_int_equal(app_set_timeslice(tsg[1], 1024), 0);
    timeslice_policy(1, 0); /* a first 0: nothing of Kairos's to give back */
    timeslice_policy(2, 4000);
    assert_true(wait_timeslices(tsg, 2, 4000));
    assert_true(wait_timeslice(bare, 4000));
    tsg[2] = new_tsg(device); /* made under the policy, then CUDA's own on it */
    assert_int_equal(app_set_timeslice(tsg[2], 1024), 0);
    assert_int_equal(fakedrv_timeslice(client, tsg[2]), 4000);
    static struct fakedrv_ctl_rec recs[64];
    size_t before = fakedrv_controls(recs, 64);

    timeslice_policy(3, 0);
    assert_true(wait_timeslice(tsg[0], 2048));
    assert_true(wait_timeslices(tsg + 1, 2, 1024));
    assert_int_equal(fakedrv_timeslice(client, bare), 4000);
    assert_int_equal(fakedrv_controls(recs, 64), before + 3); /* one per recorded group */
    assert_int_equal(app_set_timeslice(tsg[1], 3000), 0); /* under 0: it stands */
    assert_int_equal(fakedrv_timeslice(client, tsg[1]), 3000);

    timeslice_policy(4, 5000);
    assert_true(wait_timeslices(tsg, 3, 5000));
    assert_int_equal(app_set_timeslice(tsg[0], 700), 0); /* overridden again */
    assert_int_equal(fakedrv_timeslice(client, tsg[0]), 5000);
    timeslice_policy(5, 0);
    assert_true(wait_timeslice(tsg[0], 700));
    assert_true(wait_timeslice(tsg[1], 3000));
    assert_true(wait_timeslice(tsg[2], 1024));
    struct timectl_stats s;
    timectl_stats(&s);
    assert_int_equal(s.timeslices_overridden, 2);
    assert_int_equal(s.timeslices_restored, 6);
    assert_int_equal(s.controls_failed, 0);
}

static void test_pause_resume(void **state)
{
    (void)state;
    uint32_t tsg = new_tsg(device), tsg2 = new_tsg(device);
    uint32_t ch[70];
    for (int i = 0; i < 70; i++)
        ch[i] = new_channel(i < 35 ? tsg : tsg2);
    uint32_t dev1, sub1;
    gpu1(&dev1, &sub1);
    uint32_t other = new_channel(new_tsg(dev1));

    assert_int_equal(timectl_pause(0), 0);
    assert_true(timectl_is_paused(0));
    for (int i = 0; i < 70; i++)
        assert_int_equal(fakedrv_channel_disabled(client, ch[i]), 1);
    assert_int_equal(fakedrv_channel_disabled(client, other), 0);

    static struct fakedrv_ctl_rec recs[16];
    size_t n = fakedrv_controls(recs, 16);
    assert_int_equal(n, 2); /* 70 channels: 64 + 6 */
    uint32_t total = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(recs[i].cmd, FAKEDRV_CTL_DISABLE_CHANNELS);
        assert_int_equal(recs[i].object, subdevice);
        assert_int_equal(recs[i].status, 0);
        assert_true(recs[i].disable);
        assert_false(recs[i].only_disable_scheduling);
        assert_false(recs[i].rewind_gp_put);
        for (uint32_t j = 0; j < recs[i].n_channels; j++)
            assert_int_equal(recs[i].clients[j], client);
        total += recs[i].n_channels;
    }
    assert_int_equal(total, 70);

    /* A channel made while paused starts disabled. */
    uint32_t late = new_channel(tsg);
    assert_int_equal(fakedrv_channel_disabled(client, late), 1);

    assert_int_equal(timectl_resume(0), 0);
    assert_false(timectl_is_paused(0));
    for (int i = 0; i < 70; i++)
        assert_int_equal(fakedrv_channel_disabled(client, ch[i]), 0);
    assert_int_equal(fakedrv_channel_disabled(client, late), 0);
    n = fakedrv_controls(recs, 16);
    assert_int_equal(n, 5);
    for (size_t i = 3; i < n; i++) {
        assert_false(recs[i].disable);
        assert_int_equal(recs[i].status, 0);
    }
    struct timectl_stats s;
    timectl_stats(&s);
    assert_int_equal(s.controls_failed, 0);
    assert_int_equal(s.pauses, 1);
    assert_int_equal(s.resumes, 1);
    /* each made two driver calls: their time is counted, the longest is the one */
    assert_true(s.pause_ns > 0 && s.pause_max_ns == s.pause_ns);
    assert_true(s.resume_ns > 0 && s.resume_max_ns == s.resume_ns);
}

/* A child's verdict: 0 when it exited 0 within timeout_ms; otherwise it is killed
 * and the verdict says how it ended (-1 hung, 1000+sig killed, else its status). */
static int child_verdict(pid_t pid, int timeout_ms, int *status)
{
    for (int waited = 0; waited <= timeout_ms; waited += 5) {
        int st = 0;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            if (status)
                *status = st;
            if (WIFEXITED(st))
                return WEXITSTATUS(st);
            return 1000 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        }
        sleep_ms(5);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void test_doorbell_written_while_paused(void **state)
{
    (void)state;
    struct sigaction before, after;
    sigaction(SIGSEGV, NULL, &before);
    volatile uint32_t *bell = map_doorbell();
    uint32_t ch = new_channel(new_tsg(device));
    assert_int_equal(timectl_pause(0), 0);
    /* The bell stays writable: the write lands now, the channel stays disabled. */
    bell[0x90 / 4] = 0x1234;
    assert_int_equal(bell[0x90 / 4], 0x1234);
    assert_int_equal(fakedrv_channel_disabled(client, ch), 1);
    /* The pause touched no signal disposition. */
    sigaction(SIGSEGV, NULL, &after);
    assert_true(after.sa_handler == before.sa_handler && after.sa_flags == before.sa_flags);
    assert_int_equal(timectl_resume(0), 0);
    assert_int_equal(fakedrv_channel_disabled(client, ch), 0);
    assert_int_equal(shim_munmap(r, (void *)bell, 0x10000), 0);
}

static void *ring_with_segv_blocked(void *arg)
{
    sigset_t segv;
    sigemptyset(&segv);
    sigaddset(&segv, SIGSEGV);
    pthread_sigmask(SIG_BLOCK, &segv, NULL);
    ((volatile uint32_t *)arg)[0x90 / 4] = 0xbe11;
    return NULL;
}

/* Many runtimes block signals in worker threads: such a thread ringing a doorbell
 * during a pause must not be killed (a protected bell made the kernel kill it). */
static void test_blocked_segv_thread_rings_while_paused(void **state)
{
    (void)state;
    volatile uint32_t *bell = map_doorbell();
    new_channel(new_tsg(device));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        timectl_pause(0);
        pthread_t t;
        if (pthread_create(&t, NULL, ring_with_segv_blocked, (void *)bell) != 0)
            _exit(2);
        pthread_join(t, NULL);
        if (bell[0x90 / 4] != 0xbe11)
            _exit(3);
        timectl_resume(0);
        _exit(0);
    }
    assert_int_equal(child_verdict(pid, 10000, NULL), 0);
}

/* A crash handler in the style of CPython's faulthandler: reports once, puts back
 * the handler it replaced and re-raises, so the default action ends the process. */
static _Atomic int *crash_reports;
static struct sigaction crash_prev;

static void crash_handler(int sig)
{
    atomic_fetch_add(crash_reports, 1);
    sigaction(sig, &crash_prev, NULL);
    raise(sig);
}

/* In a forked child: SIGSEGV back to its default action (whatever the test runner
 * installed), so that what the shim installs next is what decides. */
static void segv_default(void)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &dfl, NULL);
}

/* The null write is the point: hidden from UBSan's null check, not from the CPU. */
__attribute__((no_sanitize("undefined"), noinline)) static void write_null(void)
{
    volatile int *volatile null = NULL;
    *null = 1;
}

static void test_faulthandler_crash_is_native(void **state)
{
    (void)state;
    map_doorbell();
    new_channel(new_tsg(device));
    crash_reports = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(crash_reports != MAP_FAILED);
    atomic_store(crash_reports, 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        segv_default();
        timectl_pause(0); /* a shim that installs a handler does it here ... */
        timectl_resume(0);
        struct sigaction app;
        memset(&app, 0, sizeof app);
        app.sa_handler = crash_handler;
        sigemptyset(&app.sa_mask);
        sigaction(SIGSEGV, &app, &crash_prev); /* ... the application's comes after */
        timectl_pause(0);                      /* ... and a pause must not undo it */
        write_null();
        _exit(0);
    }
    int st = 0;
    int v = child_verdict(pid, 10000, &st);
    print_message("crash reports %d, verdict %d\n", atomic_load(crash_reports), v);
    assert_int_equal(v, 1000 + SIGSEGV); /* one crash, ended by the signal */
    assert_int_equal(atomic_load(crash_reports), 1);
    munmap(crash_reports, 4096);
}

/* A child of a process under windows, forked while paused: it must start unpaused
 * with no thread, make channels that run, and obey its own policy from the daemon,
 * even one numbered lower than the parent's last. Exit codes say what failed. */
static int forked_child_obeys(void)
{
    if (timectl_is_paused(0))
        return 10;
    int c2 = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    if (c2 < 0)
        return 11;
    fk_context(r, c2, &client, &device, &subdevice);
    ctl = c2;
    uint32_t ch = new_channel(new_tsg(device));
    if (fakedrv_channel_disabled(client, ch) != 0)
        return 12; /* made disabled by an inherited pause nobody will lift */
    struct kairos_time_policy p = {.gpu = 0, .seq = 1, .period_us = 10000, .duty_us = 0,
                                   .epoch_ns = mono_ns()};
    timectl_policy(&p);
    for (int i = 0; i < 400 && fakedrv_channel_disabled(client, ch) != 1; i++)
        sleep_ms(5);
    if (fakedrv_channel_disabled(client, ch) != 1)
        return 13; /* the daemon's policy was not applied */
    p.seq = 2;
    p.duty_us = p.period_us;
    timectl_policy(&p);
    for (int i = 0; i < 400 && fakedrv_channel_disabled(client, ch) != 0; i++)
        sleep_ms(5);
    if (fakedrv_channel_disabled(client, ch) != 0)
        return 14;
    timectl_reset();
    return 0;
}

static void test_fork_while_paused(void **state)
{
    (void)state;
    uint32_t ch = new_channel(new_tsg(device));
    struct kairos_time_policy p = {.gpu = 0, .seq = 5, .period_us = 20000, .duty_us = 10000,
                                   .epoch_ns = mono_ns()};
    timectl_policy(&p);
    pid_t kids[10];
    for (int i = 0; i < 10; i++) {
        while (!timectl_is_paused(0))
            sleep_ms(1);
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0)
            _exit(forked_child_obeys());
    }
    int failed = 0;
    for (int i = 0; i < 10; i++) {
        int v = child_verdict(kids[i], 15000, NULL);
        if (v != 0)
            print_message("child %d: %d\n", i, v);
        failed += v != 0;
    }
    assert_int_equal(failed, 0);
    /* the parent's own windows go on */
    timectl_reset();
    assert_int_equal(fakedrv_channel_disabled(client, ch), 0);
}

/* A child forked while the control thread is inside a pause (2 ms windows, each
 * disable taking 0.5 ms as on the H200): none may deadlock on a lock it inherited. */
static int forked_child_controls(void)
{
    int c2 = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    if (c2 < 0)
        return 11;
    fk_context(r, c2, &client, &device, &subdevice);
    ctl = c2;
    new_channel(new_tsg(device));
    struct kairos_time_policy p = {.gpu = 0, .seq = 1, .period_us = 2000, .duty_us = 1000,
                                   .epoch_ns = mono_ns()};
    timectl_policy(&p);
    timectl_pause(0);
    timectl_resume(0);
    sleep_ms(20);
    timectl_reset();
    return 0;
}

static void test_fork_while_thread_holds_lock(void **state)
{
    (void)state;
    new_channel(new_tsg(device));
    fakedrv_set_control_delay(500);
    struct kairos_time_policy p = {.gpu = 0, .seq = 1, .period_us = 2000, .duty_us = 1000,
                                   .epoch_ns = mono_ns()};
    timectl_policy(&p);
    sleep_ms(10);
    pid_t kids[20];
    for (int i = 0; i < 20; i++) {
        struct timespec ts = {0, (long)(i % 7) * 290000L}; /* spread over the period */
        nanosleep(&ts, NULL);
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0)
            _exit(forked_child_controls());
    }
    int hung = 0, failed = 0;
    for (int i = 0; i < 20; i++) {
        int v = child_verdict(kids[i], 10000, NULL);
        hung += v == -1;
        failed += v != 0;
    }
    fakedrv_set_control_delay(0);
    print_message("children hung %d, failed %d of 20\n", hung, failed);
    assert_int_equal(failed, 0);
}

static void test_null_write_still_kills(void **state)
{
    (void)state;
    map_doorbell();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        segv_default();
        timectl_pause(0); /* installs the shim's handler over the default */
        write_null();
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGSEGV);
}

/* The USERD block as CUDA sets it up (the H200 recording): a system-memory object
 * mapped through its own /dev/nvidiactl descriptor, channels whose allocation
 * names it with userdOffset 0x2000 + 0x3000 i. Returns the mapping. */
static uint8_t *map_userd(uint32_t *mem, int *fd)
{
    uint8_t mp[128] = {0};
    *mem = 0;
    assert_int_equal(fk_alloc(r, ctl, client, device, mem, RM_CLASS_NV01_MEMORY_SYSTEM, mp,
                              sizeof mp, true, false),
                     0);
    *fd = shim_open(r, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    assert_true(*fd >= 0);
    struct rm_map_memory_args map = {.h_client = client, .h_device = device, .h_memory = *mem,
                                     .length = 0x10000, .fd = *fd};
    assert_int_equal(shim_ioctl(r, ctl, RM_IOWR(RM_NR_MAP_MEMORY, sizeof map), &map), 0);
    assert_int_equal(map.status, 0);
    void *p = shim_mmap(r, false, NULL, 0x10000, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

static uint32_t new_sensed_channel(uint32_t tsg, uint32_t mem, uint64_t off)
{
    uint32_t h = 0;
    uint8_t params[368] = {0};
    memcpy(params + 32, &mem, 4);
    memcpy(params + 64, &off, 8);
    assert_int_equal(fk_alloc(r, ctl, client, tsg, &h, RM_CLASS_HOPPER_CHANNEL_GPFIFO_A, params,
                              sizeof params, true, false),
                     0);
    return h;
}

static volatile uint32_t *gp(uint8_t *userd, unsigned i, uint32_t word)
{
    return (volatile uint32_t *)(void *)(userd + 0x2000 + 0x3000 * i + word);
}

/* Returns once the fake's engine has begun and finished a whole pass since the
 * call: whatever was queued before it, on an enabled channel, is fetched. A
 * loaded machine may keep the engine thread off the CPU for milliseconds. */
static void engine_passed(void)
{
    uint64_t since = fakedrv_engine_passes();
    uint64_t end = mono_ns() + 5000000000ull;
    while (fakedrv_engine_passes() < since + 2 && mono_ns() < end)
        sleep_ms(1);
    assert_true(fakedrv_engine_passes() >= since + 2);
}

/* One sample after the fake's engine fetched what it may. */
static uint32_t pending_after_fetch(void)
{
    struct kairos_runnable rep;
    engine_passed();
    tc_sense_reported(0, mono_ns());
    sleep_ms(1);
    uint64_t now = mono_ns();
    tc_sense_sample(now);
    assert_true(tc_sense_report(0, now, &rep));
    return rep.pending_samples;
}

static void test_sensor_reads_userd(void **state)
{
    (void)state;
    uint32_t mem;
    int fd;
    uint8_t *userd = map_userd(&mem, &fd);
    uint32_t tsg = new_tsg(device);
    new_sensed_channel(tsg, mem, 0x2000);
    new_sensed_channel(tsg, mem, 0x5000);
    new_channel(tsg); /* one whose USERD the shim cannot see: the report says partial */
    tc_sense_start();
    tc_sense_refresh();

    /* Idle: nothing queued. */
    assert_int_equal(pending_after_fetch(), 0);
    /* Work queued on channel 1 while running: the engine fetches it at once; the
     * next sample sees GPGet moved (it ran), the one after sees it idle. */
    *gp(userd, 1, 0x8C) = 5;
    assert_int_equal(pending_after_fetch(), 1);
    assert_int_equal(*gp(userd, 1, 0x88), 5);
    assert_int_equal(pending_after_fetch(), 0);
    /* Paused, work queued stays pending: that is runnable time. */
    assert_int_equal(timectl_pause(0), 0);
    *gp(userd, 1, 0x8C) = 9;
    tc_sense_reported(0, mono_ns());
    uint64_t first = 0, last = 0;
    for (int i = 0; i < 20; i++) {
        sleep_ms(1);
        last = mono_ns();
        first = first ? first : last;
        tc_sense_sample(last);
    }
    struct kairos_runnable rep;
    assert_true(tc_sense_report(0, mono_ns(), &rep));
    assert_true(rep.unpaused_us < 1000); /* paused the whole interval */
    assert_int_equal(rep.samples, 20);
    assert_int_equal(rep.pending_samples, 20);
    assert_int_equal(rep.channels, 2);
    assert_int_equal(rep.flags, KAIROS_RUNNABLE_PARTIAL | KAIROS_RUNNABLE_PROGRESS);
    assert_int_equal(rep.progress_us, 0); /* waited, never moved */
    /* every interval from the first sample on, and at most one fast interval (1 ms)
     * of the onset before it; bounds by the samples' own clock, whatever the load */
    uint64_t span_us = (last - first) / 1000;
    assert_true(rep.runnable_us >= span_us && rep.runnable_us <= span_us + 1001);
    assert_true(rep.runnable_us <= rep.interval_us);
    /* Resumed: fetched (seen once), idle again; unpaused from the resume on. */
    tc_sense_reported(0, mono_ns());
    sleep_ms(10);
    assert_int_equal(timectl_resume(0), 0);
    sleep_ms(20);
    tc_sense_sample(mono_ns());
    assert_true(tc_sense_report(0, mono_ns(), &rep));
    print_message("interval %llu us, unpaused %llu us\n", (unsigned long long)rep.interval_us,
                  (unsigned long long)rep.unpaused_us);
    assert_true(rep.unpaused_us >= 19000 && rep.unpaused_us + 9000 <= rep.interval_us);
    assert_int_equal(rep.pending_samples, 1);
    assert_int_equal(*gp(userd, 1, 0x88), 9);
    assert_int_equal(pending_after_fetch(), 0);

    /* The application unmaps the block: never read again (a read would fault). */
    *gp(userd, 0, 0x8C) = 1;
    assert_int_equal(shim_munmap(r, userd, 0x10000), 0);
    tc_sense_sample(mono_ns());
    tc_sense_refresh();
    assert_int_equal(pending_after_fetch(), 0);
    tc_sense_reported(0, mono_ns());
    tc_sense_sample(mono_ns());
    assert_true(tc_sense_report(0, mono_ns(), &rep));
    assert_int_equal(rep.channels, 0);
    shim_close(r, fd);
}

/* The USERD block mapped, one channel sensed at its first page (0x2000), the
 * sensor on. */
static uint8_t *one_sensed_channel(int *fd)
{
    uint32_t mem;
    uint8_t *userd = map_userd(&mem, fd);
    new_sensed_channel(new_tsg(device), mem, 0x2000);
    tc_sense_start();
    tc_sense_refresh();
    return userd;
}

/* Every GPFIFO entry fetched, but the host's pushbuffer Get behind its Put (low
 * or high half): a launch waits for the kernel before it (on the H200 the 7th of
 * eight queued 100 ms kernels read so, and nothing else did). Pending until Get
 * reaches Put; the fake engine never touches those words. */
static void test_sensor_reads_a_launch_waiting_in_the_pushbuffer(void **state)
{
    (void)state;
    int fd;
    uint8_t *userd = one_sensed_channel(&fd);
    assert_int_equal(pending_after_fetch(), 0);
    *gp(userd, 0, 0x40) = 0x8dc1c4; /* Put */
    *gp(userd, 0, 0x44) = 0x8dc188; /* Get, 0x3c behind */
    assert_int_equal(pending_after_fetch(), 1);
    assert_int_equal(pending_after_fetch(), 1); /* stays while it waits */
    *gp(userd, 0, 0x44) = 0x8dc1c4;
    assert_int_equal(pending_after_fetch(), 1); /* Get moved: the launch went */
    assert_int_equal(pending_after_fetch(), 0);
    *gp(userd, 0, 0x4C) = 2; /* PutHi ahead of GetHi */
    assert_int_equal(pending_after_fetch(), 1);
    *gp(userd, 0, 0x60) = 2;
    assert_int_equal(pending_after_fetch(), 0);
    shim_munmap(r, userd, 0x10000);
    shim_close(r, fd);
}

/* The microseconds between a report and the sample before it: the part of its
 * interval no sample could count (more than a few under a loaded CI machine). */
static uint64_t unsampled_us;

/* Samples 1 ms apart for ms milliseconds from a fresh interval; the report. With
 * moving, the host processes a method of the channel's before each sample (its
 * pushbuffer Get and Put advance together: on the GPU, nothing left behind). */
static struct kairos_runnable sampled_for(uint8_t *userd, unsigned ms, bool moving)
{
    struct kairos_runnable rep;
    uint64_t last = mono_ns();
    tc_sense_reported(0, last);
    for (unsigned i = 0; i < ms; i++) {
        sleep_ms(1);
        if (moving) {
            *gp(userd, 0, 0x40) += 0x40;
            *gp(userd, 0, 0x44) += 0x40;
        }
        last = mono_ns();
        tc_sense_sample(last);
    }
    uint64_t now = mono_ns();
    assert_true(tc_sense_report(0, now, &rep));
    unsampled_us = (now - last) / 1000 + 1; /* and a microsecond of rounding */
    assert_int_equal(rep.flags & KAIROS_RUNNABLE_PROGRESS, KAIROS_RUNNABLE_PROGRESS);
    assert_true(rep.progress_us <= rep.runnable_us);
    return rep;
}

/* Progress is time the host moved through the channel's work (GPGet or the
 * pushbuffer Get changed since the last sample), not time work waited: a paused
 * channel with work queued, or a launch held behind a running kernel, is
 * runnable and makes no progress. Each run of moving samples counts from its
 * second (a run of k samples spans k - 1 intervals), and a run goes on across
 * reports. kairosd judges timeslices by it, since NVML's five samples a second
 * cannot tell eight tenants apart. */
static void test_sensor_progress_is_time_the_channel_moved(void **state)
{
    (void)state;
    int fd;
    uint8_t *userd = one_sensed_channel(&fd);
    assert_int_equal(timectl_pause(0), 0);
    *gp(userd, 0, 0x8C) = 4; /* queued while paused: waits */
    (void)sampled_for(userd, 1, false);
    struct kairos_runnable rep = sampled_for(userd, 10, false);
    assert_true(rep.runnable_us + unsampled_us >= rep.interval_us);
    assert_int_equal(rep.progress_us, 0);
    assert_int_equal(timectl_resume(0), 0); /* the fake engine fetches at once */
    engine_passed();
    rep = sampled_for(userd, 1, false); /* a run's first sample: not counted */
    assert_int_equal(*gp(userd, 0, 0x88), 4);
    assert_true(rep.runnable_us > 0);
    assert_int_equal(rep.progress_us, 0);
    rep = sampled_for(userd, 10, true); /* on the GPU: the run goes on across the report */
    print_message("moving: progress %u us of %llu\n", rep.progress_us,
                  (unsigned long long)rep.interval_us);
    assert_true(rep.progress_us + unsampled_us >= rep.interval_us);
    /* a launch held behind a kernel: the pushbuffer Get stays behind Put */
    *gp(userd, 0, 0x40) += 0x80;
    (void)sampled_for(userd, 1, false);
    rep = sampled_for(userd, 10, false);
    assert_true(rep.runnable_us + unsampled_us >= rep.interval_us);
    assert_int_equal(rep.progress_us, 0);
    /* the kernel ended, the next launch went, the next kernels are short */
    rep = sampled_for(userd, 10, true); /* all but the run's first interval */
    assert_true(rep.progress_us > 0 && 2 * rep.progress_us >= rep.interval_us);
    rep = sampled_for(userd, 5, false); /* and then nothing moves */
    assert_int_equal(rep.progress_us, 0);
    shim_munmap(r, userd, 0x10000);
    shim_close(r, fd);
}

#define NEVER_MS 100000u

/* Samples about 1 ms apart until tc_sense_idle says an early idle report is due
 * (for at most limit_ms by the clock); the milliseconds it took by the clock,
 * NEVER_MS if it never did. */
static unsigned ms_until_idle_report(unsigned limit_ms, struct kairos_runnable *rep)
{
    uint64_t t0 = mono_ns();
    for (;;) {
        uint64_t ms = (mono_ns() - t0) / 1000000;
        if (tc_sense_idle(0, mono_ns(), rep))
            return (unsigned)ms;
        if (ms > limit_ms)
            return NEVER_MS;
        sleep_ms(1);
        tc_sense_sample(mono_ns());
    }
}

/* Going idle: a process whose last report was busy and that has had nothing
 * queued for KAIROS_IDLE_EARLY_MS reports at once (KAIROS_RUNNABLE_IDLE), so that
 * kairosd can lend its window from then on, not after a whole idle period; once
 * per busy report, and the next work it sees is a wake. */
static void test_sensor_reports_idle_early(void **state)
{
    (void)state;
    int fd;
    uint8_t *userd = one_sensed_channel(&fd);
    struct kairos_runnable rep;
    assert_int_equal(timectl_pause(0), 0);
    *gp(userd, 0, 0x8C) = 2; /* work waits: busy */
    (void)sampled_for(userd, 5, false);
    tc_sense_reported(0, mono_ns()); /* a busy report: an early idle report may go */
    assert_false(tc_sense_idle(0, mono_ns(), &rep)); /* work still queued */
    assert_int_equal(timectl_resume(0), 0); /* fetched: nothing queued from now on */
    unsigned ms = ms_until_idle_report(200, &rep);
    print_message("early idle report after %u ms quiet\n", ms);
    assert_true(ms >= KAIROS_IDLE_EARLY_MS - 2 && ms <= KAIROS_IDLE_EARLY_MS + 100);
    assert_int_equal(rep.flags & (KAIROS_RUNNABLE_IDLE | KAIROS_RUNNABLE_WAKE),
                     KAIROS_RUNNABLE_IDLE);
    assert_true(rep.runnable_us > 0); /* the interval so far, busy part included */
    tc_sense_idled(0);
    assert_int_equal(ms_until_idle_report(40, &rep), NEVER_MS); /* once per busy report */
    tc_sense_reported(0, mono_ns()); /* a regular report, quiet all along: idle */
    assert_int_equal(ms_until_idle_report(30, &rep), NEVER_MS);
    assert_int_equal(timectl_pause(0), 0);
    *gp(userd, 0, 0x8C) = 3; /* work comes: a wake */
    sleep_ms(1);
    tc_sense_sample(mono_ns());
    assert_true(tc_sense_wake(0, mono_ns(), &rep));
    tc_sense_woke(0);
    assert_int_equal(timectl_resume(0), 0);
    sleep_ms(2);
    tc_sense_sample(mono_ns());
    shim_munmap(r, userd, 0x10000);
    shim_close(r, fd);
}

/* Back from an idle spell: a process whose last report was idle says so at once
 * when a sample sees work queued (KAIROS_RUNNABLE_WAKE, from the control thread:
 * no system call on the application's), once per idle report; never after a busy
 * report, never while nothing is queued. */
static void test_sensor_wakes_after_an_idle_report(void **state)
{
    (void)state;
    int fd;
    uint8_t *userd = one_sensed_channel(&fd);
    struct kairos_runnable rep;
    tc_sense_reported(0, mono_ns()); /* the first interval: nothing reported before it */
    sleep_ms(5);
    tc_sense_sample(mono_ns());
    assert_false(tc_sense_wake(0, mono_ns(), &rep)); /* no report was idle yet */
    tc_sense_reported(0, mono_ns()); /* an idle interval reported */
    sleep_ms(2);
    tc_sense_sample(mono_ns());
    assert_false(tc_sense_wake(0, mono_ns(), &rep)); /* idle still: nothing to say */
    assert_int_equal(timectl_pause(0), 0); /* its window was lent: queued work waits */
    *gp(userd, 0, 0x8C) = 3;
    sleep_ms(2);
    tc_sense_sample(mono_ns());
    assert_true(tc_sense_wake(0, mono_ns(), &rep));
    assert_int_equal(rep.flags & KAIROS_RUNNABLE_WAKE, KAIROS_RUNNABLE_WAKE);
    assert_true(rep.runnable_us > 0 && rep.runnable_us <= rep.interval_us);
    tc_sense_woke(0);
    sleep_ms(1);
    tc_sense_sample(mono_ns());
    assert_false(tc_sense_wake(0, mono_ns(), &rep)); /* one wake per idle report */
    assert_true(tc_sense_report(0, mono_ns(), &rep)); /* the interval goes on: not reset */
    assert_true(rep.interval_us >= 5000);
    assert_int_equal(rep.flags & KAIROS_RUNNABLE_WAKE, 0);
    tc_sense_reported(0, mono_ns()); /* a busy report */
    sleep_ms(1);
    tc_sense_sample(mono_ns());
    assert_false(tc_sense_wake(0, mono_ns(), &rep)); /* busy before: kairosd knows */
    assert_int_equal(timectl_resume(0), 0);
    sleep_ms(3);
    tc_sense_sample(mono_ns());
    shim_munmap(r, userd, 0x10000);
    shim_close(r, fd);
}

/* A start seen after a sparse gap: the sampler slows down while idle, so the
 * first sample that sees work may come 20 ms after the last quiet one; it counts
 * one fast interval of runnable time (as 1 ms sampling would), not the gap, which
 * would make a short kernel look 20 ms long. Later samples with work count their
 * whole gap (a late control thread included). */
static void test_sensor_counts_a_start_after_a_sparse_gap_as_one_interval(void **state)
{
    (void)state;
    int fd;
    uint8_t *userd = one_sensed_channel(&fd);
    const uint64_t ms = 1000000, t = mono_ns();
    struct kairos_runnable rep;
    tc_sense_reported(0, t);
    tc_sense_sample(t + 1 * ms);
    tc_sense_sample(t + 21 * ms); /* idle, sparse */
    assert_int_equal(timectl_pause(0), 0);
    *gp(userd, 0, 0x8C) = 2; /* queued while paused: pending from now on */
    tc_sense_sample(t + 41 * ms);
    assert_true(tc_sense_report(0, t + 41 * ms, &rep));
    assert_int_equal(rep.runnable_us, TC_SENSE_FAST_NS / 1000);
    tc_sense_sample(t + 42 * ms);
    tc_sense_sample(t + 62 * ms); /* still waiting, the sample 20 ms late */
    assert_true(tc_sense_report(0, t + 62 * ms, &rep));
    assert_int_equal(rep.runnable_us, TC_SENSE_FAST_NS / 1000 + 21000);
    assert_int_equal(rep.pending_samples, 3);
    assert_int_equal(timectl_resume(0), 0);
    shim_munmap(r, userd, 0x10000);
    shim_close(r, fd);
}

/* ---- the control thread's sampling rate (issue 23: idle costs nothing) ---- */

static uint64_t stat_mark; /* a counter's value before what a wait waits for */

static struct timectl_stats stats_now(void)
{
    struct timectl_stats s;
    timectl_stats(&s);
    return s;
}

static uint64_t turns_now(void)
{
    return stats_now().turns;
}

static uint64_t samples_now(void)
{
    return stats_now().samples;
}

static bool reported_since_mark(void)
{
    return stats_now().reports > stat_mark;
}

static bool woke_since_mark(void)
{
    return stats_now().wake_reports > stat_mark;
}

/* Waits until ok() holds, polling every ms, at most deadline_ms by the clock. */
static bool wait_for(bool (*ok)(void), unsigned deadline_ms)
{
    uint64_t end = mono_ns() + deadline_ms * 1000000ull;
    while (!ok()) {
        if (mono_ns() > end)
            return false;
        sleep_ms(1);
    }
    return true;
}

/* How fast count() grows per second, measured over at least window_ms by the clock. */
static double rate_per_s(uint64_t (*count)(void), unsigned window_ms)
{
    uint64_t c0 = count(), t0 = mono_ns(), t1;
    while ((t1 = mono_ns()) - t0 < window_ms * 1000000ull)
        sleep_ms(5);
    return (double)(count() - c0) * 1e9 / (double)(t1 - t0);
}

/* Under a policy that asks for reports (and keeps the process paused), a process
 * with nothing queued is sampled every rest_ns: its control thread wakes about
 * 1e9 / rest_ns times a second, not 1000. Work that arrives is seen at the next
 * idle sample (the wake report, within the idle interval and a loaded machine's
 * slack) and then sampled every 1 ms while it waits. */
static void idle_sampling(uint32_t flags, uint64_t rest_ns)
{
    int fd;
    uint8_t *userd = one_sensed_channel(&fd);
    struct kairos_time_policy p = {.gpu = 0, .seq = 1, .flags = KAIROS_TIME_REPORT | flags,
                                   .period_us = 100000, .duty_us = 0, .epoch_ns = mono_ns()};
    timectl_policy(&p);
    stat_mark = 0;
    assert_true(wait_for(reported_since_mark, 2000)); /* idle reported: work will be a wake */
    const double idle_hz = 1e9 / (double)rest_ns, idle_ms = (double)rest_ns / 1e6;
    double turns = rate_per_s(turns_now, 1000);

    stat_mark = stats_now().wake_reports;
    uint64_t t0 = mono_ns();
    *gp(userd, 0, 0x8C) = 1; /* paused: it waits, pending */
    assert_true(wait_for(woke_since_mark, 2000));
    double wake_ms = (double)(mono_ns() - t0) / 1e6;
    double busy = rate_per_s(samples_now, 200);
    print_message("idle (flags %#x): %.1f wakeups/s (bound %.1f); wake after %.1f ms (bound "
                  "%.0f); %.0f samples/s with work waiting\n",
                  (unsigned)flags, turns, 1.5 * idle_hz + 5, wake_ms, idle_ms + 80, busy);
    assert_true(turns <= 1.5 * idle_hz + 5);
    assert_true(wake_ms <= idle_ms + 80);
    /* 1 ms sampling gives about 1000; a loaded machine's sleeps run long, so the
     * bound is what idle sampling could never reach */
    assert_true(busy >= 3 * idle_hz && busy >= 100);
    struct timectl_stats st = stats_now(); /* the sensor accounts for its own time */
    assert_true(st.sample_ns > 0 && st.sample_ns < mono_ns() - p.epoch_ns);
    shim_munmap(r, userd, 0x10000);
    shim_close(r, fd);
}

/* Where kairosd acts on a wake at once (KAIROS_TIME_QUICK_WAKE: windows, a latency
 * tenant, a limit): every TC_SENSE_IDLE_NS (20 ms). */
static void test_idle_sampler_wakes_rarely_and_comes_back_for_work(void **state)
{
    (void)state;
    idle_sampling(KAIROS_TIME_QUICK_WAKE, TC_SENSE_IDLE_NS);
}

/* Where it does not (natively, in the shares' slices): once a report period. */
static void test_idle_sampler_rests_where_a_wake_changes_nothing(void **state)
{
    (void)state;
    idle_sampling(0, TC_SENSE_REST_NS);
}

static void test_window_math(void **state)
{
    (void)state;
    struct kairos_time_policy p = {.period_us = 100000, .phase_us = 20000, .duty_us = 30000,
                                   .epoch_ns = 1000000000ull};
    uint64_t next;
    /* window [20, 50) ms of each period from epoch */
    assert_true(timectl_window_paused(&p, p.epoch_ns + 10000000ull, &next));
    assert_int_equal(next, p.epoch_ns + 20000000ull);
    assert_false(timectl_window_paused(&p, p.epoch_ns + 20000000ull, &next));
    assert_int_equal(next, p.epoch_ns + 50000000ull);
    assert_true(timectl_window_paused(&p, p.epoch_ns + 150000000ull, &next));
    assert_int_equal(next, p.epoch_ns + 220000000ull);
    /* before the epoch: the same grid extended backwards */
    assert_false(timectl_window_paused(&p, p.epoch_ns - 70000000ull, &next));
    assert_int_equal(next, p.epoch_ns - 50000000ull);
    /* a window rotated past the period's end (sched_wake): [87, 137) ms */
    p.phase_us = 87000;
    p.duty_us = 50000;
    assert_false(timectl_window_paused(&p, p.epoch_ns + 10000000ull, &next));
    assert_int_equal(next, p.epoch_ns + 37000000ull);
    assert_true(timectl_window_paused(&p, p.epoch_ns + 40000000ull, &next));
    assert_int_equal(next, p.epoch_ns + 87000000ull);
    assert_false(timectl_window_paused(&p, p.epoch_ns + 90000000ull, &next));
    p.duty_us = 0;
    assert_true(timectl_window_paused(&p, 5, &next));
    assert_int_equal(next, UINT64_MAX);
    p.duty_us = p.period_us;
    assert_false(timectl_window_paused(&p, 5, &next));
    p.period_us = 0;
    assert_false(timectl_window_paused(&p, 5, &next));
}

static bool channel0_running(void)
{
    return !timectl_is_paused(0);
}

static void test_windows_follow_clock(void **state)
{
    (void)state;
    new_channel(new_tsg(device));
    struct kairos_time_policy p = {.gpu = 0, .seq = 1, .period_us = 100000, .duty_us = 30000,
                                   .epoch_ns = mono_ns()};
    timectl_policy(&p);
    sleep_ms(50);
    uint64_t start = mono_ns(), last = start, running = 0;
    bool was_running = !timectl_is_paused(0);
    while (last - start < 1000000000ull) {
        sleep_ms(1);
        uint64_t now = mono_ns();
        if (was_running)
            running += now - last;
        was_running = !timectl_is_paused(0);
        last = now;
    }
    double frac = (double)running / (double)(last - start);
    print_message("unpaused fraction %.3f (want 0.30)\n", frac);
    assert_true(frac > 0.22 && frac < 0.38); /* loaded CI machines jitter */
    struct timectl_stats s;
    timectl_stats(&s);
    assert_true(s.pauses >= 8 && s.pauses <= 13);
    /* duty == period: resumed and stays so */
    p.seq = 2;
    p.duty_us = p.period_us;
    timectl_policy(&p);
    assert_true(wait_for(channel0_running, 5000)); /* a loaded CI machine took over 20 ms */
}

#define WORKERS 8
static atomic_bool stop_workers;

static void *churn(void *arg)
{
    int *fails = arg;
    while (!atomic_load(&stop_workers)) {
        uint32_t tsg = 0, params[5] = {0};
        if (fk_alloc(r, ctl, client, device, &tsg, RM_CLASS_KEPLER_CHANNEL_GROUP_A, params,
                     sizeof params, true, false) != 0) {
            (*fails)++;
            continue;
        }
        uint8_t cp[368] = {0};
        uint32_t ch = 0;
        if (fk_alloc(r, ctl, client, tsg, &ch, RM_CLASS_HOPPER_CHANNEL_GPFIFO_A, cp, sizeof cp,
                     true, false) != 0)
            (*fails)++;
        if (fk_free(r, ctl, client, tsg) != 0)
            (*fails)++;
    }
    return NULL;
}

static void test_threads_while_pausing(void **state)
{
    (void)state;
    uint32_t keep = new_channel(new_tsg(device));
    struct kairos_time_policy p = {.gpu = 0, .seq = 1, .timeslice_us = 3000};
    timectl_policy(&p);
    atomic_store(&stop_workers, false);
    pthread_t t[WORKERS];
    int fails[WORKERS] = {0};
    for (int i = 0; i < WORKERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, churn, &fails[i]), 0);
    for (int i = 0; i < 100; i++) {
        timectl_pause(0);
        timectl_resume(0);
    }
    atomic_store(&stop_workers, true);
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(fails[i], 0);
    }
    assert_int_equal(fakedrv_channel_disabled(client, keep), 0);
    struct timectl_stats s;
    timectl_stats(&s);
    assert_int_equal(s.pauses, 100);
    /* Races with frees may make a batch name a channel just freed (the driver
     * refuses that batch); nothing else fails. */
    print_message("controls refused while racing frees: %llu\n",
                  (unsigned long long)s.controls_failed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_timeslice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_application_cannot_override_timeslice, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_zero_gives_back_the_applications_timeslices, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pause_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_doorbell_written_while_paused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocked_segv_thread_rings_while_paused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_faulthandler_crash_is_native, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_while_paused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_while_thread_holds_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_null_write_still_kills, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sensor_reads_userd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sensor_reads_a_launch_waiting_in_the_pushbuffer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sensor_progress_is_time_the_channel_moved, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sensor_wakes_after_an_idle_report, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sensor_reports_idle_early, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sensor_counts_a_start_after_a_sparse_gap_as_one_interval,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_sampler_wakes_rarely_and_comes_back_for_work,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_sampler_rests_where_a_wake_changes_nothing,
                                        setup, teardown),
        cmocka_unit_test(test_window_math),
        cmocka_unit_test_setup_teardown(test_windows_follow_clock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_while_pausing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
