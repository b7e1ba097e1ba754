/* settings.h - what the environment asks of the shim, read once at load.
 *
 *   KAIROS_TENANT=NAME       register with kairosd as a member of tenant NAME
 *   KAIROS_SOCKET=PATH       kairosd's socket (default /run/kairos/kairosd.sock)
 *   KAIROS_MEM=SIZE          standalone quota per GPU for this process (8G, 512MiB),
 *                            used when no tenant is named, or as the fallback quota
 *                            when the daemon is down and KAIROS_ON_DAEMON_DOWN=open
 *   KAIROS_ON_DAEMON_DOWN=closed|open
 *                            a named tenant whose daemon cannot be reached: refuse
 *                            GPU use (closed, the default) or go on (open)
 *   KAIROS_LOG=stderr        the shim's own messages on stderr (silent otherwise,
 *                            except the one line explaining a fail-closed refusal)
 *
 * Thread rules: settings_get() returns a structure filled once, before any other
 * thread can exist (library constructor); read-only afterwards.
 */
#ifndef KAIROS_SHIM_SETTINGS_H
#define KAIROS_SHIM_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "kairos/proto.h"

enum settings_mode {
    SETTINGS_OFF = 0,     /* no quota: the shim only observes */
    SETTINGS_STANDALONE,  /* KAIROS_MEM, no daemon */
    SETTINGS_TENANT,      /* KAIROS_TENANT: quotas from kairosd */
};

struct settings {
    enum settings_mode mode;
    char tenant[KAIROS_NAME_MAX];
    char socket_path[108];
    uint64_t standalone_quota;   /* bytes per GPU; 0 when KAIROS_MEM is unset */
    bool fail_open;
    bool log_stderr;
    char problem[160];           /* a setting that could not be used, said once */
};

/* Parses the environment (settings_load) and returns the result. */
void settings_load(void);
const struct settings *settings_get(void);

/* For tests: parse from explicit values instead of the environment. */
void settings_parse(struct settings *s, const char *tenant, const char *socket_path,
                    const char *mem, const char *on_down, const char *log);

#endif /* KAIROS_SHIM_SETTINGS_H */
