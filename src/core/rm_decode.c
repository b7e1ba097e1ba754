/* rm_decode.c - turns the bytes of one driver-boundary call into a struct rm_op.
 *
 * Reads fields by offset from a buffer that may be shorter than the layout (a
 * recorded prefix), so every read goes through get_u32/get_u64, which report a
 * missing field instead of reading past the end. No pointer inside an argument is
 * ever followed here: the caller passes the parameter bytes it copied itself.
 */
#include "core/rm_decode.h"

#include <string.h>

#include "core/rm_names.h"

struct reader {
    const uint8_t *buf;
    size_t len;
    bool short_read; /* a field was beyond the available bytes */
};

static uint32_t get_u32(struct reader *r, size_t off)
{
    uint32_t v = 0;
    if (!r->buf || off + sizeof v > r->len) {
        r->short_read = true;
        return 0;
    }
    memcpy(&v, r->buf + off, sizeof v);
    return v;
}

static uint64_t get_u64(struct reader *r, size_t off)
{
    uint64_t v = 0;
    if (!r->buf || off + sizeof v > r->len) {
        r->short_read = true;
        return 0;
    }
    memcpy(&v, r->buf + off, sizeof v);
    return v;
}

static void set_status(struct rm_op *op, struct reader *r, size_t off)
{
    if (!r->buf || off + sizeof(uint32_t) > r->len) {
        r->short_read = true;
        op->has_status = false;
        return;
    }
    op->status = get_u32(r, off);
    op->has_status = true;
}

static enum rm_op_kind kind_of_escape(uint32_t nr)
{
    switch (nr) {
    case RM_NR_ALLOC:
    case 0x28: /* RM_ALLOC_OBJECT */
        return RM_OP_ALLOC;
    case RM_NR_ALLOC_MEMORY:
        return RM_OP_ALLOC_MEMORY;
    case RM_NR_FREE:
        return RM_OP_FREE;
    case RM_NR_CONTROL:
        return RM_OP_CONTROL;
    case RM_NR_DUP_OBJECT:
        return RM_OP_DUP;
    case RM_NR_SHARE:
        return RM_OP_SHARE;
    case RM_NR_MAP_MEMORY:
        return RM_OP_MAP;
    case RM_NR_UNMAP_MEMORY:
        return RM_OP_UNMAP;
    case RM_NR_MAP_MEMORY_DMA:
        return RM_OP_MAP_DMA;
    case RM_NR_UNMAP_MEMORY_DMA:
        return RM_OP_UNMAP_DMA;
    case 0xC9: /* REGISTER_FD */
        return RM_OP_REGISTER_FD;
    case 0xCE: /* ALLOC_OS_EVENT */
    case 0xCF: /* FREE_OS_EVENT */
        return RM_OP_OS_EVENT;
    default:
        return RM_OP_OTHER; /* VID_HEAP_CONTROL is refined once its function is read */
    }
}

static bool size_is_legal(const struct rm_escape_info *info, uint32_t size)
{
    if (info->flags & RM_ESC_ARRAY)
        return size > 0 && info->size2 > 0 && size % info->size2 == 0;
    if (info->size == 0)
        return true; /* size not known to us: accept */
    return size == info->size || (info->size2 && size == info->size2);
}

static enum rm_problem decode_uvm_request(uint32_t request, struct rm_op *op)
{
    const char *name = rm_uvm_name(request);
    op->kind = RM_OP_UVM;
    op->nr = request;
    op->size = rm_uvm_params_size(request);
    op->name = name ? name : "UVM_UNKNOWN";
    op->problem = name ? RM_PROBLEM_NONE : RM_PROBLEM_UNKNOWN;
    return op->problem;
}

enum rm_problem rm_decode_request(enum rm_node node, uint32_t request, struct rm_op *op)
{
    memset(op, 0, sizeof *op);
    op->map_fd = -1;
    op->device_id = -1;
    op->name = "UNKNOWN";
    if (node == RM_NODE_UVM)
        return decode_uvm_request(request, op);

