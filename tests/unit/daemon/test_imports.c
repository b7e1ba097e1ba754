/* test_imports.c - legacy CUDA IPC claims against a /proc made of files: an import
 * is taken only for an object a live member shared with the importer's scope
 * (never its own), keeps only its exporter's charge while it lives, ends with END,
 * with its importer's departure (unless the importer still holds a driver file),
 * a reused pid is not the process that shared, and after a restart an import
 * reported before its share waits for it a while. The exporter's free of a shared
 * object (SHARED FREED) keeps its bytes on the exporter's tenant only while a
 * verified import of that object lives. An import of an object no member shared is
 * an MPS client's when an MPS server (root's binary) runs as the importer's uid or as
 * root: taken, keeping no charge, counted in the bounds, ended by END; not on another
 * uid's server nor on an impostor's. */
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

#include "daemon/memory/imports.h"

#define root fake_proc_root
static char why[KAIROS_MSG_MAX];

enum { EXPORTER = 100, IMPORTER = 200, OTHER = 300, SERVER = 400 };
#define CLIENT 0xc1d00001u
#define OBJECT 0x5c000096u
#define DST 0xc1d00002u

#define MiB (1ull << 20)

/* A share of OBJECT: 4 MiB of device memory on GPU 0. */
static struct kairos_shared shared(uint32_t type, uint32_t arg)
{
    return (struct kairos_shared){.h_client = CLIENT, .h_object = OBJECT, .share_type = type,
                                  .share_arg = arg, .bytes = 4 * MiB};
}

/* A member: its tenant's id is its pid / 100 (EXPORTER, IMPORTER and OTHER are of
 * three tenants), the ledger charges it `charged` on each GPU. */
static uint64_t charged = 1ull << 30;
static const struct ipc_sender *who_in(uint32_t pid, uint32_t uid, uint32_t tenant)
{
    static struct ipc_sender w[4];
    static unsigned next;
    struct ipc_sender *s = &w[next++ % 4];
    *s = (struct ipc_sender){.pid = pid, .uid = uid, .tenant = tenant};
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
        s->charged[g] = charged;
    return s;
}

static const struct ipc_sender *who(uint32_t pid, uint32_t uid)
{
    return who_in(pid, uid, pid / 100);
}

static int claim(struct imports *im, uint32_t pid, uint32_t uid, uint32_t flags)
{
    struct kairos_imported m = {.flags = flags, .h_client_src = CLIENT, .h_object_src = OBJECT,
                                .h_client = DST, .h_object = OBJECT};
    return imports_imported(im, who(pid, uid), &m, 0, NULL, why, sizeof why);
}

/* Process pid of uid runs exe. */
static void running(uint32_t pid, uint32_t uid, const char *exe)
{
    char text[96];
    fake_proc_add(pid, 1, 5, NULL);
    snprintf(text, sizeof text, "Name:\tnvidia-cuda-mps\nUid:\t%u\t%u\t%u\t%u\n", uid, uid, uid,
             uid);
    fake_proc_file(pid, "status", text);
    fake_proc_exe(pid, exe);
}

/* An MPS server of uid runs as pid, its binary the test's, which im takes for root's;
 * im scans /proc at each BEGIN no share explains. */
static void mps_server(struct imports *im, uint32_t pid, uint32_t uid)
{
    im->mps_owner = getuid();
    im->mps_rescan_ms = 0;
    running(pid, uid, fake_proc_mps_binary());
}

/* A BEGIN (or END) of object OBJECT + k into DST: the code, *exporter set. */
static int import_k(struct imports *im, uint32_t uid, uint32_t flags, uint32_t k,
                    uint64_t provisional_ms, uint32_t *exporter)
{
    struct kairos_imported m = {.flags = flags, .h_client_src = CLIENT,
                                .h_object_src = OBJECT + k, .h_client = DST};
    return imports_imported(im, who(IMPORTER, uid), &m, provisional_ms, exporter, why,
                            sizeof why);
}

