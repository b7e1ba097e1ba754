/* log_journal.h - kairosd's lines to the systemd journal (libsystemd's
 * sd_journal_sendv): the message, its priority and the fields that name what it is
 * about (TENANT=, PID=, GPU=), so `journalctl -u kairosd TENANT=training` finds a
 * tenant's lines. Also: whether stderr is the journal (JOURNAL_STREAM).
 *
 * Thread rules: none of its own; kairosd calls it from the loop thread.
 */
#ifndef KAIROS_DAEMON_LOG_JOURNAL_H
#define KAIROS_DAEMON_LOG_JOURNAL_H

#include <stdbool.h>

#include "daemon/base/log_fields.h"

/* True when stderr is the stream systemd connected to the journal: JOURNAL_STREAM
 * ("DEVICE:INODE") names the file stderr is. */
bool log_journal_is_stderr(void);

/* Sends one entry: MESSAGE=text, PRIORITY (syslog's 0-7), SYSLOG_IDENTIFIER=kairosd
 * and the fields that are set. Returns 0 or a negative errno (no journal). */
int log_journal_send(int priority, const struct log_fields *fields, const char *text);

#endif /* KAIROS_DAEMON_LOG_JOURNAL_H */
