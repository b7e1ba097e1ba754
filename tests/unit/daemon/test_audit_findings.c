/* test_audit_findings.c - the audit's findings: due once, and only when lasted; one
 * no longer seen is forgotten (a reused pid is due again); what only a scan sees is
 * kept through a pass without a scan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon/observe/audit_findings.h"

static void test_due_once_and_only_when_lasted(void **state)
{
    (void)state;
    struct audit_findings f = {0};
    audit_findings_begin(&f);
    assert_false(audit_findings_due(&f, 42, 0, AUDIT_UNREGISTERED, 1000, 500));
    audit_findings_end(&f, true);
    audit_findings_begin(&f);
    assert_false(audit_findings_due(&f, 42, 0, AUDIT_UNREGISTERED, 1499, 500));
    audit_findings_end(&f, true);
    audit_findings_begin(&f);
    assert_true(audit_findings_due(&f, 42, 0, AUDIT_UNREGISTERED, 1500, 500));
    assert_false(audit_findings_due(&f, 42, 0, AUDIT_UNREGISTERED, 1500, 500));
    /* the same pid on another GPU, or of another kind, is another finding */
    assert_true(audit_findings_due(&f, 42, 1, AUDIT_UNREGISTERED, 1500, 0));
    assert_true(audit_findings_due(&f, 42, 0, AUDIT_MPS_SERVER, 1500, 0));
    audit_findings_end(&f, true);
    audit_findings_begin(&f);
    assert_false(audit_findings_due(&f, 42, 0, AUDIT_UNREGISTERED, 9000, 500)); /* stays */
    audit_findings_end(&f, true);
    assert_int_equal(f.n, 1); /* the others were not seen in that pass: forgotten */
    audit_findings_free(&f);
}

static void test_a_finding_gone_is_reported_again_when_it_comes_back(void **state)
{
    (void)state;
    struct audit_findings f = {0};
    audit_findings_begin(&f);
    assert_true(audit_findings_due(&f, 7, 0, AUDIT_UNREGISTERED, 100, 0));
    audit_findings_end(&f, true);
    audit_findings_begin(&f); /* pid 7 exited: not seen */
    audit_findings_end(&f, true);
    assert_int_equal(f.n, 0);
    audit_findings_begin(&f); /* pid 7 again, another process */
    assert_true(audit_findings_due(&f, 7, 0, AUDIT_UNREGISTERED, 300, 0));
    audit_findings_end(&f, true);
    audit_findings_free(&f);
}

static void test_what_only_a_scan_sees_waits_for_the_next_scan(void **state)
{
    (void)state;
    struct audit_findings f = {0};
    audit_findings_begin(&f);
    assert_true(audit_findings_due(&f, 9, 0, AUDIT_OPENER, 100, 0));
    assert_true(audit_findings_due(&f, 10, 0, AUDIT_UNREGISTERED, 100, 0));
    audit_findings_end(&f, true);
    audit_findings_begin(&f); /* a pass without a scan sees neither */
    audit_findings_end(&f, false);
    assert_int_equal(f.n, 1);
    audit_findings_begin(&f);
    assert_false(audit_findings_due(&f, 9, 0, AUDIT_OPENER, 200, 0)); /* reported already */
    audit_findings_end(&f, true);
    audit_findings_begin(&f); /* a scan that does not see it: gone */
    audit_findings_end(&f, true);
    assert_int_equal(f.n, 0);
    audit_findings_free(&f);
}

static void test_lasted_counts_from_first_sight(void **state)
{
    (void)state;
    struct audit_findings f = {0};
    struct audit_seen *s = audit_findings_get(&f, 0, 2, AUDIT_UNEXPLAINED, 5000);
    assert_non_null(s);
    assert_false(audit_findings_lasted(s, 5999, 1000));
    assert_true(audit_findings_lasted(s, 6000, 1000));
    assert_true(audit_findings_lasted(NULL, 0, 1000)); /* unknown: taken as lasted */
    assert_ptr_equal(audit_findings_get(&f, 0, 2, AUDIT_UNEXPLAINED, 9000), s);
    assert_int_equal(s->since_ms, 5000);
    audit_findings_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_due_once_and_only_when_lasted),
        cmocka_unit_test(test_a_finding_gone_is_reported_again_when_it_comes_back),
        cmocka_unit_test(test_what_only_a_scan_sees_waits_for_the_next_scan),
        cmocka_unit_test(test_lasted_counts_from_first_sight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
