/* test_policy.c - compute policies as every source gives them: the text operators
 * write, the checks of a whole policy (with the words of the refusal), the wire's
 * parts per million both ways, and the 100 % rule over one GPU's shares. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/policy.h"

static char why[512];

static void expect_why(const char *part)
{
    if (!strstr(why, part))
        fail_msg("expected '%s' in '%s'", part, why);
}

static void test_text(void **state)
{
    (void)state;
    double v = -1;
    enum sched_prio prio = SCHED_PRIO_NORMAL;
    assert_int_equal(policy_parse_percent("share", "30%", &v, why, sizeof why), 0);
    assert_float_equal(v, 0.3, 1e-12);
    assert_int_equal(policy_parse_percent("share", "30", &v, why, sizeof why), -EINVAL);
    expect_why("expected share as a percentage from 0% to 100% (e.g. 40%), found '30'");
    assert_int_equal(policy_parse_percent("share", "130%", &v, why, sizeof why), -EINVAL);
    assert_int_equal(policy_parse_limit("none", &v, why, sizeof why), 0);
    assert_float_equal(v, 0, 0);
    assert_int_equal(policy_parse_limit("50%", &v, why, sizeof why), 0);
    assert_float_equal(v, 0.5, 1e-12);
    assert_int_equal(policy_parse_limit("0%", &v, why, sizeof why), -EINVAL);
    expect_why("write none for no limit");
    assert_int_equal(policy_parse_priority("latency", &prio, why, sizeof why), 0);
    assert_int_equal(prio, SCHED_PRIO_LATENCY);
    assert_int_equal(policy_parse_priority("batch", &prio, why, sizeof why), 0);
    assert_int_equal(prio, SCHED_PRIO_BATCH);
    assert_int_equal(policy_parse_priority("high", &prio, why, sizeof why), -EINVAL);
    expect_why("latency, normal or batch, found 'high'");
}

static void test_check(void **state)
{
    (void)state;
    struct sched_policy p = {.share = 0.3, .limit = 0.5, .prio = SCHED_PRIO_LATENCY};
    assert_int_equal(policy_check(&p, why, sizeof why), 0);
    p.share = 0.6;
    assert_int_equal(policy_check(&p, why, sizeof why), -EINVAL);
    expect_why("share 60% is above the limit 50%");
    p.limit = 0; /* none: any share */
    assert_int_equal(policy_check(&p, why, sizeof why), 0);
    p.share = 1.5;
    assert_int_equal(policy_check(&p, why, sizeof why), -EINVAL);
    expect_why("share 150% is outside 0-100%");
    p.share = 0.1;
    p.limit = -0.1;
    assert_int_equal(policy_check(&p, why, sizeof why), -EINVAL);
    expect_why("limit -10% is outside 0-100%");
}

static void test_ppm(void **state)
{
    (void)state;
    struct sched_policy p;
    assert_int_equal(policy_from_ppm(300000, 500000, KAIROS_PRIO_BATCH, &p, why, sizeof why), 0);
    assert_float_equal(p.share, 0.3, 1e-12);
    assert_float_equal(p.limit, 0.5, 1e-12);
    assert_int_equal(p.prio, SCHED_PRIO_BATCH);
    struct kairos_compute w;
    policy_to_wire(&p, &w);
    assert_int_equal(w.share_ppm, 300000);
    assert_int_equal(w.limit_ppm, 500000);
    assert_int_equal(w.priority, KAIROS_PRIO_BATCH);
    assert_int_equal(w.flags, KAIROS_COMPUTE_SET);
    assert_int_equal(w.pad, 0);
    char text[96];
    assert_string_equal(policy_describe(&p, text, sizeof text), "share 30%, limit 50%, batch");
    p.limit = 0;
    assert_string_equal(policy_describe(&p, text, sizeof text), "share 30%, no limit, batch");
    assert_int_equal(policy_ppm(1.0 / 3), 333333);
    assert_int_equal(policy_from_ppm(1000001, 0, 0, &p, why, sizeof why), -EINVAL);
    expect_why("share 100.0001% is outside 0-100%");
    assert_int_equal(policy_from_ppm(0, 2000000, 0, &p, why, sizeof why), -EINVAL);
    expect_why("limit 200% is outside 0-100%");
    assert_int_equal(policy_from_ppm(0, 0, 3, &p, why, sizeof why), -EINVAL);
    expect_why("priority 3 is unknown");
    assert_int_equal(policy_from_ppm(600000, 500000, 0, &p, why, sizeof why), -EINVAL);
    expect_why("above the limit");
}

static void test_shares(void **state)
{
    (void)state;
    struct policy_shares s = {0};
    assert_int_equal(policy_shares_add(&s, "train", 0, 0.7), 0);
    assert_int_equal(policy_shares_add(&s, "train", 1, 0.9), 0);
    assert_int_equal(policy_shares_add(&s, "idle", 0, 0), 0); /* best effort: not kept */
    assert_int_equal(policy_shares_add(&s, "infer", 0, 0.3), 0);
    assert_int_equal(s.n, 3);
    assert_int_equal(policy_shares_check(&s, why, sizeof why), 0); /* exactly 100 % */
    for (int i = 0; i < 40; i++) /* grows */
        assert_int_equal(policy_shares_add(&s, "many", 2, 0.01), 0);
    assert_int_equal(policy_shares_check(&s, why, sizeof why), 0);
    assert_int_equal(policy_shares_add(&s, "job", 1, 0.2), 0);
    assert_int_equal(policy_shares_check(&s, why, sizeof why), -EINVAL);
    expect_why("compute shares on GPU 1 add up to 110% (train 90%, job 20%): at most 100% can "
               "be guaranteed");
    policy_shares_free(&s);
    assert_null(s.v);
    assert_int_equal(policy_shares_check(&s, why, sizeof why), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_ppm),
        cmocka_unit_test(test_shares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
