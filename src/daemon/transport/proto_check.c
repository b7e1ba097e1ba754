/* proto_check.c - the table of message types (name, body size, who sends it) and
 * the validation of every request before the daemon acts on it; compute policies
 * are checked by policy.c, as the configuration's are. */
#include "daemon/transport/proto_check.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "daemon/memory/ledger.h"
#include "core/policy.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kairos messages are little-endian structs; this host is not little-endian"
#endif

struct proto_type {
    uint16_t type;
    const char *name;
    size_t size;
    bool request;    /* a peer may send it to the daemon */
    size_t old_size[2]; /* shorter bodies of earlier revisions, still accepted and read
                         * as if the rest were 0 (proto.h's history); NO_OLD: none */
};

#define NO_OLD SIZE_MAX
#define NO_OLDS {NO_OLD, NO_OLD}

static const struct proto_type proto_types[] = {
    {KAIROS_MSG_HELLO, "HELLO", sizeof(struct kairos_hello), true, NO_OLDS},
    {KAIROS_MSG_CHARGE, "CHARGE", sizeof(struct kairos_charge), true, NO_OLDS},
    {KAIROS_MSG_COMMIT, "COMMIT", sizeof(struct kairos_commit), true, NO_OLDS},
    {KAIROS_MSG_RELEASE, "RELEASE", sizeof(struct kairos_release), true, NO_OLDS},
    {KAIROS_MSG_RUNNABLE, "RUNNABLE", sizeof(struct kairos_runnable), true, NO_OLDS},
    {KAIROS_MSG_FORKED, "FORKED", sizeof(struct kairos_forked), true, NO_OLDS},
    {KAIROS_MSG_FORK_TICKETS, "FORK_TICKETS", sizeof(struct kairos_fork_tickets), true, NO_OLDS},
    {KAIROS_MSG_INHERITED, "INHERITED", sizeof(struct kairos_inherited), true, NO_OLDS},
    {KAIROS_MSG_IMPORTED, "IMPORTED", sizeof(struct kairos_imported), true, NO_OLDS},
    {KAIROS_MSG_SHARED, "SHARED", sizeof(struct kairos_shared), true, NO_OLDS},
    {KAIROS_MSG_TENANT_SET, "TENANT_SET", sizeof(struct kairos_tenant_set), true,
     {KAIROS_TENANT_SET_SIZE_V0, KAIROS_TENANT_SET_SIZE_V1}},
    {KAIROS_MSG_TENANT_DEL, "TENANT_DEL", sizeof(struct kairos_tenant_del), true, NO_OLDS},
    {KAIROS_MSG_PS, "PS", sizeof(struct kairos_ps), true, {0, NO_OLD}}, /* empty: before */
    {KAIROS_MSG_TENANT_MEMBERS, "TENANT_MEMBERS", sizeof(struct kairos_tenant_members), true,
     NO_OLDS},
    {KAIROS_MSG_TENANT_ADMIT, "TENANT_ADMIT", sizeof(struct kairos_tenant_admit), true, NO_OLDS},
    {KAIROS_MSG_CREDIT, "CREDIT", sizeof(struct kairos_credit), true, NO_OLDS},
    {KAIROS_MSG_CREDIT_RECALL, "CREDIT_RECALL", sizeof(struct kairos_credit_recall), false,
     NO_OLDS},
    {KAIROS_MSG_ROUTE, "ROUTE", sizeof(struct kairos_route), true, NO_OLDS},
    {KAIROS_MSG_ENDING, "ENDING", sizeof(struct kairos_ending), true, NO_OLDS},
    {KAIROS_MSG_ROUTED, "ROUTED", sizeof(struct kairos_routed), false, NO_OLDS},
    {KAIROS_MSG_ROOM, "ROOM", sizeof(struct kairos_room), false, NO_OLDS},
    {KAIROS_MSG_OK, "OK", 0, false, NO_OLDS},
    {KAIROS_MSG_ERROR, "ERROR", sizeof(struct kairos_error), false, NO_OLDS},
    {KAIROS_MSG_WELCOME, "WELCOME", sizeof(struct kairos_welcome), false, NO_OLDS},
    {KAIROS_MSG_GRANT, "GRANT", sizeof(struct kairos_grant), false, NO_OLDS},
    {KAIROS_MSG_PS_REPLY, "PS_REPLY", sizeof(struct kairos_ps_reply), false, NO_OLDS},
};

