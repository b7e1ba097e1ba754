/* log.h - kairosd's log: levels, and where lines go: stderr (with time), the systemd
 * journal (priority and TENANT=, PID=, GPU= fields) or syslog.
 *
 * Every decision the daemon makes is logged in words an operator understands.
 * The level is checked before any formatting (the macros below), so a debug line
 * costs one comparison when debug is off. A line about a tenant, a process or a GPU
 * says so in its fields too (log_about_*), which the journal keeps as fields.
 *
 * Thread rules: kairosd is single-threaded; call from the loop thread only.
 */
#ifndef KAIROS_DAEMON_LOG_H
#define KAIROS_DAEMON_LOG_H

#include <stdbool.h>

#include "daemon/base/log_fields.h"

enum log_level { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

/* auto: the journal when stderr is the journal's stream (under systemd), else stderr. */
enum log_target { LOG_TARGET_AUTO = 0, LOG_TARGET_STDERR, LOG_TARGET_JOURNAL, LOG_TARGET_SYSLOG };

extern enum log_level log_current_level;

void log_init(enum log_level level, enum log_target target);
void log_fini(void);
/* The target in use after log_init (auto resolved). */
enum log_target log_target_in_use(void);

/* Parses "error", "warn", "info", "debug"; returns 0 or -EINVAL. */
int log_parse_level(const char *text, enum log_level *out);
/* Parses "auto", "stderr", "journal", "syslog"; returns 0 or -EINVAL. */
int log_parse_target(const char *text, enum log_target *out);

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_write_fields(enum log_level level, const struct log_fields *fields, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_error(...) do { if (log_current_level >= LOG_LEVEL_ERROR) log_write(LOG_LEVEL_ERROR, __VA_ARGS__); } while (0)
#define log_warn(...) do { if (log_current_level >= LOG_LEVEL_WARN) log_write(LOG_LEVEL_WARN, __VA_ARGS__); } while (0)
#define log_info(...) do { if (log_current_level >= LOG_LEVEL_INFO) log_write(LOG_LEVEL_INFO, __VA_ARGS__); } while (0)
#define log_debug(...) do { if (log_current_level >= LOG_LEVEL_DEBUG) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__); } while (0)

/* A line about a tenant (NULL: none), a process (0: none), a GPU (< 0: none). */
#define log_about(level, tenant_, pid_, gpu_, ...)                                            \
    do {                                                                                    \
        if (log_current_level >= (level))                                                   \
            log_write_fields((level),                                                       \
                             &(struct log_fields){.tenant = (tenant_), .pid = (pid_),       \
                                                 .gpu = (gpu_)},                            \
                             __VA_ARGS__);                                                  \
    } while (0)
#define log_about_warn(t, p, g, ...) log_about(LOG_LEVEL_WARN, t, p, g, __VA_ARGS__)
#define log_about_info(t, p, g, ...) log_about(LOG_LEVEL_INFO, t, p, g, __VA_ARGS__)
#define log_about_error(t, p, g, ...) log_about(LOG_LEVEL_ERROR, t, p, g, __VA_ARGS__)

#endif /* KAIROS_DAEMON_LOG_H */