static void test_an_unshared_object_is_imported_from_an_mps_server_of_the_uid(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    uint32_t exporter = 0;
    assert_int_equal(import_k(&im, 1000, KAIROS_IMPORT_BEGIN, 0, 0, &exporter),
                     KAIROS_ERR_PERMISSION); /* no server: refused as before */
    assert_non_null(strstr(why, "no live member of a tenant reported"));
    mps_server(&im, SERVER, 1000);
    assert_int_equal(import_k(&im, 1000, KAIROS_IMPORT_BEGIN, 0, 0, &exporter), 0);
    assert_int_equal(exporter, IMPORTS_FROM_MPS);
    assert_int_equal(import_k(&im, 1000, KAIROS_IMPORT_BEGIN, 0, 0, NULL), 0);
    assert_int_equal(imports_count(&im), 1); /* one entry, two BEGINs */
    /* a member claiming those handles later: the import keeps no charge of its */
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    assert_false(imports_hold(&im, EXPORTER));
    exporter = 0;
    assert_int_equal(import_k(&im, 1000, KAIROS_IMPORT_END, 0, 0, &exporter), 0);
    assert_int_equal(exporter, IMPORTS_FROM_MPS); /* ended quietly */
    assert_int_equal(import_k(&im, 1000, KAIROS_IMPORT_END, 0, 0, NULL), 0);
    assert_int_equal(imports_count(&im), 0);
    assert_int_equal(import_k(&im, 1000, KAIROS_IMPORT_END, 0, 0, NULL), KAIROS_ERR_INVALID);
    imports_fini(&im);
}

/* The attacker: uid 2000's client rides neither on uid 1000's server nor on a server
 * of its own run from a copy in a folder anyone may write; root's serves every uid. */