static const struct proto_type *find_type(uint16_t type)
{
    for (size_t i = 0; i < sizeof proto_types / sizeof proto_types[0]; i++)
        if (proto_types[i].type == type)
            return &proto_types[i];
    return NULL;
}

long proto_body_size(uint16_t type)
{
    const struct proto_type *t = find_type(type);
    return t ? (long)t->size : -1;
}

bool proto_is_request(uint16_t type)
{
    const struct proto_type *t = find_type(type);
    return t && t->request;
}

const char *proto_type_name(uint16_t type)
{
    const struct proto_type *t = find_type(type);
    return t ? t->name : "unknown";
}

static int refuse(int code, char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(int code, char *why, size_t why_len, const char *fmt, ...)
{
    if (why && why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return code;
}

static int check_name(const char *name, const char *what, char *why, size_t why_len)
{
    if (!memchr(name, 0, KAIROS_NAME_MAX))
        return refuse(KAIROS_ERR_PROTOCOL, why, why_len, "%s name is not NUL-terminated", what);
    if (!ledger_name_valid(name))
        return refuse(KAIROS_ERR_INVALID, why, why_len,
                      "%s name must be 1-63 characters of A-Z a-z 0-9 . _ - (not starting "
                      "with . or -)", what);
    return 0;
}

/* TENANT_SET's fault_domain: terminated, and "" (none) or a name by the rule of the
 * configuration's fault_domain: (config.c). */
static int check_domain(const char *domain, char *why, size_t why_len)
{
    if (!memchr(domain, 0, KAIROS_NAME_MAX))
        return refuse(KAIROS_ERR_PROTOCOL, why, why_len,
                      "TENANT_SET fault_domain is not NUL-terminated");
    if (domain[0] && !ledger_name_valid(domain))
        return refuse(KAIROS_ERR_INVALID, why, why_len,
                      "fault domain '%s' must be 1-63 characters of A-Z a-z 0-9 . _ - (not "
                      "starting with . or -), or empty for none", domain);
    return 0;
}

static int check_bytes(uint64_t v, const char *what, char *why, size_t why_len)
{
    if (v > KAIROS_BYTES_MAX)
        return refuse(KAIROS_ERR_INVALID, why, why_len, "%s of %llu bytes is absurd (over 1 PiB)",
                      what, (unsigned long long)v);
    return 0;
}

static int check_gpu(uint32_t gpu, char *why, size_t why_len)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return refuse(KAIROS_ERR_INVALID, why, why_len, "GPU index %u is out of range (at most %u)",
                      gpu, KAIROS_MAX_GPUS - 1);
    return 0;
}

/* compute[]: flags, zeros where nothing is set, and each policy as policy.c sees it. */
static int check_compute(const struct kairos_tenant_set *s, char *why, size_t why_len)
{
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        const struct kairos_compute *c = &s->compute[g];
        bool values = c->share_ppm || c->limit_ppm || c->priority;
        if (c->flags & ~(KAIROS_COMPUTE_SET | KAIROS_COMPUTE_CLEAR))
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "TENANT_SET compute[%u] has unknown flags 0x%x", g,
                          c->flags & ~(KAIROS_COMPUTE_SET | KAIROS_COMPUTE_CLEAR));
        if (c->pad)
            return refuse(KAIROS_ERR_INVALID, why, why_len, "TENANT_SET compute[%u].pad must be 0",
                          g);
        if (g >= s->n_gpus && (c->flags || values))
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "TENANT_SET compute[%u] is beyond n_gpus %u: leave it 0", g, s->n_gpus);
        if (c->flags == (KAIROS_COMPUTE_SET | KAIROS_COMPUTE_CLEAR))
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "TENANT_SET compute[%u] has both SET and CLEAR", g);
        if (!(c->flags & KAIROS_COMPUTE_SET)) {
            if (values)
                return refuse(KAIROS_ERR_INVALID, why, why_len, "TENANT_SET compute[%u] has a "
                              "policy without KAIROS_COMPUTE_SET", g);
            continue;
        }
        struct sched_policy p;
        char pw[KAIROS_MSG_MAX];
        if (policy_from_ppm(c->share_ppm, c->limit_ppm, c->priority, &p, pw, sizeof pw))
            return refuse(KAIROS_ERR_INVALID, why, why_len, "compute policy on GPU %u refused: %s",
                          g, pw);
    }
    return 0;
}

