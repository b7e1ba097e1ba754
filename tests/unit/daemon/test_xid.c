/* test_xid.c - the driver's Xid lines read as the driver writes them (a known and an
 * unknown process, a /dev/kmsg record's text), and every malformed or foreign line
 * refused: kairosd's attribution of faults rests on nothing else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "daemon/gpu/xid.h"

static void test_a_known_process(void **state)
{
    (void)state;
    struct xid_report x;
    assert_true(xid_parse("NVRM: Xid (PCI:0000:65:00): 13, pid=4242, name=python3, Graphics "
                          "SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
                          &x));
    assert_int_equal(x.pci.domain, 0);
    assert_int_equal(x.pci.bus, 0x65);
    assert_int_equal(x.pci.device, 0);
    assert_int_equal(x.xid, 13);
    assert_int_equal(x.pid, 4242);
    assert_string_equal(x.name, "python3");
    assert_string_equal(x.detail, "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of "
                                  "Range Address");
}

static void test_an_unknown_process(void **state)
{
    (void)state;
    struct xid_report x;
    assert_true(xid_parse("NVRM: Xid (PCI:0001:cb:1f): 43, pid='<unknown>', name=<unknown>, "
                          "Ch 00000010", &x));
    assert_int_equal(x.pci.domain, 1);
    assert_int_equal(x.pci.bus, 0xcb);
    assert_int_equal(x.pci.device, 0x1f);
    assert_int_equal(x.xid, 43);
    assert_int_equal(x.pid, 0);
    assert_string_equal(x.name, "");
    assert_string_equal(x.detail, "Ch 00000010");
}

static void test_a_line_with_a_prefix_and_no_detail(void **state)
{
    (void)state;
    struct xid_report x;
    assert_true(xid_parse("[ 1234.5678] NVRM: Xid (PCI:0000:3b:00): 31, pid=77, name=a.out\n",
                          &x));
    assert_int_equal(x.xid, 31);
    assert_int_equal(x.pid, 77);
    assert_string_equal(x.name, "a.out");
    assert_string_equal(x.detail, "");
}

/* A shape of another driver: the Xid and its GPU stand, no process is blamed. */
static void test_another_shape_blames_no_process(void **state)
{
    (void)state;
    struct xid_report x;
    assert_true(xid_parse("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", &x));
    assert_int_equal(x.xid, 79);
    assert_int_equal(x.pid, 0);
    assert_string_equal(x.name, "");
}

static void test_malformed_lines_are_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "NVRM: GPU at PCI:0000:65:00: GPU-1234",
        "NVRM: Xid (PCI:0000:65:00) 13, pid=1, name=a, x",         /* no colon */
        "NVRM: Xid (PCI:0000:65): 13, pid=1, name=a, x",           /* no device */
        "NVRM: Xid (PCI:0000:65:00): , pid=1, name=a, x",          /* no Xid */
        "NVRM: Xid (PCI:0000:65:00): 123456, pid=1, name=a, x",    /* Xid too long */
        "NVRM: Xid (PCI:000000000:65:00): 13, pid=1, name=a, x",   /* domain too long */
        "NVRM: Xid (PCI:0000:165:00): 13, pid=1, name=a, x",       /* bus too long */
        "NVRM: Xid (PCI:zzzz:65:00): 13, pid=1, name=a, x",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct xid_report x;
        assert_false(xid_parse(bad[i], &x));
    }
}

/* A pid that is not a plain number (too long, signed, zero) blames nobody. */
static void test_a_pid_that_is_no_pid_blames_nobody(void **state)
{
    (void)state;
    static const char *const odd[] = {
        "NVRM: Xid (PCI:0000:65:00): 13, pid=99999999999, name=a, x",
        "NVRM: Xid (PCI:0000:65:00): 13, pid=-1, name=a, x",
        "NVRM: Xid (PCI:0000:65:00): 13, pid=0, name=a, x",
        "NVRM: Xid (PCI:0000:65:00): 13, pid=12x, name=a, x",
    };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        struct xid_report x;
        assert_true(xid_parse(odd[i], &x));
        assert_int_equal(x.pid, 0);
    }
}

static void test_long_fields_are_cut(void **state)
{
    (void)state;
    char line[1200], name[300];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = 0;
    snprintf(line, sizeof line, "NVRM: Xid (PCI:0000:65:00): 13, pid=5, name=%s, %s", name,
             name);
    struct xid_report x;
    assert_true(xid_parse(line, &x));
    assert_int_equal(strlen(x.name), XID_NAME_MAX - 1);
    assert_int_equal(strlen(x.detail), XID_DETAIL_MAX - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_known_process),
        cmocka_unit_test(test_an_unknown_process),
        cmocka_unit_test(test_a_line_with_a_prefix_and_no_detail),
        cmocka_unit_test(test_another_shape_blames_no_process),
        cmocka_unit_test(test_malformed_lines_are_refused),
        cmocka_unit_test(test_a_pid_that_is_no_pid_blames_nobody),
        cmocka_unit_test(test_long_fields_are_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
