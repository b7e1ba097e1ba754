/* tracer.c - trace mode of the shim (see tracer.h).
 *
 * Owns the trace descriptor, the writer mutex, the shared line buffer (one line
 * is formatted and written under the mutex, so one buffer suffices) and the
 * per-thread byte buffers (a pthread key, freed at thread exit). Nothing here
 * runs, and nothing is allocated, unless tracing was started.
 */
#include "shim/tracer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static atomic_int trace_fd = -1;
static pthread_mutex_t trace_mutex = PTHREAD_MUTEX_INITIALIZER;
static bool trace_is_socket;
static char *line;          /* TRACE_MAX_LINE bytes, under trace_mutex */
static int started_pid;     /* pid that wrote the last S line */
static pthread_key_t scratch_key;
static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static bool scratch_key_ok;

static void trace_prepare(void)
{
    pthread_mutex_lock(&trace_mutex);
}

static void trace_release(void)
{
    pthread_mutex_unlock(&trace_mutex);
}

static void scratch_free(void *p)
{
    free(p);
}

static void trace_setup(void)
{
    scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
    pthread_atfork(trace_prepare, trace_release, trace_release);
}

int tracer_start(int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return -EBADF;
    pthread_once(&trace_once, trace_setup);
    pthread_mutex_lock(&trace_mutex);
    if (!line)
        line = malloc(TRACE_MAX_LINE);
    if (!line) {
        pthread_mutex_unlock(&trace_mutex);
        return -ENOMEM;
    }
    trace_is_socket = S_ISSOCK(st.st_mode);
    started_pid = 0;
    atomic_store(&trace_fd, fd);
    pthread_mutex_unlock(&trace_mutex);
    return 0;
}

void tracer_start_from_env(void)
{
    const char *v = getenv("KAIROS_TRACE_FD");
    if (!v || !*v)
        return;
    char *end;
    errno = 0;
    long fd = strtol(v, &end, 10);
    if (errno || *end || fd < 0 || fd > 0x7fffffff)
        return;
    (void)tracer_start((int)fd);
}

void tracer_stop(void)
{
    if (atomic_load(&trace_fd) < 0)
        return;
    pthread_mutex_lock(&trace_mutex);
    atomic_store(&trace_fd, -1);
    pthread_mutex_unlock(&trace_mutex);
}

bool tracer_on(void)
{
    return atomic_load_explicit(&trace_fd, memory_order_relaxed) >= 0;
}

bool tracer_owns_fd(int fd)
{
    return fd >= 0 && atomic_load_explicit(&trace_fd, memory_order_relaxed) == fd;
}

double tracer_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

struct tracer_scratch *tracer_scratch(void)
{
    pthread_once(&trace_once, trace_setup);
    if (!scratch_key_ok)
        return NULL;
    struct tracer_scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        s = malloc(sizeof *s);
        if (s && pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            s = NULL;
        }
    }
    return s;
}

/* Writes one line; the caller holds trace_mutex. A failure stops tracing. */
static void trace_write_locked(int fd, const char *buf, size_t n)
{
    if (n == 0)
        return;
    for (;;) {
        ssize_t w;
        if (trace_is_socket)
            w = send(fd, buf, n, MSG_NOSIGNAL);
        else
            w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            atomic_store(&trace_fd, -1);
            return;
        }
        if ((size_t)w == n || trace_is_socket)
            return;
        buf += w; /* a short write to a plain file: finish the line */
        n -= (size_t)w;
    }
}

static void exe_name(char *out, size_t cap)
{
    snprintf(out, cap, "exe=%s", program_invocation_short_name);
    for (char *p = out + 4; *p; p++)
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '=')
            *p = '_';
}

/* Takes the mutex and returns the trace fd, writing the S line if this process
 * has not written one yet; -1 (mutex released) when tracing is off. */
static int trace_begin(int *pid)
{
    int saved = errno;
    pthread_mutex_lock(&trace_mutex);
    int fd = atomic_load(&trace_fd);
    if (fd < 0 || !line) {
        pthread_mutex_unlock(&trace_mutex);
        errno = saved;
        return -1;
    }
    *pid = getpid();
    if (started_pid != *pid) {
        char extra[160];
        exe_name(extra, sizeof extra);
        started_pid = *pid;
        trace_write_locked(fd, line, trace_format_start(line, TRACE_MAX_LINE, *pid, extra));
    }
    fd = atomic_load(&trace_fd);
    if (fd < 0)
        pthread_mutex_unlock(&trace_mutex);
    errno = saved;
    return fd;
}

static void trace_end(size_t n, int fd)
{
    int saved = errno;
    if (fd >= 0)
        trace_write_locked(fd, line, n);
    pthread_mutex_unlock(&trace_mutex);
    errno = saved;
}

void tracer_emit_open(int fd, const char *path)
{
    int pid, tfd = trace_begin(&pid);
    if (tfd >= 0)
        trace_end(trace_format_open(line, TRACE_MAX_LINE, pid, fd, path), tfd);
}

void tracer_emit_close(int fd)
{
    int pid, tfd = trace_begin(&pid);
    if (tfd >= 0)
        trace_end(trace_format_close(line, TRACE_MAX_LINE, pid, fd), tfd);
}

void tracer_emit_dup(int fd, int new_fd)
{
    int pid, tfd = trace_begin(&pid);
    if (tfd >= 0)
        trace_end(trace_format_dup(line, TRACE_MAX_LINE, pid, fd, new_fd), tfd);
}

void tracer_emit_ioctl(const struct trace_rec *rec)
{
    int pid, tfd = trace_begin(&pid);
    if (tfd >= 0)
        trace_end(trace_format_ioctl(line, TRACE_MAX_LINE, pid, rec), tfd);
}

void tracer_emit_mmap(const struct trace_rec *rec)
{
    int pid, tfd = trace_begin(&pid);
    if (tfd >= 0)
        trace_end(trace_format_mmap(line, TRACE_MAX_LINE, pid, rec), tfd);
}

void tracer_emit_munmap(uint64_t addr, uint64_t len)
{
    int pid, tfd = trace_begin(&pid);
    if (tfd >= 0)
        trace_end(trace_format_munmap(line, TRACE_MAX_LINE, pid, addr, len), tfd);
}
