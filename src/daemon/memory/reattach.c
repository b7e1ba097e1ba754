/* reattach.c - bounding a reattaching process's claim, and the window after a
 * restart in which kairosd grants nothing until its members are back (see
 * reattach.h). */
#include "daemon/memory/reattach.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/memory/credit.h"

/* What the backend reports pid uses on GPU g: true with *used when it can tell
 * (a listed process with a known size, or a complete list without pid: 0). */
static bool backend_used(struct gpu_backend *gpu, unsigned g, uint32_t pid, uint64_t *used)
{
    if (!gpu || !gpu->ops || !gpu->ops->processes)
        return false;
    struct gpu_proc *procs = NULL;
    size_t cap = 0, n = 0;
    bool known = false;
    if (gpu_processes_all(gpu, g, &procs, &cap, &n) == 0) {
        known = true; /* the whole list: a pid not in it uses nothing */
        *used = 0;
        for (size_t i = 0; i < n; i++)
            if (procs[i].pid == pid) {
                known = procs[i].used_valid;
                *used = procs[i].used;
                break;
            }
    }
    free(procs);
    return known;
}

uint64_t reattach_bound(const struct ledger_tenant *t, unsigned g, uint64_t claim, uint32_t pid,
                        struct gpu_backend *gpu, char *why, size_t why_len)
{
    why[0] = 0;
    uint64_t left = credit_room(t, g);
    uint64_t used, keep = CREDIT_KEEP_CHUNKS * credit_chunk(t->quota[g]);
    if (backend_used(gpu, g, pid, &used) && used + keep < claim && used + keep <= left) {
        snprintf(why, why_len, "the GPU reports %llu bytes for it, and it may keep %llu of "
                 "credit", (unsigned long long)used, (unsigned long long)keep);
        return used + keep;
    }
    if (claim > left) {
        snprintf(why, why_len, "the tenant's quota leaves %llu bytes", (unsigned long long)left);
        return left;
    }
    return claim;
}

static bool alive(uint32_t pid)
{
    return pid > 1 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

size_t reattach_window_start(struct reattach_window *w, const char *socket_path,
                             uint64_t now_ms)
{
    memset(w, 0, sizeof *w);
    if ((size_t)snprintf(w->path, sizeof w->path, "%s.members", socket_path) >= sizeof w->path) {
        w->path[0] = 0;
        return 0;
    }
    FILE *f = fopen(w->path, "re");
    if (!f)
        return 0;
    size_t cap = 0;
    unsigned long pid;
    while (fscanf(f, "%lu", &pid) == 1) {
        if (pid > UINT32_MAX || !alive((uint32_t)pid))
            continue;
        if (w->n_known == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            uint32_t *grown = realloc(w->known, ncap * sizeof *grown);
            if (!grown)
                break;
            w->known = grown;
            cap = ncap;
        }
        w->known[w->n_known++] = (uint32_t)pid;
    }
    fclose(f);
    w->until_ms = now_ms + REATTACH_WINDOW_MS;
    w->holding = w->n_known > 0;
    return w->n_known;
}

void reattach_window_fini(struct reattach_window *w)
{
    free(w->known);
    w->known = NULL;
    w->n_known = 0;
}

bool reattach_window_holds(const struct reattach_window *w, uint64_t now_ms)
{
    return w->n_known > 0 && now_ms < w->until_ms;
}

void reattach_window_joined(struct reattach_window *w, uint32_t pid, uint64_t now_ms)
{
    (void)now_ms;
    for (size_t i = 0; i < w->n_known; i++)
        if (w->known[i] == pid) {
            w->known[i] = w->known[--w->n_known];
            return;
        }
}

bool reattach_window_ended(struct reattach_window *w, uint64_t now_ms)
{
    if (!w->holding || reattach_window_holds(w, now_ms))
        return false;
    w->holding = false;
    return true;
}

void reattach_window_record(const struct reattach_window *w, const struct ledger *l)
{
    if (!w->path[0])
        return;
    char tmp[sizeof w->path + 8];
    snprintf(tmp, sizeof tmp, "%s.new", w->path);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return;
    for (const struct ledger_member *m = l->members; m; m = m->next)
        fprintf(f, "%u\n", m->pid);
    if (fclose(f) == 0)
        rename(tmp, w->path);
    else
        unlink(tmp);
}
