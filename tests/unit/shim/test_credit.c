/* test_credit.c - a process's credit arithmetic (src/shim/credit.c): allocations
 * within credit need no message, asking ahead below half a chunk, a waiting
 * allocation named in a request and refused only by the answer that covered it,
 * frees kept up to two chunks (all of them near the quota alone, none while members
 * contend), a recall giving all unused credit back, a revocation said back on every
 * message until one is answered, a message that could not be sent undone, a
 * reattach claim. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shim/credit.h"

#define MiB (1ull << 20)

/* kairosd's answer to m: granted, the chunk, flags. */
static void answer(struct credit_gpu *c, const struct kairos_credit *m, uint64_t granted,
                   uint32_t flags)
{
    struct kairos_credit r = {.gpu = m->gpu, .flags = flags, .report = m->report,
                              .held = m->held, .need = granted, .least = 4 * MiB,
                              .quota = 64 * MiB};
    credit_on_reply(c, &r, 0);
}

static void test_first_allocation_asks_then_none_do(void **state)
{
    (void)state;
    struct credit_gpu c = {0};
    struct kairos_credit m;
    bool request;
    assert_false(credit_take(&c, 2 * MiB));
    assert_false(credit_has_message(&c, &request)); /* nothing to say before a wait */
    uint64_t gen = credit_wait_begin(&c, 2 * MiB);
    assert_true(credit_next_message(&c, 0, &m));
    assert_int_equal(m.need, 2 * MiB);
    assert_int_equal(m.least, 2 * MiB);
    assert_true(m.flags & KAIROS_CREDIT_AHEAD);
    assert_true(c.asking);
    assert_false(credit_next_message(&c, 0, &m)); /* one request at a time */
    answer(&c, &m, 6 * MiB, 0);
    assert_false(credit_wait_refused(&c, gen));
    assert_true(credit_take(&c, 2 * MiB));
    credit_wait_end(&c, 2 * MiB);
    /* 4 MiB left: above half a chunk, nothing to ask; a report of held is due */
    assert_true(credit_has_message(&c, &request));
    assert_false(request);
    assert_true(credit_take(&c, 2 * MiB));   /* no message needed to allocate */
    assert_true(credit_has_message(&c, &request));
    assert_false(request);                    /* 2 MiB left: not below half of 4 */
    assert_true(credit_take(&c, 2 * MiB));
    assert_true(credit_has_message(&c, &request));
    assert_true(request);                     /* 0 left: ask ahead */
    assert_true(credit_next_message(&c, 0, &m));
    assert_int_equal(m.need, 0);
    assert_int_equal(m.held, 6 * MiB);
    assert_true(m.flags & KAIROS_CREDIT_AHEAD);
}

static void test_refused_only_by_the_answer_that_covered_it(void **state)
{
    (void)state;
    struct credit_gpu c = {.chunk = 4 * MiB, .exact = true};
    struct kairos_credit m;
    uint64_t first = credit_wait_begin(&c, 2 * MiB);
    assert_true(credit_next_message(&c, 0, &m));
    assert_false(m.flags & KAIROS_CREDIT_AHEAD); /* near the quota: exactly the need */
    uint64_t second = credit_wait_begin(&c, 4 * MiB); /* after the request left */
    answer(&c, &m, 0, KAIROS_CREDIT_REFUSED | KAIROS_CREDIT_EXACT);
    assert_true(credit_wait_refused(&c, first));
    assert_false(credit_wait_refused(&c, second)); /* it asks again */
    credit_wait_end(&c, 2 * MiB);
    assert_true(credit_next_message(&c, 0, &m));
    assert_int_equal(m.need, 4 * MiB);
    assert_true(m.least >= 1 && m.least <= m.need);
}

static void test_frees_kept_up_to_two_chunks(void **state)
{
    (void)state;
    struct credit_gpu c = {.chunk = 4 * MiB, .credit = 0, .held = 20 * MiB};
    credit_release(&c, 12 * MiB);
    assert_int_equal(c.held, 8 * MiB);
    assert_int_equal(c.credit, 8 * MiB);      /* two chunks kept */
    assert_int_equal(c.returning, 4 * MiB);   /* the rest given back */
    c.exact = true;                           /* near the quota: none kept */
    credit_release(&c, 2 * MiB);
    assert_int_equal(c.credit, 0);
    assert_int_equal(c.returning, 4 * MiB + 10 * MiB);
    struct kairos_credit m;
    assert_true(credit_next_message(&c, 0, &m));
    assert_int_equal(m.returned, 14 * MiB);
    assert_int_equal(m.held, 6 * MiB);
    assert_int_equal(c.returning, 0);
}

