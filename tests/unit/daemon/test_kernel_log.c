/* test_kernel_log.c - the kernel log as kairosd reads it: a /dev/kmsg record gives
 * its text only when the kernel wrote it (a line a program wrote to /dev/kmsg, facility
 * user, is no driver report); a FIFO of plain lines gives each complete line once, a
 * line split across writes whole, an overlong one cut, and never reads as ended. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/base/kernel_log.h"

static void test_records_of_the_kernel_only(void **state)
{
    (void)state;
    char kernel[] = "4,1234,5678901,-;NVRM: Xid (PCI:0000:65:00): 13, pid=1, name=a, x\n"
                    " SUBSYSTEM=pci\n DEVICE=+pci:0000:65:00.0\n";
    const char *t = kernel_log_record_text(kernel);
    assert_non_null(t);
    assert_string_equal(t, "NVRM: Xid (PCI:0000:65:00): 13, pid=1, name=a, x");
    /* facility 1 (user), priority 4: what `echo ... > /dev/kmsg` makes */
    char user[] = "12,1235,5678902,-;NVRM: Xid (PCI:0000:65:00): 13, pid=1, name=a, x\n";
    assert_null(kernel_log_record_text(user));
    char none[] = "NVRM: Xid (PCI:0000:65:00): 13, pid=1, name=a, x";
    assert_null(kernel_log_record_text(none));
    char no_prio[] = ",1,2,-;text";
    assert_null(kernel_log_record_text(no_prio));
}

struct seen {
    char lines[8][KERNEL_LOG_LINE_MAX];
    int n;
};

static void collect(void *ctx, const char *text)
{
    struct seen *s = ctx;
    if (s->n < 8)
        snprintf(s->lines[s->n], sizeof s->lines[0], "%s", text);
    s->n++;
}

static void test_a_fifo_of_lines(void **state)
{
    (void)state;
    char dir[] = "/tmp/kairos-klog-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    struct kernel_log k;
    assert_int_equal(kernel_log_open(&k, path), 0);
    assert_false(k.kmsg);
    int w = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(w >= 0);
    static struct seen s;
    assert_int_equal(write(w, "one\ntw", 6), 6);
    assert_int_equal(kernel_log_drain(&k, collect, &s), 0);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.lines[0], "one");
    assert_int_equal(write(w, "o\n", 2), 2);
    char *big = malloc(3 * KERNEL_LOG_LINE_MAX);
    memset(big, 'x', 3 * KERNEL_LOG_LINE_MAX);
    big[3 * KERNEL_LOG_LINE_MAX - 1] = '\n';
    assert_int_equal(write(w, big, 3 * KERNEL_LOG_LINE_MAX), 3 * KERNEL_LOG_LINE_MAX);
    assert_int_equal(write(w, "three\n", 6), 6);
    free(big);
    close(w); /* the writer goes: the FIFO does not end (kairosd's own end writes too) */
    assert_int_equal(kernel_log_drain(&k, collect, &s), 0);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.lines[1], "two");
    assert_int_equal(strlen(s.lines[2]), KERNEL_LOG_LINE_MAX - 1); /* cut once */
    assert_string_equal(s.lines[3], "three");
    kernel_log_close(&k);
    unlink(path);
    rmdir(dir);
}

static void test_a_missing_log(void **state)
{
    (void)state;
    struct kernel_log k;
    assert_int_equal(kernel_log_open(&k, "/nonexistent/kmsg"), -2 /* ENOENT */);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_of_the_kernel_only),
        cmocka_unit_test(test_a_fifo_of_lines),
        cmocka_unit_test(test_a_missing_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