static void test_another_uids_or_an_impostors_server_admits_no_import(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    mps_server(&im, SERVER, 1000);
    assert_int_equal(import_k(&im, 2000, KAIROS_IMPORT_BEGIN, 0, 0, NULL),
                     KAIROS_ERR_PERMISSION);
    char dir[96], bin[128];
    snprintf(dir, sizeof dir, "%s/tmp", root);
    assert_int_equal(mkdir(dir, 01777), 0);
    assert_int_equal(chmod(dir, 01777), 0);
    snprintf(bin, sizeof bin, "%s/nvidia-cuda-mps-server", dir);
    FILE *f = fopen(bin, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(chmod(bin, 0755), 0);
    running(SERVER + 1, 2000, bin);
    assert_int_equal(import_k(&im, 2000, KAIROS_IMPORT_BEGIN, 0, 0, NULL),
                     KAIROS_ERR_PERMISSION);
    assert_int_equal(imports_count(&im), 0);
    mps_server(&im, SERVER + 2, 0); /* a multi-user server, root's */
    assert_int_equal(import_k(&im, 2000, KAIROS_IMPORT_BEGIN, 0, 0, NULL), 0);
    imports_fini(&im);
}

static void test_an_mps_clients_imports_are_bounded_per_process(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    mps_server(&im, SERVER, 1000);
    im.mps_rescan_ms = 60000; /* one scan answers them all */
    for (uint32_t k = 0; k < KAIROS_IMPORTS_PER_PROCESS; k++)
        assert_int_equal(import_k(&im, 1000, KAIROS_IMPORT_BEGIN, k, 0, NULL), 0);
    assert_int_equal(import_k(&im, 1000, KAIROS_IMPORT_BEGIN, KAIROS_IMPORTS_PER_PROCESS, 0,
                              NULL), KAIROS_ERR_INVALID);
    assert_non_null(strstr(why, "the most kairosd follows per process"));
    imports_member_left(&im, IMPORTER); /* no heirs: its imports end */
    assert_int_equal(imports_count(&im), 0);
    imports_fini(&im);
}

/* After a restart an MPS client's import may be a legacy IPC import whose exporter
 * reattaches later: verified when its share comes within the window, and an MPS
 * client's one (living on, keeping nothing) past it. */
static void test_after_a_restart_an_mps_clients_import_outlives_the_window(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    mps_server(&im, SERVER, 1000);
    assert_int_equal(import_k(&im, 1000, KAIROS_IMPORT_BEGIN, 0, 200, NULL), 0);
    assert_int_equal(import_k(&im, 1000, KAIROS_IMPORT_BEGIN, 1, 200, NULL), 0);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    assert_true(imports_hold(&im, EXPORTER));
    usleep(300 * 1000);
    assert_int_equal(imports_count(&im), 2);
    assert_true(imports_hold(&im, EXPORTER));
    imports_fini(&im);
}

static void test_an_import_of_a_shared_object_keeps_its_exporter(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    assert_non_null(strstr(why, "reported"));
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
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
    imports_init(&im, root, NULL, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    struct kairos_shared s = shared(KAIROS_SHARE_PID, OTHER);
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    assert_non_null(strstr(why, "not shared with pid 200"));
    s = shared(KAIROS_SHARE_SECURITY_TOKEN, 0); /* shared again: the newest scope */
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    assert_int_equal(claim(&im, IMPORTER, 2000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), 0);
    s = shared(KAIROS_SHARE_CLIENT, DST + 1);
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
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
    imports_init(&im, root, &h, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, "/dev/nvidiactl");
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
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
    imports_init(&im, root, NULL, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    imports_member_left(&im, EXPORTER);
    fake_proc_gone(EXPORTER);
    fake_proc_add(EXPORTER, 1, 11, NULL); /* another process with its pid */
    assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    assert_false(imports_hold(&im, EXPORTER));
    imports_fini(&im);
}

/* A process that shares more than kairosd follows per process is refused beyond
 * that, and never becomes a sharer of anything it did not name (issue 25, item 2:
 * the 1025th share of nothing made it the sharer of everything, so that other
 * exporters' imports were matched to it and their charges dropped). */
static void test_a_flood_of_shares_is_refused_and_shares_nothing_else(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    fake_proc_add(OTHER, 1, 30, NULL);
    struct kairos_shared s = {.h_client = CLIENT + 1, .share_type = KAIROS_SHARE_ALL};
    for (uint32_t i = 0; i < KAIROS_SHARED_PER_PROCESS; i++) {
        s.h_object = 0x100 + i;
        assert_int_equal(imports_shared(&im, who(OTHER, 1000), &s, why, sizeof why), 0);
    }
    s.h_object = 0x100 + KAIROS_SHARED_PER_PROCESS;
    assert_int_equal(imports_shared(&im, who(OTHER, 1000), &s, why, sizeof why),
                     KAIROS_ERR_INVALID);
    assert_non_null(strstr(why, "per process"));
    assert_int_equal(im.n_shares, KAIROS_SHARED_PER_PROCESS);
    /* the same object again is the same entry, even now */
    s.h_object = 0x100;
    assert_int_equal(imports_shared(&im, who(OTHER, 1000), &s, why, sizeof why), 0);
    /* an object it did not name is not its to share: the real exporter's is matched */
    struct kairos_shared real = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(claim(&im, IMPORTER, 2000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &real, why, sizeof why), 0);
    uint32_t exporter = 0;
    struct kairos_imported m = {.flags = KAIROS_IMPORT_BEGIN, .h_client_src = CLIENT,
                                .h_object_src = OBJECT, .h_client = DST};
    assert_int_equal(imports_imported(&im, who(IMPORTER, 2000), &m, 0, &exporter, why,
                                      sizeof why), 0);
    assert_int_equal(exporter, EXPORTER);
    assert_true(imports_hold(&im, EXPORTER));
    assert_false(imports_hold(&im, OTHER));
    imports_fini(&im);
}

/* A share names device memory the ledger charges its sender: a process that holds
 * nothing shares nothing, and its shares on a GPU add up to no more than its charge
 * there (issue 25, item 2: SHAREDs of objects that do not exist). */
static void test_a_share_fits_in_what_the_ledger_charges_its_sender(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    charged = 0;
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why),
                     KAIROS_ERR_INVALID);
    assert_non_null(strstr(why, "more than the 0 kairosd charges it"));
    charged = 10 * MiB; /* two 4 MiB objects fit, a third does not */
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    s.h_object = OBJECT + 1;
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    s.h_object = OBJECT + 2;
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why),
                     KAIROS_ERR_INVALID);
    s.gpu = 1; /* another GPU: the charge there */
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    s = shared(KAIROS_SHARE_ALL, 0); /* shared again: one entry, not twice the bytes */
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    assert_int_equal(im.n_shares, 3);
    s.bytes = 0; /* no device memory: always fits, keeps nothing */
    s.h_object = OBJECT + 3;
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    charged = 1ull << 30;
    imports_fini(&im);
}

