/* test_columns.c - the columns of kairos ps and kairos top: -o names parsed (an
 * unknown one refused with the list), the default ps row of a tenant with many
 * processes cut to 80 columns with how many pids were left out, the wide row
 * uncut, the compute columns dropped, a tenant without a GPU, and the space columns
 * (domain, sms, faults) put before pids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/columns.h"

static char *row_text(const struct columns *c, const struct columns_row *row)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    columns_row(f, c, "", row);
    fclose(f);
    return buf;
}

static void many_pids(struct kairos_ps_reply *r)
{
    memset(r, 0, sizeof *r);
    strcpy(r->tenant, "training");
    r->n_pids = KAIROS_PS_MAX_PIDS + 5;
    for (uint32_t k = 0; k < KAIROS_PS_MAX_PIDS; k++)
        r->pids[k] = 100000 + k;
    r->quota[0] = 8ull << 30;
    r->held[0] = 3ull << 30;
    r->refusals[0] = 54;
}

static void test_unknown_column_refused(void **state)
{
    (void)state;
    struct columns c = {0};
    char err[512];
    assert_int_equal(columns_parse("tenant,bogus,gpu", &c, err, sizeof err), -22);
    assert_non_null(strstr(err, "unknown column 'bogus'"));
    assert_non_null(strstr(err, columns_known()));
    assert_int_equal(columns_parse("tenant,", &c, err, sizeof err), -22); /* empty name */
    assert_int_equal(columns_parse("pids,tenant", &c, err, sizeof err), 0);
    assert_int_equal(c.n, 2);
}

static void test_default_ps_row_cut_to_80(void **state)
{
    (void)state;
    struct kairos_ps_reply r;
    many_pids(&r);
    struct columns c = {.max_width = COLUMNS_WIDTH};
    char err[256];
    assert_int_equal(columns_parse(COLUMNS_PS_DEFAULT, &c, err, sizeof err), 0);
    struct ps_snapshot s = {.list = &r, .n = 1, .n_gpus = 1};
    columns_fit_names(&c, &s);
    char *text = row_text(&c, &(struct columns_row){.r = &r, .g = 0, .first = true});
    assert_true(strlen(text) <= COLUMNS_WIDTH + 1); /* and its '\n' */
    assert_non_null(strstr(text, "training  "));
    assert_non_null(strstr(text, "3.00 GiB/8.00 GiB"));
    assert_non_null(strstr(text, " 54 "));
    /* as many pids as fit, then how many are not shown (all are counted) */
    char *pids = strstr(text, "100000,");
    assert_non_null(pids);
    char *more = strstr(pids, ",+");
    assert_non_null(more);
    unsigned shown = 1, left = 0;
    for (char *p = pids; p < more; p++)
        shown += *p == ',';
    assert_int_equal(sscanf(more, ",+%u\n", &left), 1);
    assert_int_equal(shown + left, r.n_pids);
    free(text);
    /* wide: every pid the reply carries, then those it could not carry */
    assert_int_equal(columns_parse(COLUMNS_PS_WIDE, &c, err, sizeof err), 0);
    c.max_width = 0;
    text = row_text(&c, &(struct columns_row){.r = &r, .g = 0, .first = true});
    char last[32];
    snprintf(last, sizeof last, ",%u,+5\n", 100000 + KAIROS_PS_MAX_PIDS - 1);
    assert_non_null(strstr(text, last));
    free(text);
}

static void test_drop_compute_and_no_gpu(void **state)
{
    (void)state;
    struct kairos_ps_reply r;
    many_pids(&r);
    r.n_pids = 1;
    struct columns c = {0};
    char err[256];
    assert_int_equal(columns_parse(COLUMNS_PS_WIDE, &c, err, sizeof err), 0);
    columns_drop_compute(&c);
    assert_int_equal(c.n, 6); /* tenant gpu held quota refused pids */
    char *text = row_text(&c, &(struct columns_row){.r = &r, .first = true, .no_gpu = true});
    assert_string_equal(text, "training    -            -       no GPU        -  100000\n");
    assert_int_equal(text[strlen(text) - 2], '0'); /* no trailing blanks */
    free(text);
    /* a tenant's second row: no name, no pids */
    text = row_text(&c, &(struct columns_row){.r = &r, .g = 0});
    assert_string_equal(text, "          0     3.00 GiB     8.00 GiB       54\n");
    free(text);
}

/* The space columns go in before pids, once: a tenant's domain, the part of the SMs
 * its sms: gives its MPS clients ("-" for none) and its faults caused/lost. */
static void test_space_columns_before_pids(void **state)
{
    (void)state;
    struct kairos_ps_reply r;
    many_pids(&r);
    r.n_pids = 1;
    strcpy(r.fault_domain, "infer");
    r.sm_percent = 30;
    r.faults_lost = 2;
    struct columns c = {0};
    char err[256];
    assert_int_equal(columns_parse("tenant,refused,pids", &c, err, sizeof err), 0);
    columns_add_space(&c);
    columns_add_space(&c); /* once */
    assert_int_equal(c.n, 6);
    struct ps_snapshot s = {.list = &r, .n = 1, .n_gpus = 1};
    columns_fit_names(&c, &s);
    char *head = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&head, &len);
    assert_non_null(f);
    columns_header(f, &c, "");
    fclose(f);
    assert_non_null(strstr(head, " REFUSED  DOMAIN     SMS  FAULTS  PIDS\n"));
    free(head);
    char *text = row_text(&c, &(struct columns_row){.r = &r, .g = 0, .first = true});
    assert_non_null(strstr(text, " 54  infer      30%     0/2  100000\n"));
    free(text);
    r.sm_percent = 0; /* no sms: (or a kairosd of before) */
    text = row_text(&c, &(struct columns_row){.r = &r, .g = 0, .first = true});
    assert_non_null(strstr(text, " 54  infer        -     0/2  100000\n"));
    free(text);
}

/* The help text's list: every column, lines within 80 columns, no trailing blank. */
static void test_known_list_for_help(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    columns_print_known(f, 2);
    fclose(f);
    char err[256];
    struct columns c = {0};
    char *names = strdup(columns_known());
    for (char *n = strtok(names, ", "); n; n = strtok(NULL, ", ")) {
        assert_int_equal(columns_parse(n, &c, err, sizeof err), 0);
        assert_non_null(strstr(buf, n));
    }
    free(names);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        assert_true(strlen(line) <= COLUMNS_WIDTH);
        assert_true(line[strlen(line) - 1] != ' ');
        assert_true(!strncmp(line, "  ", 2) && line[2] != ' ');
    }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_column_refused),
        cmocka_unit_test(test_default_ps_row_cut_to_80),
        cmocka_unit_test(test_drop_compute_and_no_gpu),
        cmocka_unit_test(test_space_columns_before_pids),
        cmocka_unit_test(test_known_list_for_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
