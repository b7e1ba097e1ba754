/* rm_abi.h - our own declarations of the NVIDIA RM ioctl ABI (driver branch 580).
 *
 * The user-mode driver talks to the kernel driver through ioctl() on /dev/nvidiactl,
 * /dev/nvidiaN and /dev/nvidia-uvm. This header declares the request words, the
 * argument layouts Kairos reads or writes, and the numbers (classes, controls,
 * status codes) it acts on. Layouts follow docs/rm-abi-facts.md in the shared
 * folder; every size and offset the code depends on is checked at compile time,
 * so a layout mistake is a build error, not a misread field.
 *
 * Thread rules: constants and types only.
 */
#ifndef KAIROS_CORE_RM_ABI_H
#define KAIROS_CORE_RM_ABI_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

/* ---- request words ------------------------------------------------------------ */

#define RM_IOC_TYPE 0x46u /* 'F' */
#define RM_IOC_NR(req) ((unsigned)((req) & 0xffu))
#define RM_IOC_TYPEOF(req) ((unsigned)(((req) >> 8) & 0xffu))
#define RM_IOC_SIZE(req) ((unsigned)(((req) >> 16) & 0x3fffu))
#define RM_IOC_DIR(req) ((unsigned)(((req) >> 30) & 0x3u))
/* _IOWR('F', nr, size): the only form the driver uses. */
#define RM_IOWR(nr, size) (0xC0000000u | ((uint32_t)(size) << 16) | (RM_IOC_TYPE << 8) | (uint32_t)(nr))

/* Character device numbers of the NVIDIA nodes. */
#define RM_NV_MAJOR 195u
#define RM_NV_CTL_MINOR 255u

/* RM escapes (nv_escape.h) and OS escapes (nv-ioctl-numbers.h). */
enum rm_nr {
    RM_NR_ALLOC_MEMORY = 0x27,
    RM_NR_ALLOC_OBJECT = 0x28,
    RM_NR_FREE = 0x29,
    RM_NR_CONTROL = 0x2A,
    RM_NR_ALLOC = 0x2B,
    RM_NR_DUP_OBJECT = 0x34,
    RM_NR_SHARE = 0x35,
    RM_NR_IDLE_CHANNELS = 0x41,
    RM_NR_VID_HEAP_CONTROL = 0x4A,
    RM_NR_MAP_MEMORY = 0x4E,
    RM_NR_UNMAP_MEMORY = 0x4F,
    RM_NR_GET_EVENT_DATA = 0x52,
    RM_NR_MAP_MEMORY_DMA = 0x57,
    RM_NR_UNMAP_MEMORY_DMA = 0x58,
    RM_NR_CHECK_VERSION_STR = 0xD2,
    RM_NR_XFER = 0xD3,
};

/* Which device node a descriptor is open on. */
enum rm_node {
    RM_NODE_NONE = 0, /* not an NVIDIA node */
    RM_NODE_CTL,      /* /dev/nvidiactl */
    RM_NODE_DEV,      /* /dev/nvidiaN */
    RM_NODE_UVM,      /* /dev/nvidia-uvm (and nvidia-uvm-tools) */
};

/* ---- argument layouts ------------------------------------------------------------
 * Each struct is the exact argument of one escape. Names are ours; the offsets
 * are the driver's. Status fields are RM status codes (rm_status below). */

