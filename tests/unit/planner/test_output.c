/* test_output.c - output formats: JSON round-trips through plan_read_json to the
 * same assignments, the direct JSON writer is byte for byte jansson's text of the tree
 * the YAML comes from, YAML is valid YAML, the table names every workload. */
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

static char *tree_to_string(const struct plan_input *in, const struct plan *p,
                            const struct plan_moves *mv)
{
    char *buf = NULL;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(plan_write_json_tree(in, p, mv, f), 0);
    fclose(f);
    return buf;
}

static void assert_same_json(const struct plan_input *in, const struct plan *p,
                             const struct plan_moves *mv)
{
    char *direct = NULL, *tree = tree_to_string(in, p, mv);
    size_t len;
    FILE *f = open_memstream(&direct, &len);
    assert_int_equal(plan_write(in, p, mv, PLAN_FMT_JSON, f), 0);
    fclose(f);
    assert_string_equal(direct, tree);
    free(direct);
    free(tree);
}

/* Plans of every algorithm, with infeasible workloads, an exact status, moves, reals of
 * every magnitude and names that need escaping. */
static void test_json_direct_is_tree(void **state)
{
    struct plan_input in;
    struct plan p;
    struct plan_options o;
    (void)state;
    make_plan(&in, &p);
    assert_same_json(&in, &p, NULL);
    plan_free(&p);
    snprintf(in.workloads[0].name, PLAN_NAME_MAX, "q\"uo\\te\t/\x01x");
    in.workloads[1].target = 1e-7;
    in.workloads[2].target = 3e21;
    in.workloads[3].target = 12345678901.0;
    in.workloads[4].mem_mib = 1LL << 40;      /* too big: infeasible */
    in.pools[0].count = 3;                    /* too few GPUs: some unplaced */
    for (int a = PLAN_ALGO_KAIROS; a <= PLAN_ALGO_EXACT; a++) {
        plan_options_default(&o);
        o.algo = (enum plan_algo)a;
        o.exact_time_limit_s = 0.2;
        assert_int_equal(plan_solve(&in, &o, &p), 0);
        struct plan_move mv[] = {{0, -1, -1, 0, 1}, {1, 0, 1, -1, -1}};
        struct plan_moves moves = {2, 2, mv};
        assert_same_json(&in, &p, NULL);
        if (p.n_gpus)
            assert_same_json(&in, &p, &moves);
        plan_free(&p);
    }
    struct plan empty = {0};
    snprintf(empty.algo, sizeof(empty.algo), "none");
    empty.exact_status = PLAN_EXACT_NA;
    assert_same_json(&in, &empty, NULL);
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
        cmocka_unit_test(test_json_direct_is_tree),
        cmocka_unit_test(test_yaml_parses),
        cmocka_unit_test(test_table_names_everyone),
        cmocka_unit_test(test_read_bad_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
