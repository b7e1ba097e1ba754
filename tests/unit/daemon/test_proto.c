/* test_proto.c - proto_check refuses what a hostile or broken peer may send: wrong
 * magic, version, size, type, unterminated names, absurd values, bad compute
 * policies, a CREDIT out of its rules (a LAST one that asks), a CREDIT_RECALL from
 * a peer; accepts the rest, and TENANT_SET's earlier, shorter bodies (without
 * compute[], without fault_domain: body_len says which); a TENANT_SET's fault domain
 * terminated and none or a valid name; PS with or without its body (flags
 * KAIROS_PS_HOLDS, nothing else). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/transport/proto_check.h"

static unsigned char buf[PROTO_MSG_MAX + 64];
static char why[256];

static size_t pack(uint16_t type, const void *body, size_t len)
{
    return proto_pack(buf, type, 7, body, len);
}

static int check(size_t len)
{
    struct proto_request r;
    why[0] = 0;
    return proto_check(buf, len, &r, why, sizeof why);
}

static void expect(int code, size_t len, const char *part)
{
    int got = check(len);
    if (got != code)
        fail_msg("expected code %d ('%s'), got %d: '%s'", code, part, got, why);
    if (!strstr(why, part))
        fail_msg("expected '%s' in '%s'", part, why);
}

static void test_good_messages(void **state)
{
    (void)state;
    struct kairos_hello h = {.pid = 1};
    strcpy(h.tenant, "alice");
    assert_int_equal(check(pack(KAIROS_MSG_HELLO, &h, sizeof h)), 0);
    h.flags = KAIROS_HELLO_REATTACH;
    h.held[3] = 1ull << 30;
    assert_int_equal(check(pack(KAIROS_MSG_HELLO, &h, sizeof h)), 0);
    struct kairos_charge c = {.gpu = 1, .bytes = 4096, .token = 9};
    assert_int_equal(check(pack(KAIROS_MSG_CHARGE, &c, sizeof c)), 0);
    struct proto_request r;
    assert_int_equal(proto_check(buf, sizeof(struct kairos_hdr) + sizeof c, &r, NULL, 0), 0);
    assert_int_equal(r.seq, 7);
    assert_int_equal(r.body.charge.token, 9);
    assert_int_equal(check(pack(KAIROS_MSG_PS, NULL, 0)), 0);
    struct kairos_tenant_set s = {.n_gpus = 2, .quota = {1ull << 30, KAIROS_QUOTA_KEEP}};
    strcpy(s.tenant, "job.1");
    assert_int_equal(check(pack(KAIROS_MSG_TENANT_SET, &s, sizeof s)), 0);
}

/* FORKED and INHERITED (protocol 3): a pid, one flag, counted descriptors and
 * zeros elsewhere; anything else refused. */
static void test_forked_inherited(void **state)
{
    (void)state;
    struct kairos_forked f = {.child_pid = 42};
    assert_int_equal(check(pack(KAIROS_MSG_FORKED, &f, sizeof f)), 0);
    f.flags = KAIROS_FORKED_TICKET;
    assert_int_equal(check(pack(KAIROS_MSG_FORKED, &f, sizeof f)), 0);
    f.flags = 2;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_FORKED, &f, sizeof f), "no flag but TICKET");
    struct kairos_fork_tickets t = {.want = KAIROS_FORK_TICKETS_MAX};
    assert_int_equal(check(pack(KAIROS_MSG_FORK_TICKETS, &t, sizeof t)), 0);
    t.want = KAIROS_FORK_TICKETS_MAX + 1;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_FORK_TICKETS, &t, sizeof t), "at most");
    t = (struct kairos_fork_tickets){.want = 1, .held = 1};
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_FORK_TICKETS, &t, sizeof t), "held and pad 0");
    f = (struct kairos_forked){.child_pid = 0};
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_FORKED, &f, sizeof f), "child_pid");
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_FORKED, &f, sizeof f - 4), "exactly 8");

    struct kairos_inherited in = {.from_pid = 7, .flags = KAIROS_INHERITED_EXEC, .n_fds = 2,
                                  .fds = {3, 0}};
    assert_int_equal(check(pack(KAIROS_MSG_INHERITED, &in, sizeof in)), 0);
    in.flags = KAIROS_INHERITED_RECEIVED;
    assert_int_equal(check(pack(KAIROS_MSG_INHERITED, &in, sizeof in)), 0);
    in.flags = KAIROS_INHERITED_EXEC | KAIROS_INHERITED_RECEIVED;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_INHERITED, &in, sizeof in), "exactly one");
    in.flags = 0x4;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_INHERITED, &in, sizeof in), "exactly one");
    in.flags = KAIROS_INHERITED_EXEC;
    in.n_fds = 0;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_INHERITED, &in, sizeof in), "n_fds");
    in.n_fds = KAIROS_INHERITED_MAX_FDS + 1;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_INHERITED, &in, sizeof in), "n_fds");
    in.n_fds = 1;
    in.fds[1] = 4;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_INHERITED, &in, sizeof in), "beyond");
    in.n_fds = 2;
    in.fds[1] = -1;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_INHERITED, &in, sizeof in), ">= 0");
    in.fds[1] = 0;
    in.from_pid = 0;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_INHERITED, &in, sizeof in), "from_pid");
    in.from_pid = 7;
    in.pad = 3;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_INHERITED, &in, sizeof in), "pad 0");
}