static void test_settle_gives_back_what_the_driver_did_not_take(void **state)
{
    (void)state;
    struct credit_gpu c = {.chunk = 4 * MiB, .credit = 4 * MiB};
    assert_true(credit_take(&c, 4 * MiB));
    credit_settle(&c, 4 * MiB, 0);            /* the driver refused it */
    assert_int_equal(c.held, 0);
    assert_int_equal(c.credit, 4 * MiB);
    assert_true(credit_take(&c, 2 * MiB));
    credit_settle(&c, 2 * MiB, 6 * MiB);      /* it took more than reserved */
    assert_int_equal(c.held, 6 * MiB);
    assert_int_equal(c.credit, 0);
}

static void test_recall_gives_all_back_and_stops_asking_ahead(void **state)
{
    (void)state;
    struct credit_gpu c = {.chunk = 4 * MiB, .credit = 6 * MiB, .held = 2 * MiB};
    credit_recall(&c, 100 * MiB);
    assert_int_equal(c.credit, 0);
    struct kairos_credit m;
    assert_true(credit_next_message(&c, 0, &m));
    assert_int_equal(m.returned, 6 * MiB);
    assert_true(m.flags & KAIROS_CREDIT_RECALLED);
    assert_false(m.flags & KAIROS_CREDIT_AHEAD); /* nothing ahead after a recall */
    bool request;
    assert_false(credit_has_message(&c, &request));
}

static void test_revoked_credit_is_gone(void **state)
{
    (void)state;
    struct credit_gpu c = {.chunk = 4 * MiB, .credit = 6 * MiB, .held = 2 * MiB};
    struct kairos_credit r = {.flags = KAIROS_CREDIT_REVOKED | KAIROS_CREDIT_EXACT,
                              .least = 4 * MiB, .quota = 64 * MiB};
    credit_on_reply(&c, &r, 0);
    assert_int_equal(c.credit, 0);
    assert_true(c.exact);
    assert_false(credit_take(&c, 2 * MiB));
    /* every message from now on says it read the revocation, until one is answered */
    struct kairos_credit m1, m2;
    assert_true(credit_next_message(&c, 0, &m1));
    assert_true(m1.flags & KAIROS_CREDIT_REVOKED);
    assert_int_equal(m1.held, 2 * MiB);
    credit_wait_begin(&c, 2 * MiB);
    assert_true(credit_next_message(&c, 0, &m2)); /* a request built after it */
    assert_true(m2.flags & KAIROS_CREDIT_REVOKED);
    answer(&c, &m2, 2 * MiB, KAIROS_CREDIT_EXACT);
    assert_true(credit_take(&c, 2 * MiB));
    credit_wait_end(&c, 2 * MiB);
    assert_true(credit_next_message(&c, 0, &m1));
    assert_false(m1.flags & KAIROS_CREDIT_REVOKED);
}

/* Near the quota alone (ALL), as m8 on the H200: a 608 MiB tenant (chunk 38 MiB),
 * 90 MiB left beside the context, 64 MiB blocks allocated and freed. The grant is all
 * 90 MiB; what is freed is kept up to two chunks (76 MiB, enough for the next block),
 * nothing is asked ahead and no allocation needs a message; a recall ends it. */