    op->nr = RM_IOC_NR(request);
    op->size = RM_IOC_SIZE(request);
    op->kind = RM_OP_UNKNOWN;
    if (RM_IOC_TYPEOF(request) != RM_IOC_TYPE) {
        op->problem = RM_PROBLEM_UNKNOWN;
        return op->problem;
    }
    const struct rm_escape_info *info = rm_escape_info(op->nr);
    if (!info) {
        op->name = "UNKNOWN_ESCAPE";
        op->problem = RM_PROBLEM_UNKNOWN;
        return op->problem;
    }
    op->name = info->name;
    op->kind = kind_of_escape(op->nr);
    if (!size_is_legal(info, op->size))
        op->problem = RM_PROBLEM_WRONG_SIZE;
    else if (node != RM_NODE_NONE && !(info->node_mask & (1u << node)))
        op->problem = RM_PROBLEM_WRONG_NODE;
    return op->problem;
}

bool rm_alloc_is_vidmem(uint32_t h_class, const uint8_t *params, size_t params_len,
                        uint64_t *bytes)
{
    *bytes = 0;
    if (h_class != RM_CLASS_NV01_MEMORY_LOCAL_USER)
        return false;
    /* The driver accepts class 0x40 only with LOCATION = VIDMEM and no VIRTUAL flag,
     * so every successful one is device memory; the size is returned at +64. */
    struct reader r = {params, params_len, false};
    uint64_t size = get_u64(&r, offsetof(struct rm_memory_alloc_params, size));
    if (!r.short_read)
        *bytes = size;
    return true;
}

static void decode_alloc(struct reader *r, const struct rm_call *call, struct rm_op *op)
{
    op->h_client = get_u32(r, 0);
    op->h_parent = get_u32(r, 4);
    op->h_object = get_u32(r, 8);
    op->h_class = get_u32(r, 12);
    if (op->nr == 0x28) { /* RM_ALLOC_OBJECT: NVOS05 */
        set_status(op, r, offsetof(struct rm_alloc_object_args, status));
        return;
    }
    bool serialized = false;
    if (op->size == sizeof(struct rm_alloc64_args)) {
        op->params_size = get_u32(r, offsetof(struct rm_alloc64_args, params_size));
        serialized = get_u32(r, offsetof(struct rm_alloc64_args, flags)) & 1u;
        set_status(op, r, offsetof(struct rm_alloc64_args, status));
    } else {
        op->params_size = get_u32(r, offsetof(struct rm_alloc_args, params_size));
        set_status(op, r, offsetof(struct rm_alloc_args, status));
    }
    /* A serialized (FINN) parameter blob is not the struct: size unknown. */
    const uint8_t *params = serialized ? NULL : call->params;
    size_t params_len = serialized ? 0 : call->params_len;
    op->vidmem = rm_alloc_is_vidmem(op->h_class, params, params_len, &op->bytes);
    if (op->h_class == RM_CLASS_NV01_DEVICE_0) { /* NV0080_ALLOC_PARAMETERS: deviceId at 0 */
        struct reader pr = {params, params_len, false};
        uint32_t id = get_u32(&pr, 0);
        if (!pr.short_read && id < 0x7fffffffu)
            op->device_id = (int32_t)id;
    }
    if (rm_class_kind(op->h_class) == RM_KIND_CHANNEL) {
        /* NV_CHANNEL_ALLOC_PARAMS: hUserdMemory[8] at 32, userdOffset[8] at 64. The
         * channel's USERD (GPGet at +0x88, GPPut at +0x8C) lives in that memory. */
        struct reader pr = {params, params_len, false};
        uint32_t h = get_u32(&pr, 32);
        uint64_t off = get_u64(&pr, 64);
        if (!pr.short_read && h) {
            op->h_userd = h;
            op->userd_offset = off;
        }
    }
}

static void decode_alloc_memory(struct reader *r, struct rm_op *op)
{
    op->h_client = get_u32(r, 0);
    op->h_parent = get_u32(r, 4);
    op->h_object = get_u32(r, 8);
    op->h_class = get_u32(r, 12);
    /* NVOS02 allocates real memory only as sysmem (0x3E); class 0x40 here is a
     * handle to the whole framebuffer and takes nothing. */
    op->bytes = get_u64(r, offsetof(struct rm_alloc_memory_args, limit)) + 1;
    op->map_fd = (int)get_u32(r, offsetof(struct rm_alloc_memory_args, fd));
    set_status(op, r, offsetof(struct rm_alloc_memory_args, status));
}

