/* test_spank_job.c - the Slurm plugin's job logic without Slurm: options checked as
 * kairos checks them (bad sizes, percentages and priorities refused with what is
 * expected; share without memory refused), plugstack arguments, the step's tenant
 * names, the exact kairos commands, and the runner: exit status and output, a
 * command that does not exist, and one that hangs killed at the time limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "integrations/slurm/spank_job.h"

static void assert_argv(const char *const *argv, const char *const *want)
{
    size_t i = 0;
    for (; want[i]; i++) {
        assert_non_null(argv[i]);
        assert_string_equal(argv[i], want[i]);
    }
    assert_null(argv[i]);
}

static void test_options_checked(void **state)
{
    (void)state;
    struct spank_job j;
    char err[256];
    spank_job_init(&j);
    assert_false(spank_job_wanted(&j));
    assert_int_equal(spank_job_option(&j, "gpu-mem", "8GB", err, sizeof err), -22);
    assert_non_null(strstr(err, "--gpu-mem=8GB"));
    assert_int_equal(spank_job_option(&j, "gpu-mem", "0", err, sizeof err), -22);
    assert_int_equal(spank_job_option(&j, "gpu-mem", "64", err, sizeof err), -22);
    assert_non_null(strstr(err, "a size needs a unit")); /* 64 would be 64 bytes */
    assert_int_equal(spank_job_option(&j, "gpu-mem", "", err, sizeof err), -22);
    assert_int_equal(spank_job_option(&j, "gpu-share", "30", err, sizeof err), -22);
    assert_non_null(strstr(err, "--gpu-share=30%"));
    assert_int_equal(spank_job_option(&j, "gpu-share", "130%", err, sizeof err), -22);
    assert_int_equal(spank_job_option(&j, "gpu-priority", "urgent", err, sizeof err), -22);
    assert_non_null(strstr(err, "latency, normal or batch"));
    assert_int_equal(spank_job_option(&j, "gpu-share", "30%", err, sizeof err), 0);
    assert_true(spank_job_wanted(&j));
    assert_int_equal(spank_job_check(&j, err, sizeof err), -22); /* share without memory */
    assert_non_null(strstr(err, "--gpu-mem=SIZE"));
    assert_int_equal(spank_job_option(&j, "gpu-mem", "64M", err, sizeof err), 0);
    assert_int_equal(spank_job_option(&j, "gpu-limit", "none", err, sizeof err), 0);
    assert_int_equal(spank_job_option(&j, "gpu-priority", "latency", err, sizeof err), 0);
    assert_int_equal(spank_job_check(&j, err, sizeof err), 0);
    assert_int_equal(spank_job_option(&j, "gpu-mem", "50%", err, sizeof err), 0);
}

static void test_plugstack_arguments(void **state)
{
    (void)state;
    struct spank_job j;
    char err[256];
    spank_job_init(&j);
    assert_string_equal(j.kairos, "/usr/bin/kairos");
    assert_int_equal(spank_job_arg(&j, "kairos=/opt/bin/kairos", err, sizeof err), 0);
    assert_int_equal(spank_job_arg(&j, "socket=/run/k/s.sock", err, sizeof err), 0);
    assert_int_equal(spank_job_arg(&j, "timeout=3", err, sizeof err), 0);
    assert_string_equal(j.kairos, "/opt/bin/kairos");
    assert_int_equal(j.timeout_s, 3);
    assert_int_equal(spank_job_arg(&j, "kairos=relative/kairos", err, sizeof err), -22);
    assert_int_equal(spank_job_arg(&j, "timeout=0", err, sizeof err), -22);
    assert_int_equal(spank_job_arg(&j, "colour=blue", err, sizeof err), -22);
    assert_non_null(strstr(err, "'colour=blue'"));
}

static void test_tenant_names_and_commands(void **state)
{
    (void)state;
    char name[SPANK_JOB_NAME_MAX], pid[24], err[256];
    spank_job_tenant(42, 0, name, sizeof name);
    assert_string_equal(name, "job-42.0");
    spank_job_tenant(42, 0xfffffffbu, name, sizeof name);
    assert_string_equal(name, "job-42.batch");
    spank_job_tenant(7, 0xfffffffcu, name, sizeof name);
    assert_string_equal(name, "job-7.extern");
    struct spank_job j;
    spank_job_init(&j);
    assert_int_equal(spank_job_option(&j, "gpu-mem", "64M", err, sizeof err), 0);
    assert_int_equal(spank_job_option(&j, "gpu-share", "30%", err, sizeof err), 0);
    const char *argv[SPANK_JOB_ARGV_MAX];
    assert_int_equal(spank_job_argv_set(&j, "job-7.0", "0,1", argv, SPANK_JOB_ARGV_MAX), 0);
    assert_argv(argv, (const char *[]){"/usr/bin/kairos", "tenant", "set", "job-7.0", "--mem",
                                       "64M", "--gpus", "0,1", "--share", "30%", NULL});
    j.socket = "/run/k.sock";
    assert_int_equal(spank_job_argv_admit(&j, "job-7.0", 4242, pid, sizeof pid, argv,
                                          SPANK_JOB_ARGV_MAX), 0);
    assert_argv(argv, (const char *[]){"/usr/bin/kairos", "tenant", "admit", "job-7.0",
                                       "4242", NULL});
    assert_int_equal(spank_job_argv_del(&j, "job-7.0", argv, SPANK_JOB_ARGV_MAX), 0);
    assert_argv(argv, (const char *[]){"/usr/bin/kairos", "tenant", "del", "job-7.0", NULL});
    assert_int_equal(spank_job_argv_set(&j, "job-7.0", NULL, argv, 6), -28); /* too small */
}

static void test_runner(void **state)
{
    (void)state;
    char out[64];
    struct spank_job j;
    spank_job_init(&j);
    j.timeout_s = 5;
    j.socket = "/run/test/k.sock";
    const char *ok[] = {"/bin/sh", "-c", "echo $KAIROS_SOCKET; echo and that >&2; exit 3", NULL};
    assert_int_equal(spank_job_run(&j, ok, out, sizeof out), 3);
    assert_string_equal(out, "/run/test/k.sock\nand that\n");
    const char *missing[] = {"/nonexistent/kairos", "tenant", NULL};
    assert_int_equal(spank_job_run(&j, missing, out, sizeof out), 127);
    assert_non_null(strstr(out, "cannot run /nonexistent/kairos"));
    /* hangs, and keeps its output open in a child: killed at the limit all the same */
    const char *hang[] = {"/bin/sh", "-c", "sleep 30 & exec sleep 30", NULL};
    time_t t0 = time(NULL);
    j.timeout_s = 1;
    assert_int_equal(spank_job_run(&j, hang, out, sizeof out), 124);
    assert_true(time(NULL) - t0 <= 3);
    const char *chatty[] = {"/bin/sh", "-c", "yes | head -c 100000", NULL};
    j.timeout_s = 5;
    assert_int_equal(spank_job_run(&j, chatty, out, sizeof out), 0);
    assert_int_equal(strlen(out), sizeof out - 1); /* cut, terminated */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_checked),
        cmocka_unit_test(test_plugstack_arguments),
        cmocka_unit_test(test_tenant_names_and_commands),
        cmocka_unit_test(test_runner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
