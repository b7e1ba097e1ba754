/* test_linger.c - a departed process's charge and the memory its GPU still shows
 * (linger.h), against in-memory GPUs and a clock the test sets (node_fakes.h): a
 * charge lingers while a GPU lists the process (or the holder check vouches) and is
 * released at the first check after neither does; nothing is kept without that
 * evidence or without a charge; what memory.used still shows after the release
 * drains within [slack, what was held] until it drops or the deadline passes; a
 * departure the GPU no longer lists drains on a recent enough sample only; a
 * lingering charge's credit is settled to the GPU's figure, never below the last
 * report; restored charges, the hooks, a tenant replaced while its memory drains,
 * GPU answers that fail or say "unknown", and thousands of departures at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "node_fakes.h"

#include "daemon/memory/credit.h"
#include "daemon/memory/linger.h"
#include "daemon/base/loop.h"
#include "daemon/tenants/tenants.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static struct tenants ts;
static struct loop *loop;
static struct linger_set *lg;
static struct ledger_tenant *T; /* tenant "a", 4 GiB on each of 2 GPUs */
static unsigned changes, removals;

static void on_changed(void *ctx)
{
    (void)ctx;
    changes++;
}

static void on_removed(void *ctx)
{
    (void)ctx;
    removals++;
}

static bool after_leave(void *ctx, struct ledger_tenant *t)
{
    return tenants_after_leave(ctx, t);
}

static uint32_t holder_of; /* the pid whose files the holder check says live on */

static bool holds(void *ctx, uint32_t pid)
{
    (void)ctx;
    return pid && pid == holder_of;
}

/* linger over ts's ledger, with gpu (NULL: none). */
static int start_linger(struct gpu_backend *gpu)
{
    struct linger_deps deps = {.loop = loop, .gpu = gpu, .ledger = &ts.ledger,
                               .n_gpus = ts.n_gpus, .after_leave = after_leave,
                               .after_leave_ctx = &ts, .holds = holds};
    return linger_init(&lg, &deps);
}

