/* test_mps_server.c - MPS servers told from a /proc made of files (fake_proc.h): a
 * process whose executable is an nvidia-cuda-mps-server that the expected owner owns,
 * in a folder of that owner's, is one, with its uid; a user's copy (the production
 * owner, root, does not own it), a binary or folder others may write, and a process
 * that only calls itself so are not; a scan gives each server's uid once, and a
 * server serves its own uid, root's serves every uid. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_proc.h"

#include "daemon/base/mps_server.h"

#define root fake_proc_root

/* Process pid of uid running exe (NULL: no exe link), calling itself comm. */
static void proc(uint32_t pid, uint32_t uid, const char *comm, const char *exe)
{
    char text[160];
    fake_proc_add(pid, 1, 100, NULL);
    snprintf(text, sizeof text, "%s\n", comm);
    fake_proc_file(pid, "comm", text);
    snprintf(text, sizeof text, "Name:\t%s\nUid:\t%u\t%u\t%u\t%u\n", comm, uid, uid, uid, uid);
    fake_proc_file(pid, "status", text);
    if (exe)
        fake_proc_exe(pid, exe);
}

static void test_a_server_the_owner_installed_is_one(void **state)
{
    (void)state;
    proc(100, 1000, "nvidia-cuda-mps", fake_proc_mps_binary());
    uint32_t uid = 0;
    assert_true(mps_server_is(root, 100, getuid(), &uid));
    assert_int_equal(uid, 1000);
    assert_false(mps_server_is(root, 101, getuid(), &uid)); /* no such process */
}

/* The attacker: a user's own copy of the binary, named the same, run as that user.
 * kairosd asks for root's (MPS_SERVER_OWNER); the copy is the test's, or, when the
 * test runs as root, given to uid 4242. */
static void test_a_users_copy_named_so_is_none(void **state)
{
    (void)state;
    const char *bin = fake_proc_mps_binary();
    if (getuid() == MPS_SERVER_OWNER)
        assert_int_equal(chown(bin, 4242, 4242), 0);
    proc(100, 4242, "nvidia-cuda-mps", bin);
    assert_false(mps_server_is(root, 100, MPS_SERVER_OWNER, NULL));
    struct mps_servers s;
    assert_int_equal(mps_server_scan(root, MPS_SERVER_OWNER, &s), 0);
    assert_int_equal(s.n, 0);
}

static void test_a_binary_or_folder_others_may_write_is_none(void **state)
{
    (void)state;
    const char *bin = fake_proc_mps_binary();
    proc(100, 1000, "nvidia-cuda-mps", bin);
    assert_int_equal(chmod(bin, 0775), 0);
    assert_false(mps_server_is(root, 100, getuid(), NULL));
    assert_int_equal(chmod(bin, 0757), 0);
    assert_false(mps_server_is(root, 100, getuid(), NULL));
    assert_int_equal(chmod(bin, 0755), 0);
    assert_true(mps_server_is(root, 100, getuid(), NULL));
    /* a folder others may write (where a user could link another program under the
     * server's name) */
    char dir[96];
    snprintf(dir, sizeof dir, "%s/bin", root);
    assert_int_equal(chmod(dir, 01777), 0);
    assert_false(mps_server_is(root, 100, getuid(), NULL));
}

static void test_a_name_is_not_enough(void **state)
{
    (void)state;
    char other[128];
    snprintf(other, sizeof other, "%s/bin/python3", root);
    fake_proc_mps_binary(); /* makes the folder */
    FILE *f = fopen(other, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(chmod(other, 0755), 0);
    proc(100, 1000, "nvidia-cuda-mps-server", other); /* its comm, its own choice */
    assert_false(mps_server_is(root, 100, getuid(), NULL));
    proc(101, 1000, "nvidia-cuda-mps-server", NULL); /* no executable to look at */
    assert_false(mps_server_is(root, 101, getuid(), NULL));
}

static void test_a_scan_names_each_servers_uid_once(void **state)
{
    (void)state;
    const char *bin = fake_proc_mps_binary();
    proc(100, 1000, "nvidia-cuda-mps", bin);
    proc(101, 1000, "nvidia-cuda-mps", bin);
    proc(102, 2000, "python3", NULL);
    struct mps_servers s;
    assert_int_equal(mps_server_scan(root, getuid(), &s), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.uid[0], 1000);
    assert_false(s.cut);
    assert_true(mps_server_serves(&s, 1000));
    assert_false(mps_server_serves(&s, 2000)); /* uid 2000 cannot ride on 1000's server */
    proc(103, 0, "nvidia-cuda-mps", bin);      /* a multi-user server, root's */
    assert_int_equal(mps_server_scan(root, getuid(), &s), 0);
    assert_int_equal(s.n, 2);
    assert_true(mps_server_serves(&s, 2000));
    assert_int_equal(mps_server_scan("/nonexistent/proc", getuid(), &s), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_server_the_owner_installed_is_one,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_users_copy_named_so_is_none, fake_proc_setup,
                                        fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_binary_or_folder_others_may_write_is_none,
                                        fake_proc_setup, fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_name_is_not_enough, fake_proc_setup,
                                        fake_proc_teardown),
        cmocka_unit_test_setup_teardown(test_a_scan_names_each_servers_uid_once,
                                        fake_proc_setup, fake_proc_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