struct rm_check_version_args { /* nv_ioctl_rm_api_version_t, CHECK_VERSION_STR */
    uint32_t cmd;   /* 0 strict, '1' relaxed, '2' query */
    uint32_t reply; /* 1 when the versions match */
    char version[64]; /* the user-mode driver's; the driver's own on a mismatch */
};
struct rm_free_args { /* NVOS00, RM_FREE */
    uint32_t h_client, h_parent, h_object, status;
};
struct rm_alloc_args { /* NVOS21, RM_ALLOC with a 32-byte argument */
    uint32_t h_client, h_parent, h_object, h_class;
    uint64_t params;
    uint32_t params_size, status;
};
struct rm_alloc64_args { /* NVOS64, RM_ALLOC with a 48-byte argument */
    uint32_t h_client, h_parent, h_object, h_class;
    uint64_t params;
    uint64_t rights_requested;
    uint32_t params_size, flags, status, pad;
};
struct rm_control_args { /* NVOS54 */
    uint32_t h_client, h_object, cmd, flags;
    uint64_t params;
    uint32_t params_size, status;
};
struct rm_map_memory_args { /* nv_ioctl_nvos33_parameters_with_fd */
    uint32_t h_client, h_device, h_memory, pad;
    uint64_t offset, length, linear_address;
    uint32_t status, flags;
    int32_t fd, pad2;
};
struct rm_unmap_memory_args { /* NVOS34 */
    uint32_t h_client, h_device, h_memory, pad;
    uint64_t linear_address;
    uint32_t status, flags;
};
struct rm_alloc_memory_args { /* nv_ioctl_nvos02_parameters_with_fd */
    uint32_t h_root, h_parent, h_object, h_class, flags, pad;
    uint64_t memory, limit;
    uint32_t status, pad2;
    int32_t fd, pad3;
};
struct rm_dup_object_args { /* NVOS55 */
    uint32_t h_client, h_parent, h_object, h_client_src, h_object_src, flags, status;
};
struct rm_share_args { /* NVOS57 */
    uint32_t h_client, h_object;
    uint32_t target, access_mask;
    uint16_t type;
    uint8_t action, pad;
    uint32_t status;
};
struct rm_map_memory_dma_args { /* NVOS46 */
    uint32_t h_client, h_device, h_dma, h_memory;
    uint64_t offset, length;
    uint32_t flags, flags2, kind_override, pad;
    uint64_t dma_offset;
    uint32_t status, pad2;
};
struct rm_unmap_memory_dma_args { /* NVOS47 */
    uint32_t h_client, h_device, h_dma, h_memory;
    uint64_t pad;
    uint64_t dma_offset;
    uint64_t pad2;
    uint32_t status, pad3;
};
struct rm_get_event_data_args { /* NVOS41 */
    uint64_t event;
    uint32_t more_events, status;
};
struct rm_alloc_object_args { /* NVOS05 */
    uint32_t h_root, h_parent, h_object, h_class, status;
};
struct rm_xfer_args { /* nv_ioctl_xfer_t: an escape wrapped for large arguments */
    uint32_t cmd, size;
    uint64_t ptr;
};
struct rm_os_event_args { /* ALLOC_OS_EVENT / FREE_OS_EVENT */
    uint32_t h_client, h_device, fd, status;
};

/* VID_HEAP_CONTROL (NVOS32, 184 bytes) is read by offset: its data is a union. */
#define RM_VIDHEAP_SIZE 184u
#define RM_VIDHEAP_OFF_CLIENT 0u
#define RM_VIDHEAP_OFF_PARENT 4u
#define RM_VIDHEAP_OFF_FUNCTION 8u
#define RM_VIDHEAP_OFF_STATUS 20u
#define RM_VIDHEAP_OFF_HMEMORY 44u
#define RM_VIDHEAP_OFF_ATTR 56u      /* ALLOC_SIZE and ALLOC_SIZE_RANGE */
#define RM_VIDHEAP_OFF_ATTR_TILED 64u /* ALLOC_TILED_PITCH_HEIGHT */
#define RM_VIDHEAP_OFF_SIZE 88u      /* ALLOC_SIZE, ALLOC_TILED_PITCH_HEIGHT */
#define RM_VIDHEAP_OFF_SIZE_RANGE 80u /* ALLOC_SIZE_RANGE */
#define RM_VIDHEAP_OFF_FREE_HMEMORY 44u
enum rm_vidheap_function {
    RM_VIDHEAP_ALLOC_SIZE = 2,
    RM_VIDHEAP_FREE = 3,
    RM_VIDHEAP_INFO = 5,
    RM_VIDHEAP_ALLOC_TILED_PITCH_HEIGHT = 6,
    RM_VIDHEAP_ALLOC_SIZE_RANGE = 14,
    RM_VIDHEAP_ALLOC_OS_DESCRIPTOR = 27,
};

/* NV_MEMORY_ALLOCATION_PARAMS: the allocation parameters of the memory classes. */
struct rm_memory_alloc_params {
    uint32_t owner, type, flags, width, height;
    int32_t pitch;
    uint32_t attr, attr2, format, compr_covg, zcull_covg, pad;
    uint64_t range_lo, range_hi, size, alignment, offset, limit, address;
    uint32_t ctag_offset, h_va_space, internal_flags, tag;
    int32_t numa_node, pad2;
};
#define RM_ATTR_LOCATION(attr) (((attr) >> 25) & 0x3u)
#define RM_ATTR_LOCATION_VIDMEM 0u
#define RM_MEMFLAG_VIRTUAL 0x80000u

/* NV0000 OS_UNIX_EXPORT_OBJECTS_TO_FD (on a client; cuMemExportToShareableHandle):
 * the objects are dup'd into the export file fd (a /dev/nvidiactl file), which
 * keeps their memory until its last close (ctrl0000unix.h). */
#define RM_EXPORT_FD_MAX_OBJECTS 512
struct rm_export_objects_to_fd_params {
    int32_t fd;
    uint32_t h_device;
    uint16_t max_objects;
    uint8_t metadata[64];
    uint32_t objects[RM_EXPORT_FD_MAX_OBJECTS];
    uint16_t num_objects;
    uint16_t index;
};

/* FB_GET_INFO_V2: {count; {index, data}[128]}, data in KiB. FB_GET_INFO (the first
 * version, which Vulkan's driver asks): {count; pad; a pointer to count entries}. */
