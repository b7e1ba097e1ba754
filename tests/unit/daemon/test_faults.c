/* test_faults.c - who caused a GPU fault and who lost work to it (space/faults.h): an
 * Xid naming a process of a tenant in no fault domain blames that tenant and costs
 * nobody else; one naming a domain's member or its MPS server blames nobody by name
 * (under MPS the driver names a client, not the culprit) and costs every tenant of the
 * domain with memory on that GPU its work, unless only one is there; one naming a
 * process outside every tenant, or none, counts for no tenant; the driver's further
 * lines of the same event count nothing more; a tenant that is gone loses its record
 * when room is needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "fake_proc.h"

#include "daemon/memory/ledger.h"
#include "daemon/space/faults.h"
#include "daemon/space/mps_domains.h"
#include "daemon/tenants/settings_book.h"

struct fixture {
    struct ledger l;
    struct settings_book s; /* the tenants' fault domains */
    struct faults f;
    struct mps_domains m;
    struct mps_daemon d;
    struct ledger_tenant *a, *b, *c, *solo;
};

static struct fixture fx;

/* Tenant name in domain (""), with member pid holding bytes on GPU gpu. */
static struct ledger_tenant *tenant(const char *name, const char *domain, uint32_t pid,
                                    unsigned gpu, uint64_t bytes)
{
    uint64_t quota[KAIROS_MAX_GPUS] = {1ull << 30, 1ull << 30};
    struct ledger_tenant *t;
    assert_int_equal(ledger_tenant_add(&fx.l, name, quota, 0, &t), 0);
    struct tenant_settings *r;
    assert_int_equal(settings_book_get(&fx.s, t->id, &r), 0);
    snprintf(r->fault_domain, sizeof r->fault_domain, "%s", domain);
    uint64_t held[KAIROS_MAX_GPUS] = {0};
    held[gpu] = bytes;
    struct ledger_member *m;
    assert_int_equal(ledger_join(&fx.l, t, pid, held, &m), 0);
    return t;
}

static int setup(void **state)
{
    fake_proc_setup(state);
    memset(&fx, 0, sizeof fx);
    assert_int_equal(ledger_init(&fx.l, 2), 0);
    settings_book_init(&fx.s);
    faults_init(&fx.f);
    fx.a = tenant("a", "inf", 101, 0, 1 << 20);
    fx.b = tenant("b", "inf", 102, 0, 1 << 20);
    fx.c = tenant("c", "inf", 103, 1, 1 << 20);   /* the same domain, the other GPU */
    fx.solo = tenant("solo", "", 104, 0, 1 << 20); /* time sharing on GPU 0 */
    snprintf(fx.d.domain, sizeof fx.d.domain, "inf");
    fx.d.pid = 500;
    fx.d.pidfd = -1;
    fx.m.v[0] = &fx.d;
    fx.m.n = 1;
    fake_proc_add(600, 500, 10, NULL); /* the MPS server of domain inf */
    fake_proc_add(700, 1, 10, NULL);   /* a process of no tenant */
    return 0;
}

static int teardown(void **state)
{
    faults_fini(&fx.f);
    while (fx.l.members) {
        struct ledger_member *m = fx.l.members;
        ledger_leave(&fx.l, m, NULL);
    }
    ledger_fini(&fx.l);
    settings_book_fini(&fx.s);
    return fake_proc_teardown(state);
}

static char line[1024];
static struct fault_domain_event event; /* the last report's */

static void xid(unsigned code, uint32_t pid, uint32_t gpu, uint64_t mono_ms)
{
    struct xid_report x = {.xid = code, .pid = pid};
    snprintf(x.name, sizeof x.name, "python3");
    struct fault_context c = {.gpu = gpu, .mono_ms = mono_ms, .unix_ms = 1700000000000ull + mono_ms,
                              .proc = fake_proc_root};
    faults_on_xid(&fx.f, &fx.l, &fx.s, &fx.m, &x, &c, &event, line, sizeof line);
}

static uint64_t caused(const char *t)
{
    const struct fault_record *r = faults_find(&fx.f, t);
    return r ? r->caused : 0;
}

