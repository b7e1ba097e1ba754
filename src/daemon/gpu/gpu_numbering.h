/* gpu_numbering.h - whether the node's GPU numbers can be trusted: the shim knows a
 * GPU by the RM device instance its program allocates, kairosd by the NVML index,
 * and the two agree only when the driver initialised the GPUs in PCI order
 * (docs/multi-gpu.md). Warns at start about what would break that.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_GPU_NUMBERING_H
#define KAIROS_DAEMON_GPU_NUMBERING_H

#include "daemon/gpu/gpu.h"

/* Logs a warning for every one of the n GPUs that is not in persistence mode when
 * n >= 2; returns how many it warned about. */
unsigned gpu_numbering_check(struct gpu_backend *b, unsigned n);

#endif /* KAIROS_DAEMON_GPU_NUMBERING_H */
