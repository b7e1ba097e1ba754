/* test_audit.c - the audit's findings (audit.h) against in-memory GPUs, a /proc made
 * of files and a clock the test sets (node_fakes.h, fake_proc.h), read from its log
 * lines: a process the GPU lists that is no member is reported once while it stays
 * (members and kairosd never; one not in /proc, one that just left, one exiting only
 * after the grace or never); a tenant above its quota with its processes, the
 * largest acted on; memory.used beyond what is known (listed, held, credit,
 * draining, overhead) with the holders /proc shows; openers of the nodes, a member's
 * child after the grace, found by the scan every tenth pass; kills only of what
 * holds memory and is not exempt (built-in list or the configured one); malformed
 * /proc entries and thousands of intruders; the /proc scan alone without a backend;
 * a lingering member's process judged as one that left; an MPS server (its binary
 * the expected owner's) noted once and never killed, listed or only an opener, its
 * own memory reported above mps_server_max, while a process of the same command run
 * from a copy in a folder anyone may write is killed as any intruder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_proc.h"
#include "node_fakes.h"

#include "daemon/observe/audit.h"
#include "daemon/memory/linger.h"
#include "daemon/base/loop.h"
#include "daemon/tenants/tenants.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define GRACE 500u /* audit leave_grace_ms */
#define MAX_KIDS 8
/* The fake processes' pids are above PID_MAX_LIMIT (4194304): never the test's own
 * (which the audit skips) nor another real process; the kill tests list only their
 * own children. */

static struct tenants ts;
static struct loop *loop;
static struct audit *au;
static struct config cfg;
static struct ledger_tenant *T; /* tenant "a", 1 GiB on each of 2 GPUs */
static pid_t kids[MAX_KIDS];    /* killed and reaped at teardown, also after a failure */
static int n_kids;

/* The audit under test, with gpu (NULL: none) and lg's lingering members (NULL: none). */
static int start_audit(struct gpu_backend *gpu, const struct linger_set *lg)
{
    struct audit_deps deps = {.loop = loop, .gpu = gpu, .ts = &ts, .cfg = &cfg,
                              .proc_root = fake_proc_root, .linger = lg};
    return audit_init(&au, &deps);
}

static int setup(void **state)
{
    assert_int_equal(fake_proc_setup(state), 0);
    fake_gpu_reset();
    fake_now = 1000000;
    n_kids = 0;
    assert_int_equal(tenants_init(&ts, 2, "/nonexistent/state.json"), 0);
    uint64_t quota[KAIROS_MAX_GPUS] = {GiB, GiB};
    assert_int_equal(ledger_tenant_add(&ts.ledger, "a", quota, LEDGER_TENANT_CONFIG, &T), 0);
    config_defaults(&cfg);
    cfg.audit_kill = false;
    cfg.audit_overhead = 0;
    cfg.audit_process_overhead = 0;
    cfg.audit_leave_grace_ms = GRACE;
    assert_int_equal(loop_init(&loop), 0);
    assert_int_equal(start_audit(&fake_gpu_backend, NULL), 0);
    audit_set_clock(au, fake_clock, NULL);
    return 0;
}

static int teardown(void **state)
{
    audit_fini(au);
    for (int i = 0; i < n_kids; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    int rc = ledger_check(&ts.ledger);
    tenants_fini(&ts);
    loop_fini(loop);
    fake_gpu_free();
    if (cfg.audit_exempt_given)
        cfg.audit_exempt = NULL; /* the test's own array */
    config_free(&cfg);
    return fake_proc_teardown(state) ? -1 : rc;
}

/* One pass at the fake clock's time, its log lines captured. */
static void tick(void)
{
    log_capture_begin();
    audit_tick(au);
    log_capture_end();
}

/* Process pid in the fake /proc: its parent, command, uid and descriptor 3 (NULL:
 * none). */
static void proc(uint32_t pid, uint32_t ppid, const char *comm, unsigned uid, const char *fd3)
{
    char text[128];
    fake_proc_add(pid, ppid, 100, fd3);
    snprintf(text, sizeof text, "%s\n", comm);
    fake_proc_file(pid, "comm", text);
    snprintf(text, sizeof text, "Name:\t%s\nUid:\t%u\t%u\t%u\t%u\n", comm, uid, uid, uid, uid);
    fake_proc_file(pid, "status", text);
}

static struct ledger_member *join(uint32_t pid, uint64_t held0)
{
    uint64_t held[KAIROS_MAX_GPUS] = {held0};
    struct ledger_member *m = NULL;
    assert_int_equal(ledger_join(&ts.ledger, T, pid, held, &m), 0);
    return m;
}

/* A child that waits to be killed (its output kept off the test's). */
static pid_t child(void)
{
    assert_true(n_kids < MAX_KIDS);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)!freopen("/dev/null", "w", stderr);
        for (;;)
            pause();
    }
    return kids[n_kids++] = pid;
}

