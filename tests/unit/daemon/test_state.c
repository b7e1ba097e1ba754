/* test_state.c - the state file: round trip of run-time tenants and their compute
 * policies and managed-memory policy (config tenants without settings made at run time are not written); corrupt, truncated, garbage, oversized
 * files set aside without touching the tenants already known; one bad entry (a GPU
 * the node lacks, a tenant beyond the limit) set aside alone; a bad compute policy
 * refused alone, its tenant and the other policies kept; a run-time fault domain
 * written and read back (a file of before, without one: none), a bad one (not a
 * name, too long) refused alone, its tenant kept in no domain, and a
 * configured tenant's never taken from the file; a failed write leaves the
 * previous file; the hand-overs' section (handovers_state.h) read back as written,
 * each malformed entry refused alone, a malformed section refused whole without
 * losing the tenants. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "state_dir.h"

#include <jansson.h>

#include "daemon/state/handovers_state.h"
#include "daemon/state/state.h"
#include "daemon/tenants/registry.h"

/* The books of the ledger saved from (a, or the one ledger of a test) and of the one
 * loaded into (b): their ids overlap, so each has its own; emptied before each test. */
struct books {
    struct compute_book c;
    struct settings_book s;
};
static struct books books_a, books_b;

static void books_reset(struct books *b)
{
    compute_book_fini(&b->c);
    settings_book_fini(&b->s);
    compute_book_init(&b->c);
    settings_book_init(&b->s);
}

static const struct state_settings_io *io_a(void)
{
    return io_of(&books_a.c, &books_a.s);
}

static const struct state_settings_io *io_b(void)
{
    return io_of(&books_b.c, &books_b.s);
}

/* t's settings record in the books of a (set_a) or b (set_b). */
static const struct tenant_settings *set_a(const struct ledger_tenant *t)
{
    return settings_book_of(&books_a.s, t->id);
}

static const struct tenant_settings *set_b(const struct ledger_tenant *t)
{
    return settings_book_of(&books_b.s, t->id);
}

/* setup and teardown: a fresh temporary directory, the state file at path, empty books */
static int setup(void **state)
{
    books_reset(&books_a);
    books_reset(&books_b);
    return state_dir_setup(state);
}
#define teardown state_dir_teardown

static void test_round_trip(void **state)
{
    (void)state;
    struct ledger a, b;
    char err[512], aside[512];
    uint64_t q1[KAIROS_MAX_GPUS] = {1ull << 30, 5};
    uint64_t q2[KAIROS_MAX_GPUS] = {7, 0};
    ledger_init(&a, 2);
    struct ledger_tenant *t;
    assert_int_equal(ledger_tenant_add(&a, "cfg", q1, LEDGER_TENANT_CONFIG, NULL), 0);
    assert_int_equal(ledger_tenant_add(&a, "job", q1, 0, &t), 0);
    assert_int_equal(registry_set_managed(&books_a.s, t, true, SETTING_RUNTIME), 0);
    assert_int_equal(ledger_tenant_add(&a, "run-1", q2, LEDGER_TENANT_EPHEMERAL, &t), 0);
    assert_int_equal(registry_set_owner(&books_a.s, t, 4242, true), 0);
    assert_int_equal(state_save(path, &a, io_a(), NULL, err, sizeof err), 0);
    ledger_init(&b, 2);
    assert_int_equal(ledger_tenant_add(&b, "cfg", NULL, LEDGER_TENANT_CONFIG, NULL), 0);
    assert_int_equal(state_load(path, &b, io_b(), NULL, NULL, err, sizeof err, aside,
                                sizeof aside), 2);
    struct ledger_tenant *job = ledger_tenant_find(&b, "job");
    struct ledger_tenant *run = ledger_tenant_find(&b, "run-1");
    assert_non_null(job);
    assert_non_null(run);
    assert_int_equal(job->quota[0], 1ull << 30);
    assert_int_equal(job->quota[1], 5);
    assert_int_equal(run->flags, LEDGER_TENANT_EPHEMERAL);
    assert_int_equal(set_b(run)->owner_pid, 4242);
    assert_false(set_b(run)->owner_alive); /* until the server watches it */
    assert_true(set_b(job)->managed_charge); /* managed: charge kept; refuse, the default, too */
    assert_false(set_b(run)->managed_charge);
    assert_int_equal(ledger_tenant_find(&b, "cfg")->quota[0], 0); /* not from the file */
    ledger_fini(&a);
    ledger_fini(&b);
    /* no file: nothing, no error */
    unlink(path);
    ledger_init(&b, 2);
    assert_int_equal(state_load(path, &b, io_b(), NULL, NULL, err, sizeof err, aside,
                                sizeof aside), 0);
    ledger_fini(&b);
}

