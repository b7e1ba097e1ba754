/* fault_recovery.c - the clients a server's fault left, ended after a grace (see
 * fault_recovery.h). */
#include "daemon/space/fault_recovery.h"

#include <stdio.h>
#include <string.h>

void fault_recovery_note(struct fault_recovery *r, const char *domain, uint32_t gpu,
                         uint64_t now_ms, unsigned grace_ms,
                         const struct fault_recovery_client *clients, size_t n)
{
    struct fault_recovery_event *e = &r->v[0]; /* a free slot, else the oldest event's */
    for (size_t i = 0; i < FAULT_RECOVERY_EVENTS && e->domain[0]; i++)
        if (!r->v[i].domain[0] || r->v[i].due_ms < e->due_ms)
            e = &r->v[i];
    memset(e, 0, sizeof *e);
    snprintf(e->domain, sizeof e->domain, "%s", domain);
    e->gpu = gpu;
    e->due_ms = now_ms + grace_ms;
    e->until_ms = e->due_ms + FAULT_RECOVERY_WINDOW_MS;
    e->n = n < FAULT_RECOVERY_CLIENTS ? n : FAULT_RECOVERY_CLIENTS;
    for (size_t i = 0; i < e->n; i++) {
        e->c[i] = clients[i];
        e->c[i].asked = false;
    }
}

static bool listed(uint32_t pid, const uint32_t *pids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (pids[i] == pid)
            return true;
    return false;
}

size_t fault_recovery_due(struct fault_recovery *r, const char *domain, const uint32_t *pids,
                          size_t n, uint64_t now_ms, struct fault_recovery_end *out,
                          size_t cap)
{
    size_t found = 0;
    for (size_t i = 0; i < FAULT_RECOVERY_EVENTS; i++) {
        struct fault_recovery_event *e = &r->v[i];
        if (e->domain[0] && now_ms >= e->until_ms)
            e->domain[0] = 0; /* its window is over */
        if (!e->domain[0] || strcmp(e->domain, domain) || now_ms < e->due_ms)
            continue;
        for (size_t k = 0; k < e->n && found < cap; k++) {
            struct fault_recovery_client *c = &e->c[k];
            if (c->asked || !listed(c->pid, pids, n))
                continue;
            c->asked = true;
            out[found++] = (struct fault_recovery_end){.pid = c->pid, .start = c->start,
                                                       .gpu = e->gpu};
        }
    }
    return found;
}

size_t fault_recovery_pending(const struct fault_recovery *r)
{
    size_t n = 0;
    for (size_t i = 0; i < FAULT_RECOVERY_EVENTS; i++)
        n += r->v[i].domain[0] != 0;
    return n;
}
