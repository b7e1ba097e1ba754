/* test_registry.c - the one home of a tenant's settings (registry.h): each setting
 * with its source; a configured tenant changed at run time and then reloaded keeps
 * what the configuration does not declare and takes what it does (nothing else
 * lost, a restart agreeing with a reload); every setting makes the round trip
 * through the state file with its source; a reload that removes a tenant with
 * members keeps it, its quota still enforced, until its last member leaves; a
 * run-time tenant the configuration comes to declare; a run-time fault domain (kairos
 * run --fault-domain): only a declared domain, only for a tenant without processes and
 * not for a configured one, kept by a reload and a restart, taken over by the
 * configuration once it declares the tenant; a tenant removed leaves no compute
 * policy (compute_book.h) nor settings record (settings_book.h) behind. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "state_dir.h"

#include "daemon/config/config.h"
#include "daemon/tenants/registry.h"
#include "daemon/tenants/tenants.h"

#define GiB (1ull << 30)
#define KEEP KAIROS_QUOTA_KEEP

/* setup and teardown: a fresh temporary directory, the state file at path */
#define setup state_dir_setup
#define teardown state_dir_teardown

/* The space block of the fault domain tests: domain infer declared, "plain" not. */
#define SPACE "space:\n  domains:\n    infer: { shared_uids: false }\n"

static void parse_with(struct config *c, const char *head, const char *tenants_yaml)
{
    char text[2048], err[512];
    snprintf(text, sizeof text, "gpus: 2\n%stenants:\n%s", head, tenants_yaml);
    if (config_parse("test.yaml", text, strlen(text), c, err, sizeof err))
        fail_msg("%s", err);
}

static void parse(struct config *c, const char *tenants_yaml)
{
    parse_with(c, "", tenants_yaml);
}

/* kairosd's start: the configuration, then the state file. */
static void start(struct tenants *ts, struct config *c)
{
    char err[512];
    assert_int_equal(tenants_init(ts, 2, path), 0);
    if (tenants_apply_config(ts, c, err, sizeof err))
        fail_msg("%s", err);
    tenants_load_state(ts, c);
}

static void reload_with(struct tenants *ts, struct config *c, const char *head,
                        const char *tenants_yaml)
{
    char err[512];
    config_free(c);
    parse_with(c, head, tenants_yaml);
    if (tenants_apply_config(ts, c, err, sizeof err))
        fail_msg("%s", err);
}

static void reload(struct tenants *ts, struct config *c, const char *tenants_yaml)
{
    reload_with(ts, c, "", tenants_yaml);
}

/* TENANT_SET by an administrator; the KAIROS_ERR_* code. */
static int tenant_set(struct tenants *ts, const struct config *c, const char *name, uint64_t q0,
                      uint64_t q1, const struct sched_policy *pol1)
{
    struct kairos_tenant_set m;
    memset(&m, 0, sizeof m);
    snprintf(m.tenant, sizeof m.tenant, "%s", name);
    m.n_gpus = 2;
    m.quota[0] = q0;
    m.quota[1] = q1;
    for (unsigned g = 2; g < KAIROS_MAX_GPUS; g++)
        m.quota[g] = KEEP;
    if (pol1) {
        policy_to_wire(pol1, &m.compute[1]);
        m.compute[1].flags = KAIROS_COMPUTE_SET;
    }
    bool changed;
    char msg[512];
    return tenants_set(ts, c, &m, NULL, 0, 0, &changed, msg, sizeof msg);
}

/* t's settings record (settings_book.h) in ts. */
static const struct tenant_settings *of(const struct tenants *ts, const struct ledger_tenant *t)
{
    return tenants_settings_of(ts, t);
}

static struct ledger_tenant *find(struct tenants *ts, const char *name)
{
    struct ledger_tenant *t = ledger_tenant_find(&ts->ledger, name);
    if (!t)
        fail_msg("no tenant %s", name);
    return t;
}

#define TEAM "  - name: team\n    memory: { 0: 1G }\n    compute: { 0: { share: 30% } }\n" \
             "    members: { users: [1000] }\n"

