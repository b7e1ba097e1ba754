/* state.c - the heuristics' working state for one pool: instances, GPUs, membership.
 *
 * Keeps the bookkeeping (used time and memory per instance, the MIG multiset per GPU,
 * member lists) in one place so that the algorithm files contain only decisions.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "planner/internal.h"

static void st_option_order(struct state *s)
{
    int n = s->n_options;
    for (int i = 0; i < n; i++)
        s->order[i] = i == n - 1 ? PLAN_OPTION_WHOLE : i + 1;
    /* insertion sort of the MIG options by (compute, memory slices, SMs) */
    for (int i = 1; i < n - 1; i++) {
        int o = s->order[i], j = i;
        const struct plan_profile *p = &s->m->profiles[o - 1];
        while (j > 0) {
            const struct plan_profile *q = &s->m->profiles[s->order[j - 1] - 1];
            int before = q->compute_slices != p->compute_slices ? q->compute_slices > p->compute_slices
                       : q->mem_slices != p->mem_slices ? q->mem_slices > p->mem_slices
                       : q->sms > p->sms;
            if (!before)
                break;
            s->order[j] = s->order[j - 1];
            j--;
        }
        s->order[j] = o;
    }
    for (int i = 0; i < n; i++)
        s->rank[s->order[i]] = i;
}

static void st_fill_need(struct state *s)
{
    for (int k = 0; k < s->n_wl; k++) {
        int w = s->wl[k];
        for (int o = 0; o < s->n_options; o++)
            s->need[(size_t)w * PLAN_MAX_OPTIONS + o] =
                plan_time_needed(&s->in->workloads[w], s->pool, s->m, o);
    }
}

int st_init(struct state *s, const struct plan_input *in, int pool,
            const struct plan_layouts *lay, const int *wl, int n_wl)
{
    size_t nw = (size_t)in->n_workloads;
    memset(s, 0, sizeof(*s));
    s->in = in;
    s->pool = pool;
    s->m = &in->pools[pool].model;
    s->lay = lay;
    s->n_options = plan_option_count(s->m);
    s->n_wl = n_wl;
    s->wl = malloc((n_wl ? (size_t)n_wl : 1) * sizeof(int));
    s->need = malloc((nw ? nw : 1) * PLAN_MAX_OPTIONS * sizeof(int));
    s->where = malloc((nw ? nw : 1) * sizeof(int));
    s->time = calloc(nw ? nw : 1, sizeof(int));
    s->next = malloc((nw ? nw : 1) * sizeof(int));
    s->need_owner = 1;
    if (!s->wl || !s->need || !s->where || !s->time || !s->next) {
        st_free(s);
        return -ENOMEM;
    }
    if (n_wl)
        memcpy(s->wl, wl, (size_t)n_wl * sizeof(int));
    for (size_t i = 0; i < nw; i++)
        s->where[i] = s->next[i] = -1;
    st_option_order(s);
    st_fill_need(s);
    return 0;
}

void st_free(struct state *s)
{
    bf_detach(s);
    free(s->wl);
    if (s->need_owner)
        free(s->need);
    free(s->where);
    free(s->time);
    free(s->next);
    free(s->inst);
    free(s->gpu);
    memset(s, 0, sizeof(*s));
}

static void *st_dup(const void *src, size_t size)
{
    void *d = malloc(size ? size : 1);
    if (d && size)
        memcpy(d, src, size);
    return d;
}

int st_copy(struct state *d, const struct state *s)
{
    size_t nw = (size_t)s->in->n_workloads;
    *d = *s;
    d->bf = NULL;
    d->wl = st_dup(s->wl, (size_t)s->n_wl * sizeof(int));
    d->need_owner = 0;   /* shared: need is read-only after st_init */
    d->where = st_dup(s->where, nw * sizeof(int));
    d->time = st_dup(s->time, nw * sizeof(int));
    d->next = st_dup(s->next, nw * sizeof(int));
    d->inst = st_dup(s->inst, (size_t)s->cap_inst * sizeof(*s->inst));
    d->gpu = st_dup(s->gpu, (size_t)s->cap_gpu * sizeof(*s->gpu));
    if (!d->wl || !d->where || !d->time || !d->next || !d->inst || !d->gpu) {
        st_free(d);
        return -ENOMEM;
    }
    return 0;
}

int st_new_inst(struct state *s, int option)
{
    if (s->n_inst == s->cap_inst) {
        int cap = s->cap_inst ? s->cap_inst * 2 : 64;
        struct st_inst *ni = realloc(s->inst, (size_t)cap * sizeof(*ni));
        if (!ni)
            return -ENOMEM;
        s->inst = ni;
        s->cap_inst = cap;
    }
    s->inst[s->n_inst] = (struct st_inst){option, -1, 0, 0, -1, 0, 0};
    if (bf_update(s, s->n_inst))   /* grows the attached index so st_put never has to */
        return -ENOMEM;
    return s->n_inst++;
}

int st_new_gpu(struct state *s, int whole)
{
    if (s->n_gpu == s->cap_gpu) {
        int cap = s->cap_gpu ? s->cap_gpu * 2 : 32;
        struct st_gpu *ng = realloc(s->gpu, (size_t)cap * sizeof(*ng));
        if (!ng)
            return -ENOMEM;
        s->gpu = ng;
        s->cap_gpu = cap;
    }
    s->gpu[s->n_gpu] = (struct st_gpu){whole, 0, 1, whole ? PLAN_COMPUTE_SLICES : 0,
                                       whole ? 0 : plan_mix_room(s->lay, 0)};
    return s->n_gpu++;
}

