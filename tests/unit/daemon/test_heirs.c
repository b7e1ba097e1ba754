/* test_heirs.c - who holds a departed process's NVIDIA files, against a /proc made
 * of files: FORKED only for the sender's own child (and a live one), a holder found
 * through a child that died, a reused pid not taken for the process it was, a
 * cycle of hand-overs answered in bounded work, only the driver's nodes count as
 * its files, a containerised parent's child found by the pid it knows, and edges
 * saved before a restart believed only as far as /proc can check them (a reused
 * pid, a child older than its parent, a live "child" of another parent refused).
 * (INHERITED's kcmp check needs real processes: test_memory.py.) */
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

#include "daemon/heirs.h"

#define root fake_proc_root

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

static int forked(struct heirs *h, uint32_t sender, uint32_t child)
{
    char why[256] = "";
    struct kairos_forked m = {.child_pid = child};
    return heirs_forked(h, sender, &m, why, sizeof why);
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
