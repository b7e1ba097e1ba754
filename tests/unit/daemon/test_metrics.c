/* test_metrics.c - the exposition text: label values escaped, every family whole
 * (HELP and TYPE before its samples, never split), the figures of the ledger, no
 * sample for what is not known, a space tenant's domain and SMs, what held a tenant back (counters by reason, the
 * reason now) from kairosd's own scheduler; the metrics address, good and bad, and
 * in the configuration with its position. */
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/config/config.h"
#include "daemon/observe/metrics.h"
#include "daemon/config/metrics_addr.h"
#include "daemon/tenants/registry.h"
#include "daemon/tenants/tenants.h"
#include "daemon/time/timeshare.h"

#define MiB (1ull << 20)

static char *escaped(const char *value)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    metrics_write_label_value(f, value);
    fclose(f);
    return text;
}

static void test_label_escape(void **state)
{
    (void)state;
    char *s = escaped("a\"b\\c\nd{e}=,f");
    assert_string_equal(s, "a\\\"b\\\\c\\nd{e}=,f");
    free(s);
    s = escaped("");
    assert_string_equal(s, "");
    free(s);
}

/* Checks the text's structure: each family's HELP then TYPE, then only its own
 * samples, and no family twice. Returns the number of samples. */
static size_t check_families(char *text)
{
    char seen[4096] = " ";
    char family[128] = "";
    size_t samples = 0;
    int expect = 0; /* 0: HELP or a sample, 1: TYPE */
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char name[128];
        if (!strncmp(line, "# HELP ", 7)) {
            assert_int_equal(expect, 0);
            assert_int_equal(sscanf(line + 7, "%127s", name), 1);
            char key[132];
            snprintf(key, sizeof key, " %s ", name);
            if (strstr(seen, key))
                fail_msg("family %s appears twice", name);
            strncat(seen, key + 1, sizeof seen - strlen(seen) - 1);
            snprintf(family, sizeof family, "%s", name);
            expect = 1;
        } else if (!strncmp(line, "# TYPE ", 7)) {
            assert_int_equal(expect, 1);
            char type[32];
            assert_int_equal(sscanf(line + 7, "%127s %31s", name, type), 2);
            assert_string_equal(name, family);
            assert_true(!strcmp(type, "gauge") || !strcmp(type, "counter"));
            if (!strcmp(type, "counter"))
                assert_non_null(strstr(name, "_total"));
            expect = 0;
        } else {
            assert_int_equal(expect, 0);
            size_t n = strcspn(line, "{ ");
            if (n != strlen(family) || strncmp(line, family, n))
                fail_msg("sample '%s' outside its family (in %s)", line, family);
            samples++;
        }
    }
    return samples;
}

