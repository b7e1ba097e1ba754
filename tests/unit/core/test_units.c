/* test_units.c - sizes and percentages as operators write them, and the refusals of
 * bad ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/units.h"

static uint64_t parse(const char *text, uint64_t of)
{
    uint64_t v = 0;
    char err[128];
    if (units_parse_size(text, of, &v, err, sizeof err))
        fail_msg("'%s' refused: %s", text, err);
    return v;
}

static void refused(const char *text, uint64_t of, const char *reason_part)
{
    uint64_t v;
    char err[160] = "";
    assert_int_not_equal(units_parse_size(text, of, &v, err, sizeof err), 0);
    if (!strstr(err, reason_part))
        fail_msg("'%s': expected '%s' in '%s'", text, reason_part, err);
}

static void test_sizes(void **state)
{
    (void)state;
    assert_int_equal(parse("8G", 0), 8ull << 30);
    assert_int_equal(parse("8GiB", 0), 8ull << 30);
    assert_int_equal(parse("512MiB", 0), 512ull << 20);
    assert_int_equal(parse("512m", 0), 512ull << 20);
    assert_int_equal(parse("1.5G", 0), 3ull << 29);
    assert_int_equal(parse("4096", 0), 4096);
    assert_int_equal(parse("80%", 100ull << 30), 80ull << 30);
    assert_int_equal(parse("2T", 0), 2ull << 40);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("", 0, "empty");
    refused("abc", 0, "not a size");
    refused("8GB", 0, "binary");
    refused("8Q", 0, "unknown unit");
    refused("80%", 0, "known total");
    refused("120%", 1000, "at most 100");
    refused("-1G", 0, "not a size");
    refused("1.5", 0, "whole number");
    refused("99999999999T", 0, "too large");
}

/* On a command line a bare number is a slip (--mem 8 would be 8 bytes): refused. */
static void test_unit_required(void **state)
{
    (void)state;
    uint64_t v = 0;
    char err[160] = "";
    assert_true(units_size_is_bare("8"));
    assert_true(units_size_is_bare("4096"));
    assert_true(units_size_is_bare("1.5"));
    assert_false(units_size_is_bare("8G"));
    assert_false(units_size_is_bare("4096B"));
    assert_false(units_size_is_bare("80%"));
    assert_false(units_size_is_bare(""));
    assert_false(units_size_is_bare("abc"));
    assert_int_not_equal(units_parse_size_with_unit("8", 0, &v, err, sizeof err), 0);
    assert_non_null(strstr(err, "a size needs a unit"));
    assert_int_equal(units_parse_size_with_unit("8G", 0, &v, err, sizeof err), 0);
    assert_int_equal(v, 8ull << 30);
    assert_int_equal(units_parse_size_with_unit("4096B", 0, &v, err, sizeof err), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(units_parse_size_with_unit("50%", 1000, &v, err, sizeof err), 0);
    assert_int_equal(v, 500);
    assert_int_not_equal(units_parse_size_with_unit("8GB", 0, &v, err, sizeof err), 0);
    assert_non_null(strstr(err, "binary"));
}

static void percent_refused(const char *text, const char *reason_part)
{
    double f;
    char err[160] = "";
    assert_int_not_equal(units_parse_percent(text, &f, err, sizeof err), 0);
    if (!strstr(err, reason_part))
        fail_msg("'%s': expected '%s' in '%s'", text, reason_part, err);
}

static void test_percent(void **state)
{
    (void)state;
    double f = -1;
    char err[160];
    assert_int_equal(units_parse_percent("40%", &f, err, sizeof err), 0);
    assert_float_equal(f, 0.4, 1e-12);
    assert_int_equal(units_parse_percent("12.5%", &f, err, sizeof err), 0);
    assert_float_equal(f, 0.125, 1e-12);
    assert_int_equal(units_parse_percent("0%", &f, err, sizeof err), 0);
    assert_float_equal(f, 0, 0);
    assert_int_equal(units_parse_percent("100%", &f, err, sizeof err), 0);
    assert_float_equal(f, 1, 0);
    percent_refused("", "empty");
    percent_refused("40", "ends with %");
    percent_refused("40%%", "ends with %");
    percent_refused("abc%", "not a percentage");
    percent_refused("100.5%", "from 0% to 100%");
    percent_refused("-1%", "from 0% to 100%");
    percent_refused("inf%", "not a percentage");
}

static void test_format(void **state)
{
    (void)state;
    char buf[32];
    assert_string_equal(units_format_size(8ull << 30, buf, sizeof buf), "8.00 GiB");
    assert_string_equal(units_format_size(512ull << 20, buf, sizeof buf), "512.0 MiB");
    assert_string_equal(units_format_size(100, buf, sizeof buf), "100 B");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_unit_required),
        cmocka_unit_test(test_percent),
        cmocka_unit_test(test_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