/* The same object imported again and again by one process is one entry, ended by
 * as many ENDs (issue 25, item 2: duplicates filled the table). */
static void test_an_object_imported_again_is_one_entry(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    for (int i = 0; i < 3 * KAIROS_IMPORTS_PER_PROCESS; i++) {
        struct kairos_imported m = {.flags = KAIROS_IMPORT_BEGIN, .h_client_src = CLIENT,
                                    .h_object_src = OBJECT, .h_client = DST + (uint32_t)i};
        assert_int_equal(imports_imported(&im, who(IMPORTER, 1000), &m, 0, NULL, why,
                                          sizeof why), 0);
    }
    assert_int_equal(imports_count(&im), 1);
    for (int i = 1; i < 3 * KAIROS_IMPORTS_PER_PROCESS; i++)
        assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_END), 0);
    assert_true(imports_hold(&im, EXPORTER)); /* one BEGIN is not ended yet */
    assert_int_equal(claim(&im, IMPORTER, 1000, KAIROS_IMPORT_END), 0);
    assert_false(imports_hold(&im, EXPORTER));
    assert_int_equal(imports_count(&im), 0);
    imports_fini(&im);
}

/* n_objects objects shared by process pid (tenant 9, uid 9999, client pid << 8):
 * how many shares were refused (the last reason in why). */
static unsigned share_many(struct imports *im, uint32_t pid, uint32_t n_objects)
{
    fake_proc_add(pid, 1, pid, NULL);
    unsigned refused = 0;
    for (uint32_t i = 0; i < n_objects; i++) {
        struct kairos_shared s = {.h_client = pid << 8, .h_object = 0x1000 + i,
                                  .share_type = KAIROS_SHARE_ALL};
        refused += imports_shared(im, who_in(pid, 9999, 9), &s, why, sizeof why) != 0;
    }
    return refused;
}

/* The first n_objects objects exporter shared, imported by each of n_importers
 * processes from first_importer on, of tenant `tenant` and euid uid: how many
 * imports were refused (the first refusal's reason in why). */
static unsigned import_many(struct imports *im, uint32_t exporter, uint32_t n_objects,
                            uint32_t first_importer, uint32_t n_importers, uint32_t tenant,
                            uint32_t uid)
{
    unsigned refused = 0;
    char first[KAIROS_MSG_MAX] = "";
    for (uint32_t p = first_importer; p < first_importer + n_importers; p++) {
        fake_proc_add(p, 1, p, NULL);
        for (uint32_t i = 0; i < n_objects; i++) {
            struct kairos_imported m = {.flags = KAIROS_IMPORT_BEGIN,
                                        .h_client_src = exporter << 8,
                                        .h_object_src = 0x1000 + i, .h_client = p << 8};
            int rc = imports_imported(im, who_in(p, uid, tenant), &m, 0, NULL, why, sizeof why);
            if (rc && !refused++)
                memcpy(first, why, sizeof first);
        }
    }
    memcpy(why, first, sizeof first);
    return refused;
}

/* One tenant (16 processes, one object each imported 1024 times over) fills what
 * it may: its imports beyond KAIROS_IPC_PER_TENANT are refused, another tenant's
 * are not; a uid's beyond KAIROS_IPC_PER_UID, in any of its tenants, are refused,
 * another uid's are not (issue 25, item 2: one tenant filled the node's table). */
