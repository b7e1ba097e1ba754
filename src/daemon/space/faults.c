/* faults.c - attributing the driver's Xid reports to tenants (see faults.h). */
#include "daemon/space/faults.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/memory/ledger.h"
#include "daemon/space/mps_domains.h"
#include "daemon/tenants/settings_book.h"

void faults_init(struct faults *f)
{
    memset(f, 0, sizeof *f);
}

void faults_fini(struct faults *f)
{
    free(f->v);
    memset(f, 0, sizeof *f);
}

const struct fault_record *faults_find(const struct faults *f, const char *tenant)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->v[i].tenant, tenant))
            return &f->v[i];
    return NULL;
}

/* Drops the records of tenants the ledger no longer has. */
static void prune(struct faults *f, const struct ledger *l)
{
    size_t kept = 0;
    for (size_t i = 0; i < f->n; i++)
        if (ledger_tenant_find(l, f->v[i].tenant))
            f->v[kept++] = f->v[i];
    f->n = kept;
}

/* t's record, made when it has none (NULL: no memory). At most one per tenant. */
static struct fault_record *record_of(struct faults *f, const struct ledger *l,
                                      const struct ledger_tenant *t)
{
    struct fault_record *r = (struct fault_record *)faults_find(f, t->name);
    if (r)
        return r;
    if (f->n == f->cap) {
        prune(f, l);
        if (f->n == f->cap) {
            size_t cap = f->cap ? f->cap * 2 : 8;
            struct fault_record *v = realloc(f->v, cap * sizeof *v);
            if (!v)
                return NULL;
            f->v = v;
            f->cap = cap;
        }
    }
    r = &f->v[f->n++];
    memset(r, 0, sizeof *r);
    /* a copy, not snprintf: GCC's -O2 with the sanitizers took r for NULL there */
    memcpy(r->tenant, t->name, strnlen(t->name, sizeof r->tenant - 1));
    return r;
}

static void count(struct faults *f, const struct ledger *l, const struct ledger_tenant *t,
                  bool caused, const struct xid_report *x, const struct fault_context *c)
{
    struct fault_record *r = record_of(f, l, t);
    if (!r)
        return;
    if (caused)
        r->caused++;
    else
        r->lost++;
    r->last_xid = x->xid;
    r->last_gpu = c->gpu;
    r->last_unix_ms = c->unix_ms;
    r->last_caused = caused;
}

/* Whether the same domain had an event on this GPU within FAULTS_SAME_EVENT_MS; this
 * one is remembered either way. */
static bool same_event(struct faults *f, const char *domain, uint32_t gpu, uint64_t now_ms)
{
    bool same = false;
    for (size_t i = 0; i < sizeof f->recent / sizeof f->recent[0]; i++) {
        struct fault_event *e = &f->recent[i];
        if (e->domain[0] && !strcmp(e->domain, domain) && e->gpu == gpu &&
            now_ms - e->mono_ms < FAULTS_SAME_EVENT_MS) {
            e->mono_ms = now_ms;
            same = true;
        }
    }
    if (!same) {
        struct fault_event *e = &f->recent[f->next_recent++ % (sizeof f->recent /
                                                               sizeof f->recent[0])];
        snprintf(e->domain, sizeof e->domain, "%s", domain);
        e->gpu = gpu;
        e->mono_ms = now_ms;
    }
    return same;
}

/* Whether member m's process had memory on gpu (any GPU when the GPU is unknown). */
static bool on_gpu(const struct ledger *l, const struct ledger_member *m, uint32_t gpu)
{
    if (gpu != FAULTS_GPU_UNKNOWN)
        return gpu < l->n_gpus && m->held[gpu] > 0;
    for (unsigned g = 0; g < l->n_gpus; g++)
        if (m->held[g])
            return true;
    return false;
}

/* Whether tenant t of domain has a process holding memory on the report's GPU. */
static bool candidate(const struct ledger *l, const struct settings_book *sb,
                      const struct ledger_tenant *t, const char *domain, uint32_t gpu)
{
    if (strcmp(settings_book_of(sb, t->id)->fault_domain, domain))
        return false;
    for (const struct ledger_member *m = l->members; m; m = m->next)
        if (m->tenant == t && on_gpu(l, m, gpu))
            return true;
    return false;
}

size_t faults_domain_members_on(const struct ledger *l, const struct settings_book *sb,
                                const char *domain, uint32_t gpu, uint32_t *out, size_t cap)
{
    size_t n = 0;
    for (const struct ledger_member *m = l->members; m; m = m->next) {
        if (strcmp(settings_book_of(sb, m->tenant->id)->fault_domain, domain) ||
            !on_gpu(l, m, gpu))
            continue;
        if (n < cap)
            out[n] = m->pid;
        n++;
    }
    return n;
}

/* The tenants of domain with a process on the GPU: how many, and the first of them. */
static unsigned candidates(const struct ledger *l, const struct settings_book *sb,
                           const char *domain, uint32_t gpu, const struct ledger_tenant **first)
{
    unsigned n = 0;
    *first = NULL;
    for (size_t i = 0; i < l->n_tenants; i++)
        if (candidate(l, sb, l->tenants[i], domain, gpu) && !n++)
            *first = l->tenants[i];
    return n;
}

