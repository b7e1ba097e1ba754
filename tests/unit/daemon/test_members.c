/* test_members.c - the membership decision on a fake /proc: rules by uid, group
 * and cgroup pattern, admissions found through the parent chain and ended by a
 * pid's reuse, the nearest admission binding, and the refusal naming the rule. */
#include <errno.h>
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

#include "daemon/tenants/members.h"

static char root[64];

/* <root>/<pid>/{stat,status,cgroup} for a process with that parent and start. */
static void fake_proc(uint32_t pid, uint32_t ppid, uint64_t start, const char *groups,
                      const char *cgroup)
{
    char dir[128], path[160];
    snprintf(dir, sizeof dir, "%s/%u", root, pid);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/stat", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    /* a command name with a space and a ')' in it, as the kernel allows */
    fprintf(f, "%u (a) b) S %u 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 %llu 1000 100\n",
            pid, ppid, (unsigned long long)start);
    fclose(f);
    snprintf(path, sizeof path, "%s/status", dir);
    f = fopen(path, "w");
    fprintf(f, "Name:\ta\nUid:\t1000\t1000\t1000\t1000\nGroups:\t%s\n", groups);
    fclose(f);
    snprintf(path, sizeof path, "%s/cgroup", dir);
    f = fopen(path, "w");
    fprintf(f, "0::%s\n", cgroup);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/test-members-%d", (int)getpid());
    mkdir(root, 0755);
    fake_proc(100, 1, 5, "", "/slurm/uid_1000/job_7/step_0");
    fake_proc(200, 100, 7, "27 1001", "/slurm/uid_1000/job_7/step_0/task_0");
    fake_proc(300, 200, 9, "", "/user.slice/user-1000.slice");
    fake_proc(400, 1, 11, "", "/user.slice");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_cgroup_patterns(void **state)
{
    (void)state;
    assert_true(members_cgroup_match("/slurm/uid_*/job_7", "/slurm/uid_1000/job_7/step_0"));
    assert_true(members_cgroup_match("/slurm", "/slurm/uid_1000"));
    /* '*' stays within one path component */
    assert_false(members_cgroup_match("/slurm/job_*", "/slurm/uid_1000/job_7"));
    assert_false(members_cgroup_match("/slurm/uid_1000/job_7", "/slurm/uid_1000/job_77"));
    assert_false(members_cgroup_match("/slurm/*", ""));  /* unknown never matches */
    assert_false(members_cgroup_match("relative", "/relative"));
}

/* Root in a pod is uid 0 on the node (no user namespace): under unprivileged_cgroups
 * it is not an administrator, whatever its uid; kairosd's own container is. */
static void test_pods_are_not_administrators(void **state)
{
    (void)state;
    const char pods[2][KAIROS_CGROUP_MAX] = {"/kubepods.slice", "/kubepods"};
    const char *systemd_pod = "/kubepods.slice/kubepods-besteffort.slice/"
                              "kubepods-besteffort-pod0d4f_1.slice/cri-containerd-ab.scope";
    const char *cgroupfs_pod = "/kubepods/burstable/pod0d4f-1/ab";
    const char *self = "/kubepods.slice/kubepods-pod9_9.slice/cri-containerd-kd.scope";
    assert_false(members_admin_cgroup(pods, 2, systemd_pod, "/system.slice/kairosd.service"));
    assert_false(members_admin_cgroup(pods, 2, cgroupfs_pod, self));
    assert_false(members_admin_cgroup(pods, 2, systemd_pod, self));
    assert_false(members_admin_cgroup(pods, 2, "", "/")); /* unknown: not trusted */
    /* the node's own shells and units, and kubectl exec into kairosd's container */
    assert_true(members_admin_cgroup(pods, 2, "/user.slice/user-0.slice/session-1.scope", self));
    assert_true(members_admin_cgroup(pods, 2, self, self));
    /* kairosd in the node's root cgroup: no pod is "below" it */
    assert_false(members_admin_cgroup(pods, 2, systemd_pod, "/"));
    /* a sibling whose name extends kairosd's is not kairosd's */
    assert_false(members_admin_cgroup(pods, 2, "/kubepods.slice/kubepods-pod9_9.slice/"
                                      "cri-containerd-kd.scope-evil", self));
    /* without the setting, nothing changes */
    assert_true(members_admin_cgroup(pods, 0, systemd_pod, "/"));
}

static void test_rules(void **state)
{
    (void)state;
    struct member_rules r = {0};
    struct member_peer p = {.pid = 200, .uid = 1000, .gid = 1000};
    members_peer_read(&p, root);
    assert_int_equal(p.n_groups, 2);
    assert_string_equal(p.cgroup, "/slurm/uid_1000/job_7/step_0/task_0");
    assert_null(members_rules_allow(&r, &p)); /* no rules: nobody by rule */
    r.n_users = 1;
    r.users[0] = 1000;
    assert_string_equal(members_rules_allow(&r, &p), "users");
    r.users[0] = 1;
    r.n_groups = 1;
    r.groups[0] = 1001; /* a supplementary group */
    assert_string_equal(members_rules_allow(&r, &p), "groups");
    r.groups[0] = 5;
    r.n_cgroups = 1;
    snprintf(r.cgroups[0], sizeof r.cgroups[0], "/slurm/uid_1000/job_*");
    assert_string_equal(members_rules_allow(&r, &p), "cgroups");
    snprintf(r.cgroups[0], sizeof r.cgroups[0], "/slurm/uid_2000/*");
    assert_null(members_rules_allow(&r, &p));
    char text[200];
    members_rules_describe(&r, text, sizeof text);
    assert_string_equal(text, "users: [1], groups: [5], cgroups: [/slurm/uid_2000/*]");
}

static void test_admissions_follow_the_parent_chain(void **state)
{
    (void)state;
    struct admissions a;
    admissions_init(&a, root);
    assert_int_equal(admissions_add(&a, "job", 100, 0), 0);
    assert_int_equal(admissions_add(&a, "job", 100, 0), 0); /* once */
    assert_int_equal(a.n, 1);
    assert_int_equal(admissions_add(&a, "job", 12345, 0), -ESRCH);
    assert_int_equal(admissions_find(&a, "job", 300), 100); /* grandchild */
    assert_int_equal(admissions_find(&a, "job", 400), 0);   /* not a descendant */
    assert_int_equal(admissions_find(&a, "other", 300), 0);
    char tenant[KAIROS_NAME_MAX];
    /* the nearest admission binds */
    assert_int_equal(admissions_add(&a, "inner", 200, 1000), 0);
    assert_int_equal(admissions_tenant_of(&a, 300, tenant), 200);
    assert_string_equal(tenant, "inner");
    /* pid 100 reused by another process: its admission no longer counts */
    fake_proc(100, 1, 99, "", "/");
    assert_int_equal(admissions_find(&a, "job", 300), 0);
    assert_int_equal(admissions_restore(&a, "job", 100, 5, 0), -ESRCH);
    assert_int_equal(admissions_count_by(&a, 1000), 1);
    assert_int_equal(admissions_count_by(&a, 0), 0); /* 100's was dropped: pid reused */
    admissions_forget_tenant(&a, "inner");
    assert_int_equal(admissions_tenant_of(&a, 300, tenant), 0);
    admissions_fini(&a);
}

static void test_the_refusal_names_the_rule(void **state)
{
    (void)state;
    struct admissions a;
    admissions_init(&a, root);
    struct member_rules r = {0};
    struct member_peer p = {.pid = 400, .uid = 1000, .gid = 1000};
    char why[KAIROS_MSG_MAX];
    assert_null(members_may_join(&a, &r, "big", true, false, &p, "/etc/kairos/kairosd.yaml",
                                 why, sizeof why));
    assert_non_null(strstr(why, "tenant 'big' does not admit uid 1000 (gid 1000, cgroup "
                                "/user.slice)"));
    assert_non_null(strstr(why, "members (users, groups or cgroups) in /etc/kairos/kairosd.yaml"));
    assert_non_null(members_may_join(&a, &r, "big", true, true, &p, "x", why, sizeof why));
    admissions_fini(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cgroup_patterns),
        cmocka_unit_test(test_pods_are_not_administrators),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_admissions_follow_the_parent_chain),
        cmocka_unit_test(test_the_refusal_names_the_rule),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
