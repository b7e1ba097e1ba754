/* fake_proc.h - a temporary directory standing in for /proc, made before each test
 * (cmocka setup) and removed after (teardown), and the processes in it (their stat
 * and fd/3, and any other file or descriptor a test writes), for the tests of the
 * modules that read processes there (test_heirs.c, test_imports.c, test_audit.c,
 * test_mps_server.c). */
#ifndef KAIROS_TESTS_FAKE_PROC_H
#define KAIROS_TESTS_FAKE_PROC_H

#include <stdint.h>

/* The directory, valid between setup and teardown. */
extern char fake_proc_root[64];

int fake_proc_setup(void **state);
int fake_proc_teardown(void **state);
/* Process pid (again): <root>/<pid>/stat with its parent and start time, fd/ with
 * fd/3 a link to fd3 when given (none otherwise). */
void fake_proc_add(uint32_t pid, uint32_t ppid, unsigned long long start, const char *fd3);
/* <root>/<pid>/<name> holds text (comm, status, a stat of the test's own). */
void fake_proc_file(uint32_t pid, const char *name, const char *text);
/* <root>/<pid>/fd/<fd> is a link to target. */
void fake_proc_fd(uint32_t pid, int fd, const char *target);
/* <root>/<pid>/exe is a link to target, and <root>/<pid>/root one to "/" (the
 * process's root folder, as /proc shows it). */
void fake_proc_exe(uint32_t pid, const char *target);
/* An executable <root>/bin/nvidia-cuda-mps-server (mode 0755, in a folder of mode
 * 0755, both the test's own): its path. */
const char *fake_proc_mps_binary(void);
/* Process pid leaves: its directory is removed. */
void fake_proc_gone(uint32_t pid);

#endif /* KAIROS_TESTS_FAKE_PROC_H */
