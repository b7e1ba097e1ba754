/* kernel_log.c - reading the kernel log for kairosd (see kernel_log.h). */
#include "daemon/base/kernel_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int kernel_log_open(struct kernel_log *k, const char *path)
{
    memset(k, 0, sizeof *k);
    struct stat at;
    if (stat(path, &at))
        return -errno;
    /* a FIFO opened for writing too never reads as ended when its writer closes */
    int mode = S_ISFIFO(at.st_mode) ? O_RDWR : O_RDONLY;
    k->fd = open(path, mode | O_NONBLOCK | O_CLOEXEC);
    if (k->fd < 0)
        return -errno;
    struct stat st;
    if (fstat(k->fd, &st)) {
        int rc = -errno;
        close(k->fd);
        k->fd = -1;
        return rc;
    }
    k->kmsg = S_ISCHR(st.st_mode);
    if (k->kmsg)
        lseek(k->fd, 0, SEEK_END); /* from now on */
    return 0;
}

void kernel_log_close(struct kernel_log *k)
{
    if (k->fd >= 0)
        close(k->fd);
    k->fd = -1;
}

const char *kernel_log_record_text(char *rec)
{
    char *semi = strchr(rec, ';');
    if (!semi)
        return NULL;
    char *end;
    unsigned long prio = strtoul(rec, &end, 10);
    if (end == rec || *end != ',' || prio >> 3 != 0)
        return NULL;
    semi[strcspn(semi, "\n")] = 0; /* the dictionary lines after it are not the text */
    return semi + 1;
}

static int drain_kmsg(struct kernel_log *k, void (*line)(void *, const char *), void *ctx)
{
    for (;;) {
        ssize_t n = read(k->fd, k->buf, sizeof k->buf - 1);
        if (n < 0 && errno == EPIPE) {
            k->missed++; /* the ring overwrote records we had not read: go on */
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? 0 : -errno; /* EINVAL: a record beyond the buffer */
        if (n == 0)
            return 0;
        k->buf[n] = 0;
        const char *text = kernel_log_record_text(k->buf);
        if (text)
            line(ctx, text);
    }
}

/* Hands over the complete lines of buf[0..len), keeps the rest. */
static void split_lines(struct kernel_log *k, void (*line)(void *, const char *), void *ctx)
{
    size_t start = 0;
    for (size_t i = 0; i < k->len; i++) {
        if (k->buf[i] != '\n')
            continue;
        k->buf[i] = 0;
        if (!k->cutting)
            line(ctx, k->buf + start);
        k->cutting = false;
        start = i + 1;
    }
    memmove(k->buf, k->buf + start, k->len - start);
    k->len -= start;
    if (k->len == sizeof k->buf - 1) { /* a line longer than the buffer: cut it */
        k->buf[k->len] = 0;
        if (!k->cutting)
            line(ctx, k->buf);
        k->cutting = true;
        k->len = 0;
    }
}

static int drain_lines(struct kernel_log *k, void (*line)(void *, const char *), void *ctx)
{
    for (;;) {
        ssize_t n = read(k->fd, k->buf + k->len, sizeof k->buf - 1 - k->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? 0 : -errno;
        if (n == 0)
            return 1;
        k->len += (size_t)n;
        split_lines(k, line, ctx);
    }
}

int kernel_log_drain(struct kernel_log *k, void (*line)(void *ctx, const char *text), void *ctx)
{
    return k->kmsg ? drain_kmsg(k, line, ctx) : drain_lines(k, line, ctx);
}