static void corrupt(const char *text, size_t len)
{
    struct ledger l;
    char err[512], aside[512];
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(text, 1, len, f);
    fclose(f);
    ledger_init(&l, 2);
    assert_int_equal(ledger_tenant_add(&l, "cfg", NULL, LEDGER_TENANT_CONFIG, NULL), 0);
    assert_int_equal(state_load(path, &l, io_a(), NULL, NULL, err, sizeof err, aside, sizeof aside),
                                -EINVAL);
    if (!strstr(err, "is corrupt") || !strstr(err, "set aside as"))
        fail_msg("%s", err);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(access(aside, F_OK), 0);
    unlink(aside);
    assert_int_equal(l.n_tenants, 1);
    assert_non_null(ledger_tenant_find(&l, "cfg"));
    ledger_fini(&l);
}

#define CORRUPT(text) corrupt(text, sizeof text - 1)

static void test_corrupt_files(void **state)
{
    (void)state;
    CORRUPT("{\"version\": 1, \"tenants\": [{\"name\": \"job\", \"quo");
    CORRUPT("\x01\x02\xff\xfe garbage");
    CORRUPT("");
    CORRUPT("[1, 2]");
    CORRUPT("{\"version\": 2, \"tenants\": []}");
    CORRUPT("{\"version\": 1, \"version\": 1, \"tenants\": []}");
    CORRUPT("{\"version\": 1, \"tenants\": [{\"name\": \"a\", \"quota\": {\"0\": 1, \"0\": 2}}]}");
    CORRUPT("{\"version\": 1, \"tenants\": []} {\"version\": 1, \"tenants\": []}");
}

static char warned[4][512];
static int n_warned;

static void warn(void *ctx, const char *msg)
{
    (void)ctx;
    if (n_warned < 4)
        snprintf(warned[n_warned], sizeof warned[0], "%s", msg);
    n_warned++;
}