static void test_runtime_change_then_reload(void **state)
{
    (void)state;
    struct config c;
    struct tenants ts;
    parse(&c, TEAM);
    start(&ts, &c);
    struct ledger_tenant *t = find(&ts, "team");
    assert_int_equal(t->quota[0], GiB);
    assert_int_equal(of(&ts, t)->src.quota[0], SETTING_CONFIG);
    assert_int_equal(of(&ts, t)->src.quota[1], SETTING_UNSET);
    assert_int_equal(of(&ts, t)->src.compute[0], SETTING_CONFIG);
    assert_int_equal(of(&ts, t)->src.members, SETTING_CONFIG);
    struct sched_policy pol;
    assert_true(registry_policy(&ts.compute, t, 0, &pol)); /* the configuration's, in the record */
    assert_true(pol.share > 0.299 && pol.share < 0.301);

    /* at run time: both quotas; a compute policy is the configuration's to set */
    assert_int_equal(tenant_set(&ts, &c, "team", 2 * GiB, 3 * GiB, NULL), 0);
    assert_int_equal(t->quota[0], 2 * GiB);
    assert_int_equal(of(&ts, t)->src.quota[0], SETTING_RUNTIME);
    assert_int_equal(t->quota[1], 3 * GiB);
    struct sched_policy other = {.share = 0.1};
    assert_int_equal(tenant_set(&ts, &c, "team", KEEP, KEEP, &other), KAIROS_ERR_INVALID);
    assert_false(registry_policy(&ts.compute, t, 1, &pol));

    /* a reload of the same file: GPU 0 is the configuration's again, GPU 1's quota
     * set at run time is kept, compute and members as declared */
    reload(&ts, &c, TEAM);
    assert_ptr_equal(find(&ts, "team"), t);
    assert_int_equal(t->quota[0], GiB);
    assert_int_equal(of(&ts, t)->src.quota[0], SETTING_CONFIG);
    assert_int_equal(t->quota[1], 3 * GiB);
    assert_int_equal(of(&ts, t)->src.quota[1], SETTING_RUNTIME);
    assert_true(registry_policy(&ts.compute, t, 0, &pol));
    assert_int_equal(of(&ts, t)->members.n_users, 1);
    assert_int_equal(of(&ts, t)->members.users[0], 1000);

    /* a restart finds what the reload kept */
    tenants_fini(&ts);
    start(&ts, &c);
    t = find(&ts, "team");
    assert_int_equal(t->quota[0], GiB);
    assert_int_equal(of(&ts, t)->src.quota[0], SETTING_CONFIG);
    assert_int_equal(t->quota[1], 3 * GiB);
    assert_int_equal(of(&ts, t)->src.quota[1], SETTING_RUNTIME);
    assert_true(registry_policy(&ts.compute, t, 0, &pol));

    /* the configuration comes to declare GPU 1: it owns it; no longer declaring
     * it clears it (nothing set at run time is left to keep there) */
    reload(&ts, &c, "  - name: team\n    memory: { 0: 1G, 1: 4G }\n");
    assert_int_equal(t->quota[1], 4 * GiB);
    assert_int_equal(of(&ts, t)->src.quota[1], SETTING_CONFIG);
    assert_false(registry_policy(&ts.compute, t, 0, &pol)); /* the file declares none any more */
    assert_int_equal(of(&ts, t)->src.members, SETTING_CONFIG);
    assert_int_equal(of(&ts, t)->members.n_users, 0);
    reload(&ts, &c, "  - name: team\n    memory: { 0: 1G }\n");
    assert_int_equal(t->quota[1], 0);
    assert_int_equal(of(&ts, t)->src.quota[1], SETTING_UNSET);
    tenants_fini(&ts);
    config_free(&c);
}

