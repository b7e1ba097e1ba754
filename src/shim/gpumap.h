/* gpumap.h - which GPU of the node an RM device instance is.
 *
 * The driver gives a GPU its device instance when it initialises it, lowest free
 * number first, so without persistence mode the instance follows the order of
 * first use, not the PCI order that the NVML index (kairosd's GPU number) and the
 * /dev minor follow (docs/multi-gpu.md). A gpuId, on the other hand, is made of
 * the PCI location (domain << 16 | bus << 8 | device). Before it allocates a
 * device CUDA asks NV0000_CTRL_CMD_GPU_GET_PROBED_IDS (every GPU's gpuId) and
 * GET_ID_INFO(_V2) (a gpuId's device instance); gpumap keeps what their answers
 * said, so that a device instance can be turned into the GPU's place in PCI order.
 * Where the answers were not seen, the instance is taken as the index, as before.
 *
 * Thread rules: any thread (one internal mutex, held for a few loads and stores).
 */
#ifndef KAIROS_SHIM_GPUMAP_H
#define KAIROS_SHIM_GPUMAP_H

#include <stddef.h>
#include <stdint.h>

/* The answer (status NV_OK) of an NV0000 control on a root client: remembered when
 * it is one of the three above; anything else is ignored. */
void gpumap_observe(uint32_t cmd, const uint8_t *params, size_t len);
/* The node's GPU index (PCI order among the probed GPUs) of device instance inst;
 * inst itself when unknown. */
int gpumap_index(int inst);
/* Forgets everything (tests). */
void gpumap_reset(void);

#endif /* KAIROS_SHIM_GPUMAP_H */
