/* test_agent.c - the shim's link to kairosd (agent.c) against a scripted stand-in
 * daemon on a real SOCK_SEQPACKET socket: HELLO and WELCOME (the quota, the socket
 * moved to a high close-on-exec descriptor), a refusal's message, a push that
 * arrives before a reply (dispatched, the reply still taken), a reply to another
 * request (the link dropped, not trusted), and a one-way report that never waits for
 * a requester holding the link.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

#include "shim/agent.h"

/* What the stand-in daemon does after reading a request. */
enum script {
    WELCOME,         /* HELLO: WELCOME with a quota; ROUTE: ROUTED (an MPS client) */
    REFUSE,          /* HELLO: ERROR with a message */
    ROUTE_REFUSED,   /* HELLO: WELCOME; ROUTE: ERROR with a message */
    OLD_DAEMON,      /* HELLO with KAIROS_HELLO_SPACE: ERROR INVALID (a kairosd of before) */
    PUSH_THEN_GRANT, /* CHARGE: a TIME_POLICY push, then the GRANT */
    WRONG_SEQ,       /* CHARGE: a GRANT numbered for another request */
    SLOW_GRANT,      /* CHARGE: the GRANT after a while (hold_ms) */
};

struct daemon {
    char dir[40], path[64];
    int listen_fd, conn_fd;
    pthread_t thread;
    enum script after_hello, after_charge;
    int routes; /* ROUTE requests read */
    unsigned hold_ms;
    struct kairos_hello hello; /* what the shim said */
    int runnables;             /* RUNNABLE reports read */
};

static int send_to(int fd, uint16_t type, uint32_t seq, const void *body, uint32_t size)
{
    unsigned char buf[sizeof(struct kairos_hdr) + 512];
    struct kairos_hdr h = {KAIROS_PROTO_MAGIC, KAIROS_PROTO_VERSION, type, size, seq};
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, body, size);
    return send(fd, buf, sizeof h + size, MSG_NOSIGNAL) == (ssize_t)(sizeof h + size) ? 0 : -1;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void answer_charge(struct daemon *d, uint32_t seq)
{
    struct kairos_grant g = {.granted = 1, .quota = 1 << 30, .held = 4096};
    if (d->after_charge == PUSH_THEN_GRANT) {
        struct kairos_time_policy tp = {.gpu = 0, .seq = 9, .timeslice_us = 1234};
        send_to(d->conn_fd, KAIROS_MSG_TIME_POLICY, 0, &tp, sizeof tp);
    }
    if (d->after_charge == SLOW_GRANT)
        sleep_ms(d->hold_ms);
    send_to(d->conn_fd, KAIROS_MSG_GRANT, d->after_charge == WRONG_SEQ ? seq + 7 : seq, &g,
            sizeof g);
}

static void answer_route(struct daemon *d, uint32_t seq)
{
    if (d->after_hello == ROUTE_REFUSED) {
        struct kairos_error e = {.code = KAIROS_ERR_PERMISSION};
        snprintf(e.message, sizeof e.message, "fault domain d1 needs NVIDIA MPS");
        send_to(d->conn_fd, KAIROS_MSG_ERROR, seq, &e, sizeof e);
        return;
    }
    struct kairos_routed r = {.mode = KAIROS_ROUTE_MPS, .thread_pct = 100, .priority = 1};
    snprintf(r.domain, sizeof r.domain, "d1");
    snprintf(r.pipe_dir, sizeof r.pipe_dir, "/run/kairos/mps/d1@0/pipe");
    send_to(d->conn_fd, KAIROS_MSG_ROUTED, seq, &r, sizeof r);
}

/* Serves one connection until the shim hangs up. */
static void serve_one(struct daemon *d)
{
    d->conn_fd = accept(d->listen_fd, NULL, NULL);
    unsigned char buf[sizeof(struct kairos_hdr) + 1024];
    ssize_t n;
    while ((n = recv(d->conn_fd, buf, sizeof buf, 0)) > 0) {
        struct kairos_hdr h;
        memcpy(&h, buf, sizeof h);
        if (h.type == KAIROS_MSG_HELLO) {
            memcpy(&d->hello, buf + sizeof h, sizeof d->hello);
            if (d->after_hello == OLD_DAEMON && (d->hello.flags & KAIROS_HELLO_SPACE)) {
                struct kairos_error e = {.code = KAIROS_ERR_INVALID};
                snprintf(e.message, sizeof e.message, "HELLO has unknown flags");
                send_to(d->conn_fd, KAIROS_MSG_ERROR, h.seq, &e, sizeof e);
            } else if (d->after_hello == REFUSE) {
                struct kairos_error e = {.code = KAIROS_ERR_NO_TENANT};
                snprintf(e.message, sizeof e.message, "no tenant 'ghost': ask the admin");
                send_to(d->conn_fd, KAIROS_MSG_ERROR, h.seq, &e, sizeof e);
            } else {
                struct kairos_welcome w = {.tenant_id = 5, .n_gpus = 1, .quota = {1 << 30}};
                send_to(d->conn_fd, KAIROS_MSG_WELCOME, h.seq, &w, sizeof w);
            }
        } else if (h.type == KAIROS_MSG_ROUTE) {
            d->routes++;
            answer_route(d, h.seq);
        } else if (h.type == KAIROS_MSG_CHARGE) {
            answer_charge(d, h.seq);
        } else if (h.type == KAIROS_MSG_RUNNABLE) {
            __atomic_add_fetch(&d->runnables, 1, __ATOMIC_SEQ_CST);
        }
    }
    close(d->conn_fd);
}

