/* setting_source.h - where each of a tenant's settings came from: the configuration
 * file (this folder's, config.h) or run time (TENANT_SET, TENANT_MEMBERS and the
 * state file that keeps them). Plain values, here below the record that carries them
 * (struct tenant_settings, tenants/settings_book.h) as the members rules' type is
 * (members_config.h); what they mean, the configuration's precedence over run time,
 * and the only writes of them are the registry's (tenants/registry.h).
 * Thread rules: no state.
 */
#ifndef KAIROS_DAEMON_SETTING_SOURCE_H
#define KAIROS_DAEMON_SETTING_SOURCE_H

#include <stdint.h>

#include "kairos/proto.h"

/* Where a setting's value came from. */
enum setting_source {
    SETTING_UNSET = 0,   /* never set: the default (no quota, no policy, no rules) */
    SETTING_CONFIG,      /* the configuration file; replaced at each reload */
    SETTING_RUNTIME,     /* TENANT_SET / TENANT_MEMBERS, or the state file that kept them */
};

/* One source per setting (uint8_t: enum setting_source). */
struct tenant_sources {
    uint8_t quota[KAIROS_MAX_GPUS];
    uint8_t compute[KAIROS_MAX_GPUS];
    uint8_t members;
    uint8_t managed;
    uint8_t fault_domain;
};

#endif /* KAIROS_DAEMON_SETTING_SOURCE_H */
