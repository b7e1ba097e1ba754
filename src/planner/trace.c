/* trace.c - replaying a trace of arrivals and departures against a cluster, with the
 * cost of moving workloads (their drain time) in the decision to replan.
 *
 * Each event is applied with online.c's moves (an arrival placed with the fewest
 * moves, a departure that may release a GPU within a move budget). Then, by policy,
 * the plan from scratch of the workloads present is considered: never (online), always
 * when it places at least the same workloads (replan), or when the GPU-seconds it saves
 * until the horizon exceed the drain seconds it adds (drain-aware). Plans are matched
 * to physical GPUs (per pool) so that the most drain seconds stay put; a workload
 * drains when its GPU, instance type or start slice changes: a MIG instance can only be
 * re-made on an empty GPU or around untouched instances, and a GPU changing MIG mode
 * drains all its tenants. A workload that finds no room waits: after each event the
 * waiting ones are placed, in arrival order, each as soon as it fits (a replan also
 * considers them); one whose departure comes first gives up. Every plan taken is
 * verified by the checker. No I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kairos/plan.h"

struct replay {
    const struct plan_input *in;
    const struct plan_trace *t;
    const struct plan_trace_options *o;
    struct plan cur;
    int *phys;                 /* per GPU of cur: its physical GPU within its pool */
    int pool_base[PLAN_MAX_POOLS + 1];   /* physical ids of pool p: [base[p], base[p + 1]) */
    struct plan_trace_result *r;
    int *queue;                /* waiting workloads, in arrival order */
    int n_queue;
    double *queued_at;         /* per workload: when it began to wait */
    char *err;
    size_t errlen;
};

/* One option of a step: a plan, its GPUs' physical ids, and what it costs. */
struct candidate {
    struct plan p;
    int *phys;
    int moves;
    double drain_s;
};

static const char *const trace_policy_names[PLAN_TRACE_POLICIES] = {"online", "replan",
                                                                    "drain-aware"};

const char *plan_trace_policy_name(int policy)
{
    return policy >= 0 && policy < PLAN_TRACE_POLICIES ? trace_policy_names[policy] : "?";
}

void plan_trace_options_default(struct plan_trace_options *o)
{
    memset(o, 0, sizeof(*o));
    o->policy = PLAN_TRACE_DRAIN_AWARE;
    o->max_moves = 2;
    plan_options_default(&o->plan);
}

void plan_trace_result_free(struct plan_trace_result *r)
{
    free(r->steps);
    memset(r, 0, sizeof(*r));
}

static double trace_drain_of(const struct replay *x, int w)
{
    double d = x->in->workloads[w].drain_s;
    return d > 0 ? d : x->t->drain_s;
}

static void candidate_free(struct candidate *c)
{
    plan_free(&c->p);
    free(c->phys);
    c->phys = NULL;
}

/* Per workload: its assignment in p, or -1. The caller frees it. */
static int *trace_where(const struct replay *x, const struct plan *p)
{
    int *where = malloc(((size_t)x->in->n_workloads + 1) * sizeof(int));
    for (int w = 0; where && w < x->in->n_workloads; w++)
        where[w] = -1;
    for (int a = 0; where && a < p->n_assigns; a++)
        where[p->assigns[a].workload] = a;
    return where;
}

/* 1 if workload w sits in an instance of the same pool, option and start in both. */
static int trace_same_slot(const struct plan *a, int ia, const struct plan *b, int ib)
{
    const struct plan_instance *x = &a->instances[ia], *y = &b->instances[ib];
    return a->gpus[x->gpu].pool == b->gpus[y->gpu].pool && x->option == y->option &&
           x->start == y->start;
}

struct trace_pair {
    int to, from;              /* GPU of the new plan, GPU of the old */
    double weight;             /* drain seconds that stay if they are one GPU */
};

