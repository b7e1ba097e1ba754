/* ledger.c - the memory ledger: tenants' quotas and holdings, members and their
 * reservations. Pure bookkeeping; see ledger.h for the rules it enforces. */
#include "daemon/memory/ledger.h"

#include "core/grow.h"
#include "core/tenant_name.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
    return a < b ? 0 : a - b;
}

bool ledger_name_valid(const char *name)
{
    return tenant_name_valid(name);
}

int ledger_init(struct ledger *l, unsigned n_gpus)
{
    if (n_gpus > KAIROS_MAX_GPUS)
        return -EINVAL;
    memset(l, 0, sizeof *l);
    l->n_gpus = n_gpus;
    l->next_id = 1;
    return 0;
}

static void member_free(struct ledger_member *m)
{
    free(m->resv);
    free(m);
}

void ledger_fini(struct ledger *l)
{
    struct ledger_member *m = l->members;
    while (m) {
        struct ledger_member *next = m->next;
        member_free(m);
        m = next;
    }
    for (size_t i = 0; i < l->n_tenants; i++)
        free(l->tenants[i]);
    free(l->tenants);
    memset(l, 0, sizeof *l);
}

struct ledger_tenant *ledger_tenant_find(const struct ledger *l, const char *name)
{
    for (size_t i = 0; i < l->n_tenants; i++)
        if (!strncmp(l->tenants[i]->name, name, KAIROS_NAME_MAX))
            return l->tenants[i];
    return NULL;
}

int ledger_tenant_add(struct ledger *l, const char *name, const uint64_t *quota, unsigned flags,
                      struct ledger_tenant **out)
{
    if (!ledger_name_valid(name))
        return -EINVAL;
    if (ledger_tenant_find(l, name))
        return -EEXIST;
    if (l->n_tenants >= LEDGER_MAX_TENANTS)
        return -ENOSPC;
    if (l->n_tenants == l->cap_tenants) {
        size_t cap = l->cap_tenants ? l->cap_tenants * 2 : 8;
        struct ledger_tenant **grown = realloc(l->tenants, cap * sizeof *grown);
        if (!grown)
            return -ENOMEM;
        l->tenants = grown;
        l->cap_tenants = cap;
    }
    struct ledger_tenant *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    memcpy(t->name, name, strnlen(name, KAIROS_NAME_MAX - 1));
    t->id = l->next_id++;
    t->flags = flags;
    if (quota)
        for (unsigned g = 0; g < l->n_gpus; g++)
            t->quota[g] = quota[g];
    l->tenants[l->n_tenants++] = t;
    if (out)
        *out = t;
    return 0;
}

int ledger_tenant_set_quota(struct ledger *l, struct ledger_tenant *t, unsigned gpu,
                            uint64_t bytes)
{
    if (gpu >= l->n_gpus)
        return -EINVAL;
    t->quota[gpu] = bytes;
    return t->held[gpu] > bytes ? 1 : 0;
}

int ledger_tenant_remove(struct ledger *l, struct ledger_tenant *t)
{
    if (t->n_members)
        return -EBUSY;
    for (size_t i = 0; i < l->n_tenants; i++)
        if (l->tenants[i] == t) {
            memmove(&l->tenants[i], &l->tenants[i + 1],
                    (l->n_tenants - i - 1) * sizeof l->tenants[0]);
            l->n_tenants--;
            free(t);
            return 0;
        }
    return -ENOENT;
}

int ledger_join(struct ledger *l, struct ledger_tenant *t, uint32_t pid, const uint64_t *held,
                struct ledger_member **out)
{
    struct ledger_member *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->tenant = t;
    m->pid = pid;
    if (held)
        for (unsigned g = 0; g < l->n_gpus; g++) {
            m->held[g] = held[g];
            t->held[g] = sat_add(t->held[g], held[g]);
        }
    t->n_members++;
    t->had_member = true;
    m->next = l->members;
    l->members = m;
    *out = m;
    return 0;
}

struct ledger_tenant *ledger_leave(struct ledger *l, struct ledger_member *m, uint64_t *freed)
{
    struct ledger_tenant *t = m->tenant;
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        if (freed)
            freed[g] = m->held[g];
        t->held[g] = sat_sub(t->held[g], m->held[g]);
        t->credit[g] = sat_sub(t->credit[g], m->credit[g]);
    }
    t->n_members--;
    for (struct ledger_member **p = &l->members; *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            break;
        }
    member_free(m);
    return t;
}

