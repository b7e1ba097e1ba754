/* ipcapp.c - both sides of legacy CUDA IPC at the ioctl level, for tests.
 *
 * ipcapp export [-n N] [-s BYTES] [-t TYPE] [-a TARGET] [-R]
 *   opens /dev/nvidiactl, makes a client and a device, allocates N blocks of
 *   device memory (0x40) and shares each with other processes as
 *   cudaIpcGetMemHandle does: NV0000 CLIENT_SHARE_OBJECT (0xD06), or RM_SHARE with
 *   -R; TYPE is RM's share type (1 all, 2 same euid, 3 client TARGET, 4 pid TARGET;
 *   default 1). Prints "ipcapp: exported pid=P client=C objects=H,H,.. bytes=B".
 * ipcapp import -C CLIENT -O H,H,..
 *   opens /dev/nvidiactl, makes a client and a device and dups each object of
 *   CLIENT under its device (RM_DUP_OBJECT, as cudaIpcOpenMemHandle does). Prints
 *   "ipcapp: imported n=K failed=F status=S" (S: the first failure's RM status).
 * Then both read commands, one a line, from stdin: "free" frees what it made or
 * dup'd (prints "ipcapp: freed n=K"), "close" closes its /dev/nvidiactl
 * descriptor ("ipcapp: closed"), "exit" or the end of input exits at once
 * (nothing freed: the exit closes the files). The exporter also takes "again"
 * (after a free: allocates and shares its N blocks again under the same handles;
 * prints the export line, or "ipcapp: refused n=K status=S" at the first failure,
 * K made before it) and "churn K" (K times: allocate one block, share it, free it;
 * prints "ipcapp: churned n=K status=S", K done before the first failure).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/rm_abi.h"

#define MAX_OBJECTS 64

static int ctl = -1;
static uint32_t h_client, h_device;
static uint32_t objects[MAX_OBJECTS];
static int n_objects;
static uint32_t exported[MAX_OBJECTS]; /* the handles the exporter's blocks had */
static int n_exported;
static int export_n;
static uint64_t export_bytes;
static uint16_t export_type;
static uint32_t export_target;
static bool export_rm_share;

static uint32_t rm_alloc(uint32_t parent, uint32_t *handle, uint32_t cls, void *params)
{
    struct rm_alloc64_args a = {.h_client = h_client, .h_parent = parent, .h_object = *handle,
                                .h_class = cls, .params = (uintptr_t)params};
    if (ioctl(ctl, RM_IOWR(RM_NR_ALLOC, sizeof a), &a) != 0)
        return 0xffffffffu;
    *handle = a.h_object;
    return a.status;
}

static void must(uint32_t status, const char *what)
{
    if (status != 0) {
        fprintf(stderr, "ipcapp: %s failed: status 0x%x\n", what, status);
        exit(1);
    }
}

static void open_client(void)
{
    ctl = open("/dev/nvidiactl", O_RDWR | O_CLOEXEC);
    if (ctl < 0) {
        fprintf(stderr, "ipcapp: open /dev/nvidiactl: %s\n", strerror(errno));
        exit(1);
    }
    uint32_t h = 0;
    must(rm_alloc(0, &h, RM_CLASS_NV01_ROOT_CLIENT, NULL), "client");
    h_client = h;
    uint8_t dev_params[56] = {0}; /* deviceId 0 */
    must(rm_alloc(h_client, &h_device, RM_CLASS_NV01_DEVICE_0, dev_params), "device");
}

static uint32_t share(uint32_t object, uint16_t type, uint32_t target, bool rm_share)
{
    uint8_t policy[12] = {0};
    memcpy(policy, &target, 4);
    uint32_t mask = 1; /* RS_ACCESS_DUP_OBJECT */
    memcpy(policy + 4, &mask, 4);
    memcpy(policy + 8, &type, 2);
    if (rm_share) {
        struct rm_share_args a = {.h_client = h_client, .h_object = object, .target = target,
                                  .access_mask = mask, .type = type};
        if (ioctl(ctl, RM_IOWR(RM_NR_SHARE, sizeof a), &a) != 0)
            return 0xffffffffu;
        return a.status;
    }
    uint8_t params[16];
    memcpy(params, &object, 4);
    memcpy(params + 4, policy, sizeof policy);
    struct rm_control_args c = {.h_client = h_client, .h_object = h_client,
                                .cmd = RM_CTRL_NV0000_CLIENT_SHARE_OBJECT,
                                .params = (uintptr_t)params, .params_size = sizeof params};
    if (ioctl(ctl, RM_IOWR(RM_NR_CONTROL, sizeof c), &c) != 0)
        return 0xffffffffu;
    return c.status;
}

