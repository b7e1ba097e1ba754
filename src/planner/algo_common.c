/* algo_common.c - the building blocks the heuristics share: option choice, temporal
 * fusion (first-fit decreasing in time), the seed's migration step, two instance
 * packers, and Kairos's local search. Each algorithm file only composes these.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "planner/internal.h"

/* ---- option choice ---- */

int algo_smallest_option(const struct state *s, int w)
{
    for (int k = 0; k < s->n_options; k++)
        if (st_need(s, w, s->order[k]) >= 0)
            return s->order[k];
    return -1;
}

int algo_bestfit_option(const struct state *s, int w)
{
    return algo_smallest_option(s, w);
}

int algo_whole_option(const struct state *s, int w)
{
    return st_need(s, w, PLAN_OPTION_WHOLE) >= 0 ? PLAN_OPTION_WHOLE : -1;
}

int *algo_choose(const struct state *s, int (*pick)(const struct state *s, int w))
{
    int *choice = malloc(((size_t)s->in->n_workloads + 1) * sizeof(int));
    if (!choice)
        return NULL;
    for (int w = 0; w < s->in->n_workloads; w++)
        choice[w] = -1;
    for (int i = 0; i < s->n_wl; i++)
        choice[s->wl[i]] = pick(s, s->wl[i]);
    return choice;
}

int algo_area_option(const struct state *s, int w)
{
    int best = -1;
    long best_area = 0;
    for (int k = 0; k < s->n_options; k++) {
        int o = s->order[k], t = st_need(s, w, o);
        long area = (long)t * plan_option_compute(s->m, o);
        if (t >= 0 && (best < 0 || area < best_area)) {
            best = o;
            best_area = area;
        }
    }
    return best;
}

/* The same with what w holds: all of an instance it may not share (a MIG instance
 * unless in->mig_sharing), its time share of one it may. */
int algo_held_area_option(const struct state *s, int w)
{
    int best = -1;
    long best_area = 0;
    for (int k = 0; k < s->n_options; k++) {
        int o = s->order[k], t = st_need(s, w, o);
        int held = plan_may_share(s->in, o, 2) ? t : PLAN_TIME_UNITS;
        long area = (long)held * plan_option_compute(s->m, o);
        if (t >= 0 && (best < 0 || area < best_area)) {
            best = o;
            best_area = area;
        }
    }
    return best;
}

/* ---- sorting helpers (qsort with a context-free key array) ---- */

struct algo_key {
    long key;
    int id;
};

static int algo_key_desc(const void *a, const void *b)
{
    const struct algo_key *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? 1 : -1;
    return x->id - y->id;
}

/* Fusion's order: time needed, descending, equal times in input order, or with mem_ties
 * the larger memory first. Memory is the bins' second dimension: left to input order,
 * equal-time workloads that need much memory may come last and find no instance with
 * room (a100-linear/G-Train-bs32-R1: 9 GPUs instead of 8, docs/planner.md). */
static long algo_fuse_key(const struct state *s, int w, int o, int mem_ties)
{
    int64_t mem = mem_ties ? s->in->workloads[w].mem_mib : 0;
    if (mem < 0)
        mem = 0;
    return ((long)st_need(s, w, o) << 32) | (long)(mem > 0xffffffffL ? 0xffffffffL : mem);
}

static struct algo_key *algo_sorted_workloads(const struct state *s, const int *choice,
                                               int mem_ties, int *n)
{
    struct algo_key *k = malloc(((size_t)s->n_wl + 1) * sizeof(*k));
    *n = 0;
    for (int i = 0; k && i < s->n_wl; i++) {
        int w = s->wl[i];
        if (choice[w] >= 0)
            k[(*n)++] = (struct algo_key){algo_fuse_key(s, w, choice[w], mem_ties), w};
    }
    if (k)
        qsort(k, (size_t)*n, sizeof(*k), algo_key_desc);
    return k;
}

/* ---- construction ---- */

int algo_alone(struct state *s, const int *choice, int full_time)
{
    for (int i = 0; i < s->n_wl; i++) {
        int w = s->wl[i], o = choice[w];
        if (o < 0)
            continue;
        int in = st_new_inst(s, o);
        if (in < 0)
            return in;
        st_put(s, w, in, full_time ? PLAN_TIME_UNITS : st_need(s, w, o));
    }
    return 0;
}

