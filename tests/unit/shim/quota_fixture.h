/* quota_fixture.h - the fixture of the shim tests that ask 48 MiB at a time under a
 * 64 MiB quota (KAIROS_MEM) on the fake driver, whose files are pipes (test_unseen.c,
 * test_vfork.c).
 *
 * It owns what those tests share: the cmocka set-up and tear-down (fk_quota_setup,
 * fk_quota_end), the table entry of one test function run for one case, and the steps
 * both repeat - open /dev/nvidiactl through the shim, a context with one 48 MiB
 * allocation, the check that the shim charged exactly what the driver holds, and the
 * close that must release everything. Runs in the test's main thread (and in a vfork
 * child, which shares its memory).
 */
#ifndef KAIROS_TESTS_QUOTA_FIXTURE_H
#define KAIROS_TESTS_QUOTA_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "shim/real.h"

#define QF_MIB   (1ull << 20)
#define QF_QUOTA (64 * QF_MIB)
#define QF_ASK   (48 * QF_MIB)

/* The fake driver's function table, set by qf_setup for the running test. */
extern const struct shim_real *qf_real;

int qf_setup(void **state);
int qf_teardown(void **state);

/* A cmocka table entry: test f under the fixture. */
#define QF_TEST(f) cmocka_unit_test_setup_teardown(f, qf_setup, qf_teardown)

/* A cmocka table entry: test f under the fixture, run for one case (a value of type);
 * f reads it as *(type *)*state. Named "f(case)" in cmocka's output. */
#define QF_CASE(f, type, value)                                                                    \
    {                                                                                              \
#f "(" #value ")", f, qf_setup, qf_teardown, &(type)                                       \
        {                                                                                          \
            value                                                                                  \
        }                                                                                          \
    }

/* A /dev/nvidiactl descriptor opened through the shim. */
int qf_open_ctl(void);

/* A context (client, device, subdevice) on fd and one 48 MiB allocation under it; true
 * when granted. Asserts the ledger exact after. client and device may be NULL. */
bool qf_allocate_48(int fd, uint32_t *client, uint32_t *device);

/* What the shim charged equals what the driver holds, and no more than the quota. */
void qf_assert_ledger_exact(void);

/* Closes fd through the shim; the driver then holds nothing and the shim charges nothing. */
void qf_close_releases_all(int fd);

#endif /* KAIROS_TESTS_QUOTA_FIXTURE_H */