static void test_all_the_room_is_kept_with_no_message(void **state)
{
    (void)state;
    struct credit_gpu c = {0};
    struct kairos_credit m;
    bool request;
    credit_wait_begin(&c, 64 * MiB);
    assert_true(credit_next_message(&c, 0, &m));
    assert_true(m.flags & KAIROS_CREDIT_AHEAD);
    struct kairos_credit r = {.flags = KAIROS_CREDIT_ALL, .report = m.report, .held = m.held,
                              .need = 90 * MiB, .least = 38 * MiB, .quota = 608 * MiB};
    credit_on_reply(&c, &r, 0);
    assert_true(c.all);
    assert_true(credit_take(&c, 64 * MiB));
    credit_wait_end(&c, 64 * MiB);
    assert_true(credit_has_message(&c, &request));
    assert_false(request);                        /* 26 left: a report only */
    credit_release(&c, 64 * MiB);
    assert_int_equal(c.credit, 76 * MiB);         /* two chunks kept */
    assert_int_equal(c.returning, 14 * MiB);
    for (int i = 0; i < 3; i++) {
        assert_true(credit_take(&c, 64 * MiB));   /* no wait, no request */
        assert_true(credit_has_message(&c, &request));
        assert_false(request);                    /* 12 left, below half a chunk */
        assert_true(credit_next_message(&c, 0, &m));
        r = (struct kairos_credit){.flags = KAIROS_CREDIT_ALL, .report = m.report,
                                   .held = m.held, .least = 38 * MiB, .quota = 608 * MiB};
        credit_on_reply(&c, &r, 0);                  /* the report's reply */
        credit_release(&c, 64 * MiB);
        assert_int_equal(c.credit, 76 * MiB);
    }
    credit_recall(&c, 1ull << 30);
    assert_false(c.all);
    assert_int_equal(c.credit, 0);
    assert_true(credit_take(&c, 0) && !credit_take(&c, 2 * MiB)); /* contended: it asks */
}

static void test_last_message_gives_all_back_and_asks_no_more(void **state)
{
    (void)state;
    struct credit_gpu c = {.chunk = 4 * MiB, .credit = 3 * MiB, .held = 42 * MiB};
    struct kairos_credit m;
    assert_true(credit_last_message(&c, 0, &m));
    assert_int_equal(m.held, 42 * MiB);
    assert_int_equal(m.returned, 3 * MiB);
    assert_false(m.flags & KAIROS_CREDIT_AHEAD);
    assert_true(m.flags & KAIROS_CREDIT_LAST);
    struct kairos_credit r = {.report = m.report, .held = 42 * MiB, .least = 4 * MiB,
                              .quota = 1ull << 34};
    credit_on_reply(&c, &r, 0);                  /* room again: still nothing asked */
    bool request;
    assert_false(credit_has_message(&c, &request) && request);
}

/* The exit report crosses the reply to a request for credit ahead (seen in
 * test_memory.py's fork test): it says LAST, and the grant that arrives after it
 * is not taken, as kairosd no longer counts it. */
static void test_a_grant_crossing_the_last_message_is_not_taken(void **state)
{
    (void)state;
    struct credit_gpu c = {.chunk = 4 * MiB, .credit = MiB, .held = 42 * MiB};
    struct kairos_credit ask, last;
    assert_true(credit_next_message(&c, 0, &ask));   /* below half a chunk: asks ahead */
    assert_true(ask.flags & KAIROS_CREDIT_AHEAD);
    assert_true(credit_last_message(&c, 0, &last));  /* exits before the answer */
    assert_true(last.flags & KAIROS_CREDIT_LAST);
    assert_false(last.flags & KAIROS_CREDIT_AHEAD);
    assert_int_equal(last.need, 0);
    assert_int_equal(last.returned, MiB);
    struct kairos_credit r = {.report = ask.report, .held = 42 * MiB, .need = 4 * MiB,
                              .least = 4 * MiB, .quota = 64 * MiB};
    credit_on_reply(&c, &r, 0);
    assert_int_equal(c.credit, 0);
    assert_false(credit_take(&c, 2 * MiB));
    /* nothing held, nothing credited, but a request in flight: LAST is still sent */
    struct credit_gpu d = {.chunk = 4 * MiB};
    assert_true(credit_next_message(&d, 0, &ask));
    assert_true(credit_last_message(&d, 0, &last));
    assert_true(last.flags & KAIROS_CREDIT_LAST);
}

/* While a managed range is being charged nothing is asked ahead: a chunk granted
 * between the range's give-back and its CHARGE would refuse it again. A waiting
 * allocation still asks, for its need only. */
