/* fuzz_state.c - libFuzzer target: arbitrary bytes as kairosd's state file through
 * state_parse (jansson, the frame, each entry checked and loaded or set aside, each
 * compute policy), into a ledger that already holds a configuration tenant,
 * compiled here with the fuzzer and sanitizer flags. The first byte chooses the
 * node's GPU count. Afterwards the ledger must be consistent and within its limit,
 * and the configuration tenant's own settings (its quota on GPU 0, no compute
 * policy) untouched by any entry that names it (registry.h). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon/registry.h"
#include "daemon/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct ledger l;
    char err[512] = "";
    if (ledger_init(&l, 1 + data[0] % KAIROS_MAX_GPUS))
        return 0;
    struct ledger_tenant *cfg = NULL;
    ledger_tenant_add(&l, "cfg", NULL, LEDGER_TENANT_CONFIG, &cfg);
    registry_set_quota(&l, cfg, 0, 12345, SETTING_CONFIG); /* the file's: no entry changes it */
    json_t *aside = json_array();
    int rc = state_parse((const char *)data + 1, size - 1, &l, NULL, NULL, aside, err, sizeof err);
    if ((rc < 0 && !err[0]) || ledger_check(&l) || l.n_tenants > LEDGER_MAX_TENANTS ||
        cfg->quota[0] != 12345 || cfg->src.quota[0] != SETTING_CONFIG || cfg->has_compute[0] ||
        (rc >= 0 && (size_t)rc + 1 != l.n_tenants)) {
        fprintf(stderr, "state_parse returned %d (%s) with %zu tenants\n", rc, err, l.n_tenants);
        abort();
    }
    json_decref(aside);
    ledger_fini(&l);
    return 0;
}
