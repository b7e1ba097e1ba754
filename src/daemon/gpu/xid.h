/* xid.h - the NVIDIA driver's fault reports ("Xid" lines of the kernel log) read into
 * a struct: which GPU (its PCI address), which Xid, which process the driver blamed.
 *
 * The driver writes, for example:
 *   NVRM: Xid (PCI:0000:65:00): 13, pid=4242, name=python3, Graphics SM Warp Exception ...
 *   NVRM: Xid (PCI:0000:cb:00): 43, pid='<unknown>', name=<unknown>, Ch 00000010
 * The process is the one whose channel faulted as the driver saw it; it may be unknown
 * ("<unknown>"), and under MPS it may be the MPS server rather than its client.
 *
 * Thread rules: none (pure).
 */
#ifndef KAIROS_DAEMON_XID_H
#define KAIROS_DAEMON_XID_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/gpu/gpu.h"

#define XID_NAME_MAX 64    /* the process name as the driver wrote it (cut) */
#define XID_DETAIL_MAX 160 /* the rest of the line (cut) */

struct xid_report {
    struct gpu_pci pci;
    unsigned xid;
    uint32_t pid;                 /* 0: the driver did not know */
    char name[XID_NAME_MAX];      /* "" when the driver did not know */
    char detail[XID_DETAIL_MAX];  /* what follows the name, "" when nothing */
};

/* Whether line (one line of the kernel log, a record prefix "PRIO,SEQ,TS,FLAGS;" of
 * /dev/kmsg allowed) is a well-formed Xid report; out filled when it is. Anything
 * else, however malformed, is false. */
bool xid_parse(const char *line, struct xid_report *out);

#endif /* KAIROS_DAEMON_XID_H */
