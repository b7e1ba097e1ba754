/* quota_fixture.c - the 64 MiB quota fixture of test_unseen.c and test_vfork.c (see
 * quota_fixture.h). */
#include "quota_fixture.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "shim/dispatch.h"
#include "shim_fake.h"

const struct shim_real *qf_real;

int qf_setup(void **state)
{
    (void)state; /* carries the case of a QF_CASE entry: left as it is */
    qf_real = fk_quota_setup("64M");
    return 0;
}

int qf_teardown(void **state)
{
    (void)state;
    fk_quota_end();
    return 0;
}

int qf_open_ctl(void)
{
    int fd = shim_open(qf_real, SHIM_OPEN, AT_FDCWD, "/dev/nvidiactl", O_RDWR, 0);
    assert_true(fd >= 0);
    return fd;
}

bool qf_allocate_48(int fd, uint32_t *client, uint32_t *device)
{
    uint32_t c, d, subdevice, mem = 0;
    fk_context(qf_real, fd, &c, &d, &subdevice);
    bool granted = fk_vidmem(qf_real, fd, c, d, &mem, QF_ASK, false) == 0;
    qf_assert_ledger_exact();
    if (client)
        *client = c;
    if (device)
        *device = d;
    return granted;
}

void qf_assert_ledger_exact(void)
{
    assert_int_equal(fk_shim_charged(), fk_driver_holds());
    assert_true(fk_driver_holds() <= QF_QUOTA);
}

void qf_close_releases_all(int fd)
{
    assert_int_equal(shim_close(qf_real, fd), 0);
    assert_int_equal(fk_driver_holds(), 0);
    assert_int_equal(fk_shim_charged(), 0);
}
