/* test_threads.c - many threads through the shim's dispatch at once.
 *
 * 16 threads x 2000 iterations: each allocates vidmem (half through XFER),
 * asks FB_GET_INFO_V2, frees most of what it allocated and keeps some, while
 * each also churns open/dup/close on a second ctl file and a plain file. At the
 * end the object tree's vidmem equals what the threads kept and what the fake
 * driver says is used, and closing the ctl file releases it all. Run under
 * ASan+UBSan by the sanitizer build, and under TSan where configured.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "fakedrv.h"
#include "shim/dispatch.h"
#include "shim/fdtable.h"
#include "shim/state.h"
#include "shim_fake.h"

#define THREADS 16
#define ITERS 2000
#define KEEP_EVERY 100 /* each thread keeps one allocation in KEEP_EVERY */
#define SIZE (2u << 20)

static const struct shim_real *real;
static int ctl;
static uint32_t client, device, subdevice;

struct worker {
    pthread_t thread;
    int index;
    uint64_t kept;
    int failures;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < ITERS; i++) {
        uint32_t h = 0;
        uint32_t st = fk_vidmem(real, ctl, client, device, &h, SIZE, i % 2 == 1);
        if (st != 0) {
            w->failures++;
            continue;
        }
        uint32_t total, avail;
        if (fk_fb_info(real, ctl, client, subdevice, &total, &avail) != 0)
            w->failures++;
        if (i % KEEP_EVERY == 0)
            w->kept += SIZE;
        else if (fk_free(real, ctl, client, h) != 0)
            w->failures++;

        if (i % 8 == 0) {
            /* Descriptor churn: a second ctl file with a client, dup'd and closed. */
            int fd = shim_open(real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
            uint32_t c2;
            if (fd < 0 || fk_client(real, fd, &c2) != 0) {
                w->failures++;
                continue;
            }
            int d = shim_dup(real, fd);
            int e = shim_fcntl(real, false, d, F_DUPFD_CLOEXEC, 3000 + w->index, NULL);
            shim_close(real, fd);
            shim_close(real, d);
            shim_close(real, e);
            int plain = shim_open(real, SHIM_OPEN, AT_FDCWD, "/dev/null", O_RDONLY, 0);
            shim_close(real, plain);
        }
    }
    return NULL;
}

static void test_many_threads(void **state)
{
    (void)state;
    real = shim_fake_setup();
    fakedrv_reset(1, 64ull << 30);
    ctl = shim_open(real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    assert_true(ctl >= 0);
    fk_context(real, ctl, &client, &device, &subdevice);

    struct worker w[THREADS] = {0};
    for (int i = 0; i < THREADS; i++) {
        w[i].index = i;
        assert_int_equal(pthread_create(&w[i].thread, NULL, worker_main, &w[i]), 0);
    }
    uint64_t kept = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(w[i].thread, NULL);
        assert_int_equal(w[i].failures, 0);
        kept += w[i].kept;
    }
    struct objtree_stats s = fk_stats();
    assert_int_equal(kept, (uint64_t)THREADS * (ITERS / KEEP_EVERY) * SIZE);
    assert_int_equal(s.vidmem_now, kept);
    assert_int_equal(s.vidmem_allocs, THREADS * ITERS);
    assert_int_equal(s.live_clients, 1);
    assert_int_equal(fakedrv_fb_total(0) - fakedrv_fb_free(0), kept);

    uint32_t files, fds;
    state_fd_counts(&files, &fds);
    assert_int_equal(files, 1);
    assert_int_equal(fds, 1);

    shim_close(real, ctl);
    s = fk_stats();
    assert_int_equal(s.vidmem_now, 0);
    assert_int_equal(s.live_objects, 0);
    assert_int_equal(fakedrv_fb_free(0), fakedrv_fb_total(0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
