/* log_journal.c - kairosd's log entries in the systemd journal, with their
 * priority and structured fields, through libsystemd (no hand-written protocol).
 * Chosen by log.c when kairosd runs under systemd (JOURNAL_STREAM) or --log journal. */
#define SD_JOURNAL_SUPPRESS_LOCATION 1 /* CODE_FILE= would name log.c, never the caller */
#include "daemon/base/log_journal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include "daemon/base/log_fields.h"

bool log_journal_is_stderr(void)
{
    const char *env = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (!env || sscanf(env, "%llu:%llu", &dev, &ino) != 2 || fstat(2, &st))
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

int log_journal_send(int priority, const struct log_fields *fields, const char *text)
{
    char message[1100], prio[16], tenant[96], pid[32], gpu[32];
    struct iovec iov[6];
    int n = 0;
    snprintf(message, sizeof message, "MESSAGE=%s", text);
    snprintf(prio, sizeof prio, "PRIORITY=%d", priority);
    iov[n++] = (struct iovec){message, strlen(message)};
    iov[n++] = (struct iovec){prio, strlen(prio)};
    iov[n++] = (struct iovec){(char *)"SYSLOG_IDENTIFIER=kairosd", 25};
    if (fields && fields->tenant && *fields->tenant) {
        snprintf(tenant, sizeof tenant, "TENANT=%s", fields->tenant);
        iov[n++] = (struct iovec){tenant, strlen(tenant)};
    }
    if (fields && fields->pid) {
        snprintf(pid, sizeof pid, "PID=%u", fields->pid);
        iov[n++] = (struct iovec){pid, strlen(pid)};
    }
    if (fields && fields->gpu >= 0) {
        snprintf(gpu, sizeof gpu, "GPU=%d", fields->gpu);
        iov[n++] = (struct iovec){gpu, strlen(gpu)};
    }
    return sd_journal_sendv(iov, n);
}
