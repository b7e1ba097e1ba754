/* mps_server.c - NVIDIA MPS servers told from /proc by their executable's name, owner
 * and mode, and its folder's (see mps_server.h). */
#include "daemon/base/mps_server.h"
#include "daemon/base/proc_stat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DELETED " (deleted)"

/* Whether st is owned by owner and not writable by group or others. */
static bool owners_only(const struct stat *st, uint32_t owner)
{
    return st->st_uid == owner && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* Whether the executable of the process whose /proc folder is piddir is the server's
 * binary: its name, and it and its folder the owner's alone. */
static bool exe_is_server(int piddir, uint32_t owner)
{
    char path[4096];
    ssize_t n = readlinkat(piddir, "exe", path, sizeof path - 1);
    if (n <= 0 || path[0] != '/')
        return false; /* not allowed to look, a kernel thread, or not a path */
    path[n] = 0;
    size_t len = (size_t)n, dl = strlen(DELETED);
    if (len > dl && !strcmp(path + len - dl, DELETED))
        path[len -= dl] = 0;
    char *slash = strrchr(path, '/');
    if (strcmp(slash + 1, MPS_SERVER_EXE))
        return false;
    struct stat st;
    if (fstatat(piddir, "exe", &st, 0) || !S_ISREG(st.st_mode) || !owners_only(&st, owner))
        return false;
    /* the folder, as the process sees it: "root" + "/usr/bin" */
    char dir[sizeof path + 8];
    snprintf(dir, sizeof dir, "root%.*s", (int)(slash - path), path);
    return !fstatat(piddir, dir, &st, 0) && S_ISDIR(st.st_mode) && owners_only(&st, owner);
}

/* The real uid in piddir's status; UINT32_MAX when unknown. */
static uint32_t real_uid(int piddir)
{
    char buf[1024];
    int fd = openat(piddir, "status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return UINT32_MAX;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return UINT32_MAX;
    buf[n] = 0;
    const char *u = strstr(buf, "\nUid:");
    unsigned uid;
    return u && sscanf(u + 5, "%u", &uid) == 1 ? uid : UINT32_MAX;
}

static bool is_at(int piddir, uint32_t owner, uint32_t *uid)
{
    if (!exe_is_server(piddir, owner))
        return false;
    if (uid)
        *uid = real_uid(piddir);
    return true;
}

bool mps_server_is(const char *proc_root, uint32_t pid, uint32_t owner, uint32_t *uid)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%u", proc_root, pid);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool is = is_at(fd, owner, uid);
    close(fd);
    return is;
}

static void note_uid(struct mps_servers *out, uint32_t uid)
{
    for (size_t i = 0; i < out->n; i++)
        if (out->uid[i] == uid)
            return;
    if (out->n < MPS_SERVERS_MAX)
        out->uid[out->n++] = uid;
    else
        out->cut = true;
}

int mps_server_scan(const char *proc_root, uint32_t owner, struct mps_servers *out)
{
    *out = (struct mps_servers){.n = 0};
    DIR *d = opendir(proc_root);
    if (!d)
        return -errno;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!proc_stat_is_pid(e->d_name))
            continue;
        int piddir = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (piddir < 0)
            continue; /* exited meanwhile */
        uint32_t uid;
        if (is_at(piddir, owner, &uid) && uid != UINT32_MAX)
            note_uid(out, uid);
        close(piddir);
    }
    closedir(d);
    return 0;
}

bool mps_server_serves(const struct mps_servers *s, uint32_t uid)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->uid[i] == uid || s->uid[i] == 0)
            return true;
    return false;
}