/* SHARED and IMPORTED (legacy CUDA IPC): handles not 0, a known scope with its
 * argument, exactly one flag; anything else refused. */
static void test_shared_imported(void **state)
{
    (void)state;
    struct kairos_shared s = {.h_client = 0xc1d00001, .h_object = 0x5c000010,
                              .share_type = KAIROS_SHARE_ALL};
    assert_int_equal(check(pack(KAIROS_MSG_SHARED, &s, sizeof s)), 0);
    s.share_arg = 9;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_SHARED, &s, sizeof s), "0 otherwise");
    s.share_type = KAIROS_SHARE_PID;
    assert_int_equal(check(pack(KAIROS_MSG_SHARED, &s, sizeof s)), 0);
    s.share_arg = 0;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_SHARED, &s, sizeof s), "share_arg");
    s.share_type = 7;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_SHARED, &s, sizeof s), "share_type 7");
    s = (struct kairos_shared){.h_client = 1, .share_type = KAIROS_SHARE_ALL};
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_SHARED, &s, sizeof s), "h_object");
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_SHARED, &s, sizeof s - 4), "exactly 32");
    /* FREED: a GPU in range, bytes not absurd, no scope */
    s = (struct kairos_shared){.h_client = 1, .h_object = 2, .flags = KAIROS_SHARED_FREED,
                               .gpu = 1, .bytes = 4u << 20};
    assert_int_equal(check(pack(KAIROS_MSG_SHARED, &s, sizeof s)), 0);
    s.share_type = KAIROS_SHARE_ALL;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_SHARED, &s, sizeof s), "share_type and");
    s.share_type = 0;
    s.gpu = KAIROS_MAX_GPUS;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_SHARED, &s, sizeof s), "out of range");
    s.gpu = 0;
    s.bytes = KAIROS_BYTES_MAX + 1;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_SHARED, &s, sizeof s), "absurd");
    s.flags = 0x2;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_SHARED, &s, sizeof s), "unknown flags");
    /* a share names its object's device memory: a GPU in range, bytes not absurd */
    s = (struct kairos_shared){.h_client = 1, .h_object = 2, .share_type = KAIROS_SHARE_ALL,
                               .gpu = 1, .bytes = 4u << 20};
    assert_int_equal(check(pack(KAIROS_MSG_SHARED, &s, sizeof s)), 0);
    s.bytes = KAIROS_BYTES_MAX + 1;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_SHARED, &s, sizeof s), "absurd");
    s.bytes = 1;
    s.gpu = KAIROS_MAX_GPUS;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_SHARED, &s, sizeof s), "out of range");

    struct kairos_imported m = {.flags = KAIROS_IMPORT_BEGIN, .h_client_src = 1,
                                .h_object_src = 2, .h_client = 3};
    assert_int_equal(check(pack(KAIROS_MSG_IMPORTED, &m, sizeof m)), 0);
    m.flags = KAIROS_IMPORT_END;
    assert_int_equal(check(pack(KAIROS_MSG_IMPORTED, &m, sizeof m)), 0);
    m.flags = KAIROS_IMPORT_BEGIN | KAIROS_IMPORT_END;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_IMPORTED, &m, sizeof m), "exactly one");
    m.flags = KAIROS_IMPORT_BEGIN;
    m.h_client = 1;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_IMPORTED, &m, sizeof m), "not an import");
    m.h_client = 3;
    m.pad = 1;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_IMPORTED, &m, sizeof m), "pad 0");
    m.pad = 0;
    m.h_object_src = 0;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_IMPORTED, &m, sizeof m), "h_object_src");
}

