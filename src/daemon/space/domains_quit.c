/* domains_quit.c - kairosd --quit-domains: every fault domain's MPS control daemon left
 * by a stopped kairosd asked to quit, and waited for (see domains_quit.h). */
#include "daemon/space/domains_quit.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon/space/mps_domains.h"

/* Whether a kairosd accepts connections on path. */
static bool kairosd_answers(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return false;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool up = !connect(fd, (struct sockaddr *)&sa, sizeof sa);
    close(fd);
    return up;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static bool exited(const struct mps_daemon *d)
{
    struct pollfd p = {.fd = d->pidfd, .events = POLLIN};
    return d->pidfd < 0 || poll(&p, 1, 0) > 0;
}

/* How many of m's daemons still run, each checked without waiting. */
static size_t still_running(const struct mps_domains *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n; i++)
        n += m->v[i]->pid > 0 && !exited(m->v[i]);
    return n;
}

static void wait_for_exits(const struct mps_domains *m, double wait_s)
{
    double deadline = now_s() + wait_s;
    while (still_running(m) && now_s() < deadline) {
        struct pollfd p[MPS_DOMAINS_MAX];
        nfds_t n = 0;
        for (size_t i = 0; i < m->n; i++)
            if (m->v[i]->pid > 0 && !exited(m->v[i]))
                p[n++] = (struct pollfd){.fd = m->v[i]->pidfd, .events = POLLIN};
        int left_ms = (int)((deadline - now_s()) * 1000) + 1;
        if (poll(p, n, left_ms) < 0 && errno != EINTR)
            return;
    }
}

/* One line a daemon; the pid file of one that has quit goes. */
static void report(const struct mps_domains *m, FILE *out)
{
    for (size_t i = 0; i < m->n; i++) {
        const struct mps_daemon *d = m->v[i];
        if (d->pid <= 0)
            continue;
        char who[32];
        if (d->uid == MPS_SHARED_UID)
            snprintf(who, sizeof who, "all uids");
        else
            snprintf(who, sizeof who, "uid %u", d->uid);
        if (exited(d)) {
            char pidfile[MPS_DIR_MAX + 16];
            snprintf(pidfile, sizeof pidfile, "%s/control.pid", d->dir);
            unlink(pidfile); /* no next kairosd reads a pid that may be another's by then */
            fprintf(out, "%s (%s): the MPS control daemon (pid %d) has quit\n", d->domain,
                    who, (int)d->pid);
        } else
            fprintf(out, "%s (%s): the MPS control daemon (pid %d) still runs: it takes "
                         "no new client and quits once its clients have ended\n",
                    d->domain, who, (int)d->pid);
    }
}

int domains_quit_run(const char *socket_path, const struct space_config *cfg, double wait_s,
                     FILE *out, FILE *err)
{
    if (kairosd_answers(socket_path)) {
        fprintf(err, "kairosd: a kairosd is running on %s and would start its fault domains' "
                     "MPS daemons again: stop it first (systemctl stop kairosd)\n",
                socket_path);
        return 1;
    }
    char root[MPS_ROOT_MAX], why[512];
    mps_domains_root_of(socket_path, root, sizeof root);
    struct stat st;
    if (stat(root, &st) && errno == ENOENT) {
        fprintf(out, "no fault domain's MPS control daemon to quit (%s does not exist)\n", root);
        return 0;
    }
    static struct mps_domains m; /* MPS_DOMAINS_MAX pointers: not on the stack */
    if (mps_domains_open(&m, root, NULL, cfg, why, sizeof why)) {
        fprintf(err, "kairosd: %s\n", why);
        return 1;
    }
    size_t asked = mps_domains_quit_all(&m);
    if (!asked)
        fprintf(out, "no fault domain's MPS control daemon runs under %s (no pid file there "
                     "names a live %s)\n", root, cfg->mps_control);
    wait_for_exits(&m, wait_s);
    report(&m, out);
    size_t left = still_running(&m);
    mps_domains_close(&m);
    return left ? 1 : 0;
}
