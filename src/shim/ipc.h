/* ipc.h - legacy CUDA IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle) as the
 * shim sees it, on both sides.
 *
 * Exporter: a call that lets other processes dup one of this process's RM objects
 * (RM_SHARE, or the control IPC_SHARE_CONTROL: NV0000 CLIENT_SHARE_OBJECT) makes
 * the object's memory held by the file its client lives on (objtree_hold_in_file),
 * since an importer's dup keeps the memory alive in the driver. The share is
 * reported to kairosd (SHARED), which keeps the departed exporter's charge while a
 * verified import lives (src/daemon/imports.h). The process's own free of a shared
 * object (or of its parent or client) is told to kairosd (SHARED FREED, one-way)
 * and the hold dropped at once: kairosd, which reads that before the credit report
 * lowering the process's holdings, keeps the bytes charged itself while a verified
 * import lives. Not told (no kairosd), the hold stays until the file closes.
 * SHARED names the object's device memory (bytes and GPU), which kairosd checks
 * against what it charges this process.
 *
 * Importer: an RM_DUP_OBJECT whose source client is not one of this process's is
 * an import. kairosd is told before the driver sees it (IMPORTED BEGIN, so an
 * exporter that frees and exits at once cannot beat the report), and again when
 * it ends (END: the dup failed, or it is gone with its parent, its client or its
 * file). The import charges this process nothing (the objtree records a dup of
 * unknown memory). A dup kairosd refuses (an object no member shared with this
 * process, its bounds reached) fails as the driver fails a dup it does not allow,
 * with a line on stderr saying why: imported all the same, the memory would
 * outlive its exporter's charge.
 *
 * Only a named tenant's process (memguard active, tenant mode) reports; the calls
 * are read from the shim's copy of the arguments (shadow.h). Shares (while their
 * client lives) and live imports are told again to a restarted kairosd.
 *
 * Thread rules: called from the application's thread making the ioctl or close,
 * or (ipc_after_reattach) memguard's watcher thread, without the state lock (they
 * take it, and call the agent without it).
 */
#ifndef KAIROS_SHIM_IPC_H
#define KAIROS_SHIM_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rm_abi.h"
#include "core/rm_decode.h"
#include "shim/real.h"

/* The NV0000 control by which CUDA 13 / driver 580 makes memory importable by
 * another process (cudaIpcGetMemHandle). One constant: change it here. */
#define IPC_SHARE_CONTROL RM_CTRL_NV0000_CLIENT_SHARE_OBJECT
#define IPC_SHARE_CONTROL_SIZE 16u /* NV0000_CTRL_CLIENT_SHARE_OBJECT_PARAMS */

/* What the call before the driver is about to do: fills *pending and reports
 * IMPORTED BEGIN when the argument (the shim's copy, len bytes, request req on
 * the control node) is an RM_DUP_OBJECT from a client not of this process. */
struct ipc_pending {
    bool import;              /* BEGIN was accepted: END or tracking follows */
    uint32_t client_src, object_src, client, object;
};
/* Returns true when the dup is refused: kairosd refused the import (or, with
 * on_daemon_down: closed, cannot be asked); its status is written in arg (the
 * shim's copy: NV_ERR_INSUFFICIENT_PERMISSIONS) and the driver must not see it. */
bool ipc_before(const struct shim_real *r, uint32_t req, uint8_t *arg, size_t len,
                struct ipc_pending *pending);

/* After the call (op decoded from the shim's copy of the argument, arg/arg_len;
 * params the control's parameters, the shim's copy, params_len bytes): notes a
 * share (exporter) or the outcome of an import (importer), and the ends of
 * imports a free took with it. */
void ipc_after(const struct shim_real *r, const struct rm_op *op, const uint8_t *arg,
               size_t arg_len, const uint8_t *params, size_t params_len,
               const struct ipc_pending *pending);

/* A file's last descriptor was closed (its clients and their dups are gone). */
void ipc_after_close(void);

/* kairosd restarted and this process reattached (memguard's watcher thread): tells
 * it again what this process shares and imports (the new kairosd knew none of it). */
void ipc_after_reattach(void);

/* Imports this process has reported and not yet ended (tests). */
size_t ipc_imports(void);

#endif /* KAIROS_SHIM_IPC_H */