#define RM_FB_INFO_MAX 128u
struct rm_fb_info_entry {
    uint32_t index, data;
};
struct rm_fb_get_info_v2_params {
    uint32_t count;
    struct rm_fb_info_entry entries[RM_FB_INFO_MAX];
};
struct rm_fb_get_info_params {
    uint32_t count;
    uint32_t pad;
    uint64_t list; /* struct rm_fb_info_entry[count] in the caller's memory */
};
#define RM_FB_INFO_RAM_SIZE 0x7u
#define RM_FB_INFO_TOTAL_RAM_SIZE 0x8u
#define RM_FB_INFO_HEAP_SIZE 0x9u
#define RM_FB_INFO_HEAP_FREE 0x16u
#define RM_FB_INFO_USABLE_RAM_SIZE 0x20u

/* ---- compile-time checks: sizes and the offsets we read ------------------------- */
static_assert(sizeof(struct rm_check_version_args) == 72, "CHECK_VERSION_STR");
static_assert(sizeof(struct rm_free_args) == 16, "NVOS00");
static_assert(sizeof(struct rm_alloc_args) == 32, "NVOS21");
static_assert(sizeof(struct rm_alloc64_args) == 48, "NVOS64");
static_assert(offsetof(struct rm_alloc64_args, status) == 40, "NVOS64 status");
static_assert(sizeof(struct rm_control_args) == 32, "NVOS54");
static_assert(sizeof(struct rm_map_memory_args) == 56, "NVOS33 with fd");
static_assert(offsetof(struct rm_map_memory_args, linear_address) == 32, "NVOS33 address");
static_assert(offsetof(struct rm_map_memory_args, status) == 40, "NVOS33 status");
static_assert(offsetof(struct rm_map_memory_args, fd) == 48, "NVOS33 fd");
static_assert(sizeof(struct rm_unmap_memory_args) == 32, "NVOS34");
static_assert(offsetof(struct rm_unmap_memory_args, status) == 24, "NVOS34 status");
static_assert(sizeof(struct rm_alloc_memory_args) == 56, "NVOS02 with fd");
static_assert(offsetof(struct rm_alloc_memory_args, status) == 40, "NVOS02 status");
static_assert(offsetof(struct rm_alloc_memory_args, fd) == 48, "NVOS02 fd");
static_assert(sizeof(struct rm_dup_object_args) == 28, "NVOS55");
static_assert(sizeof(struct rm_share_args) == 24, "NVOS57");
static_assert(offsetof(struct rm_share_args, status) == 20, "NVOS57 status");
static_assert(sizeof(struct rm_map_memory_dma_args) == 64, "NVOS46");
static_assert(offsetof(struct rm_map_memory_dma_args, dma_offset) == 48, "NVOS46 dmaOffset");
static_assert(offsetof(struct rm_map_memory_dma_args, status) == 56, "NVOS46 status");
static_assert(sizeof(struct rm_unmap_memory_dma_args) == 48, "NVOS47");
static_assert(offsetof(struct rm_unmap_memory_dma_args, dma_offset) == 24, "NVOS47 dmaOffset");
static_assert(offsetof(struct rm_unmap_memory_dma_args, status) == 40, "NVOS47 status");
static_assert(sizeof(struct rm_get_event_data_args) == 16, "NVOS41");
static_assert(sizeof(struct rm_alloc_object_args) == 20, "NVOS05");
static_assert(sizeof(struct rm_xfer_args) == 16, "xfer");
static_assert(sizeof(struct rm_os_event_args) == 16, "os event");
static_assert(sizeof(struct rm_memory_alloc_params) == 128, "NV_MEMORY_ALLOCATION_PARAMS");
static_assert(offsetof(struct rm_memory_alloc_params, attr) == 24, "attr");
static_assert(offsetof(struct rm_memory_alloc_params, size) == 64, "size");
static_assert(offsetof(struct rm_memory_alloc_params, limit) == 88, "limit");
static_assert(offsetof(struct rm_memory_alloc_params, h_va_space) == 108, "hVASpace");
static_assert(sizeof(struct rm_fb_get_info_v2_params) == 1028, "FB_GET_INFO_V2");
static_assert(sizeof(struct rm_fb_get_info_params) == 16 &&
                  offsetof(struct rm_fb_get_info_params, list) == 8,
              "FB_GET_INFO");
static_assert(offsetof(struct rm_export_objects_to_fd_params, objects) == 76 &&
                  sizeof(struct rm_export_objects_to_fd_params) == 2128,
              "EXPORT_OBJECTS_TO_FD");

/* ---- classes ----------------------------------------------------------------------
 * X(id, NAME, kind, params_size). The kind says how the object tree treats it.
 * params_size is the size of the class's allocation parameters, which RM copies
 * whatever paramsSize says (CUDA passes paramsSize 0 in NVOS64); 0: unknown. For
 * NV01_DEVICE_0 it is the 4 bytes of deviceId Kairos reads, not the whole struct. */
