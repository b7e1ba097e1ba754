/* ledger_fixture.c - the ledger of the ledger and credit tests (see ledger_fixture.h). */
#include "ledger_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

void ledger_fixture_begin(void **state, struct ledger *l, unsigned n_gpus, const char *name,
                          const uint64_t quota[KAIROS_MAX_GPUS], struct ledger_tenant **t)
{
    assert_int_equal(ledger_init(l, n_gpus), 0);
    assert_int_equal(ledger_tenant_add(l, name, quota, 0, t), 0);
    *state = l;
}

int ledger_fixture_teardown(void **state)
{
    struct ledger *l = *state;
    assert_int_equal(ledger_check(l), 0);
    ledger_fini(l);
    return 0;
}