static int setup(void **state)
{
    (void)state;
    fake_gpu_reset();
    fake_now = 1000000;
    changes = removals = 0;
    assert_int_equal(tenants_init(&ts, 2, "/nonexistent/state.json"), 0);
    uint64_t quota[KAIROS_MAX_GPUS] = {4 * GiB, 4 * GiB};
    assert_int_equal(ledger_tenant_add(&ts.ledger, "a", quota, LEDGER_TENANT_CONFIG, &T), 0);
    assert_int_equal(loop_init(&loop), 0);
    assert_int_equal(start_linger(&fake_gpu_backend), 0);
    linger_set_clock(lg, fake_clock, NULL);
    linger_set_changed_hook(lg, on_changed, NULL);
    linger_set_removed_hook(lg, on_removed, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    linger_fini(lg);
    lg = NULL;
    int rc = ledger_check(&ts.ledger);
    tenants_fini(&ts);
    loop_fini(loop);
    fake_gpu_free();
    return rc;
}

/* Without a GPU backend: only the holder check can keep a charge. */
static void without_backend(void)
{
    linger_fini(lg);
    assert_int_equal(start_linger(NULL), 0);
    linger_set_clock(lg, fake_clock, NULL);
}

static struct ledger_member *join(struct ledger_tenant *t, uint32_t pid, uint64_t g0,
                                  uint64_t g1)
{
    uint64_t held[KAIROS_MAX_GPUS] = {g0, g1};
    struct ledger_member *m = NULL;
    assert_int_equal(ledger_join(&ts.ledger, t, pid, held, &m), 0);
    return m;
}

/* What handle_members.c does when member m's connection closes: lingers with its credit
 * folded in, or is released now (true: it lingers). */
static bool depart(struct ledger_member *m, uint32_t pid)
{
    if (linger_keep(lg, m, pid)) {
        credit_fold(m);
        return true;
    }
    credit_drop(m);
    tenants_after_leave(&ts, ledger_leave(&ts.ledger, m, NULL));
    return false;
}

static void test_a_charge_lingers_while_the_gpu_lists_its_process(void **state)
{
    (void)state;
    struct ledger_member *m = join(T, 100, GiB, 0);
    fake_gpu_list(0, 100, GiB);
    fake_gpus[0].used = GiB;
    assert_true(depart(m, 100));
    assert_int_equal(linger_count(lg), 1);
    assert_ptr_equal(linger_member_of(lg, 100), m);
    assert_true(linger_has(lg, m));
    assert_int_equal(linger_departed_ms(lg, m), fake_now);
    assert_int_equal(changes, 1);
    /* still listed: the charge stays at each check */
    fake_now += LINGER_CHECK_MS;
    linger_check(lg);
    assert_int_equal(linger_count(lg), 1);
    assert_int_equal(T->held[0], GiB);
    assert_int_equal(T->n_members, 1);
    /* the GPU forgot it and memory.used dropped: released, nothing drains */
    fake_gpu_forget(0, 100);
    fake_gpus[0].used = 0;
    fake_now += LINGER_CHECK_MS;
    linger_check(lg);
    assert_int_equal(linger_count(lg), 0);
    assert_null(linger_member_of(lg, 100));
    assert_int_equal(T->held[0], 0);
    assert_int_equal(T->n_members, 0);
    assert_int_equal(T->draining[0], 0);
    assert_int_equal(linger_draining(lg), 0);
    assert_int_equal(changes, 2);
}

static void test_nothing_lingers_without_evidence_or_charge(void **state)
{
    (void)state;
    /* the GPU does not list it: released at once */
    assert_false(depart(join(T, 101, GiB, 0), 101));
    /* listed with memory, but charged nothing (no holdings, no credit) */
    fake_gpu_list(0, 102, 10 * MiB);
    assert_false(depart(join(T, 102, 0, 0), 102));
    /* listed, but with no memory in use */
    fake_gpu_list(0, 103, 0);
    assert_false(depart(join(T, 103, GiB, 0), 103));
    assert_int_equal(linger_count(lg), 0);
    assert_int_equal(T->n_members, 0);
    assert_int_equal(T->held[0], 0);
    /* listed with its memory unknown: that is evidence enough */
    fake_gpu_list_unknown(1, 104);
    assert_true(depart(join(T, 104, 0, MiB), 104));
    /* charged only credit (it may have allocated from it since its last report) */
    struct ledger_member *m = join(T, 105, 0, 0);
    m->credit[1] = 64 * MiB;
    T->credit[1] += 64 * MiB;
    fake_gpu_list(1, 105, 64 * MiB);
    assert_true(depart(m, 105));
    assert_int_equal(m->held[1], 64 * MiB);
    assert_int_equal(linger_count(lg), 2);
}

static void test_without_backend_only_the_holder_check_keeps(void **state)
{
    (void)state;
    without_backend();
    fake_gpu_list(0, 200, GiB); /* no backend: never asked */
    assert_false(depart(join(T, 200, GiB, 0), 200)); /* the check holds nothing of 200 */
    holder_of = 201;
    struct ledger_member *m = join(T, 201, GiB, 0);
    assert_true(depart(m, 201));
    linger_check(lg);
    assert_int_equal(linger_count(lg), 1);
    holder_of = 0;
    linger_check(lg);
    assert_int_equal(linger_count(lg), 0);
    assert_int_equal(T->held[0], 0);
    assert_int_equal(T->n_members, 0);
    assert_int_equal(linger_draining(lg), 0);
}

/* pid 100 holds held on GPU 0 and lingers; the GPU lists it, memory.used is its
 * memory and the driver's own 100 MiB. */
static struct ledger_member *lingering_on_gpu0(uint32_t pid, uint64_t held)
{
    struct ledger_member *m = join(T, pid, held, 0);
    fake_gpu_list(0, pid, held);
    fake_gpus[0].used = held + 100 * MiB;
    assert_true(depart(m, pid));
    return m;
}

static void test_released_memory_drains_until_memory_used_drops(void **state)
{
    (void)state;
    lingering_on_gpu0(100, GiB);
    /* the GPU forgets the process before its memory.used drops */
    fake_gpu_forget(0, 100);
    linger_check(lg);
    assert_int_equal(linger_count(lg), 0);
    assert_int_equal(T->held[0], 0);
    assert_int_equal(T->draining[0], GiB);
    assert_int_equal(linger_draining(lg), 1);
    /* memory.used shows half of it: half drains */
    fake_gpus[0].used = 100 * MiB + GiB / 2;
    linger_check(lg);
    assert_int_equal(T->draining[0], GiB / 2);
    /* back to the driver's own: the tenant's room comes back */
    fake_gpus[0].used = 100 * MiB;
    linger_check(lg);
    assert_int_equal(T->draining[0], 0);
    assert_int_equal(linger_draining(lg), 0);
}

static void test_a_drain_ends_at_its_deadline_and_says_so(void **state)
{
    (void)state;
    lingering_on_gpu0(100, GiB);
    fake_gpu_forget(0, 100);
    linger_check(lg);
    assert_int_equal(T->draining[0], GiB);
    fake_now += LINGER_DRAIN_MAX_MS - 1;
    linger_check(lg);
    assert_int_equal(T->draining[0], GiB);
    fake_now += 1;
    log_capture_begin();
    linger_check(lg);
    log_capture_end();
    assert_int_equal(T->draining[0], 0);
    assert_int_equal(linger_draining(lg), 0);
    assert_int_equal(log_count("warn", "tenant a: GPU 0's memory.used still shows 1.00 GiB of "
                               "departed pid 100 after 2000 ms", NULL), 1);
}

static void test_a_drain_is_at_most_what_was_held_and_above_the_slack(void **state)
{
    (void)state;
    /* 256 MiB held on GPU 0, 1 GiB on GPU 1 */
    struct ledger_member *m = join(T, 100, 256 * MiB, GiB);
    fake_gpu_list(0, 100, 256 * MiB);
    fake_gpu_list(1, 100, GiB);
    fake_gpus[0].used = 256 * MiB;
    fake_gpus[1].used = GiB;
    assert_true(depart(m, 100));
    fake_gpu_forget(0, 100);
    fake_gpu_forget(1, 100);
    fake_gpus[0].used = 2 * GiB;               /* more than it held appeared */
    fake_gpus[1].used = LINGER_DRAIN_SLACK - 1; /* a context's few MiB */
    linger_check(lg);
    assert_int_equal(T->draining[0], 256 * MiB);
    assert_int_equal(T->draining[1], 0);
    assert_int_equal(linger_draining(lg), 1);
    /* exactly the slack drains */
    m = join(T, 101, 0, GiB);
    fake_gpu_list(1, 101, GiB);
    fake_gpus[1].used = GiB;
    assert_true(depart(m, 101));
    fake_gpu_forget(1, 101);
    fake_gpus[1].used = LINGER_DRAIN_SLACK;
    linger_check(lg);
    assert_int_equal(T->draining[1], LINGER_DRAIN_SLACK);
    assert_int_equal(linger_draining(lg), 2);
}

static void test_an_unlisted_departure_drains_on_a_recent_sample_only(void **state)
{
    (void)state;
    struct ledger_member *m0 = join(T, 300, 512 * MiB, 0);
    struct ledger_member *m1 = join(T, 301, 0, 512 * MiB);
    fake_gpu_list(0, 300, 512 * MiB);
    fake_gpu_list(1, 301, 512 * MiB);
    fake_gpus[0].used = fake_gpus[1].used = 512 * MiB;
    linger_check(lg); /* with members: each GPU sampled */
    /* the GPUs forget both before they depart; memory.used still shows them */
    fake_gpu_forget(0, 300);
    fake_gpu_forget(1, 301);
    fake_now += LINGER_BASELINE_MAX_AGE_MS;
    assert_false(depart(m0, 300));
    assert_int_equal(T->draining[0], 512 * MiB);
    fake_now += 1;
    assert_false(depart(m1, 301));
    assert_int_equal(T->draining[1], 0);
    assert_int_equal(linger_draining(lg), 1);
    assert_int_equal(T->n_members, 0);
    assert_int_equal(linger_count(lg), 0);
}

static void test_credit_is_settled_to_the_gpu_never_below_the_report(void **state)
{
    (void)state;
    /* reported 100 MiB, with 400 MiB of credit it may have used before exec */
    struct ledger_member *m = join(T, 400, 100 * MiB, 0);
    m->credit[0] = 400 * MiB;
    T->credit[0] += 400 * MiB;
    fake_gpu_list(0, 400, 250 * MiB);
    fake_gpus[0].used = 250 * MiB;
    assert_true(depart(m, 400));
    assert_int_equal(m->held[0], 500 * MiB);
    linger_check(lg);
    assert_int_equal(m->held[0], 250 * MiB);
    assert_int_equal(T->held[0], 250 * MiB);
    /* the GPU's figure below the report: the report stands */
    fake_gpu_list(0, 400, 50 * MiB);
    linger_check(lg);
    assert_int_equal(m->held[0], 100 * MiB);
    assert_int_equal(T->held[0], 100 * MiB);
    /* and never raised by it */
    fake_gpu_list(0, 400, GiB);
    linger_check(lg);
    assert_int_equal(m->held[0], 100 * MiB);
}

static void test_a_restored_charge_lingers_when_vouched_or_listed(void **state)
{
    (void)state;
    uint64_t held[KAIROS_MAX_GPUS] = {64 * MiB, 0};
    assert_true(linger_restore(lg, T, 500, held, true));
    assert_int_equal(linger_count(lg), 1);
    assert_int_equal(T->held[0], 64 * MiB);
    assert_int_equal(changes, 1);
    /* the same pid twice: charged once */
    assert_false(linger_restore(lg, T, 500, held, true));
    /* neither vouched nor listed: nothing charged */
    assert_false(linger_restore(lg, T, 501, held, false));
    assert_int_equal(T->held[0], 64 * MiB);
    assert_int_equal(T->n_members, 1);
    fake_gpu_list(0, 502, 64 * MiB);
    assert_true(linger_restore(lg, T, 502, held, false));
    assert_int_equal(linger_count(lg), 2);
    uint32_t pid = 0;
    assert_non_null(linger_at(lg, 1, &pid));
    assert_true(pid == 500 || pid == 502);
    assert_null(linger_at(lg, 2, &pid));
    /* 500 was vouched for, not listed: released at the first check */
    linger_check(lg);
    assert_int_equal(linger_count(lg), 1);
    assert_non_null(linger_member_of(lg, 502));
    assert_int_equal(changes, 3);
}

static void test_an_ephemeral_tenant_removed_by_a_release_drains_nothing(void **state)
{
    (void)state;
    struct ledger_tenant *e = NULL;
    uint64_t quota[KAIROS_MAX_GPUS] = {4 * GiB, 4 * GiB};
    assert_int_equal(ledger_tenant_add(&ts.ledger, "e", quota, LEDGER_TENANT_EPHEMERAL, &e), 0);
    struct ledger_member *m = join(e, 600, GiB, 0);
    fake_gpu_list(0, 600, GiB);
    fake_gpus[0].used = GiB;
    assert_true(depart(m, 600));
    fake_gpu_forget(0, 600); /* memory.used still shows it */
    linger_check(lg);
    assert_int_equal(removals, 1);
    assert_null(ledger_tenant_find(&ts.ledger, "e"));
    assert_int_equal(linger_draining(lg), 0);
}

static void test_a_tenant_replaced_while_draining_is_not_charged(void **state)
{
    (void)state;
    lingering_on_gpu0(100, GiB);
    fake_gpu_forget(0, 100);
    linger_check(lg);
    assert_int_equal(linger_draining(lg), 1);
    /* tenant a is removed and declared again: a new tenant of the same name */
    assert_int_equal(ledger_tenant_remove(&ts.ledger, T), 0);
    uint64_t quota[KAIROS_MAX_GPUS] = {4 * GiB, 4 * GiB};
    assert_int_equal(ledger_tenant_add(&ts.ledger, "a", quota, LEDGER_TENANT_CONFIG, &T), 0);
    linger_check(lg);
    assert_int_equal(linger_draining(lg), 0);
    assert_int_equal(T->draining[0], 0);
}

static void test_failing_or_unknown_gpu_answers_drain_nothing(void **state)
{
    (void)state;
    /* listed with its memory unknown: lingers, but no sample to compare with */
    struct ledger_member *m = join(T, 700, GiB, 0);
    fake_gpu_list_unknown(0, 700);
    assert_true(depart(m, 700));
    fake_gpu_forget(0, 700);
    fake_gpus[0].used = 2 * GiB;
    linger_check(lg);
    assert_int_equal(linger_count(lg), 0);
    assert_int_equal(T->draining[0], 0);
    /* memory.used cannot be read when it is released */
    m = join(T, 701, GiB, 0);
    fake_gpu_list(0, 701, GiB);
    fake_gpus[0].used = GiB;
    assert_true(depart(m, 701));
    fake_gpu_forget(0, 701);
    fake_gpus[0].used = 2 * GiB;
    fake_gpus[0].status_fails = true;
    linger_check(lg);
    assert_int_equal(linger_count(lg), 0);
    assert_int_equal(T->draining[0], 0);
    /* the process list cannot be read when it departs: released at once */
    fake_gpus[0].status_fails = false;
    m = join(T, 702, GiB, 0);
    fake_gpu_list(0, 702, GiB);
    fake_gpus[0].list_fails = true;
    assert_false(depart(m, 702));
    assert_int_equal(T->n_members, 0);
    assert_int_equal(linger_draining(lg), 0);
}

#define MANY 3000u

static void test_thousands_of_departures_stay_bounded_by_the_evidence(void **state)
{
    (void)state;
    struct ledger_member **m = calloc(MANY, sizeof *m);
    assert_non_null(m);
    /* none listed: none kept */
    for (uint32_t i = 0; i < MANY; i++)
        assert_false(depart(join(T, 10000 + i, MiB, 0), 10000 + i));
    assert_int_equal(linger_count(lg), 0);
    assert_int_equal(T->n_members, 0);
    /* all listed: all kept, then all released by one check */
    fake_gpus[0].used = MANY * MiB;
    for (uint32_t i = 0; i < MANY; i++) {
        m[i] = join(T, 20000 + i, MiB, 0);
        fake_gpu_list(0, 20000 + i, MiB);
    }
    for (uint32_t i = 0; i < MANY; i++)
        assert_true(depart(m[i], 20000 + i));
    assert_int_equal(linger_count(lg), MANY);
    fake_gpus[0].n_procs = 0;
    fake_gpus[0].used = 0;
    linger_check(lg);
    assert_int_equal(linger_count(lg), 0);
    assert_int_equal(T->n_members, 0);
    assert_int_equal(T->held[0], 0);
    assert_int_equal(linger_draining(lg), 0);
    free(m);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_a_charge_lingers_while_the_gpu_lists_its_process),
        TEST(test_nothing_lingers_without_evidence_or_charge),
        TEST(test_without_backend_only_the_holder_check_keeps),
        TEST(test_released_memory_drains_until_memory_used_drops),
        TEST(test_a_drain_ends_at_its_deadline_and_says_so),
        TEST(test_a_drain_is_at_most_what_was_held_and_above_the_slack),
        TEST(test_an_unlisted_departure_drains_on_a_recent_sample_only),
        TEST(test_credit_is_settled_to_the_gpu_never_below_the_report),
        TEST(test_a_restored_charge_lingers_when_vouched_or_listed),
        TEST(test_an_ephemeral_tenant_removed_by_a_release_drains_nothing),
        TEST(test_a_tenant_replaced_while_draining_is_not_charged),
        TEST(test_failing_or_unknown_gpu_answers_drain_nothing),
        TEST(test_thousands_of_departures_stay_bounded_by_the_evidence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