static void test_render(void **state)
{
    (void)state;
    struct tenants ts;
    assert_int_equal(tenants_init(&ts, 2, "/nonexistent/state.json"), 0);
    uint64_t quota[KAIROS_MAX_GPUS] = {64 * MiB, 0};
    struct ledger_tenant *team, *odd;
    assert_int_equal(ledger_tenant_add(&ts.ledger, "team", quota, 0, &team), 0);
    assert_int_equal(ledger_tenant_add(&ts.ledger, "odd", NULL, 0, &odd), 0);
    /* not a name the ledger accepts, but the text must stay well formed whatever the
     * name (the rules on names may change) */
    snprintf(odd->name, sizeof odd->name, "we\"ird\\na\nme");
    struct ledger_member *m;
    struct ledger_grant g;
    assert_int_equal(ledger_join(&ts.ledger, team, 42, NULL, &m), 0);
    assert_int_equal(ledger_charge(&ts.ledger, m, 0, 40 * MiB, 1, &g), 0);
    assert_true(g.granted);
    assert_int_equal(ledger_charge(&ts.ledger, m, 0, 40 * MiB, 2, &g), 0);
    assert_false(g.granted);
    team->draining[0] = 3 * MiB; /* a departed member's memory the GPU still shows */
    struct tenant_settings *space;
    assert_int_equal(registry_set_fault_domain(&ts.settings, team, "infer", SETTING_CONFIG), 0);
    assert_int_equal(settings_book_get(&ts.settings, team->id, &space), 0);
    space->sms_pct = 30; /* its sms: */
    snprintf(ts.gpu_uuid[0], sizeof ts.gpu_uuid[0], "GPU-\"0\"");
    struct metrics_sources src = {.ts = &ts, .start_time = 1700000000.5, .version = "1.2\"3"};
    char *text;
    size_t len;
    assert_int_equal(metrics_render(&src, &text, &len), 0);
    assert_int_equal(strlen(text), len);
    static const char *const want[] = {
        "kairos_build_info{version=\"1.2\\\"3\"} 1\n",
        "kairos_up 1\n",
        "kairos_start_time_seconds 1700000000.500\n",
        "kairos_connections 0\n",
        "kairos_tenants 2\n",
        "kairos_gpus 2\n",
        "kairos_gpu_info{gpu=\"0\",uuid=\"GPU-\\\"0\\\"\",backend=\"none\"} 1\n",
        "kairos_tenant_members{tenant=\"team\"} 1\n",
        "kairos_tenant_members{tenant=\"we\\\"ird\\\\na\\nme\"} 0\n",
        "kairos_tenant_memory_held_bytes{tenant=\"team\",gpu=\"0\"} 41943040\n",
        "kairos_tenant_memory_quota_bytes{tenant=\"team\",gpu=\"0\"} 67108864\n",
        "kairos_tenant_allocations_refused_total{tenant=\"team\",gpu=\"0\"} 1\n",
        "kairos_tenant_memory_draining_bytes{tenant=\"team\",gpu=\"0\"} 3145728\n",
        "kairos_tenant_claims_beyond_grant_total{tenant=\"team\",gpu=\"0\"} 0\n",
        "kairos_tenant_grant_requests_total{tenant=\"team\",gpu=\"0\"} 0\n",
        "# TYPE kairos_tenant_allocations_refused_total counter\n",
        "kairos_tenant_gpu_seconds_total{tenant=\"team\",gpu=\"0\"} 0.000000\n",
        "kairos_tenant_memory_held_byte_seconds_total{tenant=\"team\",gpu=\"0\"} 0\n",
        "# TYPE kairos_tenant_memory_held_bytes gauge\n",
        "kairos_tenant_fault_domain_info{tenant=\"team\",domain=\"infer\"} 1\n",
        "kairos_tenant_sm_percent{tenant=\"team\"} 30\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(text, want[i]))
            fail_msg("missing: %s\nin:\n%s", want[i], text);
    /* what is not known has no sample: GPU 1 (no quota, nothing held or refused),
     * the odd tenant's memory, compute without a scheduler, GPU status without a
     * backend, the connection limit without a configuration */
    static const char *const absent[] = {
        "gpu=\"1\"}",  "tenant=\"we\\\"ird\\\\na\\nme\",gpu=", "kairos_tenant_compute_share_ratio{",
        "kairos_gpu_memory_used_bytes{", "kairos_connections_limit",
        "kairos_tenant_sm_percent{tenant=\"we", /* in no fault domain */
    };
    for (size_t i = 0; i < sizeof absent / sizeof *absent; i++)
        if (strstr(text, absent[i]))
            fail_msg("unexpected: %s\nin:\n%s", absent[i], text);
    /* 6 kairosd, 2 GPU, 2 members, 4 memory, 1 claims beyond the grant, 1 requests,
     * 2 chargeback counters (not yet begun: no kairos_tenant_usage_created_seconds),
     * 2 space mode (the fault domain, the SMs) */
    assert_int_equal(check_families(text), 20);
    free(text);
    ledger_leave(&ts.ledger, m, NULL);
    tenants_fini(&ts);
}

static int no_samples(struct gpu_backend *b, unsigned index, uint64_t since_us,
                      struct gpu_util *out, size_t cap, size_t *n)
{
    *n = 0; /* the tenant used nothing: what held it back does not depend on it */
    return 0;
}

static void no_send(void *ctx, const char *tenant, const struct kairos_time_policy *p)
{
}

static void expect_lines(const char *text, const char *const *want, size_t n, bool present)
{
    for (size_t i = 0; i < n; i++)
        if (!strstr(text, want[i]) != !present)
            fail_msg("%s: %s\nin:\n%s", present ? "missing" : "unexpected", want[i], text);
}

/* A tenant with a 30 % limit on GPU 0, ten periods of kairosd's scheduler: held back
 * by its limit in each, paused 70 ms of each; counters by reason, the reason now. */
static void test_render_holds(void **state)
{
    (void)state;
    struct tenants ts;
    assert_int_equal(tenants_init(&ts, 2, "/nonexistent/state.json"), 0);
    struct ledger_tenant *capped;
    assert_int_equal(ledger_tenant_add(&ts.ledger, "capped", NULL, 0, &capped), 0);
    struct sched_policy pol = {.share = 0.3, .limit = 0.3, .prio = SCHED_PRIO_NORMAL};
    assert_int_equal(registry_set_compute(&ts.compute, &ts.settings, capped, 0, &pol,
                                          SETTING_RUNTIME), 0);
    struct ledger_member *m;
    assert_int_equal(ledger_join(&ts.ledger, capped, 42, NULL, &m), 0);
    struct config cfg;
    config_defaults(&cfg);
    static const struct gpu_ops ops = {.name = "test", .utilization = no_samples};
    struct gpu_backend gpu = {.ops = &ops};
    struct timeshare *t;
    assert_int_equal(timeshare_init(&t, NULL, &gpu, &ts, &cfg, no_send, NULL), 0);
    timeshare_reconfigure(t);
    for (int i = 0; i < 10; i++)
        timeshare_tick(t);
    struct metrics_sources src = {.ts = &ts, .timeshare = t, .version = "1"};
    char *text;
    size_t len;
    assert_int_equal(metrics_render(&src, &text, &len), 0);
    static const char *const want[] = {
        "# TYPE kairos_tenant_compute_held_seconds_total counter\n",
        "kairos_tenant_compute_held_seconds_total{tenant=\"capped\",gpu=\"0\",reason=\"limit\"} "
        "0.7\n",
        "kairos_tenant_compute_held_seconds_total{tenant=\"capped\",gpu=\"0\",reason=\"share\"} "
        "0\n",
        "kairos_tenant_compute_held_seconds_total{tenant=\"capped\",gpu=\"0\",reason=\"yield\"} "
        "0\n",
        "# TYPE kairos_tenant_compute_periods_total counter\n",
        "kairos_tenant_compute_periods_total{tenant=\"capped\",gpu=\"0\",reason=\"limit\"} 10\n",
        "kairos_tenant_compute_periods_total{tenant=\"capped\",gpu=\"0\",reason=\"none\"} 0\n",
        "kairos_tenant_compute_hold_info{tenant=\"capped\",gpu=\"0\",reason=\"limit\"} 1\n",
        "kairos_tenant_compute_priority_info{tenant=\"capped\",gpu=\"0\",priority=\"normal\"} 1\n",
        "kairos_tenant_pauses_total{tenant=\"capped\",gpu=\"0\"} 10\n",
    };
    expect_lines(text, want, sizeof want / sizeof *want, true);
    /* no paused time for "none"; nothing on GPU 1, where it has no policy */
    static const char *const absent[] = {
        "kairos_tenant_compute_held_seconds_total{tenant=\"capped\",gpu=\"0\",reason=\"none\"}",
        "tenant=\"capped\",gpu=\"1\"",
    };
    expect_lines(text, absent, sizeof absent / sizeof *absent, false);
    check_families(text);
    free(text);
    timeshare_fini(t);
    config_free(&cfg);
    ledger_leave(&ts.ledger, m, NULL);
    tenants_fini(&ts);
}

static void test_addr(void **state)
{
    (void)state;
    struct metrics_addr a;
    char why[256], text[METRICS_ADDR_MAX];
    assert_int_equal(metrics_addr_parse("127.0.0.1:9494", &a, why, sizeof why), 0);
    assert_true(a.on);
    assert_int_equal(a.ss.ss_family, AF_INET);
    assert_string_equal(metrics_addr_format(&a, 9494, text, sizeof text), "127.0.0.1:9494");
    assert_int_equal(metrics_addr_parse("10.1.2.3", &a, why, sizeof why), 0);
    assert_int_equal(ntohs(((struct sockaddr_in *)&a.ss)->sin_port), METRICS_DEFAULT_PORT);
    assert_int_equal(metrics_addr_parse("[::1]:0", &a, why, sizeof why), 0);
    assert_int_equal(a.ss.ss_family, AF_INET6);
    assert_string_equal(metrics_addr_format(&a, 5, text, sizeof text), "[::1]:5");
    assert_int_equal(metrics_addr_parse("off", &a, why, sizeof why), 0);
    assert_false(a.on);
    static const char *const bad[] = {
        "",        "localhost:9494", "127.0.0.1:",  "127.0.0.1:65536", "127.0.0.1:-1",
        "::1:9494", "[::1",          "[::1]9494",   "[]:1",            "1.2.3:80",
        "127.0.0.1:80x", "127.0.0.1:+80", "[127.0.0.1]:80",
        "0123456789012345678901234567890123456789012345678901234567890123456789",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = 0;
        if (metrics_addr_parse(bad[i], &a, why, sizeof why) != -EINVAL)
            fail_msg("'%s' accepted", bad[i]);
        assert_false(a.on);
        assert_non_null(strstr(why, "127.0.0.1:9494"));
    }
}

static void test_config(void **state)
{
    (void)state;
    struct config c;
    char err[512] = "";
    const char *good = "metrics: 127.0.0.1:9494\n";
    assert_int_equal(config_parse("k.yaml", good, strlen(good), &c, err, sizeof err), 0);
    assert_true(c.metrics.on);
    assert_string_equal(c.metrics.text, "127.0.0.1:9494");
    config_free(&c);
    assert_int_equal(config_parse("k.yaml", "gpus: 1\n", 8, &c, err, sizeof err), 0);
    assert_false(c.metrics.on);
    config_free(&c);
    const char *bad = "gpus: 1\nmetrics: 127.0.0.1:99999\n";
    assert_int_equal(config_parse("k.yaml", bad, strlen(bad), &c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "k.yaml:2:10: metrics address '127.0.0.1:99999' is not"));
    const char *list = "metrics: [1, 2]\n";
    assert_int_equal(config_parse("k.yaml", list, strlen(list), &c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "k.yaml:1:10: expected metrics as an address"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_escape),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_render_holds),
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
