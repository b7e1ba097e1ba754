/* fake_proc.c - the temporary /proc of the heirs and imports tests (see fake_proc.h). */
#include "fake_proc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

char fake_proc_root[64];

void fake_proc_gone(uint32_t pid)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s/%u", fake_proc_root, pid);
    assert_int_equal(system(cmd), 0);
}

int fake_proc_setup(void **state)
{
    (void)state;
    snprintf(fake_proc_root, sizeof fake_proc_root, "/tmp/kairos-proc-XXXXXX");
    return mkdtemp(fake_proc_root) ? 0 : -1;
}

int fake_proc_teardown(void **state)
{
    (void)state;
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", fake_proc_root);
    return system(cmd) == 0 ? 0 : -1;
}