static void test_nothing_is_asked_ahead_while_a_range_is_charged(void **state)
{
    (void)state;
    struct credit_gpu c = {.chunk = 4 * MiB, .held = 2 * MiB, .ahead_off = 1};
    bool request;
    assert_false(credit_has_message(&c, &request));
    assert_false(request);
    credit_wait_begin(&c, 2 * MiB);
    struct kairos_credit m;
    assert_true(credit_next_message(&c, 0, &m));
    assert_int_equal(m.need, 2 * MiB);
    assert_false(m.flags & KAIROS_CREDIT_AHEAD);
    struct credit_gpu d = {.chunk = 4 * MiB, .held = 2 * MiB}; /* the same, no range */
    assert_true(credit_has_message(&d, &request));
    assert_true(request);
}

static void test_unsent_message_is_undone(void **state)
{
    (void)state;
    struct credit_gpu c = {.chunk = 4 * MiB, .credit = 2 * MiB};
    credit_recall(&c, MiB);
    struct kairos_credit m;
    assert_true(credit_next_message(&c, 0, &m));
    credit_unsend(&c, &m);
    assert_int_equal(c.returning, MiB);
    assert_true(c.recalled);
    assert_false(c.asking);
}

static void test_claim_and_view(void **state)
{
    (void)state;
    struct credit_gpu c = {.chunk = 4 * MiB, .credit = 6 * MiB, .held = 10 * MiB};
    assert_int_equal(credit_claim(&c), 16 * MiB);
    struct kairos_credit m;
    c.dirty = true;
    assert_true(credit_next_message(&c, 0, &m));
    struct kairos_credit r = {.report = m.report, .held = 30 * MiB, .returned = 10 * MiB,
                              .least = 4 * MiB, .quota = 64 * MiB};
    credit_on_reply(&c, &r, 0);
    assert_int_equal(credit_tenant_held(&c), 30 * MiB);
    assert_true(credit_take(&c, 2 * MiB));    /* this process's own allocation shows */
    assert_int_equal(credit_tenant_held(&c), 32 * MiB);
    credit_reconnected(&c);
    assert_false(c.asking);
    assert_true(c.dirty);
}

/* A free shows in the view at once, whatever reports and replies are in flight:
 * the view is the others' holdings from the last reply plus this process's own. */
static void test_free_shows_at_once_in_the_view(void **state)
{
    (void)state;
    struct credit_gpu c = {.chunk = 256 * MiB, .credit = 512 * MiB};
    struct kairos_credit m;
    assert_true(credit_take(&c, 512 * MiB));
    assert_true(credit_next_message(&c, 0, &m));
    assert_int_equal(m.held, 512 * MiB);
    struct kairos_credit r = {.report = m.report, .held = 600 * MiB, .returned = 512 * MiB,
                              .least = 256 * MiB, .quota = 4096 * MiB};
    credit_on_reply(&c, &r, 0);                    /* others hold 88 MiB */
    assert_int_equal(credit_tenant_held(&c), 600 * MiB);
    credit_release(&c, 512 * MiB);              /* kept as credit, not held */
    assert_int_equal(credit_tenant_held(&c), 88 * MiB);
    assert_true(credit_next_message(&c, 0, &m)); /* the report is out, no reply yet */
    assert_int_equal(credit_tenant_held(&c), 88 * MiB);
    /* a reply to an older message, counted before the free reached kairosd */
    credit_on_reply(&c, &r, 0);
    assert_int_equal(credit_tenant_held(&c), 88 * MiB);
    r.report = m.report;
    r.held = 88 * MiB;
    r.returned = 0;
    credit_on_reply(&c, &r, 0);
    assert_int_equal(credit_tenant_held(&c), 88 * MiB);
}

/* An allocation of bytes waits, its request goes out and kairosd answers it with
 * granted and flags at now: whether it was refused. */
static bool refused_at(struct credit_gpu *c, uint64_t bytes, uint64_t granted, uint32_t flags,
                       uint64_t now, struct kairos_credit *m)
{
    uint64_t gen = credit_wait_begin(c, bytes);
    assert_true(credit_next_message(c, 0, m));
    struct kairos_credit r = {.gpu = 0, .flags = flags, .report = m->report, .need = granted,
                              .least = 4 * MiB, .quota = 64 * MiB};
    credit_on_reply(c, &r, now);
    bool refused = credit_wait_refused(c, gen);
    credit_wait_end(c, bytes);
    return refused;
}

/* Issue 25, item 10: a refusal is remembered only when kairosd promised a ROOM (the
 * request said NOTICE, the reply NOTICES, nothing granted); it refuses allocations at
 * least as large, never smaller ones, and ends at the ROOM, a free of its own, a new
 * connection, another quota, or after KAIROS_REFUSAL_MEMORY_MS. */
