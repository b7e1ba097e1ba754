/* members.c - the membership decision: rules, admissions and what /proc says of a
 * peer (see members.h). */
#include "daemon/tenants/members.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "daemon/base/proc_stat.h"
#include "daemon/config/config.h"

void admissions_init(struct admissions *a, const char *proc_root)
{
    memset(a, 0, sizeof *a);
    a->proc = proc_root ? proc_root : "/proc";
}

void admissions_fini(struct admissions *a)
{
    free(a->list);
    memset(a, 0, sizeof *a);
}

static bool alive(const char *proc, const struct admission *ad)
{
    return proc_stat_alive(proc, ad->pid, ad->start);
}

/* Drops admissions whose process is gone (its pid free or someone else's). */
static void prune(struct admissions *a)
{
    size_t w = 0;
    for (size_t i = 0; i < a->n; i++)
        if (alive(a->proc, &a->list[i]))
            a->list[w++] = a->list[i];
    a->n = w;
}

int admissions_add(struct admissions *a, const char *tenant, uint32_t pid, uint32_t by_uid)
{
    uint32_t ppid;
    uint64_t start;
    if (!pid || proc_stat_read(a->proc, pid, &ppid, &start))
        return -ESRCH;
    return admissions_restore(a, tenant, pid, start, by_uid);
}

size_t admissions_count_by(struct admissions *a, uint32_t by_uid)
{
    prune(a);
    size_t n = 0;
    for (size_t i = 0; i < a->n; i++)
        n += a->list[i].by_uid == by_uid;
    return n;
}

int admissions_restore(struct admissions *a, const char *tenant, uint32_t pid, uint64_t start,
                       uint32_t by_uid)
{
    struct admission probe = {.pid = pid, .start = start};
    if (!pid || !alive(a->proc, &probe))
        return -ESRCH;
    for (size_t i = 0; i < a->n; i++)
        if (a->list[i].pid == pid && a->list[i].start == start &&
            !strcmp(a->list[i].tenant, tenant))
            return 0;
    if (a->n == a->cap)
        prune(a);
    if (a->n == a->cap && a->cap >= MEMBERS_MAX_ADMISSIONS)
        return -ENOSPC;
    struct admission *l = grow_for_one(a->list, &a->cap, a->n, sizeof *l, 16);
    if (!l)
        return -ENOMEM;
    a->list = l;
    struct admission *ad = &a->list[a->n++];
    memset(ad, 0, sizeof *ad);
    snprintf(ad->tenant, sizeof ad->tenant, "%s", tenant);
    ad->pid = pid;
    ad->start = start;
    ad->by_uid = by_uid;
    return 0;
}

void admissions_forget_tenant(struct admissions *a, const char *tenant)
{
    size_t w = 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->list[i].tenant, tenant))
            a->list[w++] = a->list[i];
    a->n = w;
}

/* The admission of (pid, start), to tenant (any when NULL), or NULL. */
static const struct admission *admitted(const struct admissions *a, const char *tenant,
                                        uint32_t pid, uint64_t start)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->list[i].pid == pid && a->list[i].start == start &&
            (!tenant || !strcmp(a->list[i].tenant, tenant)))
            return &a->list[i];
    return NULL;
}

/* The nearest admission (to tenant, or any) of pid and its ancestors, or NULL. */
static const struct admission *walk(const struct admissions *a, const char *tenant,
                                    uint32_t pid)
{
    if (!a->n)
        return NULL;
    for (int depth = 0; pid > 1 && depth < MEMBERS_MAX_DEPTH; depth++) {
        uint32_t ppid;
        uint64_t start;
        if (proc_stat_read(a->proc, pid, &ppid, &start))
            return NULL;
        const struct admission *ad = admitted(a, tenant, pid, start);
        if (ad)
            return ad;
        pid = ppid;
    }
    return NULL;
}

uint32_t admissions_find(const struct admissions *a, const char *tenant, uint32_t pid)
{
    const struct admission *ad = walk(a, tenant, pid);
    return ad ? ad->pid : 0;
}

uint32_t admissions_tenant_of(const struct admissions *a, uint32_t pid, char *tenant)
{
    const struct admission *ad = walk(a, NULL, pid);
    if (!ad)
        return 0;
    memcpy(tenant, ad->tenant, KAIROS_NAME_MAX);
    return ad->pid;
}