/* One connection; two for a kairosd of before (the shim comes back without its flags). */
static void *serve(void *arg)
{
    struct daemon *d = arg;
    serve_one(d);
    if (d->after_hello == OLD_DAEMON)
        serve_one(d);
    return NULL;
}

static void daemon_start(struct daemon *d, enum script after_hello, enum script after_charge)
{
    memset(d, 0, sizeof *d);
    d->after_hello = after_hello;
    d->after_charge = after_charge;
    snprintf(d->dir, sizeof d->dir, "/tmp/kairos-agent-XXXXXX");
    assert_non_null(mkdtemp(d->dir));
    snprintf(d->path, sizeof d->path, "%s/k.sock", d->dir);
    d->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d->path);
    assert_int_equal(bind(d->listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(d->listen_fd, 4), 0);
    assert_int_equal(pthread_create(&d->thread, NULL, serve, d), 0);
}

/* The agent's descriptor, or -1. */
static int agent_fd_now(void)
{
    for (int fd = 0; fd < 4096; fd++)
        if (agent_owns_fd(fd))
            return fd;
    return -1;
}

/* The application's side hangs up (as when it closes the agent's descriptor), and the
 * stand-in daemon's connection ends. */
static void daemon_stop(struct daemon *d)
{
    int fd = agent_fd_now();
    if (fd >= 0) {
        agent_forget();
        close(fd);
    }
    pthread_join(d->thread, NULL);
    close(d->listen_fd);
    unlink(d->path);
    rmdir(d->dir);
}

static int connect_to(struct daemon *d, const char *tenant, struct agent_quota *q, char *err,
                      size_t err_len)
{
    uint64_t held[KAIROS_MAX_GPUS] = {0};
    return agent_connect(shim_real_fallback(), d->path, tenant, held, false, q, err, err_len);
}

static void test_hello_welcome_and_a_high_cloexec_descriptor(void **state)
{
    (void)state;
    struct daemon d;
    daemon_start(&d, WELCOME, PUSH_THEN_GRANT);
    struct agent_quota q;
    char err[200] = "";
    assert_int_equal(connect_to(&d, "t1", &q, err, sizeof err), 0);
    assert_true(agent_connected());
    assert_int_equal(q.tenant_id, 5);
    assert_int_equal(q.n_gpus, 1);
    assert_int_equal(q.quota[0], 1 << 30);
    assert_string_equal(d.hello.tenant, "t1");
    assert_int_equal(d.hello.pid, (uint32_t)getpid());
    assert_true(q.routed); /* a first HELLO asks ROUTE: kairosd's answer, kept */
    assert_int_equal(d.routes, 1);
    assert_int_equal(q.route.mode, KAIROS_ROUTE_MPS);
    assert_int_equal(q.route.priority, 1);
    assert_string_equal(q.route.domain, "d1");
    assert_string_equal(q.route.pipe_dir, "/run/kairos/mps/d1@0/pipe");
    int fd = agent_fd_now();
    assert_true(fd >= 700); /* out of the application's usual numbers */
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    daemon_stop(&d);
    assert_false(agent_connected());
}

/* A refused ROUTE refuses the registration with kairosd's sentence (the process gets
 * no GPU), and is not taken for a kairosd of before (no HELLO again without it). */
static void test_a_refused_route_refuses_the_process(void **state)
{
    (void)state;
    struct daemon d;
    daemon_start(&d, ROUTE_REFUSED, PUSH_THEN_GRANT);
    struct agent_quota q;
    char err[200] = "";
    assert_int_equal(connect_to(&d, "t1", &q, err, sizeof err), -EPERM);
    assert_string_equal(err, "fault domain d1 needs NVIDIA MPS");
    assert_false(agent_connected());
    daemon_stop(&d);
}