/* VID_HEAP_CONTROL allocations become an RM memory object inside the kernel; the
 * class it becomes depends on the flags and attributes. */
static void decode_vidheap(struct reader *r, struct rm_op *op)
{
    op->h_client = get_u32(r, RM_VIDHEAP_OFF_CLIENT);
    op->h_parent = get_u32(r, RM_VIDHEAP_OFF_PARENT);
    op->cmd = get_u32(r, RM_VIDHEAP_OFF_FUNCTION);
    set_status(op, r, RM_VIDHEAP_OFF_STATUS);
    size_t off_attr = RM_VIDHEAP_OFF_ATTR, off_size = RM_VIDHEAP_OFF_SIZE, off_attr2 = 144;
    switch (op->cmd) {
    case RM_VIDHEAP_FREE:
        op->kind = RM_OP_VIDHEAP_FREE;
        op->h_object = get_u32(r, RM_VIDHEAP_OFF_FREE_HMEMORY);
        return;
    case RM_VIDHEAP_ALLOC_TILED_PITCH_HEIGHT:
        off_attr = RM_VIDHEAP_OFF_ATTR_TILED;
        break;
    case RM_VIDHEAP_ALLOC_SIZE_RANGE:
        off_size = RM_VIDHEAP_OFF_SIZE_RANGE;
        off_attr2 = 136;
        break;
    case RM_VIDHEAP_ALLOC_SIZE:
        break;
    default:
        return; /* INFO and the others allocate nothing */
    }
    op->kind = RM_OP_VIDHEAP_ALLOC;
    op->h_object = get_u32(r, RM_VIDHEAP_OFF_HMEMORY);
    uint32_t flags = get_u32(r, 52);
    uint32_t attr = get_u32(r, off_attr);
    uint32_t attr2 = get_u32(r, off_attr2);
    op->bytes = get_u64(r, off_size);
    if (flags & RM_MEMFLAG_VIRTUAL)
        op->h_class = RM_CLASS_NV50_MEMORY_VIRTUAL;
    else if (attr2 & (1u << 24)) /* USE_EGM */
        op->h_class = RM_CLASS_NV_MEMORY_EXTENDED_USER;
    else if (RM_ATTR_LOCATION(attr) == RM_ATTR_LOCATION_VIDMEM)
        op->h_class = RM_CLASS_NV01_MEMORY_LOCAL_USER;
    else
        op->h_class = RM_CLASS_NV01_MEMORY_SYSTEM;
    op->vidmem = op->h_class == RM_CLASS_NV01_MEMORY_LOCAL_USER;
}

