/* members_config.h - a tenant's members rules (struct member_rules), as kairosd.conf
 * writes them:
 *
 *   members: { users: [alice, 1001], groups: [ml], cgroups: [/slurm/job_*] }
 *
 * User and group names are resolved to ids when the configuration is read. The same
 * rules come from TENANT_MEMBERS for tenants made at run time; tenants/members.h
 * decides with them who may join.
 * Thread rules: no state.
 */
#ifndef KAIROS_DAEMON_MEMBERS_CONFIG_H
#define KAIROS_DAEMON_MEMBERS_CONFIG_H

#include <stdint.h>

#include "daemon/base/yaml_doc.h"
#include "kairos/proto.h"

struct member_rules {
    uint32_t n_users, n_groups, n_cgroups;
    uint32_t users[KAIROS_MEMBERS_MAX_IDS];
    uint32_t groups[KAIROS_MEMBERS_MAX_IDS];
    char cgroups[KAIROS_MEMBERS_MAX_CGROUPS][KAIROS_CGROUP_MAX];
};

/* 0, or -EINVAL with "file:line:column: ..." through p. */
int members_config_parse(struct ydoc *p, const yaml_node_t *n, struct member_rules *r);

#endif /* KAIROS_DAEMON_MEMBERS_CONFIG_H */
