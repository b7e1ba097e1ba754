/* settings.h - what the shim is asked to do, read once at load.
 *
 * From the node (core/shim_conf.h: /etc/kairos/shim.conf, or a trusted
 * KAIROS_SHIM_CONF): kairosd's socket, on_daemon_down (closed|open) and register
 * (asked|always: with always, a process naming no tenant registers too, and
 * kairosd places it). The tenant's environment cannot change them.
 *
 * From the environment, the process's own requests:
 *   KAIROS_TENANT=NAME       ask kairosd to register this process in tenant NAME
 *                            (kairosd decides whether it may)
 *   KAIROS_MEM=SIZE          a quota per GPU this process puts on itself (8G,
 *                            512MiB): alone when no tenant is named, or as the
 *                            fallback quota when the daemon is down and the node
 *                            says on_daemon_down: open. A size that cannot be
 *                            read (8GB: decimal or binary?) refuses GPU use.
 *   KAIROS_LOG=stderr        the shim's own messages on stderr (silent otherwise,
 *                            except the one line explaining a refusal)
 *   KAIROS_MANAGED=charge    standalone only (with KAIROS_MEM): allow managed
 *                            memory (cudaMallocManaged), each range charged in full
 *                            against KAIROS_MEM; refuse (the default) refuses it.
 *                            Ignored for a tenant: kairosd's setting for the tenant
 *                            decides (managed: in kairosd.conf(5)), never the
 *                            tenant's environment.
 *
 * Thread rules: settings_get() returns a structure filled once, before any other
 * thread can exist (library constructor); read-only afterwards.
 */
#ifndef KAIROS_SHIM_SETTINGS_H
#define KAIROS_SHIM_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/shim_conf.h"
#include "kairos/proto.h"

enum settings_mode {
    SETTINGS_OFF = 0,     /* no quota: the shim only observes */
    SETTINGS_STANDALONE,  /* KAIROS_MEM, no daemon */
    SETTINGS_TENANT,      /* KAIROS_TENANT, or register: always: quotas from kairosd */
    SETTINGS_REFUSED,     /* a request that cannot be read: no GPU use (refusal says why) */
};

struct settings {
    enum settings_mode mode;
    char tenant[KAIROS_NAME_MAX]; /* "" with register: always: kairosd places it */
    char socket_path[108];
    uint64_t standalone_quota;   /* bytes per GPU; 0 when KAIROS_MEM is unset */
    bool managed_charge;         /* standalone: KAIROS_MANAGED=charge */
    bool fail_open;
    bool driver_passthrough;     /* unsupported_driver: passthrough (driver_check.h) */
    bool log_stderr;
    char conf_source[300];       /* where socket_path and fail_open came from */
    char conf_problem[400];      /* the node's settings are unusable: fail closed */
    char problem[400];           /* a setting that could not be used, said once */
    char refusal[400];           /* SETTINGS_REFUSED: why GPU use is refused */
};

/* Reads the node's file and the environment (settings_parse) and keeps the result. */
void settings_load(void);
const struct settings *settings_get(void);

/* For tests: the requests from explicit values, the node's settings from conf. */
void settings_parse(struct settings *s, const char *tenant, const char *mem, const char *log,
                    const char *managed, const struct shim_conf *conf);

#endif /* KAIROS_SHIM_SETTINGS_H */
