/* objtree.h - the RM object tree of one process, and what it holds in device memory.
 *
 * The kernel driver keeps every object a process allocates (clients, devices,
 * subdevices, channel groups, channels, doorbell pages, memory) in a tree: freeing
 * an object frees its subtree, freeing a client frees everything it owns, and
 * closing the /dev/nvidiactl file a client was made on frees that client, all
 * without further ioctls. Kairos mirrors that tree from the successful calls it
 * sees, so that it knows at every moment how much device memory the process
 * holds, which channels and channel groups it has (for time control, with the
 * timeslice the application set on each group), and which mappings are
 * doorbells. Duplicated handles share one memory block, which is counted once and
 * released with its last reference.
 *
 * Files are identified by a caller-chosen id per open file description (the shim
 * gives dup()'d descriptors the same id; a replay gives each open a new one).
 *
 * Thread rules: not thread-safe; the caller serialises access (the shim holds its
 * state lock around each call, never across the real ioctl).
 */
#ifndef KAIROS_CORE_OBJTREE_H
#define KAIROS_CORE_OBJTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rm_decode.h"

struct objtree;

/* GPUs are told apart by the device instance of the NV01_DEVICE_0 object their
 * memory hangs under (deviceId of its allocation); more than this are counted on
 * the last one. */
#define OBJTREE_MAX_GPUS 16
/* The largest memory block recorded (4 PiB, beyond any GPU): larger sizes in a
 * reply are bounded to it, so sums and deltas never overflow. */
#define OBJTREE_MAX_BYTES (1ull << 52)

/* What one call did to the tree. */
struct objtree_effect {
    int64_t vidmem_delta;     /* bytes of device memory taken (+) or released (-) */
    int64_t vidmem_delta_gpu[OBJTREE_MAX_GPUS]; /* the same, per GPU */
    uint32_t objects_added;
    uint32_t objects_freed;
};

enum objtree_map_kind {
    OBJTREE_MAP_NONE = 0,     /* the mmap completes no pending RM mapping */
    OBJTREE_MAP_MEMORY,       /* a memory object's pages */
    OBJTREE_MAP_DOORBELL,     /* a usermode doorbell page (HOPPER_USERMODE_A) */
    OBJTREE_MAP_OTHER,        /* another object's mapping (e.g. a channel's USERD) */
};

/* A reference to a live object, for listings. */
struct objtree_ref {
    uint32_t h_client, h_object, h_parent, h_class;
    uint64_t file_id;         /* the ctl file its client lives on */
};

/* Counters for a summary. "live" counts objects now; "created" since the start. */
struct objtree_stats {
    uint64_t vidmem_now, vidmem_peak, vidmem_allocated, vidmem_freed;
    uint64_t vidmem_gpu[OBJTREE_MAX_GPUS]; /* held now, per GPU */
    uint32_t vidmem_allocs, vidmem_frees;
    uint32_t live_objects, created_objects;
    uint32_t live_clients, live_channel_groups, live_channels, live_usermode;
    uint32_t created_clients, created_channel_groups, created_channels, created_usermode;
    uint32_t doorbell_mappings;     /* doorbell mmaps made */
    uint32_t live_doorbell_mappings;
};

struct objtree *objtree_new(void);
void objtree_free(struct objtree *tree);

/* Applies one decoded call made on file_id. map_file_id is the file id of the
 * descriptor the call names for a later mmap (op->map_fd of RM_MAP_MEMORY), 0 when
 * none or unknown. Only successful calls change the tree (op->ok); failed ones are
 * ignored. Returns 0, or -ENOMEM when the tree could not grow (the tree stays
 * consistent, the object is simply not tracked). */
int objtree_apply(struct objtree *tree, uint64_t file_id, uint64_t map_file_id,
                  const struct rm_op *op, struct objtree_effect *effect);

/* The last descriptor of file_id was closed: frees the clients made on it, and the
 * references it held (objtree_hold_in_file). */
void objtree_close_file(struct objtree *tree, uint64_t file_id, struct objtree_effect *effect);

/* The open file file_id now holds a reference to the memory of object (client,
 * handle), as an export file does (RM's EXPORT_OBJECTS_TO_FD dups the object into
 * it): the memory is released only when both the object and the file are gone.
 * Holding a block again in the same file changes nothing. Returns 1 when the
 * block is held, 0 when the object holds no memory (or is unknown), -ENOMEM. */
int objtree_hold_in_file(struct objtree *tree, uint64_t file_id, uint32_t client,
                         uint32_t handle);

