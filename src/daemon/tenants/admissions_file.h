/* admissions_file.h - the admissions (members.h) kept across a kairosd restart, in
 * STATE.admissions beside the state file: a process admitted by kairos run or a
 * cluster integration must be let in again when its shim reattaches to the new
 * daemon. Each entry is a pid with its start time, so one that the restart
 * outlived but whose process is gone (its pid free or reused) is dropped on load.
 *
 *   {"version": 1, "admissions": [{"tenant": "job-7.0", "pid": 4242, "start": 98765, "by": 0}]}
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_ADMISSIONS_FILE_H
#define KAIROS_DAEMON_ADMISSIONS_FILE_H

#include <stddef.h>

#include "daemon/tenants/members.h"

/* STATE.admissions into out (cap bytes). */
void admissions_file_path(const char *state_path, char *out, size_t cap);

/* Writes a's admissions (temporary file renamed into place). 0 or -errno. */
int admissions_save(const struct admissions *a, const char *path);

/* Adds the file's admissions whose processes are still alive; a missing file is
 * none. Returns how many were kept, or -EINVAL for a corrupt file (nothing kept;
 * the caller logs it). */
int admissions_load(struct admissions *a, const char *path);

#endif /* KAIROS_DAEMON_ADMISSIONS_FILE_H */