static uint64_t lost(const char *t)
{
    const struct fault_record *r = faults_find(&fx.f, t);
    return r ? r->lost : 0;
}

/* On an H100 the Xid of a client's fault under MPS named the server's first client, an
 * innocent neighbour (bench/results/2026-12-07-h100-mps-fault): a report naming a
 * domain's member blames nobody by name and costs the domain's tenants on that GPU
 * their work, the one it names included. */
static void test_a_domain_members_report_blames_nobody_by_name(void **state)
{
    (void)state;
    xid(31, 101, 0, 1000);
    assert_int_equal(caused("a") + caused("b") + caused("c"), 0);
    assert_int_equal(lost("a"), 1);
    assert_int_equal(lost("b"), 1);          /* the same server on GPU 0 */
    assert_int_equal(lost("c"), 0);          /* its process is on GPU 1 */
    assert_null(faults_find(&fx.f, "solo")); /* no domain: not its server */
    assert_non_null(strstr(line, "in fault domain inf: one of its clients caused it and the "
                                 "driver does not say which (it names process 101 (python3) "
                                 "of tenant a, the one it names under MPS"));
    assert_non_null(strstr(line, "; a, b lost their work"));
    const struct fault_record *r = faults_find(&fx.f, "b");
    assert_int_equal(r->last_xid, 31);
    assert_int_equal(r->last_gpu, 0);
    assert_false(r->last_caused);
    assert_int_equal(fx.f.outside, 0);
}

/* Further lines within FAULTS_SAME_EVENT_MS are the same event: nothing more counts. */
static void test_the_same_events_further_lines_count_nothing_more(void **state)
{
    (void)state;
    xid(13, 101, 0, 1000);
    xid(43, 102, 0, 1000 + FAULTS_SAME_EVENT_MS / 2);
    assert_int_equal(caused("a") + caused("b"), 0);
    assert_int_equal(lost("a"), 1);
    assert_int_equal(lost("b"), 1);
    assert_non_null(strstr(line, "the same event as the report before (the driver names "
                                 "process 102 (python3) of tenant b)"));
    /* later, a new event */
    xid(13, 102, 0, 1000 + 3 * FAULTS_SAME_EVENT_MS);
    assert_int_equal(lost("a"), 2);
    assert_int_equal(lost("b"), 2);
}

static void test_an_mps_server_names_no_culprit(void **state)
{
    (void)state;
    xid(31, 600, 0, 1000);
    assert_int_equal(caused("a") + caused("b") + caused("c"), 0);
    assert_int_equal(lost("a"), 1);
    assert_int_equal(lost("b"), 1);
    assert_int_equal(lost("c"), 0);
    assert_non_null(strstr(line, "in fault domain inf: one of its clients caused it and the "
                                 "driver does not say which (it names the domain's MPS "
                                 "server (pid 600)); a, b lost their work"));
}

/* The domain's only tenant on the GPU is the culprit, whoever the report names; a
 * domain with nobody on that GPU loses nothing. */
static void test_the_only_tenant_of_the_domain_there_caused_it(void **state)
{
    (void)state;
    xid(31, 600, 1, 1000);
    assert_int_equal(caused("c"), 1);
    assert_int_equal(lost("c") + lost("a") + lost("b"), 0);
    assert_non_null(strstr(line, "tenant c caused it, the domain's only tenant with a "
                                 "process there (the driver names the domain's MPS server "
                                 "(pid 600))"));
    struct ledger_member *m = fx.l.members;
    while (m && m->pid != 103)
        m = m->next;
    assert_non_null(m);
    ledger_leave(&fx.l, m, NULL);
    xid(31, 600, 1, 1000 + 3 * FAULTS_SAME_EVENT_MS);
    assert_int_equal(caused("c"), 1);
    assert_non_null(strstr(line, "no tenant of the domain has a process there"));
}

static void test_a_time_tenant_costs_nobody_else(void **state)
{
    (void)state;
    xid(13, 104, 0, 1000);
    assert_int_equal(caused("solo"), 1);
    assert_int_equal(lost("a") + lost("b") + lost("c"), 0);
}