static int trace_cmp_pair(const void *a, const void *b)
{
    const struct trace_pair *x = a, *y = b;
    return x->to != y->to ? x->to - y->to : x->from - y->from;
}

static int trace_cmp_weight(const void *a, const void *b)
{
    const struct trace_pair *x = a, *y = b;
    if (x->weight != y->weight)
        return x->weight > y->weight ? -1 : 1;
    return trace_cmp_pair(a, b);
}

/* Pairs (new GPU, old GPU) weighted by the drain seconds of the workloads that would
 * keep their slot if the two were one physical GPU, heaviest first. */
static int trace_pairs(const struct replay *x, const struct plan *old, const struct plan *nw,
                       struct trace_pair **out, int *n_out)
{
    int *wo = trace_where(x, old), n = 0;
    struct trace_pair *pr = malloc(((size_t)nw->n_assigns + 1) * sizeof(*pr));
    if (!wo || !pr) {
        free(wo);
        free(pr);
        return -ENOMEM;
    }
    for (int a = 0; a < nw->n_assigns; a++) {
        int w = nw->assigns[a].workload, b = wo[w];
        if (b < 0 || !trace_same_slot(nw, nw->assigns[a].instance, old, old->assigns[b].instance))
            continue;
        pr[n++] = (struct trace_pair){nw->instances[nw->assigns[a].instance].gpu,
                                      old->instances[old->assigns[b].instance].gpu,
                                      trace_drain_of(x, w)};
    }
    qsort(pr, (size_t)n, sizeof(*pr), trace_cmp_pair);
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (m && pr[m - 1].to == pr[k].to && pr[m - 1].from == pr[k].from)
            pr[m - 1].weight += pr[k].weight;
        else
            pr[m++] = pr[k];
    }
    qsort(pr, (size_t)m, sizeof(*pr), trace_cmp_weight);
    free(wo);
    *out = pr;
    *n_out = m;
    return 0;
}

/* Physical ids for the GPUs of c->p: greedily the old GPU that keeps the most drain
 * seconds in place, then the lowest free id of the pool. */
static int trace_assign_phys(const struct replay *x, const struct plan *old, const int *old_phys,
                             struct candidate *c)
{
    struct trace_pair *pr = NULL;
    int n = 0, rc = trace_pairs(x, old, &c->p, &pr, &n);
    char *used = calloc((size_t)x->pool_base[x->in->n_pools] + 1, 1);
    c->phys = malloc(((size_t)c->p.n_gpus + 1) * sizeof(int));
    if (rc || !used || !c->phys) {
        free(pr);
        free(used);
        return -ENOMEM;
    }
    for (int g = 0; g < c->p.n_gpus; g++)
        c->phys[g] = -1;
    for (int k = 0; k < n; k++) {
        int id = old_phys[pr[k].from];
        if (c->phys[pr[k].to] < 0 && !used[id]) {
            c->phys[pr[k].to] = id;
            used[id] = 1;
        }
    }
    for (int g = 0; g < c->p.n_gpus; g++) {
        int pool = c->p.gpus[g].pool, id = x->pool_base[pool];
        while (c->phys[g] < 0 && id < x->pool_base[pool + 1] && used[id])
            id++;
        if (c->phys[g] < 0) {   /* the plan holds at most the pool's GPUs: one is free */
            c->phys[g] = id;
            used[id] = 1;
        }
    }
    free(pr);
    free(used);
    return 0;
}

/* Workloads placed in both plans whose physical GPU, option or start changed. */
static int trace_cost(const struct replay *x, const struct plan *old, const int *old_phys,
                      struct candidate *c)
{
    int *wo = trace_where(x, old);
    if (!wo)
        return -ENOMEM;
    c->moves = 0;
    c->drain_s = 0;
    for (int a = 0; a < c->p.n_assigns; a++) {
        int w = c->p.assigns[a].workload, b = wo[w], i = c->p.assigns[a].instance;
        if (b < 0)
            continue;
        int j = old->assigns[b].instance;
        if (trace_same_slot(&c->p, i, old, j) &&
            c->phys[c->p.instances[i].gpu] == old_phys[old->instances[j].gpu])
            continue;
        c->moves++;
        c->drain_s += trace_drain_of(x, w);
    }
    free(wo);
    return 0;
}

