/* test_server_transport.c - server.c's transport, driven from outside through its own
 * socket (SOCK_SEQPACKET: a message is one record) and the daemon's loop run here in
 * slices: a whole message handled once, its reply echoing its seq; a message cut
 * across several writes, two in one write, a record larger than any message, a
 * header cut short or naming another size, version or type: an ERROR that says why,
 * then the connection closed, while other peers go on; the bound on connections
 * and the close of an idle peer that never registered; a peer that never reads (its
 * queue bounded, the daemon never blocks, the peer dropped), one that reads late
 * (everything in order), one that hangs up with replies waiting (what it sent is
 * still taken, nothing leaks: ASan). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/config/config.h"
#include "daemon/memory/ledger.h"
#include "daemon/base/loop.h"
#include "daemon/transport/proto_check.h"
#include "daemon/transport/server.h"
#include "daemon/tenants/tenants.h"
#include "kairos/proto.h"

#define HDR sizeof(struct kairos_hdr)
#define WAIT_MS 10000 /* the longest a reply may take (a loaded machine, ASan) */

struct fx {
    char dir[64], sock[96], state[96];
    struct config cfg;
    struct tenants ts;
    struct loop *loop;
    struct server *srv;
    struct loop_watch *stop;
};

/* --- the daemon's loop, run for a while --- */

static void on_stop(void *ctx, int fd, uint32_t events)
{
    uint64_t n;
    (void)!read(fd, &n, sizeof n);
    loop_stop(ctx);
}