/* The device memory of object (client, handle): true, with its bytes (0 when its
 * memory is not device memory) and GPU slot *gpu; false when it holds no memory
 * (or is unknown). */
bool objtree_memory_of(const struct objtree *tree, uint32_t client, uint32_t handle,
                       uint64_t *bytes, int *gpu);

/* Once object (client, handle), held by objtree_hold_in_file, is gone (freed, with
 * its parent or client) while its file lives: true, with the bytes of device memory
 * on GPU slot *gpu that releasing the hold would free (0 when another reference
 * keeps the block); false when no such hold is left. */
bool objtree_hold_left(const struct objtree *tree, uint32_t client, uint32_t handle,
                       uint64_t *bytes, int *gpu);
/* Drops that hold (the memory is no longer this process's to keep): effect says
 * what it released. */
void objtree_release_hold(struct objtree *tree, uint32_t client, uint32_t handle,
                          struct objtree_effect *effect);

/* An mmap of map_file_id succeeded at [addr, addr+len): pairs it with the RM_MAP_MEMORY
 * that named that file, and says what it maps. */
enum objtree_map_kind objtree_mmap(struct objtree *tree, uint64_t map_file_id, uint64_t addr,
                                   uint64_t len);
/* A munmap of [addr, addr+len): forgets every mapping it overlaps (one that lost
 * some of its pages is forgotten whole); true if there were any. */
bool objtree_munmap(struct objtree *tree, uint64_t addr, uint64_t len);

void objtree_stats(const struct objtree *tree, struct objtree_stats *stats);

/* Live objects per class, ascending class id: calls fn(class, live, created, ctx). */
void objtree_foreach_class(const struct objtree *tree,
                           void (*fn)(uint32_t h_class, uint32_t live, uint32_t created, void *ctx),
                           void *ctx);

/* Copies up to max live objects of one kind into out; returns how many exist. */
size_t objtree_list(const struct objtree *tree, enum rm_class_kind kind, struct objtree_ref *out,
                    size_t max);

/* Live doorbell mappings: fills up to max {addr, len}; returns how many exist. */
size_t objtree_doorbells(const struct objtree *tree, uint64_t *addr, uint64_t *len, size_t max);

/* A channel's USERD as the process sees it: the page RM_ALLOC named
 * (hUserdMemory[0] at userdOffset[0]) inside a live CPU mapping of that memory.
 * GPGet is the 32-bit word at addr + 0x88, GPPut at addr + 0x8C (Hopper); the
 * channel has work queued that the GPU has not fetched while they differ. The
 * host's pushbuffer Put and Get (+0x40 / +0x44, high halves +0x4C / +0x60) differ
 * while it has fetched a segment whose methods it has not all processed: a launch
 * waiting for the kernel before it (measured on the H200: equal whenever idle). */
#define OBJTREE_USERD_PB_PUT 0x40u
#define OBJTREE_USERD_PB_GET 0x44u
#define OBJTREE_USERD_PB_PUT_HI 0x4Cu
#define OBJTREE_USERD_PB_GET_HI 0x60u
#define OBJTREE_USERD_GP_GET 0x88u
#define OBJTREE_USERD_GP_PUT 0x8Cu
#define OBJTREE_USERD_SPAN 0x90u /* bytes from addr that must be mapped */
struct objtree_userd {
    uint32_t h_client, h_channel;
    int gpu;                  /* -1 unknown */
    uint64_t file_id;         /* the ctl file its client lives on */
    uint64_t addr;
};
/* Live channels whose USERD is mapped: fills up to max; returns how many exist. */
size_t objtree_userds(const struct objtree *tree, struct objtree_userd *out, size_t max);

/* The GPU an object belongs to (the device it hangs under), or -1 if unknown. */
int objtree_gpu_of(const struct objtree *tree, uint32_t h_client, uint32_t h_object);

/* The timeslice the application last set on a channel group itself (NVA06C
 * SET_TIMESLICE, as the driver accepted it; CUDA sets one on every group it
 * creates): an attribute of the group's node, gone with it, so a reused handle
 * starts with none. set returns false when (h_client, h_tsg) is no live channel
 * group; get returns 0 for one with no value recorded (or no such group). */
bool objtree_set_timeslice(struct objtree *tree, uint32_t h_client, uint32_t h_tsg, uint64_t us);
uint64_t objtree_timeslice(const struct objtree *tree, uint32_t h_client, uint32_t h_tsg);

/* True if the object exists; fills ref when not NULL. */
bool objtree_lookup(const struct objtree *tree, uint32_t h_client, uint32_t h_object,
                    struct objtree_ref *ref);

#endif /* KAIROS_CORE_OBJTREE_H */