/* Counts a lost-work fault for every tenant of domain with a process on the GPU; their
 * names go into names. */
static void count_losers(struct faults *f, const struct ledger *l,
                         const struct settings_book *sb, const char *domain,
                         const struct xid_report *x, const struct fault_context *c,
                         char *names, size_t cap)
{
    unsigned n = 0;
    names[0] = 0;
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct ledger_tenant *t = l->tenants[i];
        if (!candidate(l, sb, t, domain, c->gpu))
            continue;
        count(f, l, t, false, x, c);
        size_t used = strlen(names);
        snprintf(names + used, cap - used, "%s%s", n++ ? ", " : "", t->name);
    }
}

static void gpu_text(const struct xid_report *x, uint32_t gpu, char *out, size_t cap)
{
    if (gpu == FAULTS_GPU_UNKNOWN)
        snprintf(out, cap, "the GPU at PCI %04x:%02x:%02x (none of kairosd's)", x->pci.domain,
                 x->pci.bus, x->pci.device);
    else
        snprintf(out, cap, "GPU %u", gpu);
}

/* What the report says of the process it names, for a domain's fault: a member of the
 * domain (under MPS not the culprit, only a client of the same server) or its server. */
static void named_text(const struct xid_report *x, const struct ledger_member *named,
                       char *out, size_t cap)
{
    if (named)
        snprintf(out, cap, "process %u (%s) of tenant %s", x->pid, x->name,
                 named->tenant->name);
    else
        snprintf(out, cap, "the domain's MPS server (pid %u)", x->pid);
}

/* A fault in the MPS server of domain, which the report named by one of its clients or
 * by the server itself: the culprit is the domain's only tenant on the GPU, or one of
 * them that the driver does not say; every one of them lost its work. */
static int domain_fault(struct faults *f, const struct ledger *l,
                        const struct settings_book *sb, const struct xid_report *x,
                        const struct fault_context *c, const struct ledger_member *named,
                        const char *domain, const char *where, struct fault_domain_event *ev,
                        char *line, size_t cap)
{
    char who[160], names[512];
    named_text(x, named, who, sizeof who);
    if (same_event(f, domain, c->gpu, c->mono_ms))
        return snprintf(line, cap, "fault: Xid %u on %s in fault domain %s: the same event "
                        "as the report before (the driver names %s)", x->xid, where, domain,
                        who);
    if (ev && c->gpu != FAULTS_GPU_UNKNOWN) {
        ev->set = true;
        snprintf(ev->domain, sizeof ev->domain, "%s", domain);
        ev->gpu = c->gpu;
    }
    const struct ledger_tenant *only;
    unsigned n = candidates(l, sb, domain, c->gpu, &only);
    if (n == 1) {
        count(f, l, only, true, x, c);
        return snprintf(line, cap, "fault: Xid %u on %s in fault domain %s: tenant %s caused "
                        "it, the domain's only tenant with a process there (the driver names "
                        "%s)", x->xid, where, domain, only->name, who);
    }
    if (n == 0)
        return snprintf(line, cap, "fault: Xid %u on %s in fault domain %s: no tenant of the "
                        "domain has a process there (the driver names %s)", x->xid, where,
                        domain, who);
    count_losers(f, l, sb, domain, x, c, names, sizeof names);
    return snprintf(line, cap, "fault: Xid %u on %s in fault domain %s: one of its clients "
                    "caused it and the driver does not say which (it names %s%s); %s lost "
                    "their work", x->xid, where, domain, who,
                    named ? ", the one it names under MPS whichever client faulted" : "", names);
}

void faults_on_xid(struct faults *f, const struct ledger *l, const struct settings_book *sb,
                   const struct mps_domains *m, const struct xid_report *x,
                   const struct fault_context *c, struct fault_domain_event *ev, char *line,
                   size_t cap)
{
    if (ev)
        ev->set = false;
    f->total++;
    char where[96], domain[KAIROS_NAME_MAX] = "";
    gpu_text(x, c->gpu, where, sizeof where);
    const struct ledger_member *named = x->pid ? ledger_find_pid(l, x->pid) : NULL;
    if (named)
        snprintf(domain, sizeof domain, "%s",
                 settings_book_of(sb, named->tenant->id)->fault_domain);
    else if (x->pid && m)
        mps_domains_server_domain(m, c->proc, x->pid, domain, sizeof domain);
    int len;
    if (domain[0]) {
        len = domain_fault(f, l, sb, x, c, named, domain, where, ev, line, cap);
    } else if (named) {
        count(f, l, named->tenant, true, x, c);
        len = snprintf(line, cap, "fault: Xid %u on %s: process %u (%s) of tenant %s caused it",
                       x->xid, where, x->pid, x->name, named->tenant->name);
    } else {
        f->outside++;
        len = x->pid ? snprintf(line, cap, "fault: Xid %u on %s: process %u (%s) is in no "
                                "tenant", x->xid, where, x->pid, x->name)
                     : snprintf(line, cap, "fault: Xid %u on %s: the driver named no process",
                                x->xid, where);
    }
    if (len >= 0 && (size_t)len < cap && x->detail[0])
        snprintf(line + len, cap - (size_t)len, " (%s)", x->detail);
}