/* TENANT_MEMBERS: counts within bounds, zeros beyond them, cgroup patterns
 * terminated and absolute. */
static int check_members(const struct kairos_tenant_members *m, char *why, size_t why_len)
{
    if (m->n_users > KAIROS_MEMBERS_MAX_IDS || m->n_groups > KAIROS_MEMBERS_MAX_IDS ||
        m->n_cgroups > KAIROS_MEMBERS_MAX_CGROUPS)
        return refuse(KAIROS_ERR_INVALID, why, why_len,
                      "TENANT_MEMBERS: at most %u users, %u groups and %u cgroups",
                      KAIROS_MEMBERS_MAX_IDS, KAIROS_MEMBERS_MAX_IDS, KAIROS_MEMBERS_MAX_CGROUPS);
    if (m->pad)
        return refuse(KAIROS_ERR_INVALID, why, why_len, "TENANT_MEMBERS pad must be 0");
    for (unsigned i = 0; i < KAIROS_MEMBERS_MAX_IDS; i++)
        if ((i >= m->n_users && m->users[i]) || (i >= m->n_groups && m->groups[i]))
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "TENANT_MEMBERS: entries beyond the counts must be 0");
    for (unsigned i = 0; i < KAIROS_MEMBERS_MAX_CGROUPS; i++) {
        const char *cg = m->cgroups[i];
        if (!memchr(cg, 0, KAIROS_CGROUP_MAX))
            return refuse(KAIROS_ERR_PROTOCOL, why, why_len,
                          "TENANT_MEMBERS cgroup %u is not NUL-terminated", i);
        if (i >= m->n_cgroups ? cg[0] != 0 : cg[0] != '/')
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "TENANT_MEMBERS cgroup %u: %s", i,
                          i >= m->n_cgroups ? "beyond n_cgroups: leave it empty"
                                            : "a cgroup path begins with '/'");
    }
    return 0;
}

/* INHERITED: one known flag, a count within bounds, zeros beyond it. */
static int check_shared(const struct kairos_shared *m, char *why, size_t why_len)
{
    int rc;
    if (m->h_client == 0 || m->h_object == 0)
        return refuse(KAIROS_ERR_INVALID, why, why_len, "SHARED needs h_client and h_object");
    if (m->flags & ~KAIROS_SHARED_FREED)
        return refuse(KAIROS_ERR_INVALID, why, why_len, "SHARED has unknown flags 0x%x",
                      m->flags & ~KAIROS_SHARED_FREED);
    if ((rc = check_gpu(m->gpu, why, why_len)))
        return rc;
    if ((rc = check_bytes(m->bytes, "SHARED bytes", why, why_len)))
        return rc;
    if (m->flags & KAIROS_SHARED_FREED) {
        if (m->share_type || m->share_arg)
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "SHARED FREED needs share_type and share_arg 0");
        return 0;
    }
    bool with_arg = m->share_type == KAIROS_SHARE_PID || m->share_type == KAIROS_SHARE_CLIENT;
    if (m->share_type != KAIROS_SHARE_ALL && m->share_type != KAIROS_SHARE_SECURITY_TOKEN &&
        !with_arg)
        return refuse(KAIROS_ERR_INVALID, why, why_len,
                      "SHARED share_type %u: one of ALL (1), SECURITY_TOKEN (2), CLIENT (3), "
                      "PID (4)", m->share_type);
    if (with_arg ? m->share_arg == 0 : m->share_arg != 0)
        return refuse(KAIROS_ERR_INVALID, why, why_len,
                      "SHARED share_arg: the pid or client for PID and CLIENT, 0 otherwise");
    return 0;
}

