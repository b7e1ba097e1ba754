/* test_trace.c - trace mode of the real libkairos.so above libkairos_fakedrv.so.
 *
 * Runs fakeapp with LD_PRELOAD="libkairos.so libkairos_fakedrv.so" and
 * KAIROS_TRACE_FD pointing at a file, then parses every line back with the
 * core's trace_parse_line and checks the counts against what fakeapp says it
 * did: opens, ioctls (XFER ones marked x=1), mmaps, closes; p= on every event
 * line and rq= on every ioctl line.
 * argv: libkairos.so libkairos_fakedrv.so fakeapp
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/trace_record.h"

static char **paths;

struct app_counts {
    int opens, mmaps, threads, allocs;
    unsigned long ioctls;
};

/* Runs fakeapp traced; returns its stdout in out. */
static int run_traced(const char *trace_path, const char *app_args, char *out, size_t cap)
{
    int trace_fd = open(trace_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int pipefd[2];
    if (trace_fd < 0 || pipe(pipefd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char preload[8192], fdtext[16];
#ifdef KAIROS_PRELOAD_FIRST
        snprintf(preload, sizeof preload, "%s %s %s", KAIROS_PRELOAD_FIRST, paths[1], paths[2]);
#else
        snprintf(preload, sizeof preload, "%s %s", paths[1], paths[2]);
#endif
        snprintf(fdtext, sizeof fdtext, "%d", trace_fd);
        setenv("LD_PRELOAD", preload, 1);
        setenv("KAIROS_TRACE_FD", fdtext, 1);
        dup2(pipefd[1], 1);
        close(pipefd[0]);
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "exec '%s' %s", paths[3], app_args);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    close(trace_fd);
    size_t used = 0;
    ssize_t n;
    while (used + 1 < cap && (n = read(pipefd[0], out + used, cap - 1 - used)) > 0)
        used += (size_t)n;
    out[used] = '\0';
    close(pipefd[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void parse_app(const char *out, struct app_counts *c)
{
    const char *line = strstr(out, "fakeapp:");
    assert_non_null(line);
    assert_int_equal(sscanf(line, "fakeapp: opens=%d ioctls=%lu mmaps=%d threads=%d allocs=%d",
                            &c->opens, &c->ioctls, &c->mmaps, &c->threads, &c->allocs),
                     5);
}

static void check_trace(const char *trace_path, const struct app_counts *app, bool freed)
{
    FILE *f = fopen(trace_path, "r");
    assert_non_null(f);
    uint8_t *buf = malloc(3 * TRACE_MAX_BYTES);
    assert_non_null(buf);
    char *line = NULL;
    size_t cap = 0;
    int starts = 0, opens = 0, closes = 0, mmaps = 0, munmaps = 0, xfers = 0, lines = 0;
    unsigned long ioctls = 0;
    int pid = 0;
    while (getline(&line, &cap, f) > 0) {
        struct trace_rec rec;
        char err[160];
        lines++;
        if (trace_parse_line(line, &rec, buf, 3 * TRACE_MAX_BYTES, err, sizeof err) != 0) {
            print_error("unparsable line %d: %s (%s)\n", lines, line, err);
            fail();
        }
        if (rec.kind != TREC_START && rec.kind != TREC_SKIP)
            assert_non_null(strstr(line, " p="));
        switch (rec.kind) {
        case TREC_START:
            starts++;
            pid = rec.pid;
            break;
        case TREC_OPEN:
            opens++;
            assert_int_equal(rec.pid, pid);
            break;
        case TREC_CLOSE:
            closes++;
            break;
        case TREC_IOCTL:
            ioctls++;
            assert_non_null(strstr(line, " rq="));
            assert_int_equal(rec.ret, 0);
            assert_true(rec.after_len > 0);
            xfers += rec.xfer;
            break;
        case TREC_MMAP:
            mmaps++;
            break;
        case TREC_MUNMAP:
            munmaps++;
            break;
        default:
            break;
        }
    }
    free(line);
    free(buf);
    fclose(f);
    assert_int_equal(starts, 1);
    assert_int_equal(opens, app->opens);
    assert_int_equal(ioctls, app->ioctls);
    assert_int_equal(mmaps, app->mmaps);
    /* fakeapp: one channel through XFER, and every other allocation of each thread. */
    assert_true(xfers >= 1 + app->threads);
    assert_int_equal(closes, freed ? app->opens : 0);
    assert_int_equal(munmaps, freed ? 1 : 0);
}

static void test_trace_fakeapp(void **state)
{
    (void)state;
    char trace_path[] = "/tmp/kairos-shim-trace-XXXXXX";
    int tmp = mkstemp(trace_path);
    assert_true(tmp >= 0);
    close(tmp);
    char out[4096];
    struct app_counts app;

    assert_int_equal(run_traced(trace_path, "-t 4 -n 10", out, sizeof out), 0);
    parse_app(out, &app);
    assert_int_equal(app.opens, 3);
    check_trace(trace_path, &app, true);

    /* Exit without freeing or closing: no X or U lines, everything else the same. */
    assert_int_equal(run_traced(trace_path, "-t 2 -n 5 -k", out, sizeof out), 0);
    parse_app(out, &app);
    check_trace(trace_path, &app, false);
    unlink(trace_path);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s libkairos.so libkairos_fakedrv.so fakeapp\n", argv[0]);
        return 2;
    }
    paths = argv;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_fakeapp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
