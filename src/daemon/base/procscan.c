/* procscan.c - openers of the NVIDIA device nodes through /proc (see procscan.h). */
#include "daemon/base/procscan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/grow.h"
#include "daemon/base/proc_stat.h"

#define PF_EXITING 0x00000004u /* include/linux/sched.h */
#define KCMP_FILES 2           /* include/uapi/linux/kcmp.h */

/* Reads a small file under dirfd into buf (NUL-terminated); length or -1. */
static ssize_t read_small(int dirfd, const char *name, char *buf, size_t cap)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return n;
}

static void describe_at(int piddir, uint32_t pid, struct procscan_proc *out)
{
    char buf[1024];
    *out = (struct procscan_proc){.pid = pid, .uid = UINT32_MAX, .exists = true};
    snprintf(out->comm, sizeof out->comm, "?");
    if (read_small(piddir, "comm", buf, sizeof buf) > 0) {
        buf[strcspn(buf, "\n")] = 0;
        buf[PROCSCAN_COMM_MAX - 1] = 0;
        memcpy(out->comm, buf, PROCSCAN_COMM_MAX);
    }
    if (read_small(piddir, "status", buf, sizeof buf) > 0) {
        const char *u = strstr(buf, "\nUid:");
        unsigned uid;
        if (u && sscanf(u + 5, "%u", &uid) == 1)
            out->uid = uid;
    }
    if (read_small(piddir, "stat", buf, sizeof buf) > 0) {
        /* after the command's closing parenthesis: state ppid pgrp session tty tpgid flags */
        const char *p = strrchr(buf, ')');
        unsigned ppid, flags;
        if (p && sscanf(p + 1, " %*c %u %*d %*d %*d %*d %u", &ppid, &flags) == 2) {
            out->ppid = ppid;
            out->exiting = flags & PF_EXITING;
        }
    }
}

void procscan_describe(const char *proc_root, uint32_t pid, struct procscan_proc *out)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%u", proc_root, pid);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        *out = (struct procscan_proc){.pid = pid, .uid = UINT32_MAX};
        snprintf(out->comm, sizeof out->comm, "?");
        return;
    }
    describe_at(fd, pid, out);
    close(fd);
}

/* Which nodes the descriptors of one process point to; false when it has none. */
static bool scan_fds(int piddir, const struct procscan_nodes *nodes, size_t *budget,
                     size_t *descriptors, bool *cut, struct procscan_opener *o)
{
    int fdd = openat(piddir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fdd < 0)
        return false; /* another user's, or gone */
    DIR *d = fdopendir(fdd);
    if (!d) {
        close(fdd);
        return false;
    }
    size_t plen = strlen(nodes->prefix);
    char target[128];
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (!*budget) {
            *cut = true;
            break;
        }
        (*budget)--;
        (*descriptors)++;
        ssize_t n = readlinkat(fdd, e->d_name, target, sizeof target - 1);
        if (n <= 0 || (size_t)n < plen)
            continue;
        target[n] = 0;
        if (memcmp(target, nodes->prefix, plen))
            continue;
        unsigned g = 0;
        while (g < nodes->n && strcmp(target, nodes->node[g]))
            g++;
        if (g < nodes->n)
            o->gpus |= 1u << g;
        else
            o->driver = true;
    }
    closedir(d);
    return o->gpus || o->driver;
}

static int push(struct procscan *s, const struct procscan_opener *o)
{
    struct procscan_opener *v = grow_for_one(s->v, &s->cap, s->n, sizeof *v, 32);
    if (!v)
        return -ENOMEM;
    s->v = v;
    s->v[s->n++] = *o;
    return 0;
}

/* A thread may have a descriptor table of its own (unshare(CLONE_FILES)), which
 * /proc/PID/fd does not show: the threads of pid whose table kcmp says differs from
 * the leader's are scanned too (where kcmp is not available, none is). */
static void scan_threads(int piddir, uint32_t pid, const struct procscan_nodes *nodes,
                         size_t *budget, size_t *descriptors, bool *cut,
                         struct procscan_opener *o)
{
    int taskfd = openat(piddir, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (taskfd < 0)
        return;
    DIR *d = fdopendir(taskfd);
    if (!d) {
        close(taskfd);
        return;
    }
    struct dirent *e;
    while (!*cut && (e = readdir(d))) {
        if (!proc_stat_is_pid(e->d_name))
            continue;
        long tid = strtol(e->d_name, NULL, 10);
        if ((uint32_t)tid == pid || syscall(SYS_kcmp, (pid_t)pid, (pid_t)tid, KCMP_FILES, 0, 0) <= 0)
            continue; /* the leader's table, the same table, or kcmp cannot tell */
        int tdir = openat(taskfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (tdir >= 0) {
            scan_fds(tdir, nodes, budget, descriptors, cut, o);
            close(tdir);
        }
    }
    closedir(d);
}

int procscan_run(struct procscan *s, const char *proc_root, const struct procscan_nodes *nodes,
                 size_t budget)
{
    s->n = s->processes = s->descriptors = 0;
    s->cut = false;
    DIR *d = opendir(proc_root);
    if (!d)
        return -errno;
    int rc = 0;
    struct dirent *e;
    while (!rc && !s->cut && (e = readdir(d))) {
        if (!proc_stat_is_pid(e->d_name))
            continue;
        int piddir = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (piddir < 0)
            continue; /* exited meanwhile */
        s->processes++;
        uint32_t pid = (uint32_t)strtoul(e->d_name, NULL, 10);
        struct procscan_opener o = {0};
        scan_fds(piddir, nodes, &budget, &s->descriptors, &s->cut, &o);
        scan_threads(piddir, pid, nodes, &budget, &s->descriptors, &s->cut, &o);
        if (o.gpus || o.driver) {
            describe_at(piddir, pid, &o.proc);
            rc = push(s, &o);
        }
        close(piddir);
    }
    closedir(d);
    return rc;
}

const struct procscan_opener *procscan_find(const struct procscan *s, uint32_t pid)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].proc.pid == pid)
            return &s->v[i];
    return NULL;
}

void procscan_fini(struct procscan *s)
{
    free(s->v);
    *s = (struct procscan){0};
}
