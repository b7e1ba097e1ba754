/* settings.c - the shim's settings from the environment (see settings.h). */
#include "shim/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tenant_name.h"
#include "core/units.h"

static struct settings current;

void settings_parse(struct settings *s, const char *tenant, const char *socket_path,
                    const char *mem, const char *on_down, const char *log)
{
    memset(s, 0, sizeof *s);
    snprintf(s->socket_path, sizeof s->socket_path, "%s",
             socket_path && *socket_path ? socket_path : KAIROS_DEFAULT_SOCKET);
    s->fail_open = on_down && !strcmp(on_down, "open");
    s->log_stderr = log && !strcmp(log, "stderr");
    if (on_down && *on_down && strcmp(on_down, "open") && strcmp(on_down, "closed"))
        snprintf(s->problem, sizeof s->problem,
                 "KAIROS_ON_DAEMON_DOWN='%.40s' is neither 'open' nor 'closed'; using closed",
                 on_down);
    if (mem && *mem) {
        char err[96];
        if (units_parse_size(mem, 0, &s->standalone_quota, err, sizeof err)) {
            snprintf(s->problem, sizeof s->problem, "KAIROS_MEM ignored: %s", err);
            s->standalone_quota = 0;
        }
    }
    if (tenant && *tenant) {
        if (tenant_name_valid(tenant)) {
            snprintf(s->tenant, sizeof s->tenant, "%s", tenant);
            s->mode = SETTINGS_TENANT;
            return;
        }
        snprintf(s->problem, sizeof s->problem,
                 "KAIROS_TENANT='%.40s' is not a tenant name (1-63 of [A-Za-z0-9._-], not starting with '.' or '-')",
                 tenant);
        s->mode = SETTINGS_TENANT; /* a bad name must not mean "no quota": fail closed */
        s->tenant[0] = 0;
        return;
    }
    s->mode = s->standalone_quota ? SETTINGS_STANDALONE : SETTINGS_OFF;
}

void settings_load(void)
{
    settings_parse(&current, getenv("KAIROS_TENANT"), getenv("KAIROS_SOCKET"),
                   getenv("KAIROS_MEM"), getenv("KAIROS_ON_DAEMON_DOWN"), getenv("KAIROS_LOG"));
}

const struct settings *settings_get(void)
{
    return &current;
}