enum rm_class_kind {
    RM_KIND_OTHER = 0,
    RM_KIND_CLIENT,
    RM_KIND_DEVICE,
    RM_KIND_SUBDEVICE,
    RM_KIND_MEMORY,      /* a memory object that may hold vidmem */
    RM_KIND_VASPACE,
    RM_KIND_CHANNEL_GROUP,
    RM_KIND_CHANNEL,
    RM_KIND_ENGINE,      /* compute, copy, ... objects under a channel */
    RM_KIND_USERMODE,    /* the usermode doorbell page */
    RM_KIND_EVENT,
};

#define RM_CLASS_LIST(X)                                                \
    X(0x0000, NV01_ROOT, RM_KIND_CLIENT, 0)                                \
    X(0x0001, NV01_ROOT_NON_PRIV, RM_KIND_CLIENT, 0)                       \
    X(0x0041, NV01_ROOT_CLIENT, RM_KIND_CLIENT, 0)                         \
    X(0x0005, NV01_EVENT, RM_KIND_EVENT, 24)                                \
    X(0x0079, NV01_EVENT_OS_EVENT, RM_KIND_EVENT, 24)                       \
    X(0x0080, NV01_DEVICE_0, RM_KIND_DEVICE, 4)                            \
    X(0x2080, NV20_SUBDEVICE_0, RM_KIND_SUBDEVICE, 4)                      \
    X(0x2081, NV2081_BINAPI, RM_KIND_OTHER, 0)                             \
    X(0x003E, NV01_MEMORY_SYSTEM, RM_KIND_MEMORY, 128)                       \
    X(0x003F, NV01_MEMORY_LOCAL_PRIVILEGED, RM_KIND_MEMORY, 128)             \
    X(0x0040, NV01_MEMORY_LOCAL_USER, RM_KIND_MEMORY, 128)                   \
    X(0x0042, NV_MEMORY_EXTENDED_USER, RM_KIND_MEMORY, 128)                  \
    X(0x0070, NV01_MEMORY_VIRTUAL, RM_KIND_MEMORY, 24)                      \
    X(0x0071, NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, RM_KIND_MEMORY, 40)         \
    X(0x00C2, NV01_MEMORY_LOCAL_PHYSICAL, RM_KIND_MEMORY, 24)               \
    X(0x00DE, RM_USER_SHARED_DATA, RM_KIND_OTHER, 0)                       \
    X(0x00F8, NV_MEMORY_FABRIC, RM_KIND_MEMORY, 0)                         \
    X(0x00FD, NV_MEMORY_MULTICAST_FABRIC, RM_KIND_MEMORY, 0)               \
    X(0x00FE, NV_MEMORY_MAPPER, RM_KIND_OTHER, 0)                          \
    X(0x50A0, NV50_MEMORY_VIRTUAL, RM_KIND_MEMORY, 128)                      \
    X(0x90CE, NV01_MEMORY_DEVICELESS, RM_KIND_MEMORY, 128)                   \
    X(0x503C, NV50_THIRD_PARTY_P2P, RM_KIND_OTHER, 0)                      \
    X(0x83DE, GT200_DEBUGGER, RM_KIND_OTHER, 0)                            \
    X(0x9067, FERMI_CONTEXT_SHARE_A, RM_KIND_OTHER, 0)                     \
    X(0x90E6, GF100_SUBDEVICE_MASTER, RM_KIND_OTHER, 0)                    \
    X(0x90F1, FERMI_VASPACE_A, RM_KIND_VASPACE, 0)                         \
    X(0xA06C, KEPLER_CHANNEL_GROUP_A, RM_KIND_CHANNEL_GROUP, 20)            \
    X(0xC86F, HOPPER_CHANNEL_GPFIFO_A, RM_KIND_CHANNEL, 368)                 \
    X(0xCBC0, HOPPER_COMPUTE_A, RM_KIND_ENGINE, 0)                         \
    X(0xC8B5, HOPPER_DMA_COPY_A, RM_KIND_ENGINE, 0)                        \
    X(0xCBA2, HOPPER_SEC2_WORK_LAUNCH_A, RM_KIND_ENGINE, 0)                \
    X(0xCB33, NV_CONFIDENTIAL_COMPUTE, RM_KIND_OTHER, 0)                   \
    X(0xC561, AMPERE_USERMODE_A, RM_KIND_USERMODE, 2)                      \
    X(0xC661, HOPPER_USERMODE_A, RM_KIND_USERMODE, 2)                      \
    X(0xC761, BLACKWELL_USERMODE_A, RM_KIND_USERMODE, 2)

enum rm_class {
#define RM_CLASS_ENUM(id, name, kind, params) RM_CLASS_##name = (id),
    RM_CLASS_LIST(RM_CLASS_ENUM)
#undef RM_CLASS_ENUM
};