static int trace_price(const struct replay *x, struct candidate *c)
{
    int rc = trace_assign_phys(x, &x->cur, x->phys, c);
    return rc ? rc : trace_cost(x, &x->cur, x->phys, c);
}

/* The input of the workloads `on` marks (sub->workloads[k] is global gl[k]); the
 * caller frees sub's workloads and gl. */
static int trace_sub_input(const struct replay *x, const char *on, struct plan_input *sub,
                           int **gl)
{
    int n = 0;
    *sub = *x->in;
    sub->workloads = malloc(((size_t)x->in->n_workloads + 1) * sizeof(*sub->workloads));
    *gl = malloc(((size_t)x->in->n_workloads + 1) * sizeof(int));
    if (!sub->workloads || !*gl) {
        free(sub->workloads);
        free(*gl);
        return -ENOMEM;
    }
    for (int w = 0; w < x->in->n_workloads; w++)
        if (on[w]) {
            sub->workloads[n] = x->in->workloads[w];
            (*gl)[n++] = w;
        }
    sub->n_workloads = n;
    return 0;
}

/* A plan from scratch of the workloads `on` marks, in the cluster's numbering (its
 * infeasible entries dropped: the caller counts who is not placed). */
static int trace_from_scratch(const struct replay *x, const char *on, struct plan *p)
{
    struct plan_input sub;
    int *gl, rc = trace_sub_input(x, on, &sub, &gl);
    if (rc)
        return rc;
    rc = plan_solve(&sub, &x->o->plan, p);
    for (int a = 0; !rc && a < p->n_assigns; a++)
        p->assigns[a].workload = gl[p->assigns[a].workload];
    if (!rc)
        p->n_infeasible = 0;
    free(sub.workloads);
    free(gl);
    return rc;
}

/* The checker on p against the workloads it places (the others are not there now). */
static int trace_check(const struct replay *x, const struct plan *p)
{
    char *on = calloc((size_t)x->in->n_workloads + 1, 1);
    int *to_sub = malloc(((size_t)x->in->n_workloads + 1) * sizeof(int)), *gl = NULL;
    struct plan_input sub = {0};
    struct plan q;
    int rc = on && to_sub ? 0 : -ENOMEM;
    for (int a = 0; !rc && a < p->n_assigns; a++)
        on[p->assigns[a].workload] = 1;
    rc = rc ? rc : trace_sub_input(x, on, &sub, &gl);
    rc = rc ? rc : plan_copy(&q, p);
    if (!rc) {
        for (int k = 0; k < sub.n_workloads; k++)
            to_sub[gl[k]] = k;
        for (int a = 0; a < q.n_assigns; a++)
            q.assigns[a].workload = to_sub[q.assigns[a].workload];
        q.n_infeasible = 0;
        rc = plan_check(&sub, &q, x->err, x->errlen);
        plan_free(&q);
    }
    free(sub.workloads);
    free(gl);
    free(on);
    free(to_sub);
    return rc;
}

static int trace_gpus(const struct plan *p)
{
    char *used = calloc((size_t)p->n_gpus + 1, 1);
    int n = 0;
    if (!used)
        return -ENOMEM;
    for (int a = 0; a < p->n_assigns; a++)
        used[p->instances[p->assigns[a].instance].gpu] = 1;
    for (int g = 0; g < p->n_gpus; g++)
        n += used[g];
    free(used);
    return n;
}

