/* mps_env_probe.c - a probe preloaded into an MPS client (tests/gpu/probe/mps_route.sh):
 * logs, in order, every getenv of a CUDA_* name and every open/openat/connect of a
 * /dev/nvidia* path or a path under the MPS pipe directory, so the order in which
 * libcuda reads CUDA_MPS_PIPE_DIRECTORY and opens the driver is known. With
 * MPS_PROBE_PIPE / MPS_PROBE_PCT / MPS_PROBE_PRIO set, getenv answers those names
 * from them whatever the environment says (can the shim route a client by answering
 * getenv?). Not part of Kairos: a measurement tool. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;
static int log_fd = -2;

static const char *env_raw(const char *name)
{
    size_t n = strlen(name);
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static void note(const char *what, const char *a, const char *b)
{
    if (log_fd == -2) {
        const char *p = env_raw("MPS_PROBE_LOG");
        log_fd = p ? (int)syscall(SYS_openat, AT_FDCWD, p, O_WRONLY | O_CREAT | O_APPEND, 0644)
                   : -1;
    }
    if (log_fd < 0)
        return;
    char line[600];
    int len = snprintf(line, sizeof line, "%d %s %s %s\n", (int)syscall(SYS_gettid), what,
                       a ? a : "-", b ? b : "(null)");
    if (len > 0)
        (void)!write(log_fd, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
}

static const char *answer(const char *name, const char *real)
{
    const char *v = NULL;
    if (!strcmp(name, "CUDA_MPS_PIPE_DIRECTORY"))
        v = env_raw("MPS_PROBE_PIPE");
    else if (!strcmp(name, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"))
        v = env_raw("MPS_PROBE_PCT");
    else if (!strcmp(name, "CUDA_MPS_CLIENT_PRIORITY"))
        v = env_raw("MPS_PROBE_PRIO");
    return v ? v : real;
}

char *getenv(const char *name)
{
    const char *v = answer(name, env_raw(name));
    if (!strncmp(name, "CUDA", 4) || strstr(name, "MPS"))
        note("getenv", name, v);
    return (char *)v;
}

char *secure_getenv(const char *name)
{
    const char *v = answer(name, env_raw(name));
    if (!strncmp(name, "CUDA", 4) || strstr(name, "MPS"))
        note("secure_getenv", name, v);
    return (char *)v;
}

static int interesting(const char *p)
{
    const char *pipe = env_raw("MPS_PROBE_PIPE");
    if (!pipe)
        pipe = env_raw("CUDA_MPS_PIPE_DIRECTORY");
    return p && (!strncmp(p, "/dev/nvidia", 11) || strstr(p, "mps") ||
                 (pipe && !strncmp(p, pipe, strlen(pipe))));
}

#define OPEN_LIKE(fn, at)                                                                    \
    int fn(ARGS_##at)                                                                        \
    {                                                                                        \
        mode_t mode = 0;                                                                     \
        va_list ap;                                                                          \
        va_start(ap, flags);                                                                 \
        if (flags & (O_CREAT | O_TMPFILE))                                                   \
            mode = va_arg(ap, mode_t);                                                       \
        va_end(ap);                                                                          \
        int r = (int)syscall(SYS_openat, AT_VALUE_##at, path, flags, mode);                  \
        if (interesting(path)) {                                                             \
            char fdtxt[16];                                                                  \
            snprintf(fdtxt, sizeof fdtxt, "fd=%d", r);                                       \
            note(#fn, path, fdtxt);                                                          \
        }                                                                                    \
        return r;                                                                            \
    }
#define ARGS_0 const char *path, int flags, ...
#define ARGS_1 int dirfd, const char *path, int flags, ...
#define AT_VALUE_0 AT_FDCWD
#define AT_VALUE_1 dirfd
OPEN_LIKE(open, 0)
OPEN_LIKE(open64, 0)
OPEN_LIKE(openat, 1)
OPEN_LIKE(openat64, 1)

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    int r = (int)syscall(SYS_connect, fd, sa, len);
    if (sa && sa->sa_family == AF_UNIX) {
        const struct sockaddr_un *u = (const void *)sa;
        char res[16];
        snprintf(res, sizeof res, "rc=%d", r);
        note("connect", u->sun_path[0] ? u->sun_path : "@abstract", res);
    }
    return r;
}