/* ---- controls ---------------------------------------------------------------------
 * X(cmd, NAME, params_size). params_size 0: none. The command's top 16 bits are the
 * class it is sent to. Names and sizes were checked against the 580 headers of the
 * open kernel modules (sizeof of each params struct); controls absent from the
 * public headers (seen in CUDA 13 traces) are left unnamed and print as hex. */
#define RM_CONTROL_LIST(X)                                                    \
    X(0x00000101, NV0000_SYSTEM_GET_BUILD_VERSION, 40)                        \
    X(0x0000013A, NV0000_SYSTEM_GET_P2P_CAPS_MATRIX, 1352)                    \
    X(0x000001F0, NV0000_SYSTEM_GET_FEATURES, 4)                              \
    X(0x00000201, NV0000_GPU_GET_ATTACHED_IDS, 128)                           \
    X(0x00000202, NV0000_GPU_GET_ID_INFO, 40)                                 \
    X(0x00000205, NV0000_GPU_GET_ID_INFO_V2, 32)                              \
    X(0x00000214, NV0000_GPU_GET_PROBED_IDS, 384)                             \
    X(0x00000215, NV0000_GPU_ATTACH_IDS, 132)                                 \
    X(0x0000027B, NV0000_GPU_GET_MEMOP_ENABLE, 4)                             \
    X(0x00000288, NV0000_GPU_GET_ACTIVE_DEVICE_IDS, 3076)                     \
    X(0x00000A04, NV0000_SYNC_GPU_BOOST_GROUP_INFO, 2244)                     \
    X(0x00000D01, NV0000_CLIENT_GET_ADDR_SPACE_TYPE, 12)                      \
    X(0x00000D04, NV0000_CLIENT_SET_INHERITED_SHARE_POLICY, 12)               \
    X(0x00000D06, NV0000_CLIENT_SHARE_OBJECT, 16)                             \
    X(0x00003D0B, NV0000_OS_UNIX_EXPORT_OBJECTS_TO_FD, 2128)                  \
    X(0x00800280, NV0080_GPU_GET_NUM_SUBDEVICES, 4)                           \
    X(0x00800289, NV0080_GPU_GET_VIRTUALIZATION_MODE, 8)                      \
    X(0x00800292, NV0080_GPU_GET_CLASSLIST_V2, 804)                           \
    X(0x00801307, NV0080_FB_GET_CAPS_V2, 3)                                   \
    X(0x00801402, NV0080_HOST_GET_CAPS_V2, 3)                                 \
    X(0x0080170D, NV0080_FIFO_GET_CHANNELLIST, 24)                            \
    X(0x00801711, NV0080_FIFO_STOP_RUNLIST, 4)                                \
    X(0x00801712, NV0080_FIFO_START_RUNLIST, 4)                               \
    X(0x00801714, NV0080_FIFO_IDLE_CHANNELS, 16396)                           \
    X(0x00801909, NV0080_PERF_CUDA_LIMIT_SET_CONTROL, 1)                      \
    X(0x20800102, NV2080_GPU_GET_INFO_V2, 564)                                \
    X(0x20800110, NV2080_GPU_GET_NAME_STRING, 132)                            \
    X(0x20800111, NV2080_GPU_GET_SHORT_NAME_STRING, 64)                       \
    X(0x20800119, NV2080_GPU_GET_SIMULATION_INFO, 4)                          \
    X(0x2080012F, NV2080_GPU_QUERY_ECC_STATUS, 1464)                          \
    X(0x20800131, NV2080_GPU_QUERY_COMPUTE_MODE_RULES, 4)                     \
    X(0x20800145, NV2080_GPU_ACQUIRE_COMPUTE_MODE_RESERVATION, 0)             \
    X(0x2080014A, NV2080_GPU_GET_GID_INFO, 268)                               \
    X(0x20800170, NV2080_GPU_GET_ENGINES_V2, 340)                             \
    X(0x2080018E, NV2080_GPU_GET_PID_INFO, 14408)                             \
    X(0x20800195, NV2080_GPU_GET_COMPUTE_POLICY_CONFIG, 260)                  \
    X(0x208001A3, NV2080_GET_GPU_FABRIC_PROBE_INFO, 56)                       \
    X(0x20801109, NV2080_FIFO_GET_INFO, 2056)                                 \
    X(0x2080110B, NV2080_FIFO_DISABLE_CHANNELS, 536)                          \
    X(0x20801115, NV2080_FIFO_RUNLIST_SET_SCHED_POLICY, 8)                    \
    X(0x20801201, NV2080_GR_GET_INFO, 32)                                     \
    X(0x20801210, NV2080_GR_SET_CTXSW_PREEMPTION_MODE, 32)                    \
    X(0x20801218, NV2080_GR_GET_CTX_BUFFER_SIZE, 16)                          \
    X(0x2080121B, NV2080_GR_GET_GLOBAL_SM_ORDER, 9240)                        \
    X(0x20801227, NV2080_GR_GET_CAPS_V2, 48)                                  \
    X(0x2080122A, NV2080_GR_GET_GPC_MASK, 24)                                 \
    X(0x2080122B, NV2080_GR_GET_TPC_MASK, 24)                                 \
    X(0x20801230, NV2080_GR_GET_SM_ISSUE_RATE_MODIFIER, 32)                   \
    X(0x20801301, NV2080_FB_GET_INFO, 16)                                     \
    X(0x20801303, NV2080_FB_GET_INFO_V2, 1028)                                \
    X(0x20801701, NV2080_MC_GET_ARCH_INFO, 16)                                \
    X(0x20801801, NV2080_BUS_GET_PCI_INFO, 16)                                \
    X(0x20801803, NV2080_BUS_GET_PCI_BAR_INFO, 200)                           \
    X(0x20801823, NV2080_BUS_GET_INFO_V2, 420)                                \
    X(0x2080182A, NV2080_BUS_GET_PCIE_SUPPORTED_GPU_ATOMICS, 112)             \
    X(0x2080182B, NV2080_BUS_GET_C2C_INFO, 28)                                \
    X(0x2080200A, NV2080_PERF_BOOST, 8)                                       \
    X(0x2080220C, NV2080_RC_RELEASE_WATCHDOG_REQUESTS, 0)                     \
    X(0x20802210, NV2080_RC_SOFT_DISABLE_WATCHDOG, 0)                         \
    X(0x20802A0A, NV2080_CE_GET_ALL_CAPS, 136)                                \
    X(0x20803002, NV2080_NVLINK_GET_NVLINK_STATUS, 13344)                     \
    X(0x20803601, NV2080_GSP_GET_FEATURES, 72)                                \
    X(0x20803801, NV2080_GRMGR_GET_GR_FS_INFO, 1928)                          \
    X(0x503C0102, NV503C_REGISTER_VA_SPACE, 16)                               \
    X(0x503C0104, NV503C_REGISTER_VIDMEM, 32)                                 \
    X(0x503C0105, NV503C_UNREGISTER_VIDMEM, 4)                                \
    X(0x83DE0309, NV83DE_DEBUG_SET_EXCEPTION_MASK, 4)                         \
    X(0x906F0101, NV906F_GET_CLASS_ENGINEID, 16)                              \
    X(0x90E60102, NV90E6_MASTER_GET_VF_ERROR_CONT_INTR_MASK, 8)               \
    X(0xA06C0101, NVA06C_GPFIFO_SCHEDULE, 3)                                  \
    X(0xA06C0102, NVA06C_BIND, 4)                                             \
    X(0xA06C0103, NVA06C_SET_TIMESLICE, 8)                                    \
    X(0xA06C0104, NVA06C_GET_TIMESLICE, 8)                                    \
    X(0xA06C0105, NVA06C_PREEMPT, 8)                                          \
    X(0xA06C0106, NVA06C_GET_INFO, 4)                                         \
    X(0xA06C0107, NVA06C_SET_INTERLEAVE_LEVEL, 4)                             \
    X(0xA06C0110, NVA06C_MAKE_REALTIME, 1)                                    \
    X(0xA06F0103, NVA06F_GPFIFO_SCHEDULE, 3)                                  \
    X(0xA06F0109, NVA06F_SET_INTERLEAVE_LEVEL, 4)                             \
    X(0xA06F0111, NVA06F_RESTART_RUNLIST, 2)                                  \
    X(0xA06F0112, NVA06F_STOP_CHANNEL, 1)                                     \
    X(0xC36F0108, NVC36F_GPFIFO_GET_WORK_SUBMIT_TOKEN, 4)                     \
    X(0xC36F010A, NVC36F_GPFIFO_SET_WORK_SUBMIT_TOKEN_NOTIF_INDEX, 4)         \
    X(0xCB330101, NV_CONF_COMPUTE_SYSTEM_GET_CAPABILITIES, 6)

