/* test_input.c - the YAML input: a good file parses (replicas, fractions, custom
 * models, per-model throughput); every bad file gives file:line:column and what was
 * expected; truncated and garbled input never crashes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "kairos/plan.h"

static const char good[] =
    "models:\n"
    "  - name: Toy\n"
    "    sms: 100\n"
    "    memory_mib: 8000\n"
    "    profiles:\n"
    "      - {name: 1g.1gb, compute_slices: 1, memory_slices: 1, sms: 14, memory_mib: 1000, starts: [0,1,2,3,4,5,6]}\n"
    "      - {name: 7g.8gb, compute_slices: 7, memory_slices: 8, sms: 98, memory_mib: 8000, starts: [0]}\n"
    "gpus:\n"
    "  - model: A100-40GB\n"
    "    count: 4\n"
    "  - model: Toy\n"
    "    count: 2\n"
    "workloads:\n"
    "  - name: a\n"
    "    memory_mib: 900\n"
    "    throughput: {whole: 100, 1g.5gb: 20, 1g.1gb: 15}\n"
    "    target_fraction: 0.1\n"
    "    count: 3\n"
    "  - name: b\n"
    "    memory_mib: 100\n"
    "    throughput:\n"
    "      Toy: {whole: 10, 7g.8gb: 9}\n"
    "    target: 4.5\n";

static void test_good(void **state)
{
    struct plan_input in;
    char err[300];
    (void)state;
    assert_int_equal(plan_input_parse(good, strlen(good), "good.yaml", &in, err, sizeof(err)), 0);
    assert_int_equal(in.n_pools, 2);
    assert_string_equal(in.pools[1].model.name, "Toy");
    assert_int_equal(in.n_workloads, 4);
    assert_string_equal(in.workloads[0].name, "a#0");
    assert_string_equal(in.workloads[2].name, "a#2");
    assert_float_equal(in.workloads[0].target, 10.0, 1e-9);
    assert_float_equal(in.workloads[0].thr[0][1], 20.0, 1e-9);   /* A100 1g.5gb */
    assert_float_equal(in.workloads[0].thr[1][1], 15.0, 1e-9);   /* Toy 1g.1gb */
    assert_float_equal(in.workloads[0].thr[1][0], 100.0, 1e-9);  /* whole on both */
    assert_float_equal(in.workloads[3].thr[1][2], 9.0, 1e-9);
    assert_float_equal(in.workloads[3].thr[0][0], 0.0, 1e-9);
    plan_input_free(&in);
}

struct bad_case {
    const char *text;
    const char *expect;   /* substring of the message, including line:column */
};

