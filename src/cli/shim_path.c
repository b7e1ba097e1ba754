/* shim_path.c - locating libkairos.so for `kairos trace`, `kairos run` and `kairos cdi`,
 * and the node's settings it will read (shim_path_conf).
 *
 * KAIROS_SHIM_FROM_BINDIR (the shim's install path relative to the directory kairos
 * is installed in) and KAIROS_SHIM_INSTALLED (its absolute install path) come from
 * meson (src/cli/meson.build), so an install with any prefix, libdir or DESTDIR
 * finds its own shim. */
#include "cli/shim_path.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool readable(const char *path)
{
    return access(path, R_OK) == 0;
}

int shim_path_find(char *out, size_t cap)
{
    const char *env = getenv("KAIROS_SHIM");
    if (env && *env) {
        int n = snprintf(out, cap, "%s", env);
        return n > 0 && (size_t)n < cap && readable(out) ? 0 : -1;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    /* the build tree, then the install next to this binary (DESTDIR, a moved prefix) */
    static const char *const rel[] = {"../shim/libkairos.so", KAIROS_SHIM_FROM_BINDIR};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        int n_out = snprintf(out, cap, "%s/%s", exe, rel[i]);
        if (n_out > 0 && (size_t)n_out < cap && readable(out))
            return 0;
    }
    int n_out = snprintf(out, cap, "%s", KAIROS_SHIM_INSTALLED);
    return n_out > 0 && (size_t)n_out < cap && readable(out) ? 0 : -1;
}

void shim_path_conf(const char *shim, struct shim_conf *c)
{
    struct stat st;
    uid_t owner = shim && stat(shim, &st) == 0 ? st.st_uid : 0;
    shim_conf_load(c, getenv("KAIROS_SHIM_CONF"), owner);
}

int shim_path_preload(const char *shim)
{
    const char *old = getenv("LD_PRELOAD");
    size_t len = strlen(shim) + (old ? strlen(old) : 0) + 2;
    char *preload = malloc(len);
    if (!preload)
        return -ENOMEM;
    snprintf(preload, len, "%s%s%s", shim, old && *old ? ":" : "", old ? old : "");
    int rc = setenv("LD_PRELOAD", preload, 1) ? -ENOMEM : 0;
    free(preload);
    return rc;
}
