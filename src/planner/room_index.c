/* room_index.c - the MIG GPUs that can take a new instance, for the local search's
 * "a new instance elsewhere" (algo_common.c): by option and compute slices in use,
 * so that the fullest GPU with room for an option (ties to the lowest index) is found
 * without a pass over every GPU. With one workload per MIG instance (the default)
 * that pass ran once per workload moved off a GPU being emptied, over tens of
 * thousands of GPUs at 100,000 workloads: a third of planning.
 *
 * Each bucket (option, compute) is a min-heap of GPU indices with lazy deletion: an
 * entry is current while its GPU is alive, not whole, has the option's room bit and
 * that compute; stale entries are dropped when they reach the top. A zeroed index is
 * empty; the owner notes each GPU once to fill it (in ascending order, each push stays
 * at the bottom of its heap) and again after each change to its instances, which adds
 * it where it now belongs. Gives the same answers as the linear pass it replaced
 * (tests/unit/planner/test_room_index.c; the plans: test_scale.c).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "planner/internal.h"

static struct room_heap *bucket(struct room_index *x, int o, int c)
{
    return &x->b[o][c];
}

static int heap_push(struct room_heap *h, int g)
{
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 16;
        int *v = realloc(h->v, (size_t)cap * sizeof(int));
        if (!v)
            return -ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    int i = h->n++;
    while (i > 0 && h->v[(i - 1) / 2] > g) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = g;
    return 0;
}

static void heap_pop(struct room_heap *h)
{
    int last = h->v[--h->n], i = 0;
    for (;;) {
        int k = 2 * i + 1;
        if (k >= h->n)
            break;
        if (k + 1 < h->n && h->v[k + 1] < h->v[k])
            k++;
        if (h->v[k] >= last)
            break;
        h->v[i] = h->v[k];
        i = k;
    }
    if (h->n)
        h->v[i] = last;
}

static bool current(const struct state *s, int g, int o, int c)
{
    const struct st_gpu *gpu = &s->gpu[g];
    return gpu->alive && !gpu->whole && (gpu->room >> o & 1u) && gpu->compute == c;
}

int room_index_note(struct room_index *x, const struct state *s, int g)
{
    const struct st_gpu *gpu = &s->gpu[g];
    if (!gpu->alive || gpu->whole || gpu->compute > PLAN_COMPUTE_SLICES)
        return 0;
    for (int o = 1; o < s->n_options; o++)
        if ((gpu->room >> o & 1u) && heap_push(bucket(x, o, gpu->compute), g))
            return -ENOMEM;
    return 0;
}

void room_index_free(struct room_index *x)
{
    for (int o = 0; o < PLAN_MAX_OPTIONS; o++)
        for (int c = 0; c <= PLAN_COMPUTE_SLICES; c++)
            free(x->b[o][c].v);
    *x = (struct room_index){0};
}

/* The lowest current GPU of bucket (o, c) other than skip_gpu, or -1; drops the stale
 * entries it meets. */
static int lowest(struct room_index *x, const struct state *s, int o, int c, int skip_gpu)
{
    struct room_heap *h = bucket(x, o, c);
    bool skipped = false;
    int found = -1;
    while (h->n) {
        int g = h->v[0];
        if (g != skip_gpu && current(s, g, o, c)) {
            found = g;
            break;
        }
        skipped |= g == skip_gpu && current(s, g, o, c);
        heap_pop(h);
    }
    if (skipped && heap_push(h, skip_gpu))
        return -ENOMEM;
    return found;
}

int room_index_best(struct room_index *x, const struct state *s, int o, int skip_gpu)
{
    for (int c = PLAN_COMPUTE_SLICES; c >= 0; c--) {
        int g = lowest(x, s, o, c, skip_gpu);
        if (g != -1)
            return g;
    }
    return -1;
}