static const struct bad_case bad_cases[] = {
    {"gpus: [{model: A100-40GB, count: 1}]\nworkload: []\n", "x.yaml:2:1: unknown key 'workload'"},
    {"gpus: [{model: A100-40GB, count: 1}]\n", "x.yaml:1:1: missing required key 'workloads'"},
    {"gpus: [{model: B200, count: 1}]\nworkloads: []\n", "x.yaml:1:16: unknown GPU model 'B200'"},
    {"gpus: [{model: A100-40GB, count: -1}]\nworkloads: []\n", "x.yaml:1:34: 'count' must be in 1..1000000, got -1"},
    {"gpus: [{model: A100-40GB, count: 1}]\nworkloads:\n  - name: a\n    memory_mib: lots\n"
     "    throughput: {whole: 1}\n    target: 1\n", "x.yaml:4:17: expected an integer for 'memory_mib'"},
    {"gpus: [{model: A100-40GB, count: 1}]\nworkloads:\n  - name: a\n    memory_mib: 1\n"
     "    throughput: {whole: 1, 9g.99gb: 2}\n    target: 1\n", "x.yaml:5:28: '9g.99gb' is not"},
    {"gpus: [{model: A100-40GB, count: 1}]\nworkloads:\n  - name: a\n    memory_mib: 1\n"
     "    throughput: {whole: 1}\n    target: 1\n    target_fraction: 0.5\n", "x.yaml:3:5: expected exactly one of"},
    {"gpus: [{model: A100-40GB, count: 1}]\nworkloads:\n  - name: a\n    memory_mib: 1\n"
     "    throughput: {whole: 0}\n    target: 1\n", "x.yaml:5:25: 'whole' must be greater than 0"},
    {"gpus: [{model: A100-40GB, count: 1}]\nworkloads:\n  - {name: a, memory_mib: 1, throughput: {whole: 1}, target: 1}\n"
     "  - {name: a, memory_mib: 1, throughput: {whole: 1}, target: 1}\n", "x.yaml:4:5: workload name 'a' is used twice (first on line 3)"},
    {"gpus: [{model: A100-40GB, count: 1}\nworkloads: []\n", "x.yaml:2:1: YAML syntax: did not find expected ',' or ']'"},
    {"", "x.yaml:1:1: expected a mapping"},
    {"- 1\n- 2\n", "x.yaml:1:1: expected a mapping with 'gpus' and 'workloads'"},
    {"gpus: [{model: A100-40GB, count: 1}]\nworkloads:\n  - name: a\n    memory_mib: 1\n"
     "    throughput: {A100-40GB: 3}\n    target: 1\n", "x.yaml:5:18: 'A100-40GB' is not 'whole'"},
    {"gpus: [{model: A100-40GB, count: 1}]\nworkloads:\n  - name: a\n    memory_mib: 1\n"
     "    throughput: {whole: 1}\n    target_fraction: 0.5\n    count: 0\n", "x.yaml:7:12: 'count' must be in 1..100000"},
    {"models: [{name: X, sms: 10, memory_mib: 10, profiles: [{name: p, compute_slices: 2, "
     "memory_slices: 3, sms: 1, memory_mib: 1, starts: [0]}]}]\ngpus: [{model: X, count: 1}]\nworkloads: []\n",
     "x.yaml:1:10: profile p: memory_slices must be 1, 2, 4 or 8"},
    {"gpus: [{model: A100-40GB, count: 1}]\ninterference: pairs\nworkloads: []\n",
     "x.yaml:2:15: 'interference' must be " PLAN_INTERF_LIST},
};

/* Every interference mode parses by its name, and the messages' list names them all. */
static void test_interference_modes(void **state)
{
    (void)state;
    for (int m = 0; m < PLAN_INTERF_COUNT; m++) {
        char text[160], err[300] = "";
        struct plan_input in;
        const char *name = plan_interference_name(m);
        snprintf(text, sizeof(text), "gpus: [{model: A100-40GB, count: 1}]\n"
                 "interference: %s\nworkloads: []\n", name);
        assert_int_equal(plan_input_parse(text, strlen(text), "x.yaml", &in, err, sizeof(err)), 0);
        assert_int_equal(in.interference, m);
        assert_int_equal(plan_interference_from_name(name), m);
        assert_non_null(strstr(PLAN_INTERF_LIST, name));
        plan_input_free(&in);
    }
    assert_int_equal(plan_interference_from_name("kairos-pairs"), PLAN_INTERF_KAIROS_PAIRS);
    assert_int_equal(plan_interference_from_name("native-pairs"), PLAN_INTERF_NATIVE_PAIRS);
    assert_int_equal(plan_interference_from_name("pairs"), -1);
}

static void test_bad(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        struct plan_input in;
        char err[300] = "";
        int rc = plan_input_parse(bad_cases[i].text, strlen(bad_cases[i].text), "x.yaml", &in, err,
                                  sizeof(err));
        if (rc == 0 || !strstr(err, bad_cases[i].expect))
            fail_msg("case %zu: rc %d, got \"%s\", want \"%s\"", i, rc, err, bad_cases[i].expect);
    }
}

