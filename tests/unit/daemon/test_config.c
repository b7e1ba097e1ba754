/* test_config.c - kairosd.conf: a good file, and every kind of bad one refused with
 * file:line:column and what was expected. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/config/config.h"
#include "daemon/tenants/members.h"

static const char good[] =
    "socket: /tmp/k/kairosd.sock\n"
    "state: /tmp/k/state.json\n"
    "admins: [0, 1234, root]\n"
    "audit: { interval_ms: 500, kill: true, mps_server_max: 256M }\n"
    "gpus: 2\n"
    "max_connections: 64\n"
    "tenants:\n"
    "  - name: training\n"
    "    memory: { 0: 40G, 1: 50% }\n"
    "  - name: infer.a\n"
    "    memory:\n"
    "      GPU-12345678-aaaa-bbbb-cccc-1234567890ab: 512MiB\n"
    "  - name: empty\n";

/* Space mode: a tenant's fault domain, the control program, a domain's shared_uids;
 * a name that is not one, an unknown key and a relative program are refused. */
static void test_space(void **state)
{
    (void)state;
    static const char text[] =
        "space:\n"
        "  mps_control: /opt/nv/nvidia-cuda-mps-control\n"
        "  domains: { inference-a: { shared_uids: true }, b: }\n"
        "tenants:\n"
        "  - name: web\n"
        "    fault_domain: inference-a\n"
        "    sms: 7%\n"
        "  - name: plain\n";
    struct config c;
    char err[512] = "";
    if (config_parse("s.yaml", text, strlen(text), &c, err, sizeof err))
        fail_msg("%s", err);
    assert_string_equal(c.space.mps_control, "/opt/nv/nvidia-cuda-mps-control");
    assert_string_equal(c.tenants[0].fault_domain, "inference-a");
    assert_string_equal(c.tenants[1].fault_domain, "");
    assert_int_equal(c.tenants[0].sms_pct, 7);
    assert_int_equal(c.tenants[1].sms_pct, 0); /* all SMs */
    assert_true(space_config_domain(&c.space, "inference-a")->shared_uids);
    assert_false(space_config_domain(&c.space, "b")->shared_uids);
    assert_null(space_config_domain(&c.space, "web"));
    config_free(&c);
    assert_int_equal(config_parse("e.yaml", "", 0, &c, err, sizeof err), 0);
    assert_string_equal(c.space.mps_control, "nvidia-cuda-mps-control");
    assert_string_equal(c.kernel_log, "/dev/kmsg"); /* the Xid reports, by default */
    assert_int_equal(c.space.client_check_ms, 5000);
    assert_int_equal(c.space.fault_recovery_ms, 10000);
    assert_true(c.space.end_strangers); /* a stranger's MPS client is ended by default */
    config_free(&c);
    assert_int_equal(config_parse("r.yaml", "space: { strangers: report }\n", 29, &c, err,
                                  sizeof err), 0);
    assert_false(c.space.end_strangers);
    config_free(&c);
    assert_int_equal(config_parse("n.yaml", "kernel_log: none\n", 17, &c, err, sizeof err), 0);
    assert_string_equal(c.kernel_log, "");
    config_free(&c);
    assert_int_equal(config_parse("k.yaml", "kernel_log: /run/k/fifo\n", 24, &c, err,
                                  sizeof err), 0);
    assert_string_equal(c.kernel_log, "/run/k/fifo");
    config_free(&c);
    static const char *const bad[][2] = {
        {"kernel_log: kmsg\n", "kernel_log (a path such as /dev/kmsg, or none)"},
        {"kernel_log: [a]\n", "kernel_log"},
        {"tenants:\n  - name: a\n    fault_domain: ../x\n", "fault_domain: '../x' must be"},
        {"tenants:\n  - name: a\n    sms: 50%\n", "tenant 'a' has no fault_domain"},
        {"tenants:\n  - { name: a, fault_domain: d, sms: 0% }\n", "from 1% to 100%"},
        {"tenants:\n  - { name: a, fault_domain: d, sms: 12.5% }\n", "whole percentage"},
        {"tenants:\n  - { name: a, fault_domain: d, sms: 150% }\n", "expected sms as a"},
        {"tenants:\n  - { name: a, fault_domain: d, sms: [1] }\n", "sms: a percentage"},
        {"space: { mps_control: nvidia-cuda-mps-control }\n", "absolute path"},
        {"space: { domains: { a: { shared: true } } }\n", "expected shared_uids"},
        {"space: { domains: { a: { shared_uids: maybe } } }\n", "shared_uids: expected true"},
        {"space: { pipes: /tmp }\n", "unknown key in space"},
        {"space: { client_check_ms: 50 }\n", "client_check_ms: expected 0 (never)"},
        {"space: { client_check_ms: -1 }\n", "client_check_ms: expected 0 (never)"},
        {"space: { client_check_ms: 5s }\n", "client_check_ms: expected 0 (never)"},
        {"space: { fault_recovery_ms: -1 }\n", "fault_recovery_ms: expected 0 (a fault's"},
        {"space: { fault_recovery_ms: 3600001 }\n", "fault_recovery_ms: expected 0"},
        {"space: { fault_recovery_ms: [1] }\n", "fault_recovery_ms: expected 0"},
        {"space: { strangers: kill }\n", "strangers: expected end"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(config_parse("b.yaml", bad[i][0], strlen(bad[i][0]), &c, err,
                                      sizeof err), -EINVAL);
        if (!strstr(err, bad[i][1]))
            fail_msg("%s: %s", bad[i][1], err);
    }
}

static void test_good(void **state)
{
    (void)state;
    struct config c;
    char err[512] = "";
    int rc = config_parse("k.yaml", good, strlen(good), &c, err, sizeof err);
    if (rc)
        fail_msg("%s", err);
    assert_string_equal(c.socket, "/tmp/k/kairosd.sock");
    assert_string_equal(c.state, "/tmp/k/state.json");
    assert_int_equal(c.n_admins, 3);
    assert_true(members_is_admin(&c, 1234, ""));
    assert_true(members_is_admin(&c, 0, ""));
    assert_false(members_is_admin(&c, 999, ""));
    assert_int_equal(c.n_unprivileged_cgroups, 0);
    assert_int_equal(c.audit_interval_ms, 500);
    assert_true(c.audit_kill);
    assert_int_equal(c.audit_mps_server_max, 256ull << 20);
    assert_int_equal(c.gpus, 2);
    assert_int_equal(c.max_connections, 64);
    assert_int_equal(c.n_tenants, 3);
    assert_string_equal(c.tenants[0].name, "training");
    assert_int_equal(c.tenants[0].n_quotas, 2);
    assert_int_equal(c.tenants[0].quotas[1].index, 1);
    assert_string_equal(c.tenants[0].quotas[1].value, "50%");
    assert_int_equal(c.tenants[0].quotas[1].line, 9);
    assert_int_equal(c.tenants[1].quotas[0].index, -1);
    assert_string_equal(c.tenants[1].quotas[0].uuid, "GPU-12345678-aaaa-bbbb-cccc-1234567890ab");
    assert_int_equal(c.tenants[2].n_quotas, 0);
    config_free(&c);

    assert_int_equal(config_parse("e.yaml", "", 0, &c, err, sizeof err), 0);
    assert_string_equal(c.socket, KAIROS_DEFAULT_SOCKET);
    assert_int_equal(c.audit_interval_ms, 1000);
    assert_int_equal(c.audit_mps_server_max, 1ull << 30);
    assert_int_equal(c.time_mode, SCHED_MODE_AUTO); /* do no harm */
    assert_int_equal(c.latency_yield_us, SCHED_YIELD_US);
    config_free(&c);
    static const char pods[] = "admins: []\nunprivileged_cgroups: [/kubepods.slice, /kubepods]\n";
    assert_int_equal(config_parse("p.yaml", pods, sizeof pods - 1, &c, err, sizeof err), 0);
    assert_int_equal(c.n_unprivileged_cgroups, 2);
    assert_string_equal(c.unprivileged_cgroups[1], "/kubepods");
    /* root in a pod (uid 0 on the node) is not an administrator; root on the node is */
    assert_false(members_is_admin(&c, 0, "/kubepods.slice/kubepods-pod1.slice/cri-x.scope"));
    assert_false(members_is_admin(&c, 0, "/kubepods/besteffort/pod1/x"));
    assert_false(members_is_admin(&c, 0, "")); /* unknown: not trusted */
    assert_true(members_is_admin(&c, 0, "/user.slice/user-0.slice/session-3.scope"));
    config_free(&c);
    static const char ts[] = "time_mode: timeslices\nlatency_yield_us: 0\n";
    assert_int_equal(config_parse("t.yaml", ts, sizeof ts - 1, &c, err, sizeof err), 0);
    assert_int_equal(c.time_mode, SCHED_MODE_TIMESLICES);
    assert_int_equal(c.latency_yield_us, 0);
    config_free(&c);
}

static void bad(const char *text, const char *where, const char *what)
{
    struct config c;
    char err[512] = "";
    assert_int_equal(config_parse("bad.yaml", text, strlen(text), &c, err, sizeof err), -EINVAL);
    if (!strstr(err, where) || !strstr(err, what))
        fail_msg("for\n%s\nexpected '%s' and '%s' in '%s'", text, where, what, err);
}

static void test_bad(void **state)
{
    (void)state;
    bad("socket: [\n", "bad.yaml:2:1:", "");
    bad("- a\n- b\n", "bad.yaml:1:1:", "expected a mapping of settings");
    bad("sockets: /x\n", "bad.yaml:1:1:", "unknown setting 'sockets'");
    bad("socket: relative.sock\n", "bad.yaml:1:9:", "absolute path");
    bad("gpus: many\n", "bad.yaml:1:7:", "whole number");
    bad("gpus: 99\n", "bad.yaml:1:7:", "0 to 16");
    bad("gpus: -1\n", "bad.yaml:1:7:", "whole number");
    bad("admins: root\n", "bad.yaml:1:9:", "list of uids");
    bad("unprivileged_cgroups: /kubepods\n", "bad.yaml:1:23:", "list of cgroup patterns");
    bad("unprivileged_cgroups: [kubepods]\n", "bad.yaml:1:24:", "beginning with '/'");
    bad("admins: [nosuchuser-kairos]\n", "bad.yaml:1:10:", "neither a uid nor a known user");
    bad("audit: { interval_ms: 5 }\n", "bad.yaml:1:23:", "at least 100");
    bad("audit: { mps_server_max: [1G] }\n", "bad.yaml:1:26:", "mps_server_max as a size");
    bad("audit: { kill: maybe }\n", "bad.yaml:1:16:", "true or false");
    bad("audit: { every: 5 }\n", "bad.yaml:1:10:", "unknown key 'every'");
    bad("tenants: { a: b }\n", "bad.yaml:1:10:", "list of");
    bad("tenants:\n  - memory: { 0: 1G }\n", "bad.yaml:2:5:", "without a name");
    bad("tenants:\n  - name: a b\n", "bad.yaml:2:11:", "1-63 characters");
    bad("tenants:\n  - name: a\n  - name: a\n", "bad.yaml:3:5:", "declared twice");
    bad("tenants:\n  - name: a\n    memory: 8G\n", "bad.yaml:3:13:", "mapping of GPU");
    bad("tenants:\n  - name: a\n    memory: { x: 8G }\n", "bad.yaml:3:15:", "GPU index");
    bad("tenants:\n  - name: a\n    memory: { 20: 8G }\n", "bad.yaml:3:15:", "0 to 15");
    bad("tenants:\n  - name: a\n    memory: { 0: 8G, 0: 1G }\n", "bad.yaml:3:22:", "twice");
    bad("tenants:\n  - name: a\n    memory: { 0: [8G] }\n", "bad.yaml:3:18:", "a size");
    bad("tenants:\n  - name: a\n    quota: 1\n", "bad.yaml:3:5:", "unknown key 'quota'");
    bad("gpus: 1\ngpus: 2\n", "bad.yaml:2:1:", "appears twice");
    /* duplicate keys anywhere are refused, never last-wins (1G then 80G gave 80G) */
    bad("tenants:\n  - name: a\n    memory: { 0: 1G }\n    memory: { 0: 80G }\n",
        "bad.yaml:4:5:", "'memory' appears twice in the same mapping (first at line 3)");
    bad("tenants:\n  - name: a\n    name: b\n", "bad.yaml:3:5:", "'name' appears twice");
    bad("audit: { kill: false, kill: true }\n", "bad.yaml:1:23:", "'kill' appears twice");
    bad("tenants:\n  - name: a\n    compute: { 0: { share: 10%, share: 90% } }\n",
        "bad.yaml:3:33:", "'share' appears twice");
    bad("tenants:\n  - name: a\n    memory: { 0: 1G, 1: 2G, 0: 3G }\n", "bad.yaml:3:29:",
        "'0' appears twice");
    /* one document only */
    bad("gpus: 1\n---\ngpus: 2\n", "bad.yaml:3:1:", "a second YAML document");
    bad("---\ngpus: 1\n...\n---\ntenants: []\n", "bad.yaml:5:1:", "a second YAML document");
    bad("gpus: 1\n---\n- [\n", "bad.yaml:", "after the first document");
    bad("socket: \"\\xZZ\"\n", "bad.yaml:1:", "");
    bad("max_connections_per_user: 0\n", "bad.yaml:1:27:", "at least 1");
    bad("register_timeout_ms: 10\n", "bad.yaml:1:22:", "at least 100");
    bad("usage_save_interval_ms: 999\n", "bad.yaml:1:25:", "at least 1000");
    bad("usage_save_interval_ms: 3600001\n", "bad.yaml:1:25:", "");
    bad("max_connections: 8\nadmin_reserve: 8\n", "bad.yaml:2:16:",
        "admin_reserve (8) must be below max_connections (8)");
    bad("time_mode: strict\n", "bad.yaml:1:12:", "windows (strict windows while tenants compete)");
    bad("latency_yield_us: 5\n", "bad.yaml:1:19:", "0 (no rule: the slices of the shares) or 20 to");
    bad("latency_yield_us: 1001\n", "bad.yaml:1:19:", "from 0 to 1000");
    /* compute policies */
    bad("tenants:\n  - name: a\n    compute: { 0: { share: 40 } }\n", "bad.yaml:3:28:",
        "percentage");
    bad("tenants:\n  - name: a\n    compute: { 0: { share: 140% } }\n", "bad.yaml:3:28:",
        "0% to 100%");
    bad("tenants:\n  - name: a\n    compute: { 0: { limit: 0% } }\n", "bad.yaml:3:28:",
        "never let the tenant run");
    bad("tenants:\n  - name: a\n    compute: { 0: { priority: high } }\n", "bad.yaml:3:31:",
        "latency, normal or batch");
    bad("tenants:\n  - name: a\n    compute: { 0: { weight: 1 } }\n", "bad.yaml:3:21:",
        "unknown key 'weight'");
    bad("tenants:\n  - name: a\n    compute: { 0: { share: 50%, limit: 40% } }\n",
        "bad.yaml:3:28:", "above the limit");
    bad("tenants:\n  - name: a\n    compute: { 0: {}, 0: {} }\n", "bad.yaml:3:23:", "twice");
    bad("tenants:\n  - name: a\n    compute: 50%\n", "bad.yaml:3:14:", "mapping of GPU index");
    bad("tenants:\n"
        "  - name: train\n    compute: { 0: { share: 70% }, 1: { share: 90% } }\n"
        "  - name: infer\n    compute: { 0: { share: 50% } }\n",
        "bad.yaml:2:3:", "compute shares on GPU 0 add up to 120% (train 70%, infer 50%)");
}

/* The availability settings and their defaults. */
static void test_connection_settings(void **state)
{
    (void)state;
    struct config c;
    char err[512] = "";
    static const char text[] = "max_connections: 300\nmax_connections_per_user: 20\n"
                               "admin_reserve: 5\nregister_timeout_ms: 2500\n"
                               "usage_save_interval_ms: 5000\n";
    assert_int_equal(config_parse("t.yaml", text, strlen(text), &c, err, sizeof err), 0);
    assert_int_equal(c.max_connections, 300);
    assert_int_equal(c.max_connections_per_user, 20);
    assert_int_equal(c.admin_reserve, 5);
    assert_int_equal(c.register_timeout_ms, 2500);
    assert_int_equal(c.usage_save_interval_ms, 5000);
    config_free(&c);
    assert_int_equal(config_parse("t.yaml", "", 0, &c, err, sizeof err), 0);
    assert_int_equal(c.usage_save_interval_ms, 60000);
    assert_int_equal(c.max_connections, 4096);
    assert_int_equal(c.max_connections_per_user, 512);
    assert_int_equal(c.admin_reserve, 16);
    assert_int_equal(c.register_timeout_ms, 5000);
    config_free(&c);
}

/* One document, with or without its markers, is read as before. */
static void test_document_markers(void **state)
{
    (void)state;
    struct config c;
    char err[512] = "";
    static const char text[] = "---\ngpus: 3\n...\n";
    assert_int_equal(config_parse("t.yaml", text, strlen(text), &c, err, sizeof err), 0);
    assert_int_equal(c.gpus, 3);
    config_free(&c);
}

static void test_compute(void **state)
{
    (void)state;
    static const char text[] =
        "tenants:\n"
        "  - name: train\n"
        "    compute: { 0: { share: 40%, limit: 60%, priority: batch }, 1: { share: 100% } }\n"
        "  - name: infer\n"
        "    compute: { 0: { share: 60%, priority: latency, limit: none } }\n";
    struct config c;
    char err[512] = "";
    if (config_parse("k.yaml", text, strlen(text), &c, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(c.tenants[0].n_compute, 2);
    assert_int_equal(c.tenants[0].compute[0].gpu, 0);
    assert_float_equal(c.tenants[0].compute[0].pol.share, 0.4, 1e-9);
    assert_float_equal(c.tenants[0].compute[0].pol.limit, 0.6, 1e-9);
    assert_int_equal(c.tenants[0].compute[0].pol.prio, SCHED_PRIO_BATCH);
    assert_int_equal(c.tenants[0].compute[1].gpu, 1);
    assert_int_equal(c.tenants[0].compute[0].line, 3);
    assert_int_equal(c.tenants[1].compute[0].pol.prio, SCHED_PRIO_LATENCY);
    assert_float_equal(c.tenants[1].compute[0].pol.limit, 0, 1e-9);
    config_free(&c);
}

/* managed: refuse (the default) or charge; anything else is refused with both. */
static void test_managed(void **state)
{
    (void)state;
    static const char text[] = "tenants:\n  - name: a\n    memory: { 0: 1G }\n"
                               "    managed: charge\n"
                               "  - name: b\n    managed: refuse\n"
                               "  - name: c\n";
    struct config c;
    char err[512];
    assert_int_equal(config_parse("t.yaml", text, strlen(text), &c, err, sizeof err), 0);
    assert_true(c.tenants[0].managed_charge);
    assert_false(c.tenants[1].managed_charge);
    assert_false(c.tenants[2].managed_charge);
    config_free(&c);
    bad("tenants:\n  - name: t\n    managed: yes\n", "bad.yaml:3:",
        "managed: 'yes' is neither refuse");
    bad("tenants:\n  - name: t\n    managed: [charge]\n", "bad.yaml:3:",
        "managed: refuse or managed: charge");
}

static void test_members(void **state)
{
    (void)state;
    static const char text[] = "tenants:\n  - name: t\n    memory: { 0: 1G }\n"
                               "    members: { users: [root, 1000], groups: [0],"
                               " cgroups: [/slurm/job_*] }\n";
    struct config c;
    char err[512];
    assert_int_equal(config_parse("t.yaml", text, strlen(text), &c, err, sizeof err), 0);
    const struct member_rules *r = &c.tenants[0].members;
    assert_int_equal(r->n_users, 2);
    assert_int_equal(r->users[0], 0); /* root, resolved */
    assert_int_equal(r->users[1], 1000);
    assert_int_equal(r->n_groups, 1);
    assert_int_equal(r->n_cgroups, 1);
    assert_string_equal(r->cgroups[0], "/slurm/job_*");
    config_free(&c);
    bad("tenants:\n  - name: t\n    members: { people: [1] }\n", "bad.yaml:3:",
        "unknown key 'people' in members");
    bad("tenants:\n  - name: t\n    members: { users: [no-such-user-x] }\n", "bad.yaml:3:",
        "user 'no-such-user-x' is neither a uid nor a known user name");
    bad("tenants:\n  - name: t\n    members: { cgroups: [slurm] }\n", "bad.yaml:3:",
        "beginning with '/'");
    bad("tenants:\n  - name: t\n    members: { users: [1], users: [2] }\n", "bad.yaml:3:",
        "'users' appears twice in the same mapping");
    bad("tenants:\n  - name: t\n    members: [1]\n", "bad.yaml:3:", "expected members as a "
        "mapping");
}

static void test_load_missing(void **state)
{
    (void)state;
    struct config c;
    char err[512];
    assert_int_equal(config_load("/nonexistent/kairosd.yaml", &c, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "cannot open the configuration"));
}

/* issue 25, item 6: a reload that declares no tenants while the configuration in
 * force declares some is refused, an empty file or one cut before its tenants list
 * alike; 'tenants: []' says it on purpose; nothing to lose, nothing refused. */
static void test_reload_check(void **state)
{
    (void)state;
    struct config cur, next;
    char err[512];
    assert_int_equal(config_parse("k.yaml", good, sizeof good - 1, &cur, err, sizeof err), 0);
    assert_int_equal(config_parse("k.yaml", "", 0, &next, err, sizeof err), 0);
    assert_int_equal(config_reload_check(&cur, &next, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "k.yaml is empty, while the configuration in force declares 3 "
                                "tenant(s) (training, infer.a, empty)"));
    assert_non_null(strstr(err, "write 'tenants: []'"));
    config_free(&next);
    static const char cut[] = "socket: /tmp/k/kairosd.sock\ngpus: 2\n";
    assert_int_equal(config_parse("k.yaml", cut, sizeof cut - 1, &next, err, sizeof err), 0);
    assert_int_equal(config_reload_check(&cur, &next, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "k.yaml has no 'tenants:' list"));
    config_free(&next);
    static const char none[] = "gpus: 2\ntenants: []\n";
    assert_int_equal(config_parse("k.yaml", none, sizeof none - 1, &next, err, sizeof err), 0);
    assert_int_equal(config_reload_check(&cur, &next, err, sizeof err), 0);
    /* and from no tenants, an empty file takes none away */
    struct config empty;
    assert_int_equal(config_parse("k.yaml", "", 0, &empty, err, sizeof err), 0);
    assert_int_equal(config_reload_check(&next, &empty, err, sizeof err), 0);
    config_free(&empty);
    config_free(&next);
    config_free(&cur);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_space),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_compute),
        cmocka_unit_test(test_members),
        cmocka_unit_test(test_managed),
        cmocka_unit_test(test_document_markers),
        cmocka_unit_test(test_connection_settings),
        cmocka_unit_test(test_load_missing),
        cmocka_unit_test(test_reload_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
