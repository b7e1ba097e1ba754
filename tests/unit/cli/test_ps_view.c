/* test_ps_view.c - the compute figures of a PS reply as kairos ps and kairos top
 * read them: present only with a policy, unknown (not 0) until measured, parts per
 * million to fractions, and the cells printed for them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli/ps_view.h"

static void test_compute_only_with_a_policy(void **state)
{
    (void)state;
    struct kairos_ps_reply r;
    memset(&r, 0, sizeof r);
    struct ps_compute c;
    r.quota[0] = 1 << 20;
    assert_false(ps_compute_get(&r, 0, &c));
    assert_true(ps_gpu_shown(&r, 0));
    assert_false(ps_gpu_shown(&r, 1));
    assert_false(ps_tenant_has_compute(&r, 2));
    r.compute_flags[1] = KAIROS_PS_COMPUTE_POLICY;
    assert_true(ps_gpu_shown(&r, 1)); /* a policy without memory still shows */
    assert_true(ps_tenant_has_compute(&r, 2));
    assert_false(ps_tenant_has_compute(&r, 1)); /* GPU 1 is beyond the node's count */
    assert_false(ps_compute_get(&r, KAIROS_MAX_GPUS, &c));
}

static void test_fractions_and_valid_bits(void **state)
{
    (void)state;
    struct kairos_ps_reply r;
    memset(&r, 0, sizeof r);
    r.compute_flags[0] = KAIROS_PS_COMPUTE_POLICY;
    r.share_ppm[0] = 300000;
    r.limit_ppm[0] = 500000;
    r.priority[0] = KAIROS_PRIO_BATCH;
    r.target_ppm[0] = 412345;
    r.window_ppm[0] = 250000;
    r.minute_ppm[0] = 200000;
    r.period_us[0] = 100000;
    r.duty_us[0] = 29280;
    r.pauses[0] = 57;
    struct ps_compute c;
    assert_true(ps_compute_get(&r, 0, &c));
    assert_false(c.measured);
    assert_true(c.share == 0.3 && c.limit == 0.5 && c.target == 0.412345);
    assert_string_equal(c.priority, "batch");
    assert_int_equal(c.pauses, 57);
    char buf[32];
    assert_string_equal(ps_cell_pct(c.window, c.measured, buf, sizeof buf), "-");
    r.compute_flags[0] |= KAIROS_PS_COMPUTE_MEASURED;
    assert_true(ps_compute_get(&r, 0, &c));
    assert_true(c.measured);
    assert_string_equal(ps_cell_pct(c.window, c.measured, buf, sizeof buf), "25.0%");
    assert_string_equal(ps_cell_pct(c.target, true, buf, sizeof buf), "41.2%");
    assert_string_equal(ps_cell_limit(c.limit, buf, sizeof buf), "50.0%");
    assert_string_equal(ps_cell_limit(0, buf, sizeof buf), "none");
    assert_string_equal(ps_cell_window(&c, buf, sizeof buf), "29.3/100ms");
    c.period_us = 0;
    assert_string_equal(ps_cell_window(&c, buf, sizeof buf), "-");
    assert_string_equal(ps_prio_name(KAIROS_PRIO_LATENCY), "latency");
    assert_string_equal(ps_prio_name(7), "unknown");
}

static void test_memory_cell(void **state)
{
    (void)state;
    struct kairos_ps_reply r;
    memset(&r, 0, sizeof r);
    r.held[1] = 3ull << 30;
    r.quota[1] = 8ull << 30;
    char buf[64];
    assert_string_equal(ps_cell_memory(&r, 1, buf, sizeof buf), "3.00 GiB/8.00 GiB");
}

static void test_any_compute(void **state)
{
    (void)state;
    struct kairos_ps_reply list[2];
    memset(list, 0, sizeof list);
    struct ps_snapshot s = {.list = list, .n = 2, .n_gpus = 2};
    assert_false(ps_any_compute(&s));
    list[1].compute_flags[1] = KAIROS_PS_COMPUTE_POLICY;
    assert_true(ps_any_compute(&s));
    s.n_gpus = 1;
    assert_false(ps_any_compute(&s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compute_only_with_a_policy),
        cmocka_unit_test(test_fractions_and_valid_bits),
        cmocka_unit_test(test_memory_cell),
        cmocka_unit_test(test_any_compute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
