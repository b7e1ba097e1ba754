/* members.h - who may join a tenant: kairosd's decision, never the process's.
 *
 * A process's HELLO names the tenant it asks for; kairosd lets it in only when
 *   - its uid (SO_PEERCRED) is an administrator's (root or admins:), or
 *   - the tenant's members rules allow it: its uid is in users, its gid or one of
 *     its supplementary groups (/proc/<pid>/status) is in groups, or its cgroup
 *     (/proc/<pid>/cgroup, the v2 path) or an ancestor cgroup matches a pattern
 *     of cgroups (fnmatch, '*' within one path component), or
 *   - it or one of its ancestors (the parent chain of /proc/<pid>/stat) was
 *     admitted to that tenant (TENANT_ADMIT, e.g. by kairos run or a cluster
 *     integration) and is still the same process (pid and start time).
 * Two things bind a process to a tenant whatever tenant it names: an admission
 * (the nearest admitted ancestor's tenant), else a cgroups rule its cgroup matches
 * (members_cgroup_rank).
 * The rules live with the tenant (struct member_rules in its record, written by the
 * registry with their source: registry.h): from the configuration (members:
 * {users, groups, cgroups}) for configured tenants, from TENANT_MEMBERS (persisted
 * in the state file) for those made at run time.
 * Why the parent chain rather than cgroups for admissions: see docs/security.md.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_MEMBERS_H
#define KAIROS_DAEMON_MEMBERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/config/members_config.h" /* struct member_rules */
#include "kairos/proto.h"

#define MEMBERS_MAX_ADMISSIONS 4096
#define MEMBERS_MAX_ADMISSIONS_PER_USER 256 /* live admissions one non-administrator asks */
#define MEMBERS_MAX_DEPTH 64         /* ancestors looked at above a process */
#define MEMBERS_MAX_GROUPS 64        /* supplementary groups looked at */
#define MEMBERS_CGROUP_PATH_MAX 512

/* What kairosd knows of a peer: SO_PEERCRED, then /proc. */
struct member_peer {
    uint32_t pid, uid, gid;
    uint32_t groups[MEMBERS_MAX_GROUPS];
    unsigned n_groups;
    char cgroup[MEMBERS_CGROUP_PATH_MAX]; /* "" when unknown */
};

struct admission {
    char tenant[KAIROS_NAME_MAX];
    uint32_t pid;
    uint64_t start;                  /* /proc/<pid>/stat starttime */
    uint32_t by_uid;                 /* who asked for it */
};

struct admissions {
    struct admission *list;
    size_t n, cap;
    const char *proc;                /* "/proc"; tests point it elsewhere */
};

void admissions_init(struct admissions *a, const char *proc_root);
void admissions_fini(struct admissions *a);

/* Admits pid to tenant, asked by by_uid. 0, -ESRCH (no such process), -ENOSPC
 * (full of live admissions), -ENOMEM. */
int admissions_add(struct admissions *a, const char *tenant, uint32_t pid, uint32_t by_uid);
/* The live admissions by_uid asked for (the dead ones are dropped first). */
size_t admissions_count_by(struct admissions *a, uint32_t by_uid);
/* An admission read back after a restart: kept only when pid is alive and started
 * at start (the same process). 0, -ESRCH, -ENOSPC, -ENOMEM. */
int admissions_restore(struct admissions *a, const char *tenant, uint32_t pid, uint64_t start,
                       uint32_t by_uid);
/* Forgets the admissions to tenant (it was removed). */
void admissions_forget_tenant(struct admissions *a, const char *tenant);
/* The admitted process, pid or an ancestor of it, through which pid belongs to
 * tenant; 0 when none. */
uint32_t admissions_find(const struct admissions *a, const char *tenant, uint32_t pid);
/* The tenant pid belongs to by admission: that of the nearest admitted process
 * among pid and its ancestors, copied into tenant (KAIROS_NAME_MAX); 0 when none,
 * else the admitted pid. An admission binds: a process admitted to a tenant (a
 * Slurm step's task, kairos run's command) is a member of that tenant whatever
 * tenant it asks for. */
uint32_t admissions_tenant_of(const struct admissions *a, uint32_t pid, char *tenant);

/* The peer's groups and cgroup from <proc>/<pid>; what cannot be read stays empty
 * (a rule on it then does not match: fail closed). */
void members_peer_read(struct member_peer *p, const char *proc_root);

/* Which rule lets p in ("users", "groups", "cgroups"), or NULL. */
const char *members_rules_allow(const struct member_rules *r, const struct member_peer *p);

/* "users: [1000], groups: [], cgroups: [/slurm/job_*]" for messages (cut to cap). */
void members_rules_describe(const struct member_rules *r, char *out, size_t cap);

/* Rules from the wire (checked by proto_check) and back. */
void members_rules_from_wire(struct member_rules *r, const struct kairos_tenant_members *m);
bool members_rules_empty(const struct member_rules *r);

/* The decision for a peer asking to join tenant (rules r): why it may ("an
 * administrator", "its uid is in members users", ..., "admitted (pid N)"), or NULL
 * with the refusal in why: what was checked and the rule to change. p is filled
 * from /proc first (admin: whether the peer's uid is an administrator's; config:
 * where the configuration's rules are, for the message). */
const char *members_may_join(const struct admissions *a, const struct member_rules *r,
                             const char *tenant, bool configured, bool admin,
                             struct member_peer *p, const char *config, char *why,
                             size_t why_len);

/* The length of the longest of r's cgroup patterns that cgroup (or an ancestor)
 * matches; 0 when none. A process in a cgroup that a tenant's rules name (a
 * container's, a job's) belongs to that tenant, the most specific pattern winning,
 * whatever it asks for and whoever it runs as (root in a container too). */
size_t members_cgroup_rank(const struct member_rules *r, const char *cgroup);

/* The cgroup v2 path of <proc>/<pid> (proc_root NULL: /proc) into out ("" when it
 * cannot be read or does not fit). */
void members_read_cgroup(uint32_t pid, const char *proc_root, char *out, size_t cap);
/* kairosd's own cgroup (read once; "" when unknown). */
const char *members_self_cgroup(void);
/* Whether a root or admins: peer in cgroup ("" unknown) stays an administrator under
 * unprivileged_cgroups patterns (n of them): yes when its cgroup matches none of them
 * or is self (kairosd's own cgroup, e.g. kubectl exec into kairosd's container) or
 * below it; an unknown cgroup is not trusted. */
bool members_admin_cgroup(const char (*unprivileged)[KAIROS_CGROUP_MAX], size_t n,
                          const char *cgroup, const char *self);

struct config;
/* Whether a peer of this uid in this cgroup (its v2 path, "" when unknown) is an
 * administrator by c: root or one of admins:, unless unprivileged_cgroups holds its
 * cgroup (an unknown cgroup counts as held when the list is not empty). */
bool members_is_admin(const struct config *c, uint32_t uid, const char *cgroup);

/* One cgroup pattern against a cgroup path and its ancestors. */
bool members_cgroup_match(const char *pattern, const char *cgroup);

#endif /* KAIROS_DAEMON_MEMBERS_H */
