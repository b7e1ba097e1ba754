/* members_config.h - a tenant's members rules as kairosd.conf writes them:
 *
 *   members: { users: [alice, 1001], groups: [ml], cgroups: [/slurm/job_*] }
 *
 * User and group names are resolved to ids when the configuration is read.
 * Thread rules: no state.
 */
#ifndef KAIROS_DAEMON_MEMBERS_CONFIG_H
#define KAIROS_DAEMON_MEMBERS_CONFIG_H

#include "daemon/tenants/members.h"
#include "daemon/base/yaml_doc.h"

/* 0, or -EINVAL with "file:line:column: ..." through p. */
int members_config_parse(struct ydoc *p, const yaml_node_t *n, struct member_rules *r);

#endif /* KAIROS_DAEMON_MEMBERS_CONFIG_H */