static int check_imported(const struct kairos_imported *m, char *why, size_t why_len)
{
    if (m->flags != KAIROS_IMPORT_BEGIN && m->flags != KAIROS_IMPORT_END)
        return refuse(KAIROS_ERR_INVALID, why, why_len,
                      "IMPORTED flags 0x%x: exactly one of BEGIN (0x1) and END (0x2)", m->flags);
    if (m->h_client_src == 0 || m->h_object_src == 0 || m->h_client == 0 || m->pad)
        return refuse(KAIROS_ERR_INVALID, why, why_len,
                      "IMPORTED needs h_client_src, h_object_src and h_client (not 0), pad 0");
    if (m->h_client_src == m->h_client)
        return refuse(KAIROS_ERR_INVALID, why, why_len,
                      "IMPORTED names one client as source and destination: not an import");
    return 0;
}

static int check_inherited(const struct kairos_inherited *m, char *why, size_t why_len)
{
    if (m->flags != KAIROS_INHERITED_EXEC && m->flags != KAIROS_INHERITED_RECEIVED)
        return refuse(KAIROS_ERR_INVALID, why, why_len,
                      "INHERITED flags 0x%x: exactly one of EXEC (0x1) and RECEIVED (0x2)",
                      m->flags);
    if (m->n_fds == 0 || m->n_fds > KAIROS_INHERITED_MAX_FDS)
        return refuse(KAIROS_ERR_INVALID, why, why_len, "INHERITED n_fds %u is not in [1, %u]",
                      m->n_fds, KAIROS_INHERITED_MAX_FDS);
    if (m->pad || m->from_pid == 0)
        return refuse(KAIROS_ERR_INVALID, why, why_len,
                      "INHERITED needs from_pid (not 0) and pad 0");
    for (unsigned i = 0; i < KAIROS_INHERITED_MAX_FDS; i++)
        if (i < m->n_fds ? m->fds[i] < 0 : m->fds[i] != 0)
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "INHERITED fds[%u] = %d: descriptors are >= 0, entries beyond "
                          "n_fds are 0", i, m->fds[i]);
    return 0;
}

/* CREDIT from a shim: its own flags only, byte counts bounded, least within need. */
static int check_credit(const struct kairos_credit *c, char *why, size_t why_len)
{
    const uint32_t known = KAIROS_CREDIT_AHEAD | KAIROS_CREDIT_RECALLED | KAIROS_CREDIT_REVOKED |
                           KAIROS_CREDIT_LAST | KAIROS_CREDIT_NOTICE;
    int rc;
    if ((rc = check_gpu(c->gpu, why, why_len)))
        return rc;
    if (c->flags & ~known)
        return refuse(KAIROS_ERR_INVALID, why, why_len, "CREDIT has unknown flags 0x%x (a shim "
                      "sends only AHEAD, RECALLED, REVOKED, LAST and NOTICE)", c->flags & ~known);
    if ((c->flags & KAIROS_CREDIT_LAST) && (c->need || (c->flags & KAIROS_CREDIT_AHEAD)))
        return refuse(KAIROS_ERR_INVALID, why, why_len, "CREDIT flagged LAST asks for credit "
                      "(need %llu%s): the last message of a process only reports",
                      (unsigned long long)c->need,
                      c->flags & KAIROS_CREDIT_AHEAD ? ", AHEAD" : "");
    if ((rc = check_bytes(c->held, "CREDIT held", why, why_len)) ||
        (rc = check_bytes(c->returned, "CREDIT returned", why, why_len)) ||
        (rc = check_bytes(c->need, "CREDIT need", why, why_len)))
        return rc;
    if (c->least > c->need || (c->need && !c->least))
        return refuse(KAIROS_ERR_INVALID, why, why_len,
                      "CREDIT least (%llu) must be within 1..need (%llu), or 0 with need 0",
                      (unsigned long long)c->least, (unsigned long long)c->need);
    if (c->quota)
        return refuse(KAIROS_ERR_INVALID, why, why_len, "CREDIT quota must be 0 from a shim");
    return 0;
}

