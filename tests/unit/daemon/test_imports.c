/* test_imports.c - legacy CUDA IPC claims against a /proc made of files: an import
 * is taken only for an object a live member shared with the importer's scope
 * (never its own), keeps only its exporter's charge while it lives, ends with END,
 * with its importer's departure (unless the importer still holds a driver file),
 * a reused pid is not the process that shared, and after a restart an import
 * reported before its share waits for it a while. The exporter's free of a shared
 * object (SHARED FREED) keeps its bytes on the exporter's tenant only while a
 * verified import of that object lives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_proc.h"

#include "daemon/imports.h"

#define root fake_proc_root
static char why[KAIROS_MSG_MAX];

enum { EXPORTER = 100, IMPORTER = 200, OTHER = 300 };
#define CLIENT 0xc1d00001u
#define OBJECT 0x5c000096u
#define DST 0xc1d00002u

static struct kairos_shared shared(uint32_t type, uint32_t arg)
{
    return (struct kairos_shared){.h_client = CLIENT, .h_object = OBJECT, .share_type = type,
                                  .share_arg = arg};
}

static int claim(struct imports *im, uint32_t pid, uint32_t uid, uint32_t flags)
{
    struct kairos_imported m = {.flags = flags, .h_client_src = CLIENT, .h_object_src = OBJECT,
                                .h_client = DST, .h_object = OBJECT};
    return imports_imported(im, pid, uid, &m, 0, NULL, why, sizeof why);
}

static void test_an_import_of_a_shared_object_keeps_its_exporter(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    assert_non_null(strstr(why, "reported"));
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&im, EXPORTER, 1000, &s, why, sizeof why), 0);
    assert_int_equal(claim(&im, EXPORTER, 1000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_INVALID);
    assert_false(imports_hold(&im, EXPORTER));
    assert_int_equal(claim(&im, IMPORTER, 2000, KAIROS_IMPORT_BEGIN), 0);
    assert_true(imports_hold(&im, EXPORTER));
    assert_false(imports_hold(&im, IMPORTER)); /* nothing of the importer's is kept */
    imports_member_left(&im, EXPORTER); /* the exporter left: its charge stays */
    fake_proc_gone(EXPORTER);
    assert_true(imports_hold(&im, EXPORTER));
    assert_int_equal(claim(&im, IMPORTER, 2000, KAIROS_IMPORT_END), 0);
    assert_false(imports_hold(&im, EXPORTER));
    assert_int_equal(claim(&im, IMPORTER, 2000, KAIROS_IMPORT_END), KAIROS_ERR_INVALID);
    imports_fini(&im);
}

static void test_the_scope_decides_who_may_import(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    struct kairos_shared s = shared(KAIROS_SHARE_PID, OTHER);
    assert_int_equal(imports_shared(&im, EXPORTER, 1000, &s, why, sizeof why), 0);
    assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    assert_non_null(strstr(why, "not shared with pid 200"));
    s = shared(KAIROS_SHARE_SECURITY_TOKEN, 0); /* shared again: the newest scope */
    assert_int_equal(imports_shared(&im, EXPORTER, 1000, &s, why, sizeof why), 0);
    assert_int_equal(claim(&im, IMPORTER, 2000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), 0);
    s = shared(KAIROS_SHARE_CLIENT, DST + 1);
    assert_int_equal(imports_shared(&im, EXPORTER, 1000, &s, why, sizeof why), 0);
    assert_int_equal(imports_count(&im), 1);
    assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    imports_fini(&im);
}

static void test_a_departed_importer_ends_its_imports_unless_it_holds_a_driver_file(void **state)
{
    (void)state;
    struct heirs h;
    heirs_init(&h, root, NULL);
    struct imports im;
    imports_init(&im, root, &h);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, "/dev/nvidiactl");
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&im, EXPORTER, 1000, &s, why, sizeof why), 0);
    assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), 0);
    imports_member_left(&im, EXPORTER);
    fake_proc_gone(EXPORTER);
    imports_member_left(&im, IMPORTER); /* hung up, but its driver file is open */
    assert_true(imports_holder_cb(&im, EXPORTER));
    fake_proc_gone(IMPORTER);
    assert_false(imports_holder_cb(&im, EXPORTER));
    assert_int_equal(imports_count(&im), 0);
    imports_fini(&im);
    heirs_fini(&h);
}

static void test_a_reused_pid_is_not_the_exporter(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&im, EXPORTER, 1000, &s, why, sizeof why), 0);
    imports_member_left(&im, EXPORTER);
    fake_proc_gone(EXPORTER);
    fake_proc_add(EXPORTER, 1, 11, NULL); /* another process with its pid */
    assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    assert_false(imports_hold(&im, EXPORTER));
    imports_fini(&im);
}

/* A process that shares more than kairosd remembers one by one is taken to share
 * everything with anyone: its imports are still followed, nothing refused. */