/* One block of device memory (under handle *h, 0: the driver picks), shared. */
static uint32_t alloc_shared(uint32_t *h, uint64_t *size)
{
    struct rm_memory_alloc_params mp;
    memset(&mp, 0, sizeof mp);
    mp.size = export_bytes;
    mp.attr = RM_ATTR_LOCATION_VIDMEM << 25;
    uint32_t st = rm_alloc(h_device, h, RM_CLASS_NV01_MEMORY_LOCAL_USER, &mp);
    if (st == 0)
        st = share(*h, export_type, export_target, export_rm_share);
    *size = mp.size;
    return st;
}

/* The exporter's N blocks (again: under the handles they had). */
static void export_blocks(bool again)
{
    uint64_t total = 0;
    char list[MAX_OBJECTS * 12] = "";
    for (int i = 0; i < export_n && i < MAX_OBJECTS; i++) {
        uint32_t h = again && i < n_exported ? exported[i] : 0;
        uint64_t size;
        uint32_t st = alloc_shared(&h, &size);
        if (st && !again)
            must(st, "vidmem or share");
        if (st) {
            printf("ipcapp: refused n=%d status=%u\n", i, st);
            return;
        }
        objects[n_objects++] = h;
        if (!again)
            exported[n_exported++] = h;
        total += size;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s0x%x", i ? "," : "", h);
    }
    printf("ipcapp: exported pid=%d client=0x%x objects=%s bytes=%llu\n", (int)getpid(),
           h_client, list, (unsigned long long)total);
}

static void do_export(int n, uint64_t bytes, uint16_t type, uint32_t target, bool rm_share)
{
    open_client();
    export_n = n;
    export_bytes = bytes;
    export_type = type;
    export_target = target;
    export_rm_share = rm_share;
    export_blocks(false);
}

static void churn(int k)
{
    int done = 0;
    uint32_t st = 0;
    for (; done < k; done++) {
        uint32_t h = 0;
        uint64_t size;
        if ((st = alloc_shared(&h, &size)) != 0)
            break;
        struct rm_free_args a = {.h_client = h_client, .h_object = h};
        if (ioctl(ctl, RM_IOWR(RM_NR_FREE, sizeof a), &a) != 0 || a.status != 0) {
            st = a.status ? a.status : 0xffffffffu;
            break;
        }
    }
    printf("ipcapp: churned n=%d status=%u\n", done, st);
}

static void do_import(uint32_t src_client, char *list)
{
    open_client();
    int failed = 0;
    uint32_t first = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        struct rm_dup_object_args d = {.h_client = h_client, .h_parent = h_device,
                                       .h_client_src = src_client,
                                       .h_object_src = (uint32_t)strtoul(tok, NULL, 0)};
        uint32_t st = ioctl(ctl, RM_IOWR(RM_NR_DUP_OBJECT, sizeof d), &d) ? 0xffffffffu
                                                                            : d.status;
        if (st == 0 && n_objects < MAX_OBJECTS) {
            objects[n_objects++] = d.h_object;
        } else if (st) {
            if (!failed++)
                first = st;
        }
    }
    printf("ipcapp: imported n=%d failed=%d status=%u\n", n_objects, failed, first);
}

static void serve_commands(void)
{
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "free", 4) == 0) {
            int freed = 0;
            for (int i = 0; i < n_objects; i++) {
                struct rm_free_args a = {.h_client = h_client, .h_object = objects[i]};
                freed += ioctl(ctl, RM_IOWR(RM_NR_FREE, sizeof a), &a) == 0 && a.status == 0;
            }
            n_objects = 0;
            printf("ipcapp: freed n=%d\n", freed);
        } else if (strncmp(line, "again", 5) == 0 && export_n) {
            export_blocks(true);
        } else if (strncmp(line, "churn ", 6) == 0 && export_n) {
            churn(atoi(line + 6));
        } else if (strncmp(line, "close", 5) == 0) {
            close(ctl);
            printf("ipcapp: closed\n");
        } else {
            break;
        }
        fflush(stdout);
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ipcapp export|import [options]\n");
        return 2;
    }
    bool exporting = strcmp(argv[1], "export") == 0;
    int n = 1, opt;
    uint64_t bytes = 2u << 20;
    uint16_t type = 1;
    uint32_t target = 0, src_client = 0;
    bool rm_share = false;
    char *list = NULL;
    optind = 2;
    while ((opt = getopt(argc, argv, "n:s:t:a:RC:O:")) != -1) {
        switch (opt) {
        case 'n':
            n = atoi(optarg);
            break;
        case 's':
            bytes = strtoull(optarg, NULL, 0);
            break;
        case 't':
            type = (uint16_t)atoi(optarg);
            break;
        case 'a':
            target = (uint32_t)strtoul(optarg, NULL, 0);
            break;
        case 'R':
            rm_share = true;
            break;
        case 'C':
            src_client = (uint32_t)strtoul(optarg, NULL, 0);
            break;
        case 'O':
            list = optarg;
            break;
        default:
            return 2;
        }
    }
    if (exporting)
        do_export(n, bytes, type, target, rm_share);
    else if (strcmp(argv[1], "import") == 0 && list)
        do_import(src_client, list);
    else
        return 2;
    serve_commands();
    return 0;
}
