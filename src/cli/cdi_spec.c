/* cdi_spec.c - building kairos's CDI specification (see cdi_spec.h). */
#include "cli/cdi_spec.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

bool cdi_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 63 || !isalnum((unsigned char)name[0]) ||
        !isalnum((unsigned char)name[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
            return false;
    return true;
}

const char *cdi_version_for(json_t *devices, bool host_paths)
{
    if (host_paths)
        return CDI_VERSION_DIGIT_NAMES; /* the same version brought both */
    size_t i;
    json_t *d;
    json_array_foreach(devices, i, d) {
        const char *name = json_string_value(json_object_get(d, "name"));
        if (name && !isalpha((unsigned char)name[0]))
            return CDI_VERSION_DIGIT_NAMES;
    }
    return CDI_VERSION_BASE;
}

static json_t *bind_mount(const char *host, const char *in_container, const char *mode)
{
    return json_pack("{s:s, s:s, s:[s, s, s, s]}", "hostPath", host, "containerPath",
                     in_container, "options", mode, "nosuid", "nodev", "bind");
}

/* A device node at path in the container; on the host at the same path, or under the
 * device root. */
static json_t *node(const struct cdi_params *p, const char *path)
{
    if (!p->dev_root)
        return json_pack("{s:s}", "path", path);
    char host[4096 + 32];
    snprintf(host, sizeof host, "%s%s", p->dev_root, path);
    return json_pack("{s:s, s:s}", "path", path, "hostPath", host);
}

/* The edits every kairos device brings: shim, preload file, shim settings, socket,
 * control nodes. No environment: the shim's settings are the node's. Everything is
 * mounted read-only, the socket's directory too: a container connects to the socket
 * (write permission on the socket file, which a read-only mount does not remove) but
 * cannot create, replace or remove files beside it. */
static json_t *common_edits(const struct cdi_params *p)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", p->socket);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = 0;
    return json_pack("{s:[o, o], s:[o, o, o, o]}", "deviceNodes", node(p, "/dev/nvidiactl"),
                     node(p, "/dev/nvidia-uvm"), "mounts",
                     bind_mount(p->shim, CDI_SHIM_IN_CONTAINER, "ro"),
                     bind_mount(p->preload_file, CDI_PRELOAD_IN_CONTAINER, "ro"),
                     bind_mount(p->shim_conf, CDI_SHIM_CONF_IN_CONTAINER, "ro"),
                     bind_mount(dir, dir, "ro")); /* connect(2) needs no writable mount */
}

static bool has_gpu(const struct kairos_ps_reply *r, unsigned g)
{
    return r->quota[g] || (r->compute_flags[g] & KAIROS_PS_COMPUTE_POLICY);
}

/* The GPUs of a tenant: those it has a quota or a policy on, or all when none. */
static bool tenant_gpu(const struct kairos_ps_reply *r, unsigned n_gpus, unsigned g)
{
    for (unsigned k = 0; k < n_gpus; k++)
        if (has_gpu(r, k))
            return has_gpu(r, g);
    return true;
}

static json_t *tenant_device(const struct cdi_params *p, const struct kairos_ps_reply *r,
                             unsigned n_gpus)
{
    char env[KAIROS_NAME_MAX + 16], path[32];
    json_t *nodes = json_array();
    for (unsigned g = 0; g < n_gpus && g < KAIROS_MAX_GPUS; g++) {
        if (!tenant_gpu(r, n_gpus, g))
            continue;
        snprintf(path, sizeof path, "/dev/nvidia%u", g);
        json_array_append_new(nodes, node(p, path));
    }
    snprintf(env, sizeof env, "KAIROS_TENANT=%s", r->tenant);
    return json_pack("{s:s, s:{s:[s], s:o}}", "name", r->tenant, "containerEdits", "env", env,
                     "deviceNodes", nodes);
}

static const struct kairos_ps_reply *find(const struct ps_snapshot *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->list[i].tenant, name))
            return &s->list[i];
    return NULL;
}

static bool named(const char *const *only, size_t n_only, const char *name)
{
    for (size_t k = 0; k < n_only; k++)
        if (!strcmp(only[k], name))
            return true;
    return false;
}

json_t *cdi_spec_build(const struct cdi_params *p, const struct ps_snapshot *s,
                       const char *const *only, size_t n_only,
                       void (*skipped)(const char *tenant), char *err, size_t err_len)
{
    for (size_t k = 0; k < n_only; k++) {
        if (!find(s, only[k])) {
            snprintf(err, err_len, "kairosd has no tenant '%s' (kairos ps lists them)", only[k]);
            return NULL;
        }
        if (!cdi_name_valid(only[k])) {
            snprintf(err, err_len, "tenant '%s' cannot be a CDI device: a CDI name begins and "
                     "ends with a letter or a digit", only[k]);
            return NULL;
        }
    }
    json_t *devices = json_array();
    for (size_t i = 0; i < s->n; i++) {
        const struct kairos_ps_reply *r = &s->list[i];
        if (n_only && !named(only, n_only, r->tenant))
            continue;
        if (!cdi_name_valid(r->tenant)) {
            if (skipped)
                skipped(r->tenant);
            continue;
        }
        json_array_append_new(devices, tenant_device(p, r, s->n_gpus));
    }
    if (!json_array_size(devices)) {
        json_decref(devices);
        snprintf(err, err_len, "no tenant to describe: kairosd has none that CDI can name; "
                 "declare one in kairosd.conf(5) or create it with kairos run --mem");
        return NULL;
    }
    return json_pack("{s:s, s:s, s:o, s:o}", "cdiVersion",
                     cdi_version_for(devices, p->dev_root != NULL), "kind", CDI_KIND,
                     "devices", devices, "containerEdits", common_edits(p));
}
