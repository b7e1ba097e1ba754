/* rm_decode.h - decoding of one driver-boundary call into a typed operation.
 *
 * The decoder is a pure function: it reads the bytes of one ioctl argument (and,
 * for RM_ALLOC and RM_CONTROL, of the parameters it points to) and says what the
 * call was: which escape, which objects, which class or control, what size of
 * memory, what status came back. It never dereferences a pointer found inside an
 * argument and never trusts a length: short or missing bytes are reported as a
 * problem, not read. The same decoder serves the shim (live calls) and
 * `kairos trace --replay` (recorded calls), so both see the boundary the same way.
 *
 * Thread rules: no state; safe from any thread.
 */
#ifndef KAIROS_CORE_RM_DECODE_H
#define KAIROS_CORE_RM_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rm_abi.h"

/* One observed call. Buffers may be shorter than the argument (a trace keeps a
 * prefix); the decoder reads only what is there. */
struct rm_call {
    enum rm_node node;
    int fd;
    uint32_t request;     /* request word; for UVM the plain command number */
    bool xfer;            /* arrived wrapped in IOCTL_XFER_CMD (already unwrapped) */
    const uint8_t *arg;   /* argument bytes after the call */
    size_t arg_len;       /* bytes available in arg */
    const uint8_t *params; /* RM_ALLOC / RM_CONTROL parameters after the call, or NULL */
    size_t params_len;
    int ret;              /* ioctl() return value */
    int err;              /* errno when ret < 0 */
};

enum rm_op_kind {
    RM_OP_OTHER = 0,      /* known escape without object effects */
    RM_OP_ALLOC,          /* RM_ALLOC, RM_ALLOC_OBJECT */
    RM_OP_ALLOC_MEMORY,   /* RM_ALLOC_MEMORY (NVOS02) */
    RM_OP_VIDHEAP_ALLOC,  /* VID_HEAP_CONTROL allocations */
    RM_OP_VIDHEAP_FREE,
    RM_OP_FREE,
    RM_OP_CONTROL,
    RM_OP_DUP,
    RM_OP_SHARE,
    RM_OP_MAP,            /* RM_MAP_MEMORY: CPU mapping, completed by an mmap */
    RM_OP_UNMAP,
    RM_OP_MAP_DMA,        /* GPU virtual mapping of existing memory */
    RM_OP_UNMAP_DMA,
    RM_OP_REGISTER_FD,
    RM_OP_OS_EVENT,
    RM_OP_UVM,
    RM_OP_UNKNOWN,        /* not an escape we know */
};

/* What was wrong with the bytes, if anything. The fields that could be read are
 * still filled in. */
enum rm_problem {
    RM_PROBLEM_NONE = 0,
    RM_PROBLEM_TRUNCATED,    /* fewer bytes than the layout needs */
    RM_PROBLEM_WRONG_SIZE,   /* request size is not the escape's size */
    RM_PROBLEM_WRONG_NODE,   /* the escape is not accepted on this node */
    RM_PROBLEM_UNKNOWN,      /* unknown escape number or request type */
};

struct rm_op {
    enum rm_op_kind kind;
    enum rm_problem problem;
    const char *name;        /* escape or UVM command name, never NULL */
    uint32_t nr;             /* escape number (UVM: command) */
    uint32_t size;           /* argument size from the request word */
    bool has_status;
    uint32_t status;         /* RM status (UVM: rmStatus) when has_status */
    bool ok;                 /* ret == 0 and status == NV_OK */

    uint32_t h_client;       /* client the call names (NVOS21: hRoot) */
    uint32_t h_parent;
    uint32_t h_object;       /* allocated, freed, mapped or controlled object */
    uint32_t h_class;        /* RM_ALLOC class (as given; root classes kept) */
    uint32_t cmd;            /* RM_CONTROL command; VID_HEAP function */
    uint32_t h_client_src;   /* DUP_OBJECT source */
    uint32_t h_object_src;
    uint32_t h_memory;       /* MAP / MAP_DMA memory object */

    bool vidmem;             /* this allocation takes device memory */
    uint64_t bytes;          /* memory size (allocations), length (maps) */
    uint64_t address;        /* CPU token / dmaOffset of a map */
    int map_fd;              /* MAP_MEMORY / ALLOC_MEMORY: the fd that will be mmapped */
    uint32_t params_size;    /* RM_ALLOC / RM_CONTROL paramsSize */
    int32_t device_id;       /* NV01_DEVICE_0 allocation: its deviceId; else -1 */
    uint32_t h_userd;        /* channel allocation: hUserdMemory[0] (0: none or unread) */
    uint64_t userd_offset;   /* channel allocation: userdOffset[0] */
    uint64_t map_offset;     /* RM_MAP_MEMORY: offset into the memory object */
};

/* Decodes one call. Always fills op (name at least) and returns op->problem. */
enum rm_problem rm_decode(const struct rm_call *call, struct rm_op *op);

/* Reads only the request: which escape, what size, what problem. */
enum rm_problem rm_decode_request(enum rm_node node, uint32_t request, struct rm_op *op);

/* True when an RM_ALLOC of this class with these parameters takes device memory;
 * *bytes gets the size (the returned size after the call). params may be short. */
bool rm_alloc_is_vidmem(uint32_t h_class, const uint8_t *params, size_t params_len,
                        uint64_t *bytes);

#endif /* KAIROS_CORE_RM_DECODE_H */
