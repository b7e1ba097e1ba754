/* test_requests.c - requests.c's table and its handlers driven without a socket: a
 * struct peer whose transport (struct peer_io) records what a handler hands it. A
 * member's request before HELLO: an ERROR echoing its seq and the disconnection; an
 * administrator's request from someone else: an ERROR (PERMISSION), the connection
 * kept and not registered, the handler not run; from an administrator: the
 * connection registered and the handler run; HELLO: WELCOME with the tenant's quota,
 * the peer a member whose exit the transport is asked to watch; a malformed message:
 * the ERROR of proto_check and the disconnection; PS paged behind the outbox, one
 * tenant per reply; the table's types are exactly the
 * requests proto_check accepts; TENANT_SET's fault domain set by its whole body only
 * (one of before leaves it), refused for a domain the configuration does not declare
 * and for anyone but an administrator. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/config/config.h"
#include "daemon/memory/ledger.h"
#include "daemon/tenants/tenants.h"
#include "daemon/transport/handle_members.h"
#include "daemon/transport/handle_ps.h"
#include "daemon/transport/peer.h"
#include "daemon/transport/proto_check.h"
#include "daemon/transport/requests.h"
#include "kairos/proto.h"

#define ADMIN_UID 4243u /* the one administrator of the configuration */
#define OTHER_UID 4242u /* anyone else (the peer's uid is the test's to choose) */

/* What the transport was handed. */
struct sent {
    uint16_t type;
    uint32_t seq;
    unsigned char body[PROTO_MSG_MAX];
    size_t len;
};

struct fx {
    char dir[64], state[96];
    struct config cfg;
    struct tenants ts;
    struct services sv;
    struct peer p;
    struct sent sent[8];
    unsigned n_sent, n_joined;
    bool hold_outbox; /* what was sent waits in the outbox (the peer does not read) */
};

static struct fx *the_fx; /* the fake transport's functions find their record here */

static bool fake_send(struct peer *p, uint16_t type, uint32_t seq, const void *body,
                      size_t len)
{
    assert_ptr_equal(p, &the_fx->p);
    assert_true(the_fx->n_sent < sizeof the_fx->sent / sizeof the_fx->sent[0]);
    struct sent *s = &the_fx->sent[the_fx->n_sent++];
    s->type = type;
    s->seq = seq;
    s->len = len;
    if (len)
        memcpy(s->body, body, len);
    return true;
}

static bool fake_waiting(const struct peer *p)
{
    return the_fx->hold_outbox && the_fx->n_sent > 0;
}

static void fake_joined(struct peer *p)
{
    the_fx->n_joined++;
}

static void fake_later(struct services *sv)
{
}

static const struct peer_io fake_io = {
    .send = fake_send,
    .waiting = fake_waiting,
    .joined = fake_joined,
    .compute_changed_later = fake_later,
};