/* Whether pid died of SIGKILL (waited for up to 2 s: the signal takes a moment). */
static bool killed(pid_t pid)
{
    int st;
    pid_t got = 0;
    for (int i = 0; i < 200 && !got; i++) {
        got = waitpid(pid, &st, WNOHANG);
        if (!got)
            nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    if (got != pid)
        return false;
    for (int i = 0; i < n_kids; i++)
        if (kids[i] == pid)
            kids[i] = kids[--n_kids];
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

static bool alive(pid_t pid)
{
    return waitpid(pid, NULL, WNOHANG) == 0;
}

static void test_an_unregistered_process_is_reported_once_while_it_stays(void **state)
{
    (void)state;
    proc(5001000, 1, "intruder", 1000, NULL);
    fake_gpu_list(0, 5001000, 300 * MiB);
    fake_gpus[0].used = 300 * MiB;
    tick();
    assert_int_equal(log_count("warn", "audit: pid 5001000 (intruder) uses GPU 0 (300.0 MiB) "
                               "without being a registered tenant", "uid 1000; not killed "
                               "(audit action is report)", NULL), 1);
    fake_now += 1000;
    tick();
    assert_int_equal(log_count("pid 5001000", NULL), 0);
    /* gone, then back (a reused pid): a finding again */
    fake_gpu_forget(0, 5001000);
    fake_now += 1000;
    tick();
    fake_gpu_list(0, 5001000, 300 * MiB);
    fake_now += 1000;
    tick();
    assert_int_equal(log_count("pid 5001000 (intruder) uses GPU 0", NULL), 1);
}

static void test_members_and_kairosd_are_no_intruders(void **state)
{
    (void)state;
    proc(5001001, 1, "worker", 1000, NULL);
    join(5001001, 200 * MiB);
    fake_gpu_list(0, 5001001, 200 * MiB);
    fake_gpu_list(1, (uint32_t)getpid(), 100 * MiB);
    fake_gpus[0].used = 200 * MiB;
    fake_gpus[1].used = 100 * MiB;
    for (int i = 0; i < 3; i++, fake_now += GRACE) {
        tick();
        assert_int_equal(log_count("audit:", NULL), 0);
    }
}

static void test_a_process_not_in_proc_is_reported_after_the_grace(void **state)
{
    (void)state;
    fake_gpu_list(0, 5001002, 64 * MiB);
    fake_gpus[0].used = 64 * MiB;
    tick();
    fake_now += GRACE - 1;
    tick();
    assert_int_equal(log_count("pid 5001002", NULL), 0);
    fake_now += 1;
    tick();
    assert_int_equal(log_count("audit: pid 5001002 (?) uses GPU 0 (64.0 MiB) without being a "
                               "registered tenant", "not in /proc (another pid namespace?)",
                               "uid ?;", NULL), 1);
}

static void test_a_member_that_left_is_no_intruder_within_the_grace(void **state)
{
    (void)state;
    proc(5001003, 1, "worker", 1000, NULL);
    struct ledger_member *m = join(5001003, 64 * MiB);
    fake_gpu_list(0, 5001003, 64 * MiB);
    /* exiting: its descriptors are being closed, the driver frees what it holds */
    proc(5001004, 1, "dying", 1000, NULL);
    fake_proc_file(5001004, "stat", "5001004 (dying) S 1 1 1 0 -1 4 0 0 0 0 0 0 0 0 20 0 1 0 100\n");
    fake_gpu_list(0, 5001004, 64 * MiB);
    fake_gpus[0].used = 128 * MiB;
    tick();
    assert_int_equal(log_count("audit:", NULL), 0);
    ledger_leave(&ts.ledger, m, NULL);
    fake_now += 100;
    tick();
    assert_int_equal(log_count("audit:", NULL), 0);
    fake_now += GRACE - 1;
    tick();
    assert_int_equal(log_count("audit:", NULL), 0);
    fake_now += 1;
    tick();
    assert_int_equal(log_count("audit: pid 5001003 (worker) uses GPU 0 (64.0 MiB) without being "
                               "a registered tenant", NULL), 1);
    assert_int_equal(log_count("pid 5001004", NULL), 0);
    fake_now += 10 * GRACE;
    tick();
    assert_int_equal(log_count("pid 5001004", NULL), 0);
}

static void test_a_tenant_above_its_quota_is_named_largest_first(void **state)
{
    (void)state;
    cfg.audit_process_overhead = 64 * MiB;
    /* GPU 0: 176 MiB above the 1 GiB quota, beyond 2 x 64 MiB of overhead */
    proc(5001010, 1, "big", 1000, NULL);
    proc(5001011, 1, "small", 1000, NULL);
    join(5001010, 0);
    join(5001011, 0);
    fake_gpu_list(0, 5001011, 500 * MiB);
    fake_gpu_list(0, 5001010, 700 * MiB);
    fake_gpus[0].used = 1200 * MiB;
    /* GPU 1: 126 MiB above it, within the overhead */
    fake_gpu_list(1, 5001010, 600 * MiB);
    fake_gpu_list(1, 5001011, 550 * MiB);
    fake_gpus[1].used = 1150 * MiB;
    tick();
    assert_int_equal(log_count("audit: tenant a: its 2 process(es) together use 1.17 GiB on "
                               "GPU 0, above the tenant's quota of 1.00 GiB",
                               "pids 5001010 700.0 MiB, 5001011 500.0 MiB", NULL), 1);
    assert_int_equal(log_count("pid 5001010 (big) of tenant a uses 700.0 MiB on GPU 0", NULL), 1);
    assert_int_equal(log_count("pid 5001011 (small) of tenant a", NULL), 0);
    assert_int_equal(log_count("GPU 1", NULL), 0);
    fake_now += 1000;
    tick();
    assert_int_equal(log_count("tenant a", NULL), 0);
}

static void test_unexplained_memory_is_reported_with_its_holders(void **state)
{
    (void)state;
    proc(5001020, 1, "member", 1000, "/dev/nvidia0");
    join(5001020, 512 * MiB); /* not listed: its holdings are what explains it */
    proc(5001021, 1, "raw", 1000, "/dev/nvidia0");
    proc(5001022, 1, "ctl", 1000, "/dev/nvidiactl");
    fake_gpus[0].used = 2 * GiB;
    tick();
    assert_int_equal(log_count("pid 5001021 (raw) has /dev/nvidia0 open without being a "
                               "registered tenant; the GPU backend does not list it", NULL), 1);
    assert_int_equal(log_count("pid 5001022 (ctl) has the driver's /dev/nvidia* nodes open", NULL),
                     1);
    assert_int_equal(log_count("unexplained", NULL), 0);
    fake_now += GRACE;
    tick();
    assert_int_equal(log_count("audit: GPU 0: 1.50 GiB of memory.used unexplained (memory.used "
                               "2.00 GiB; processes listed, members' holdings and the overhead "
                               "allowance 512.0 MiB): held by ", "pid 5001021 (raw) uid 1000",
                               "pid 5001022 (ctl) uid 1000",
                               "pid 5001020 (member) uid 1000 (member of tenant a)", NULL), 1);
    assert_int_equal(log_count("pid 5001021 (raw) holds /dev/nvidia0 open while GPU 0 has 1.50 GiB "
                               "unexplained", NULL), 1);
    assert_int_equal(log_count("pid 5001022 (ctl) holds the driver's nodes open while GPU 0", NULL),
                     1);
    assert_int_equal(log_count("pid 5001020 (member) holds /dev/nvidia0 open while GPU 0",
                               "(member of tenant a)", NULL), 1);
    assert_int_equal(log_count("GPU 1", NULL), 0);
    fake_now += 1000;
    tick();
    assert_int_equal(log_count("unexplained", NULL), 0);
}

static void test_holdings_credit_draining_and_overhead_explain_memory(void **state)
{
    (void)state;
    cfg.audit_overhead = 64 * MiB;
    struct ledger_member *m = join(5001030, 256 * MiB);
    m->credit[0] = 256 * MiB;
    T->credit[0] += 256 * MiB;
    T->draining[0] = 512 * MiB; /* a departed member's, still shown (linger.h) */
    fake_gpu_list(0, 5001031, 128 * MiB);
    proc(5001031, 1, "listed", 1000, NULL);
    join(5001031, 128 * MiB);
    fake_gpus[0].used = GiB + 64 * MiB + 128 * MiB;
    for (int i = 0; i < 3; i++, fake_now += GRACE) {
        tick();
        assert_int_equal(log_count("unexplained", NULL), 0);
    }
    fake_gpus[0].used += MiB;
    tick();
    fake_now += GRACE;
    tick();
    assert_int_equal(log_count("audit: GPU 0: 1.00 MiB of memory.used unexplained", NULL), 1);
}

static void test_openers_are_found_every_tenth_pass_a_members_child_after_the_grace(void **state)
{
    (void)state;
    proc(5001040, 1, "member", 1000, NULL);
    join(5001040, 0);
    proc(5001041, 5001040, "forked", 1000, "/dev/nvidia1"); /* its FORKED report may be coming */
    proc(5001043, 1, "peek", 1000, "/dev/nvidia1");
    tick();
    assert_int_equal(log_count("pid 5001043 (peek) has /dev/nvidia1 open without being a "
                               "registered tenant", NULL), 1);
    assert_int_equal(log_count("pid 5001041", NULL), 0);
    proc(5001044, 1, "late", 1000, "/dev/nvidia0");
    for (int i = 1; i < 10; i++) {
        fake_now += 100;
        tick();
        assert_int_equal(log_count("has /dev/nvidia", NULL), 0);
    }
    fake_now += 100;
    tick();
    assert_int_equal(log_count("pid 5001041 (forked) has /dev/nvidia1 open", NULL), 1);
    assert_int_equal(log_count("pid 5001044 (late) has /dev/nvidia0 open", NULL), 1);
    assert_int_equal(log_count("pid 5001043", NULL), 0);
}

static void test_kills_only_what_holds_memory_and_is_not_exempt(void **state)
{
    (void)state;
    cfg.audit_kill = true;
    pid_t miner = child(), smi = child(), peek = child();
    proc((uint32_t)miner, 1, "miner", 1000, NULL);
    proc((uint32_t)smi, 1, "nvidia-smi", 0, NULL);
    proc((uint32_t)peek, 1, "peek", 1000, "/dev/nvidia0");
    fake_gpu_list(0, (uint32_t)miner, 500 * MiB);
    fake_gpu_list(0, (uint32_t)smi, 10 * MiB);
    fake_gpus[0].used = 510 * MiB;
    tick();
    char who[64];
    snprintf(who, sizeof who, "pid %d (miner) uses GPU 0", (int)miner);
    assert_int_equal(log_count(who, "killed (audit action kill)", NULL), 1);
    assert_true(killed(miner));
    snprintf(who, sizeof who, "pid %d (nvidia-smi) uses GPU 0", (int)smi);
    assert_int_equal(log_count(who, "uid 0; not killed: exempt (audit exempt)", NULL), 1);
    assert_true(alive(smi));
    snprintf(who, sizeof who, "pid %d (peek) has /dev/nvidia0 open", (int)peek);
    assert_int_equal(log_count(who, "not killed (no GPU memory of it is seen)", NULL), 1);
    assert_true(alive(peek));
}

static void test_a_configured_exempt_list_replaces_the_builtin_one(void **state)
{
    (void)state;
    static struct config_exempt mine[] = {{"", false, 1234}};
    cfg.audit_kill = true;
    cfg.audit_exempt = mine;
    cfg.n_audit_exempt = 1;
    cfg.audit_exempt_given = true;
    pid_t smi = child(), job = child();
    proc((uint32_t)smi, 1, "nvidia-smi", 0, NULL);
    proc((uint32_t)job, 1, "job", 1234, NULL);
    fake_gpu_list(1, (uint32_t)smi, 10 * MiB);
    fake_gpu_list(1, (uint32_t)job, 10 * MiB);
    fake_gpus[1].used = 20 * MiB;
    tick();
    assert_true(killed(smi));
    assert_true(alive(job));
    char who[64];
    snprintf(who, sizeof who, "pid %d (job) uses GPU 1", (int)job);
    assert_int_equal(log_count(who, "uid 1234; not killed: exempt (audit exempt)", NULL), 1);
}

#define MANY 4000u

static void test_malformed_proc_entries_and_thousands_of_intruders(void **state)
{
    (void)state;
    char path[160];
    snprintf(path, sizeof path, "%s/self", fake_proc_root);
    assert_int_equal(mkdir(path, 0755), 0);
    /* no comm, a stat cut short, a status whose Uid is no number, and a
     * descriptor to a node of the driver no GPU has */
    fake_proc_add(5001050, 1, 100, "/dev/nvidia9");
    fake_proc_file(5001050, "stat", "5001050 (cut");
    fake_proc_file(5001050, "status", "Name:\tx\nUid:\tnobody\n");
    fake_proc_fd(5001050, 4, "/dev/nvidia0-and-a-very-long-name-that-is-no-node-of-the-driver-at-"
                          "all-but-starts-like-one-and-runs-past-what-a-scan-reads");
    snprintf(path, sizeof path, "%s/5001051", fake_proc_root); /* no file at all */
    assert_int_equal(mkdir(path, 0755), 0);
    fake_gpu_list(0, 5001050, MiB);
    fake_gpu_list(0, 5001051, MiB);
    for (uint32_t i = 0; i < MANY; i++)
        fake_gpu_list(0, 5020000 + i, MiB);
    fake_gpus[0].used = (MANY + 2) * MiB;
    tick();
    assert_int_equal(log_count("audit: pid 5001050 (?) uses GPU 0 (1.00 MiB)", "uid ?;", NULL), 1);
    assert_int_equal(log_count("audit: pid 5001051 (?) uses GPU 0 (1.00 MiB)", NULL), 1);
    assert_int_equal(log_count("without being a registered tenant", NULL), 2);
    fake_now += GRACE;
    tick();
    assert_int_equal(log_count("without being a registered tenant", "not in /proc", NULL), MANY);
    fake_now += GRACE;
    tick();
    assert_int_equal(log_count("audit:", NULL), 0);
    /* forgotten once gone: reported again when back */
    fake_gpus[0].n_procs = 0;
    fake_gpus[0].used = 0;
    fake_now += 100;
    tick();
    for (uint32_t i = 0; i < MANY; i++)
        fake_gpu_list(0, 5020000 + i, MiB);
    fake_gpus[0].used = MANY * MiB;
    fake_now += 100;
    tick();
    fake_now += GRACE;
    tick();
    assert_int_equal(log_count("uses GPU 0 (1.00 MiB) without being a registered tenant",
                               "not in /proc", NULL), MANY);
    assert_int_equal(log_count("audit:", NULL), MANY);
}

static void test_without_a_backend_only_openers_are_reported(void **state)
{
    (void)state;
    audit_fini(au);
    unsetenv("KAIROS_AUDIT_DEVDIR");
    cfg.audit_kill = true;
    log_capture_begin();
    assert_int_equal(start_audit(NULL, NULL), 0);
    log_capture_end();
    assert_int_equal(log_count("warn", "without a GPU backend: only the /proc scan of "
                               "/dev/nvidia* runs", NULL), 1);
    audit_set_clock(au, fake_clock, NULL);
    proc(5001060, 1, "peek", 1000, "/dev/nvidia1");
    fake_gpu_list(0, 5001061, GiB); /* no backend: never asked */
    tick();
    assert_int_equal(log_count("pid 5001060 (peek) has /dev/nvidia1 open without being a "
                               "registered tenant; no GPU backend to say what it holds",
                               "not killed (no GPU memory of it is seen)", NULL), 1);
    assert_int_equal(log_count("pid 5001061", NULL), 0);
}

static void test_a_lingering_members_process_is_judged_as_one_that_left(void **state)
{
    (void)state;
    struct linger_set *lg = NULL;
    struct linger_deps ldeps = {.loop = loop, .gpu = &fake_gpu_backend, .ledger = &ts.ledger,
                                .n_gpus = ts.n_gpus};
    assert_int_equal(linger_init(&lg, &ldeps), 0);
    linger_set_clock(lg, fake_clock, NULL);
    audit_fini(au);
    assert_int_equal(start_audit(&fake_gpu_backend, lg), 0);
    audit_set_clock(au, fake_clock, NULL);
    proc(5001070, 1, "trainer", 1000, NULL);
    proc(5001071, 1, "parent", 1000, NULL);
    struct ledger_member *stays = join(5001070, 256 * MiB), *exits = join(5001071, 256 * MiB);
    fake_gpu_list(0, 5001070, 256 * MiB);
    fake_gpu_list(0, 5001071, 256 * MiB);
    fake_gpus[0].used = 512 * MiB;
    tick();
    /* both depart; the GPU still lists both: their charges linger */
    assert_true(linger_keep(lg, stays, 5001070));
    assert_true(linger_keep(lg, exits, 5001071));
    fake_proc_gone(5001071); /* exited: a process holding its files keeps its memory */
    fake_now += 100;
    tick();
    assert_int_equal(log_count("audit:", NULL), 0);
    fake_now += GRACE;
    tick();
    assert_int_equal(log_count("audit: pid 5001070 (trainer) uses GPU 0 (256.0 MiB) without "
                               "being a registered tenant", NULL), 1);
    assert_int_equal(log_count("pid 5001071", NULL), 0);
    assert_int_equal(log_count("unexplained", NULL), 0);
    fake_now += 10 * GRACE; /* not in /proc for longer than the grace: still charged */
    tick();
    assert_int_equal(log_count("pid 5001071", NULL), 0);
    audit_fini(au); /* teardown's audit, without lg */
    assert_int_equal(start_audit(&fake_gpu_backend, NULL), 0);
    linger_fini(lg);
}

/* A real process (child()) whose /proc entry runs an MPS server binary the audit
 * takes for root's (the test's own, audit_set_mps_owner), with fd3 open. */
static pid_t mps_server(const char *fd3)
{
    audit_set_mps_owner(au, getuid());
    pid_t pid = child();
    proc((uint32_t)pid, 1, "nvidia-cuda-mps", 1000, fd3);
    fake_proc_exe((uint32_t)pid, fake_proc_mps_binary());
    return pid;
}

/* A real process running a copy of the server's binary from a folder anyone may
 * write (a user's copy in /tmp). */
static pid_t mps_impostor(void)
{
    char dir[96], bin[128];
    snprintf(dir, sizeof dir, "%s/tmp", fake_proc_root);
    assert_int_equal(mkdir(dir, 01777), 0);
    assert_int_equal(chmod(dir, 01777), 0);
    snprintf(bin, sizeof bin, "%s/nvidia-cuda-mps-server", dir);
    FILE *f = fopen(bin, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(chmod(bin, 0755), 0);
    pid_t pid = child();
    proc((uint32_t)pid, 1, "nvidia-cuda-mps", 1000, NULL);
    fake_proc_exe((uint32_t)pid, bin);
    return pid;
}

static void test_an_mps_server_is_noted_once_and_never_killed(void **state)
{
    (void)state;
    cfg.audit_kill = true;
    pid_t server = mps_server("/dev/nvidia0"), impostor = mps_impostor();
    fake_gpu_list(0, (uint32_t)server, 66 * MiB);
    fake_gpu_list(0, (uint32_t)impostor, 500 * MiB);
    fake_gpus[0].used = 566 * MiB;
    tick();
    char who[256];
    snprintf(who, sizeof who, "audit: pid %d (uid 1000) is an MPS server (nvidia-cuda-mps-server, "
             "root's binary) on GPU 0: its own memory 66.0 MiB is charged to no tenant; its "
             "clients' allocations are charged to their tenants", (int)server);
    assert_int_equal(log_count(who, NULL), 1);
    snprintf(who, sizeof who, "pid %d (nvidia-cuda-mps) uses GPU 0 (500.0 MiB)", (int)impostor);
    assert_int_equal(log_count(who, "killed (audit action kill)", NULL), 1);
    assert_true(killed(impostor));
    assert_int_equal(log_count("warn", NULL), 1); /* the impostor's line only */
    for (int i = 0; i < 10; i++) { /* a /proc scan among them: no opener finding either */
        fake_now += 100;
        tick();
        assert_int_equal(log_count("audit:", NULL), 0);
    }
    assert_true(alive(server));
}

static void test_an_mps_servers_memory_above_mps_server_max_is_reported(void **state)
{
    (void)state;
    cfg.audit_kill = true;
    cfg.audit_mps_server_max = 64 * MiB;
    pid_t server = mps_server(NULL);
    fake_gpu_list(1, (uint32_t)server, 100 * MiB);
    fake_gpus[1].used = 100 * MiB;
    tick();
    char who[96];
    snprintf(who, sizeof who, "audit: pid %d (nvidia-cuda-mps) uid 1000, an MPS server, uses "
             "100.0 MiB on GPU 1", (int)server);
    assert_int_equal(log_count("warn", who, "above audit mps_server_max (64.0 MiB): memory "
                               "outside every tenant's quota; not killed", NULL), 1);
    fake_now += 1000;
    tick();
    assert_int_equal(log_count("audit:", NULL), 0);
    assert_true(alive(server));
}

static void test_an_mps_server_the_backend_does_not_list_is_never_killed(void **state)
{
    (void)state;
    cfg.audit_kill = true;
    pid_t server = mps_server("/dev/nvidia0");
    fake_gpus[0].used = GiB;
    tick();
    char who[256];
    snprintf(who, sizeof who, "audit: pid %d (uid 1000) is an MPS server (nvidia-cuda-mps-server, "
             "root's binary) with the driver's nodes open", (int)server);
    assert_int_equal(log_count(who, NULL), 1);
    assert_int_equal(log_count("without being a registered tenant", NULL), 0);
    fake_now += GRACE;
    tick();
    assert_int_equal(log_count("audit: GPU 0: 1.00 GiB of memory.used unexplained", NULL), 1);
    snprintf(who, sizeof who, "audit: pid %d (nvidia-cuda-mps) holds /dev/nvidia0 open while GPU 0 "
             "has 1.00 GiB unexplained, an MPS server, uid 1000; not killed (an MPS server)",
             (int)server);
    assert_int_equal(log_count(who, NULL), 1);
    assert_int_equal(log_count("killed (audit action kill)", NULL), 0);
    for (int i = 0; i < 10; i++) { /* the next /proc scan among them: noted once */
        fake_now += 100;
        tick();
        assert_int_equal(log_count("audit:", NULL), 0);
    }
    assert_true(alive(server));
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_an_unregistered_process_is_reported_once_while_it_stays),
        TEST(test_members_and_kairosd_are_no_intruders),
        TEST(test_a_process_not_in_proc_is_reported_after_the_grace),
        TEST(test_a_member_that_left_is_no_intruder_within_the_grace),
        TEST(test_a_tenant_above_its_quota_is_named_largest_first),
        TEST(test_unexplained_memory_is_reported_with_its_holders),
        TEST(test_holdings_credit_draining_and_overhead_explain_memory),
        TEST(test_openers_are_found_every_tenth_pass_a_members_child_after_the_grace),
        TEST(test_kills_only_what_holds_memory_and_is_not_exempt),
        TEST(test_a_configured_exempt_list_replaces_the_builtin_one),
        TEST(test_malformed_proc_entries_and_thousands_of_intruders),
        TEST(test_without_a_backend_only_openers_are_reported),
        TEST(test_a_lingering_members_process_is_judged_as_one_that_left),
        TEST(test_an_mps_server_is_noted_once_and_never_killed),
        TEST(test_an_mps_servers_memory_above_mps_server_max_is_reported),
        TEST(test_an_mps_server_the_backend_does_not_list_is_never_killed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