static void write_file(const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *read_file(const char *name)
{
    FILE *f = fopen(name, "r");
    assert_non_null(f);
    static char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    return text;
}

/* One bad entry among good ones: that entry alone is set aside (logged, and kept
 * in PATH.set-aside-TIME for the administrator); the others are loaded. */
static void bad_entry(const char *entry, const char *part)
{
    struct ledger l;
    char err[512], aside[512], text[1024];
    snprintf(text, sizeof text, "{\"version\": 1, \"tenants\": [{\"name\": \"good\", "
             "\"quota\": {\"0\": 4096}}, %s, {\"name\": \"also\", \"quota\": {\"1\": 7}}]}",
             entry);
    write_file(text);
    n_warned = 0;
    ledger_init(&l, 2);
    assert_int_equal(state_load(path, &l, io_a(), warn, NULL, err, sizeof err, aside,
                                sizeof aside), 2);
    assert_int_equal(ledger_tenant_find(&l, "good")->quota[0], 4096);
    assert_int_equal(ledger_tenant_find(&l, "also")->quota[1], 7);
    assert_int_equal(l.n_tenants, 2);
    assert_int_equal(n_warned, 1);
    if (!strstr(warned[0], part) || !strstr(warned[0], "set aside"))
        fail_msg("expected '%s' in '%s'", part, warned[0]);
    assert_non_null(strstr(aside, ".set-aside-"));
    const char *kept = read_file(aside);
    if (!strstr(kept, "\"version\": 1") || strstr(kept, "4096"))
        fail_msg("set-aside file: %s", kept);
    unlink(aside);
    assert_int_equal(access(path, F_OK), 0); /* the file itself stays */
    ledger_fini(&l);
}

static void test_bad_entries(void **state)
{
    (void)state;
    bad_entry("{\"name\": \"gone\", \"quota\": {\"0\": 1, \"5\": 1073741824}}",
              "tenant 'gone' has a quota on GPU 5, which this node does not have (it has 2)");
    bad_entry("{\"name\": \"a/b\", \"quota\": {}}", "entry 1: needs a valid \"name\"");
    bad_entry("{\"name\": \"neg\", \"quota\": {\"0\": -5}}", "tenant 'neg': quota \"0\"");
    bad_entry("{\"name\": \"idx\", \"quota\": {\"-0\": 5}}", "tenant 'idx': quota \"-0\"");
    bad_entry("{\"name\": \"good\", \"quota\": {\"0\": 1}}", "appears twice");
    bad_entry("[]", "entry 1");
    /* a quota of 0 on a missing GPU is no reason to refuse anything */
    struct ledger l;
    char err[512], aside[512];
    write_file("{\"version\": 1, \"tenants\": [{\"name\": \"z\", \"quota\": {\"9\": 0}}]}");
    ledger_init(&l, 2);
    assert_int_equal(state_load(path, &l, io_a(), NULL, NULL, err, sizeof err, aside,
                                sizeof aside), 1);
    assert_string_equal(aside, "");
    ledger_fini(&l);
}

/* Beyond LEDGER_MAX_TENANTS, the extra entries are set aside with a message that
 * names the limit, never dropped without a word. */
static void test_too_many_tenants(void **state)
{
    (void)state;
    struct ledger a, b;
    char err[512], aside[512], name[32];
    ledger_init(&a, 1);
    for (int i = 0; i < LEDGER_MAX_TENANTS; i++) {
        snprintf(name, sizeof name, "t%d", i);
        assert_int_equal(ledger_tenant_add(&a, name, NULL, 0, NULL), 0);
    }
    assert_int_equal(ledger_tenant_add(&a, "one-more", NULL, 0, NULL), -ENOSPC);
    assert_int_equal(state_save(path, &a, io_a(), NULL, err, sizeof err), 0);
    ledger_init(&b, 1);
    assert_int_equal(ledger_tenant_add(&b, "cfg", NULL, LEDGER_TENANT_CONFIG, NULL), 0);
    n_warned = 0;
    assert_int_equal(state_load(path, &b, io_b(), warn, NULL, err, sizeof err, aside, sizeof aside),
                     LEDGER_MAX_TENANTS - 1);
    assert_int_equal(n_warned, 1);
    char limit[64];
    snprintf(limit, sizeof limit, "at most %d tenants", LEDGER_MAX_TENANTS);
    if (!strstr(warned[0], limit))
        fail_msg("%s", warned[0]);
    assert_non_null(strstr(read_file(aside), "\"name\": \"t"));
    unlink(aside);
    ledger_fini(&a);
    ledger_fini(&b);
}

/* A file larger than STATE_MAX_BYTES is refused from its size, without being read
 * (quickly, in bounded memory), and set aside; one that is no regular file too. */
static void test_oversized_file(void **state)
{
    (void)state;
    struct ledger l;
    char err[512], aside[512];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)STATE_MAX_BYTES + 1), 0); /* sparse: costs nothing */
    close(fd);
    ledger_init(&l, 2);
    assert_int_equal(ledger_tenant_add(&l, "cfg", NULL, LEDGER_TENANT_CONFIG, NULL), 0);
    assert_int_equal(state_load(path, &l, io_a(), NULL, NULL, err, sizeof err, aside, sizeof aside),
                                -EINVAL);
    if (!strstr(err, "larger than 16 MiB") || !strstr(err, "set aside as"))
        fail_msg("%s", err);
    assert_int_equal(access(path, F_OK), -1);
    unlink(aside);
    assert_int_equal(l.n_tenants, 1);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(state_load(path, &l, io_a(), NULL, NULL, err, sizeof err, aside, sizeof aside),
                                -EINVAL);
    if (!strstr(err, "not a regular file"))
        fail_msg("%s", err);
    rmdir(aside);
    ledger_fini(&l);
}

