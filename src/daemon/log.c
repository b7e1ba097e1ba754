/* log.c - kairosd's log lines: "kairosd[pid]: LEVEL: text" on stderr with a time
 * stamp, or syslog when asked (not in the foreground under an init system). */
#include "daemon/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

enum log_level log_current_level = LOG_LEVEL_INFO;
static bool log_syslog;

static const char *const log_names[] = {"error", "warn", "info", "debug"};

void log_init(enum log_level level, bool use_syslog)
{
    log_current_level = level;
    log_syslog = use_syslog;
    if (use_syslog)
        openlog("kairosd", LOG_PID, LOG_DAEMON);
}

void log_fini(void)
{
    if (log_syslog)
        closelog();
    log_syslog = false;
}

int log_parse_level(const char *text, enum log_level *out)
{
    for (unsigned i = 0; i < sizeof log_names / sizeof log_names[0]; i++)
        if (!strcmp(text, log_names[i])) {
            *out = (enum log_level)i;
            return 0;
        }
    return -EINVAL;
}

void log_write(enum log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (log_syslog) {
        static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
        vsyslog(prio[level], fmt, ap);
    } else {
        char stamp[32] = "";
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        if (localtime_r(&ts.tv_sec, &tm))
            strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
        char line[1024];
        int n = vsnprintf(line, sizeof line, fmt, ap);
        if (n < 0)
            snprintf(line, sizeof line, "(unformattable log line)");
        fprintf(stderr, "%s.%03ld kairosd[%d]: %s: %s\n", stamp, ts.tv_nsec / 1000000L,
                (int)getpid(), log_names[level], line);
        fflush(stderr);
    }
    va_end(ap);
}