/* 1 if every workload a places is placed by b too. */
static int trace_covers(const struct replay *x, const struct plan *b, const struct plan *a)
{
    int *wb = trace_where(x, b), ok = wb != NULL;
    for (int k = 0; ok && k < a->n_assigns; k++)
        ok = wb[a->assigns[k].workload] >= 0;
    free(wb);
    return ok;
}

/* How long the saving of a replan at event e counts. */
static double trace_horizon(const struct replay *x, int e)
{
    const struct plan_trace *t = x->t;
    double at = t->events[e].at, left = t->end_s - at;
    if (x->o->horizon_s > 0)
        return x->o->horizon_s < left ? x->o->horizon_s : left;
    return e + 1 < t->n_events ? t->events[e + 1].at - at : left;
}

/* Whether the plan from scratch `re` replaces the online plan `on` at event e. */
static int trace_take_replan(const struct replay *x, int e, const struct candidate *on,
                             const struct candidate *re)
{
    if (!trace_covers(x, &re->p, &on->p))
        return 0;   /* never evict a running workload to replan */
    if (re->p.n_assigns > on->p.n_assigns || x->o->policy == PLAN_TRACE_REPLAN)
        return 1;
    double saved = (double)(trace_gpus(&on->p) - trace_gpus(&re->p)) * trace_horizon(x, e);
    return saved > re->drain_s - on->drain_s;
}

/* Event e by online moves: an arrival added, a departure removed (with its budget). */
static int trace_online(struct replay *x, int e, struct candidate *c)
{
    const struct plan_trace_event *ev = &x->t->events[e];
    struct plan_moves mv = {0};
    int w = ev->workload, rc;
    int *where = trace_where(x, &x->cur);
    if (!where)
        return -ENOMEM;
    if (ev->kind == PLAN_TRACE_ARRIVE)
        rc = plan_online_add_list(x->in, &x->cur, &w, 1, &c->p, &mv);
    else if (where[w] >= 0)
        rc = plan_online_remove(x->in, &x->cur, &w, 1, x->o->max_moves, &c->p, &mv);
    else   /* it was never placed: nothing leaves */
        rc = plan_copy(&c->p, &x->cur);
    free(where);
    plan_moves_free(&mv);
    if (!rc)
        c->p.n_infeasible = 0;
    return rc ? rc : trace_price(x, c);
}

/* The workloads present after event e: those placed now, with e applied. */
static char *trace_present(const struct replay *x, int e)
{
    char *on = calloc((size_t)x->in->n_workloads + 1, 1);
    const struct plan_trace_event *ev = &x->t->events[e];
    for (int a = 0; on && a < x->cur.n_assigns; a++)
        on[x->cur.assigns[a].workload] = 1;
    for (int k = 0; on && k < x->n_queue; k++)
        on[x->queue[k]] = 1;
    if (on)
        on[ev->workload] = ev->kind == PLAN_TRACE_ARRIVE;
    return on;
}

static int trace_replan(struct replay *x, int e, struct candidate *c)
{
    char *on = trace_present(x, e);
    int rc = on ? trace_from_scratch(x, on, &c->p) : -ENOMEM;
    free(on);
    return rc ? rc : trace_price(x, c);
}

static int trace_step_add(struct replay *x, const struct plan_trace_step *s)
{
    struct plan_trace_result *r = x->r;
    if ((r->n_steps & (r->n_steps - 1)) == 0) {
        size_t cap = r->n_steps ? (size_t)r->n_steps * 2 : 16;
        struct plan_trace_step *ns = realloc(r->steps, cap * sizeof(*ns));
        if (!ns)
            return -ENOMEM;
        r->steps = ns;
    }
    r->steps[r->n_steps++] = *s;
    r->moves += s->moves;
    r->drain_s += s->drain_s;
    r->unplaced += s->unplaced;
    r->replans += s->replanned;
    r->max_gpus = s->gpus > r->max_gpus ? s->gpus : r->max_gpus;
    return 0;
}

