/* log_fields.h - what a log line is about (a tenant, a process, a GPU): the fields the
 * log (log.h) takes and its journal backend (log_journal.h) writes as TENANT=, PID=,
 * GPU=. Apart from both, so that the backend needs nothing of its caller.
 */
#ifndef KAIROS_DAEMON_LOG_FIELDS_H
#define KAIROS_DAEMON_LOG_FIELDS_H

/* tenant NULL, pid 0 and gpu < 0 are "not about one". */
struct log_fields {
    const char *tenant;
    unsigned pid;
    int gpu;
};

#endif /* KAIROS_DAEMON_LOG_FIELDS_H */
