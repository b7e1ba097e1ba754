/* audit_findings.c - the audit's findings, each reported once while it stays (see
 * audit_findings.h). */
#include "daemon/observe/audit_findings.h"

#include <stdlib.h>

#include "core/grow.h"

void audit_findings_begin(struct audit_findings *f)
{
    for (size_t i = 0; i < f->n; i++)
        f->v[i].still = false;
}

struct audit_seen *audit_findings_get(struct audit_findings *f, uint32_t who, unsigned gpu,
                                      enum audit_kind kind, uint64_t now_ms)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i].who == who && f->v[i].gpu == gpu && f->v[i].kind == kind) {
            f->v[i].still = true;
            return &f->v[i];
        }
    struct audit_seen *v = grow_for_one(f->v, &f->cap, f->n, sizeof *v, 64);
    if (!v)
        return NULL;
    f->v = v;
    struct audit_seen *s = &f->v[f->n++];
    *s = (struct audit_seen){.who = who, .gpu = gpu, .kind = kind, .since_ms = now_ms,
                             .still = true};
    return s;
}

bool audit_findings_lasted(const struct audit_seen *s, uint64_t now_ms, uint64_t delay_ms)
{
    return !s || now_ms - s->since_ms >= delay_ms;
}

bool audit_findings_due(struct audit_findings *f, uint32_t who, unsigned gpu,
                        enum audit_kind kind, uint64_t now_ms, uint64_t delay_ms)
{
    struct audit_seen *s = audit_findings_get(f, who, gpu, kind, now_ms);
    if (!s)
        return delay_ms == 0;
    if (s->reported || !audit_findings_lasted(s, now_ms, delay_ms))
        return false;
    s->reported = true;
    return true;
}

void audit_findings_end(struct audit_findings *f, bool scanned)
{
    size_t k = 0;
    for (size_t i = 0; i < f->n; i++) {
        enum audit_kind kind = f->v[i].kind;
        bool scan_only = kind == AUDIT_OPENER || kind == AUDIT_HOLDER || kind == AUDIT_MPS_OPENER;
        if (f->v[i].still || (!scanned && scan_only))
            f->v[k++] = f->v[i];
    }
    f->n = k;
}

void audit_findings_free(struct audit_findings *f)
{
    free(f->v);
    *f = (struct audit_findings){0};
}
