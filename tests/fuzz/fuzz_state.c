/* fuzz_state.c - libFuzzer target: arbitrary bytes as kairosd's state file through
 * state_parse_all (jansson, the frame, each entry checked and loaded or set aside,
 * each compute policy, the hand-overs' section: handovers_state.h), into a ledger
 * that already holds a configuration tenant,
 * compiled here with the fuzzer and sanitizer flags. The first byte chooses the
 * node's GPU count. Afterwards the ledger must be consistent and within its limit,
 * and the configuration tenant's own settings (its quota on GPU 0, no compute
 * policy) untouched by any entry that names it (registry.h); every hand-over and
 * lingering charge read back within its bounds (a possible pid, a known kind, a
 * valid tenant name, a GPU of the node, a byte count within KAIROS_BYTES_MAX); every
 * tenant's chargeback counters (the "usage" section, usage_state.h) finite, not
 * negative, on GPUs of the node only, shown as read, their "since" unset or a time. */
#include <math.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/state/handovers_state.h"
#include "daemon/tenants/registry.h"
#include "daemon/state/state.h"
#include "daemon/state/usage_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool saved_within_bounds(const struct handovers_saved *s, unsigned n_gpus)
{
    if (s->n_edges > HEIRS_MAX || s->n_lingering > HANDOVERS_LINGER_MAX ||
        strlen(s->boot_id) >= sizeof s->boot_id)
        return false;
    for (size_t i = 0; i < s->n_edges; i++) {
        const struct heir_edge *e = &s->edges[i];
        if (!e->pid || !e->from_pid || e->pid > HANDOVERS_PID_MAX ||
            e->from_pid > HANDOVERS_PID_MAX || (unsigned)e->kind >= HEIR_KINDS ||
            e->start > INT64_MAX || e->from_start > INT64_MAX)
            return false;
    }
    for (size_t i = 0; i < s->n_lingering; i++) {
        const struct saved_linger *g = &s->lingering[i];
        if (!g->pid || g->pid > HANDOVERS_PID_MAX || !ledger_name_valid(g->tenant))
            return false;
        for (unsigned k = 0; k < KAIROS_MAX_GPUS; k++)
            if (g->held[k] > KAIROS_BYTES_MAX || (k >= n_gpus && g->held[k]))
                return false;
    }
    return true;
}

static bool usage_within_bounds(const struct usage_book *b, const struct ledger *l)
{
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct usage *u = usage_book_find(b, l->tenants[i]->id);
        if (!u)
            continue; /* no entry: counters not begun, all 0 */
        if (u->since != 0 && !(isfinite(u->since) && u->since >= 946684800.0))
            return false;
        for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
            double m = u->mem_byte_s[g];
            if (!isfinite(m) || m < 0 || m != u->shown_mem_byte_s[g] ||
                u->gpu_us[g] != u->shown_gpu_us[g] ||
                (g >= l->n_gpus && (m || u->gpu_us[g] || l->tenants[i]->refusals[g])))
                return false;
        }
    }
    return true;
}

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
    struct settings_book settings;
    settings_book_init(&settings);
    /* the file's: no entry changes it */
    registry_set_quota(&l, &settings, cfg, 0, 12345, SETTING_CONFIG);
    json_t *aside = json_array();
    struct handovers_saved saved;
    memset(&saved, 0, sizeof saved);
    struct usage_book usage;
    usage_book_init(&usage);
    struct compute_book compute;
    compute_book_init(&compute);
    struct registry_books books = {&compute, &settings};
    struct state_settings_io io = registry_state_io(&books);
    int rc = state_parse_all((const char *)data + 1, size - 1, &l, &io, &usage, NULL, NULL, aside,
                             &saved, err, sizeof err);
    if ((rc < 0 && !err[0]) || !saved_within_bounds(&saved, l.n_gpus) || ledger_check(&l) ||
        !usage_within_bounds(&usage, &l) || usage.ids.n > l.n_tenants ||
        l.n_tenants > LEDGER_MAX_TENANTS ||
        cfg->quota[0] != 12345 ||
        settings_book_of(&settings, cfg->id)->src.quota[0] != SETTING_CONFIG ||
        settings.ids.n > l.n_tenants ||
        compute_book_find(&compute, cfg->id) || compute.ids.n > l.n_tenants ||
        (rc >= 0 && (size_t)rc + 1 != l.n_tenants)) {
        fprintf(stderr, "state_parse returned %d (%s) with %zu tenants\n", rc, err, l.n_tenants);
        abort();
    }
    json_decref(aside);
    handovers_saved_free(&saved);
    usage_book_fini(&usage);
    compute_book_fini(&compute);
    settings_book_fini(&settings);
    ledger_fini(&l);
    return 0;
}