static void test_state_round_trip_of_every_setting(void **state)
{
    (void)state;
    struct config c;
    struct tenants a, b;
    parse(&c, TEAM);
    start(&a, &c);
    struct sched_policy pol = {.share = 0.2, .limit = 0.5, .prio = SCHED_PRIO_LATENCY};
    assert_int_equal(tenant_set(&a, &c, "job", 5 * GiB, 7, &pol), 0);
    assert_int_equal(tenant_set(&a, &c, "team", KEEP, 6 * GiB, NULL), 0);
    struct ledger_tenant *job = find(&a, "job");
    struct member_rules r = {.n_users = 2, .users = {1000, 1001}, .n_groups = 1, .groups = {50},
                             .n_cgroups = 1};
    snprintf(r.cgroups[0], sizeof r.cgroups[0], "/slurm/job_*");
    assert_int_equal(registry_set_members(&a.settings, job, &r, SETTING_RUNTIME), 0);
    assert_int_equal(registry_set_managed(&a.settings, job, true, SETTING_RUNTIME), 0);
    job->flags = LEDGER_TENANT_EPHEMERAL;
    assert_int_equal(registry_set_owner(&a.settings, job, 4242, true), 0);
    char err[512];
    assert_int_equal(tenants_save_state(&a, NULL, err, sizeof err), 0);

    start(&b, &c);
    for (size_t i = 0; i < a.ledger.n_tenants; i++) {
        const struct ledger_tenant *x = a.ledger.tenants[i], *y = find(&b, x->name);
        const struct tenant_settings *sx = of(&a, x), *sy = of(&b, y);
        assert_int_equal(x->flags, y->flags);
        assert_int_equal(sx->owner_pid, sy->owner_pid);
        assert_memory_equal(x->quota, y->quota, sizeof x->quota);
        assert_memory_equal(&sx->src, &sy->src, sizeof sx->src);
        const struct compute_policies *cx = compute_book_find(&a.compute, x->id);
        const struct compute_policies *cy = compute_book_find(&b.compute, y->id);
        assert_true(!cx == !cy);
        for (unsigned g = 0; cx && g < KAIROS_MAX_GPUS; g++) {
            assert_int_equal(cx->has[g], cy->has[g]);
            assert_true(policy_equal(&cx->pol[g], &cy->pol[g]));
        }
        assert_memory_equal(&sx->members, &sy->members, sizeof sx->members);
        assert_int_equal(sx->managed_charge, sy->managed_charge);
    }
    assert_int_equal(a.ledger.n_tenants, b.ledger.n_tenants);
    job = find(&b, "job");
    assert_int_equal(of(&b, job)->src.compute[1], SETTING_RUNTIME);
    assert_int_equal(of(&b, job)->src.members, SETTING_RUNTIME);
    assert_int_equal(of(&b, job)->members.groups[0], 50);
    assert_string_equal(of(&b, job)->members.cgroups[0], "/slurm/job_*");
    assert_true(of(&b, job)->managed_charge);
    assert_int_equal(of(&b, job)->src.managed, SETTING_RUNTIME);
    assert_int_equal(find(&b, "team")->quota[1], 6 * GiB);
    assert_int_equal(of(&b, find(&b, "team"))->src.managed, SETTING_CONFIG);
    tenants_fini(&a);
    tenants_fini(&b);
    config_free(&c);
}