/* RUNNABLE: a shim's report; a wrong one is refused (and the sender disconnected). */
static void test_runnable(void **state)
{
    (void)state;
    struct kairos_runnable u = {.gpu = 1, .interval_us = 100000, .runnable_us = 40000,
                                .samples = 100, .pending_samples = 40, .channels = 20};
    assert_int_equal(check(pack(KAIROS_MSG_RUNNABLE, &u, sizeof u)), 0);
    u.flags = KAIROS_RUNNABLE_PARTIAL;
    assert_int_equal(check(pack(KAIROS_MSG_RUNNABLE, &u, sizeof u)), 0);
    u.flags = KAIROS_RUNNABLE_WAKE | KAIROS_RUNNABLE_PARTIAL;
    assert_int_equal(check(pack(KAIROS_MSG_RUNNABLE, &u, sizeof u)), 0);
    u.flags = KAIROS_RUNNABLE_PROGRESS;
    u.progress_us = 40000;
    assert_int_equal(check(pack(KAIROS_MSG_RUNNABLE, &u, sizeof u)), 0);
    u.progress_us = 40001; /* moved longer than it was runnable */
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_RUNNABLE, &u, sizeof u), "more progress");
    u.flags = 0;
    u.progress_us = 1; /* a figure without its flag */
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_RUNNABLE, &u, sizeof u), "KAIROS_RUNNABLE_PROGRESS");
    u.progress_us = 0;
    u.flags = KAIROS_RUNNABLE_IDLE;
    assert_int_equal(check(pack(KAIROS_MSG_RUNNABLE, &u, sizeof u)), 0);
    u.flags = KAIROS_RUNNABLE_IDLE | KAIROS_RUNNABLE_WAKE;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_RUNNABLE, &u, sizeof u), "both a wake and an idle");
    u.flags = 0x10;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_RUNNABLE, &u, sizeof u), "unknown flags");
    u.flags = 0;
    u.runnable_us = 100001;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_RUNNABLE, &u, sizeof u), "more runnable");
    u.runnable_us = 1;
    u.pending_samples = 101;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_RUNNABLE, &u, sizeof u), "more runnable");
    u.pending_samples = 1;
    u.unpaused_us = 100001;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_RUNNABLE, &u, sizeof u), "unpaused");
    u.unpaused_us = 30000;
    u.interval_us = 0;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_RUNNABLE, &u, sizeof u), "interval_us");
    u.interval_us = 100000;
    u.gpu = KAIROS_MAX_GPUS;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_RUNNABLE, &u, sizeof u), "");
    u.gpu = 0;
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_RUNNABLE, &u, sizeof u - 8), "");
}

/* CREDIT (protocol 3): a shim's flags only, least within need, quota 0, bounded
 * bytes; CREDIT_RECALL is kairosd's and refused from a peer. */
