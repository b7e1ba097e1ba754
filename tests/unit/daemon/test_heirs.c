/* test_heirs.c - who holds a departed process's NVIDIA files, against a /proc made
 * of files: FORKED only for the sender's own child (and a live one), a holder found
 * through a child that died, a reused pid not taken for the process it was, a
 * cycle of hand-overs answered in bounded work, only the driver's nodes count as
 * its files, a containerised parent's child found by the pid it knows, and edges
 * saved before a restart believed only as far as /proc can check them (a reused
 * pid, a child older than its parent, a live "child" of another parent refused);
 * the share of edges one tenant or one uid may hold (issue 25, item 1: full for the
 * tenant that filled it, not for another; a duplicate merged; a dead holder's edge
 * makes room), and INHERITED of a file that is no NVIDIA device refused (item 4).
 * (INHERITED's kcmp check needs real processes: test_memory.py, test_trust.py.) */
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

#include "daemon/memory/heirs.h"

#define root fake_proc_root
#define TENANT_MAX 8 /* the shares the bounds tests give (heirs.h's are larger) */
#define UID_MAX 16

static void init_small(struct heirs *h)
{
    heirs_init(h, root, NULL);
    h->tenant_max = TENANT_MAX;
    h->uid_max = UID_MAX;
}

/* pid is called inner in its own pid namespace and is a child of parent (thread tid). */
static void in_container(uint32_t pid, uint32_t inner, uint32_t parent)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%u/status", root, pid);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "Name:\tpython3\nNSpid:\t%u\t%u\n", pid, inner);
    fclose(f);
    snprintf(path, sizeof path, "%s/%u/task", root, parent);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%u/task/%u", root, parent, parent);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%u/task/%u/children", root, parent, parent);
    f = fopen(path, "a");
    assert_non_null(f);
    fprintf(f, "%u ", pid);
    fclose(f);
}

static char last_why[256];

static int forked_as(struct heirs *h, uint32_t tenant, uint32_t uid, uint32_t sender,
                     uint32_t child)
{
    struct heir_owner o = {.tenant = tenant, .uid = uid};
    struct kairos_forked m = {.child_pid = child};
    last_why[0] = 0;
    return heirs_forked(h, sender, &o, &m, last_why, sizeof last_why);
}

static int forked(struct heirs *h, uint32_t sender, uint32_t child)
{
    return forked_as(h, 1, 1000, sender, child);
}

/* n children of parent, pids first.. (start times after the parent's), each with a
 * driver file. */
static void children(uint32_t parent, uint32_t first, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        fake_proc_add(first + i, parent, 1000 + i, "/dev/nvidiactl");
}

/* A tenant that fills its share is refused (BUSY, saying what to do); another
 * tenant's report is still taken; a duplicate of an edge held merges into it. */
static void test_a_tenant_that_fills_its_share_is_refused_alone(void **state)
{
    (void)state;
    struct heirs h;
    init_small(&h);
    fake_proc_add(10, 1, 500, "/dev/nvidiactl");
    fake_proc_add(20, 1, 500, "/dev/nvidiactl");
    children(10, 10000, TENANT_MAX + 1);
    fake_proc_add(30000, 20, 900, "/dev/nvidiactl");
    for (uint32_t i = 0; i < TENANT_MAX; i++)
        assert_int_equal(forked_as(&h, 1, 1000, 10, 10000 + i), 0);
    assert_int_equal(forked_as(&h, 1, 1000, 10, 10000), 0); /* a duplicate: merged */
    struct heir_owner one = {.tenant = 1, .uid = 1000};
    assert_int_equal(heirs_count(&h, &one, false), TENANT_MAX);
    assert_int_equal(forked_as(&h, 1, 1000, 10, 10000 + TENANT_MAX), KAIROS_ERR_BUSY);
    assert_non_null(strstr(last_why, "your tenant's processes already have"));
    assert_int_equal(forked_as(&h, 2, 1001, 20, 30000), 0); /* another tenant: taken */
    assert_int_equal(h.n, TENANT_MAX + 1);
    heirs_fini(&h);
}