static void test_reload_removing_a_tenant_with_members(void **state)
{
    (void)state;
    struct config c;
    struct tenants ts;
    parse(&c, TEAM "  - name: idle\n    memory: { 0: 1G }\n");
    start(&ts, &c);
    assert_int_equal(tenant_set(&ts, &c, "job", GiB, 0, NULL), 0);
    struct ledger_tenant *t = find(&ts, "team");
    struct ledger_member *m;
    struct ledger_grant gr;
    assert_int_equal(ledger_join(&ts.ledger, t, 77, NULL, &m), 0);
    assert_int_equal(ledger_charge(&ts.ledger, m, 0, GiB / 2, 1, &gr), 0);
    assert_true(gr.granted);

    reload(&ts, &c, "  - name: other\n    memory: { 0: 1G }\n");
    assert_null(ledger_tenant_find(&ts.ledger, "idle")); /* no members: gone */
    assert_ptr_equal(find(&ts, "team"), t);              /* kept for its process */
    assert_int_equal(t->flags, LEDGER_TENANT_REMOVED);   /* marked removed (issue 25, 6) */
    char msg[256];
    assert_false(tenants_joinable(t, &c, msg, sizeof msg)); /* nobody joins it */
    assert_non_null(strstr(msg, "tenant 'team' was removed from the configuration"));
    assert_int_equal(t->held[0], GiB / 2);               /* nothing it holds lost */
    assert_int_equal(t->quota[0], GiB);                  /* and its quota still holds */
    assert_int_equal(of(&ts, t)->src.quota[0], SETTING_RUNTIME);  /* no longer the file's */
    assert_int_equal(of(&ts, t)->members.users[0], 1000);         /* its rules too */
    struct sched_policy pol;
    assert_false(registry_policy(&ts.compute, t, 0, &pol));           /* the file's share is gone */
    assert_int_equal(ledger_charge(&ts.ledger, m, 0, GiB / 2 + 1, 2, &gr), 0);
    assert_false(gr.granted);
    assert_int_equal(find(&ts, "job")->quota[0], GiB);   /* run-time tenants untouched */
    assert_non_null(find(&ts, "other"));

    /* its member leaves while the GPU still drains its memory: kept until that ends */
    t->draining[0] = GiB / 4;
    struct ledger_tenant *left = ledger_leave(&ts.ledger, m, NULL);
    assert_false(tenants_after_leave(&ts, left));
    assert_int_equal(tenants_sweep_removed(&ts), 0);
    assert_ptr_equal(find(&ts, "team"), t);
    t->draining[0] = 0;
    assert_int_equal(tenants_sweep_removed(&ts), 1);
    assert_null(ledger_tenant_find(&ts.ledger, "team"));
    assert_int_equal(ledger_check(&ts.ledger), 0);
    tenants_fini(&ts);
    config_free(&c);
}

/* issue 25, item 6: a removed tenant declared again is the file's again, joinable. */
static void test_a_removed_tenant_declared_again(void **state)
{
    (void)state;
    struct config c;
    struct tenants ts;
    parse(&c, TEAM);
    start(&ts, &c);
    struct ledger_tenant *t = find(&ts, "team");
    struct ledger_member *m;
    assert_int_equal(ledger_join(&ts.ledger, t, 77, NULL, &m), 0);
    reload(&ts, &c, "  []\n");
    assert_int_equal(t->flags, LEDGER_TENANT_REMOVED);
    reload(&ts, &c, TEAM);
    assert_ptr_equal(find(&ts, "team"), t);
    assert_int_equal(t->flags, LEDGER_TENANT_CONFIG);
    char msg[256];
    assert_true(tenants_joinable(t, &c, msg, sizeof msg));
    ledger_leave(&ts.ledger, m, NULL);
    assert_false(tenants_after_leave(&ts, t)); /* the file's: it stays */
    tenants_fini(&ts);
    config_free(&c);
}

static void test_a_runtime_tenant_the_configuration_comes_to_declare(void **state)
{
    (void)state;
    struct config c;
    struct tenants ts;
    parse(&c, "  []\n");
    start(&ts, &c);
    struct sched_policy pol = {.share = 0.4};
    assert_int_equal(tenant_set(&ts, &c, "job", 2 * GiB, 3 * GiB, &pol), 0);
    struct ledger_tenant *t = find(&ts, "job");
    assert_int_equal(of(&ts, t)->src.compute[1], SETTING_RUNTIME);
    reload(&ts, &c, "  - name: job\n    memory: { 0: 1G }\n");
    assert_int_equal(t->flags, LEDGER_TENANT_CONFIG);
    assert_int_equal(t->quota[0], GiB);
    assert_int_equal(t->quota[1], 3 * GiB); /* not declared: the run-time quota stays */
    struct sched_policy now;                /* compute is the configuration's as a whole: */
    assert_false(registry_policy(&ts.compute, t, 1, &now));
    /* and the shares it gave up are free for others */
    pol.share = 0.9;
    assert_int_equal(tenant_set(&ts, &c, "next", GiB, GiB, &pol), 0);
    tenants_fini(&ts);
    config_free(&c);
}

