/* driver_check.h - whether the shim may read this driver's calls at all. The
 * argument layouts the shim decodes were checked against one driver branch
 * (core/driver_version.h). The user-mode driver's first call on /dev/nvidiactl is
 * the version handshake (CHECK_VERSION_STR), answered by the kernel driver only
 * when both are the same release, so a successful handshake names the running
 * driver. Not every program makes it (CUDA 13's libcuda does not; NVML does), so
 * the shim also reads the kernel driver's /proc/driver/nvidia/version at the first
 * open of /dev/nvidiactl. On a branch not supported, the node's shim.conf decides
 * (unsupported_driver): refuse fails the handshake, so the program cannot use the
 * GPU; passthrough lets every later driver call of the process through untouched
 * (no quota, no time control). Either way one line on stderr says what happened
 * and what an administrator can do. The check is made where the shim enforces a
 * quota (memguard_active()); a process it only observes reads no sizes that matter.
 *
 * Thread rules: any thread; the verdict is one atomic word, set by the first
 * handshake that decides it and never changed afterwards.
 */
#ifndef KAIROS_SHIM_DRIVER_CHECK_H
#define KAIROS_SHIM_DRIVER_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "shim/real.h"

/* At an open of /dev/nvidiactl: the first time, reads /proc/driver/nvidia/version
 * (through r, below the shim) for a verdict. Returns -1 when GPU use is refused
 * (the caller fails the open with EACCES), 0 otherwise, also when the file cannot
 * be read (the handshake may decide later). */
int driver_check_open(const struct shim_real *r);

/* After a version handshake the driver accepted (ret 0): answer is the shim's own
 * copy of the argument as the driver left it (never the application's memory,
 * which another thread could rewrite), len its size. Returns 0 to let the
 * application see the driver's answer, or -1 with errno EINVAL to fail the
 * handshake (refused). */
int driver_check_handshake(const void *answer, size_t len);

/* Whether every driver call is to go through untouched (passthrough was chosen for
 * a driver that is not supported). Cheap: one relaxed atomic load. */
bool driver_check_passthrough(void);

#endif /* KAIROS_SHIM_DRIVER_CHECK_H */