/* "Groups:\t1 2 3" of <proc>/<pid>/status into p. */
static void read_groups(struct member_peer *p, const char *proc)
{
    char path[64], line[4096];
    snprintf(path, sizeof path, "%s/%u/status", proc, p->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Groups:", 7))
            continue;
        char *s = line + 7, *end;
        for (;;) {
            unsigned long g = strtoul(s, &end, 10);
            if (end == s || p->n_groups >= MEMBERS_MAX_GROUPS)
                break;
            p->groups[p->n_groups++] = (uint32_t)g;
            s = end;
        }
        break;
    }
    fclose(f);
}

/* The cgroup v2 path ("0::/path") of <proc>/<pid>/cgroup into out. */
static void read_cgroup_of(const char *file, char *out, size_t cap)
{
    char line[MEMBERS_CGROUP_PATH_MAX + 16];
    out[0] = 0;
    FILE *f = fopen(file, "re");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::/", 4))
            continue;
        line[strcspn(line, "\n")] = 0;
        size_t n = strlen(line + 3);
        if (n >= cap)
            break; /* too long to match anything: unknown */
        memcpy(out, line + 3, n + 1);
        break;
    }
    fclose(f);
}

void members_read_cgroup(uint32_t pid, const char *proc_root, char *out, size_t cap)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%u/cgroup", proc_root ? proc_root : "/proc", pid);
    read_cgroup_of(path, out, cap);
}

const char *members_self_cgroup(void)
{
    static char self[MEMBERS_CGROUP_PATH_MAX];
    static bool read;
    if (!read) /* the loop thread only; kairosd does not move */
        read_cgroup_of("/proc/self/cgroup", self, sizeof self);
    read = true;
    return self;
}

/* Whether cgroup is base or below it. */
static bool under(const char *cgroup, const char *base)
{
    size_t n = strlen(base);
    if (!n || strncmp(cgroup, base, n))
        return false;
    return cgroup[n] == 0 || cgroup[n] == '/';
}

static bool matches_any(const char (*patterns)[KAIROS_CGROUP_MAX], size_t n, const char *cgroup)
{
    for (size_t i = 0; i < n; i++)
        if (members_cgroup_match(patterns[i], cgroup))
            return true;
    return false;
}

bool members_admin_cgroup(const char (*unprivileged)[KAIROS_CGROUP_MAX], size_t n,
                          const char *cgroup, const char *self)
{
    if (!n)
        return true;
    if (!cgroup[0])
        return false; /* unknown: not trusted */
    if (!matches_any(unprivileged, n, cgroup))
        return true;
    /* kairosd in a pod itself: its own container (kubectl exec) administers it */
    return self && self[0] && matches_any(unprivileged, n, self) && under(cgroup, self);
}

void members_peer_read(struct member_peer *p, const char *proc_root)
{
    const char *proc = proc_root ? proc_root : "/proc";
    p->n_groups = 0;
    p->cgroup[0] = 0;
    read_groups(p, proc);
    members_read_cgroup(p->pid, proc, p->cgroup, sizeof p->cgroup);
}

bool members_cgroup_match(const char *pattern, const char *cgroup)
{
    if (!cgroup[0] || pattern[0] != '/')
        return false;
    char path[MEMBERS_CGROUP_PATH_MAX];
    snprintf(path, sizeof path, "%s", cgroup);
    for (;;) {
        if (fnmatch(pattern, path, FNM_PATHNAME) == 0)
            return true;
        char *slash = strrchr(path, '/');
        if (!slash || slash == path)
            return false;
        *slash = 0; /* the parent cgroup */
    }
}

size_t members_cgroup_rank(const struct member_rules *r, const char *cgroup)
{
    size_t best = 0;
    for (uint32_t i = 0; i < r->n_cgroups; i++) {
        size_t len = strlen(r->cgroups[i]);
        if (len > best && members_cgroup_match(r->cgroups[i], cgroup))
            best = len;
    }
    return best;
}