/* A tenant that goes takes its compute policies out of the book (compute_book.h), and
 * the shares they held are free again, and its settings record (settings_book.h)
 * goes with it; a tenant made again under its name has none. */
static void test_a_removed_tenant_leaves_no_policy(void **state)
{
    (void)state;
    struct config c;
    struct tenants ts;
    parse(&c, "  []\n");
    start(&ts, &c);
    struct sched_policy pol = {.share = 0.6}, now;
    assert_int_equal(tenant_set(&ts, &c, "job", GiB, GiB, &pol), 0);
    assert_int_equal(tenant_set(&ts, &c, "other", GiB, GiB, NULL), 0);
    uint32_t id = find(&ts, "job")->id;
    assert_non_null(compute_book_find(&ts.compute, id));
    assert_non_null(settings_book_entry(&ts.settings, id)); /* its quotas' sources */
    size_t records = ts.settings.ids.n;
    assert_int_equal(tenant_set(&ts, &c, "next", GiB, GiB, &pol), KAIROS_ERR_INVALID);
    assert_int_equal(ts.settings.ids.n, records); /* refused: no record left behind */
    char msg[512];
    assert_int_equal(tenants_del(&ts, "job", 0, msg, sizeof msg), 0);
    assert_null(compute_book_find(&ts.compute, id));
    assert_int_equal(ts.compute.ids.n, 0);
    assert_null(settings_book_entry(&ts.settings, id));
    assert_int_equal(ts.settings.ids.n, records - 1);
    assert_int_equal(tenant_set(&ts, &c, "next", GiB, GiB, &pol), 0); /* its share is free */
    assert_int_equal(tenant_set(&ts, &c, "job", GiB, GiB, NULL), 0);
    assert_false(registry_policy(&ts.compute, find(&ts, "job"), 1, &now));
    tenants_fini(&ts);
    config_free(&c);
}

/* TENANT_SET of a fault domain (with a quota of 1 GiB on GPU 0 for a new tenant);
 * the KAIROS_ERR_* code, kairosd's sentence in msg (256 bytes). */
static int set_domain(struct tenants *ts, const struct config *c, const char *name,
                      const char *domain, char *msg)
{
    struct kairos_tenant_set m;
    memset(&m, 0, sizeof m);
    snprintf(m.tenant, sizeof m.tenant, "%s", name);
    m.n_gpus = 2;
    m.quota[0] = ledger_tenant_find(&ts->ledger, name) ? KEEP : GiB;
    m.quota[1] = KEEP;
    bool changed;
    return tenants_set(ts, c, &m, domain, 0, 0, &changed, msg, 256);
}

static void expect_in(const char *msg, const char *part)
{
    if (!strstr(msg, part))
        fail_msg("expected '%s' in '%s'", part, msg);
}

#define WEB "  - name: web\n    memory: { 0: 1G }\n"