static void test_credit(void **state)
{
    (void)state;
    struct kairos_credit c = {.gpu = 1, .flags = KAIROS_CREDIT_AHEAD, .report = 3,
                              .held = 1ull << 30, .need = 4 << 20, .least = 2 << 20};
    size_t n = pack(KAIROS_MSG_CREDIT, &c, sizeof c);
    assert_int_equal(check(n), 0);
    c.flags = KAIROS_CREDIT_RECALLED;
    c.need = c.least = 0;
    c.returned = 8 << 20;
    assert_int_equal(check(pack(KAIROS_MSG_CREDIT, &c, sizeof c)), 0);
    struct kairos_credit bad = c;
    c.flags = KAIROS_CREDIT_REVOKED; /* a revoked shim's word that it dropped its credit */
    assert_int_equal(check(pack(KAIROS_MSG_CREDIT, &c, sizeof c)), 0);
    c.flags = KAIROS_CREDIT_RECALLED;
    bad.flags = KAIROS_CREDIT_EXACT; /* kairosd's flag */
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CREDIT, &bad, sizeof bad), "unknown flags");
    bad.flags = KAIROS_CREDIT_NOTICES; /* kairosd's too (issue 25, item 10) */
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CREDIT, &bad, sizeof bad), "unknown flags");
    struct kairos_credit notice = c; /* a shim that reads ROOM */
    notice.flags = KAIROS_CREDIT_AHEAD | KAIROS_CREDIT_NOTICE;
    assert_int_equal(check(pack(KAIROS_MSG_CREDIT, &notice, sizeof notice)), 0);
    struct kairos_room room = {0}; /* kairosd's, refused from a peer */
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_ROOM, &room, sizeof room), "sent by the daemon");
    bad = c;
    bad.need = 2 << 20;
    bad.least = 4 << 20;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CREDIT, &bad, sizeof bad), "least");
    bad.least = 0; /* need without least */
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CREDIT, &bad, sizeof bad), "least");
    bad = c;
    bad.quota = 1;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CREDIT, &bad, sizeof bad), "quota");
    struct kairos_credit last = c; /* the report at exit: a report only */
    last.flags = KAIROS_CREDIT_LAST | KAIROS_CREDIT_RECALLED;
    assert_int_equal(check(pack(KAIROS_MSG_CREDIT, &last, sizeof last)), 0);
    bad = last;
    bad.need = bad.least = 2 << 20;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CREDIT, &bad, sizeof bad), "LAST asks");
    bad = last;
    bad.flags |= KAIROS_CREDIT_AHEAD;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CREDIT, &bad, sizeof bad), "LAST asks");
    bad = c;
    bad.held = KAIROS_BYTES_MAX + 1;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CREDIT, &bad, sizeof bad), "absurd");
    bad = c;
    bad.gpu = KAIROS_MAX_GPUS;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CREDIT, &bad, sizeof bad), "out of range");
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_CREDIT, &c, sizeof c - 1), "exactly");
    struct kairos_credit_recall r = {.bytes = 1};
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_CREDIT_RECALL, &r, sizeof r),
           "sent by the daemon");
}

static void test_header_refusals(void **state)
{
    (void)state;
    expect(KAIROS_ERR_PROTOCOL, 3, "shorter than");
    expect(KAIROS_ERR_PROTOCOL, 0, "shorter than");
    size_t n = pack(KAIROS_MSG_PS, NULL, 0);
    buf[0] ^= 0xff;
    expect(KAIROS_ERR_PROTOCOL, n, "magic");
    n = pack(KAIROS_MSG_PS, NULL, 0);
    buf[4] = 9;
    expect(KAIROS_ERR_VERSION, n, "version 9");
    n = pack(999, NULL, 0);
    expect(KAIROS_ERR_PROTOCOL, n, "unknown message type 999");
    n = pack(KAIROS_MSG_GRANT, NULL, 0);
    expect(KAIROS_ERR_PROTOCOL, n, "sent by the daemon");
}

static void test_size_refusals(void **state)
{
    (void)state;
    struct kairos_charge c = {.gpu = 0, .bytes = 1};
    size_t n = pack(KAIROS_MSG_CHARGE, &c, sizeof c);
    expect(KAIROS_ERR_PROTOCOL, n - 1, "must be exactly 24");
    expect(KAIROS_ERR_PROTOCOL, n + 8, "must be exactly 24");
    /* header size field disagreeing with the datagram */
    struct kairos_hdr h;
    memcpy(&h, buf, sizeof h);
    h.size = 4000000000u;
    memcpy(buf, &h, sizeof h);
    expect(KAIROS_ERR_PROTOCOL, n, "header says 4000000000");
    n = pack(KAIROS_MSG_PS, &c, 12);
    expect(KAIROS_ERR_PROTOCOL, n, "PS body is 12 bytes");
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_PS, &c, 4), "must be exactly 8");
}

/* PS: without a body as a kairos of before sends it (read as flags 0), or with
 * struct kairos_ps asking for the hold figures, and the faults with them; the faults
 * alone, other flags and pad refused. */
