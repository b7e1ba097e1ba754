/* ledger_fixture.h - the ledger of test_ledger.c and test_credit.c: before each test
 * a fresh ledger with one tenant (the test's cmocka setup calls ledger_fixture_begin),
 * and after it (ledger_fixture_teardown) the ledger's own consistency check,
 * ledger_check, before the ledger is freed. */
#ifndef KAIROS_TESTS_LEDGER_FIXTURE_H
#define KAIROS_TESTS_LEDGER_FIXTURE_H

#include <stdint.h>

#include "daemon/memory/ledger.h"

/* l: a ledger of n_gpus GPUs with the tenant name under quota[] (in *t); *state = l,
 * for ledger_fixture_teardown. */
void ledger_fixture_begin(void **state, struct ledger *l, unsigned n_gpus, const char *name,
                          const uint64_t quota[KAIROS_MAX_GPUS], struct ledger_tenant **t);

/* A cmocka teardown: the ledger *state passes ledger_check, then is freed. */
int ledger_fixture_teardown(void **state);

#endif /* KAIROS_TESTS_LEDGER_FIXTURE_H */