/* First-fit decreasing in time among the instances of one option: the instances are
 * slots of a fit tree in creation order, marked with their option's bit and, while no
 * member has a p99 target, ALGO_NO_LAT (a workload with one asks for both). */
#define ALGO_NO_LAT (1u << 31)
static void algo_fuse_slot(struct fit_tree *t, const struct state *s, int slot, int i)
{
    const struct st_inst *in = &s->inst[i];
    fit_tree_set(t, slot, st_free_time(s, i), plan_option_mem(s->m, in->option) - in->mem,
                 1u << in->option | (in->lat ? 0 : ALGO_NO_LAT));
}

int algo_fuse(struct state *s, const int *choice, int mem_ties)
{
    int n, rc = 0;
    struct algo_key *k = algo_sorted_workloads(s, choice, mem_ties, &n);
    int *open = malloc(((size_t)s->n_wl + 1) * sizeof(int));
    int n_open = 0;
    struct fit_tree t = {0};
    if (!k || !open || fit_tree_init(&t, s->n_wl + 1)) {
        rc = -ENOMEM;
        goto out;
    }
    for (int j = 0; j < n; j++) {
        int w = k[j].id, o = choice[w], t_w = st_need(s, w, o);
        int q = fit_tree_first(&t, t_w, s->in->workloads[w].mem_mib,
                               1u << o | (st_is_lat(s, w) ? ALGO_NO_LAT : 0));
        int in = q >= 0 ? open[q] : st_new_inst(s, o);
        if (in < 0) {
            rc = in;
            goto out;
        }
        if (q < 0)
            open[q = n_open++] = in;
        st_put(s, w, in, t_w);
        algo_fuse_slot(&t, s, q, in);
    }
out:
    fit_tree_free(&t);
    free(k);
    free(open);
    return rc;
}

/* ---- the seed's step 3: migrate small -> large, emptying whole instances ---- */

struct algo_journal {
    int *w, *from, *time;
    int n;
};

static void algo_move(struct state *s, struct algo_journal *j, int w, int to, int t)
{
    j->w[j->n] = w;
    j->from[j->n] = s->where[w];
    j->time[j->n] = s->time[w];
    j->n++;
    st_take(s, w);
    st_put(s, w, to, t);
}

static void algo_undo(struct state *s, struct algo_journal *j)
{
    while (j->n > 0) {
        j->n--;
        st_take(s, j->w[j->n]);
        st_put(s, j->w[j->n], j->from[j->n], j->time[j->n]);
    }
}

static int algo_journal_init(struct algo_journal *j, int n)
{
    j->w = malloc(((size_t)n + 1) * sizeof(int));
    j->from = malloc(((size_t)n + 1) * sizeof(int));
    j->time = malloc(((size_t)n + 1) * sizeof(int));
    j->n = 0;
    return j->w && j->from && j->time ? 0 : -ENOMEM;
}

static void algo_journal_free(struct algo_journal *j)
{
    free(j->w);
    free(j->from);
    free(j->time);
}

/* Move every member of instance i elsewhere (existing instances of rank >= min_rank,
 * not on skip_gpu); all or nothing. */
static int algo_empty_instance(struct state *s, struct algo_journal *j, int i, int min_rank,
                               int skip_gpu)
{
    while (s->inst[i].n) {
        int w = s->inst[i].head, t = 0;
        int to = bf_best(s, w, min_rank, i, skip_gpu, &t);
        if (to < 0)
            return 0;
        algo_move(s, j, w, to, t);
    }
    return 1;
}

int algo_migrate_up(struct state *s)
{
    struct algo_journal j;
    struct algo_key *k = malloc(((size_t)s->n_inst + 1) * sizeof(*k));
    int rc = algo_journal_init(&j, s->n_wl);
    if (rc || !k || bf_attach(s)) {
        rc = -ENOMEM;
        goto out;
    }
    for (int r = 0; r < s->n_options - 1; r++) {
        int n = 0;
        for (int i = 0; i < s->n_inst; i++)
            if (s->inst[i].n && s->rank[s->inst[i].option] == r)
                k[n++] = (struct algo_key){PLAN_TIME_UNITS - s->inst[i].time, i};
        qsort(k, (size_t)n, sizeof(*k), algo_key_desc);
        for (int q = 0; q < n; q++) {
            j.n = 0;
            if (!algo_empty_instance(s, &j, k[q].id, r + 1, -1))
                algo_undo(s, &j);
        }
    }
out:
    bf_detach(s);
    algo_journal_free(&j);
    free(k);
    return rc;
}

