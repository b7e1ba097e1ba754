/* log.h - kairosd's log: levels, stderr (with time) or syslog.
 *
 * Every decision the daemon makes is logged in words an operator understands.
 * The level is checked before any formatting (the macros below), so a debug line
 * costs one comparison when debug is off.
 *
 * Thread rules: kairosd is single-threaded; call from the loop thread only.
 */
#ifndef KAIROS_DAEMON_LOG_H
#define KAIROS_DAEMON_LOG_H

#include <stdbool.h>

enum log_level { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

extern enum log_level log_current_level;

/* use_syslog: send lines to syslog (facility daemon) instead of stderr. */
void log_init(enum log_level level, bool use_syslog);
void log_fini(void);

/* Parses "error", "warn", "info", "debug"; returns 0 or -EINVAL. */
int log_parse_level(const char *text, enum log_level *out);

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) do { if (log_current_level >= LOG_LEVEL_ERROR) log_write(LOG_LEVEL_ERROR, __VA_ARGS__); } while (0)
#define log_warn(...) do { if (log_current_level >= LOG_LEVEL_WARN) log_write(LOG_LEVEL_WARN, __VA_ARGS__); } while (0)
#define log_info(...) do { if (log_current_level >= LOG_LEVEL_INFO) log_write(LOG_LEVEL_INFO, __VA_ARGS__); } while (0)
#define log_debug(...) do { if (log_current_level >= LOG_LEVEL_DEBUG) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__); } while (0)

#endif /* KAIROS_DAEMON_LOG_H */