static void test_outside_every_tenant(void **state)
{
    (void)state;
    xid(13, 700, 0, 1000);
    assert_non_null(strstr(line, "process 700 (python3) is in no tenant"));
    xid(79, 0, FAULTS_GPU_UNKNOWN, 5000);
    assert_non_null(strstr(line, "the driver named no process"));
    assert_int_equal(fx.f.outside, 2);
    assert_int_equal(fx.f.total, 2);
    assert_int_equal(fx.f.n, 0);
}

/* An unknown GPU: every domain member with memory anywhere lost work. */
static void test_an_unknown_gpu_counts_every_gpu(void **state)
{
    (void)state;
    xid(13, 101, FAULTS_GPU_UNKNOWN, 1000);
    assert_int_equal(lost("a"), 1);
    assert_int_equal(lost("b"), 1);
    assert_int_equal(lost("c"), 1);
}

static void test_records_of_gone_tenants_make_room(void **state)
{
    (void)state;
    xid(13, 104, 0, 1000); /* solo's record */
    struct ledger_member *m = fx.l.members;
    while (m && m->pid != 104)
        m = m->next;
    assert_non_null(m);
    ledger_leave(&fx.l, m, NULL);
    assert_int_equal(ledger_tenant_remove(&fx.l, fx.solo), 0);
    /* fill the records' room with others until it must grow: solo's goes */
    size_t cap = fx.f.cap;
    char name[16];
    for (size_t i = 0; fx.f.n < cap; i++) {
        snprintf(name, sizeof name, "t%zu", i);
        tenant(name, "", (uint32_t)(2000 + i), 0, 1);
        xid(13, (uint32_t)(2000 + i), 0, 1000);
    }
    tenant("last", "", 3000, 0, 1);
    xid(13, 3000, 0, 1000);
    assert_null(faults_find(&fx.f, "solo"));
    assert_int_equal(caused("last"), 1);
    assert_true(fx.f.n <= fx.l.n_tenants);
}

/* What a recovery acts on (fault_recovery.h): the first report of an event in a domain
 * on a known GPU, and the domain's processes with memory there; never a repeat, a
 * fault outside every domain or one of a GPU kairosd does not know. */
static void test_an_event_in_a_domain_is_told_with_its_members_there(void **state)
{
    (void)state;
    xid(31, 101, 0, 1000);
    assert_true(event.set);
    assert_string_equal(event.domain, "inf");
    assert_int_equal(event.gpu, 0);
    uint32_t pids[4];
    assert_int_equal(faults_domain_members_on(&fx.l, &fx.s, "inf", 0, pids, 4), 2);
    assert_true((pids[0] == 101 && pids[1] == 102) || (pids[0] == 102 && pids[1] == 101));
    assert_int_equal(faults_domain_members_on(&fx.l, &fx.s, "inf", 1, pids, 4), 1);
    assert_int_equal(pids[0], 103);
    assert_int_equal(faults_domain_members_on(&fx.l, &fx.s, "inf", 0, pids, 1), 2); /* cut */
    assert_int_equal(faults_domain_members_on(&fx.l, &fx.s, "other", 0, pids, 4), 0);
    xid(43, 102, 0, 1000 + FAULTS_SAME_EVENT_MS / 2); /* the same event */
    assert_false(event.set);
    xid(13, 104, 0, 5000); /* solo, in no domain */
    assert_false(event.set);
    xid(13, 101, FAULTS_GPU_UNKNOWN, 9000);
    assert_false(event.set);
    xid(31, 600, 1, 20000); /* the server, on GPU 1: c's own fault, an event too */
    assert_true(event.set);
    assert_int_equal(event.gpu, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_domain_members_report_blames_nobody_by_name,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_same_events_further_lines_count_nothing_more,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_mps_server_names_no_culprit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_only_tenant_of_the_domain_there_caused_it,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_time_tenant_costs_nobody_else, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outside_every_tenant, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_unknown_gpu_counts_every_gpu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_of_gone_tenants_make_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_event_in_a_domain_is_told_with_its_members_there,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