static int check_body(struct proto_request *r, char *why, size_t why_len)
{
    int rc = 0;
    switch (r->type) {
    case KAIROS_MSG_HELLO: {
        const struct kairos_hello *h = &r->body.hello;
        const uint32_t known =
            KAIROS_HELLO_REATTACH | KAIROS_HELLO_PLACE | KAIROS_HELLO_FORK_TICKETS |
            KAIROS_HELLO_SPACE;
        if (h->flags & ~known)
            return refuse(KAIROS_ERR_INVALID, why, why_len, "HELLO has unknown flags 0x%x",
                          h->flags & ~known);
        if (h->flags & KAIROS_HELLO_PLACE) {
            for (unsigned i = 0; i < KAIROS_NAME_MAX; i++)
                if (h->tenant[i])
                    return refuse(KAIROS_ERR_INVALID, why, why_len,
                                  "HELLO with PLACE names no tenant (all zeros)");
        } else if ((rc = check_name(h->tenant, "tenant", why, why_len))) {
            return rc;
        }
        for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
            if ((rc = check_bytes(h->held[g], "held", why, why_len)))
                return rc;
            if (h->held[g] && !(h->flags & KAIROS_HELLO_REATTACH))
                return refuse(KAIROS_ERR_INVALID, why, why_len,
                              "HELLO without REATTACH must not claim held memory");
        }
        return 0;
    }
    case KAIROS_MSG_CHARGE:
        if ((rc = check_gpu(r->body.charge.gpu, why, why_len)))
            return rc;
        if (r->body.charge.flags & ~KAIROS_CHARGE_MANAGED)
            return refuse(KAIROS_ERR_INVALID, why, why_len, "CHARGE has unknown flags 0x%x",
                          r->body.charge.flags & ~KAIROS_CHARGE_MANAGED);
        return check_bytes(r->body.charge.bytes, "CHARGE", why, why_len);
    case KAIROS_MSG_COMMIT:
        if ((rc = check_gpu(r->body.commit.gpu, why, why_len)))
            return rc;
        if (r->body.commit.ok > 1)
            return refuse(KAIROS_ERR_INVALID, why, why_len, "COMMIT ok must be 0 or 1, not %u",
                          r->body.commit.ok);
        if ((rc = check_bytes(r->body.commit.reserved, "COMMIT reserved", why, why_len)))
            return rc;
        return check_bytes(r->body.commit.actual, "COMMIT actual", why, why_len);
    case KAIROS_MSG_CREDIT:
        return check_credit(&r->body.credit, why, why_len);
    case KAIROS_MSG_RELEASE:
        if ((rc = check_gpu(r->body.release.gpu, why, why_len)))
            return rc;
        return check_bytes(r->body.release.bytes, "RELEASE", why, why_len);
    case KAIROS_MSG_FORKED:
        if ((r->body.forked.flags & ~KAIROS_FORKED_TICKET) || r->body.forked.child_pid == 0)
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "FORKED needs child_pid (not 0) and no flag but TICKET");
        return 0;
    case KAIROS_MSG_FORK_TICKETS:
        if (r->body.fork_tickets.pad || r->body.fork_tickets.held ||
            r->body.fork_tickets.want > KAIROS_FORK_TICKETS_MAX)
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "FORK_TICKETS asks for at most %u tickets, with held and pad 0",
                          KAIROS_FORK_TICKETS_MAX);
        return 0;
    case KAIROS_MSG_INHERITED:
        return check_inherited(&r->body.inherited, why, why_len);
    case KAIROS_MSG_SHARED:
        return check_shared(&r->body.shared, why, why_len);
    case KAIROS_MSG_IMPORTED:
        return check_imported(&r->body.imported, why, why_len);
    case KAIROS_MSG_ROUTE:
        if (r->body.route.flags || r->body.route.pad)
            return refuse(KAIROS_ERR_INVALID, why, why_len, "ROUTE's flags and pad must be 0");
        return 0;
    case KAIROS_MSG_ENDING:
        if (r->body.ending.flags || r->body.ending.pad)
            return refuse(KAIROS_ERR_INVALID, why, why_len, "ENDING's flags and pad must be 0");
        return 0;
    case KAIROS_MSG_RUNNABLE: {
        const struct kairos_runnable *u = &r->body.runnable;
        if ((rc = check_gpu(u->gpu, why, why_len)))
            return rc;
        const uint32_t known = KAIROS_RUNNABLE_PARTIAL | KAIROS_RUNNABLE_WAKE |
                               KAIROS_RUNNABLE_PROGRESS | KAIROS_RUNNABLE_IDLE;
        if (u->flags & ~known)
            return refuse(KAIROS_ERR_INVALID, why, why_len, "RUNNABLE has unknown flags 0x%x",
                          u->flags & ~known);
        if ((u->flags & KAIROS_RUNNABLE_WAKE) && (u->flags & KAIROS_RUNNABLE_IDLE))
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "RUNNABLE cannot be both a wake and an idle report");
        if (u->progress_us && !(u->flags & KAIROS_RUNNABLE_PROGRESS))
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "RUNNABLE progress_us must be 0 without KAIROS_RUNNABLE_PROGRESS");
        if (u->interval_us == 0 || u->interval_us > 60000000ull)
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "RUNNABLE interval_us %llu is not in [1, 60000000]",
                          (unsigned long long)u->interval_us);
        if (u->runnable_us > u->interval_us || u->pending_samples > u->samples ||
            u->unpaused_us > u->interval_us || u->progress_us > u->runnable_us)
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "RUNNABLE counts more runnable or unpaused time or pending samples "
                          "than it measured, or more progress than runnable time");
        return 0;
    }
    case KAIROS_MSG_TENANT_SET: {
        const struct kairos_tenant_set *s = &r->body.tenant_set;
        if ((rc = check_name(s->tenant, "tenant", why, why_len)))
            return rc;
        if (s->n_gpus > KAIROS_MAX_GPUS)
            return refuse(KAIROS_ERR_INVALID, why, why_len, "TENANT_SET n_gpus %u exceeds %u",
                          s->n_gpus, KAIROS_MAX_GPUS);
        const uint32_t known = KAIROS_TENANT_EPHEMERAL | KAIROS_TENANT_MANAGED_CHARGE |
                               KAIROS_TENANT_MANAGED_REFUSE;
        if (s->flags & ~known)
            return refuse(KAIROS_ERR_INVALID, why, why_len, "TENANT_SET has unknown flags 0x%x",
                          s->flags & ~known);
        if ((s->flags & KAIROS_TENANT_MANAGED_CHARGE) && (s->flags & KAIROS_TENANT_MANAGED_REFUSE))
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "TENANT_SET asks both to charge and to refuse managed memory; "
                          "choose one");
        for (unsigned g = 0; g < s->n_gpus; g++) {
            uint64_t q = s->quota[g], ppm = q & ~KAIROS_QUOTA_PERCENT;
            if (q == KAIROS_QUOTA_KEEP)
                continue;
            if ((q & KAIROS_QUOTA_PERCENT) && (ppm == 0 || ppm > KAIROS_PPM))
                return refuse(KAIROS_ERR_INVALID, why, why_len, "TENANT_SET quota[%u]: a "
                              "percentage must be above 0%% and at most 100%%", g);
            if (!(q & KAIROS_QUOTA_PERCENT) && (rc = check_bytes(q, "quota", why, why_len)))
                return rc;
        }
        if ((rc = check_compute(s, why, why_len)))
            return rc;
        return r->body_len == sizeof *s ? check_domain(s->fault_domain, why, why_len) : 0;
    }
    case KAIROS_MSG_PS:
        if (r->body.ps.flags & ~(KAIROS_PS_HOLDS | KAIROS_PS_FAULTS))
            return refuse(KAIROS_ERR_INVALID, why, why_len, "PS has unknown flags 0x%x",
                          r->body.ps.flags & ~(KAIROS_PS_HOLDS | KAIROS_PS_FAULTS));
        if ((r->body.ps.flags & KAIROS_PS_FAULTS) && !(r->body.ps.flags & KAIROS_PS_HOLDS))
            return refuse(KAIROS_ERR_INVALID, why, why_len,
                          "PS flag KAIROS_PS_FAULTS needs KAIROS_PS_HOLDS too");
        if (r->body.ps.pad)
            return refuse(KAIROS_ERR_INVALID, why, why_len, "PS pad must be 0");
        return 0;
    case KAIROS_MSG_TENANT_DEL:
        return check_name(r->body.tenant_del.tenant, "tenant", why, why_len);
    case KAIROS_MSG_TENANT_MEMBERS:
        if ((rc = check_name(r->body.tenant_members.tenant, "tenant", why, why_len)))
            return rc;
        return check_members(&r->body.tenant_members, why, why_len);
    case KAIROS_MSG_TENANT_ADMIT:
        if ((rc = check_name(r->body.tenant_admit.tenant, "tenant", why, why_len)))
            return rc;
        if (r->body.tenant_admit.pad)
            return refuse(KAIROS_ERR_INVALID, why, why_len, "TENANT_ADMIT pad must be 0");
        return 0;
    default:
        return 0;
    }
}