/* Control numbers exceed int, so they are constants rather than enumerators. */
#define RM_CONTROL_CONST(cmd, name, size) static const uint32_t RM_CTRL_##name = (cmd);
RM_CONTROL_LIST(RM_CONTROL_CONST)
#undef RM_CONTROL_CONST

/* ---- status codes (nvstatuscodes.h) -------------------------------------------- */
#define RM_STATUS_LIST(X)                     \
    X(0x00, NV_OK)                            \
    X(0x0F, NV_ERR_GPU_IS_LOST)               \
    X(0x17, NV_ERR_IN_USE)                    \
    X(0x1A, NV_ERR_INSUFFICIENT_RESOURCES)    \
    X(0x1B, NV_ERR_INSUFFICIENT_PERMISSIONS)  \
    X(0x1F, NV_ERR_INVALID_ARGUMENT)          \
    X(0x22, NV_ERR_INVALID_CLASS)             \
    X(0x23, NV_ERR_INVALID_CLIENT)            \
    X(0x26, NV_ERR_INVALID_DEVICE)            \
    X(0x31, NV_ERR_INVALID_OBJECT)            \
    X(0x33, NV_ERR_INVALID_OBJECT_HANDLE)     \
    X(0x3A, NV_ERR_INVALID_PARAM_STRUCT)      \
    X(0x3B, NV_ERR_INVALID_PARAMETER)         \
    X(0x40, NV_ERR_INVALID_STATE)             \
    X(0x51, NV_ERR_NO_MEMORY)                 \
    X(0x56, NV_ERR_NOT_SUPPORTED)             \
    X(0x57, NV_ERR_OBJECT_NOT_FOUND)          \
    X(0x63, NV_ERR_STATE_IN_USE)              \
    X(0xFFFF, NV_ERR_GENERIC)