/* Makes c the current plan, its moves and drains counted in the step s. */
static int trace_take(struct replay *x, struct candidate *c, struct plan_trace_step *s)
{
    int rc = trace_check(x, &c->p);
    if (rc)
        return rc;
    plan_free(&x->cur);
    free(x->phys);
    x->cur = c->p;
    x->phys = c->phys;
    plan_init(&c->p);
    c->phys = NULL;
    s->moves += c->moves;
    s->drain_s += c->drain_s;
    return 0;
}

static void trace_wait(struct replay *x, int w, double at)
{
    x->queue[x->n_queue++] = w;
    x->queued_at[w] = at;
}

/* Drops the k-th waiting workload from the queue. */
static void trace_unqueue(struct replay *x, int k)
{
    memmove(&x->queue[k], &x->queue[k + 1], (size_t)(x->n_queue - k - 1) * sizeof(int));
    x->n_queue--;
}

static void trace_started(struct replay *x, int k, double at, struct plan_trace_step *s)
{
    double waited = at - x->queued_at[x->queue[k]];
    x->r->waited++;
    x->r->wait_s += waited;
    x->r->max_wait_s = waited > x->r->max_wait_s ? waited : x->r->max_wait_s;
    s->started++;
    trace_unqueue(x, k);
}

/* The waiting workload w placed by online moves if it fits now: 1 placed, 0 not. */
static int trace_try_start(struct replay *x, int w, struct plan_trace_step *s)
{
    struct candidate c = {0};
    struct plan_moves mv = {0};
    plan_init(&c.p);
    int rc = plan_online_add_list(x->in, &x->cur, &w, 1, &c.p, &mv), placed = 0;
    plan_moves_free(&mv);
    for (int a = 0; !rc && a < c.p.n_assigns && !placed; a++)
        placed = c.p.assigns[a].workload == w;
    if (!rc && placed) {
        c.p.n_infeasible = 0;
        rc = trace_price(x, &c);
        rc = rc ? rc : trace_take(x, &c, s);
    }
    candidate_free(&c);
    return rc ? rc : placed;
}

/* After an event: the waiting workloads the plan now places leave the queue, then each
 * that fits is placed, in arrival order. */
static int trace_start_waiting(struct replay *x, struct plan_trace_step *s)
{
    int *where = trace_where(x, &x->cur), rc = where ? 0 : -ENOMEM;
    for (int k = 0; !rc && k < x->n_queue;)
        if (where[x->queue[k]] >= 0)
            trace_started(x, k, s->at, s);
        else
            k++;
    free(where);
    for (int k = 0; !rc && k < x->n_queue;) {
        rc = trace_try_start(x, x->queue[k], s);
        if (rc > 0) {
            trace_started(x, k, s->at, s);
            rc = 0;
        } else {
            k++;
        }
    }
    return rc;
}

/* Records step s once its event and the waiting workloads it let in are applied. */
static int trace_record(struct replay *x, struct plan_trace_step *s)
{
    s->gpus = trace_gpus(&x->cur);
    s->waiting = x->n_queue;
    return s->gpus < 0 ? s->gpus : trace_step_add(x, s);
}

