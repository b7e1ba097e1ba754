/* cdi_spec.h - the CDI specification (Container Device Interface) that `kairos cdi`
 * writes: kind "kairos.dev/tenant", one device per tenant, named by the tenant, with
 * the lowest cdiVersion that expresses it (0.3.0, or 0.5.0 when a device name begins
 * with a digit), so that older runtimes (Debian 12's Podman reads up to 0.5.0) take it. Requesting kairos.dev/tenant=NAME gives a container
 *   - the shim: libkairos.so mounted read-only at CDI_SHIM_IN_CONTAINER and a
 *     generated ld.so.preload naming it mounted at /etc/ld.so.preload, so every
 *     dynamically linked program of the container loads it;
 *   - kairosd's socket: its directory mounted at the same path, and a generated
 *     shim.conf naming it (core/shim_conf.h) mounted read-only at
 *     CDI_SHIM_CONF_IN_CONTAINER: the container's shims take their daemon and
 *     on_daemon_down from there, never from the container's environment;
 *   - the NVIDIA device nodes: /dev/nvidiactl, /dev/nvidia-uvm, and /dev/nvidiaN
 *     for each GPU N of the tenant (those where it has a quota or a compute policy;
 *     every GPU when it has none), taken from DEV_ROOT/dev on the host where a
 *     device root is given (a driver installed in a container, as NVIDIA's GPU
 *     Operator does under /run/nvidia/driver; or stand-ins in a test);
 *   - KAIROS_TENANT=NAME: the tenant the container's processes ask kairosd to
 *     join (kairosd decides whether they may).
 * Pure: builds the document from kairosd's PS answer; cmd_cdi.c writes files.
 *
 * Thread rules: no state.
 */
#ifndef KAIROS_CLI_CDI_SPEC_H
#define KAIROS_CLI_CDI_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli/ps_view.h"

/* The versions kairos writes: 0.3.0 is the oldest that runtimes still read; 0.5.0
 * allowed device names that begin with a digit and a device node's hostPath (written
 * only with a device root). Nothing else kairos writes (no annotations, no mount
 * types) needs a later one. */
#define CDI_VERSION_BASE "0.3.0"
#define CDI_VERSION_DIGIT_NAMES "0.5.0"
#define CDI_KIND "kairos.dev/tenant"
#define CDI_SHIM_IN_CONTAINER "/usr/lib/kairos/libkairos.so"
#define CDI_PRELOAD_IN_CONTAINER "/etc/ld.so.preload"
#define CDI_SHIM_CONF_IN_CONTAINER "/etc/kairos/shim.conf"

struct cdi_params {
    const char *shim;          /* libkairos.so on the host (absolute) */
    const char *preload_file;  /* the generated ld.so.preload on the host (absolute) */
    const char *socket;        /* kairosd's socket (absolute); its directory is mounted */
    const char *shim_conf;     /* the generated shim.conf on the host (absolute) */
    const char *dev_root;      /* where the host's /dev/nvidia* are, under DEV_ROOT/dev
                                * (absolute); NULL: at /dev itself */
};

/* A CDI device name: 1..63 of [A-Za-z0-9._-], beginning and ending with a letter or
 * digit (stricter than a tenant name, which may end with '.', '-' or '_'). */
bool cdi_name_valid(const char *name);

/* The lowest cdiVersion for a specification with these devices (a JSON array of
 * objects with a "name"), whose device nodes have a hostPath or not. */
const char *cdi_version_for(json_t *devices, bool host_paths);

/* The specification for the tenants of s whose names are in only[0..n_only) (all
 * when n_only is 0). NULL with err set when a tenant of only is unknown to kairosd
 * or not a valid CDI name, or when no tenant is left; tenants of s with names CDI
 * refuses are left out when not named, each reported through skipped (may be NULL). */
json_t *cdi_spec_build(const struct cdi_params *p, const struct ps_snapshot *s,
                       const char *const *only, size_t n_only,
                       void (*skipped)(const char *tenant), char *err, size_t err_len);

#endif /* KAIROS_CLI_CDI_SPEC_H */