/* --- the fixture: a node of one GPU, tenant "a" of 1 GiB that OTHER_UID may join,
 * tenant "b" of 2 GiB, one administrator --- */

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/kairos-requests-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof f->state, "%s/state.json", f->dir);
    char text[512], err[256];
    snprintf(text, sizeof text,
             "state: %s\nadmins: [%u]\ngpus: 1\n"
             "space:\n  domains:\n    infer: { shared_uids: false }\n"
             "tenants:\n  - name: a\n    memory: { 0: 1G }\n    members: { users: [%u] }\n"
             "  - name: b\n    memory: { 0: 2G }\n",
             f->state, ADMIN_UID, OTHER_UID);
    if (config_parse("test.yaml", text, strlen(text), &f->cfg, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(tenants_init(&f->ts, 1, f->state), 0);
    if (tenants_apply_config(&f->ts, &f->cfg, err, sizeof err))
        fail_msg("%s", err);
    f->sv = (struct services){.ts = &f->ts, .cfg = &f->cfg, .io = &fake_io, .peers = &f->p};
    membership_init(&f->sv.membership, &f->ts, &f->cfg);
    f->p = (struct peer){.sv = &f->sv, .pid = (uint32_t)getpid(), .uid = OTHER_UID,
                         .gid = OTHER_UID};
    the_fx = f;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    handle_members_left(&f->p); /* a member of "a" leaves */
    membership_fini(&f->sv.membership);
    tenants_fini(&f->ts);
    config_free(&f->cfg);
    char path[128];
    snprintf(path, sizeof path, "%s.admissions", f->state);
    unlink(path);
    unlink(f->state);
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
    the_fx = NULL;
    return 0;
}

/* Hands one message from the peer to the table: what requests_handle returns. */
static bool request(struct fx *f, uint16_t type, uint32_t seq, const void *body, size_t len)
{
    unsigned char buf[PROTO_MSG_MAX];
    size_t n = proto_pack(buf, type, seq, body, len);
    return requests_handle(&f->p, buf, n);
}

/* The one message handed to the transport: an ERROR of code echoing seq. */
static void expect_one_error(struct fx *f, uint32_t code, uint32_t seq, const char *part)
{
    assert_int_equal(f->n_sent, 1);
    assert_int_equal(f->sent[0].type, KAIROS_MSG_ERROR);
    assert_int_equal(f->sent[0].seq, seq);
    struct kairos_error e;
    assert_int_equal(f->sent[0].len, sizeof e);
    memcpy(&e, f->sent[0].body, sizeof e);
    assert_int_equal(e.code, code);
    if (!strstr(e.message, part))
        fail_msg("expected '%s' in '%s'", part, e.message);
}

/* --- the tests --- */

/* COMMIT needs a member: before HELLO, an ERROR and the disconnection (false). */
static void test_member_request_before_hello(void **state)
{
    struct fx *f = *state;
    struct kairos_commit c = {.gpu = 0, .token = 1, .ok = 1, .actual = 4096};
    assert_false(request(f, KAIROS_MSG_COMMIT, 7, &c, sizeof c));
    expect_one_error(f, KAIROS_ERR_NOT_REGISTERED, 7, "send HELLO");
    assert_null(f->p.member);
}

/* TENANT_DEL from someone else: PERMISSION, the connection kept, not registered,
 * and the tenant still there (the handler did not run). */
static void test_admin_request_refused(void **state)
{
    struct fx *f = *state;
    struct kairos_tenant_del d = {0};
    strcpy(d.tenant, "gone");
    assert_true(request(f, KAIROS_MSG_TENANT_DEL, 9, &d, sizeof d));
    expect_one_error(f, KAIROS_ERR_PERMISSION, 9, "permission denied");
    assert_false(f->p.registered);
}

/* TENANT_DEL from the administrator: registered, and the handler's own answer (no
 * such tenant) rather than a refusal. */
static void test_admin_request_registers(void **state)
{
    struct fx *f = *state;
    f->p.uid = ADMIN_UID;
    struct kairos_tenant_del d = {0};
    strcpy(d.tenant, "gone");
    assert_true(request(f, KAIROS_MSG_TENANT_DEL, 10, &d, sizeof d));
    expect_one_error(f, KAIROS_ERR_NO_TENANT, 10, "no tenant 'gone'");
    assert_true(f->p.registered);
}

/* TENANT_MEMBERS is an administrator's too, but does not register its connection. */
static void test_members_rules_refused_unregistered(void **state)
{
    struct fx *f = *state;
    struct kairos_tenant_members m = {0};
    strcpy(m.tenant, "a");
    assert_true(request(f, KAIROS_MSG_TENANT_MEMBERS, 11, &m, sizeof m));
    expect_one_error(f, KAIROS_ERR_PERMISSION, 11, "permission denied");
    assert_false(f->p.registered);
}

/* HELLO to "a": one WELCOME echoing its seq with a's quota, the peer a member of a,
 * its exit watched (peer_io.joined) once. */
static void test_hello_welcomes(void **state)
{
    struct fx *f = *state;
    struct kairos_hello h = {.pid = f->p.pid};
    strcpy(h.tenant, "a");
    assert_true(request(f, KAIROS_MSG_HELLO, 3, &h, sizeof h));
    assert_int_equal(f->n_sent, 1);
    assert_int_equal(f->sent[0].type, KAIROS_MSG_WELCOME);
    assert_int_equal(f->sent[0].seq, 3);
    struct kairos_welcome w;
    assert_int_equal(f->sent[0].len, sizeof w);
    memcpy(&w, f->sent[0].body, sizeof w);
    assert_int_equal(w.n_gpus, 1);
    assert_int_equal(w.quota[0], 1ull << 30);
    assert_non_null(f->p.member);
    assert_string_equal(f->p.member->tenant->name, "a");
    assert_ptr_equal(f->p.member->cr.peer, &f->p);
    assert_int_equal(f->n_joined, 1);
    assert_int_equal(ledger_tenant_find(&f->ts.ledger, "a")->n_members, 1);
}

/* The PS_REPLY of sent[i]: its tenant, and whether it is the last. */
static void expect_ps_reply(struct fx *f, unsigned i, uint32_t seq, const char *tenant,
                            uint64_t quota, bool last)
{
    assert_true(i < f->n_sent);
    assert_int_equal(f->sent[i].type, KAIROS_MSG_PS_REPLY);
    assert_int_equal(f->sent[i].seq, seq);
    struct kairos_ps_reply r;
    assert_int_equal(f->sent[i].len, sizeof r); /* asked with HOLDS and FAULTS: whole */
    memcpy(&r, f->sent[i].body, sizeof r);
    assert_string_equal(r.tenant, tenant);
    assert_int_equal(r.quota[0], quota);
    assert_int_equal(!!(r.flags & KAIROS_PS_LAST), last);
}

/* PS pages while the outbox holds replies: one PS_REPLY, then nothing until the
 * transport sent it (handle_ps_pump), then the next tenant, the last flagged. */
static void test_ps_pages_behind_the_outbox(void **state)
{
    struct fx *f = *state;
    f->hold_outbox = true;
    struct kairos_ps ps = {.flags = KAIROS_PS_HOLDS | KAIROS_PS_FAULTS};
    assert_true(request(f, KAIROS_MSG_PS, 4, &ps, sizeof ps));
    assert_int_equal(f->n_sent, 1);
    expect_ps_reply(f, 0, 4, "a", 1ull << 30, false);
    assert_true(f->p.ps_active);
    assert_true(handle_ps_pump(&f->p)); /* the outbox still holds it: nothing more */
    assert_int_equal(f->n_sent, 1);
    f->hold_outbox = false; /* sent: the listing goes on */
    assert_true(handle_ps_pump(&f->p));
    assert_int_equal(f->n_sent, 2);
    expect_ps_reply(f, 1, 4, "b", 2ull << 30, true);
    assert_false(f->p.ps_active);
}

/* A header naming another version: proto_check's ERROR, the disconnection, no
 * handler. */
static void test_malformed_message(void **state)
{
    struct fx *f = *state;
    unsigned char buf[PROTO_MSG_MAX];
    struct kairos_hello h = {.pid = f->p.pid};
    strcpy(h.tenant, "a");
    size_t n = proto_pack(buf, KAIROS_MSG_HELLO, 5, &h, sizeof h);
    struct kairos_hdr hdr;
    memcpy(&hdr, buf, sizeof hdr);
    hdr.version = KAIROS_PROTO_VERSION + 1;
    memcpy(buf, &hdr, sizeof hdr);
    assert_false(requests_handle(&f->p, buf, n));
    expect_one_error(f, KAIROS_ERR_VERSION, 5, "version");
    assert_null(f->p.member);
    assert_int_equal(f->n_joined, 0);
}

/* TENANT_SET "job" of 1 GiB with fault_domain domain, len bytes of it; the first
 * message handed to the transport is its answer. */
static void set_job(struct fx *f, uint32_t seq, const char *domain, size_t len)
{
    struct kairos_tenant_set m = {.n_gpus = 1, .quota = {1ull << 30}};
    strcpy(m.tenant, "job");
    snprintf(m.fault_domain, sizeof m.fault_domain, "%s", domain);
    f->n_sent = 0;
    assert_true(request(f, KAIROS_MSG_TENANT_SET, seq, &m, len));
}

static void test_tenant_set_fault_domain(void **state)
{
    struct fx *f = *state;
    f->p.uid = ADMIN_UID;
    set_job(f, 1, "infer", sizeof(struct kairos_tenant_set));
    assert_int_equal(f->sent[0].type, KAIROS_MSG_OK);
    struct ledger_tenant *t = ledger_tenant_find(&f->ts.ledger, "job");
    assert_string_equal(tenants_settings_of(&f->ts, t)->fault_domain, "infer");
    /* the body of before, without the domain: the domain stays */
    set_job(f, 2, "", KAIROS_TENANT_SET_SIZE_V1);
    assert_int_equal(f->sent[0].type, KAIROS_MSG_OK);
    assert_string_equal(tenants_settings_of(&f->ts, t)->fault_domain, "infer");
    /* a domain the configuration does not declare: refused, and why */
    set_job(f, 3, "nowhere", sizeof(struct kairos_tenant_set));
    expect_one_error(f, KAIROS_ERR_INVALID, 3, "fault domain 'nowhere' is not declared");
    assert_string_equal(tenants_settings_of(&f->ts, t)->fault_domain, "infer");
    /* the whole body with "": none */
    set_job(f, 4, "", sizeof(struct kairos_tenant_set));
    assert_int_equal(f->sent[0].type, KAIROS_MSG_OK);
    assert_string_equal(tenants_settings_of(&f->ts, t)->fault_domain, "");
    /* anyone else: refused before the handler runs */
    f->p.uid = OTHER_UID;
    set_job(f, 5, "infer", sizeof(struct kairos_tenant_set));
    expect_one_error(f, KAIROS_ERR_PERMISSION, 5, "permission denied");
    assert_string_equal(tenants_settings_of(&f->ts, t)->fault_domain, "");
}

/* requests.c's table and proto_check.c's agree: every type a peer may send has its
 * entry (else requests_handle aborts), and no other type has one. */
static void test_table_matches_proto_check(void **state)
{
    unsigned n = 0;
    for (unsigned t = 0; t <= UINT16_MAX; t++) {
        bool entry = requests_find((uint16_t)t) != NULL;
        if (entry != proto_is_request((uint16_t)t))
            fail_msg("type %u (%s): %s", t, proto_type_name((uint16_t)t),
                     entry ? "an entry, but proto_check refuses it"
                           : "a request without an entry");
        n += entry;
    }
    assert_int_equal(n, 18);
    const struct request_type *e = requests_find(KAIROS_MSG_CREDIT);
    assert_int_equal(e->who, REQUEST_MEMBER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_matches_proto_check),
        cmocka_unit_test_setup_teardown(test_member_request_before_hello, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admin_request_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admin_request_registers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_members_rules_refused_unregistered, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_hello_welcomes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ps_pages_behind_the_outbox, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenant_set_fault_domain, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