/* A write that cannot be made (here: PATH.tmp is a directory) fails with a
 * message and leaves the previous file untouched. */
static void test_failed_write(void **state)
{
    (void)state;
    struct ledger a;
    char err[512], tmp[300];
    ledger_init(&a, 1);
    assert_int_equal(ledger_tenant_add(&a, "first", NULL, 0, NULL), 0);
    assert_int_equal(state_save(path, &a, io_a(), NULL, err, sizeof err), 0);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(mkdir(tmp, 0700), 0);
    assert_int_equal(ledger_tenant_add(&a, "second", NULL, 0, NULL), 0);
    assert_true(state_save(path, &a, io_a(), NULL, err, sizeof err) < 0);
    if (!strstr(err, "cannot write"))
        fail_msg("%s", err);
    assert_null(strstr(read_file(path), "second"));
    assert_non_null(strstr(read_file(path), "first"));
    rmdir(tmp);
    /* skip leaves one tenant out (one about to be removed) */
    assert_int_equal(state_save(path, &a, io_a(), ledger_tenant_find(&a, "first"), err,
                                sizeof err), 0);
    assert_null(strstr(read_file(path), "first"));
    ledger_fini(&a);
}

static void test_compute_round_trip(void **state)
{
    (void)state;
    struct ledger a, b;
    struct compute_book ca, cb;
    char err[512], aside[512];
    uint64_t q[KAIROS_MAX_GPUS] = {1ull << 30, 1ull << 30};
    ledger_init(&a, 2);
    compute_book_init(&ca);
    compute_book_init(&cb);
    struct ledger_tenant *t;
    assert_int_equal(ledger_tenant_add(&a, "job", q, 0, &t), 0);
    struct sched_policy p = {.share = 0.3, .limit = 0.5, .prio = SCHED_PRIO_LATENCY};
    assert_int_equal(registry_set_compute(&ca, &books_a.s, t, 1, &p, SETTING_RUNTIME), 0);
    assert_int_equal(ledger_tenant_add(&a, "plain", q, 0, NULL), 0);
    assert_int_equal(state_save(path, &a, io_of(&ca, &books_a.s), NULL, err, sizeof err), 0);
    FILE *f = fopen(path, "r");
    char text[4096] = "";
    assert_non_null(f);
    assert_true(fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
    assert_non_null(strstr(text, "\"share_ppm\": 300000"));
    assert_non_null(strstr(text, "\"priority\": \"latency\""));
    ledger_init(&b, 2);
    assert_int_equal(state_load(path, &b, io_of(&cb, &books_b.s), NULL, NULL, err, sizeof err,
                                aside,
                                sizeof aside), 2);
    const struct ledger_tenant *job = ledger_tenant_find(&b, "job");
    assert_false(registry_policy(&cb, job, 0, &p));
    assert_true(registry_policy(&cb, job, 1, &p));
    assert_float_equal(p.share, 0.3, 1e-12);
    assert_float_equal(p.limit, 0.5, 1e-12);
    assert_int_equal(p.prio, SCHED_PRIO_LATENCY);
    assert_false(registry_policy(&cb, ledger_tenant_find(&b, "plain"), 1, &p));
    assert_int_equal(cb.ids.n, 1); /* only job has an entry */
    compute_book_fini(&ca);
    compute_book_fini(&cb);
    ledger_fini(&a);
    ledger_fini(&b);
}

/* One file, one tenant: the policies that are bad are refused one by one. */
static void bad_policy(const char *compute, const char *part)
{
    struct ledger l;
    struct compute_book book;
    struct sched_policy p;
    char err[512], aside[512], text[1024];
    snprintf(text, sizeof text, "{\"version\": 1, \"tenants\": [{\"name\": \"job\", "
             "\"quota\": {\"0\": 4096}, \"compute\": %s}]}", compute);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    n_warned = 0;
    books_reset(&books_a);
    ledger_init(&l, 2);
    compute_book_init(&book);
    assert_int_equal(state_load(path, &l, io_of(&book, &books_a.s), warn, NULL, err, sizeof err,
                                aside, sizeof aside), 1);
    assert_int_equal(access(path, F_OK), 0); /* not set aside */
    const struct ledger_tenant *t = ledger_tenant_find(&l, "job");
    assert_non_null(t);
    assert_int_equal(t->quota[0], 4096); /* the tenant's other state is kept */
    assert_false(registry_policy(&book, t, 0, &p));
    compute_book_fini(&book);
    assert_int_equal(n_warned, 1);
    if (!strstr(warned[0], part) || !strstr(warned[0], "tenant 'job'") ||
        !strstr(warned[0], "kept"))
        fail_msg("expected '%s' in '%s'", part, warned[0]);
    ledger_fini(&l);
}

static void test_bad_compute(void **state)
{
    (void)state;
    bad_policy("{\"0\": {\"share_ppm\": 5000000}}", "share 500% is outside 0-100%");
    bad_policy("{\"0\": {\"limit_ppm\": -1}}", "\"limit_ppm\" is not a number");
    bad_policy("{\"0\": {\"share_ppm\": 600000, \"limit_ppm\": 500000}}", "above the limit");
    bad_policy("{\"0\": {\"priority\": \"urgent\"}}", "found 'urgent'");
    bad_policy("{\"0\": {\"priority\": 7}}", "\"priority\" is not");
    bad_policy("{\"0\": {\"shares\": 1}}", "unknown key \"shares\"");
    bad_policy("{\"0\": \"garbage\"}", "not an object");
    bad_policy("{\"7\": {\"share_ppm\": 1}}", "\"7\" is not a GPU of this node (0-1)");
    bad_policy("{\"x\": {}}", "\"x\" is not a GPU");
    bad_policy("[1, 2]", "\"compute\" is not an object");
    /* a good policy next to a bad one is kept */
    bad_policy("{\"0\": {\"share_ppm\": 2000000}, \"1\": {\"share_ppm\": 200000}}",
               "share 200%");
    struct ledger l;
    struct compute_book book;
    struct sched_policy p;
    char err[512], aside[512];
    ledger_init(&l, 2);
    compute_book_init(&book);
    assert_int_equal(state_load(path, &l, io_of(&book, &books_a.s), NULL, NULL, err, sizeof err,
                                aside,
                                sizeof aside), 1);
    const struct ledger_tenant *t = ledger_tenant_find(&l, "job");
    assert_true(registry_policy(&book, t, 1, &p));
    assert_float_equal(p.share, 0.2, 1e-12);
    compute_book_fini(&book);
    ledger_fini(&l);
}

/* A run-time fault domain is written and read back; a configured tenant's (the
 * configuration's) is not written; an entry of before, without one, loads as none. */
static void test_fault_domain_round_trip(void **state)
{
    (void)state;
    struct ledger a, b;
    char err[512], aside[512];
    uint64_t q[KAIROS_MAX_GPUS] = {1ull << 30};
    ledger_init(&a, 1);
    struct ledger_tenant *t, *cfg;
    assert_int_equal(ledger_tenant_add(&a, "job", q, 0, &t), 0);
    registry_set_fault_domain(&books_a.s, t, "infer", SETTING_RUNTIME);
    assert_int_equal(ledger_tenant_add(&a, "plain", q, 0, NULL), 0);
    assert_int_equal(ledger_tenant_add(&a, "cfg", q, LEDGER_TENANT_CONFIG, &cfg), 0);
    registry_set_fault_domain(&books_a.s, cfg, "other", SETTING_CONFIG);
    registry_set_quota(&a, &books_a.s, cfg, 0, 5, SETTING_RUNTIME); /* so that cfg is written */
    assert_int_equal(state_save(path, &a, io_a(), NULL, err, sizeof err), 0);
    const char *text = read_file(path);
    assert_non_null(strstr(text, "\"fault_domain\": \"infer\""));
    assert_null(strstr(text, "other"));
    assert_non_null(strstr(text, "\"cfg\""));
    ledger_init(&b, 1);
    assert_int_equal(state_load(path, &b, io_b(), NULL, NULL, err, sizeof err, aside,
                                sizeof aside), 3);
    const struct ledger_tenant *job = ledger_tenant_find(&b, "job");
    assert_string_equal(set_b(job)->fault_domain, "infer");
    assert_int_equal(set_b(job)->src.fault_domain, SETTING_RUNTIME);
    assert_string_equal(set_b(ledger_tenant_find(&b, "plain"))->fault_domain, "");
    assert_string_equal(set_b(ledger_tenant_find(&b, "cfg"))->fault_domain, "");
    ledger_fini(&a);
    ledger_fini(&b);
    books_reset(&books_b);
    /* a state file of before: no "fault_domain" anywhere */
    write_file("{\"version\": 1, \"tenants\": [{\"name\": \"old\", \"ephemeral\": false, "
               "\"quota\": {\"0\": 4096}}]}");
    ledger_init(&b, 1);
    assert_int_equal(state_load(path, &b, io_b(), NULL, NULL, err, sizeof err, aside,
                                sizeof aside), 1);
    assert_string_equal(set_b(ledger_tenant_find(&b, "old"))->fault_domain, "");
    assert_int_equal(set_b(ledger_tenant_find(&b, "old"))->src.fault_domain, SETTING_UNSET);
    ledger_fini(&b);
}

/* One file, one tenant with a bad "fault_domain": refused alone, warned, the tenant
 * kept (its quota) in no domain, nothing set aside. */
static void bad_domain(const char *domain)
{
    struct ledger l;
    char err[512], aside[512], text[1024];
    snprintf(text, sizeof text, "{\"version\": 1, \"tenants\": [{\"name\": \"job\", "
             "\"quota\": {\"0\": 4096}, \"fault_domain\": %s}]}", domain);
    write_file(text);
    n_warned = 0;
    books_reset(&books_a); /* a new ledger: its ids start again */
    ledger_init(&l, 1);
    assert_int_equal(state_load(path, &l, io_a(), warn, NULL, err, sizeof err, aside,
                                sizeof aside), 1);
    assert_string_equal(aside, "");
    const struct ledger_tenant *t = ledger_tenant_find(&l, "job");
    assert_non_null(t);
    assert_int_equal(t->quota[0], 4096);
    assert_string_equal(set_a(t)->fault_domain, "");
    assert_int_equal(set_a(t)->src.fault_domain, SETTING_UNSET);
    assert_int_equal(n_warned, 1);
    if (!strstr(warned[0], "tenant 'job': \"fault_domain\" is not a fault domain's name") ||
        !strstr(warned[0], "kept in no fault domain"))
        fail_msg("for %s: '%s'", domain, warned[0]);
    ledger_fini(&l);
}

static void test_bad_fault_domain(void **state)
{
    (void)state;
    char long_name[200];
    memset(long_name, 'a', sizeof long_name);
    long_name[0] = '"';
    long_name[sizeof long_name - 2] = '"';
    long_name[sizeof long_name - 1] = 0;
    bad_domain(long_name); /* 197 characters: beyond KAIROS_NAME_MAX */
    memset(long_name + 1, 'b', KAIROS_NAME_MAX);
    long_name[KAIROS_NAME_MAX + 1] = '"';
    long_name[KAIROS_NAME_MAX + 2] = 0;
    bad_domain(long_name); /* exactly 64: one too many */
    bad_domain("7");
    bad_domain("\"\"");
    bad_domain("\"-x\"");
    bad_domain("\"a/../b\"");
    bad_domain("[\"infer\"]");
    bad_domain("null");
    /* a configured tenant's entry: its domain is the configuration's, the file's dropped */
    struct ledger l;
    char err[512], aside[512];
    write_file("{\"version\": 1, \"tenants\": [{\"name\": \"cfg\", \"quota\": {\"0\": 7}, "
               "\"fault_domain\": \"mine\"}]}");
    books_reset(&books_a);
    ledger_init(&l, 1);
    struct ledger_tenant *cfg;
    assert_int_equal(ledger_tenant_add(&l, "cfg", NULL, LEDGER_TENANT_CONFIG, &cfg), 0);
    registry_set_fault_domain(&books_a.s, cfg, "infer", SETTING_CONFIG);
    n_warned = 0;
    assert_int_equal(state_load(path, &l, io_a(), warn, NULL, err, sizeof err, aside,
                                sizeof aside), 0);
    assert_string_equal(set_a(cfg)->fault_domain, "infer");
    assert_int_equal(set_a(cfg)->src.fault_domain, SETTING_CONFIG);
    assert_int_equal(n_warned, 1);
    assert_non_null(strstr(warned[0], "fault domain: those of the state file are dropped"));
    ledger_fini(&l);
}

static void count_warning(void *ctx, const char *msg)
{
    (void)msg;
    (*(int *)ctx)++;
}

static void test_handovers_round_trip_and_bad_entries(void **state)
{
    (void)state;
    struct ledger a, b;
    char err[512], aside[512];
    uint64_t q[KAIROS_MAX_GPUS] = {64ull << 20};
    ledger_init(&a, 1);
    assert_int_equal(ledger_tenant_add(&a, "job", q, 0, NULL), 0);
    struct heir_edge e = {.from_pid = 10, .from_start = 500, .pid = 11, .start = 520,
                          .kind = HEIR_RECEIVED};
    struct saved_linger g = {.tenant = "job", .pid = 10, .start = 500, .held = {44ull << 20}};
    struct handovers_saved s = {.boot_id = "0f1e-2d3c", .edges = &e, .n_edges = 1,
                                .lingering = &g, .n_lingering = 1}, back;
    json_t *j = handovers_state_json(&s, 1);
    assert_non_null(j);
    assert_int_equal(state_save_all(path, &a, io_a(), NULL, j, err, sizeof err), 0);
    json_decref(j);
    ledger_init(&b, 1);
    assert_int_equal(state_load_all(path, &b, io_b(), NULL, &back, NULL, NULL, err, sizeof err,
                                    aside,
                                    sizeof aside), 1);
    assert_string_equal(back.boot_id, "0f1e-2d3c");
    assert_int_equal(back.n_edges, 1);
    assert_true(back.edges[0].from_pid == 10 && back.edges[0].from_start == 500 &&
                back.edges[0].pid == 11 && back.edges[0].start == 520 &&
                back.edges[0].kind == HEIR_RECEIVED);
    assert_int_equal(back.n_lingering, 1);
    assert_memory_equal(&back.lingering[0], &g, sizeof g);
    handovers_saved_free(&back);
    ledger_fini(&b);
    /* each malformed entry alone: pid 0, a pid beyond PID_MAX_LIMIT, an unknown kind, a
     * negative start, an edge to itself; a bad tenant name, a GPU the node lacks, a
     * byte count beyond KAIROS_BYTES_MAX, a charge of nothing */
    const char *bad = "{\"version\": 1, \"tenants\": [{\"name\": \"job\", \"quota\": {\"0\": 1}}],"
        " \"handovers\": {\"boot_id\": \"ab\", \"edges\": ["
        "{\"from_pid\": 0, \"from_start\": 1, \"pid\": 2, \"start\": 3, \"kind\": \"forked\"},"
        "{\"from_pid\": 1, \"from_start\": 1, \"pid\": 4194305, \"start\": 3, \"kind\": \"forked\"},"
        "{\"from_pid\": 1, \"from_start\": 1, \"pid\": 2, \"start\": 3, \"kind\": \"stolen\"},"
        "{\"from_pid\": 1, \"from_start\": -1, \"pid\": 2, \"start\": 3, \"kind\": \"exec\"},"
        "{\"from_pid\": 2, \"from_start\": 1, \"pid\": 2, \"start\": 3, \"kind\": \"exec\"},"
        "{\"from_pid\": 1, \"from_start\": 1, \"pid\": 2, \"start\": 3, \"kind\": \"adopted\"}],"
        " \"lingering\": ["
        "{\"tenant\": \"../x\", \"pid\": 5, \"start\": 1, \"held\": {\"0\": 1}},"
        "{\"tenant\": \"job\", \"pid\": 5, \"start\": 1, \"held\": {\"1\": 1}},"
        "{\"tenant\": \"job\", \"pid\": 5, \"start\": 1, \"held\": {\"0\": 1125899906842625}},"
        "{\"tenant\": \"job\", \"pid\": 5, \"start\": 1, \"held\": {\"-0\": 1}},"
        "{\"tenant\": \"job\", \"pid\": 5, \"start\": 1, \"held\": {}},"
        "{\"tenant\": \"job\", \"pid\": 6, \"start\": 1, \"held\": {\"0\": 7}}]}}";
    int warnings = 0;
    ledger_init(&b, 1);
    assert_int_equal(state_parse_all(bad, strlen(bad), &b, io_b(), NULL, count_warning, &warnings,
                                     NULL,
                                     &back, err, sizeof err), 1);
    assert_int_equal(warnings, 10);
    assert_int_equal(back.n_edges, 1);
    assert_int_equal(back.edges[0].kind, HEIR_ADOPTED);
    assert_int_equal(back.n_lingering, 1);
    assert_int_equal(back.lingering[0].pid, 6);
    handovers_saved_free(&back);
    ledger_fini(&b);
    /* a section that is not one: the hand-overs are refused whole, the tenants kept */
    const char *frames[] = {"[]", "{\"edges\": []}", "{\"boot_id\": \"x;rm\"}",
                            "{\"boot_id\": \"ab\", \"edges\": {}}"};
    for (size_t i = 0; i < sizeof frames / sizeof *frames; i++) {
        char text[256];
        snprintf(text, sizeof text, "{\"version\": 1, \"tenants\": [{\"name\": \"job\", "
                 "\"quota\": {\"0\": 1}}], \"handovers\": %s}", frames[i]);
        ledger_init(&b, 1);
        warnings = 0;
        assert_int_equal(state_parse_all(text, strlen(text), &b, io_b(), NULL, count_warning,
                                         &warnings,
                                         NULL, &back, err, sizeof err), 1);
        assert_int_equal(warnings, 1);
        assert_int_equal(back.n_edges + back.n_lingering, 0);
        handovers_saved_free(&back);
        ledger_fini(&b);
    }
    ledger_fini(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compute_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_compute, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_domain_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_fault_domain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_many_tenants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handovers_round_trip_and_bad_entries, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
