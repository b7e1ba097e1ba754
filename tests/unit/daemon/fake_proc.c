/* fake_proc.c - the temporary /proc of the heirs, imports, audit and MPS server tests
 * (see fake_proc.h). */
#include "fake_proc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

char fake_proc_root[64];

void fake_proc_gone(uint32_t pid)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s/%u", fake_proc_root, pid);
    assert_int_equal(system(cmd), 0);
}

void fake_proc_add(uint32_t pid, uint32_t ppid, unsigned long long start, const char *fd3)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%u", fake_proc_root, pid);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%u/fd", fake_proc_root, pid);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%u/stat", fake_proc_root, pid);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%u (a b) S %u 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %llu 0 0\n", pid, ppid, start);
    fclose(f);
    snprintf(path, sizeof path, "%s/%u/fd/3", fake_proc_root, pid);
    unlink(path);
    if (fd3)
        assert_int_equal(symlink(fd3, path), 0);
}

void fake_proc_file(uint32_t pid, const char *name, const char *text)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%u/%s", fake_proc_root, pid, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

void fake_proc_fd(uint32_t pid, int fd, const char *target)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%u/fd/%d", fake_proc_root, pid, fd);
    unlink(path);
    assert_int_equal(symlink(target, path), 0);
}

void fake_proc_exe(uint32_t pid, const char *target)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%u/exe", fake_proc_root, pid);
    unlink(path);
    assert_int_equal(symlink(target, path), 0);
    snprintf(path, sizeof path, "%s/%u/root", fake_proc_root, pid);
    unlink(path);
    assert_int_equal(symlink("/", path), 0);
}

const char *fake_proc_mps_binary(void)
{
    static char path[128];
    char dir[96];
    snprintf(dir, sizeof dir, "%s/bin", fake_proc_root);
    mkdir(dir, 0755);
    assert_int_equal(chmod(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/nvidia-cuda-mps-server", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("#!/bin/false\n", f);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
    return path;
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
