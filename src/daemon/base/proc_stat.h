/* proc_stat.h - a process's parent and start time, from <proc>/<pid>/stat, and
 * which names of a /proc folder are processes.
 *
 * The start time (field 22, clock ticks since boot) tells a process from a later
 * one that reuses its pid: the membership's admissions and the hand-overs of
 * NVIDIA files (heirs.h) keep (pid, start time), never a pid alone.
 *
 * Thread rules: no state.
 */
#ifndef KAIROS_DAEMON_PROC_STAT_H
#define KAIROS_DAEMON_PROC_STAT_H

#include <stdbool.h>
#include <stdint.h>

/* ppid and start time of pid under proc ("/proc", or a test's copy): 0, or -ESRCH
 * when the process is gone or its stat cannot be read. */
int proc_stat_read(const char *proc, uint32_t pid, uint32_t *ppid, uint64_t *start);

/* Whether pid is still the process that started at start. */
bool proc_stat_alive(const char *proc, uint32_t pid, uint64_t start);

/* Whether an entry of a /proc folder names a process (all digits, not empty). */
bool proc_stat_is_pid(const char *name);

#endif /* KAIROS_DAEMON_PROC_STAT_H */