enum rm_status {
#define RM_STATUS_ENUM(code, name) RM_##name = (code),
    RM_STATUS_LIST(RM_STATUS_ENUM)
#undef RM_STATUS_ENUM
};

/* ---- /dev/nvidia-uvm commands (the request word is the plain number) ------------ */
#define RM_UVM_LIST(X)                                  \
    X(0x30000001, UVM_INITIALIZE, 16)                   \
    X(0x30000002, UVM_DEINITIALIZE, 8)                  \
    X(1, UVM_RESERVE_VA, 0)                             \
    X(2, UVM_RELEASE_VA, 0)                             \
    X(23, UVM_CREATE_RANGE_GROUP, 16)                   \
    X(24, UVM_DESTROY_RANGE_GROUP, 16)                  \
    X(25, UVM_REGISTER_GPU_VASPACE, 32)                 \
    X(26, UVM_UNREGISTER_GPU_VASPACE, 20)               \
    X(27, UVM_REGISTER_CHANNEL, 56)                     \
    X(28, UVM_UNREGISTER_CHANNEL, 28)                   \
    X(29, UVM_ENABLE_PEER_ACCESS, 40)                   \
    X(30, UVM_DISABLE_PEER_ACCESS, 40)                  \
    X(31, UVM_SET_RANGE_GROUP, 32)                      \
    X(33, UVM_MAP_EXTERNAL_ALLOCATION, 9264)            \
    X(34, UVM_FREE, 24)                                 \
    X(37, UVM_REGISTER_GPU, 40)                         \
    X(38, UVM_UNREGISTER_GPU, 24)                       \
    X(39, UVM_PAGEABLE_MEM_ACCESS, 8)                   \
    X(42, UVM_SET_PREFERRED_LOCATION, 40)               \
    X(43, UVM_UNSET_PREFERRED_LOCATION, 24)             \
    X(44, UVM_ENABLE_READ_DUPLICATION, 24)              \
    X(45, UVM_DISABLE_READ_DUPLICATION, 24)             \
    X(46, UVM_SET_ACCESSED_BY, 40)                      \
    X(47, UVM_UNSET_ACCESSED_BY, 40)                    \
    X(51, UVM_MIGRATE, 80)                              \
    X(53, UVM_MIGRATE_RANGE_GROUP, 32)                  \
    X(65, UVM_MAP_DYNAMIC_PARALLELISM_REGION, 40)       \
    X(66, UVM_UNMAP_EXTERNAL, 40)                       \
    X(68, UVM_ALLOC_SEMAPHORE_POOL, 9248)               \
    X(70, UVM_PAGEABLE_MEM_ACCESS_ON_GPU, 24)           \
    X(71, UVM_POPULATE_PAGEABLE, 0)                     \
    X(72, UVM_VALIDATE_VA_RANGE, 24)                    \
    X(73, UVM_CREATE_EXTERNAL_RANGE, 24)                \
    X(74, UVM_MAP_EXTERNAL_SPARSE, 0)                   \
    X(75, UVM_MM_INITIALIZE, 8)                         \
    X(78, UVM_ALLOC_DEVICE_P2P, 0)                      \
    X(80, UVM_DISCARD, 0)

/* ---- escapes: one list for names, nodes and sizes --------------------------------
 * X(nr, NAME, size, size2, node_mask, flags)
 *   size:  the exact argument size (0: variable or unknown), size2: a second legal
 *          size (RM_ALLOC's NVOS64 layout) or an element size with RM_ESC_ARRAY.
 *   node_mask: which nodes accept it (bits of 1 << enum rm_node). */
#define RM_ON_CTL (1u << RM_NODE_CTL)
#define RM_ON_DEV (1u << RM_NODE_DEV)
#define RM_ON_ANY (RM_ON_CTL | RM_ON_DEV)
#define RM_ESC_ARRAY 0x1u    /* size2 is an element size; any multiple is legal */
#define RM_ESC_NOHANDLER 0x2u /* no handler in 580: the driver answers -EINVAL */