static void test_a_flood_of_shares_becomes_a_share_of_everything(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    for (uint32_t i = 0; i <= KAIROS_SHARED_PER_PROCESS; i++) {
        struct kairos_shared s = {.h_client = CLIENT, .h_object = 0x100 + i,
                                  .share_type = KAIROS_SHARE_PID, .share_arg = OTHER};
        assert_int_equal(imports_shared(&im, EXPORTER, 1000, &s, why, sizeof why), 0);
    }
    assert_int_equal(im.n_shares, 1);
    assert_int_equal(claim(&im, IMPORTER, 2000, KAIROS_IMPORT_BEGIN), 0); /* any object */
    assert_true(imports_hold(&im, EXPORTER));
    imports_fini(&im);
}

/* After a restart the importer may report again before its exporter: its BEGIN is
 * kept a while for the exporter's SHARED, then checked like any other. */
static void test_after_a_restart_an_import_waits_for_its_share(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    struct kairos_imported m = {.flags = KAIROS_IMPORT_BEGIN, .h_client_src = CLIENT,
                                .h_object_src = OBJECT, .h_client = DST};
    uint32_t exporter = 1;
    assert_int_equal(imports_imported(&im, IMPORTER, 1000, &m, 200, &exporter, why, sizeof why),
                     0);
    assert_int_equal(exporter, 0); /* not known yet */
    struct kairos_imported other = m;
    other.h_object_src = OBJECT + 1; /* nobody will share this one */
    assert_int_equal(imports_imported(&im, IMPORTER, 1000, &other, 200, NULL, why, sizeof why),
                     0);
    assert_int_equal(imports_count(&im), 2);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&im, EXPORTER, 1000, &s, why, sizeof why), 0);
    assert_true(imports_hold(&im, EXPORTER));
    usleep(300 * 1000);
    assert_int_equal(imports_count(&im), 1); /* the unexplained one is gone */
    assert_true(imports_hold(&im, EXPORTER));
    /* a share that does not admit the importer: refused at once, even now */
    s = (struct kairos_shared){.h_client = CLIENT, .h_object = OBJECT + 2,
                               .share_type = KAIROS_SHARE_PID, .share_arg = OTHER};
    assert_int_equal(imports_shared(&im, EXPORTER, 1000, &s, why, sizeof why), 0);
    other.h_object_src = OBJECT + 2;
    assert_int_equal(imports_imported(&im, IMPORTER, 1000, &other, 200, NULL, why, sizeof why),
                     KAIROS_ERR_PERMISSION);
    imports_fini(&im);
}

#define MiB (1ull << 20)

static struct kairos_shared freed(uint64_t bytes)
{
    return (struct kairos_shared){.h_client = CLIENT, .h_object = OBJECT,
                                  .flags = KAIROS_SHARED_FREED, .gpu = 0, .bytes = bytes};
}

struct kept_fixture {
    struct imports im;
    struct ledger L;
    struct ledger_tenant *team;
};

static void kept_setup(struct kept_fixture *f)
{
    uint64_t quota[KAIROS_MAX_GPUS] = {64 * MiB};
    assert_int_equal(ledger_init(&f->L, 1), 0);
    assert_int_equal(ledger_tenant_add(&f->L, "team", quota, 0, &f->team), 0);
    imports_init(&f->im, root, NULL);
    imports_set_ledger(&f->im, &f->L);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
}

static void kept_teardown(struct kept_fixture *f)
{
    imports_fini(&f->im);
    ledger_fini(&f->L);
}

static void test_a_freed_share_stays_charged_only_while_an_import_lives(void **state)
{
    (void)state;
    struct kept_fixture f;
    kept_setup(&f);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0), fr = freed(4 * MiB);
    /* no import: nothing kept */
    assert_int_equal(imports_shared(&f.im, EXPORTER, 1000, &s, why, sizeof why), 0);
    assert_false(imports_freed(&f.im, EXPORTER, f.team, &fr));
    assert_int_equal(f.team->draining[0], 0);
    /* freed: it can no longer be imported */
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    /* shared again (a new object under the handle), imported, freed: kept */
    assert_int_equal(imports_shared(&f.im, EXPORTER, 1000, &s, why, sizeof why), 0);
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), 0);
    fake_proc_gone(EXPORTER); /* its FREED is read after it exited, before its hang-up */
    assert_true(imports_freed(&f.im, EXPORTER, f.team, &fr));
    assert_int_equal(f.team->draining[0], 4 * MiB);
    assert_int_equal(imports_kept(&f.im, f.team, 0), 4 * MiB);
    /* the exporter may leave: the charge is the tenant's, kept while the import lives */
    imports_member_left(&f.im, EXPORTER);
    assert_int_equal(imports_check(&f.im), 1);
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_END), 0);
    assert_int_equal(f.team->draining[0], 0);
    assert_int_equal(imports_check(&f.im), 0);
    assert_int_equal(ledger_check(&f.L), 0);
    kept_teardown(&f);
}