/* ---- packing instances onto GPUs ---- */

static void algo_unpack(struct state *s)
{
    for (int i = 0; i < s->n_inst; i++)
        s->inst[i].gpu = -1;
    s->n_gpu = 0;
}

static int algo_pack_whole(struct state *s)
{
    for (int i = 0; i < s->n_inst; i++) {
        if (!s->inst[i].n || s->inst[i].option != PLAN_OPTION_WHOLE)
            continue;
        int g = st_new_gpu(s, 1);
        if (g < 0)
            return g;
        st_gpu_attach(s, i, g);
    }
    return 0;
}


/* The seed's step 4: first-fit decreasing by compute slices under the placement rule.
 * Open GPUs are slots of a fit tree in the order of the open list (a closed GPU's slot
 * takes the last open GPU, as the list does), marked with the options that still fit. */
int algo_pack_ffd(struct state *s)
{
    struct algo_key *k = malloc(((size_t)s->n_inst + 1) * sizeof(*k));
    int *open = malloc(((size_t)s->n_inst + 1) * sizeof(int));
    int n = 0, n_open = 0, rc = 0;
    struct fit_tree t = {0};
    if (!k || !open || fit_tree_init(&t, s->n_inst + 1)) {
        rc = -ENOMEM;
        goto out;
    }
    algo_unpack(s);
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].n && s->inst[i].option != PLAN_OPTION_WHOLE)
            k[n++] = (struct algo_key){plan_option_compute(s->m, s->inst[i].option) * 16L
                                       + s->m->profiles[s->inst[i].option - 1].mem_slices, i};
    qsort(k, (size_t)n, sizeof(*k), algo_key_desc);
    for (int q = 0; q < n; q++) {
        int i = k[q].id, o = s->inst[i].option;
        int x = fit_tree_first(&t, 0, 0, 1u << o), g = x >= 0 ? open[x] : -1;
        if (g < 0) {
            if ((g = st_new_gpu(s, 0)) < 0) {
                rc = g;
                goto out;
            }
            open[x = n_open++] = g;
        }
        st_gpu_attach(s, i, g);
        unsigned room = s->gpu[g].room;
        if (room) {
            fit_tree_set(&t, x, 0, 0, room);
            continue;
        }
        open[x] = open[--n_open];
        fit_tree_set(&t, x, 0, 0, x < n_open ? s->gpu[open[x]].room : 0);
        fit_tree_set(&t, n_open, 0, 0, 0);
    }
    rc = algo_pack_whole(s);
out:
    fit_tree_free(&t);
    free(k);
    free(open);
    return rc;
}

static int algo_cover_value(const struct state *s, plan_mix_t layout, const int *left)
{
    int v = 0;
    for (int o = 1; o < s->n_options; o++) {
        int c = plan_mix_count(layout, o);
        v += (c < left[o] ? c : left[o]) * (plan_option_compute(s->m, o) * 16 + 1);
    }
    return v;
}

/* Choose GPU layouts greedily: each new GPU takes the maximal layout that covers the
 * most remaining compute slices (then the most instances); each GPU takes the lowest-
 * numbered unpacked instances of each option (one queue per option). */
