/* shadow.c - shim-owned copies of the RM parameters the driver reads (see shadow.h).
 *
 * Runs in the application's thread that makes the ioctl (and in its signal
 * handlers, each with its own copy on its own stack frame).
 */
#include "shim/shadow.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/rm_names.h"
#include "shim/app_memory.h"
#include "shim/ipc.h"
#include "shim/tracer.h"

/* The escapes whose effect the object tree records (and memguard charges), and the
 * version handshake, whose answer decides whether the shim reads any of them
 * (driver_check.h). */
static bool is_recorded(uint32_t nr, size_t len)
{
    switch (nr) {
    case RM_NR_CHECK_VERSION_STR:
        return len == sizeof(struct rm_check_version_args);
    case RM_NR_ALLOC:
        return len == sizeof(struct rm_alloc_args) || len == sizeof(struct rm_alloc64_args);
    case RM_NR_ALLOC_OBJECT:
    case RM_NR_FREE:
    case RM_NR_VID_HEAP_CONTROL:
    case RM_NR_ALLOC_MEMORY:
    case RM_NR_DUP_OBJECT:
    case RM_NR_SHARE:
    case RM_NR_MAP_MEMORY:
        return len > 0 && len <= SHADOW_ARG_MAX;
    default:
        return false;
    }
}

static int pid_of(const struct shadow_call *s)
{
    return s->pid ? s->pid : getpid();
}

static bool read_app(const struct shadow_call *s, void *dst, const void *src, size_t len)
{
    return app_memory_read_as(pid_of(s), dst, src, len) == len;
}

static void write_app(const struct shadow_call *s, void *dst, const void *src, size_t len)
{
    app_memory_write_as(pid_of(s), dst, src, len);
}

/* RM_ALLOC: copies the class's parameters too and points the copy at them. */
static int capture_alloc_params(struct shadow_call *s)
{
    const size_t off = offsetof(struct rm_alloc_args, params); /* 16 in NVOS21 and NVOS64 */
    uint64_t ptr = bytes_u64(s->inner + off);
    uint32_t len = rm_class_params_size(bytes_u32(s->inner + offsetof(struct rm_alloc_args, h_class)));
    if (ptr == 0 || len == 0 || len > SHADOW_PARAMS_MAX)
        return 0; /* no parameters, or a class the shim records nothing of */
    if (!read_app(s, s->params, (const void *)(uintptr_t)ptr, len))
        return -EFAULT;
    uint64_t mine = (uint64_t)(uintptr_t)s->params;
    memcpy(s->inner + off, &mine, sizeof mine);
    s->app_params = ptr;
    s->params_off = off;
    s->params_len = len;
    return 0;
}

/* The controls whose effect the tree records: an export of memory objects to a
 * file, and a share of an object with other processes (ipc.h). */
static bool control_recorded(const struct rm_control_args *c)
{
    if (c->cmd == RM_CTRL_NV0000_OS_UNIX_EXPORT_OBJECTS_TO_FD)
        return c->params_size == sizeof(struct rm_export_objects_to_fd_params);
    return c->cmd == IPC_SHARE_CONTROL && c->params_size == IPC_SHARE_CONTROL_SIZE;
}

/* RM_CONTROL: the controls recorded are copied with their parameters; others are
 * left alone. */
static int capture_control(struct shadow_call *s, size_t len, void *app_inner)
{
    struct rm_control_args c;
    if (len != sizeof c || !read_app(s, &c, app_inner, sizeof c))
        return 0; /* the driver answers it; nothing recorded */
    if (!control_recorded(&c) || c.params == 0)
        return 0;
    memcpy(s->inner, &c, sizeof c);
    if (!read_app(s, s->params, (const void *)(uintptr_t)c.params, c.params_size))
        return -EFAULT;
    const size_t off = offsetof(struct rm_control_args, params);
    uint64_t mine = (uint64_t)(uintptr_t)s->params;
    memcpy(s->inner + off, &mine, sizeof mine);
    s->app_inner = app_inner;
    s->inner_len = len;
    s->app_params = c.params;
    s->params_off = off;
    s->params_len = c.params_size;
    return 0;
}

static int capture_inner(struct shadow_call *s, uint32_t nr, size_t len, void *app_inner)
{
    if (nr == RM_NR_CONTROL)
        return capture_control(s, len, app_inner);
    if (!is_recorded(nr, len))
        return 0; /* the driver reads the application's inner argument; nothing recorded */
    if (!read_app(s, s->inner, app_inner, len))
        return -EFAULT;
    s->app_inner = app_inner;
    s->inner_len = len;
    if (nr == RM_NR_ALLOC)
        return capture_alloc_params(s);
    return 0;
}

int shadow_capture(struct shadow_call *s, uint32_t request, void *arg)
{
    s->active = false;
    s->xfer = false;
    s->app_arg = arg;
    s->app_inner = NULL;
    s->app_params = 0;
    s->inner_len = s->params_len = 0;
    if (RM_IOC_TYPEOF(request) != RM_IOC_TYPE)
        return 0;
    uint32_t nr = RM_IOC_NR(request);
    size_t len = RM_IOC_SIZE(request);
    if (nr == RM_NR_XFER && len == sizeof(struct rm_xfer_args)) {
        /* The header is always ours: the driver runs the call the shim saw. */
        if (!read_app(s, &s->header, arg, sizeof s->header))
            return -EFAULT;
        s->active = s->xfer = true;
        if (s->header.cmd > 0xff || s->header.size > RM_XFER_MAX)
            return 0; /* the driver refuses it */
        s->inner_req = RM_IOWR(s->header.cmd, s->header.size);
        int rc = capture_inner(s, s->header.cmd, s->header.size,
                               (void *)(uintptr_t)s->header.ptr);
        if (rc == 0 && s->app_inner)
            s->header.ptr = (uint64_t)(uintptr_t)s->inner;
        return rc;
    }
    s->inner_req = request;
    int rc = capture_inner(s, nr, len, arg);
    s->active = rc == 0 && s->app_inner != NULL;
    return rc;
}

void *shadow_arg(struct shadow_call *s, void *arg)
{
    if (!s->active)
        return arg;
    return s->xfer ? (void *)&s->header : (void *)s->inner;
}

uint8_t *shadow_inner(struct shadow_call *s)
{
    return s->active && s->app_inner ? s->inner : NULL;
}

void shadow_reply(const struct shadow_call *s)
{
    if (!s->active || !s->app_inner)
        return; /* the header is not written back by the driver either */
    uint8_t out[SHADOW_ARG_MAX];
    memcpy(out, s->inner, s->inner_len);
    if (s->params_len) {
        memcpy(out + s->params_off, &s->app_params, sizeof s->app_params);
        write_app(s, (void *)(uintptr_t)s->app_params, s->params, s->params_len);
    }
    write_app(s, s->app_inner, out, s->inner_len);
}

static bool within(const void *p, size_t len, const void *base, size_t cap)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;
    return a >= b && len <= cap && a - b <= cap - len;
}

bool shadow_owns(const struct shadow_call *s, const void *p, size_t len)
{
    return s && s->active && p &&
           (within(p, len, s->inner, sizeof s->inner) ||
            within(p, len, s->params, sizeof s->params) ||
            (s->xfer && within(p, len, &s->header, sizeof s->header)));
}
