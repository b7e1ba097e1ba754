/* driver_release.c - reading and judging the node's driver release at start (see
 * driver_release.h). */
#include "daemon/gpu/driver_release.h"

#include <stdio.h>
#include <string.h>

#include "daemon/base/log.h"

void driver_release_read(struct gpu_backend *b, struct driver_release *out)
{
    memset(out, 0, sizeof *out);
    char text[96] = "";
    if (!b || !b->ops->driver_version || b->ops->driver_version(b, text, sizeof text))
        return;
    out->known = true;
    if (driver_version_parse(text, strlen(text), &out->version))
        snprintf(out->version.text, sizeof out->version.text, "%.*s",
                 (int)sizeof out->version.text - 1, text); /* cut: it is only shown */
    out->supported = driver_version_supported(&out->version);
    if (out->supported) {
        log_info("NVIDIA driver %s: a branch Kairos reads (" DRIVER_BRANCHES_SUPPORTED
                 "; tested on " DRIVER_VERSION_TESTED ")", out->version.text);
        return;
    }
    log_warn("NVIDIA driver %s is not a release this Kairos was built for (branch "
             DRIVER_BRANCHES_SUPPORTED ", tested on " DRIVER_VERSION_TESTED "): tenant "
             "processes are refused GPU use, or run with NO quota where shim.conf says "
             "unsupported_driver: passthrough. Install a Kairos built for this driver "
             "(docs/drivers.md)", out->version.text);
}