static void decode_rm_fields(struct reader *r, const struct rm_call *call, struct rm_op *op)
{
    switch (op->nr) {
    case RM_NR_ALLOC:
    case 0x28:
        decode_alloc(r, call, op);
        break;
    case RM_NR_ALLOC_MEMORY:
        decode_alloc_memory(r, op);
        break;
    case RM_NR_VID_HEAP_CONTROL:
        decode_vidheap(r, op);
        break;
    case RM_NR_FREE:
        op->h_client = get_u32(r, 0);
        op->h_parent = get_u32(r, 4);
        op->h_object = get_u32(r, 8);
        set_status(op, r, offsetof(struct rm_free_args, status));
        break;
    case RM_NR_CONTROL:
        op->h_client = get_u32(r, 0);
        op->h_object = get_u32(r, 4);
        op->cmd = get_u32(r, 8);
        op->params_size = get_u32(r, offsetof(struct rm_control_args, params_size));
        set_status(op, r, offsetof(struct rm_control_args, status));
        break;
    case RM_NR_DUP_OBJECT:
        op->h_client = get_u32(r, 0);
        op->h_parent = get_u32(r, 4);
        op->h_object = get_u32(r, 8);
        op->h_client_src = get_u32(r, 12);
        op->h_object_src = get_u32(r, 16);
        set_status(op, r, offsetof(struct rm_dup_object_args, status));
        break;
    case RM_NR_SHARE:
        op->h_client = get_u32(r, 0);
        op->h_object = get_u32(r, 4);
        set_status(op, r, offsetof(struct rm_share_args, status));
        break;
    case RM_NR_MAP_MEMORY:
        op->h_client = get_u32(r, 0);
        op->h_parent = get_u32(r, 4);
        op->h_memory = op->h_object = get_u32(r, 8);
        op->bytes = get_u64(r, offsetof(struct rm_map_memory_args, length));
        op->map_offset = get_u64(r, offsetof(struct rm_map_memory_args, offset));
        op->address = get_u64(r, offsetof(struct rm_map_memory_args, linear_address));
        op->map_fd = (int)get_u32(r, offsetof(struct rm_map_memory_args, fd));
        set_status(op, r, offsetof(struct rm_map_memory_args, status));
        break;
    case RM_NR_UNMAP_MEMORY:
        op->h_client = get_u32(r, 0);
        op->h_parent = get_u32(r, 4);
        op->h_memory = op->h_object = get_u32(r, 8);
        op->address = get_u64(r, offsetof(struct rm_unmap_memory_args, linear_address));
        set_status(op, r, offsetof(struct rm_unmap_memory_args, status));
        break;
    case RM_NR_MAP_MEMORY_DMA:
        op->h_client = get_u32(r, 0);
        op->h_parent = get_u32(r, 4);
        op->h_object = get_u32(r, 8);
        op->h_memory = get_u32(r, 12);
        op->bytes = get_u64(r, offsetof(struct rm_map_memory_dma_args, length));
        op->address = get_u64(r, offsetof(struct rm_map_memory_dma_args, dma_offset));
        set_status(op, r, offsetof(struct rm_map_memory_dma_args, status));
        break;
    case RM_NR_UNMAP_MEMORY_DMA:
        op->h_client = get_u32(r, 0);
        op->h_parent = get_u32(r, 4);
        op->h_object = get_u32(r, 8);
        op->h_memory = get_u32(r, 12);
        op->address = get_u64(r, offsetof(struct rm_unmap_memory_dma_args, dma_offset));
        set_status(op, r, offsetof(struct rm_unmap_memory_dma_args, status));
        break;
    case RM_NR_GET_EVENT_DATA:
        set_status(op, r, offsetof(struct rm_get_event_data_args, status));
        break;
    case 0xC9: /* REGISTER_FD: {int ctl_fd} */
        op->map_fd = (int)get_u32(r, 0);
        break;
    case 0xCE:
    case 0xCF:
        op->h_client = get_u32(r, 0);
        op->h_parent = get_u32(r, 4);
        op->map_fd = (int)get_u32(r, 8);
        set_status(op, r, offsetof(struct rm_os_event_args, status));
        break;
    case RM_NR_XFER: /* only seen here when a trace kept it wrapped */
        op->cmd = get_u32(r, 0);
        break;
    default:
        break;
    }
}

/* UVM status offsets for the commands whose layout we rely on. */
static int uvm_status_offset(uint32_t cmd)
{
    switch (cmd) {
    case 0x30000001: /* INITIALIZE */
        return 8;
    case 75: /* MM_INITIALIZE */
        return 4;
    case 37: /* REGISTER_GPU */
        return 36;
    case 33: /* MAP_EXTERNAL_ALLOCATION */
        return 9260;
    case 34: /* FREE */
    case 72: /* VALIDATE_VA_RANGE */
    case 73: /* CREATE_EXTERNAL_RANGE */
        return 16;
    default:
        return -1;
    }
}

enum rm_problem rm_decode(const struct rm_call *call, struct rm_op *op)
{
    rm_decode_request(call->node, call->request, op);
    struct reader r = {call->arg, call->arg_len, false};
    if (call->node == RM_NODE_UVM) {
        int off = uvm_status_offset(call->request);
        if (off >= 0 && call->arg)
            set_status(op, &r, (size_t)off);
    } else if (op->problem == RM_PROBLEM_NONE || op->problem == RM_PROBLEM_WRONG_NODE) {
        decode_rm_fields(&r, call, op);
        if (r.short_read && op->problem == RM_PROBLEM_NONE && call->arg_len < op->size)
            op->problem = RM_PROBLEM_TRUNCATED;
    }
    op->ok = call->ret == 0 && (!op->has_status || op->status == RM_NV_OK);
    return op->problem;
}
