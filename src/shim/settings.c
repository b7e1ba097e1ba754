/* settings.c - the shim's settings: the node's file and the process's requests
 * (see settings.h). Runs in the library constructor, before any other thread. */
#include "shim/settings.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/tenant_name.h"
#include "core/units.h"

static struct settings current;
static const char settings_anchor; /* an address inside libkairos.so, for dladdr */

static void take_conf(struct settings *s, const struct shim_conf *conf)
{
    snprintf(s->socket_path, sizeof s->socket_path, "%s", conf->socket_path);
    snprintf(s->conf_source, sizeof s->conf_source, "%s", conf->source);
    s->fail_open = conf->fail_open && !conf->problem[0];
    s->driver_passthrough = conf->driver_passthrough && !conf->problem[0];
    if (conf->problem[0])
        snprintf(s->conf_problem, sizeof s->conf_problem, "%s", conf->problem);
    if (conf->note[0])
        snprintf(s->problem, sizeof s->problem, "%s", conf->note);
}

/* KAIROS_MANAGED: a standalone process's own choice; a tenant's comes from kairosd. */
static bool take_managed(struct settings *s, const char *managed)
{
    if (!managed || !*managed || !strcmp(managed, "refuse"))
        return true;
    if (!strcmp(managed, "charge")) {
        s->managed_charge = true;
        return true;
    }
    snprintf(s->refusal, sizeof s->refusal,
             "KAIROS_MANAGED='%.40s' is neither charge nor refuse; fix it or unset it", managed);
    s->mode = SETTINGS_REFUSED;
    return false;
}

void settings_parse(struct settings *s, const char *tenant, const char *mem, const char *log,
                    const char *managed, const struct shim_conf *conf)
{
    memset(s, 0, sizeof *s);
    take_conf(s, conf);
    s->log_stderr = log && !strcmp(log, "stderr");
    if (mem && *mem) {
        char err[200];
        if (units_parse_size_with_unit(mem, 0, &s->standalone_quota, err, sizeof err)) {
            snprintf(s->refusal, sizeof s->refusal,
                     "KAIROS_MEM %s; fix it or unset it (no GPU use with a quota that cannot "
                     "be read)", err);
            s->standalone_quota = 0;
            s->mode = SETTINGS_REFUSED;
            return;
        }
    }
    if (!take_managed(s, managed))
        return;
    if (tenant && *tenant) {
        if (tenant_name_valid(tenant)) {
            snprintf(s->tenant, sizeof s->tenant, "%s", tenant);
            s->mode = SETTINGS_TENANT;
            s->managed_charge = false; /* kairosd decides for a tenant */
            return;
        }
        snprintf(s->refusal, sizeof s->refusal,
                 "KAIROS_TENANT='%.40s' is not a tenant name (1-63 of [A-Za-z0-9._-], not "
                 "starting with '.' or '-')", tenant);
        s->mode = SETTINGS_REFUSED; /* a bad name must not mean "no quota": fail closed */
        return;
    }
    if (conf->register_always && !conf->problem[0]) {
        s->mode = SETTINGS_TENANT; /* tenant "": kairosd places it, or refuses it */
        s->managed_charge = false;
        return;
    }
    s->mode = s->standalone_quota ? SETTINGS_STANDALONE : SETTINGS_OFF;
}

/* The owner of the file libkairos.so was loaded from (root when unknown): a
 * developer build's owner may point KAIROS_SHIM_CONF at their own file. */
static uid_t shim_file_owner(void)
{
    Dl_info info;
    struct stat st;
    if (dladdr(&settings_anchor, &info) && info.dli_fname && info.dli_fname[0] &&
        stat(info.dli_fname, &st) == 0)
        return st.st_uid;
    return 0;
}

void settings_load(void)
{
    struct shim_conf conf;
    shim_conf_load(&conf, getenv("KAIROS_SHIM_CONF"), shim_file_owner());
    settings_parse(&current, getenv("KAIROS_TENANT"), getenv("KAIROS_MEM"),
                   getenv("KAIROS_LOG"), getenv("KAIROS_MANAGED"), &conf);
}

const struct settings *settings_get(void)
{
    return &current;
}
