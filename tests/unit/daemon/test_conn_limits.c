/* test_conn_limits.c - the admission rule: a user reaches max_connections_per_user
 * and no more, others still get in; the last admin_reserve connections go to root
 * and the configured admins only; administrators are not limited per uid; counts
 * go down when connections close; the descriptor limit lowers the total. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "daemon/conn_limits.h"

static void setup_cfg(struct config *c, uid_t *admins)
{
    config_defaults(c);
    c->max_connections = 10;
    c->max_connections_per_user = 3;
    c->admin_reserve = 2;
    admins[0] = 500;
    c->admins = admins;
    c->n_admins = 1;
}

static void test_per_user_and_reserve(void **state)
{
    (void)state;
    struct config c;
    uid_t admins[1];
    setup_cfg(&c, admins);
    struct conn_limits cl;
    char warn[256], msg[256];
    conn_limits_init(&cl, &c, warn, sizeof warn);
    assert_string_equal(warn, "");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(conn_limits_admit(&cl, &c, 1000, msg, sizeof msg), 0);
        assert_int_equal(conn_limits_add(&cl, 1000), 0);
    }
    assert_int_equal(conn_limits_admit(&cl, &c, 1000, msg, sizeof msg), -EBUSY);
    assert_non_null(strstr(msg, "uid 1000 already holds 3 connections"));
    assert_non_null(strstr(msg, "max_connections_per_user"));
    /* another user still gets in, up to the reserve */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(conn_limits_admit(&cl, &c, 1001, msg, sizeof msg), 0);
        conn_limits_add(&cl, 1001);
    }
    conn_limits_add(&cl, 1002);
    conn_limits_add(&cl, 1002); /* 8 of 10: the last 2 are the administrators' */
    assert_int_equal(conn_limits_admit(&cl, &c, 1003, msg, sizeof msg), -EBUSY);
    assert_non_null(strstr(msg, "the last 2 are kept for administrators"));
    assert_int_equal(conn_limits_admit(&cl, &c, 0, msg, sizeof msg), 0);
    conn_limits_add(&cl, 0);
    assert_int_equal(conn_limits_admit(&cl, &c, 500, msg, sizeof msg), 0); /* admins: */
    conn_limits_add(&cl, 500);
    assert_int_equal(conn_limits_admit(&cl, &c, 0, msg, sizeof msg), -EBUSY); /* 10 of 10 */
    assert_non_null(strstr(msg, "too many connections (10"));
    /* closing gives room back, to that user */
    conn_limits_remove(&cl, 1000);
    assert_int_equal(conn_limits_of(&cl, 1000), 2);
    conn_limits_remove(&cl, 0);
    conn_limits_remove(&cl, 500);
    conn_limits_remove(&cl, 1002);
    assert_int_equal(conn_limits_admit(&cl, &c, 1000, msg, sizeof msg), 0);
    assert_int_equal(conn_limits_of(&cl, 1002), 1);
    conn_limits_fini(&cl);
}

static void test_admins_not_limited_per_uid(void **state)
{
    (void)state;
    struct config c;
    uid_t admins[1];
    setup_cfg(&c, admins);
    struct conn_limits cl;
    char warn[256], msg[256];
    conn_limits_init(&cl, &c, warn, sizeof warn);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(conn_limits_admit(&cl, &c, 500, msg, sizeof msg), 0);
        conn_limits_add(&cl, 500);
    }
    assert_int_equal(conn_limits_admit(&cl, &c, 500, msg, sizeof msg), -EBUSY);
    conn_limits_fini(&cl);
}

static void test_descriptor_limit(void **state)
{
    (void)state;
    struct rlimit saved, low = {.rlim_cur = 164, .rlim_max = 164};
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    if (setrlimit(RLIMIT_NOFILE, &low))
        skip();
    struct config c;
    config_defaults(&c); /* max_connections 1024 */
    struct conn_limits cl;
    char warn[256];
    conn_limits_init(&cl, &c, warn, sizeof warn);
    assert_int_equal(conn_limits_max(&cl, &c), 50); /* (164 - 64) / 2 */
    assert_non_null(strstr(warn, "allows 50 connections, fewer than max_connections 1024"));
    conn_limits_fini(&cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_user_and_reserve),
        cmocka_unit_test(test_admins_not_limited_per_uid),
        cmocka_unit_test(test_descriptor_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
