/* test_conn_limits.c - the admission rule: a user reaches max_connections_per_user
 * and no more, others still get in; the last admin_reserve connections go to root
 * and the configured admins only; administrators are not limited per uid; counts
 * go down when connections close; the descriptor limit lowers the total; a peer
 * with replies waiting is idle only after CONN_LIMITS_REPLY_WAIT_MS, however short
 * register_timeout_ms is. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "daemon/transport/conn_limits.h"

/* The limits under test. setup makes them 10 connections, 3 per user, the last 2
 * kept for root and the administrator uid 500; test_descriptor_limit its own. */
static struct config c;
static uid_t admins[1];
static struct conn_limits cl;
static char warn[256], msg[256];

static int setup(void **state)
{
    (void)state;
    config_defaults(&c);
    c.max_connections = 10;
    c.max_connections_per_user = 3;
    c.admin_reserve = 2;
    admins[0] = 500;
    c.admins = admins;
    c.n_admins = 1;
    conn_limits_init(&cl, &c, warn, sizeof warn);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    conn_limits_fini(&cl);
    return 0;
}

/* n connections of uid, each admitted and counted. */
static void admit_n(uid_t uid, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(conn_limits_admit(&cl, &c, uid, "", msg, sizeof msg), 0);
        assert_int_equal(conn_limits_add(&cl, uid), 0);
    }
}

static void test_per_user_and_reserve(void **state)
{
    (void)state;
    assert_string_equal(warn, "");
    admit_n(1000, 3);
    assert_int_equal(conn_limits_admit(&cl, &c, 1000, "", msg, sizeof msg), -EBUSY);
    assert_non_null(strstr(msg, "uid 1000 already holds 3 connections"));
    assert_non_null(strstr(msg, "max_connections_per_user"));
    /* another user still gets in, up to the reserve */
    admit_n(1001, 3);
    conn_limits_add(&cl, 1002);
    conn_limits_add(&cl, 1002); /* 8 of 10: the last 2 are the administrators' */
    assert_int_equal(conn_limits_admit(&cl, &c, 1003, "", msg, sizeof msg), -EBUSY);
    assert_non_null(strstr(msg, "the last 2 are kept for administrators"));
    assert_int_equal(conn_limits_admit(&cl, &c, 0, "", msg, sizeof msg), 0);
    conn_limits_add(&cl, 0);
    assert_int_equal(conn_limits_admit(&cl, &c, 500, "", msg, sizeof msg), 0); /* admins: */
    conn_limits_add(&cl, 500);
    assert_int_equal(conn_limits_admit(&cl, &c, 0, "", msg, sizeof msg), -EBUSY); /* 10 of 10 */
    assert_non_null(strstr(msg, "too many connections (10"));
    /* closing gives room back, to that user */
    conn_limits_remove(&cl, 1000);
    assert_int_equal(conn_limits_of(&cl, 1000), 2);
    conn_limits_remove(&cl, 0);
    conn_limits_remove(&cl, 500);
    conn_limits_remove(&cl, 1002);
    assert_int_equal(conn_limits_admit(&cl, &c, 1000, "", msg, sizeof msg), 0);
    assert_int_equal(conn_limits_of(&cl, 1002), 1);
}

static void test_admins_not_limited_per_uid(void **state)
{
    (void)state;
    admit_n(500, 10);
    assert_int_equal(conn_limits_admit(&cl, &c, 500, "", msg, sizeof msg), -EBUSY);
}

static void test_descriptor_limit(void **state)
{
    (void)state;
    struct rlimit saved, low = {.rlim_cur = 164, .rlim_max = 164};
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    if (setrlimit(RLIMIT_NOFILE, &low))
        skip();
    config_defaults(&c);
    conn_limits_init(&cl, &c, warn, sizeof warn);
    assert_int_equal(conn_limits_max(&cl, &c), 50); /* (164 - 64) / 2 */
    char want[96];
    snprintf(want, sizeof want, "allows 50 connections, fewer than max_connections %u",
             c.max_connections);
    assert_non_null(strstr(warn, want));
    conn_limits_fini(&cl);
}

/* The rule of the idle sweep: register_timeout_ms for a peer that waits for nothing;
 * while replies wait for it (a listing it reads slowly, a machine holding it back),
 * at least CONN_LIMITS_REPLY_WAIT_MS; a longer register_timeout_ms stands for both. */
static void test_idle_while_answered(void **state)
{
    (void)state;
    struct config cfg;
    config_defaults(&cfg);
    cfg.register_timeout_ms = 2000;
    assert_false(conn_limits_idle(&cfg, 1999, false));
    assert_true(conn_limits_idle(&cfg, 2000, false));
    assert_false(conn_limits_idle(&cfg, 2000, true));
    assert_false(conn_limits_idle(&cfg, CONN_LIMITS_REPLY_WAIT_MS - 1, true));
    assert_true(conn_limits_idle(&cfg, CONN_LIMITS_REPLY_WAIT_MS, true));
    cfg.register_timeout_ms = 60000;
    assert_false(conn_limits_idle(&cfg, 59999, true));
    assert_true(conn_limits_idle(&cfg, 60000, true));
    assert_true(conn_limits_idle(&cfg, 60000, false));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_per_user_and_reserve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admins_not_limited_per_uid, setup, teardown),
        cmocka_unit_test(test_descriptor_limit),
        cmocka_unit_test(test_idle_while_answered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