static bool has_id(const uint32_t *ids, uint32_t n, uint32_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

const char *members_rules_allow(const struct member_rules *r, const struct member_peer *p)
{
    if (has_id(r->users, r->n_users, p->uid))
        return "users";
    if (has_id(r->groups, r->n_groups, p->gid))
        return "groups";
    for (unsigned i = 0; i < p->n_groups; i++)
        if (has_id(r->groups, r->n_groups, p->groups[i]))
            return "groups";
    for (uint32_t i = 0; i < r->n_cgroups; i++)
        if (members_cgroup_match(r->cgroups[i], p->cgroup))
            return "cgroups";
    return NULL;
}

static size_t add_ids(char *out, size_t cap, size_t len, const char *name, const uint32_t *ids,
                      uint32_t n)
{
    if (len >= cap)
        return len;
    int k = snprintf(out + len, cap - len, "%s%s: [", len ? ", " : "", name);
    len += k > 0 ? (size_t)k : 0;
    for (uint32_t i = 0; i < n && len < cap; i++) {
        k = snprintf(out + len, cap - len, "%s%u", i ? ", " : "", ids[i]);
        len += k > 0 ? (size_t)k : 0;
    }
    if (len < cap) {
        k = snprintf(out + len, cap - len, "]");
        len += k > 0 ? (size_t)k : 0;
    }
    return len;
}

void members_rules_describe(const struct member_rules *r, char *out, size_t cap)
{
    if (!cap)
        return;
    out[0] = 0;
    size_t len = add_ids(out, cap, 0, "users", r->users, r->n_users);
    len = add_ids(out, cap, len, "groups", r->groups, r->n_groups);
    if (len >= cap)
        return;
    int k = snprintf(out + len, cap - len, ", cgroups: [");
    len += k > 0 ? (size_t)k : 0;
    for (uint32_t i = 0; i < r->n_cgroups && len < cap; i++) {
        k = snprintf(out + len, cap - len, "%s%s", i ? ", " : "", r->cgroups[i]);
        len += k > 0 ? (size_t)k : 0;
    }
    if (len < cap)
        snprintf(out + len, cap - len, "]");
}

void members_rules_from_wire(struct member_rules *r, const struct kairos_tenant_members *m)
{
    memset(r, 0, sizeof *r);
    r->n_users = m->n_users;
    r->n_groups = m->n_groups;
    r->n_cgroups = m->n_cgroups;
    memcpy(r->users, m->users, sizeof r->users);
    memcpy(r->groups, m->groups, sizeof r->groups);
    for (unsigned i = 0; i < KAIROS_MEMBERS_MAX_CGROUPS; i++)
        snprintf(r->cgroups[i], sizeof r->cgroups[i], "%s", i < m->n_cgroups ? m->cgroups[i] : "");
}

const char *members_may_join(const struct admissions *a, const struct member_rules *r,
                             const char *tenant, bool configured, bool admin,
                             struct member_peer *p, const char *config, char *why,
                             size_t why_len)
{
    if (admin)
        return "an administrator";
    members_peer_read(p, a->proc);
    const char *rule = members_rules_allow(r, p);
    if (rule)
        return !strcmp(rule, "users")    ? "its uid is in the tenant's members users"
               : !strcmp(rule, "groups") ? "one of its groups is in the tenant's members groups"
                                         : "its cgroup matches the tenant's members cgroups";
    static char by[64];
    uint32_t via = admissions_find(a, tenant, p->pid);
    if (via) {
        snprintf(by, sizeof by, "admitted (pid %u)", via);
        return by;
    }
    if (configured)
        snprintf(why, why_len,
                 "tenant '%s' does not admit uid %u (gid %u, cgroup %.60s): an administrator "
                 "adds it to the tenant's members (users, groups or cgroups) in %.60s, or runs "
                 "the command with kairos run --tenant %s",
                 tenant, p->uid, p->gid, p->cgroup[0] ? p->cgroup : "unknown", config, tenant);
    else
        snprintf(why, why_len,
                 "tenant '%s' does not admit uid %u (gid %u, cgroup %.60s): an administrator "
                 "adds it to the tenant's members (kairos tenant members %s), or runs the "
                 "command with kairos run --tenant %s",
                 tenant, p->uid, p->gid, p->cgroup[0] ? p->cgroup : "unknown", tenant, tenant);
    return NULL;
}

bool members_rules_empty(const struct member_rules *r)
{
    return !r->n_users && !r->n_groups && !r->n_cgroups;
}

bool members_is_admin(const struct config *c, uint32_t uid, const char *cgroup)
{
    bool listed = uid == 0;
    for (size_t i = 0; !listed && i < c->n_admins; i++)
        listed = c->admins[i] == uid;
    if (!listed || !c->n_unprivileged_cgroups)
        return listed;
    return members_admin_cgroup(c->unprivileged_cgroups, c->n_unprivileged_cgroups, cgroup,
                                members_self_cgroup());
}