static void test_ps_body(void **state)
{
    (void)state;
    struct proto_request r;
    struct kairos_ps ps = {.flags = KAIROS_PS_HOLDS};
    assert_int_equal(check(pack(KAIROS_MSG_PS, &ps, sizeof ps)), 0);
    assert_int_equal(proto_check(buf, sizeof(struct kairos_hdr) + sizeof ps, &r, NULL, 0), 0);
    assert_int_equal(r.body.ps.flags, KAIROS_PS_HOLDS);
    assert_int_equal(proto_check(buf, pack(KAIROS_MSG_PS, NULL, 0), &r, NULL, 0), 0);
    assert_int_equal(r.body.ps.flags, 0);
    ps.flags = KAIROS_PS_HOLDS | KAIROS_PS_FAULTS;
    assert_int_equal(proto_check(buf, pack(KAIROS_MSG_PS, &ps, sizeof ps), &r, NULL, 0), 0);
    assert_int_equal(r.body.ps.flags, KAIROS_PS_HOLDS | KAIROS_PS_FAULTS);
    ps.flags = KAIROS_PS_FAULTS;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_PS, &ps, sizeof ps),
           "KAIROS_PS_FAULTS needs KAIROS_PS_HOLDS");
    ps.flags = 0x4;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_PS, &ps, sizeof ps), "PS has unknown flags 0x4");
    ps = (struct kairos_ps){.pad = 1};
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_PS, &ps, sizeof ps), "PS pad must be 0");
}

static void test_field_refusals(void **state)
{
    (void)state;
    struct kairos_hello h = {0};
    memset(h.tenant, 'a', sizeof h.tenant);
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_HELLO, &h, sizeof h), "not NUL-terminated");
    strcpy(h.tenant, "a/b");
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_HELLO, &h, sizeof h), "1-63 characters");
    strcpy(h.tenant, "");
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_HELLO, &h, sizeof h), "1-63 characters");
    strcpy(h.tenant, "ok");
    h.flags = 0x80;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_HELLO, &h, sizeof h), "unknown flags");
    h.flags = 0;
    h.held[0] = 5;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_HELLO, &h, sizeof h), "without REATTACH");
    h.flags = KAIROS_HELLO_REATTACH;
    h.held[0] = UINT64_MAX;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_HELLO, &h, sizeof h), "absurd");

    struct kairos_charge c = {.gpu = 16, .bytes = 1};
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CHARGE, &c, sizeof c), "out of range");
    c.gpu = 0;
    c.bytes = UINT64_MAX;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CHARGE, &c, sizeof c), "absurd");
    c.bytes = 1;
    c.flags = KAIROS_CHARGE_MANAGED;
    assert_int_equal(check(pack(KAIROS_MSG_CHARGE, &c, sizeof c)), 0);
    c.flags = 0x2;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_CHARGE, &c, sizeof c), "unknown flags");
    struct kairos_tenant_set ts = {.n_gpus = 1, .quota = {KAIROS_QUOTA_KEEP}};
    strcpy(ts.tenant, "t");
    ts.flags = KAIROS_TENANT_MANAGED_CHARGE;
    assert_int_equal(check(pack(KAIROS_MSG_TENANT_SET, &ts, sizeof ts)), 0);
    ts.flags = KAIROS_TENANT_MANAGED_CHARGE | KAIROS_TENANT_MANAGED_REFUSE;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_SET, &ts, sizeof ts), "choose one");

    struct kairos_commit m = {.gpu = 0, .ok = 2};
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_COMMIT, &m, sizeof m), "0 or 1");
    struct kairos_release rel = {.gpu = 0xffffffffu, .bytes = 1};
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_RELEASE, &rel, sizeof rel), "out of range");

    struct kairos_tenant_set s = {.n_gpus = 17};
    strcpy(s.tenant, "x");
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_SET, &s, sizeof s), "n_gpus 17");
    s.n_gpus = 1;
    s.flags = 0x10;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_SET, &s, sizeof s), "unknown flags");
    s.flags = 0;
    s.quota[0] = 1ull << 60;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_SET, &s, sizeof s), "absurd");
    s.quota[0] = KAIROS_QUOTA_PERCENT | (KAIROS_PPM + 1); /* 100.0001 % */
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_SET, &s, sizeof s), "at most 100%");
    s.quota[0] = KAIROS_QUOTA_PERCENT;                    /* 0 % */
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_SET, &s, sizeof s), "above 0%");
    s.quota[0] = 0;

    struct kairos_tenant_members mb = {.n_users = 17};
    strcpy(mb.tenant, "x");
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_MEMBERS, &mb, sizeof mb), "at most 16");
    mb.n_users = 0;
    mb.users[3] = 7;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_MEMBERS, &mb, sizeof mb), "beyond");
    mb.users[3] = 0;
    mb.n_cgroups = 1;
    strcpy(mb.cgroups[0], "relative");
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_MEMBERS, &mb, sizeof mb), "begins with");
    memset(mb.cgroups[1], 'a', sizeof mb.cgroups[1]);
    strcpy(mb.cgroups[0], "/ok");
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_TENANT_MEMBERS, &mb, sizeof mb), "not NUL");
    struct kairos_tenant_admit ad = {.pad = 1};
    strcpy(ad.tenant, "x");
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_ADMIT, &ad, sizeof ad), "pad");
    struct kairos_tenant_del d;
    memset(&d, 'z', sizeof d);
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_TENANT_DEL, &d, sizeof d), "not NUL");
}