static void test_a_new_object_under_a_freed_handle_is_not_the_imported_one(void **state)
{
    (void)state;
    struct kept_fixture f;
    kept_setup(&f);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0), fr = freed(4 * MiB);
    assert_int_equal(imports_shared(&f.im, EXPORTER, 1000, &s, why, sizeof why), 0);
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), 0);
    assert_true(imports_freed(&f.im, EXPORTER, f.team, &fr));
    /* the same handle, a new object nobody imported: its free keeps nothing more */
    assert_int_equal(imports_shared(&f.im, EXPORTER, 1000, &s, why, sizeof why), 0);
    fr.bytes = 8 * MiB;
    assert_false(imports_freed(&f.im, EXPORTER, f.team, &fr));
    assert_int_equal(f.team->draining[0], 4 * MiB);
    /* imported too this time: one record, both charges, until both imports end */
    assert_int_equal(imports_shared(&f.im, EXPORTER, 1000, &s, why, sizeof why), 0);
    struct kairos_imported second = {.flags = KAIROS_IMPORT_BEGIN, .h_client_src = CLIENT,
                                     .h_object_src = OBJECT, .h_client = DST + 1,
                                     .h_object = OBJECT};
    assert_int_equal(imports_imported(&f.im, IMPORTER, 1000, &second, 0, NULL, why, sizeof why),
                     0);
    assert_true(imports_freed(&f.im, EXPORTER, f.team, &fr));
    assert_int_equal(f.team->draining[0], 12 * MiB);
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_END), 0);
    assert_int_equal(f.team->draining[0], 12 * MiB);
    second.flags = KAIROS_IMPORT_END;
    assert_int_equal(imports_imported(&f.im, IMPORTER, 1000, &second, 0, NULL, why, sizeof why),
                     0);
    assert_int_equal(f.team->draining[0], 0);
    kept_teardown(&f);
}

static void test_lies_and_floods_of_frees_keep_only_the_senders_own(void **state)
{
    (void)state;
    struct kept_fixture f;
    kept_setup(&f);
    uint64_t quota[KAIROS_MAX_GPUS] = {64 * MiB};
    struct ledger_tenant *other;
    assert_int_equal(ledger_tenant_add(&f.L, "other", quota, 0, &other), 0);
    fake_proc_add(OTHER, 1, 30, NULL);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0), fr = freed(4 * MiB);
    assert_int_equal(imports_shared(&f.im, EXPORTER, 1000, &s, why, sizeof why), 0);
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), 0);
    /* another process claims to have freed the exporter's object: it imports nothing
     * of its own, so nothing is kept, on no tenant */
    assert_false(imports_freed(&f.im, OTHER, other, &fr));
    assert_int_equal(other->draining[0] + f.team->draining[0], 0);
    assert_true(imports_hold(&f.im, EXPORTER)); /* the exporter's share stands */
    /* a flood of shares and frees of objects nobody imports: nothing kept, the table
     * never grows (each free forgets its share) */
    for (uint32_t i = 1; i <= 3 * KAIROS_SHARED_PER_PROCESS; i++) {
        struct kairos_shared si = s, fi = fr;
        si.h_object = fi.h_object = OBJECT + i;
        assert_int_equal(imports_shared(&f.im, EXPORTER, 1000, &si, why, sizeof why), 0);
        assert_false(imports_freed(&f.im, EXPORTER, f.team, &fi));
    }
    assert_int_equal(f.im.n_shares, 1);
    assert_int_equal(f.im.n_kept, 0);
    /* the exporter tells its free of the imported object again and again: one record */
    for (int i = 0; i < 100; i++)
        assert_true(imports_freed(&f.im, EXPORTER, f.team, &fr));
    assert_int_equal(f.im.n_kept, 1);
    assert_int_equal(other->draining[0], 0);
    /* its tenant removed meanwhile: the end of the import finds nothing to release */
    assert_int_equal(ledger_tenant_remove(&f.L, f.team), 0);
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_END), 0);
    assert_int_equal(imports_check(&f.im), 0);
    kept_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_an_import_of_a_shared_object_keeps_its_exporter,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_the_scope_decides_who_may_import,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(
            test_a_departed_importer_ends_its_imports_unless_it_holds_a_driver_file,
            fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_reused_pid_is_not_the_exporter,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_flood_of_shares_becomes_a_share_of_everything,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_after_a_restart_an_import_waits_for_its_share,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(
            test_a_freed_share_stays_charged_only_while_an_import_lives,
            fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(
            test_a_new_object_under_a_freed_handle_is_not_the_imported_one,
            fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_lies_and_floods_of_frees_keep_only_the_senders_own,
                                        fake_proc_setup, fake_proc_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
