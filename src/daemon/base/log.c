/* log.c - kairosd's log lines: "kairosd[pid]: LEVEL: text" on stderr with a time
 * stamp; under systemd (stderr is the journal's stream) or with --log journal the
 * journal with a priority and fields (log_journal.c); syslog when asked. */
#include "daemon/base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "daemon/base/log_journal.h"

enum log_level log_current_level = LOG_LEVEL_INFO;
static enum log_target log_target = LOG_TARGET_STDERR;

static const char *const log_names[] = {"error", "warn", "info", "debug"};
static const char *const target_names[] = {"auto", "stderr", "journal", "syslog"};
static const int log_priority[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};

void log_init(enum log_level level, enum log_target target)
{
    log_current_level = level;
    if (target == LOG_TARGET_AUTO)
        target = log_journal_is_stderr() ? LOG_TARGET_JOURNAL : LOG_TARGET_STDERR;
    log_target = target;
    if (target == LOG_TARGET_SYSLOG)
        openlog("kairosd", LOG_PID, LOG_DAEMON);
}

void log_fini(void)
{
    if (log_target == LOG_TARGET_SYSLOG)
        closelog();
    log_target = LOG_TARGET_STDERR;
}

enum log_target log_target_in_use(void)
{
    return log_target;
}

static int parse_name(const char *text, const char *const *names, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!strcmp(text, names[i]))
            return (int)i;
    return -EINVAL;
}

int log_parse_level(const char *text, enum log_level *out)
{
    int i = parse_name(text, log_names, sizeof log_names / sizeof log_names[0]);
    if (i < 0)
        return i;
    *out = (enum log_level)i;
    return 0;
}

int log_parse_target(const char *text, enum log_target *out)
{
    int i = parse_name(text, target_names, sizeof target_names / sizeof target_names[0]);
    if (i < 0)
        return i;
    *out = (enum log_target)i;
    return 0;
}

static void write_stderr(enum log_level level, const char *line)
{
    char stamp[32] = "";
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (localtime_r(&ts.tv_sec, &tm))
        strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(stderr, "%s.%03ld kairosd[%d]: %s: %s\n", stamp, ts.tv_nsec / 1000000L,
            (int)getpid(), log_names[level], line);
    fflush(stderr);
}

static void log_vwrite(enum log_level level, const struct log_fields *fields, const char *fmt,
                       va_list ap) __attribute__((format(printf, 3, 0)));
static void log_vwrite(enum log_level level, const struct log_fields *fields, const char *fmt,
                       va_list ap)
{
    char line[1024];
    if (vsnprintf(line, sizeof line, fmt, ap) < 0)
        snprintf(line, sizeof line, "(unformattable log line)");
    switch (log_target) {
    case LOG_TARGET_SYSLOG:
        syslog(log_priority[level], "%s", line);
        break;
    case LOG_TARGET_JOURNAL:
        if (log_journal_send(log_priority[level], fields, line) == 0)
            break;
        /* no journal after all: the line must not be lost */
        /* fall through */
    default:
        write_stderr(level, line);
    }
}

void log_write(enum log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, NULL, fmt, ap);
    va_end(ap);
}

void log_write_fields(enum log_level level, const struct log_fields *fields, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, fields, fmt, ap);
    va_end(ap);
}