/* A block-style file: what the fast reader (input_block.c) takes. */
static const char block_text[] =
    "# a comment\n"
    "gpus:\n"
    "  - model: A100-40GB\n"
    "    count: 4\n"
    "  - model: H200-141GB\n"
    "    count: 2\n"
    "interference: kairos\n"
    "workloads:\n"
    "  - name: a\n"
    "    memory_mib: 900   # MiB\n"
    "    throughput:\n"
    "      whole: 100\n"
    "      1g.5gb: 20\n"
    "\n"
    "    target_fraction: 0.1\n"
    "    count: 3\n"
    "# between items\n"
    "  -   name: b#1\n"
    "      memory_mib: 100\n"
    "      throughput:\n"
    "        H200-141GB:\n"
    "          whole: 10\n"
    "          7g.141gb: 9\n"
    "        A100-40GB:\n"
    "            3g.20gb: 2.5e1\n"
    "      target: 4.5\n"
    "  - name: c-3\n"
    "    target: -1\n"
    "    memory_mib: 7\n"
    "    throughput:\n"
    "      whole: 1\n";

/* Parses text as `kairos plan` does and with libyaml's document only: both must give
 * the same workloads or the same error. Returns the first parse's rc. */
static int parse_both(const char *text, size_t len, char *err, size_t errlen, int *reader)
{
    struct plan_input a, b;
    char err_b[300] = "";
    err[0] = '\0';
    int rc = plan_input_parse(text, len, "x.yaml", &a, err, errlen);
    int rc_b = plan_input_parse_document(text, len, "x.yaml", &b, err_b, sizeof(err_b));
    if ((rc == 0) != (rc_b == 0) || (rc && strcmp(err, err_b)))
        fail_msg("fast: %d \"%s\", libyaml: %d \"%s\" for:\n%.*s", rc, err, rc_b, err_b,
                 (int)len, text);
    if (rc)
        return rc;
    *reader = a.reader;
    assert_int_equal(b.reader, PLAN_READER_DOCUMENT);
    assert_int_equal(a.n_workloads, b.n_workloads);
    assert_int_equal(a.interference, b.interference);
    for (int w = 0; w < a.n_workloads; w++) {
        const struct plan_workload *x = &a.workloads[w], *y = &b.workloads[w];
        assert_string_equal(x->name, y->name);
        assert_true(x->mem_mib == y->mem_mib && x->target == y->target && x->line == y->line);
        assert_memory_equal(x->thr, y->thr, sizeof(x->thr));
    }
    plan_input_free(&a);
    plan_input_free(&b);
    return 0;
}

/* The fast reader gives what libyaml's document gives: the same workloads from a good
 * file, the same message (file:line:column) from every line of it spoiled. */
static void test_block_reader(void **state)
{
    char err[300];
    int reader = -1;
    size_t n = strlen(block_text);
    (void)state;
    assert_int_equal(parse_both(block_text, n, err, sizeof(err), &reader), -22);
    assert_non_null(strstr(err, "x.yaml:28:13: 'target' must be greater than 0"));
    char *text = malloc(n + 64);
    /* c's target made valid: the whole file parses, item by item */
    const char *neg = strstr(block_text, "target: -1");
    memcpy(text, block_text, n + 1);
    text[neg - block_text + 8] = ' ';
    assert_int_equal(parse_both(text, n, err, sizeof(err), &reader), 0);
    assert_int_equal(reader, PLAN_READER_BLOCK);
    /* every line spoiled in turn: a value, a key, a dedent, a flow mapping, a quote */
    static const char *const spoil[] = {"lots", "-", "{", "[1, 2]", "\"q\"", "x: y", "", "&a b"};
    for (size_t at = 0; at < n; at++) {
        if (at && block_text[at - 1] != '\n')
            continue;
        const char *colon = strchr(block_text + at, ':'), *eol = strchr(block_text + at, '\n');
        for (size_t k = 0; colon && colon < eol && k < sizeof(spoil) / sizeof(spoil[0]); k++) {
            size_t head = (size_t)(colon - block_text) + 2;
            int len = snprintf(text, n + 64, "%.*s%s%s", (int)head, block_text, spoil[k], eol);
            parse_both(text, (size_t)len, err, sizeof(err), &reader);
            len = snprintf(text, n + 64, "%.*s%s", (int)at, block_text, eol + 1);  /* line gone */
            parse_both(text, (size_t)len, err, sizeof(err), &reader);
            len = snprintf(text, n + 64, "%.*s %s", (int)at, block_text, block_text + at);
            parse_both(text, (size_t)len, err, sizeof(err), &reader);   /* indented by one */
        }
    }
    free(text);
}