#define RM_ESCAPE_LIST(X)                                                        \
    X(0x27, RM_ALLOC_MEMORY, 56, 0, RM_ON_DEV, 0)                                \
    X(0x28, RM_ALLOC_OBJECT, 20, 0, RM_ON_CTL, 0)                                \
    X(0x29, RM_FREE, 16, 0, RM_ON_CTL, 0)                                        \
    X(0x2A, RM_CONTROL, 32, 0, RM_ON_CTL, 0)                                     \
    X(0x2B, RM_ALLOC, 32, 48, RM_ON_ANY, 0)                                      \
    X(0x32, RM_CONFIG_GET, 0, 0, RM_ON_ANY, RM_ESC_NOHANDLER)                    \
    X(0x33, RM_CONFIG_SET, 0, 0, RM_ON_ANY, RM_ESC_NOHANDLER)                    \
    X(0x34, RM_DUP_OBJECT, 28, 0, RM_ON_CTL, 0)                                  \
    X(0x35, RM_SHARE, 24, 0, RM_ON_CTL, 0)                                       \
    X(0x37, RM_CONFIG_GET_EX, 0, 0, RM_ON_ANY, RM_ESC_NOHANDLER)                 \
    X(0x38, RM_CONFIG_SET_EX, 0, 0, RM_ON_ANY, RM_ESC_NOHANDLER)                 \
    X(0x39, RM_I2C_ACCESS, 0, 0, RM_ON_DEV, 0)                                   \
    X(0x41, RM_IDLE_CHANNELS, 56, 0, RM_ON_CTL, 0)                               \
    X(0x4A, RM_VID_HEAP_CONTROL, 184, 0, RM_ON_CTL, 0)                           \
    X(0x4D, RM_ACCESS_REGISTRY, 0, 0, RM_ON_ANY, 0)                              \
    X(0x4E, RM_MAP_MEMORY, 56, 0, RM_ON_CTL, 0)                                  \
    X(0x4F, RM_UNMAP_MEMORY, 32, 0, RM_ON_CTL, 0)                                \
    X(0x52, RM_GET_EVENT_DATA, 16, 0, RM_ON_ANY, 0)                              \
    X(0x54, RM_ALLOC_CONTEXT_DMA2, 0, 0, RM_ON_CTL, 0)                           \
    X(0x56, RM_ADD_VBLANK_CALLBACK, 0, 0, RM_ON_ANY, RM_ESC_NOHANDLER)           \
    X(0x57, RM_MAP_MEMORY_DMA, 64, 0, RM_ON_CTL, 0)                              \
    X(0x58, RM_UNMAP_MEMORY_DMA, 48, 0, RM_ON_CTL, 0)                            \
    X(0x59, RM_BIND_CONTEXT_DMA, 16, 0, RM_ON_CTL, 0)                            \
    X(0x5C, RM_EXPORT_OBJECT_TO_FD, 0, 0, RM_ON_ANY, RM_ESC_NOHANDLER)           \
    X(0x5D, RM_IMPORT_OBJECT_FROM_FD, 0, 0, RM_ON_ANY, RM_ESC_NOHANDLER)         \
    X(0x5E, RM_UPDATE_DEVICE_MAPPING_INFO, 40, 0, RM_ON_CTL, 0)                  \
    X(0x5F, RM_LOCKLESS_DIAGNOSTIC, 0, 0, RM_ON_ANY, 0)                          \
    X(0xC8, CARD_INFO, 0, 72, RM_ON_CTL, RM_ESC_ARRAY)                           \
    X(0xC9, REGISTER_FD, 4, 0, RM_ON_ANY, 0)                                     \
    X(0xCE, ALLOC_OS_EVENT, 16, 0, RM_ON_ANY, 0)                                 \
    X(0xCF, FREE_OS_EVENT, 16, 0, RM_ON_ANY, 0)                                  \
    X(0xD1, STATUS_CODE, 12, 0, RM_ON_CTL, 0)                                    \
    X(0xD2, CHECK_VERSION_STR, 72, 0, RM_ON_CTL, 0)                              \
    X(0xD3, IOCTL_XFER_CMD, 16, 0, RM_ON_ANY, 0)                                 \
    X(0xD4, ATTACH_GPUS_TO_FD, 0, 4, RM_ON_CTL, RM_ESC_ARRAY)                    \
    X(0xD5, QUERY_DEVICE_INTR, 8, 0, RM_ON_DEV, 0)                               \
    X(0xD6, SYS_PARAMS, 8, 0, RM_ON_CTL, 0)                                      \
    X(0xD7, NUMA_INFO, 560, 0, RM_ON_DEV, 0)                                     \
    X(0xD8, SET_NUMA_STATUS, 4, 0, RM_ON_DEV, 0)                                 \
    X(0xD9, EXPORT_TO_DMABUF_FD, 2608, 0, RM_ON_DEV, 0)                          \
    X(0xDA, WAIT_OPEN_COMPLETE, 8, 0, RM_ON_ANY, 0)

/* Largest argument the driver accepts through XFER. */
#define RM_XFER_MAX 16384u

#endif /* KAIROS_CORE_RM_ABI_H */