/* One uid in several tenants holds no more than its own share in all of them. */
static void test_a_uid_is_bounded_across_its_tenants(void **state)
{
    (void)state;
    struct heirs h;
    init_small(&h);
    fake_proc_add(10, 1, 500, "/dev/nvidiactl");
    fake_proc_add(20, 1, 500, "/dev/nvidiactl");
    children(10, 10000, UID_MAX + 1);
    fake_proc_add(30000, 20, 900, "/dev/nvidiactl");
    for (uint32_t i = 0; i < UID_MAX; i++) /* one tenant's share after another's */
        assert_int_equal(forked_as(&h, 1 + i / TENANT_MAX, 1000, 10, 10000 + i), 0);
    uint32_t next = 1 + UID_MAX / TENANT_MAX; /* a tenant with room */
    assert_int_equal(forked_as(&h, next, 1000, 10, 10000 + UID_MAX), KAIROS_ERR_BUSY);
    assert_non_null(strstr(last_why, "uid 1000's processes already have"));
    assert_int_equal(forked_as(&h, next, 1001, 20, 30000), 0); /* another user: taken */
    heirs_fini(&h);
}

/* Room comes back as holders exit: an edge whose holder is gone and handed nothing
 * on keeps nothing charged, although its source lives; one whose holder handed the
 * files on stays. */
static void test_a_full_share_makes_room_as_holders_exit(void **state)
{
    (void)state;
    struct heirs h;
    init_small(&h);
    h.prune_ms = 0;
    fake_proc_add(10, 1, 500, "/dev/nvidiactl");
    children(10, 10000, TENANT_MAX);
    fake_proc_add(20000, 10000, 3000, "/dev/nvidia0"); /* the first child's own child */
    assert_int_equal(forked(&h, 10, 10000), 0);
    assert_int_equal(forked(&h, 10000, 20000), 0);
    for (uint32_t i = 1; i < TENANT_MAX - 1; i++)
        assert_int_equal(forked(&h, 10, 10000 + i), 0);
    assert_int_equal(forked(&h, 10, 10000 + TENANT_MAX - 1), KAIROS_ERR_BUSY);
    fake_proc_gone(10000); /* gone, but it handed the files on */
    fake_proc_gone(10001); /* gone, and nothing goes on from it */
    assert_int_equal(forked(&h, 10, 10000 + TENANT_MAX - 1), 0);
    assert_int_equal(h.n, TENANT_MAX);
    fake_proc_gone(10);
    assert_true(heirs_hold(&h, 10)); /* through 10000, gone, to 20000 */
    heirs_fini(&h);
}

/* INHERITED naming a descriptor that is no NVIDIA device file (a pipe, /dev/null) is
 * refused before any kcmp, whatever the link is called. */
static void test_inherited_of_a_file_that_is_no_nvidia_device_is_refused(void **state)
{
    (void)state;
    struct heirs h;
    heirs_init(&h, root, NULL);
    char fifo[128], why[256];
    snprintf(fifo, sizeof fifo, "%s/pipe", root);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    fake_proc_add(10, 1, 500, fifo); /* the victim and the claimant share a pipe */
    fake_proc_add(11, 1, 600, fifo);
    struct heir_owner o = {.tenant = 1, .uid = 1000};
    struct kairos_inherited m = {.from_pid = 10, .flags = KAIROS_INHERITED_RECEIVED,
                                 .n_fds = 1, .fds = {3}};
    assert_int_equal(heirs_inherited(&h, 11, &o, &m, why, sizeof why), KAIROS_ERR_PERMISSION);
    assert_non_null(strstr(why, "descriptor 3 is not an NVIDIA device file"));
    fake_proc_add(11, 1, 600, "/dev/null"); /* a character device, not the driver's */
    assert_int_equal(heirs_inherited(&h, 11, &o, &m, why, sizeof why), KAIROS_ERR_PERMISSION);
    assert_non_null(strstr(why, "not an NVIDIA device file"));
    assert_int_equal(h.n, 0);
    heirs_fini(&h);
}