/* A kairosd of before refuses the new HELLO flags: the shim says HELLO again without
 * them and asks no ROUTE (its processes run as time tenants). */
static void test_a_kairosd_of_before_gets_no_route_request(void **state)
{
    (void)state;
    struct daemon d;
    daemon_start(&d, OLD_DAEMON, PUSH_THEN_GRANT);
    struct agent_quota q;
    char err[200] = "";
    assert_int_equal(connect_to(&d, "t1", &q, err, sizeof err), 0);
    assert_false(q.routed);
    assert_false(d.hello.flags & KAIROS_HELLO_SPACE);
    assert_int_equal(d.routes, 0);
    daemon_stop(&d);
}

static void test_a_refusal_says_why(void **state)
{
    (void)state;
    struct daemon d;
    daemon_start(&d, REFUSE, PUSH_THEN_GRANT);
    struct agent_quota q;
    char err[200] = "";
    assert_int_equal(connect_to(&d, "ghost", &q, err, sizeof err), -EPERM);
    assert_string_equal(err, "no tenant 'ghost': ask the admin");
    assert_false(agent_connected());
    daemon_stop(&d);
}

static struct kairos_time_policy pushed;
static int pushes;

static void on_policy(const struct kairos_time_policy *p)
{
    pushed = *p;
    pushes++;
}

static void test_a_push_before_the_reply_is_dispatched(void **state)
{
    (void)state;
    struct daemon d;
    daemon_start(&d, WELCOME, PUSH_THEN_GRANT);
    agent_set_policy_handler(on_policy);
    pushes = 0;
    struct agent_quota q;
    assert_int_equal(connect_to(&d, "t1", &q, NULL, 0), 0);
    struct kairos_grant g;
    assert_int_equal(agent_charge_flags(0, 4096, 1, 0, &g), 0);
    assert_int_equal(g.granted, 1);
    assert_int_equal(g.held, 4096);
    assert_int_equal(pushes, 1);
    assert_int_equal(pushed.timeslice_us, 1234);
    agent_set_policy_handler(NULL);
    daemon_stop(&d);
}

static void test_a_reply_to_another_request_drops_the_link(void **state)
{
    (void)state;
    struct daemon d;
    daemon_start(&d, WELCOME, WRONG_SEQ);
    struct agent_quota q;
    assert_int_equal(connect_to(&d, "t1", &q, NULL, 0), 0);
    struct kairos_grant g;
    assert_int_equal(agent_charge_flags(0, 4096, 1, 0, &g), -EPROTO);
    assert_false(agent_connected()); /* nothing it says is trusted after that */
    daemon_stop(&d);
}

/* A CHARGE on another thread; its result in *arg. */
static void *charge_slowly(void *arg)
{
    struct kairos_grant g;
    *(int *)arg = agent_charge_flags(0, 4096, 2, 0, &g);
    return NULL;
}

/* Whether RUNNABLE reads the link as busy: a requester holds it until its reply. */
static bool link_busy(void)
{
    struct kairos_runnable r = {.gpu = 0};
    return agent_report_runnable(&r) == -EBUSY;
}

/* While a CHARGE waits 2 s for its GRANT, a RUNNABLE report says -EBUSY at once: a
 * report that waited for the link would have got it only after the GRANT, and then
 * never read busy. */
static void test_a_report_never_waits_for_a_requester(void **state)
{
    (void)state;
    static struct daemon d;
    daemon_start(&d, WELCOME, SLOW_GRANT);
    d.hold_ms = 2000;
    struct agent_quota q;
    assert_int_equal(connect_to(&d, "t1", &q, NULL, 0), 0);
    int rc = 1;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, charge_slowly, &rc), 0);
    bool busy = false;
    for (int k = 0; k < 1500 && !busy; k++) {
        busy = link_busy();
        if (!busy)
            sleep_ms(1);
    }
    assert_true(busy);
    pthread_join(t, NULL);
    assert_int_equal(rc, 0);
    assert_false(link_busy()); /* the link is free again */
    daemon_stop(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello_welcome_and_a_high_cloexec_descriptor),
        cmocka_unit_test(test_a_refusal_says_why),
        cmocka_unit_test(test_a_refused_route_refuses_the_process),
        cmocka_unit_test(test_a_kairosd_of_before_gets_no_route_request),
        cmocka_unit_test(test_a_push_before_the_reply_is_dispatched),
        cmocka_unit_test(test_a_reply_to_another_request_drops_the_link),
        cmocka_unit_test(test_a_report_never_waits_for_a_requester),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