/* Compute policies for GPU 0 that TENANT_SET refuses (each a change of one field of the
 * good one in test_tenant_set_compute: share 30 %, limit 50 %, latency, SET), and the
 * words of each refusal. */
#define GOOD_LIMIT 500000
#define GOOD_SHARE 300000
static const struct {
    struct kairos_compute policy;
    const char *why;
} bad_compute[] = {
    {{1500000, GOOD_LIMIT, KAIROS_PRIO_LATENCY, KAIROS_COMPUTE_SET, 0},
     "compute policy on GPU 0 refused: share 150% is outside 0-100%"},
    {{GOOD_SHARE, 1000001, KAIROS_PRIO_LATENCY, KAIROS_COMPUTE_SET, 0}, "limit 100.0001%"},
    {{600000, GOOD_LIMIT, KAIROS_PRIO_LATENCY, KAIROS_COMPUTE_SET, 0},
     "share 60% is above the limit 50%"},
    {{GOOD_SHARE, GOOD_LIMIT, 3, KAIROS_COMPUTE_SET, 0}, "priority 3"},
    {{GOOD_SHARE, GOOD_LIMIT, KAIROS_PRIO_LATENCY, 0x4, 0}, "unknown flags 0x4"},
    {{GOOD_SHARE, GOOD_LIMIT, KAIROS_PRIO_LATENCY, KAIROS_COMPUTE_SET | KAIROS_COMPUTE_CLEAR, 0},
     "both SET and CLEAR"},
    {{GOOD_SHARE, GOOD_LIMIT, KAIROS_PRIO_LATENCY, 0, 0}, "without KAIROS_COMPUTE_SET"},
    {{GOOD_SHARE, GOOD_LIMIT, KAIROS_PRIO_LATENCY, KAIROS_COMPUTE_SET, 1}, "pad must be 0"},
};

static void test_tenant_set_compute(void **state)
{
    (void)state;
    struct kairos_tenant_set s = {.n_gpus = 2, .quota = {KAIROS_QUOTA_KEEP, KAIROS_QUOTA_KEEP}};
    strcpy(s.tenant, "job");
    s.compute[0] = (struct kairos_compute){.share_ppm = GOOD_SHARE, .limit_ppm = GOOD_LIMIT,
                                           .priority = KAIROS_PRIO_LATENCY,
                                           .flags = KAIROS_COMPUTE_SET};
    s.compute[1].flags = KAIROS_COMPUTE_CLEAR;
    assert_int_equal(check(pack(KAIROS_MSG_TENANT_SET, &s, sizeof s)), 0);
    struct proto_request r;
    assert_int_equal(proto_check(buf, sizeof(struct kairos_hdr) + sizeof s, &r, NULL, 0), 0);
    assert_int_equal(r.body.tenant_set.compute[0].share_ppm, 300000);

    for (size_t i = 0; i < sizeof bad_compute / sizeof *bad_compute; i++) {
        struct kairos_tenant_set bad = s;
        bad.compute[0] = bad_compute[i].policy;
        expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_SET, &bad, sizeof bad),
               bad_compute[i].why);
    }
    struct kairos_tenant_set bad = s;
    bad.compute[2].flags = KAIROS_COMPUTE_SET;
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_SET, &bad, sizeof bad), "beyond n_gpus 2");

    /* the body of an older kairos, without compute[]: read as if it were all 0 */
    memset(&r, 0xff, sizeof r);
    assert_int_equal(check(pack(KAIROS_MSG_TENANT_SET, &s, KAIROS_TENANT_SET_SIZE_V0)), 0);
    assert_int_equal(proto_check(buf, sizeof(struct kairos_hdr) + KAIROS_TENANT_SET_SIZE_V0, &r,
                                 NULL, 0), 0);
    assert_string_equal(r.body.tenant_set.tenant, "job");
    assert_int_equal(r.body.tenant_set.compute[0].flags, 0);
    assert_int_equal(r.body.tenant_set.compute[0].share_ppm, 0);
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_TENANT_SET, &s, KAIROS_TENANT_SET_SIZE_V0 + 12),
           "must be exactly 456");
}

