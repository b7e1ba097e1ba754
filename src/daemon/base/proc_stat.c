/* proc_stat.c - a process's parent and start time from /proc (see proc_stat.h). */
#include "daemon/base/proc_stat.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int proc_stat_read(const char *proc, uint32_t pid, uint32_t *ppid, uint64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "%s/%u/stat", proc, pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -ESRCH;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
    if (!p)
        return -ESRCH;
    /* fields from 3 (state) on; ppid is field 4, starttime field 22 */
    unsigned long long v[2];
    if (sscanf(p + 1, " %*c %llu %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                      "%*d %*d %llu", &v[0], &v[1]) != 2)
        return -ESRCH;
    *ppid = (uint32_t)v[0];
    *start = v[1];
    return 0;
}

bool proc_stat_alive(const char *proc, uint32_t pid, uint64_t start)
{
    uint32_t ppid;
    uint64_t now;
    return proc_stat_read(proc, pid, &ppid, &now) == 0 && now == start;
}

bool proc_stat_is_pid(const char *name)
{
    if (!*name)
        return false;
    for (; *name; name++)
        if (*name < '0' || *name > '9')
            return false;
    return true;
}
