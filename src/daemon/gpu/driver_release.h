/* driver_release.h - the node's NVIDIA driver release, read once at start from the
 * GPU backend and compared with the branches Kairos reads (core/driver_version.h).
 * kairosd itself reads no driver argument; the shims do, and decide per process
 * (src/shim/driver_check.h). kairosd says it in the log at start, loudly when the
 * release is not supported, and in the metrics (kairos_driver_supported), so that
 * an administrator sees a node whose shims refuse GPU use or let it through.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_DRIVER_RELEASE_H
#define KAIROS_DAEMON_DRIVER_RELEASE_H

#include <stdbool.h>

#include "core/driver_version.h"
#include "daemon/gpu/gpu.h"

struct driver_release {
    bool known;        /* the backend told a version (no GPU, no NVML: not known) */
    bool supported;    /* its branch is one Kairos reads */
    struct driver_version version; /* .text as the backend wrote it, even unreadable */
};

/* Asks b (NULL: no backend) and logs the verdict. */
void driver_release_read(struct gpu_backend *b, struct driver_release *out);

#endif /* KAIROS_DAEMON_DRIVER_RELEASE_H */
