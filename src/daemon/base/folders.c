/* folders.c - the folders above a path (see folders.h). */
#include "daemon/base/folders.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int folders_make_parents(const char *path)
{
    char dir[PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir)
        return -ENAMETOOLONG;
    char *end = strrchr(dir, '/');
    if (!end || end == dir)
        return 0; /* a bare name, or one in / */
    *end = 0;
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(dir, 0755) && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    return mkdir(dir, 0755) && errno != EEXIST ? -errno : 0;
}