static void test_a_tenant_or_user_that_fills_its_tables_stops_no_other(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL, NULL);
    const uint32_t n = KAIROS_IMPORTS_PER_PROCESS;
    const uint32_t full = KAIROS_IPC_PER_TENANT / n; /* importers that fill a tenant */
    assert_int_equal(share_many(&im, 1000, n), 0);
    assert_int_equal(import_many(&im, 1000, n, 2000, full + 1, 1, 5000), n);
    assert_non_null(strstr(why, "per tenant"));
    assert_int_equal(imports_count(&im), KAIROS_IPC_PER_TENANT);
    /* the same uid in another tenant: up to the uid's bound */
    uint32_t left = (KAIROS_IPC_PER_UID - KAIROS_IPC_PER_TENANT) / n;
    assert_int_equal(import_many(&im, 1000, n, 3000, left, 2, 5000), 0);
    assert_int_equal(import_many(&im, 1000, 1, 3500, 1, 3, 5000), 1);
    assert_non_null(strstr(why, "per user"));
    /* another tenant of another uid imports */
    assert_int_equal(import_many(&im, 1000, 1, 4000, 1, 4, 6000), 0);
    /* shares too: per tenant (tenant 9 shares from several processes) */
    uint32_t sharers = KAIROS_IPC_PER_TENANT / KAIROS_SHARED_PER_PROCESS;
    for (uint32_t p = 1; p < sharers; p++)
        assert_int_equal(share_many(&im, 1000 + p, KAIROS_SHARED_PER_PROCESS), 0);
    assert_int_equal(share_many(&im, 1000 + sharers, 1), 1);
    assert_non_null(strstr(why, "per tenant"));
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    imports_fini(&im);
}

/* With the node's table full, a tenant that has fewer than KAIROS_IPC_RESERVED
 * entries still gets them; the tenants that filled it get no more. */
static void test_a_full_node_table_refuses_only_those_that_filled_it(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL, NULL);
    im.max_imports = 2 * KAIROS_IPC_RESERVED;
    assert_int_equal(share_many(&im, 1000, 4 * KAIROS_IPC_RESERVED), 0);
    assert_int_equal(import_many(&im, 1000, 4 * KAIROS_IPC_RESERVED, 2000, 1, 1, 5000),
                     2 * KAIROS_IPC_RESERVED);
    assert_non_null(strstr(why, "on this node"));
    assert_int_equal(import_many(&im, 1000, 2 * KAIROS_IPC_RESERVED, 3000, 1, 2, 6000),
                     KAIROS_IPC_RESERVED);
    assert_int_equal(imports_count(&im), 3 * KAIROS_IPC_RESERVED);
    assert_int_equal(import_many(&im, 1000, 1, 2001, 1, 1, 5000), 1);
    imports_fini(&im);
}

/* After a restart the importer may report again before its exporter: its BEGIN is
 * kept a while for the exporter's SHARED, then checked like any other. */
