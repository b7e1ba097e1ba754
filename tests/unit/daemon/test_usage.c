/* test_usage.c - the chargeback counters (usage.h, usage_state.h): memory integrated
 * over time, GPU time saturating, counters beginning once; saved in the state file
 * for configured and run-time tenants alike and read back with the refusals; a
 * save publishes them to the metrics and a failed save does not; a state file of
 * before (no "usage") loads with every counter at 0; every kind of corrupt section
 * or field loses only that tenant's counters, never the tenants or the other
 * tenants' counters; the metrics text shows what was published; a state too large
 * with the counters is saved without them; the counters of a tenant gone are dropped
 * (they are kept by tenant id, apart from the ledger). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "state_dir.h"

#include "daemon/observe/metrics.h"
#include "daemon/tenants/registry.h"
#include "daemon/state/state.h"
#include "daemon/tenants/tenants.h"
#include "daemon/state/usage_state.h"

/* For the tests without compute policies: a book that stays empty; and a settings
 * book emptied at each use (these tests set none: a save finds none, a load puts
 * what it read in a book of its own). */
static struct compute_book no_policies;
static struct settings_book no_settings;
static const struct state_settings_io *io(void)
{
    settings_book_fini(&no_settings);
    settings_book_init(&no_settings);
    return io_of(&no_policies, &no_settings);
}

#define setup state_dir_setup
#define teardown state_dir_teardown
#define GiB (1ull << 30)
#define NOW 1764921600.0 /* 2025-12-05 */

static int warnings;
static struct usage_book book; /* the counters of the tests on a bare ledger */

/* t's counters in b (made when it has none). */
static struct usage *counters(struct usage_book *b, const struct ledger_tenant *t)
{
    struct usage *u = usage_book_get(b, t->id);
    assert_non_null(u);
    return u;
}

static void count_warning(void *ctx, const char *msg)
{
    (void)ctx;
    (void)msg;
    warnings++;
}

static void test_accounting(void **state)
{
    (void)state;
    struct usage u;
    memset(&u, 0, sizeof u);
    usage_begin(&u, NOW);
    usage_begin(&u, NOW + 100); /* begun: stays */
    assert_true(u.since == NOW);
    uint64_t held[KAIROS_MAX_GPUS] = {GiB, 3};
    usage_add_memory(&u, held, 2, 0.5);
    usage_add_memory(&u, held, 2, 0.5);
    usage_add_memory(&u, held, 2, -1);       /* a clock that went back: nothing */
    usage_add_memory(&u, held, 2, NAN);
    usage_add_memory(&u, held, 2, INFINITY);
    assert_true(u.mem_byte_s[0] == (double)GiB);
    assert_true(u.mem_byte_s[1] == 3.0);
    usage_add_gpu(&u, 1, 250000);
    usage_add_gpu(&u, 1, 250000);
    usage_add_gpu(&u, KAIROS_MAX_GPUS, 7); /* no such GPU: ignored */
    assert_int_equal(u.gpu_us[1], 500000);
    usage_add_gpu(&u, 0, UINT64_MAX - 1);
    usage_add_gpu(&u, 0, 10); /* saturates, never wraps back */
    assert_true(u.gpu_us[0] == UINT64_MAX);
    /* nothing shown until published */
    assert_int_equal(u.shown_gpu_us[1], 0);
    assert_true(u.shown_mem_byte_s[0] == 0);
    usage_publish(&u);
    assert_int_equal(u.shown_gpu_us[1], 500000);
    assert_true(u.shown_mem_byte_s[0] == (double)GiB);
}