int algo_pack_cover(struct state *s)
{
    int left[PLAN_MAX_OPTIONS] = {0}, head[PLAN_MAX_OPTIONS] = {0}, total = 0, rc = 0;
    int *queue = malloc(((size_t)s->n_inst + 1) * sizeof(int)), first[PLAN_MAX_OPTIONS + 1] = {0};
    if (!queue)
        return -ENOMEM;
    algo_unpack(s);
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].n && s->inst[i].option != PLAN_OPTION_WHOLE) {
            left[s->inst[i].option]++;
            total++;
        }
    for (int o = 0; o < s->n_options; o++)
        first[o + 1] = first[o] + left[o];
    for (int o = 0; o < s->n_options; o++)
        head[o] = first[o];
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].n && s->inst[i].option != PLAN_OPTION_WHOLE)
            queue[head[s->inst[i].option]++] = i;
    for (int o = 0; o < s->n_options; o++)
        head[o] = first[o];
    while (total > 0) {
        int best = 0, best_v = -1;
        for (int l = 0; l < s->lay->n_mixes; l++) {
            int v = algo_cover_value(s, s->lay->mixes[l], left);
            if (v > best_v) {
                best_v = v;
                best = l;
            }
        }
        int g = st_new_gpu(s, 0);
        if (g < 0) {
            rc = g;
            break;
        }
        for (int o = 1; o < s->n_options; o++) {
            int c = plan_mix_count(s->lay->mixes[best], o);
            int want = c < left[o] ? c : left[o];
            left[o] -= want;
            total -= want;
            while (want-- > 0)
                st_gpu_attach(s, queue[head[o]++], g);
        }
    }
    free(queue);
    return rc ? rc : algo_pack_whole(s);
}

/* ---- Kairos's local search ---- */

/* Place w in a new instance on a live MIG GPU other than skip_gpu (smallest option
 * first, fullest GPU first, then the lowest GPU index), found in x; notes the GPU's
 * change in x. */
static int algo_new_elsewhere(struct state *s, int w, int skip_gpu, struct room_index *x,
                              int *inst_out)
{
    for (int k = 0; k < s->n_options; k++) {
        int o = s->order[k];
        if (o == PLAN_OPTION_WHOLE || st_need(s, w, o) < 0)
            continue;
        int g = room_index_best(x, s, o, skip_gpu);
        if (g == -ENOMEM)
            return g;
        if (g < 0)
            continue;
        int in = st_new_inst(s, o);
        if (in < 0)
            return in;
        st_gpu_attach(s, in, g);
        *inst_out = in;
        return room_index_note(x, s, g) ? -ENOMEM : 1;
    }
    return 0;
}

struct algo_created {
    int *inst;
    int n;
};

/* The instances of each GPU in index order, as they were when built (n0 instances);
 * instances created later are looked at one by one (there are few). room: the MIG GPUs
 * that can take a new instance (room_index.c), kept up to date by the local search. */
struct algo_by_gpu {
    int *first, *next, n0;
    struct room_index room;
};

static int algo_by_gpu_build(const struct state *s, struct algo_by_gpu *b)
{
    b->first = malloc(((size_t)s->n_gpu + 1) * sizeof(int));
    b->next = malloc(((size_t)s->n_inst + 1) * sizeof(int));
    b->n0 = s->n_inst;
    b->room = (struct room_index){0};
    if (!b->first || !b->next)
        return -ENOMEM;
    for (int g = 0; g < s->n_gpu; g++)
        if (s->gpu[g].alive && !s->gpu[g].whole && st_gpu_compute(s, g) < PLAN_COMPUTE_SLICES &&
            room_index_note(&b->room, s, g))
            return -ENOMEM;
    for (int g = 0; g < s->n_gpu; g++)
        b->first[g] = -1;
    for (int i = s->n_inst - 1; i >= 0; i--) {
        int g = s->inst[i].gpu;
        b->next[i] = g >= 0 ? b->first[g] : -1;
        if (g >= 0)
            b->first[g] = i;
    }
    return 0;
}

/* Empty instance i into other instances' idle time or new instances on other GPUs. */
static int algo_evacuate_inst(struct state *s, struct algo_journal *j, struct algo_created *cr,
                              struct algo_by_gpu *b, int i, int g)
{
    while (s->inst[i].n) {
        int w = s->inst[i].head, t = 0, to = bf_best(s, w, 0, i, g, &t);
        if (to < 0) {
            int rc = algo_new_elsewhere(s, w, g, &b->room, &to);
            if (rc <= 0)
                return rc;
            cr->inst[cr->n++] = to;
            t = st_need(s, w, s->inst[to].option);
        }
        algo_move(s, j, w, to, t);
    }
    return 1;
}