void st_put(struct state *s, int w, int i, int time)
{
    struct st_inst *in = &s->inst[i];
    s->where[w] = i;
    s->time[w] = time;
    s->next[w] = in->head;
    in->head = w;
    in->n++;
    in->lat += st_is_lat(s, w);
    in->time += time;
    in->mem += s->in->workloads[w].mem_mib;
    bf_update(s, i);
}

void st_take(struct state *s, int w)
{
    struct st_inst *in = &s->inst[s->where[w]];
    int *link = &in->head;
    while (*link != w)
        link = &s->next[*link];
    *link = s->next[w];
    in->n--;
    in->lat -= st_is_lat(s, w);
    in->time -= s->time[w];
    in->mem -= s->in->workloads[w].mem_mib;
    s->where[w] = -1;
    s->next[w] = -1;
    bf_update(s, (int)(in - s->inst));
}

int st_fits(const struct state *s, int w, int i)
{
    const struct st_inst *in = &s->inst[i];
    int t = st_need(s, w, in->option);
    if (t < 0 || t > st_free_time(s, i) || (in->lat && st_is_lat(s, w)))
        return -1;
    if (in->mem + s->in->workloads[w].mem_mib > plan_option_mem(s->m, in->option))
        return -1;
    return t;
}

int st_alive_gpus(const struct state *s)
{
    int n = 0;
    for (int g = 0; g < s->n_gpu; g++)
        n += s->gpu[g].alive;
    return n;
}

void st_gpu_attach(struct state *s, int i, int g)
{
    s->inst[i].gpu = g;
    s->gpu[g].alive = 1;
    if (!s->gpu[g].whole) {
        s->gpu[g].mix = plan_mix_add(s->gpu[g].mix, s->inst[i].option, 1);
        s->gpu[g].compute += plan_option_compute(s->m, s->inst[i].option);
        s->gpu[g].room = plan_mix_room(s->lay, s->gpu[g].mix);
    }
}

void st_gpu_detach(struct state *s, int i)
{
    int g = s->inst[i].gpu;
    if (g < 0)
        return;
    s->inst[i].gpu = -1;
    if (s->gpu[g].whole) {
        s->gpu[g].alive = 0;
        return;
    }
    s->gpu[g].compute -= plan_option_compute(s->m, s->inst[i].option);
    if (!(s->gpu[g].mix = plan_mix_add(s->gpu[g].mix, s->inst[i].option, -1)))
        s->gpu[g].alive = 0;
    s->gpu[g].room = plan_mix_room(s->lay, s->gpu[g].mix);
}

long st_score(const struct state *s)
{
    long score = 0;
    for (int g = 0; g < s->n_gpu; g++)
        if (s->gpu[g].alive)
            score += PLAN_COMPUTE_SLICES * PLAN_MEM_SLICES + st_gpu_compute(s, g);
    return score;
}

/* The time share a workload gets in the plan: its own (full time for Best-fit) when
 * alone, else what it needs with the instance's tenants under the interference mode. */
static int st_emit_time(const struct state *s, const struct st_inst *in, int w)
{
    if (in->n == 1 || s->in->interference == PLAN_INTERF_NONE)
        return s->time[w];
    return plan_time_needed_shared(&s->in->workloads[w], s->pool, s->m, in->option,
                                   s->in->interference, in->n);
}

static int st_emit_gpu(const struct state *s, int g, const int *insts, int n, struct plan *p)
{
    int starts[PLAN_MEM_SLICES], first = p->n_instances, rc;
    int pg = plan_add_gpu(p, s->pool, !s->gpu[g].whole);
    if (pg < 0)
        return pg;
    if (!s->gpu[g].whole && (rc = plan_mix_place(s->m, s->gpu[g].mix, starts, PLAN_MEM_SLICES)))
        return rc;
    /* instances in option order, matching the order of starts[] */
    int k = 0;
    for (int o = 0; o < s->n_options; o++) {
        for (int j = 0; j < n; j++) {
            const struct st_inst *in = &s->inst[insts[j]];
            if (in->option != o)
                continue;
            int pi = plan_add_instance(p, pg, o, s->gpu[g].whole ? 0 : starts[k++]);
            if (pi < 0)
                return pi;
            for (int w = in->head; w >= 0; w = s->next[w])
                if ((rc = plan_add_assign(p, w, pi, st_emit_time(s, in, w),
                                          s->in->workloads[w].mem_mib)) < 0)
                    return rc;
        }
    }
    return p->n_instances > first ? 0 : -EINVAL;
}

int st_emit(const struct state *s, struct plan *p)
{
    int *by_gpu = malloc((size_t)(s->n_inst ? s->n_inst : 1) * sizeof(int));
    int *start = calloc((size_t)s->n_gpu + 1, sizeof(int));
    int rc = 0;
    if (!by_gpu || !start) {
        rc = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].n && s->inst[i].gpu >= 0)
            start[s->inst[i].gpu + 1]++;
    for (int g = 0; g < s->n_gpu; g++)
        start[g + 1] += start[g];
    int *fill = calloc((size_t)s->n_gpu + 1, sizeof(int));
    if (!fill) {
        rc = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].n && s->inst[i].gpu >= 0)
            by_gpu[start[s->inst[i].gpu] + fill[s->inst[i].gpu]++] = i;
    for (int g = 0; g < s->n_gpu && !rc; g++)
        if (s->gpu[g].alive && fill[g])
            rc = st_emit_gpu(s, g, by_gpu + start[g], fill[g], p);
    free(fill);
out:
    free(by_gpu);
    free(start);
    return rc;
}