/* The book by tenant id: made in any order, found again, kept or dropped as told. */
static void test_book(void **state)
{
    (void)state;
    static const uint32_t ids[] = {7, 3, 900, 1, 5, 3};
    usage_book_init(&book);
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        usage_add_gpu(usage_book_get(&book, ids[i]), 0, ids[i]);
    assert_int_equal(book.ids.n, 5);
    for (size_t i = 1; i < book.ids.n; i++)
        assert_true(((struct usage_entry *)id_book_at(&book.ids, i - 1))->tenant <
                    ((struct usage_entry *)id_book_at(&book.ids, i))->tenant);
    assert_int_equal(usage_book_find(&book, 3)->gpu_us[0], 6); /* the same entry twice */
    assert_null(usage_book_find(&book, 4));
    static const uint32_t live[] = {900, 3, 8};
    assert_int_equal(usage_book_keep(&book, live, 3), 0);
    assert_int_equal(book.ids.n, 2);
    assert_int_equal(usage_book_find(&book, 900)->gpu_us[0], 900);
    assert_null(usage_book_find(&book, 7));
    assert_int_equal(usage_book_keep(&book, NULL, 0), 0);
    assert_int_equal(book.ids.n, 0);
    usage_book_fini(&book);
}

static void test_tick_over_the_ledger(void **state)
{
    (void)state;
    struct ledger l;
    ledger_init(&l, 2);
    uint64_t quota[KAIROS_MAX_GPUS] = {4 * GiB, 4 * GiB};
    struct ledger_tenant *a, *b;
    assert_int_equal(ledger_tenant_add(&l, "a", quota, 0, &a), 0);
    assert_int_equal(ledger_tenant_add(&l, "b", quota, 0, &b), 0);
    struct ledger_member *m;
    struct ledger_grant g;
    assert_int_equal(ledger_join(&l, a, 10, NULL, &m), 0);
    assert_int_equal(ledger_charge(&l, m, 1, 2 * GiB, 1, &g), 0);
    assert_true(g.granted);
    usage_book_init(&book);
    usage_state_tick(&book, &l, NOW, 0); /* begins both, counts nothing */
    assert_true(counters(&book, a)->since == NOW && counters(&book, b)->since == NOW);
    for (int i = 0; i < 10; i++)
        usage_state_tick(&book, &l, NOW + i, 1.0);
    assert_true(counters(&book, a)->mem_byte_s[1] == 20.0 * GiB);
    assert_true(counters(&book, a)->mem_byte_s[0] == 0);
    assert_true(counters(&book, b)->mem_byte_s[1] == 0);
    usage_state_published(&book);
    assert_true(counters(&book, a)->shown_mem_byte_s[1] == 20.0 * GiB);
    /* a tenant gone: its counters go at the next tick; one made again begins at 0 */
    uint32_t id_b = b->id;
    assert_int_equal(ledger_tenant_remove(&l, b), 0);
    usage_state_tick(&book, &l, NOW + 10, 1.0);
    assert_null(usage_book_find(&book, id_b));
    assert_int_equal(book.ids.n, 1);
    assert_int_equal(ledger_tenant_add(&l, "b", quota, 0, &b), 0);
    assert_null(usage_book_find(&book, b->id));
    ledger_leave(&l, m, NULL);
    ledger_fini(&l);
    usage_book_fini(&book);
}

/* A ledger with a configured tenant and a run-time one, with counters. */
static void fill(struct ledger *l, struct ledger_tenant **cfg, struct ledger_tenant **job)
{
    uint64_t quota[KAIROS_MAX_GPUS] = {GiB, GiB};
    ledger_init(l, 2);
    assert_int_equal(ledger_tenant_add(l, "cfg", quota, LEDGER_TENANT_CONFIG, cfg), 0);
    assert_int_equal(ledger_tenant_add(l, "job", quota, 0, job), 0);
    usage_state_tick(&book, l, NOW, 0);
    usage_add_gpu(counters(&book, *cfg), 0, 1500000);
    counters(&book, *cfg)->mem_byte_s[1] = 12345.5;
    (*cfg)->refusals[0] = 3;
    usage_add_gpu(counters(&book, *job), 1, 42);
    (*job)->refusals[1] = 9;
}