/* Every prefix and a byte-flipped copy of a good file either parses or fails cleanly. */
static void test_garbage(void **state)
{
    size_t n = strlen(good);
    char *buf = malloc(n + 1);
    (void)state;
    for (size_t len = 0; len <= n; len++) {
        struct plan_input in;
        char err[300];
        if (plan_input_parse(good, len, "t.yaml", &in, err, sizeof(err)) == 0)
            plan_input_free(&in);
        else
            assert_non_null(strstr(err, "t.yaml:"));
    }
    for (size_t i = 0; i < n; i++) {
        struct plan_input in;
        char err[300];
        memcpy(buf, good, n);
        buf[i] = "{}[]:-,# \n\"x0"[i % 13];
        if (plan_input_parse(buf, n, "t.yaml", &in, err, sizeof(err)) == 0)
            plan_input_free(&in);
    }
    free(buf);
}

static void test_missing_file(void **state)
{
    struct plan_input in;
    char err[300];
    (void)state;
    assert_int_not_equal(plan_input_load("/nonexistent/cluster.yaml", &in, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "/nonexistent/cluster.yaml"));
}

/* Throughput tables (profile.c): the SM shares to measure, the workload's output
 * lines, and reading a table back with clear errors. */
static void test_profile_table(void **state)
{
    struct plan_gpu_model m;
    int pct[PLAN_MAX_OPTIONS], of[PLAN_MAX_OPTIONS];
    (void)state;
    assert_int_equal(plan_model_builtin("H200-141GB", &m), 0);
    assert_int_equal(plan_profile_points(&m, pct, of), 6);   /* 7g and whole share 100 % */
    assert_int_equal(pct[of[0]], 100);
    assert_int_equal(pct[of[1]], 13);                        /* 1g.18gb: 16 of 132 SMs */
    assert_int_equal(pct[of[6]], 100);
    double thr = -1, mem = -1;
    plan_profile_scan("throughput=5\nnoise throughput=9\nthroughput=abc\n  throughput=12.5\n"
                      "memory_mib=300\nthroughput=-4\n", &thr, &mem);
    assert_true(thr == 12.5 && mem == 300);
    thr = -1;
    plan_profile_scan("no result here\n", &thr, &mem);
    assert_true(thr == -1);

    struct plan_profile_table t = {.model = "H200-141GB", .workload = "w", .method = "mps",
                                   .note = "test", .mem_mib = 77, .n = 2,
                                   .option = {"whole", "1g.18gb"}, .thr = {100, 20}};
    char path[] = "/tmp/kairos-test-table-XXXXXX", err[300];
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    assert_int_equal(plan_profile_write(&t, f), 0);
    fclose(f);
    struct plan_profile_table back;
    assert_int_equal(plan_profile_load(path, &back, err, sizeof(err)), 0);
    assert_string_equal(back.model, "H200-141GB");
    assert_true(back.n == 2 && back.thr[1] == 20 && back.mem_mib == 77);
    static const char *const bad[][2] = {
        {"model: H200-141GB\nthroughput: {whole: -1}\n", "a number > 0"},
        {"model: H200-141GB\nthroughput: {whole: 1}\ncolour: red\n", "unknown key"},
        {"throughput: {whole: 1}\n", "needs 'model'"},
        {"model: H200-141GB\nmemory_mib: lots\nthroughput: {whole: 1}\n", "memory_mib"},
        {"model: [\n", "YAML syntax"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        f = fopen(path, "w");
        fputs(bad[k][0], f);
        fclose(f);
        assert_int_equal(plan_profile_load(path, &back, err, sizeof(err)), -22);
        if (!strstr(err, bad[k][1]))
            fail_msg("table %zu: '%s' lacks '%s'", k, err, bad[k][1]);
    }
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_interference_modes),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_block_reader),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_profile_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
