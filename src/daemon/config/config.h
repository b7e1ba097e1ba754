/* config.h - kairosd.conf: the node's tenants and quotas, admins, socket, audit.
 *
 * YAML (libyaml), documented in man/kairosd.conf.5 with a sample in etc/kairosd.yaml.
 * Parsing checks the shape and every value it can check alone; quotas given in
 * percent or against a GPU UUID are kept as text with their position and resolved
 * by tenants.c once the GPUs are known. Every error names file:line:column and
 * says what was expected.
 *
 * Thread rules: no shared state.
 */
#ifndef KAIROS_DAEMON_CONFIG_H
#define KAIROS_DAEMON_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/config/members_config.h"
#include "daemon/config/metrics_addr.h"
#include "daemon/config/space_config.h"
#include "core/policy.h"
#include "kairos/proto.h"

struct yaml_document_s;
struct yaml_node_s;

#define CONFIG_DEFAULT_STATE "/var/lib/kairos/state.json"
#define CONFIG_DEFAULT_KERNEL_LOG "/dev/kmsg" /* the driver's Xid reports (space/faults.h) */
#define CONFIG_SOCKET_MAX 108 /* sun_path */
#define CONFIG_MAX_UNPRIVILEGED_CGROUPS 8

struct config_quota {
    int index;                   /* GPU index, or -1 when given by uuid */
    char uuid[KAIROS_UUID_MAX];
    char value[32];              /* "40G", "50%", "4096" */
    unsigned line, column;
};

/* compute: { GPU: { share: 40%, limit: 60%, priority: latency } } */
struct config_compute {
    unsigned gpu;
    struct sched_policy pol;
    unsigned line, column;
};

struct config_tenant {
    char name[KAIROS_NAME_MAX];
    struct config_quota *quotas;
    size_t n_quotas;
    struct config_compute *compute;
    size_t n_compute;
    struct member_rules members;   /* members: {users, groups, cgroups} */
    bool managed_charge;           /* managed: charge (else refuse, the default) */
    char fault_domain[KAIROS_NAME_MAX]; /* fault_domain: NAME (space mode); "" none */
    unsigned sms_pct;              /* sms: P% (space mode: its MPS clients' active thread
                                    * percentage, 1-100); 0: not set, all SMs */
    unsigned line, column;
};

/* audit: { exempt: [...] }: processes the audit never kills (it still reports
 * them). A command name (/proc/PID/comm), a uid, or both must match. */
struct config_exempt {
    char command[16];            /* "": any; else its first 15 characters, as comm */
    bool any_uid;
    uid_t uid;
};

struct config {
    char path[PATH_MAX];
    char socket[CONFIG_SOCKET_MAX];
    char state[PATH_MAX];
    uid_t *admins;
    size_t n_admins;
    /* unprivileged_cgroups: processes whose cgroup (or an ancestor) matches one of these
     * patterns are never administrators, root included (pods, containers), except in
     * kairosd's own cgroup (members_admin_cgroup) */
    char unprivileged_cgroups[CONFIG_MAX_UNPRIVILEGED_CGROUPS][KAIROS_CGROUP_MAX];
    size_t n_unprivileged_cgroups;
    unsigned audit_interval_ms;  /* 0: no audit */
    bool audit_kill;             /* action: kill (else report) */
    struct config_exempt *audit_exempt; /* NULL: the built-in list (audit.h) */
    size_t n_audit_exempt;
    bool audit_exempt_given;
    uint64_t audit_overhead;     /* memory.used the driver may hold beyond processes */
    uint64_t audit_process_overhead; /* per process of a tenant, beyond its quota */
    uint64_t audit_mps_server_max; /* an MPS server's own memory beyond this is reported */
    unsigned audit_leave_grace_ms; /* a member that just left is not an intruder */
    unsigned gpus;               /* used only without a GPU backend */
    unsigned max_connections;
    unsigned max_connections_per_user; /* administrators are not limited per uid */
    unsigned admin_reserve;      /* of max_connections, taken by administrators only (the
                                  * default is cut to max_connections - 1 when above) */
    unsigned register_timeout_ms; /* idle connections that did not register are closed */
    unsigned usage_save_interval_ms; /* the chargeback counters saved (and shown) this often */
    enum sched_mode time_mode;   /* how shares are enforced (policy.h) */
    unsigned latency_yield_us;   /* the others' slice beside a latency tenant (sched_set_yield) */
    struct metrics_addr metrics; /* the Prometheus endpoint; off unless given */
    struct space_config space;   /* space: { mps_control, domains } (space_config.h) */
    char kernel_log[PATH_MAX];   /* where the driver's Xid reports are read; "": not read */
    struct config_tenant *tenants;
    size_t n_tenants;
    bool tenants_given;          /* the file has a tenants: list (maybe tenants: []) */
    bool empty;                  /* the file holds no setting at all */
};

/* Defaults: the default socket and state paths, audit every 1000 ms reporting
 * (overhead 1 GiB, leave grace 2000 ms, the built-in exemptions), 0 GPUs, 4096
 * connections of which 16 for administrators and 512 per user, 5000 ms to register,
 * time_mode auto, latency_yield_us SCHED_YIELD_US, no metrics endpoint, no admins but
 * root, no tenants, space's defaults (space_config.h), kernel_log /dev/kmsg. */
void config_defaults(struct config *c);

/* Parses YAML text; name is used in messages. Returns 0, or -EINVAL with
 * "name:line:column: what was expected" in err (-ENOMEM). c is left empty on error. */
int config_parse(const char *name, const char *text, size_t len, struct config *c, char *err,
                 size_t err_len);
/* Reads and parses a file (errors as above; -errno when it cannot be read). */
int config_load(const char *path, struct config *c, char *err, size_t err_len);
void config_free(struct config *c);

/* Parses one compute policy mapping { share: N%, limit: N% | none,
 * priority: latency | normal | batch } (shared with the simulator's scenarios).
 * 0 or -EINVAL with "name:line:column: ..." in err. */
int config_parse_policy(const char *name, struct yaml_document_s *doc, struct yaml_node_s *node,
                        struct sched_policy *out, char *err, size_t err_len);

struct policy_shares;
/* Adds the configuration's compute shares to out (policy.h), for the check that
 * those of one GPU add up to at most 100 %. 0 or -ENOMEM. */
int config_shares(const struct config *c, struct policy_shares *out);

/* Whether next may replace cur at a reload (SIGHUP): a configuration that declares
 * no tenants while cur declares some is refused, as a file emptied or cut by
 * mistake, unless it says so with an explicit 'tenants: []'. 0, or -EINVAL with
 * err saying what was found and what to write. */
int config_reload_check(const struct config *cur, const struct config *next, char *err,
                        size_t err_len);

#endif /* KAIROS_DAEMON_CONFIG_H */