static int trace_event(struct replay *x, int e)
{
    const struct plan_trace_event *ev = &x->t->events[e];
    struct candidate on = {0}, re = {0};
    struct plan_trace_step s = {.at = ev->at, .event = e, .replan_gpus = -1, .replan_drain_s = -1};
    plan_init(&on.p);
    plan_init(&re.p);
    int rc = trace_online(x, e, &on);
    if (!rc && x->o->policy != PLAN_TRACE_ONLINE && (rc = trace_replan(x, e, &re)) == 0) {
        s.replan_gpus = trace_gpus(&re.p);
        s.replan_drain_s = re.drain_s;
        s.replanned = trace_take_replan(x, e, &on, &re);
    }
    if (!rc) {
        struct candidate *c = s.replanned ? &re : &on;
        int *where = trace_where(x, &c->p);
        s.unplaced = !where ? 0 : ev->kind == PLAN_TRACE_ARRIVE && where[ev->workload] < 0;
        rc = where ? trace_take(x, c, &s) : -ENOMEM;
        free(where);
    }
    candidate_free(&on);
    candidate_free(&re);
    if (!rc && s.unplaced)
        trace_wait(x, ev->workload, ev->at);
    for (int k = 0; !rc && ev->kind == PLAN_TRACE_DEPART && k < x->n_queue; k++)
        if (x->queue[k] == ev->workload) { /* it leaves before it ever ran */
            trace_unqueue(x, k);
            x->r->gave_up++;
            break;
        }
    rc = rc ? rc : trace_start_waiting(x, &s);
    return rc ? rc : trace_record(x, &s);
}

/* The plan of the cluster file's own workloads at time 0, on fresh GPUs. */
static int trace_start(struct replay *x)
{
    struct candidate c = {0};
    struct plan_trace_step s = {.event = -1, .replan_gpus = -1, .replan_drain_s = -1};
    char *on = calloc((size_t)x->in->n_workloads + 1, 1);
    int rc = on ? 0 : -ENOMEM;
    plan_init(&c.p);
    for (int w = 0; on && w < x->t->n_initial; w++)
        on[w] = 1;
    rc = rc ? rc : trace_from_scratch(x, on, &c.p);
    rc = rc ? rc : trace_price(x, &c);
    s.unplaced = x->t->n_initial - c.p.n_assigns;
    s.replanned = 1;
    rc = rc ? rc : trace_take(x, &c, &s);
    int *where = rc ? NULL : trace_where(x, &x->cur);
    rc = rc ? rc : where ? 0 : -ENOMEM;
    for (int w = 0; !rc && w < x->t->n_initial; w++)
        if (where[w] < 0)
            trace_wait(x, w, 0);
    free(where);
    rc = rc ? rc : trace_record(x, &s);
    candidate_free(&c);
    free(on);
    return rc;
}

static void trace_totals(struct replay *x)
{
    struct plan_trace_result *r = x->r;
    double gs = 0;
    for (int k = 0; k < r->n_steps; k++) {
        double next = k + 1 < r->n_steps ? r->steps[k + 1].at : x->t->end_s;
        gs += r->steps[k].gpus * (next - r->steps[k].at);
    }
    r->gpu_hours = gs / 3600.0;
    r->replans -= 1;   /* the plan at time 0 is not a replan */
    r->waiting_at_end = x->n_queue;
}

int plan_trace_replay(const struct plan_input *in, const struct plan_trace *t,
                      const struct plan_trace_options *o, struct plan_trace_result *r,
                      char *err, size_t errlen)
{
    struct replay x = {.in = in, .t = t, .o = o, .r = r, .err = err, .errlen = errlen};
    int rc = 0;
    memset(r, 0, sizeof(*r));
    plan_init(&x.cur);
    if (errlen)
        err[0] = '\0';
    for (int p = 0; p < in->n_pools; p++)
        x.pool_base[p + 1] = x.pool_base[p] + in->pools[p].count;
    x.queue = malloc(((size_t)in->n_workloads + 1) * sizeof(int));
    x.queued_at = malloc(((size_t)in->n_workloads + 1) * sizeof(double));
    rc = x.queue && x.queued_at ? trace_start(&x) : -ENOMEM;
    for (int e = 0; !rc && e < t->n_events; e++)
        rc = trace_event(&x, e);
    if (!rc)
        trace_totals(&x);
    else
        plan_trace_result_free(r);
    if (rc == -ENOMEM && errlen)
        snprintf(err, errlen, "out of memory while replaying the trace");
    plan_free(&x.cur);
    free(x.phys);
    free(x.queue);
    free(x.queued_at);
    return rc;
}