static void test_round_trip(void **state)
{
    (void)state;
    struct ledger a, b;
    struct ledger_tenant *cfg, *job;
    char err[512], aside[512];
    usage_book_init(&book);
    fill(&a, &cfg, &job);
    assert_int_equal(state_save_counted(path, &a, io(), &book, NULL, NULL, NULL, err,
                                        sizeof err), 0);
    usage_book_fini(&book);
    ledger_init(&b, 2);
    assert_int_equal(ledger_tenant_add(&b, "cfg", NULL, LEDGER_TENANT_CONFIG, &cfg), 0);
    warnings = 0;
    assert_int_equal(state_load_all(path, &b, io(), &book, NULL, count_warning, NULL, err,
                                    sizeof err,
                                    aside, sizeof aside), 1);
    assert_int_equal(warnings, 0);
    job = ledger_tenant_find(&b, "job");
    assert_non_null(job);
    assert_true(counters(&book, cfg)->since == NOW && counters(&book, job)->since == NOW);
    assert_int_equal(counters(&book, cfg)->gpu_us[0], 1500000);
    assert_true(counters(&book, cfg)->mem_byte_s[1] == 12345.5);
    assert_int_equal(cfg->refusals[0], 3);
    assert_int_equal(counters(&book, job)->gpu_us[1], 42);
    assert_int_equal(job->refusals[1], 9);
    /* what was saved is what the metrics show at once after a restart */
    assert_int_equal(counters(&book, cfg)->shown_gpu_us[0], 1500000);
    assert_true(counters(&book, cfg)->shown_mem_byte_s[1] == 12345.5);
    ledger_fini(&a);
    ledger_fini(&b);
    usage_book_fini(&book);
}

/* Loads text into a ledger with the configured tenant "cfg", the counters into book
 * (emptied first); the number of run-time tenants loaded. */
static int load_text(const char *text, struct ledger *l)
{
    char err[512];
    ledger_init(l, 2);
    usage_book_fini(&book);
    assert_int_equal(ledger_tenant_add(l, "cfg", NULL, LEDGER_TENANT_CONFIG, NULL), 0);
    warnings = 0;
    return state_parse_all(text, strlen(text), l, io(), &book, count_warning, NULL, NULL, NULL, err,
                           sizeof err);
}

static void test_file_of_before(void **state)
{
    (void)state;
    struct ledger l;
    assert_int_equal(load_text("{\"version\": 1, \"tenants\": [{\"name\": \"job\", "
                               "\"quota\": {\"0\": 5}}]}", &l), 1);
    assert_int_equal(warnings, 0);
    const struct ledger_tenant *job = ledger_tenant_find(&l, "job");
    assert_null(usage_book_find(&book, job->id)); /* begins at kairosd's first tick */
    assert_int_equal(job->refusals[0], 0);
    ledger_fini(&l);
    usage_book_fini(&book);
}

/* Each corrupt section or field: the run-time tenant still loads, its counters are
 * dropped whole (begin again, "since" unset: kairosd's first tick sets it), another
 * tenant's well-formed counters are kept, one warning at least, nothing crashes
 * (ASan/UBSan). */
