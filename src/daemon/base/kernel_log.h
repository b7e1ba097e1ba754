/* kernel_log.h - the kernel's log as kairosd reads it for the driver's fault reports:
 * /dev/kmsg from its end (what was logged before kairosd started is not news), one
 * record per read, only records of the kernel itself (facility 0: a line a program
 * wrote to /dev/kmsg is not the driver's); or, for tests, any other file or FIFO read
 * as plain lines.
 *
 * Thread rules: one reader, used from one thread.
 */
#ifndef KAIROS_DAEMON_KERNEL_LOG_H
#define KAIROS_DAEMON_KERNEL_LOG_H

#include <stdbool.h>
#include <stddef.h>

/* A /dev/kmsg read must hold a whole record with its dictionary (the kernel's
 * CONSOLE_EXT_LOG_MAX), or it fails with EINVAL and the record stays unread; plain
 * lines longer than this are cut. */
#define KERNEL_LOG_LINE_MAX 8192

struct kernel_log {
    int fd;
    bool kmsg;                   /* records of /dev/kmsg, else plain lines */
    char buf[KERNEL_LOG_LINE_MAX];
    size_t len;                  /* plain lines: the part of a line read so far */
    bool cutting;                /* plain lines: dropping the rest of a long line */
    unsigned long long missed;   /* kmsg: records overwritten before they were read */
};

/* Opens path nonblocking (/dev/kmsg, or a character device: records; anything else:
 * plain lines; a FIFO is opened for writing too, so that it never ends). 0, or
 * -errno. */
int kernel_log_open(struct kernel_log *k, const char *path);
void kernel_log_close(struct kernel_log *k);

/* Calls line(ctx, text) for every complete line readable now, without blocking;
 * returns 0 when there is nothing more for now, -errno on a read error (the caller
 * closes), or 1 when the writer of plain lines went away (a FIFO: the caller may
 * reopen). */
int kernel_log_drain(struct kernel_log *k, void (*line)(void *ctx, const char *text),
                     void *ctx);

/* One /dev/kmsg record "PRIO,SEQ,TS,FLAGS[,...];TEXT\n[ KEY=VALUE\n...]" (rec, changed):
 * its text when the record is of facility 0 (the kernel's), else NULL (a program's
 * line, or no record at all). */
const char *kernel_log_record_text(char *rec);

#endif /* KAIROS_DAEMON_KERNEL_LOG_H */
