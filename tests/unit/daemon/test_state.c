/* test_state.c - the state file: round trip of run-time tenants (config tenants are
 * not written), and corrupt, truncated or garbage files set aside without touching
 * the tenants already known. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/state.h"

static char dir[] = "/tmp/kairos-state-XXXXXX";
static char path[256];

static int setup(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/state.json", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    rmdir(dir);
    memcpy(dir + strlen(dir) - 6, "XXXXXX", 6);
    return 0;
}

static void test_round_trip(void **state)
{
    (void)state;
    struct ledger a, b;
    char err[512], aside[512];
    uint64_t q1[KAIROS_MAX_GPUS] = {1ull << 30, 5};
    uint64_t q2[KAIROS_MAX_GPUS] = {7, 0};
    ledger_init(&a, 2);
    struct ledger_tenant *t;
    assert_int_equal(ledger_tenant_add(&a, "cfg", q1, LEDGER_TENANT_CONFIG, NULL), 0);
    assert_int_equal(ledger_tenant_add(&a, "job", q1, 0, NULL), 0);
    assert_int_equal(ledger_tenant_add(&a, "run-1", q2, LEDGER_TENANT_EPHEMERAL, &t), 0);
    t->owner_pid = 4242;
    assert_int_equal(state_save(path, &a, err, sizeof err), 0);
    ledger_init(&b, 2);
    assert_int_equal(ledger_tenant_add(&b, "cfg", NULL, LEDGER_TENANT_CONFIG, NULL), 0);
    assert_int_equal(state_load(path, &b, err, sizeof err, aside, sizeof aside), 2);
    struct ledger_tenant *job = ledger_tenant_find(&b, "job");
    struct ledger_tenant *run = ledger_tenant_find(&b, "run-1");
    assert_non_null(job);
    assert_non_null(run);
    assert_int_equal(job->quota[0], 1ull << 30);
    assert_int_equal(job->quota[1], 5);
    assert_int_equal(run->flags, LEDGER_TENANT_EPHEMERAL);
    assert_int_equal(run->owner_pid, 4242);
    assert_int_equal(ledger_tenant_find(&b, "cfg")->quota[0], 0); /* not from the file */
    ledger_fini(&a);
    ledger_fini(&b);
    /* no file: nothing, no error */
    unlink(path);
    ledger_init(&b, 2);
    assert_int_equal(state_load(path, &b, err, sizeof err, aside, sizeof aside), 0);
    ledger_fini(&b);
}

static void corrupt(const char *text, size_t len)
{
    struct ledger l;
    char err[512], aside[512];
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(text, 1, len, f);
    fclose(f);
    ledger_init(&l, 2);
    assert_int_equal(ledger_tenant_add(&l, "cfg", NULL, LEDGER_TENANT_CONFIG, NULL), 0);
    assert_int_equal(state_load(path, &l, err, sizeof err, aside, sizeof aside), -EINVAL);
    if (!strstr(err, "is corrupt") || !strstr(err, "set aside as"))
        fail_msg("%s", err);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(access(aside, F_OK), 0);
    unlink(aside);
    assert_int_equal(l.n_tenants, 1);
    assert_non_null(ledger_tenant_find(&l, "cfg"));
    ledger_fini(&l);
}

#define CORRUPT(text) corrupt(text, sizeof text - 1)

static void test_corrupt_files(void **state)
{
    (void)state;
    CORRUPT("{\"version\": 1, \"tenants\": [{\"name\": \"job\", \"quo");
    CORRUPT("\x01\x02\xff\xfe garbage");
    CORRUPT("");
    CORRUPT("[1, 2]");
    CORRUPT("{\"version\": 2, \"tenants\": []}");
    CORRUPT("{\"version\": 1, \"tenants\": [{\"name\": \"a/b\", \"quota\": {}}]}");
    CORRUPT("{\"version\": 1, \"tenants\": [{\"name\": \"a\", \"quota\": {\"9\": 5}}]}");
    CORRUPT("{\"version\": 1, \"tenants\": [{\"name\": \"a\", \"quota\": {\"0\": -5}}]}");
    CORRUPT("{\"version\": 1, \"version\": 1, \"tenants\": []}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_files, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
