/* test_trace_record.c - the recording format: what the shim writes parses back to
 * the same record, and bad lines are refused with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/trace_record.h"

static uint8_t buf[3 * TRACE_MAX_BYTES];

static void test_ioctl_round_trip(void **state)
{
    (void)state;
    uint8_t before[48], after[48], params[128];
    for (size_t i = 0; i < sizeof before; i++) {
        before[i] = (uint8_t)i;
        after[i] = (uint8_t)(0xff - i);
    }
    memset(params, 0xab, sizeof params);
    struct trace_rec rec = {.kind = TREC_IOCTL, .t_us = 123456, .dt_us = 7.5, .tid = 42,
                            .node = RM_NODE_CTL, .fd = 9, .request = 0xC030462B, .xfer = true,
                            .before = before, .before_len = sizeof before, .after = after,
                            .after_len = sizeof after, .params = params,
                            .params_len = sizeof params};
    char line[TRACE_MAX_LINE];
    size_t n = trace_format_ioctl(line, sizeof line, 77, &rec);
    assert_true(n > 0);
    assert_int_equal(line[n - 1], '\n');
    struct trace_rec back;
    char err[128];
    assert_int_equal(trace_parse_line(line, &back, buf, sizeof buf, err, sizeof err), 0);
    assert_int_equal(back.kind, TREC_IOCTL);
    assert_int_equal(back.pid, 77);
    assert_int_equal(back.fd, 9);
    assert_int_equal(back.tid, 42);
    assert_int_equal(back.request, 0xC030462B);
    assert_true(back.xfer);
    assert_int_equal(back.before_len, 48);
    assert_memory_equal(back.before, before, 48);
    assert_memory_equal(back.after, after, 48);
    assert_int_equal(back.params_len, 128);
    assert_memory_equal(back.params, params, 128);
}

static void test_other_lines_round_trip(void **state)
{
    (void)state;
    char line[512];
    struct trace_rec back;
    char err[128];
    trace_format_open(line, sizeof line, 5, 12, "/dev/nvidia0");
    assert_int_equal(trace_parse_line(line, &back, buf, sizeof buf, err, sizeof err), 0);
    assert_int_equal(back.kind, TREC_OPEN);
    assert_string_equal(back.path, "/dev/nvidia0");
    assert_int_equal(back.pid, 5);
    trace_format_dup(line, sizeof line, 5, 12, 30);
    assert_int_equal(trace_parse_line(line, &back, buf, sizeof buf, err, sizeof err), 0);
    assert_int_equal(back.kind, TREC_DUP);
    assert_int_equal(back.new_fd, 30);
    struct trace_rec m = {.node = RM_NODE_DEV, .dev_minor = 0, .fd = 16, .len = 0x10000,
                          .prot = 2, .flags = 1, .addr = 0x7f12c9e90000};
    trace_format_mmap(line, sizeof line, 5, &m);
    assert_int_equal(trace_parse_line(line, &back, buf, sizeof buf, err, sizeof err), 0);
    assert_int_equal(back.kind, TREC_MMAP);
    assert_int_equal(back.addr, 0x7f12c9e90000);
    assert_int_equal(back.node, RM_NODE_DEV);
    trace_format_munmap(line, sizeof line, 5, 0x7000, 0x1000);
    assert_int_equal(trace_parse_line(line, &back, buf, sizeof buf, err, sizeof err), 0);
    assert_int_equal(back.kind, TREC_MUNMAP);
    assert_int_equal(back.len, 0x1000);
}

/* The fixture's own line shapes (no p=, no rq=, UVM request from nr and sz). */
static void test_fixture_lines(void **state)
{
    (void)state;
    struct trace_rec r;
    char err[128];
    assert_int_equal(trace_parse_line("I t=48719965 tid=556 u fd=10 nr=0x1 sz=12288 r=0 e=0 "
                                      "dt=116.3 B= A=",
                                      &r, buf, sizeof buf, err, sizeof err),
                     0);
    assert_int_equal(r.request, 0x30000001);
    assert_int_equal(r.node, RM_NODE_UVM);
    assert_int_equal(r.before_len, 0);
    assert_int_equal(trace_parse_line("M fd=16 0 len=0x10000 prot=2 flags=0x1 off=0x0 -> "
                                      "0x7f12c9e90000",
                                      &r, buf, sizeof buf, err, sizeof err),
                     0);
    assert_int_equal(r.dev_minor, 0);
    assert_int_equal(trace_parse_line("C counts u:01=1 faults=0", &r, buf, sizeof buf, err,
                                      sizeof err),
                     0);
    assert_int_equal(r.kind, TREC_SKIP);
}

static void expect_refused(const char *line, const char *reason_part)
{
    struct trace_rec r;
    char err[160] = "";
    assert_int_equal(trace_parse_line(line, &r, buf, sizeof buf, err, sizeof err), -1);
    if (!strstr(err, reason_part))
        fail_msg("'%s': expected a reason with '%s', got '%s'", line, reason_part, err);
}

static void test_bad_lines_are_refused_with_a_reason(void **state)
{
    (void)state;
    expect_refused("I t=1 tid=1 c fd=9 nr=0x2b sz=48 r=0 e=0 dt=1 B=00a", "hex");
    expect_refused("I t=1 tid=1 c fd=9 nr=0x2b sz=48 r=0 e=0 dt=1 B=zz", "hex");
    expect_refused("I t=1 tid=1 c fd=9 nr=0x2b r=0", "sz");
    expect_refused("I t=1 tid=1 fd=9 nr=0x2b sz=48 r=0", "node");
    expect_refused("I t=1 tid=1 c fd=9 nr=0x1ff sz=48 r=0", "nr");
    expect_refused("I t=1 tid=1 c fd=-4 nr=0x2b sz=48 r=0", "fd");
    expect_refused("M fd=16 0 len=0x10000 prot=2", "->");
    expect_refused("Q what", "unknown line kind");
    expect_refused("O fd=3", "path");
    expect_refused("X", "fd");
}

static void test_hex_longer_than_the_buffer_is_refused(void **state)
{
    (void)state;
    size_t n = 2 * TRACE_MAX_BYTES + 2;
    char *line = malloc(n + 64);
    strcpy(line, "I t=1 tid=1 c fd=9 nr=0x2b sz=48 r=0 e=0 dt=1 B=");
    size_t pos = strlen(line);
    memset(line + pos, 'a', n);
    line[pos + n] = 0;
    expect_refused(line, "hex");
    free(line);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ioctl_round_trip),
        cmocka_unit_test(test_other_lines_round_trip),
        cmocka_unit_test(test_fixture_lines),
        cmocka_unit_test(test_bad_lines_are_refused_with_a_reason),
        cmocka_unit_test(test_hex_longer_than_the_buffer_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
