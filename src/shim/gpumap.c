/* gpumap.c - device instance -> GPU index from the driver's own answers
 * (gpumap.h). Runs in whichever application thread made the control; the tables
 * are small and copied under one mutex, gm_mu, never held across a call. A fork
 * takes it first (pthread_atfork) and both processes release it, so a child never
 * inherits it held by a thread that does not exist there, nor a table half
 * copied (issue 25, item 11). */
#include "shim/gpumap.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "core/rm_abi.h"

#define GPUMAP_MAX     32 /* NV_MAX_DEVICES: the size of the probed tables */
#define GPUMAP_INVALID 0xffffffffu

static pthread_mutex_t gm_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t gm_probed[GPUMAP_MAX]; /* gpuIds, sorted: PCI order */
static unsigned gm_n_probed;
static uint32_t gm_gpu_id[GPUMAP_MAX]; /* by device instance */
static bool gm_known[GPUMAP_MAX];

static void gm_lock_for_fork(void)
{
    pthread_mutex_lock(&gm_mu);
}

static void gm_unlock_after_fork(void)
{
    pthread_mutex_unlock(&gm_mu);
}

__attribute__((constructor)) static void gm_register_atfork(void)
{
    pthread_atfork(gm_lock_for_fork, gm_unlock_after_fork, gm_unlock_after_fork);
}

static uint32_t u32_at(const uint8_t *p, size_t off)
{
    uint32_t v;
    memcpy(&v, p + off, sizeof v);
    return v;
}

/* GET_PROBED_IDS: gpuIds[32] first (then excluded ids and flags); invalid entries
 * are 0xffffffff. Sorted, they are the PCI order. */
static void observe_probed(const uint8_t *params, size_t len)
{
    uint32_t ids[GPUMAP_MAX];
    unsigned n = 0;
    if (len < sizeof ids)
        return;
    for (unsigned i = 0; i < GPUMAP_MAX; i++) {
        uint32_t id = u32_at(params, 4 * i);
        if (id == GPUMAP_INVALID)
            continue;
        unsigned k = n++;
        for (; k > 0 && ids[k - 1] > id; k--) /* insertion sort: 32 at most */
            ids[k] = ids[k - 1];
        ids[k] = id;
    }
    pthread_mutex_lock(&gm_mu);
    memcpy(gm_probed, ids, n * sizeof *ids);
    gm_n_probed = n;
    pthread_mutex_unlock(&gm_mu);
}

/* GET_ID_INFO and GET_ID_INFO_V2 both start gpuId, gpuFlags, deviceInstance. */
static void observe_id_info(const uint8_t *params, size_t len)
{
    if (len < 12)
        return;
    uint32_t id = u32_at(params, 0), inst = u32_at(params, 8);
    if (inst >= GPUMAP_MAX || id == GPUMAP_INVALID)
        return;
    pthread_mutex_lock(&gm_mu);
    gm_gpu_id[inst] = id;
    gm_known[inst] = true;
    pthread_mutex_unlock(&gm_mu);
}

void gpumap_observe(uint32_t cmd, const uint8_t *params, size_t len)
{
    if (!params)
        return;
    if (cmd == RM_CTRL_NV0000_GPU_GET_PROBED_IDS)
        observe_probed(params, len);
    else if (cmd == RM_CTRL_NV0000_GPU_GET_ID_INFO_V2 || cmd == RM_CTRL_NV0000_GPU_GET_ID_INFO)
        observe_id_info(params, len);
}

int gpumap_index(int inst)
{
    int index = inst;
    if (inst < 0 || inst >= GPUMAP_MAX)
        return inst;
    pthread_mutex_lock(&gm_mu);
    if (gm_known[inst])
        for (unsigned i = 0; i < gm_n_probed; i++)
            if (gm_probed[i] == gm_gpu_id[inst])
                index = (int)i;
    pthread_mutex_unlock(&gm_mu);
    return index;
}

void gpumap_reset(void)
{
    pthread_mutex_lock(&gm_mu);
    gm_n_probed = 0;
    memset(gm_known, 0, sizeof gm_known);
    pthread_mutex_unlock(&gm_mu);
}