static void test_corrupt_usage(void **state)
{
    (void)state;
    static const char head[] = "{\"version\": 1, \"tenants\": [{\"name\": \"job\", "
                               "\"quota\": {\"0\": 5}}], \"usage\": ";
    static const char *const cases[] = {
        "5",
        "[]",
        "{\"tenants\": []}",
        "{\"tenants\": {\"job\": 1, \"cfg\": {\"since\": 1764921600, \"gpus\": {\"0\": "
        "{\"gpu_us\": 88}}}}}",
        "{\"tenants\": {\"job\": {\"since\": \"yesterday\", \"gpus\": {\"0\": "
        "{\"gpu_us\": 77}}}}}",
        "{\"tenants\": {\"job\": {\"since\": 1e300, \"gpus\": {\"0\": {\"gpu_us\": 77}}}}}",
        "{\"tenants\": {\"job\": {\"since\": 1764921600, \"gpus\": 3}}}",
        "{\"tenants\": {\"job\": {\"since\": 1764921600, \"gpus\": {\"0\": {\"gpu_us\": 77, "
        "\"memory_byte_seconds\": -5}}}}}",
        "{\"tenants\": {\"job\": {\"since\": 1764921600, \"gpus\": {\"0\": {\"gpu_us\": 77, "
        "\"memory_byte_seconds\": \"1e3\", \"refusals\": 1.5}}}}}",
        "{\"tenants\": {\"job\": {\"since\": 1764921600, \"gpus\": {\"0\": {\"gpu_us\": "
        "-77}}}}}",
        "{\"tenants\": {\"job\": {\"since\": 1764921600, \"gpus\": {\"0\": {\"gpu_us\": 77, "
        "\"refusals\": 2}, \"7\": {\"gpu_us\": 1}, \"-1\": {}, \"x\": {}, \"1\": []}}}}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[1024];
        snprintf(text, sizeof text, "%s%s}", head, cases[i]);
        struct ledger l;
        assert_int_equal(load_text(text, &l), 1);
        assert_true(warnings >= 1);
        const struct ledger_tenant *job = ledger_tenant_find(&l, "job");
        assert_non_null(job);
        assert_int_equal(job->quota[0], 5);
        assert_null(usage_book_find(&book, job->id)); /* none: all 0, "since" unset */
        for (unsigned g = 0; g < 2; g++)
            assert_int_equal(job->refusals[g], 0);
        if (i == 3) /* the other tenant's entry, well formed, is kept */
            assert_int_equal(counters(&book, ledger_tenant_find(&l, "cfg"))->gpu_us[0], 88);
        ledger_fini(&l);
    }
    /* a tenant nobody knows any more: dropped quietly, the others kept */
    struct ledger l;
    assert_int_equal(load_text("{\"version\": 1, \"tenants\": [], \"usage\": {\"tenants\": "
                               "{\"gone\": {\"since\": 1764921600, \"gpus\": {}}, \"cfg\": "
                               "{\"since\": 1764921600, \"gpus\": {\"1\": {\"refusals\": 4}}}}}}",
                               &l), 0);
    assert_int_equal(warnings, 0);
    assert_int_equal(ledger_tenant_find(&l, "cfg")->refusals[1], 4);
    ledger_fini(&l);
    usage_book_fini(&book);
}

/* A save publishes the counters to the metrics; a failed one does not. */
static void test_save_publishes(void **state)
{
    (void)state;
    struct tenants ts;
    char err[512];
    assert_int_equal(tenants_init(&ts, 2, path), 0);
    struct ledger_tenant *t;
    assert_int_equal(ledger_tenant_add(&ts.ledger, "team", NULL, LEDGER_TENANT_CONFIG, &t), 0);
    usage_state_tick(&ts.usage, &ts.ledger, NOW, 0);
    usage_add_gpu(counters(&ts.usage, t), 0, 2500000);
    counters(&ts.usage, t)->mem_byte_s[0] = 1e15;
    struct metrics_sources src = {.ts = &ts, .version = "x"};
    char *text;
    size_t len;
    assert_int_equal(metrics_render(&src, &text, &len), 0);
    assert_null(strstr(text, "kairos_tenant_gpu_seconds_total{")); /* nothing saved yet */
    free(text);
    assert_int_equal(tenants_save_state(&ts, NULL, err, sizeof err), 0);
    assert_int_equal(metrics_render(&src, &text, &len), 0);
    assert_non_null(strstr(text, "# TYPE kairos_tenant_gpu_seconds_total counter\n"));
    assert_non_null(strstr(text, "kairos_tenant_gpu_seconds_total{tenant=\"team\",gpu=\"0\"} "
                                 "2.500000\n"));
    assert_non_null(strstr(text, "kairos_tenant_memory_held_byte_seconds_total{tenant=\"team\","
                                 "gpu=\"0\"} 1000000000000000\n"));
    assert_non_null(strstr(text, "kairos_tenant_usage_created_seconds{tenant=\"team\"} "
                                 "1764921600.000\n"));
    free(text);
    /* a save that fails (no such directory) leaves what the metrics show */
    usage_add_gpu(counters(&ts.usage, t), 0, 1000000);
    snprintf(ts.state_path, sizeof ts.state_path, "%s", "/nonexistent/state.json");
    assert_int_not_equal(tenants_save_state(&ts, NULL, err, sizeof err), 0);
    assert_int_equal(counters(&ts.usage, t)->shown_gpu_us[0], 2500000);
    tenants_fini(&ts);
}

