/* space_config.h - the space block of kairosd.conf (docs/space.md):
 *
 *   space:
 *     mps_control: /usr/bin/nvidia-cuda-mps-control   # default: found on kairosd's PATH
 *     domains:
 *       inference-a: { shared_uids: true }            # one multi-user server (-M)
 *     client_check_ms: 5000   # how often the servers' clients are checked (mps_clients.h)
 *     strangers: end          # a client no member of the domain: its MPS client ended
 *                             # (default), or report: only logged
 *     fault_recovery_ms: 10000 # after a fault in a domain, the clients it left without
 *                             # their work that have not exited: their MPS clients
 *                             # ended (0: never; fault_recovery.h)
 *
 * A tenant joins a fault domain with fault_domain: NAME (config.c); a domain no
 * tenant names is allowed (it is started for nobody), and one that is named but not
 * declared here takes the defaults (one MPS server per uid).
 *
 * Thread rules: no state.
 */
#ifndef KAIROS_DAEMON_SPACE_CONFIG_H
#define KAIROS_DAEMON_SPACE_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "daemon/base/yaml_doc.h"
#include "kairos/proto.h"

#define SPACE_DEFAULT_MPS_CONTROL "nvidia-cuda-mps-control"
#define SPACE_MAX_DOMAINS 64
#define SPACE_DEFAULT_CLIENT_CHECK_MS 5000
#define SPACE_MIN_CLIENT_CHECK_MS 100
#define SPACE_DEFAULT_FAULT_RECOVERY_MS 10000

struct space_domain_config {
    char name[KAIROS_NAME_MAX];
    bool shared_uids; /* its uids share one multi-user server (and its fate) */
};

struct space_config {
    char mps_control[PATH_MAX]; /* absolute, or a name looked up on kairosd's PATH */
    struct space_domain_config domains[SPACE_MAX_DOMAINS];
    size_t n_domains;
    unsigned client_check_ms; /* 0: never */
    bool end_strangers;       /* strangers: end (else report) */
    unsigned fault_recovery_ms; /* 0: never */
};

void space_config_defaults(struct space_config *s);
/* 0, or -EINVAL with "file:line:column: ..." through p. */
int space_config_parse(struct ydoc *p, const yaml_node_t *n, struct space_config *s);
/* The declared domain of that name, or NULL (the defaults apply). */
const struct space_domain_config *space_config_domain(const struct space_config *s,
                                                      const char *name);

#endif /* KAIROS_DAEMON_SPACE_CONFIG_H */
