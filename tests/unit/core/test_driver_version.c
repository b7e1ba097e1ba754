/* test_driver_version.c - reading the driver's version from each place it is written,
 * and the supported-branch rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/driver_version.h"

static struct driver_version parsed(const char *text)
{
    struct driver_version v;
    assert_int_equal(driver_version_parse(text, strlen(text), &v), 0);
    return v;
}

static void test_the_proc_file_line(void **state)
{
    (void)state;
    struct driver_version v = parsed(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  2 00:00:00 UTC "
        "2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n");
    assert_int_equal(v.major, 580);
    assert_int_equal(v.minor, 159);
    assert_int_equal(v.patch, 4);
    assert_string_equal(v.text, "580.159.04");
    assert_true(driver_version_supported(&v));
    v = parsed("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  590.44.01  Release");
    assert_string_equal(v.text, "590.44.01");
    assert_false(driver_version_supported(&v));
}

static void test_the_handshake_buffer(void **state)
{
    (void)state;
    char buf[64] = "580.95.05"; /* NUL-padded, as the driver's 64 bytes are */
    struct driver_version v;
    assert_int_equal(driver_version_parse(buf, sizeof buf, &v), 0);
    assert_string_equal(v.text, "580.95.05");
    assert_true(driver_version_supported(&v));
    v = parsed("575.64");
    assert_int_equal(v.major, 575);
    assert_int_equal(v.patch, 0);
    assert_false(driver_version_supported(&v));
}

static void test_what_is_no_version(void **state)
{
    (void)state;
    static const char *bad[] = {"", "   ", "x86_64", "580", "580.", ".159", "580..1",
                                "580.1.2.3", "1234567890.1", "580.159.04x", "v580.1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct driver_version v = {.major = 7};
        assert_int_equal(driver_version_parse(bad[i], strlen(bad[i]), &v), -1);
        assert_int_equal(v.major, 0);
        assert_false(driver_version_supported(&v));
    }
    /* not terminated: only len bytes are read */
    const char cut[] = {'5', '8', '0', '.', '1', '9'};
    struct driver_version v;
    assert_int_equal(driver_version_parse(cut, 5, &v), 0);
    assert_string_equal(v.text, "580.1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_proc_file_line),
        cmocka_unit_test(test_the_handshake_buffer),
        cmocka_unit_test(test_what_is_no_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
