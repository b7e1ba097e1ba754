/* test_output.c - output formats: JSON round-trips through plan_read_json to the
 * same assignments, YAML is valid YAML, the table names every workload. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>
#include <cmocka.h>

#include "kairos/plan.h"

static void make_plan(struct plan_input *in, struct plan *p)
{
    struct plan_gen_params g = {42, 30, 20, "H200-141GB", 0.7};
    struct plan_options o;
    assert_int_equal(plan_gen(&g, in), 0);
    plan_options_default(&o);
    assert_int_equal(plan_solve(in, &o, p), 0);
}

static char *write_to_string(const struct plan_input *in, const struct plan *p,
                             enum plan_format fmt, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    assert_non_null(f);
    assert_int_equal(plan_write(in, p, NULL, fmt, f), 0);
    fclose(f);
    return buf;
}

static void test_json_round_trip(void **state)
{
    struct plan_input in;
    struct plan p, q;
    char path[] = "/tmp/kairos-plan-XXXXXX", err[300];
    size_t len;
    (void)state;
    make_plan(&in, &p);
    char *json = write_to_string(&in, &p, PLAN_FMT_JSON, &len);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, json, len), (ssize_t)len);
    close(fd);
    assert_int_equal(plan_read_json(path, &in, &q, err, sizeof(err)), 0);
    unlink(path);
    assert_int_equal(q.n_gpus, p.n_gpus);
    assert_int_equal(q.n_instances, p.n_instances);
    assert_int_equal(q.n_assigns, p.n_assigns);
    for (int a = 0; a < p.n_assigns; a++) {
        int found = 0;
        for (int b = 0; b < q.n_assigns && !found; b++)
            found = q.assigns[b].workload == p.assigns[a].workload
                    && q.assigns[b].time == p.assigns[a].time
                    && q.instances[q.assigns[b].instance].option
                       == p.instances[p.assigns[a].instance].option;
        assert_true(found);
    }
    assert_int_equal(plan_check(&in, &q, err, sizeof(err)), 0);
    free(json);
    plan_free(&q);
    plan_free(&p);
    plan_input_free(&in);
}

static void test_yaml_parses(void **state)
{
    struct plan_input in;
    struct plan p;
    size_t len;
    yaml_parser_t ps;
    yaml_document_t doc;
    (void)state;
    make_plan(&in, &p);
    char *text = write_to_string(&in, &p, PLAN_FMT_YAML, &len);
    assert_true(yaml_parser_initialize(&ps));
    yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
    assert_true(yaml_parser_load(&ps, &doc));
    assert_non_null(yaml_document_get_root_node(&doc));
    yaml_document_delete(&doc);
    yaml_parser_delete(&ps);
    assert_non_null(strstr(text, "gpus_in_slices:"));
    free(text);
    plan_free(&p);
    plan_input_free(&in);
}

static void test_table_names_everyone(void **state)
{
    struct plan_input in;
    struct plan p;
    size_t len;
    (void)state;
    make_plan(&in, &p);
    char *text = write_to_string(&in, &p, PLAN_FMT_TABLE, &len);
    for (int w = 0; w < in.n_workloads; w++)
        assert_non_null(strstr(text, in.workloads[w].name));
    free(text);
    plan_free(&p);
    plan_input_free(&in);
}

static void test_read_bad_json(void **state)
{
    struct plan_input in;
    struct plan p, q;
    char path[] = "/tmp/kairos-plan-XXXXXX", err[300];
    (void)state;
    make_plan(&in, &p);
    int fd = mkstemp(path);
    static const char bad[] = "{\"gpus\": [{\"model\": \"V100\"}]}";
    assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
    close(fd);
    assert_int_not_equal(plan_read_json(path, &in, &q, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "V100"));
    unlink(path);
    plan_free(&p);
    plan_input_free(&in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_yaml_parses),
        cmocka_unit_test(test_table_names_everyone),
        cmocka_unit_test(test_read_bad_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