static int algo_evacuate_gpu(struct state *s, struct algo_journal *j, struct algo_created *cr,
                             struct algo_by_gpu *b, int g)
{
    int rc = 1;
    for (int i = b->first[g]; rc > 0 && i >= 0; i = b->next[i])
        if (s->inst[i].gpu == g)
            rc = algo_evacuate_inst(s, j, cr, b, i, g);
    for (int i = b->n0; rc > 0 && i < s->n_inst; i++)
        if (s->inst[i].gpu == g)
            rc = algo_evacuate_inst(s, j, cr, b, i, g);
    if (rc > 0) {   /* the GPU is empty now: release its instances */
        for (int i = b->first[g]; i >= 0; i = b->next[i])
            if (s->inst[i].gpu == g)
                st_gpu_detach(s, i);
        for (int i = b->n0; i < s->n_inst; i++)
            if (s->inst[i].gpu == g)
                st_gpu_detach(s, i);
    }
    return rc;
}

/* Detaches the instances an evacuation created that its undo left empty; their GPUs
 * regain room (noted in x). */
static int algo_undo_created(struct state *s, struct algo_created *cr, struct room_index *x)
{
    while (cr->n > 0) {
        int i = cr->inst[--cr->n], g = s->inst[i].gpu;
        if (!s->inst[i].n) {
            st_gpu_detach(s, i);
            if (g >= 0 && room_index_note(x, s, g))
                return -ENOMEM;
        }
    }
    return 0;
}

static int *algo_gpu_members(const struct state *s)
{
    int *n = calloc((size_t)s->n_gpu + 1, sizeof(int));
    for (int i = 0; n && i < s->n_inst; i++)
        if (s->inst[i].gpu >= 0)
            n[s->inst[i].gpu] += s->inst[i].n;
    return n;
}

/* Try to empty the least-loaded GPUs, one at a time; returns how many were freed. */
static int algo_drop_gpus(struct state *s, int budget)
{
    struct algo_journal j;
    struct algo_created cr = {malloc(((size_t)s->n_wl + 1) * sizeof(int)), 0};
    struct algo_key *k = malloc(((size_t)s->n_gpu + 1) * sizeof(*k));
    int *members = algo_gpu_members(s);
    int freed = 0, n = 0;
    struct algo_by_gpu by = {0};
    if (algo_journal_init(&j, s->n_wl) || !cr.inst || !k || !members || algo_by_gpu_build(s, &by)) {
        freed = -ENOMEM;
        goto out;
    }
    for (int g = 0; g < s->n_gpu; g++)
        if (s->gpu[g].alive)
            k[n++] = (struct algo_key){-(long)st_gpu_compute(s, g) * 100000 - members[g], g};
    qsort(k, (size_t)n, sizeof(*k), algo_key_desc);
    for (int q = 0; q < n && q < budget; q++) {
        if (!s->gpu[k[q].id].alive)
            continue;
        j.n = 0;
        cr.n = 0;
        int rc = algo_evacuate_gpu(s, &j, &cr, &by, k[q].id);
        if (rc < 0) {
            freed = rc;
            goto out;
        }
        if (rc) {
            freed++;
        } else {
            algo_undo(s, &j);
            if (algo_undo_created(s, &cr, &by.room)) {
                freed = -ENOMEM;
                goto out;
            }
        }
    }
out:
    algo_journal_free(&j);
    free(by.first);
    free(by.next);
    room_index_free(&by.room);
    free(cr.inst);
    free(k);
    free(members);
    return freed;
}

/* Try to empty the `budget` least-used instances into idle time elsewhere. */
static int algo_drop_instances(struct state *s, int budget)
{
    struct algo_journal j;
    struct algo_key *k = malloc(((size_t)s->n_inst + 1) * sizeof(*k));
    int n = 0, freed = 0;
    if (algo_journal_init(&j, s->n_wl) || !k) {
        freed = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].n)
            k[n++] = (struct algo_key){-(long)s->inst[i].time, i};
    qsort(k, (size_t)n, sizeof(*k), algo_key_desc);
    for (int q = 0; q < n && q < budget; q++) {
        if (!s->inst[k[q].id].n)
            continue;
        j.n = 0;
        if (algo_empty_instance(s, &j, k[q].id, 0, -1)) {
            st_gpu_detach(s, k[q].id);   /* the one instance this emptied */
            freed++;
        } else {
            algo_undo(s, &j);
        }
    }
out:
    algo_journal_free(&j);
    free(k);
    return freed;
}

/* Total time instance i's members would need on option o, or -1 if one cannot run
 * there or their memory does not fit. */
