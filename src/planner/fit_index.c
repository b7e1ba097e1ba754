/* fit_index.c - the indexes that keep the heuristics' first-fit and best-fit scans
 * logarithmic instead of linear in the number of instances or GPUs.
 *
 * fit_tree: a segment tree over slots in a fixed order (instances or open GPUs, in the
 * order the scan used to visit them) holding per slot free time, free memory and a
 * bit mask; fit_tree_first() returns the leftmost slot with time >= t, memory >= m and
 * a given bit, i.e. exactly what a first-fit scan in that order returns.
 * bf_index: instances bucketed by option and free time, so that best fit (least time
 * left, ties to the lowest instance index) visits only the buckets that can win. The
 * state updates it on every st_put/st_take while it is attached (state.c).
 * Both give the same answers as the linear scans they replace (tests/unit/planner/test_scale.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "planner/internal.h"

int fit_tree_init(struct fit_tree *t, int n)
{
    t->size = 1;
    while (t->size < n)
        t->size *= 2;
    t->time = calloc(2 * (size_t)t->size, sizeof(int));
    t->mem = calloc(2 * (size_t)t->size, sizeof(int64_t));
    t->mask = calloc(2 * (size_t)t->size, sizeof(unsigned));
    if (!t->time || !t->mem || !t->mask) {
        fit_tree_free(t);
        return -ENOMEM;
    }
    return 0;
}

void fit_tree_free(struct fit_tree *t)
{
    free(t->time);
    free(t->mem);
    free(t->mask);
    memset(t, 0, sizeof(*t));
}

void fit_tree_set(struct fit_tree *t, int slot, int time, int64_t mem, unsigned mask)
{
    size_t x = (size_t)t->size + (size_t)slot;
    t->time[x] = time;
    t->mem[x] = mem;
    t->mask[x] = mask;
    for (x /= 2; x >= 1; x /= 2) {
        size_t l = 2 * x, r = l + 1;
        t->time[x] = t->time[l] > t->time[r] ? t->time[l] : t->time[r];
        t->mem[x] = t->mem[l] > t->mem[r] ? t->mem[l] : t->mem[r];
        t->mask[x] = t->mask[l] | t->mask[r];
    }
}

/* bit may hold several bits, all wanted (a node's mask is the OR of its leaves', so a
 * node that lacks one has no leaf with all). */
static int fit_tree_ok(const struct fit_tree *t, size_t x, int time, int64_t mem, unsigned bit)
{
    return t->time[x] >= time && t->mem[x] >= mem && (t->mask[x] & bit) == bit;
}

/* Leftmost slot under node x that satisfies all three; -1 if none. */
static int fit_tree_descend(const struct fit_tree *t, size_t x, int time, int64_t mem, unsigned bit)
{
    if (!fit_tree_ok(t, x, time, mem, bit))
        return -1;
    if (x >= (size_t)t->size)
        return (int)(x - (size_t)t->size);
    int r = fit_tree_descend(t, 2 * x, time, mem, bit);
    return r >= 0 ? r : fit_tree_descend(t, 2 * x + 1, time, mem, bit);
}

int fit_tree_first(const struct fit_tree *t, int time, int64_t mem, unsigned bit)
{
    return t->size ? fit_tree_descend(t, 1, time, mem, bit) : -1;
}

/* ---- best fit: buckets by (option, free time) ---- */

#define BF_FREE (PLAN_TIME_UNITS + 1)
#define BF_WORDS ((BF_FREE + 63) / 64)

/* One bucket: a binary min-heap of instance indices (the lowest index on top). */
struct bf_heap {
    int *a;
    int n, cap;
};

struct bf_index {
    int cap;
    int *key;          /* per instance: option * BF_FREE + free time, -1 if not indexed */
    int *pos;          /* per instance: position in its bucket's heap */
    int64_t opt_mem[PLAN_MAX_OPTIONS];
    struct bf_heap bucket[PLAN_MAX_OPTIONS * BF_FREE];
    uint64_t busy[PLAN_MAX_OPTIONS][BF_WORDS]; /* bucket non-empty */
};

static int bf_grow(struct bf_index *b, int n)
{
    if (n <= b->cap)
        return 0;
    int cap = b->cap ? b->cap : 64;
    while (cap < n)
        cap *= 2;
    int *k = realloc(b->key, (size_t)cap * sizeof(int));
    if (k)
        b->key = k;
    int *p = realloc(b->pos, (size_t)cap * sizeof(int));
    if (p)
        b->pos = p;
    if (!k || !p)
        return -ENOMEM;
    for (int i = b->cap; i < cap; i++)
        b->key[i] = -1;
    b->cap = cap;
    return 0;
}

static void bf_heap_set(struct bf_index *b, struct bf_heap *h, int at, int i)
{
    h->a[at] = i;
    b->pos[i] = at;
}

static void bf_heap_sift(struct bf_index *b, struct bf_heap *h, int at)
{
    int i = h->a[at];
    while (at > 0 && h->a[(at - 1) / 2] > i) {
        bf_heap_set(b, h, at, h->a[(at - 1) / 2]);
        at = (at - 1) / 2;
    }
    for (;;) {
        int c = 2 * at + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->a[c + 1] < h->a[c])
            c++;
        if (h->a[c] > i)
            break;
        bf_heap_set(b, h, at, h->a[c]);
        at = c;
    }
    bf_heap_set(b, h, at, i);
}