/* The largest state (4096 run-time tenants with long names and a compute policy on
 * 16 GPUs) with counters on every GPU would exceed STATE_MAX_BYTES: it is written
 * without the counters (the tenants matter more), and nothing new is published. */
static void test_too_large_saves_the_tenants(void **state)
{
    (void)state;
    struct tenants ts;
    char err[512], aside[512], name[KAIROS_NAME_MAX];
    assert_int_equal(tenants_init(&ts, KAIROS_MAX_GPUS, path), 0);
    struct sched_policy pol = {.share = 0.000123456789, .limit = 0.987654321,
                               .prio = SCHED_PRIO_LATENCY};
    for (int i = 0; i < LEDGER_MAX_TENANTS; i++) {
        struct ledger_tenant *t;
        snprintf(name, sizeof name, "%058d-%04d", 0, i);
        assert_int_equal(ledger_tenant_add(&ts.ledger, name, NULL, 0, &t), 0);
        for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
            registry_set_quota(&ts.ledger, &ts.settings, t, g, KAIROS_BYTES_MAX,
                               SETTING_RUNTIME);
            registry_set_compute(&ts.compute, &ts.settings, t, g, &pol, SETTING_RUNTIME);
            usage_add_gpu(counters(&ts.usage, t), g, UINT64_MAX / 3);
            counters(&ts.usage, t)->mem_byte_s[g] = 1.2345678901234567e18;
            t->refusals[g] = UINT64_MAX / 7;
        }
    }
    usage_state_tick(&ts.usage, &ts.ledger, NOW, 0);
    assert_int_equal(tenants_save_state(&ts, NULL, err, sizeof err), 0);
    assert_int_equal(counters(&ts.usage, ts.ledger.tenants[0])->shown_gpu_us[0], 0);
    struct ledger back;
    struct compute_book policies;
    struct settings_book settings;
    ledger_init(&back, KAIROS_MAX_GPUS);
    usage_book_init(&book);
    compute_book_init(&policies);
    settings_book_init(&settings);
    assert_int_equal(state_load_all(path, &back, io_of(&policies, &settings), &book, NULL, NULL,
                                    NULL, err, sizeof err, aside, sizeof aside),
                     LEDGER_MAX_TENANTS);
    assert_int_equal(policies.ids.n, LEDGER_MAX_TENANTS);
    assert_int_equal(settings.ids.n, LEDGER_MAX_TENANTS);
    compute_book_fini(&policies);
    settings_book_fini(&settings);
    assert_null(usage_book_find(&book, back.tenants[0]->id));
    ledger_fini(&back);
    usage_book_fini(&book);
    tenants_fini(&ts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accounting),
        cmocka_unit_test(test_book),
        cmocka_unit_test(test_tick_over_the_ledger),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test(test_file_of_before),
        cmocka_unit_test(test_corrupt_usage),
        cmocka_unit_test_setup_teardown(test_save_publishes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_large_saves_the_tenants, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