static int algo_retime(const struct state *s, int i, int o)
{
    int total = 0;
    int64_t mem = 0;
    for (int w = s->inst[i].head; w >= 0; w = s->next[w]) {
        int t = st_need(s, w, o);
        if (t < 0)
            return -1;
        total += t;
        mem += s->in->workloads[w].mem_mib;
    }
    return total <= st_inst_cap(s, o, s->inst[i].n) && mem <= plan_option_mem(s->m, o) ? total : -1;
}

/* May instance i on its GPU become option o? A whole GPU only for a lone instance. */
static int algo_retype_legal(const struct state *s, int i, int o)
{
    const struct st_gpu *g = &s->gpu[s->inst[i].gpu];
    int cur = s->inst[i].option;
    if (o == PLAN_OPTION_WHOLE)
        return !g->whole && g->mix == plan_mix_add(0, cur, 1);
    if (g->whole)
        return 1;
    return plan_mix_fits(s->lay, plan_mix_add(plan_mix_add(g->mix, cur, -1), o, 1));
}

static void algo_retype_apply(struct state *s, int i, int o)
{
    int g = s->inst[i].gpu, members[PLAN_TIME_UNITS], n = 0;
    for (int w = s->inst[i].head; w >= 0; w = s->next[w])
        members[n++] = w;
    for (int k = 0; k < n; k++)
        st_take(s, members[k]);
    st_gpu_detach(s, i);
    s->inst[i].option = o;
    s->gpu[g] = (struct st_gpu){o == PLAN_OPTION_WHOLE, s->gpu[g].whole ? 0 : s->gpu[g].mix, 1,
                                o == PLAN_OPTION_WHOLE ? PLAN_COMPUTE_SLICES
                                : s->gpu[g].whole ? 0 : s->gpu[g].compute, 0};
    st_gpu_attach(s, i, g);
    for (int k = 0; k < n; k++)
        st_put(s, members[k], i, st_need(s, members[k], o));
}

/* Change instances' types where that frees compute slices or time on the same GPU:
 * the option with the fewest compute slices, then the least total time, that holds
 * all members (e.g. 7g -> whole GPU, more SMs in the same slices; 4g -> 3g); between
 * equals, the whole GPU. */
int algo_retype(struct state *s)
{
    int changed = 0;
    for (int i = 0; i < s->n_inst; i++) {
        if (!s->inst[i].n || s->inst[i].gpu < 0)
            continue;
        int cur = s->inst[i].option, best = cur;
        /* ties go to the whole GPU: kairosd can enforce time shares there, not per MIG
         * instance (emit.c) */
        long best_key = ((long)plan_option_compute(s->m, cur) * 10000 + s->inst[i].time) * 2
                        + (cur != PLAN_OPTION_WHOLE);
        for (int o = 0; o < s->n_options; o++) {
            /* more slices never win; legality is cheaper than summing the members */
            if (o == cur || plan_option_compute(s->m, o) > plan_option_compute(s->m, cur)
                || !algo_retype_legal(s, i, o))
                continue;
            int t = algo_retime(s, i, o);
            long key = ((long)plan_option_compute(s->m, o) * 10000 + t) * 2 + (o != PLAN_OPTION_WHOLE);
            if (t >= 0 && key < best_key) {
                best = o;
                best_key = key;
            }
        }
        if (best != cur) {
            algo_retype_apply(s, i, best);
            changed++;
        }
    }
    return changed;
}

int algo_improve(struct state *s, int budget, int passes)
{
    int rc = bf_attach(s);
    for (int pass = 0; !rc && pass < passes; pass++) {
        int r = algo_retype(s);
        int a = algo_drop_instances(s, budget);
        int b = algo_drop_gpus(s, budget);
        if (a < 0 || b < 0)
            rc = a < 0 ? a : b;
        else if (!a && !b && !r)
            break;
    }
    bf_detach(s);
    return rc;
}

int algo_fuse_pack(struct state *s, int (*pick)(const struct state *s, int w))
{
    int *choice = algo_choose(s, pick);
    if (!choice)
        return -ENOMEM;
    int rc = algo_fuse(s, choice, 0);
    rc = rc ? rc : algo_pack_ffd(s);
    free(choice);
    return rc;
}