static void bf_unlink(struct bf_index *b, int i)
{
    int k = b->key[i];
    if (k < 0)
        return;
    struct bf_heap *h = &b->bucket[k];
    int at = b->pos[i], last = h->a[--h->n];
    if (at < h->n) {
        h->a[at] = last;
        bf_heap_sift(b, h, at);
    }
    if (!h->n)
        b->busy[k / BF_FREE][(k % BF_FREE) / 64] &= ~(1ull << (k % BF_FREE % 64));
    b->key[i] = -1;
}

static int bf_link(struct bf_index *b, int i, int k)
{
    struct bf_heap *h = &b->bucket[k];
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 4;
        int *a = realloc(h->a, (size_t)cap * sizeof(int));
        if (!a)
            return -ENOMEM;
        h->a = a;
        h->cap = cap;
    }
    b->key[i] = k;
    h->a[h->n++] = i;
    bf_heap_sift(b, h, h->n - 1);
    b->busy[k / BF_FREE][(k % BF_FREE) / 64] |= 1ull << (k % BF_FREE % 64);
    return 0;
}

int bf_update(struct state *s, int i)
{
    struct bf_index *b = s->bf;
    if (!b)
        return 0;
    if (bf_grow(b, i + 1))
        return -ENOMEM;
    bf_unlink(b, i);
    const struct st_inst *in = &s->inst[i];
    int free = st_free_time(s, i);
    /* free > PLAN_TIME_UNITS cannot happen: capacities never exceed it */
    return in->n > 0 && free > 0 ? bf_link(b, i, in->option * BF_FREE + free) : 0;
}

int bf_attach(struct state *s)
{
    struct bf_index *b = calloc(1, sizeof(*b));
    int rc = b ? 0 : -ENOMEM;
    s->bf = b;
    for (int o = 0; b && o < s->n_options; o++)
        b->opt_mem[o] = plan_option_mem(s->m, o);
    rc = rc ? rc : bf_grow(b, s->n_inst + 1);
    for (int i = 0; !rc && i < s->n_inst; i++)
        rc = bf_update(s, i);
    if (rc)
        bf_detach(s);
    return rc;
}

void bf_detach(struct state *s)
{
    struct bf_index *b = s->bf;
    if (!b)
        return;
    for (int k = 0; k < PLAN_MAX_OPTIONS * BF_FREE; k++)
        free(b->bucket[k].a);
    free(b->key);
    free(b->pos);
    free(b);
    s->bf = NULL;
}

/* The next non-empty free-time bucket of option o at or above v, or -1. */
static int bf_next_busy(const struct bf_index *b, int o, int v)
{
    while (v < BF_FREE) {
        uint64_t word = b->busy[o][v / 64] >> (v % 64);
        if (word)
            return v + __builtin_ctzll(word);
        v = (v / 64 + 1) * 64;
    }
    return -1;
}

static int bf_may_join(const struct state *s, int i, int64_t wm, int lat, int skip_inst,
                       int skip_gpu)
{
    const struct st_inst *in = &s->inst[i];
    return i != skip_inst && !(skip_gpu >= 0 && in->gpu == skip_gpu)
        && in->mem + wm <= s->bf->opt_mem[in->option] && !(lat && in->lat);
}

/* Lowest-index instance of bucket k that w may join (memory, skips); -1 if none. The
 * heap's top answers unless it is excluded; then the whole bucket is scanned. */
static int bf_bucket_best(const struct state *s, int k, int w, int skip_inst, int skip_gpu)
{
    const struct bf_heap *h = &s->bf->bucket[k];
    int64_t wm = s->in->workloads[w].mem_mib;
    int lat = st_is_lat(s, w);
    if (bf_may_join(s, h->a[0], wm, lat, skip_inst, skip_gpu))
        return h->a[0];
    int best = -1;
    for (int j = 1; j < h->n; j++)
        if ((best < 0 || h->a[j] < best) && bf_may_join(s, h->a[j], wm, lat, skip_inst, skip_gpu))
            best = h->a[j];
    return best;
}

int bf_best(const struct state *s, int w, int min_rank, int skip_inst, int skip_gpu, int *best_t)
{
    int best = -1, best_left = PLAN_TIME_UNITS + 1;
    for (int o = 0; o < s->n_options; o++) {
        int t = st_need(s, w, o);
        if (t < 0 || s->rank[o] < min_rank)
            continue;
        for (int v = bf_next_busy(s->bf, o, t); v >= 0 && v - t <= best_left;
             v = bf_next_busy(s->bf, o, v + 1)) {
            int i = bf_bucket_best(s, o * BF_FREE + v, w, skip_inst, skip_gpu);
            if (i < 0)
                continue;
            if (v - t < best_left || i < best) {
                best = i;
                best_left = v - t;
                *best_t = t;
            }
            break;
        }
    }
    return best;
}