/* Runs the loop for ms milliseconds (what is ready is handled first). */
static void pump(struct fx *f, uint64_t ms)
{
    assert_int_equal(loop_timer_after_ms(f->stop, ms), 0);
    assert_int_equal(loop_run(f->loop), 0);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* --- the fixture: a node of one GPU, tenant "a", this test's uid an administrator --- */

static int start(void **state, unsigned max_connections)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/kairos-transport-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->sock, sizeof f->sock, "%s/kairosd.sock", f->dir);
    snprintf(f->state, sizeof f->state, "%s/state.json", f->dir);
    char text[1024], err[256];
    snprintf(text, sizeof text,
             "socket: %s\nstate: %s\nadmins: [%u]\ngpus: 1\nmax_connections: %u\n"
             "admin_reserve: 0\nregister_timeout_ms: 100\n"
             "tenants:\n  - name: a\n    memory: { 0: 1G }\n",
             f->sock, f->state, (unsigned)getuid(), max_connections);
    if (config_parse("test.yaml", text, strlen(text), &f->cfg, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(tenants_init(&f->ts, 1, f->state), 0);
    if (tenants_apply_config(&f->ts, &f->cfg, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(loop_init(&f->loop), 0);
    assert_non_null(f->stop = loop_add_timer(f->loop, 0, on_stop, f->loop));
    struct server_deps deps = {.loop = f->loop, .ts = &f->ts, .cfg = &f->cfg,
                               .socket_path = f->sock};
    assert_int_equal(server_init(&f->srv, &deps), 0);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return start(state, 64);
}

static int setup_two_connections(void **state)
{
    return start(state, 2);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    server_fini(f->srv);
    loop_del_close(f->loop, f->stop);
    loop_fini(f->loop);
    tenants_fini(&f->ts);
    config_free(&f->cfg);
    char members[128];
    snprintf(members, sizeof members, "%s.members", f->sock); /* reattach.h's record */
    unlink(members);
    unlink(f->state);
    unlink(f->sock);
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
    return 0;
}

/* --- a peer --- */

static int peer(struct fx *f)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f->sock);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    pump(f, 1); /* accepted */
    return fd;
}

static void send_raw(int fd, const void *buf, size_t len)
{
    assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void send_msg(int fd, uint16_t type, uint32_t seq, const void *body, size_t len)
{
    unsigned char buf[PROTO_MSG_MAX];
    send_raw(fd, buf, proto_pack(buf, type, seq, body, len));
}

/* The next record from the daemon (running its loop until one comes): its length,
 * or 0 at the end of the stream. */
static size_t next_record(struct fx *f, int fd, unsigned char *buf, size_t cap)
{
    uint64_t until = now_ms() + WAIT_MS;
    for (;;) {
        ssize_t n = recv(fd, buf, cap, MSG_DONTWAIT);
        if (n >= 0)
            return (size_t)n;
        assert_int_equal(errno, EAGAIN);
        if (now_ms() > until)
            fail_msg("nothing from the daemon within %d ms", WAIT_MS);
        pump(f, 5);
    }
}

/* The next message, which must be of type; its header into *h, its body into body
 * (body_len bytes exactly). */
static void expect_msg(struct fx *f, int fd, uint16_t type, struct kairos_hdr *h, void *body,
                       size_t body_len)
{
    unsigned char buf[PROTO_MSG_MAX + 64];
    size_t n = next_record(f, fd, buf, sizeof buf);
    assert_true(n >= HDR);
    memcpy(h, buf, HDR);
    assert_int_equal(h->magic, KAIROS_PROTO_MAGIC);
    assert_int_equal(h->version, KAIROS_PROTO_VERSION);
    if (h->type != type)
        fail_msg("expected %s, got %s", proto_type_name(type), proto_type_name(h->type));
    assert_int_equal(h->size, body_len);
    assert_int_equal(n, HDR + body_len);
    memcpy(body, buf + HDR, body_len);
}

/* An ERROR of code (echoing seq) whose message holds part, then the end. */
static void expect_error_and_close(struct fx *f, int fd, uint32_t code, uint32_t seq,
                                   const char *part)
{
    struct kairos_hdr h;
    struct kairos_error e;
    expect_msg(f, fd, KAIROS_MSG_ERROR, &h, &e, sizeof e);
    assert_int_equal(e.code, code);
    assert_int_equal(h.seq, seq);
    if (!strstr(e.message, part))
        fail_msg("expected '%s' in '%s'", part, e.message);
    unsigned char buf[PROTO_MSG_MAX];
    assert_int_equal(next_record(f, fd, buf, sizeof buf), 0);
    close(fd);
}

/* Nothing more comes for a while. */
static void expect_quiet(struct fx *f, int fd)
{
    unsigned char buf[PROTO_MSG_MAX];
    pump(f, 20);
    assert_int_equal(recv(fd, buf, sizeof buf, MSG_DONTWAIT), -1);
    assert_int_equal(errno, EAGAIN);
}

/* HELLO to tenant a, WELCOME read. */
static void hello(struct fx *f, int fd)
{
    struct kairos_hello h = {.pid = (uint32_t)getpid()};
    strcpy(h.tenant, "a");
    send_msg(fd, KAIROS_MSG_HELLO, 1, &h, sizeof h);
    struct kairos_hdr hdr;
    struct kairos_welcome w;
    expect_msg(f, fd, KAIROS_MSG_WELCOME, &hdr, &w, sizeof w);
    assert_int_equal(hdr.seq, 1);
    assert_int_equal(w.n_gpus, 1);
}

static unsigned members_of_a(struct fx *f)
{
    return ledger_tenant_find(&f->ts.ledger, "a")->n_members;
}

/* --- whole messages --- */

/* A PS (with its body asking for the faults too, for the holds alone, and the
 * body-less one of an older kairos): one reply each, echoing its seq, of the size the
 * asker reads; the connection stays. */
static void test_whole_message_handled_once(void **state)
{
    struct fx *f = *state;
    int fd = peer(f);
    assert_int_equal(server_connections(f->srv), 1);
    struct kairos_ps ps = {.flags = KAIROS_PS_HOLDS | KAIROS_PS_FAULTS};
    send_msg(fd, KAIROS_MSG_PS, 7, &ps, sizeof ps);
    struct kairos_hdr h;
    static struct kairos_ps_reply r;
    expect_msg(f, fd, KAIROS_MSG_PS_REPLY, &h, &r, sizeof r);
    assert_int_equal(h.seq, 7);
    assert_string_equal(r.tenant, "a");
    assert_true(r.flags & KAIROS_PS_LAST);
    expect_quiet(f, fd);
    ps.flags = KAIROS_PS_HOLDS;
    send_msg(fd, KAIROS_MSG_PS, 6, &ps, sizeof ps);
    expect_msg(f, fd, KAIROS_MSG_PS_REPLY, &h, &r, KAIROS_PS_REPLY_SIZE_V2);
    assert_int_equal(h.seq, 6);
    expect_quiet(f, fd);
    send_msg(fd, KAIROS_MSG_PS, 8, NULL, 0);
    expect_msg(f, fd, KAIROS_MSG_PS_REPLY, &h, &r, KAIROS_PS_REPLY_SIZE_V1);
    assert_int_equal(h.seq, 8);
    expect_quiet(f, fd);
    assert_int_equal(server_connections(f->srv), 1);
    close(fd);
    pump(f, 5);
    assert_int_equal(server_connections(f->srv), 0);
}

/* --- framing errors: an ERROR saying why, then the connection closed --- */

/* A HELLO written in two parts is two records: the first is refused as a message
 * cut short (its seq echoed), the peer disconnected, the rest never taken. */
static void test_message_split_across_writes(void **state)
{
    struct fx *f = *state;
    int fd = peer(f);
    struct kairos_hello h = {.pid = (uint32_t)getpid()};
    strcpy(h.tenant, "a");
    unsigned char buf[PROTO_MSG_MAX];
    size_t n = proto_pack(buf, KAIROS_MSG_HELLO, 41, &h, sizeof h);
    send_raw(fd, buf, HDR + 10);
    send_raw(fd, buf + HDR + 10, n - HDR - 10);
    /* the ERROR comes first: not a reset for the record left unread */
    expect_error_and_close(f, fd, KAIROS_ERR_PROTOCOL, 41, "HELLO body is 10 bytes");
    assert_int_equal(members_of_a(f), 0);
    assert_int_equal(server_connections(f->srv), 0);
    /* a header itself cut in two: nothing to echo */
    fd = peer(f);
    send_raw(fd, buf, 5);
    expect_error_and_close(f, fd, KAIROS_ERR_PROTOCOL, 0, "shorter than the 16-byte header");
}

/* Two PS in one write are one record of neither size: refused whole, no reply to
 * either. */
static void test_two_messages_in_one_write(void **state)
{
    struct fx *f = *state;
    int fd = peer(f);
    struct kairos_ps ps = {0};
    unsigned char buf[2 * (HDR + sizeof ps)];
    size_t n = proto_pack(buf, KAIROS_MSG_PS, 3, &ps, sizeof ps);
    proto_pack(buf + n, KAIROS_MSG_PS, 4, &ps, sizeof ps);
    send_raw(fd, buf, 2 * n);
    expect_error_and_close(f, fd, KAIROS_ERR_PROTOCOL, 3, "PS body is 32 bytes (header says 8)");
    assert_int_equal(server_connections(f->srv), 0);
}

/* A record larger than any kairos message: refused by its size (never read into a
 * buffer too small), the peer disconnected. */
static void test_oversized_record(void **state)
{
    struct fx *f = *state;
    int fd = peer(f);
    static unsigned char big[PROTO_MSG_MAX + 100];
    struct kairos_ps ps = {0};
    proto_pack(big, KAIROS_MSG_PS, 5, &ps, sizeof ps);
    send_raw(fd, big, sizeof big);
    expect_error_and_close(f, fd, KAIROS_ERR_PROTOCOL, 0, "larger than any kairos message");
    assert_int_equal(server_connections(f->srv), 0);
}

/* Headers that say something else than the record holds, or what the daemon does
 * not take: each refused with its code, and only that peer goes. */
static void test_bad_headers(void **state)
{
    struct fx *f = *state;
    int other = peer(f);
    struct kairos_hello hello_body = {0};
    strcpy(hello_body.tenant, "a");
    struct {
        uint32_t magic;
        uint16_t version, type;
        uint32_t size, seq;
        size_t body;
        uint32_t code;
        const char *why;
    } cases[] = {
        {KAIROS_PROTO_MAGIC, KAIROS_PROTO_VERSION, KAIROS_MSG_HELLO, sizeof hello_body, 11,
         sizeof hello_body / 2, KAIROS_ERR_PROTOCOL, "it must be exactly"},
        {KAIROS_PROTO_MAGIC, KAIROS_PROTO_VERSION, KAIROS_MSG_HELLO, sizeof hello_body * 4, 12,
         sizeof hello_body, KAIROS_ERR_PROTOCOL, "it must be exactly"},
        {0x12345678, KAIROS_PROTO_VERSION, KAIROS_MSG_HELLO, sizeof hello_body, 13,
         sizeof hello_body, KAIROS_ERR_PROTOCOL, "bad magic"},
        {KAIROS_PROTO_MAGIC, 1, KAIROS_MSG_HELLO, sizeof hello_body, 14, sizeof hello_body,
         KAIROS_ERR_VERSION, "protocol version 1 is not supported"},
        {KAIROS_PROTO_MAGIC, KAIROS_PROTO_VERSION, 999, 0, 15, 0, KAIROS_ERR_PROTOCOL,
         "unknown message type 999"},
        {KAIROS_PROTO_MAGIC, KAIROS_PROTO_VERSION, KAIROS_MSG_OK, 0, 16, 0, KAIROS_ERR_PROTOCOL,
         "sent by the daemon"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = peer(f);
        unsigned char buf[PROTO_MSG_MAX];
        struct kairos_hdr h = {.magic = cases[i].magic, .version = cases[i].version,
                               .type = cases[i].type, .size = cases[i].size,
                               .seq = cases[i].seq};
        memcpy(buf, &h, HDR);
        memcpy(buf + HDR, &hello_body, cases[i].body);
        send_raw(fd, buf, HDR + cases[i].body);
        expect_error_and_close(f, fd, cases[i].code, cases[i].seq, cases[i].why);
    }
    assert_int_equal(members_of_a(f), 0);
    assert_int_equal(server_connections(f->srv), 1);
    hello(f, other); /* the other peer was never disturbed */
    assert_int_equal(members_of_a(f), 1);
    close(other);
    pump(f, 5);
    assert_int_equal(members_of_a(f), 0);
}

/* --- limits on connections --- */

/* With max_connections 2, a third peer gets ERROR BUSY and is closed; once one of
 * the two went, a new one is taken. */
static void test_connection_bound(void **state)
{
    struct fx *f = *state;
    int a = peer(f), b = peer(f);
    assert_int_equal(server_connections(f->srv), 2);
    int c = peer(f);
    expect_error_and_close(f, c, KAIROS_ERR_BUSY, 0, "");
    assert_int_equal(server_connections(f->srv), 2);
    close(a);
    pump(f, 5);
    assert_int_equal(server_connections(f->srv), 1);
    int d = peer(f);
    assert_int_equal(server_connections(f->srv), 2);
    send_msg(d, KAIROS_MSG_PS, 9, NULL, 0);
    struct kairos_hdr h;
    static struct kairos_ps_reply r;
    expect_msg(f, d, KAIROS_MSG_PS_REPLY, &h, &r, KAIROS_PS_REPLY_SIZE_V1);
    close(b);
    close(d);
}

/* A peer that neither registers nor asks anything is closed after
 * register_timeout_ms (100 ms here, swept every 200 ms), told why. */
static void test_idle_unregistered_peer_closed(void **state)
{
    struct fx *f = *state;
    int fd = peer(f);
    uint64_t t0 = now_ms();
    expect_error_and_close(f, fd, KAIROS_ERR_BUSY, 0, "register_timeout_ms");
    assert_true(now_ms() - t0 >= 100);
    assert_int_equal(server_connections(f->srv), 0);
}

/* --- peers that do not read --- */

/* Sends TIME_POLICY seq from, from + 1, ... to tenant a until its one member's
 * connection is dropped or count were sent; how many were sent. Each send returns at
 * once: the daemon never blocks on a peer. */
static unsigned flood(struct fx *f, unsigned from, unsigned count)
{
    unsigned sent = 0;
    for (; sent < count && server_connections(f->srv); sent++) {
        struct kairos_time_policy p = {.gpu = 0, .seq = from + sent};
        server_send_time_policy(f->srv, "a", &p);
    }
    return sent;
}

/* Reads TIME_POLICY messages in order (seq from, from + 1, ...) until the end of the
 * stream or, with stop_at, that many; how many. */
static unsigned drain_policies(struct fx *f, int fd, unsigned from, unsigned stop_at)
{
    unsigned got = 0;
    while (got < stop_at) {
        unsigned char buf[PROTO_MSG_MAX];
        size_t n = next_record(f, fd, buf, sizeof buf);
        if (!n)
            break;
        struct kairos_hdr h;
        struct kairos_time_policy p;
        assert_int_equal(n, HDR + sizeof p);
        memcpy(&h, buf, HDR);
        memcpy(&p, buf + HDR, sizeof p);
        assert_int_equal(h.type, KAIROS_MSG_TIME_POLICY);
        assert_int_equal(p.seq, from + got);
        got++;
    }
    return got;
}

/* A member that never reads: what the socket does not take waits in a bounded
 * queue, and the next message past it drops the peer (its process leaves), without
 * the daemon ever blocking; what the kernel took comes in order, then the end. How
 * many the kernel took. */
static unsigned never_reading(struct fx *f)
{
    int fd = peer(f);
    hello(f, fd);
    uint64_t t0 = now_ms();
    unsigned sent = flood(f, 0, 100000);
    /* a send that blocked on the peer would never return; the bound only has to be
     * far above a loaded sanitizer run's time */
    assert_true(now_ms() - t0 < 20000);
    assert_int_equal(server_connections(f->srv), 0);
    assert_int_equal(members_of_a(f), 0);
    unsigned got = drain_policies(f, fd, 0, UINT32_MAX);
    close(fd);
    assert_true(got > 0);
    /* the queue held 64 (SERVER_OUTQ_MAX) beyond the kernel's, the next one failed */
    assert_int_equal(sent, got + 64 + 1);
    return got;
}

static void test_never_reading_peer_dropped(void **state)
{
    never_reading(*state);
}

/* A member that reads late, with fewer replies waiting than the bound: it gets all
 * of them in order, those sent after it began to read too (behind the queue, not
 * into the room its reading made), and stays connected. */
static void test_late_reader_gets_everything(void **state)
{
    struct fx *f = *state;
    unsigned kernel_takes = never_reading(f);
    int fd = peer(f);
    hello(f, fd);
    unsigned n = kernel_takes + 32;
    assert_int_equal(flood(f, 0, n), n);
    assert_int_equal(server_connections(f->srv), 1);
    assert_int_equal(drain_policies(f, fd, 0, 5), 5); /* without running the daemon */
    assert_int_equal(flood(f, n, 10), 10);
    assert_int_equal(drain_policies(f, fd, 5, n + 10 - 5), n + 10 - 5);
    expect_quiet(f, fd);
    assert_int_equal(server_connections(f->srv), 1);
    /* it reads again: requests are answered as before */
    send_msg(fd, KAIROS_MSG_PS, 21, NULL, 0);
    struct kairos_hdr h;
    static struct kairos_ps_reply r;
    expect_msg(f, fd, KAIROS_MSG_PS_REPLY, &h, &r, KAIROS_PS_REPLY_SIZE_V1);
    assert_int_equal(h.seq, 21);
    close(fd);
}

/* A member with replies waiting hangs up right after a last request: the request is
 * still taken (a tenant created), the replies dropped and freed, the member gone. */
static void test_hang_up_with_replies_waiting(void **state)
{
    struct fx *f = *state;
    unsigned kernel_takes = never_reading(f);
    int fd = peer(f);
    hello(f, fd);
    unsigned n = kernel_takes + 10;
    assert_int_equal(flood(f, 0, n), n);
    struct kairos_tenant_set ts = {.n_gpus = 1, .quota = {1ull << 20}};
    strcpy(ts.tenant, "made");
    send_msg(fd, KAIROS_MSG_TENANT_SET, 30, &ts, sizeof ts);
    close(fd);
    uint64_t until = now_ms() + WAIT_MS;
    while (server_connections(f->srv) && now_ms() < until)
        pump(f, 5);
    assert_int_equal(server_connections(f->srv), 0);
    assert_int_equal(members_of_a(f), 0);
    assert_non_null(ledger_tenant_find(&f->ts.ledger, "made"));
}

/* A peer that hangs up before reading its WELCOME: it joined, and leaves with its
 * connection. */
static void test_hang_up_before_the_reply(void **state)
{
    struct fx *f = *state;
    int fd = peer(f);
    struct kairos_hello h = {.pid = (uint32_t)getpid()};
    strcpy(h.tenant, "a");
    send_msg(fd, KAIROS_MSG_HELLO, 1, &h, sizeof h);
    close(fd);
    pump(f, 20);
    assert_int_equal(server_connections(f->srv), 0);
    assert_int_equal(members_of_a(f), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_whole_message_handled_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_message_split_across_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_messages_in_one_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_bound, setup_two_connections, teardown),
        cmocka_unit_test_setup_teardown(test_idle_unregistered_peer_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_reading_peer_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_reader_gets_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hang_up_with_replies_waiting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hang_up_before_the_reply, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