int proto_check(const void *msg, size_t len, struct proto_request *out, char *why,
                size_t why_len)
{
    struct kairos_hdr h;
    memset(out, 0, sizeof *out);
    if (len < sizeof h)
        return refuse(KAIROS_ERR_PROTOCOL, why, why_len,
                      "message of %zu bytes is shorter than the %zu-byte header", len, sizeof h);
    memcpy(&h, msg, sizeof h);
    out->seq = h.seq;
    out->type = h.type;
    if (h.magic != KAIROS_PROTO_MAGIC)
        return refuse(KAIROS_ERR_PROTOCOL, why, why_len,
                      "bad magic 0x%08x (expected 0x%08x): not a kairos peer", h.magic,
                      KAIROS_PROTO_MAGIC);
    if (h.version != KAIROS_PROTO_VERSION)
        return refuse(KAIROS_ERR_VERSION, why, why_len,
                      "protocol version %u is not supported (this kairosd speaks %u); use "
                      "matching kairos and libkairos.so versions", h.version, KAIROS_PROTO_VERSION);
    const struct proto_type *t = find_type(h.type);
    if (!t)
        return refuse(KAIROS_ERR_PROTOCOL, why, why_len, "unknown message type %u", h.type);
    if (!t->request)
        return refuse(KAIROS_ERR_PROTOCOL, why, why_len, "%s is sent by the daemon, not to it",
                      t->name);
    size_t body = len - sizeof h;
    bool old = h.size == body && (body == t->old_size[0] || body == t->old_size[1]);
    if (!old && (h.size != t->size || body != t->size))
        return refuse(KAIROS_ERR_PROTOCOL, why, why_len,
                      "%s body is %zu bytes (header says %u); it must be exactly %zu", t->name,
                      body, h.size, t->size);
    memcpy(&out->body, (const char *)msg + sizeof h, body);
    out->body_len = (uint32_t)body;
    return check_body(out, why, why_len);
}

size_t proto_pack(void *buf, uint16_t type, uint32_t seq, const void *body, size_t body_len)
{
    struct kairos_hdr h = {.magic = KAIROS_PROTO_MAGIC, .version = KAIROS_PROTO_VERSION,
                           .type = type, .size = (uint32_t)body_len, .seq = seq};
    memcpy(buf, &h, sizeof h);
    if (body_len)
        memcpy((char *)buf + sizeof h, body, body_len);
    return sizeof h + body_len;
}