static void test_refusal_remembered_until_room(void **state)
{
    (void)state;
    const uint32_t no = KAIROS_CREDIT_REFUSED | KAIROS_CREDIT_EXACT | KAIROS_CREDIT_NOTICES;
    struct credit_gpu c = {0};
    struct kairos_credit m;
    /* a kairosd of before: no NOTICES, so nothing remembered and no NOTICE sent */
    assert_true(refused_at(&c, 8 * MiB, 0, no & ~KAIROS_CREDIT_NOTICES, 1000, &m));
    assert_false(m.flags & KAIROS_CREDIT_NOTICE);
    assert_false(credit_refusal_holds(&c, 8 * MiB, 1000));
    /* its replies now said NOTICES (the last one did): the request says NOTICE, but
     * this refusal granted 2 MiB: not remembered */
    struct kairos_credit r = {.flags = KAIROS_CREDIT_NOTICES, .least = 4 * MiB,
                              .quota = 64 * MiB};
    credit_on_reply(&c, &r, 1000);
    assert_true(refused_at(&c, 8 * MiB, 2 * MiB, no, 1000, &m));
    assert_true(m.flags & KAIROS_CREDIT_NOTICE);
    assert_false(credit_refusal_holds(&c, 8 * MiB, 1000));
    c.credit = 0;
    /* refused with nothing granted: 8 MiB and more refused here, 6 MiB asks */
    assert_true(refused_at(&c, 8 * MiB, 0, no, 1000, &m));
    assert_true(credit_refusal_holds(&c, 8 * MiB, 1500));
    assert_true(credit_refusal_holds(&c, 64 * MiB, 1500));
    assert_false(credit_refusal_holds(&c, 6 * MiB, 1500));
    assert_false(credit_refusal_holds(&c, 8 * MiB, 1000 + KAIROS_REFUSAL_MEMORY_MS));
    assert_false(credit_refusal_holds(&c, 8 * MiB, 1500)); /* expired: forgotten */
    /* each change ends it */
    assert_true(refused_at(&c, 8 * MiB, 0, no, 3000, &m));
    credit_on_room(&c);
    assert_false(credit_refusal_holds(&c, 8 * MiB, 3000));
    assert_true(refused_at(&c, 8 * MiB, 0, no, 3000, &m));
    c.held = 2 * MiB;
    credit_release(&c, 2 * MiB);
    assert_false(credit_refusal_holds(&c, 8 * MiB, 3000));
    c.credit = 0;
    assert_true(refused_at(&c, 8 * MiB, 0, no, 3000, &m));
    r.quota = 96 * MiB;
    credit_on_reply(&c, &r, 3000);
    assert_false(credit_refusal_holds(&c, 8 * MiB, 3000));
    r.quota = 64 * MiB;
    credit_on_reply(&c, &r, 3000);
    assert_true(refused_at(&c, 8 * MiB, 0, no, 3000, &m));
    credit_reconnected(&c);
    assert_false(credit_refusal_holds(&c, 8 * MiB, 3000));
    assert_false(c.notices); /* a new kairosd may be one of before */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_allocation_asks_then_none_do),
        cmocka_unit_test(test_refused_only_by_the_answer_that_covered_it),
        cmocka_unit_test(test_frees_kept_up_to_two_chunks),
        cmocka_unit_test(test_settle_gives_back_what_the_driver_did_not_take),
        cmocka_unit_test(test_recall_gives_all_back_and_stops_asking_ahead),
        cmocka_unit_test(test_revoked_credit_is_gone),
        cmocka_unit_test(test_all_the_room_is_kept_with_no_message),
        cmocka_unit_test(test_last_message_gives_all_back_and_asks_no_more),
        cmocka_unit_test(test_a_grant_crossing_the_last_message_is_not_taken),
        cmocka_unit_test(test_nothing_is_asked_ahead_while_a_range_is_charged),
        cmocka_unit_test(test_unsent_message_is_undone),
        cmocka_unit_test(test_claim_and_view),
        cmocka_unit_test(test_free_shows_at_once_in_the_view),
        cmocka_unit_test(test_refusal_remembered_until_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