static void test_forked_only_for_ones_own_child(void **state)
{
    (void)state;
    struct heirs h;
    heirs_init(&h, root, NULL);
    fake_proc_add(100, 1, 500, "/dev/nvidiactl");
    fake_proc_add(101, 100, 600, "/dev/nvidiactl");
    fake_proc_add(102, 1, 700, "/dev/nvidia0");
    assert_int_equal(forked(&h, 100, 101), 0);
    assert_int_equal(forked(&h, 100, 101), 0); /* twice: one edge */
    assert_int_equal(h.n, 1);
    assert_int_equal(forked(&h, 100, 102), KAIROS_ERR_PERMISSION); /* not its child */
    assert_int_equal(forked(&h, 100, 999), KAIROS_ERR_INVALID);    /* no such process */
    assert_int_equal(h.n, 1);
    heirs_fini(&h);
}

/* A parent in a container names its child as its pid namespace does: kairosd finds
 * it among the parent's children by NSpid. */
static void test_forked_in_a_container_names_the_child_by_its_inner_pid(void **state)
{
    (void)state;
    struct heirs h;
    heirs_init(&h, root, NULL);
    fake_proc_add(400, 1, 500, "/dev/nvidiactl");
    fake_proc_add(401, 400, 600, "/dev/nvidiactl");
    in_container(401, 7, 400);
    fake_proc_add(402, 1, 700, NULL);
    in_container(402, 8, 402); /* its own child, not 400's */
    assert_int_equal(forked(&h, 400, 7), 0);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.v[0].pid, 401);
    assert_int_equal(forked(&h, 400, 8), KAIROS_ERR_INVALID); /* no child of 400 is 8 */
    fake_proc_gone(400);
    assert_true(heirs_hold(&h, 400));
    heirs_fini(&h);
}

static void test_a_holder_keeps_the_departed_files_alive(void **state)
{
    (void)state;
    struct heirs h;
    heirs_init(&h, root, NULL);
    fake_proc_add(200, 1, 500, "/dev/nvidiactl");
    fake_proc_add(201, 200, 600, NULL);              /* the child, without a driver file */
    fake_proc_add(202, 201, 700, "/dev/nvidia-uvm"); /* the grandchild holds one */
    assert_int_equal(forked(&h, 200, 201), 0);
    assert_int_equal(forked(&h, 201, 202), 0);
    fake_proc_gone(200);
    fake_proc_gone(201); /* the child died: the walk goes through it */
    assert_true(heirs_hold(&h, 200));
    fake_proc_add(202, 1, 700, "/dev/nvidia-modeset"); /* not a node where memory lives */
    assert_false(heirs_hold(&h, 200));
    fake_proc_add(202, 1, 700, "socket:[42]");
    assert_false(heirs_hold(&h, 200));
    fake_proc_add(202, 1, 701, "/dev/nvidiactl"); /* pid 202 reused by another process */
    assert_false(heirs_hold(&h, 200));
    fake_proc_add(200, 1, 900, "/dev/nvidia1"); /* pid 200 itself, after an exec */
    assert_true(heirs_hold(&h, 200));
    heirs_fini(&h);
}

static void test_a_cycle_is_answered_in_bounded_work(void **state)
{
    (void)state;
    struct heirs h;
    heirs_init(&h, root, NULL);
    fake_proc_add(300, 301, 500, NULL);
    fake_proc_add(301, 300, 600, NULL); /* each the other's parent, as a crafted /proc could say */
    assert_int_equal(forked(&h, 300, 301), 0);
    assert_int_equal(forked(&h, 301, 300), 0);
    fake_proc_gone(300);
    fake_proc_add(300, 301, 500, NULL); /* alive again for the walk, holding nothing */
    (void)heirs_hold(&h, 300); /* returns: the walk is bounded */
    heirs_fini(&h);
}

