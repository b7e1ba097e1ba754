/* fake_proc.h - a temporary directory standing in for /proc, made before each test
 * (cmocka setup) and removed after (teardown), for the tests of the modules that
 * read processes there (test_heirs.c, test_imports.c). */
#ifndef KAIROS_TESTS_FAKE_PROC_H
#define KAIROS_TESTS_FAKE_PROC_H

#include <stdint.h>

/* The directory, valid between setup and teardown. */
extern char fake_proc_root[64];

int fake_proc_setup(void **state);
int fake_proc_teardown(void **state);
/* Process pid leaves: its directory is removed. */
void fake_proc_gone(uint32_t pid);

#endif /* KAIROS_TESTS_FAKE_PROC_H */