int ledger_charge(struct ledger *l, struct ledger_member *m, unsigned gpu, uint64_t bytes,
                  uint64_t token, struct ledger_grant *out)
{
    if (gpu >= l->n_gpus || bytes == 0)
        return -EINVAL;
    struct ledger_tenant *t = m->tenant;
    out->quota = t->quota[gpu];
    /* held + draining + credit + bytes <= quota, without overflow */
    uint64_t taken = sat_add(sat_add(t->held[gpu], t->draining[gpu]), t->credit[gpu]);
    bool fits = taken <= t->quota[gpu] && bytes <= t->quota[gpu] - taken;
    if (!fits) {
        t->refusals[gpu]++;
        out->granted = false;
        out->held = t->held[gpu];
        return 0;
    }
    if (m->n_resv >= LEDGER_MAX_RESERVATIONS)
        return -ENOSPC;
    struct ledger_resv *grown = grow_for_one(m->resv, &m->cap_resv, m->n_resv, sizeof *grown, 4);
    if (!grown)
        return -ENOMEM;
    m->resv = grown;
    m->resv[m->n_resv++] = (struct ledger_resv){.token = token, .bytes = bytes, .gpu = gpu};
    m->held[gpu] += bytes;
    t->held[gpu] += bytes;
    out->granted = true;
    out->held = t->held[gpu];
    return 0;
}

/* What of actual a commit counts, the reservation of reserved just taken out: what
 * was reserved (granted), or all the quota has room for if that is more; *beyond
 * gets the rest. */
static uint64_t commit_bound(const struct ledger_tenant *t, unsigned gpu, uint64_t reserved,
                             uint64_t actual, uint64_t *beyond)
{
    uint64_t taken = sat_add(sat_add(t->held[gpu], t->draining[gpu]), t->credit[gpu]);
    uint64_t room = sat_sub(t->quota[gpu], taken);
    uint64_t most = reserved > room ? reserved : room;
    uint64_t counted = actual < most ? actual : most;
    *beyond = actual - counted;
    return counted;
}

int ledger_commit(struct ledger *l, struct ledger_member *m, unsigned gpu, uint64_t token, bool ok,
                  uint64_t actual, uint64_t *beyond)
{
    uint64_t none;
    beyond = beyond ? beyond : &none;
    *beyond = 0;
    if (gpu >= l->n_gpus)
        return -EINVAL;
    for (size_t i = 0; i < m->n_resv; i++) {
        struct ledger_resv *r = &m->resv[i];
        if (r->token != token || r->gpu != gpu)
            continue;
        struct ledger_tenant *t = m->tenant;
        /* take the reservation out, then count what was really allocated */
        m->held[gpu] = sat_sub(m->held[gpu], r->bytes);
        t->held[gpu] = sat_sub(t->held[gpu], r->bytes);
        if (ok) {
            uint64_t n = commit_bound(t, gpu, r->bytes, actual, beyond);
            m->held[gpu] = sat_add(m->held[gpu], n);
            t->held[gpu] = sat_add(t->held[gpu], n);
        }
        m->resv[i] = m->resv[--m->n_resv];
        return 0;
    }
    return -ENOENT;
}

int ledger_release(struct ledger *l, struct ledger_member *m, unsigned gpu, uint64_t bytes,
                   uint64_t *released)
{
    if (gpu >= l->n_gpus)
        return -EINVAL;
    uint64_t n = bytes > m->held[gpu] ? m->held[gpu] : bytes;
    m->held[gpu] -= n;
    m->tenant->held[gpu] = sat_sub(m->tenant->held[gpu], n);
    if (released)
        *released = n;
    return n < bytes ? -ERANGE : 0;
}

struct ledger_member *ledger_find_pid(const struct ledger *l, uint32_t pid)
{
    for (struct ledger_member *m = l->members; m; m = m->next)
        if (m->pid == pid)
            return m;
    return NULL;
}

int ledger_check(const struct ledger *l)
{
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct ledger_tenant *t = l->tenants[i];
        uint64_t sum[KAIROS_MAX_GPUS] = {0}, credit[KAIROS_MAX_GPUS] = {0};
        unsigned n = 0;
        for (const struct ledger_member *m = l->members; m; m = m->next) {
            if (m->tenant != t)
                continue;
            n++;
            for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
                sum[g] = sat_add(sum[g], m->held[g]);
                credit[g] = sat_add(credit[g], m->credit[g]);
            }
        }
        if (n != t->n_members)
            return -EPROTO;
        for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
            if (sum[g] != t->held[g] || credit[g] != t->credit[g])
                return -EPROTO;
    }
    return 0;
}