/* Edges saved before a restart (handovers.h): believed only as /proc can check them. */
static void test_a_saved_edge_is_believed_only_as_far_as_it_can_be_checked(void **state)
{
    (void)state;
    struct heirs h;
    char why[256];
    heirs_init(&h, root, NULL);
    fake_proc_add(501, 1, 600, "/dev/nvidiactl"); /* the child; its parent 500 exited */
    fake_proc_add(502, 1, 400, "/dev/nvidiactl"); /* older than 500 */
    fake_proc_add(503, 1, 800, "/dev/nvidiactl"); /* alive, but its parent is 1 */
    fake_proc_add(504, 1, 900, "/dev/nvidiactl");
    struct heir_edge ok = {.from_pid = 500, .from_start = 500, .pid = 501, .start = 600,
                           .kind = HEIR_FORKED};
    assert_int_equal(heirs_restore(&h, &ok, why, sizeof why), 0);
    assert_true(heirs_hold(&h, 500));
    assert_true(heirs_hold_as(&h, 500, 500));
    assert_false(heirs_hold_as(&h, 500, 501)); /* another process that had pid 500 */
    assert_int_equal(heirs_start_of(&h, 500), 500);
    struct heir_edge reused = ok; /* 501 now is not the process that started at 650 */
    reused.from_pid = 510;
    reused.start = 650;
    assert_int_equal(heirs_restore(&h, &reused, why, sizeof why), 1);
    struct heir_edge older = {.from_pid = 500, .from_start = 500, .pid = 502, .start = 400,
                              .kind = HEIR_FORKED};
    assert_int_equal(heirs_restore(&h, &older, why, sizeof why), KAIROS_ERR_PERMISSION);
    assert_non_null(strstr(why, "started before"));
    struct heir_edge stranger = {.from_pid = 504, .from_start = 900, .pid = 503, .start = 800,
                                 .kind = HEIR_RECEIVED}; /* both live, no shared file */
    assert_int_equal(heirs_restore(&h, &stranger, why, sizeof why), KAIROS_ERR_PERMISSION);
    fake_proc_add(505, 1, 1000, "/dev/nvidiactl");
    struct heir_edge not_child = {.from_pid = 504, .from_start = 900, .pid = 505,
                                  .start = 1000, .kind = HEIR_FORKED};
    assert_int_equal(heirs_restore(&h, &not_child, why, sizeof why), KAIROS_ERR_PERMISSION);
    assert_non_null(strstr(why, "not a child"));
    struct heir_edge bad_kind = ok;
    bad_kind.kind = HEIR_KINDS;
    assert_int_equal(heirs_restore(&h, &bad_kind, why, sizeof why), KAIROS_ERR_INVALID);
    assert_int_equal(h.n, 1); /* only the edge that checks */
    assert_false(heirs_hold_as(&h, 504, 901)); /* not that process, and no edge from it */
    fake_proc_gone(501);
    assert_false(heirs_hold(&h, 500));
    heirs_fini(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_tenant_that_fills_its_share_is_refused_alone,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_uid_is_bounded_across_its_tenants,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_full_share_makes_room_as_holders_exit,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(
            test_inherited_of_a_file_that_is_no_nvidia_device_is_refused, fake_proc_setup,
            fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_forked_only_for_ones_own_child,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(
            test_a_saved_edge_is_believed_only_as_far_as_it_can_be_checked,
            fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(
            test_forked_in_a_container_names_the_child_by_its_inner_pid,
            fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_holder_keeps_the_departed_files_alive,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_cycle_is_answered_in_bounded_work, fake_proc_setup,
                                        fake_proc_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