static void test_after_a_restart_an_import_waits_for_its_share(void **state)
{
    (void)state;
    struct imports im;
    imports_init(&im, root, NULL, NULL);
    fake_proc_add(EXPORTER, 1, 10, NULL);
    fake_proc_add(IMPORTER, 1, 20, NULL);
    struct kairos_imported m = {.flags = KAIROS_IMPORT_BEGIN, .h_client_src = CLIENT,
                                .h_object_src = OBJECT, .h_client = DST};
    uint32_t exporter = 1;
    assert_int_equal(
        imports_imported(&im, who(IMPORTER, 1000), &m, 200, &exporter, why, sizeof why), 0);
    assert_int_equal(exporter, 0); /* not known yet */
    struct kairos_imported other = m;
    other.h_object_src = OBJECT + 1; /* nobody will share this one */
    assert_int_equal(imports_imported(&im, who(IMPORTER, 1000), &other, 200, NULL, why, sizeof why),
                     0);
    assert_int_equal(imports_count(&im), 2);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    assert_true(imports_hold(&im, EXPORTER));
    usleep(300 * 1000);
    assert_int_equal(imports_count(&im), 1); /* the unexplained one is gone */
    assert_true(imports_hold(&im, EXPORTER));
    /* a share that does not admit the importer: refused at once, even now */
    s = (struct kairos_shared){.h_client = CLIENT, .h_object = OBJECT + 2,
                               .share_type = KAIROS_SHARE_PID, .share_arg = OTHER};
    assert_int_equal(imports_shared(&im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    other.h_object_src = OBJECT + 2;
    assert_int_equal(imports_imported(&im, who(IMPORTER, 1000), &other, 200, NULL, why, sizeof why),
                     KAIROS_ERR_PERMISSION);
    imports_fini(&im);
}

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
    imports_init(&f->im, root, NULL, &f->L);
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
    assert_int_equal(imports_shared(&f.im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    assert_false(imports_freed(&f.im, EXPORTER, f.team, &fr));
    assert_int_equal(f.team->draining[0], 0);
    /* freed: it can no longer be imported */
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), KAIROS_ERR_PERMISSION);
    /* shared again (a new object under the handle), imported, freed: kept */
    assert_int_equal(imports_shared(&f.im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
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
    assert_int_equal(imports_shared(&f.im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), 0);
    assert_true(imports_freed(&f.im, EXPORTER, f.team, &fr));
    /* the same handle, a new object nobody imported: its free keeps nothing more */
    assert_int_equal(imports_shared(&f.im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    fr.bytes = 8 * MiB;
    assert_false(imports_freed(&f.im, EXPORTER, f.team, &fr));
    assert_int_equal(f.team->draining[0], 4 * MiB);
    /* imported too this time: one record, both charges, until both imports end (the
     * import of the new object is not the old one's, though its handles are) */
    s.bytes = 8 * MiB;
    assert_int_equal(imports_shared(&f.im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    struct kairos_imported second = {.flags = KAIROS_IMPORT_BEGIN, .h_client_src = CLIENT,
                                     .h_object_src = OBJECT, .h_client = DST + 1,
                                     .h_object = OBJECT};
    assert_int_equal(
        imports_imported(&f.im, who(IMPORTER, 1000), &second, 0, NULL, why, sizeof why), 0);
    assert_true(imports_freed(&f.im, EXPORTER, f.team, &fr));
    assert_int_equal(f.team->draining[0], 12 * MiB);
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_END), 0);
    assert_int_equal(f.team->draining[0], 12 * MiB);
    second.flags = KAIROS_IMPORT_END;
    assert_int_equal(
        imports_imported(&f.im, who(IMPORTER, 1000), &second, 0, NULL, why, sizeof why), 0);
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
    assert_int_equal(imports_shared(&f.im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
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
        assert_int_equal(imports_shared(&f.im, who(EXPORTER, 1000), &si, why, sizeof why), 0);
        assert_false(imports_freed(&f.im, EXPORTER, f.team, &fi));
    }
    assert_int_equal(f.im.n_shares, 1);
    assert_int_equal(f.im.n_kept, 0);
    /* the exporter tells its free of the imported object again and again: one record,
     * the first; what it no longer shares keeps nothing more */
    assert_true(imports_freed(&f.im, EXPORTER, f.team, &fr));
    for (int i = 0; i < 100; i++)
        assert_false(imports_freed(&f.im, EXPORTER, f.team, &fr));
    assert_int_equal(f.im.n_kept, 1);
    assert_int_equal(f.team->draining[0], 4 * MiB);
    assert_int_equal(other->draining[0], 0);
    /* its tenant removed meanwhile: the end of the import finds nothing to release */
    assert_int_equal(ledger_tenant_remove(&f.L, f.team), 0);
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_END), 0);
    assert_int_equal(imports_check(&f.im), 0);
    kept_teardown(&f);
}

/* A FREED keeps no more than the sender's share of that object named, on its GPU,
 * nothing for an object it did not share, and never more than its tenant's quota in
 * all (issue 25, item 2: a FREED of 1 PiB was added to the draining charge). */
static void test_a_free_keeps_no_more_than_its_share_named(void **state)
{
    (void)state;
    struct kept_fixture f;
    kept_setup(&f);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0), fr = freed(KAIROS_BYTES_MAX);
    assert_int_equal(imports_shared(&f.im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), 0);
    struct kairos_shared never = fr;
    never.h_object = OBJECT + 1; /* never shared */
    assert_false(imports_freed(&f.im, EXPORTER, f.team, &never));
    never = fr;
    never.gpu = 1; /* shared on GPU 0 */
    assert_false(imports_freed(&f.im, EXPORTER, f.team, &never));
    s.h_object = OBJECT; /* the GPU 1 lie forgot it: shared again */
    assert_int_equal(imports_shared(&f.im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    assert_int_equal(claim(&f.im, IMPORTER, 1000, KAIROS_IMPORT_BEGIN), 0);
    assert_true(imports_freed(&f.im, EXPORTER, f.team, &fr));
    assert_int_equal(f.team->draining[0], 4 * MiB);
    /* many objects shared, imported and freed: no more than the quota is kept */
    for (uint32_t i = 1; i <= 20; i++) {
        struct kairos_shared si = s, fi = fr;
        si.h_object = fi.h_object = OBJECT + 0x100 + i;
        struct kairos_imported m = {.flags = KAIROS_IMPORT_BEGIN, .h_client_src = CLIENT,
                                    .h_object_src = si.h_object, .h_client = DST};
        assert_int_equal(imports_shared(&f.im, who(EXPORTER, 1000), &si, why, sizeof why), 0);
        assert_int_equal(
            imports_imported(&f.im, who(IMPORTER, 1000), &m, 0, NULL, why, sizeof why), 0);
        assert_true(imports_freed(&f.im, EXPORTER, f.team, &fi));
    }
    assert_int_equal(f.team->draining[0], 64 * MiB);
    assert_int_equal(imports_kept(&f.im, f.team, 0), 64 * MiB);
    kept_teardown(&f);
}

/* Another process claims to share the exporter's object (reported first, with the
 * widest scope): an import of it still keeps the real exporter's freed charge
 * (issue 25, item 2: imports matched to a false sharer dropped the exporter's). */
static void test_a_false_sharer_does_not_take_the_exporters_imports(void **state)
{
    (void)state;
    struct kept_fixture f;
    kept_setup(&f);
    fake_proc_add(OTHER, 1, 30, NULL);
    struct kairos_shared s = shared(KAIROS_SHARE_ALL, 0);
    assert_int_equal(imports_shared(&f.im, who(OTHER, 1000), &s, why, sizeof why), 0);
    assert_int_equal(imports_shared(&f.im, who(EXPORTER, 1000), &s, why, sizeof why), 0);
    uint32_t exporter = 0;
    struct kairos_imported m = {.flags = KAIROS_IMPORT_BEGIN, .h_client_src = CLIENT,
                                .h_object_src = OBJECT, .h_client = DST};
    assert_int_equal(
        imports_imported(&f.im, who(IMPORTER, 1000), &m, 0, &exporter, why, sizeof why), 0);
    assert_int_equal(exporter, OTHER); /* matched to the first: no matter */
    assert_true(imports_hold(&f.im, EXPORTER));
    struct kairos_shared fr = freed(4 * MiB);
    assert_true(imports_freed(&f.im, EXPORTER, f.team, &fr));
    assert_int_equal(f.team->draining[0], 4 * MiB);
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
        cmocka_unit_test_setup_teardown(test_a_flood_of_shares_is_refused_and_shares_nothing_else,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_share_fits_in_what_the_ledger_charges_its_sender,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_an_object_imported_again_is_one_entry,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(
            test_a_tenant_or_user_that_fills_its_tables_stops_no_other,
            fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(
            test_a_full_node_table_refuses_only_those_that_filled_it,
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
        cmocka_unit_test_setup_teardown(test_a_free_keeps_no_more_than_its_share_named,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_false_sharer_does_not_take_the_exporters_imports,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(
            test_an_unshared_object_is_imported_from_an_mps_server_of_the_uid, fake_proc_setup,
            fake_proc_teardown),
        cmocka_unit_test_setup_teardown(
            test_another_uids_or_an_impostors_server_admits_no_import, fake_proc_setup,
            fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_an_mps_clients_imports_are_bounded_per_process,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(
            test_after_a_restart_an_mps_clients_import_outlives_the_window, fake_proc_setup,
            fake_proc_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
