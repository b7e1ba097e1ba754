/* test_top_frame.c - one frame of kairos top as text: a block per GPU, each tenant
 * that has memory or a compute policy there, target before achieved, what held it
 * back (--wide), "-" for what is unknown or absent, and a GPU without tenants said
 * so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/top_frame.h"

static char *frame_with(const struct ps_snapshot *s, const char *list)
{
    char *buf = NULL, err[256];
    size_t len = 0;
    struct columns cols = {0};
    assert_int_equal(columns_parse(list, &cols, err, sizeof err), 0);
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(top_frame_write(f, s, &cols), 0);
    fclose(f);
    return buf;
}

static char *frame(const struct ps_snapshot *s)
{
    return frame_with(s, COLUMNS_TOP_WIDE);
}

static void two_tenants(struct kairos_ps_reply list[2])
{
    memset(list, 0, 2 * sizeof *list);
    strcpy(list[0].tenant, "capped");
    list[0].n_pids = 2;
    list[0].quota[0] = 8ull << 30;
    list[0].held[0] = 3ull << 30;
    list[0].compute_flags[0] =
        KAIROS_PS_COMPUTE_POLICY | KAIROS_PS_COMPUTE_MEASURED | KAIROS_PS_COMPUTE_HOLDS;
    list[0].hold[0] = KAIROS_HOLD_LIMIT;
    list[0].hold_period_ppm[0][KAIROS_HOLD_LIMIT] = 1000000;
    list[0].hold_time_ppm[0][KAIROS_HOLD_LIMIT] = 707200;
    list[0].share_ppm[0] = 300000;
    list[0].limit_ppm[0] = 300000;
    list[0].target_ppm[0] = 300000;
    list[0].window_ppm[0] = 291000;
    list[0].minute_ppm[0] = 298000;
    list[0].period_us[0] = 100000;
    list[0].duty_us[0] = 29280;
    list[0].pauses[0] = 57;
    strcpy(list[1].tenant, "jupyter");
    list[1].quota[0] = 1ull << 30;
    /* not measured yet: neither what it got nor what held it back is known */
    list[1].compute_flags[2] = KAIROS_PS_COMPUTE_POLICY | KAIROS_PS_COMPUTE_HOLDS;
    list[1].share_ppm[2] = 100000;
    list[1].priority[2] = KAIROS_PRIO_LATENCY;
}

static void test_frame_per_gpu(void **state)
{
    (void)state;
    struct kairos_ps_reply list[2];
    two_tenants(list);
    struct ps_snapshot s = {.list = list, .n = 2, .n_gpus = 3};
    char *text = frame(&s);
    const char *want =
        "kairosd: 3 GPUs, 2 tenants, 2 with a compute policy\n"
        "\n"
        "GPU 0\n"
        "  TENANT   TARGET   100MS    1MIN   SHARE   LIMIT  PRIO          WINDOW   PAUSES    HOLD  "
        "WHY    MEMORY HELD/QUOTA  PROCS\n"
        "  capped    30.0%   29.1%   29.8%   30.0%   30.0%  normal    29.3/100ms       57   70.7%  "
        "limit  3.00 GiB/8.00 GiB      2\n"
        "  jupyter       -       -       -       -       -  -                  -        -       -  "
        "-      0 B/1.00 GiB           0\n"
        "\n"
        "GPU 1\n"
        "  no tenant\n"
        "\n"
        "GPU 2\n"
        "  TENANT   TARGET   100MS    1MIN   SHARE   LIMIT  PRIO          WINDOW   PAUSES    HOLD  "
        "WHY    MEMORY HELD/QUOTA  PROCS\n"
        "  jupyter    0.0%       -       -   10.0%    none  latency            -        0       -  "
        "-      0 B/0 B                0\n";
    assert_string_equal(text, want);
    free(text);
}

/* The default columns fit 80 columns, target and achieved first. */
static void test_default_fits_80_columns(void **state)
{
    (void)state;
    struct kairos_ps_reply list[2];
    two_tenants(list);
    strcpy(list[1].tenant, "notebook-7"); /* 10 characters */
    struct ps_snapshot s = {.list = list, .n = 2, .n_gpus = 3};
    char *text = frame_with(&s, COLUMNS_TOP_DEFAULT);
    const char *want =
        "kairosd: 3 GPUs, 2 tenants, 2 with a compute policy\n"
        "\n"
        "GPU 0\n"
        "  TENANT      TARGET   100MS    1MIN   SHARE   LIMIT  MEMORY HELD/QUOTA  PROCS\n"
        "  capped       30.0%   29.1%   29.8%   30.0%   30.0%  3.00 GiB/8.00 GiB      2\n"
        "  notebook-7       -       -       -       -       -  0 B/1.00 GiB           0\n"
        "\n"
        "GPU 1\n"
        "  no tenant\n"
        "\n"
        "GPU 2\n"
        "  TENANT      TARGET   100MS    1MIN   SHARE   LIMIT  MEMORY HELD/QUOTA  PROCS\n"
        "  notebook-7    0.0%       -       -   10.0%    none  0 B/0 B                0\n";
    assert_string_equal(text, want);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        assert_true(strlen(line) <= 80);
    free(text);
}

static void test_no_tenants(void **state)
{
    (void)state;
    struct ps_snapshot s = {.list = NULL, .n = 0, .n_gpus = 1};
    char *text = frame(&s);
    assert_string_equal(text, "kairosd: 1 GPU, 0 tenants, 0 with a compute policy\n\nGPU 0\n"
                              "  no tenant\n");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_per_gpu),
        cmocka_unit_test(test_default_fits_80_columns),
        cmocka_unit_test(test_no_tenants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