/* fault_domain: read only from the whole body; terminated; none or a valid name. */
static void test_tenant_set_fault_domain(void **state)
{
    (void)state;
    struct kairos_tenant_set s = {.n_gpus = 1, .quota = {KAIROS_QUOTA_KEEP}};
    strcpy(s.tenant, "job");
    strcpy(s.fault_domain, "infer");
    struct proto_request r;
    assert_int_equal(proto_check(buf, pack(KAIROS_MSG_TENANT_SET, &s, sizeof s), &r, why,
                                 sizeof why), 0);
    assert_int_equal(r.body_len, sizeof s);
    assert_string_equal(r.body.tenant_set.fault_domain, "infer");
    /* the body of before (compute[], no domain): the domain left 0, body_len says so */
    memset(&r, 0xff, sizeof r);
    assert_int_equal(proto_check(buf, pack(KAIROS_MSG_TENANT_SET, &s, KAIROS_TENANT_SET_SIZE_V1),
                                 &r, why, sizeof why), 0);
    assert_int_equal(r.body_len, KAIROS_TENANT_SET_SIZE_V1);
    assert_int_equal(r.body.tenant_set.fault_domain[0], 0);
    assert_int_equal(proto_check(buf, pack(KAIROS_MSG_TENANT_SET, &s, KAIROS_TENANT_SET_SIZE_V0),
                                 &r, why, sizeof why), 0);
    assert_int_equal(r.body_len, KAIROS_TENANT_SET_SIZE_V0);
    /* "" is none */
    s.fault_domain[0] = 0;
    assert_int_equal(check(pack(KAIROS_MSG_TENANT_SET, &s, sizeof s)), 0);
    /* refusals */
    strcpy(s.fault_domain, "-x");
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_SET, &s, sizeof s),
           "fault domain '-x' must be 1-63 characters");
    strcpy(s.fault_domain, "a b");
    expect(KAIROS_ERR_INVALID, pack(KAIROS_MSG_TENANT_SET, &s, sizeof s), "or empty for none");
    memset(s.fault_domain, 'a', sizeof s.fault_domain);
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_TENANT_SET, &s, sizeof s),
           "fault_domain is not NUL-terminated");
    /* between the sizes: refused */
    expect(KAIROS_ERR_PROTOCOL, pack(KAIROS_MSG_TENANT_SET, &s, KAIROS_TENANT_SET_SIZE_V1 + 8),
           "must be exactly 456");
}

static void test_table(void **state)
{
    (void)state;
    assert_int_equal(proto_body_size(KAIROS_MSG_PS_REPLY), sizeof(struct kairos_ps_reply));
    assert_int_equal(proto_body_size(KAIROS_MSG_PS), sizeof(struct kairos_ps));
    assert_int_equal(proto_body_size(12345), -1);
    assert_string_equal(proto_type_name(KAIROS_MSG_TENANT_SET), "TENANT_SET");
    assert_true(PROTO_MSG_MAX >= sizeof(struct kairos_hdr) + sizeof(struct kairos_hello));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_messages),
        cmocka_unit_test(test_runnable),
        cmocka_unit_test(test_forked_inherited),
        cmocka_unit_test(test_shared_imported),
        cmocka_unit_test(test_credit),
        cmocka_unit_test(test_header_refusals),
        cmocka_unit_test(test_size_refusals),
        cmocka_unit_test(test_ps_body),
        cmocka_unit_test(test_field_refusals),
        cmocka_unit_test(test_tenant_set_compute),
        cmocka_unit_test(test_tenant_set_fault_domain),
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