static void test_fault_domain_set_at_run_time(void **state)
{
    (void)state;
    struct config c;
    struct tenants ts;
    char msg[256];
    parse_with(&c, SPACE, WEB "    fault_domain: infer\n");
    start(&ts, &c);
    /* a declared domain, for a new tenant: set, from run time */
    assert_int_equal(set_domain(&ts, &c, "job", "infer", msg), 0);
    struct ledger_tenant *t = find(&ts, "job");
    assert_string_equal(of(&ts, t)->fault_domain, "infer");
    assert_int_equal(of(&ts, t)->src.fault_domain, SETTING_RUNTIME);
    expect_in(msg, "fault domain infer");
    /* a body of before (domain NULL) changes nothing */
    assert_int_equal(set_domain(&ts, &c, "job", NULL, msg), 0);
    assert_string_equal(of(&ts, t)->fault_domain, "infer");
    /* a domain the configuration does not declare: refused, saying what to do */
    assert_int_equal(set_domain(&ts, &c, "job", "plain", msg), KAIROS_ERR_INVALID);
    expect_in(msg, "fault domain 'plain' is not declared in test.yaml");
    expect_in(msg, "add it under space: domains: and reload kairosd");
    assert_string_equal(of(&ts, t)->fault_domain, "infer");
    assert_int_equal(set_domain(&ts, &c, "new", "plain", msg), KAIROS_ERR_INVALID);
    assert_null(ledger_tenant_find(&ts.ledger, "new")); /* not created either */
    /* a configured tenant's domain is the configuration's; its own again is no change */
    assert_int_equal(set_domain(&ts, &c, "web", "", msg), KAIROS_ERR_INVALID);
    expect_in(msg, "which sets its fault domain");
    assert_string_equal(of(&ts, find(&ts, "web"))->fault_domain, "infer");
    assert_int_equal(set_domain(&ts, &c, "web", "infer", msg), 0);
    /* a tenant with a process: its route is decided, so its domain stays */
    struct ledger_member *m;
    assert_int_equal(ledger_join(&ts.ledger, t, 77, NULL, &m), 0);
    assert_int_equal(set_domain(&ts, &c, "job", "", msg), KAIROS_ERR_BUSY);
    expect_in(msg, "tenant 'job' has 1 process(es), already routed (fault domain infer)");
    expect_in(msg, "stop them first");
    assert_string_equal(of(&ts, t)->fault_domain, "infer");
    assert_int_equal(set_domain(&ts, &c, "job", "infer", msg), 0); /* no change: fine */
    ledger_leave(&ts.ledger, m, NULL);
    /* none ("") takes it out, and back in */
    assert_int_equal(set_domain(&ts, &c, "job", "", msg), 0);
    assert_string_equal(of(&ts, t)->fault_domain, "");
    assert_int_equal(of(&ts, t)->src.fault_domain, SETTING_UNSET);
    assert_int_equal(set_domain(&ts, &c, "job", "infer", msg), 0);
    tenants_fini(&ts);
    config_free(&c);
}

static void test_fault_domain_kept_by_reload_and_restart(void **state)
{
    (void)state;
    struct config c;
    struct tenants ts;
    char msg[256];
    parse_with(&c, SPACE, WEB);
    start(&ts, &c);
    assert_int_equal(set_domain(&ts, &c, "job", "infer", msg), 0);
    /* a reload of the same file, then one that no longer declares the domain: kept */
    reload_with(&ts, &c, SPACE, WEB);
    assert_string_equal(of(&ts, find(&ts, "job"))->fault_domain, "infer");
    reload_with(&ts, &c, "", WEB);
    assert_string_equal(of(&ts, find(&ts, "job"))->fault_domain, "infer");
    assert_int_equal(of(&ts, find(&ts, "job"))->src.fault_domain, SETTING_RUNTIME);
    /* a restart finds it in the state file */
    tenants_fini(&ts);
    config_free(&c);
    parse_with(&c, SPACE, WEB);
    start(&ts, &c);
    struct ledger_tenant *t = find(&ts, "job");
    assert_string_equal(of(&ts, t)->fault_domain, "infer");
    assert_int_equal(of(&ts, t)->src.fault_domain, SETTING_RUNTIME);
    assert_string_equal(of(&ts, find(&ts, "web"))->fault_domain, "");
    /* the configuration comes to declare the tenant: its domain (none) replaces it */
    reload_with(&ts, &c, SPACE, "  - name: job\n    memory: { 0: 1G }\n");
    assert_string_equal(of(&ts, t)->fault_domain, "");
    assert_int_equal(of(&ts, t)->src.fault_domain, SETTING_UNSET);
    /* a configured tenant's domain is the configuration's, never one set at run time */
    reload_with(&ts, &c, SPACE, "  - name: job\n    memory: { 0: 1G }\n"
                                "    fault_domain: infer\n");
    assert_string_equal(of(&ts, t)->fault_domain, "infer");
    assert_int_equal(of(&ts, t)->src.fault_domain, SETTING_CONFIG);
    tenants_fini(&ts);
    config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_runtime_change_then_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_round_trip_of_every_setting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_removing_a_tenant_with_members, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_runtime_tenant_the_configuration_comes_to_declare,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_removed_tenant_declared_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_removed_tenant_leaves_no_policy, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fault_domain_set_at_run_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_domain_kept_by_reload_and_restart, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
