/* handovers.c - saving the hand-overs and lingering charges into the state file
 * after each change, and believing them back at start as far as /proc can check
 * them (see handovers.h). */
#include "daemon/tenants/handovers.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/memory/credit.h"
#include "daemon/base/log.h"

struct handovers {
    struct loop *loop;
    struct loop_watch *w; /* the delayed save (one-shot timer) */
    bool pending;
    struct heirs *heirs;
    struct linger_set *linger;
    struct tenants *ts;
    char boot_id[HANDOVERS_BOOT_ID_MAX];
};

static void read_boot_id(const char *proc, char *out, size_t cap)
{
    char path[256];
    snprintf(path, sizeof path, "%s/sys/kernel/random/boot_id", proc);
    out[0] = 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    if (!fgets(out, (int)cap, f))
        out[0] = 0;
    fclose(f);
    out[strcspn(out, "\n")] = 0;
}

/* The section as it stands (tenants_save_state's hook): the edges, and each
 * lingering member's tenant, process (pid, start time as kairosd knows it) and
 * charge. */
static json_t *snapshot(void *ctx)
{
    struct handovers *hs = ctx;
    struct handovers_saved s = {.edges = hs->heirs->v, .n_edges = hs->heirs->n};
    snprintf(s.boot_id, sizeof s.boot_id, "%s", hs->boot_id);
    size_t n = linger_count(hs->linger);
    s.lingering = n ? calloc(n, sizeof *s.lingering) : NULL;
    uint32_t pid;
    const struct ledger_member *m;
    for (size_t i = 0; s.lingering && (m = linger_at(hs->linger, i, &pid)); i++) {
        struct saved_linger *l = &s.lingering[s.n_lingering++];
        snprintf(l->tenant, sizeof l->tenant, "%s", m->tenant->name);
        l->pid = pid;
        l->start = heirs_start_of(hs->heirs, pid);
        memcpy(l->held, m->held, sizeof l->held);
    }
    json_t *j = handovers_state_json(&s, hs->ts->n_gpus);
    free(s.lingering);
    return j;
}

static void save_now(struct handovers *hs)
{
    char err[512];
    hs->pending = false;
    tenants_save_state(hs->ts, NULL, err, sizeof err); /* a failure is logged there */
}

static void on_timer(void *ctx, int fd, uint32_t events)
{
    (void)events;
    uint64_t expirations;
    (void)!read(fd, &expirations, sizeof expirations);
    save_now(ctx);
}

/* A change: saved HANDOVERS_SAVE_DELAY_MS from the first one not saved yet, so a
 * burst of forks costs one write. Once (loop_timer_set would make it a period: the
 * whole state rewritten every 100 ms for good, the loop serving nothing meanwhile). */
static void on_change(void *ctx)
{
    struct handovers *hs = ctx;
    if (hs->pending)
        return;
    hs->pending = true;
    loop_timer_after_ms(hs->w, HANDOVERS_SAVE_DELAY_MS);
}

int handovers_init(struct handovers **out, struct loop *loop, struct heirs *h,
                   struct linger_set *lg, struct tenants *ts, const char *proc_root)
{
    struct handovers *hs = calloc(1, sizeof *hs);
    if (!hs)
        return -ENOMEM;
    *hs = (struct handovers){.loop = loop, .heirs = h, .linger = lg, .ts = ts};
    if (!(hs->w = loop_add_timer(loop, 0, on_timer, hs))) {
        int rc = errno ? -errno : -ENOMEM;
        free(hs);
        return rc;
    }
    read_boot_id(proc_root ? proc_root : "/proc", hs->boot_id, sizeof hs->boot_id);
    heirs_set_changed_hook(h, on_change, hs);
    linger_set_changed_hook(lg, on_change, hs);
    ts->handovers_json = snapshot;
    ts->handovers_ctx = hs;
    *out = hs;
    return 0;
}

void handovers_fini(struct handovers *hs)
{
    if (!hs)
        return;
    if (hs->pending)
        save_now(hs);
    heirs_set_changed_hook(hs->heirs, NULL, NULL);
    linger_set_changed_hook(hs->linger, NULL, NULL);
    hs->ts->handovers_json = NULL;
    hs->ts->handovers_ctx = NULL;
    loop_del_close(hs->loop, hs->w);
    free(hs);
}

static unsigned restore_edges(struct handovers *hs, const struct handovers_saved *s)
{
    unsigned kept = 0;
    for (size_t i = 0; i < s->n_edges; i++) {
        const struct heir_edge *e = &s->edges[i];
        char why[256];
        int rc = heirs_restore(hs->heirs, e, why, sizeof why);
        if (rc == 0)
            kept++;
        else if (rc != 1)
            log_warn("state: the hand-over of pid %u's NVIDIA files to pid %u (%s) is not "
                     "believed: %s", e->from_pid, e->pid, heir_kind_name(e->kind), why);
    }
    return kept;
}

/* l's charge cut to t's room on each GPU (what is left of its quota); logs a cut. */
static void bounded(struct ledger_tenant *t, const struct saved_linger *l, unsigned n_gpus,
                    uint64_t held[KAIROS_MAX_GPUS])
{
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++) {
        uint64_t room = g < n_gpus ? credit_room(t, g) : 0;
        held[g] = l->held[g] < room ? l->held[g] : room;
        char a[32], b[32];
        if (held[g] < l->held[g])
            log_warn("state: departed pid %u's charge of %s on GPU %u is more than tenant %s's "
                     "quota leaves; %s restored", l->pid, tenants_size(l->held[g], a, sizeof a),
                     g, t->name, tenants_size(held[g], b, sizeof b));
    }
}

static unsigned restore_lingering(struct handovers *hs, const struct handovers_saved *s)
{
    unsigned kept = 0;
    for (size_t i = 0; i < s->n_lingering; i++) {
        const struct saved_linger *l = &s->lingering[i];
        struct ledger_tenant *t = ledger_tenant_find(&hs->ts->ledger, l->tenant);
        if (!t) {
            log_warn("state: departed pid %u's charge is for tenant %s, which does not exist "
                     "(any more); not restored", l->pid, l->tenant);
            continue;
        }
        uint64_t held[KAIROS_MAX_GPUS];
        bounded(t, l, hs->ts->n_gpus, held);
        bool vouched = l->start && heirs_hold_as(hs->heirs, l->pid, l->start);
        if (linger_restore(hs->linger, t, l->pid, held, vouched)) {
            kept++;
            log_info("tenant %s: departed pid %u's charge restored: its NVIDIA files are still "
                     "held", t->name, l->pid);
        } else {
            log_info("tenant %s: departed pid %u's charge not restored: no verified holder of "
                     "its NVIDIA files (or GPU listing it) is left", t->name, l->pid);
        }
    }
    return kept;
}

void handovers_restore(struct handovers *hs)
{
    struct handovers_saved *s = &hs->ts->saved_handovers;
    if (s->n_edges || s->n_lingering) {
        if (!hs->boot_id[0] || strcmp(s->boot_id, hs->boot_id) != 0) {
            log_info("state: %zu hand-over(s) and %zu lingering charge(s) were saved in "
                     "another boot; forgotten (their processes are gone)", s->n_edges,
                     s->n_lingering);
        } else {
            unsigned edges = restore_edges(hs, s);
            unsigned lingering = restore_lingering(hs, s);
            log_info("state: %u of %zu hand-over(s) and %u of %zu lingering charge(s) "
                     "restored", edges, s->n_edges, lingering, s->n_lingering);
        }
    }
    handovers_saved_free(s);
    on_change(hs); /* the file says what is believed now */
}
