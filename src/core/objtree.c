/* objtree.c - mirror of one process's RM object tree, with device-memory accounting.
 *
 * Objects live in a hash table keyed by (client, handle) and are linked to their
 * parent, so a free walks the subtree without recursion (a hostile trace can build
 * arbitrarily deep chains). Memory is held by blocks: an allocation creates one,
 * a duplicate of the object shares it, and the block's bytes are released when its
 * last object goes. Roots are clients, or objects whose parent was never seen
 * (tracing started late); closing a file frees the roots made on it. A channel
 * group's node also keeps the timeslice the application last set on it
 * (objtree_set_timeslice), so that it goes with the group.
 */
#include "core/objtree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/rm_names.h"

struct mem_block {
    uint64_t bytes;
    uint32_t refs;
    bool vidmem;
    int gpu;
};

struct obj {
    uint32_t client, handle, parent_handle, h_class;
    enum rm_class_kind kind;
    int gpu;                  /* device instance it hangs under, -1 unknown */
    uint64_t file_id;
    struct mem_block *block;
    uint32_t userd_mem;       /* channels: the memory object holding its USERD (0: unknown) */
    uint64_t userd_off;
    uint64_t timeslice_us;    /* channel groups: the application's last SET_TIMESLICE (0: none) */
    struct obj *parent, *first_child, *next_sibling, *prev_sibling;
    struct obj *hash_next;
    struct obj *root_next, *root_prev; /* list of roots, for closes */
};

struct class_count {
    uint32_t h_class, live, created;
};

/* What an RM_MAP_MEMORY named: kept until the mmap it announces, then with it. */
struct map_source {
    uint32_t client, memory;
    uint64_t offset;          /* into the memory object */
};

struct pending_map {
    uint64_t file_id;
    enum objtree_map_kind kind;
    struct map_source src;
};

struct mapping {
    uint64_t addr, len;
    enum objtree_map_kind kind;
    struct map_source src;
};

/* A reference to a block held by an open file (an export file's dup of it). */
struct file_hold {
    uint64_t file_id;
    struct mem_block *block;
    uint32_t client, handle;  /* the object it was held for (objtree_hold_in_file) */
};

struct objtree {
    struct obj **buckets;
    size_t n_buckets, n_objects;
    struct obj *roots;
    struct class_count *classes;
    size_t n_classes, cap_classes;
    struct pending_map *pending;
    size_t n_pending, cap_pending;
    struct mapping *maps;
    size_t n_maps, cap_maps;
    struct file_hold *holds;  /* blocks an export file keeps (objtree_hold_in_file) */
    size_t n_holds, cap_holds;
    struct objtree_stats stats;
};

/* ---- growable arrays ---------------------------------------------------------- */

static int grow(void **items, size_t *cap, size_t need, size_t item_size)
{
    if (need <= *cap)
        return 0;
    size_t new_cap = *cap ? *cap * 2 : 16;
    while (new_cap < need)
        new_cap *= 2;
    void *p = realloc(*items, new_cap * item_size);
    if (!p)
        return -ENOMEM;
    *items = p;
    *cap = new_cap;
    return 0;
}

/* ---- hash table ---------------------------------------------------------------- */

static size_t bucket_of(const struct objtree *t, uint32_t client, uint32_t handle)
{
    uint64_t h = ((uint64_t)client << 32 | handle) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (t->n_buckets - 1);
}

static struct obj *find(const struct objtree *t, uint32_t client, uint32_t handle)
{
    for (struct obj *o = t->buckets[bucket_of(t, client, handle)]; o; o = o->hash_next)
        if (o->client == client && o->handle == handle)
            return o;
    return NULL;
}

static int rehash(struct objtree *t)
{
    size_t n = t->n_buckets * 2;
    struct obj **b = calloc(n, sizeof *b);
    if (!b)
        return -ENOMEM;
    struct obj **old = t->buckets;
    size_t old_n = t->n_buckets;
    t->buckets = b;
    t->n_buckets = n;
    for (size_t i = 0; i < old_n; i++) {
        struct obj *o = old[i];
        while (o) {
            struct obj *next = o->hash_next;
            size_t k = bucket_of(t, o->client, o->handle);
            o->hash_next = b[k];
            b[k] = o;
            o = next;
        }
    }
    free(old);
    return 0;
}

static void hash_remove(struct objtree *t, struct obj *o)
{
    struct obj **pp = &t->buckets[bucket_of(t, o->client, o->handle)];
    while (*pp && *pp != o)
        pp = &(*pp)->hash_next;
    if (*pp)
        *pp = o->hash_next;
}

/* ---- per-class counters ------------------------------------------------------------ */

static struct class_count *class_slot(struct objtree *t, uint32_t h_class)
{
    size_t lo = 0, hi = t->n_classes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->classes[mid].h_class < h_class)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->n_classes && t->classes[lo].h_class == h_class)
        return &t->classes[lo];
    if (grow((void **)&t->classes, &t->cap_classes, t->n_classes + 1, sizeof *t->classes))
        return NULL;
    memmove(&t->classes[lo + 1], &t->classes[lo], (t->n_classes - lo) * sizeof *t->classes);
    t->n_classes++;
    t->classes[lo] = (struct class_count){h_class, 0, 0};
    return &t->classes[lo];
}

static void count_kind(struct objtree_stats *s, enum rm_class_kind kind, int delta, bool created)
{
    uint32_t *live = NULL, *made = NULL;
    switch (kind) {
    case RM_KIND_CLIENT:
        live = &s->live_clients, made = &s->created_clients;
        break;
    case RM_KIND_CHANNEL_GROUP:
        live = &s->live_channel_groups, made = &s->created_channel_groups;
        break;
    case RM_KIND_CHANNEL:
        live = &s->live_channels, made = &s->created_channels;
        break;
    case RM_KIND_USERMODE:
        live = &s->live_usermode, made = &s->created_usermode;
        break;
    default:
        return;
    }
    *live += (uint32_t)delta;
    if (created)
        (*made)++;
}

/* ---- objects --------------------------------------------------------------------- */

static void link_root(struct objtree *t, struct obj *o)
{
    o->root_prev = NULL;
    o->root_next = t->roots;
    if (t->roots)
        t->roots->root_prev = o;
    t->roots = o;
}

static void unlink_root(struct objtree *t, struct obj *o)
{
    if (o->root_prev)
        o->root_prev->root_next = o->root_next;
    else if (t->roots == o)
        t->roots = o->root_next;
    if (o->root_next)
        o->root_next->root_prev = o->root_prev;
    o->root_next = o->root_prev = NULL;
}

static void link_child(struct obj *parent, struct obj *o)
{
    o->parent = parent;
    o->prev_sibling = NULL;
    o->next_sibling = parent->first_child;
    if (parent->first_child)
        parent->first_child->prev_sibling = o;
    parent->first_child = o;
}

static void unlink_child(struct obj *o)
{
    if (o->prev_sibling)
        o->prev_sibling->next_sibling = o->next_sibling;
    else if (o->parent)
        o->parent->first_child = o->next_sibling;
    if (o->next_sibling)
        o->next_sibling->prev_sibling = o->prev_sibling;
    o->parent = o->prev_sibling = o->next_sibling = NULL;
}

static size_t gpu_slot(int gpu)
{
    if (gpu < 0)
        return 0;
    return gpu < OBJTREE_MAX_GPUS ? (size_t)gpu : OBJTREE_MAX_GPUS - 1;
}

/* Effects add up without signed overflow: a delta saturates at +-INT64_MAX. */
static void delta_add(int64_t *d, uint64_t bytes)
{
    if (bytes > (uint64_t)INT64_MAX || *d > INT64_MAX - (int64_t)bytes)
        *d = INT64_MAX;
    else
        *d += (int64_t)bytes;
}

static void delta_sub(int64_t *d, uint64_t bytes)
{
    if (bytes > (uint64_t)INT64_MAX || *d < -INT64_MAX + (int64_t)bytes)
        *d = -INT64_MAX;
    else
        *d -= (int64_t)bytes;
}

static void release_block(struct objtree *t, struct mem_block *b, struct objtree_effect *e)
{
    if (!b || --b->refs > 0)
        return;
    if (b->vidmem) {
        size_t g = gpu_slot(b->gpu);
        t->stats.vidmem_now -= b->bytes;
        t->stats.vidmem_gpu[g] -= b->bytes;
        t->stats.vidmem_freed += b->bytes;
        t->stats.vidmem_frees++;
        delta_sub(&e->vidmem_delta, b->bytes);
        delta_sub(&e->vidmem_delta_gpu[g], b->bytes);
    }
    free(b);
}

/* Frees one object that has no children left. */
static void destroy_leaf(struct objtree *t, struct obj *o, struct objtree_effect *e)
{
    if (o->parent)
        unlink_child(o);
    else
        unlink_root(t, o);
    hash_remove(t, o);
    release_block(t, o->block, e);
    struct class_count *c = class_slot(t, o->h_class);
    if (c && c->live)
        c->live--;
    count_kind(&t->stats, o->kind, -1, false);
    t->n_objects--;
    t->stats.live_objects--;
    e->objects_freed++;
    free(o);
}

/* Frees o and everything below it, deepest first, without recursion. */
static void destroy_subtree(struct objtree *t, struct obj *top, struct objtree_effect *e)
{
    struct obj *o = top;
    for (;;) {
        while (o->first_child)
            o = o->first_child;
        if (o == top) {
            destroy_leaf(t, o, e);
            return;
        }
        struct obj *up = o->parent;
        destroy_leaf(t, o, e);
        o = up;
    }
}

static bool is_client_class(uint32_t h_class)
{
    return rm_class_kind(h_class) == RM_KIND_CLIENT;
}

static struct obj *new_object(struct objtree *t, uint32_t client, uint32_t handle,
                              uint32_t parent_handle, uint32_t h_class, uint64_t file_id)
{
    if (t->n_objects + 1 > t->n_buckets && rehash(t))
        return NULL;
    struct obj *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->client = client;
    o->handle = handle;
    o->parent_handle = parent_handle;
    o->h_class = h_class;
    o->kind = rm_class_kind(h_class);
    o->gpu = -1;
    o->file_id = file_id;
    struct obj *parent = handle == client ? NULL : find(t, client, parent_handle);
    if (!parent && handle != client)
        parent = find(t, client, client); /* unseen parent: hang it on its client */
    if (parent) {
        link_child(parent, o);
        o->file_id = parent->file_id;
        o->gpu = parent->gpu;
    } else {
        link_root(t, o);
    }
    size_t k = bucket_of(t, client, handle);
    o->hash_next = t->buckets[k];
    t->buckets[k] = o;
    t->n_objects++;
    t->stats.live_objects++;
    t->stats.created_objects++;
    count_kind(&t->stats, o->kind, +1, true);
    struct class_count *c = class_slot(t, h_class);
    if (c) {
        c->live++;
        c->created++;
    }
    return o;
}

/* Adds an object; an existing one with the same key is replaced (the driver would
 * have refused a duplicate handle, so the old one is stale). */
static struct obj *add_object(struct objtree *t, uint32_t client, uint32_t handle,
                              uint32_t parent_handle, uint32_t h_class, uint64_t file_id,
                              struct objtree_effect *e)
{
    struct obj *stale = find(t, client, handle);
    if (stale)
        destroy_subtree(t, stale, e);
    struct obj *o = new_object(t, client, handle, parent_handle, h_class, file_id);
    if (o)
        e->objects_added++;
    return o;
}

static int attach_memory(struct objtree *t, struct obj *o, uint64_t bytes, bool vidmem,
                         struct objtree_effect *e)
{
    struct mem_block *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    /* No GPU holds more: a larger size from a reply is bounded, never wrapped. */
    b->bytes = bytes > OBJTREE_MAX_BYTES ? OBJTREE_MAX_BYTES : bytes;
    bytes = b->bytes;
    b->refs = 1;
    b->vidmem = vidmem;
    b->gpu = o->gpu;
    o->block = b;
    if (vidmem) {
        size_t g = gpu_slot(o->gpu);
        t->stats.vidmem_gpu[g] += bytes;
        delta_add(&e->vidmem_delta_gpu[g], bytes);
        t->stats.vidmem_now += bytes;
        t->stats.vidmem_allocated += bytes;
        t->stats.vidmem_allocs++;
        if (t->stats.vidmem_now > t->stats.vidmem_peak)
            t->stats.vidmem_peak = t->stats.vidmem_now;
        delta_add(&e->vidmem_delta, bytes);
    }
    return 0;
}

/* ---- applying calls ------------------------------------------------------------- */

static int apply_alloc(struct objtree *t, uint64_t file_id, const struct rm_op *op,
                       struct objtree_effect *e)
{
    bool root = is_client_class(op->h_class);
    uint32_t client = root ? op->h_object : op->h_client;
    struct obj *o = add_object(t, client, op->h_object, root ? 0 : op->h_parent, op->h_class,
                               file_id, e);
    if (!o)
        return -ENOMEM;
    if (root)
        o->file_id = file_id;
    if (op->h_class == RM_CLASS_NV01_DEVICE_0 && op->device_id >= 0)
        o->gpu = op->device_id;
    if (o->kind == RM_KIND_CHANNEL && op->h_userd) {
        o->userd_mem = op->h_userd;
        o->userd_off = op->userd_offset;
    }
    if (op->kind == RM_OP_ALLOC_MEMORY || op->kind == RM_OP_VIDHEAP_ALLOC || op->vidmem)
        return attach_memory(t, o, op->bytes, op->vidmem, e);
    return 0;
}

static void apply_free(struct objtree *t, uint32_t client, uint32_t handle,
                       struct objtree_effect *e)
{
    struct obj *o = find(t, client, handle);
    if (o)
        destroy_subtree(t, o, e);
}

static int apply_dup(struct objtree *t, uint64_t file_id, const struct rm_op *op,
                     struct objtree_effect *e)
{
    const struct obj *src = find(t, op->h_client_src, op->h_object_src);
    uint32_t h_class = src ? src->h_class : 0xFFFFFFFFu;
    struct obj *o = add_object(t, op->h_client, op->h_object, op->h_parent, h_class, file_id, e);
    if (!o)
        return -ENOMEM;
    /* re-find: add_object may have freed a stale object, never the source */
    src = find(t, op->h_client_src, op->h_object_src);
    if (src && src->block) {
        o->block = src->block;
        o->block->refs++;
    }
    return 0;
}

static int add_pending_map(struct objtree *t, uint64_t map_file_id, const struct obj *target,
                           const struct map_source *src)
{
    enum objtree_map_kind kind = OBJTREE_MAP_OTHER;
    if (target && target->kind == RM_KIND_USERMODE)
        kind = OBJTREE_MAP_DOORBELL;
    else if (target && target->kind == RM_KIND_MEMORY)
        kind = OBJTREE_MAP_MEMORY;
    for (size_t i = 0; i < t->n_pending; i++)
        if (t->pending[i].file_id == map_file_id) {
            t->pending[i].kind = kind;
            t->pending[i].src = *src;
            return 0;
        }
    if (grow((void **)&t->pending, &t->cap_pending, t->n_pending + 1, sizeof *t->pending))
        return -ENOMEM;
    t->pending[t->n_pending++] = (struct pending_map){map_file_id, kind, *src};
    return 0;
}

int objtree_apply(struct objtree *tree, uint64_t file_id, uint64_t map_file_id,
                  const struct rm_op *op, struct objtree_effect *effect)
{
    struct objtree_effect scratch;
    struct objtree_effect *e = effect ? effect : &scratch;
    memset(e, 0, sizeof *e);
    if (!op->ok || op->problem == RM_PROBLEM_WRONG_SIZE || op->problem == RM_PROBLEM_UNKNOWN)
        return 0;
    switch (op->kind) {
    case RM_OP_ALLOC:
    case RM_OP_ALLOC_MEMORY:
    case RM_OP_VIDHEAP_ALLOC:
        return apply_alloc(tree, file_id, op, e);
    case RM_OP_FREE:
        apply_free(tree, op->h_client, op->h_object, e);
        return 0;
    case RM_OP_VIDHEAP_FREE:
        apply_free(tree, op->h_client, op->h_object, e);
        return 0;
    case RM_OP_DUP:
        return apply_dup(tree, file_id, op, e);
    case RM_OP_MAP:
        if (map_file_id == 0)
            return 0;
        return add_pending_map(tree, map_file_id, find(tree, op->h_client, op->h_memory),
                               &(struct map_source){op->h_client, op->h_memory, op->map_offset});
    default:
        return 0;
    }
}

void objtree_close_file(struct objtree *tree, uint64_t file_id, struct objtree_effect *effect)
{
    struct objtree_effect scratch;
    struct objtree_effect *e = effect ? effect : &scratch;
    memset(e, 0, sizeof *e);
    /* Roots are independent subtrees: destroying one unlinks only itself from the
     * list of roots, so the next pointer taken before stays valid. */
    struct obj *o = tree->roots;
    while (o) {
        struct obj *next = o->root_next;
        if (o->file_id == file_id)
            destroy_subtree(tree, o, e);
        o = next;
    }
    for (size_t i = 0; i < tree->n_pending; i++)
        if (tree->pending[i].file_id == file_id) {
            tree->pending[i] = tree->pending[--tree->n_pending];
            break;
        }
    for (size_t i = 0; i < tree->n_holds;) {
        if (tree->holds[i].file_id == file_id) {
            release_block(tree, tree->holds[i].block, e);
            tree->holds[i] = tree->holds[--tree->n_holds];
        } else {
            i++;
        }
    }
}

int objtree_hold_in_file(struct objtree *tree, uint64_t file_id, uint32_t client,
                         uint32_t handle)
{
    struct obj *o = find(tree, client, handle);
    if (!o || !o->block || !file_id)
        return 0;
    for (size_t i = 0; i < tree->n_holds; i++)
        if (tree->holds[i].file_id == file_id && tree->holds[i].block == o->block)
            return 1; /* held there already: one reference is enough */
    if (grow((void **)&tree->holds, &tree->cap_holds, tree->n_holds + 1, sizeof *tree->holds))
        return -ENOMEM;
    o->block->refs++;
    tree->holds[tree->n_holds++] = (struct file_hold){file_id, o->block, client, handle};
    return 1;
}

bool objtree_memory_of(const struct objtree *tree, uint32_t client, uint32_t handle,
                       uint64_t *bytes, int *gpu)
{
    const struct obj *o = find(tree, client, handle);
    if (!o || !o->block)
        return false;
    *bytes = o->block->vidmem ? o->block->bytes : 0;
    *gpu = (int)gpu_slot(o->block->gpu);
    return true;
}

/* The hold made for (client, handle), when that object is gone: its index in *at. */
static bool hold_of_gone(const struct objtree *tree, uint32_t client, uint32_t handle,
                         size_t *at)
{
    if (find(tree, client, handle))
        return false;
    for (size_t i = 0; i < tree->n_holds; i++)
        if (tree->holds[i].client == client && tree->holds[i].handle == handle) {
            *at = i;
            return true;
        }
    return false;
}

bool objtree_hold_left(const struct objtree *tree, uint32_t client, uint32_t handle,
                       uint64_t *bytes, int *gpu)
{
    size_t i;
    if (!hold_of_gone(tree, client, handle, &i))
        return false;
    const struct mem_block *b = tree->holds[i].block;
    *bytes = b->refs == 1 && b->vidmem ? b->bytes : 0;
    *gpu = (int)gpu_slot(b->gpu);
    return true;
}

void objtree_release_hold(struct objtree *tree, uint32_t client, uint32_t handle,
                          struct objtree_effect *effect)
{
    memset(effect, 0, sizeof *effect);
    size_t i;
    if (!hold_of_gone(tree, client, handle, &i))
        return;
    release_block(tree, tree->holds[i].block, effect);
    tree->holds[i] = tree->holds[--tree->n_holds];
}

/* ---- mappings -------------------------------------------------------------------- */

enum objtree_map_kind objtree_mmap(struct objtree *tree, uint64_t map_file_id, uint64_t addr,
                                   uint64_t len)
{
    for (size_t i = 0; i < tree->n_pending; i++) {
        if (tree->pending[i].file_id != map_file_id)
            continue;
        enum objtree_map_kind kind = tree->pending[i].kind;
        struct map_source src = tree->pending[i].src;
        tree->pending[i] = tree->pending[--tree->n_pending];
        if (grow((void **)&tree->maps, &tree->cap_maps, tree->n_maps + 1, sizeof *tree->maps))
            return kind;
        tree->maps[tree->n_maps++] = (struct mapping){addr, len, kind, src};
        if (kind == OBJTREE_MAP_DOORBELL) {
            tree->stats.doorbell_mappings++;
            tree->stats.live_doorbell_mappings++;
        }
        return kind;
    }
    return OBJTREE_MAP_NONE;
}

bool objtree_munmap(struct objtree *tree, uint64_t addr, uint64_t len)
{
    bool removed = false;
    for (size_t i = 0; i < tree->n_maps;) {
        struct mapping *m = &tree->maps[i];
        /* a mapping that lost any of its pages is gone as a whole: what is left of
         * it may not be read through (the runnable sensor reads USERD pages) */
        bool overlaps = m->addr < addr + len && addr < m->addr + m->len;
        if (!overlaps) {
            i++;
            continue;
        }
        if (m->kind == OBJTREE_MAP_DOORBELL && tree->stats.live_doorbell_mappings)
            tree->stats.live_doorbell_mappings--;
        *m = tree->maps[--tree->n_maps];
        removed = true;
    }
    return removed;
}

/* ---- queries --------------------------------------------------------------------- */

void objtree_stats(const struct objtree *tree, struct objtree_stats *stats)
{
    *stats = tree->stats;
}

void objtree_foreach_class(const struct objtree *tree,
                           void (*fn)(uint32_t h_class, uint32_t live, uint32_t created, void *ctx),
                           void *ctx)
{
    for (size_t i = 0; i < tree->n_classes; i++)
        fn(tree->classes[i].h_class, tree->classes[i].live, tree->classes[i].created, ctx);
}

static void fill_ref(const struct obj *o, struct objtree_ref *ref)
{
    ref->h_client = o->client;
    ref->h_object = o->handle;
    ref->h_parent = o->parent_handle;
    ref->h_class = o->h_class;
    ref->file_id = o->file_id;
}

size_t objtree_list(const struct objtree *tree, enum rm_class_kind kind, struct objtree_ref *out,
                    size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < tree->n_buckets; i++)
        for (const struct obj *o = tree->buckets[i]; o; o = o->hash_next)
            if (o->kind == kind) {
                if (n < max)
                    fill_ref(o, &out[n]);
                n++;
            }
    return n;
}

/* The CPU address of the channel's USERD words, 0 when no live mapping covers them. */
static uint64_t userd_addr(const struct objtree *t, const struct obj *ch)
{
    for (size_t i = 0; i < t->n_maps; i++) {
        const struct mapping *m = &t->maps[i];
        if (m->src.client != ch->client || m->src.memory != ch->userd_mem ||
            ch->userd_off < m->src.offset)
            continue;
        uint64_t in = ch->userd_off - m->src.offset;
        if (in < m->len && m->len - in >= OBJTREE_USERD_SPAN)
            return m->addr + in;
    }
    return 0;
}

size_t objtree_userds(const struct objtree *tree, struct objtree_userd *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < tree->n_buckets; i++)
        for (const struct obj *o = tree->buckets[i]; o; o = o->hash_next) {
            if (o->kind != RM_KIND_CHANNEL || !o->userd_mem)
                continue;
            uint64_t a = userd_addr(tree, o);
            if (!a)
                continue;
            if (n < max) {
                struct objtree_ref ref;
                fill_ref(o, &ref);
                out[n] = (struct objtree_userd){o->client, o->handle, objtree_gpu_of(tree,
                                                o->client, o->handle), ref.file_id, a};
            }
            n++;
        }
    return n;
}

size_t objtree_doorbells(const struct objtree *tree, uint64_t *addr, uint64_t *len, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < tree->n_maps; i++)
        if (tree->maps[i].kind == OBJTREE_MAP_DOORBELL) {
            if (n < max) {
                addr[n] = tree->maps[i].addr;
                len[n] = tree->maps[i].len;
            }
            n++;
        }
    return n;
}

int objtree_gpu_of(const struct objtree *tree, uint32_t h_client, uint32_t h_object)
{
    const struct obj *o = find(tree, h_client, h_object);
    return o ? o->gpu : -1;
}

bool objtree_lookup(const struct objtree *tree, uint32_t h_client, uint32_t h_object,
                    struct objtree_ref *ref)
{
    const struct obj *o = find(tree, h_client, h_object);
    if (o && ref)
        fill_ref(o, ref);
    return o != NULL;
}

bool objtree_set_timeslice(struct objtree *tree, uint32_t h_client, uint32_t h_tsg, uint64_t us)
{
    struct obj *o = find(tree, h_client, h_tsg);
    if (!o || o->kind != RM_KIND_CHANNEL_GROUP)
        return false;
    o->timeslice_us = us;
    return true;
}

uint64_t objtree_timeslice(const struct objtree *tree, uint32_t h_client, uint32_t h_tsg)
{
    const struct obj *o = find(tree, h_client, h_tsg);
    return o && o->kind == RM_KIND_CHANNEL_GROUP ? o->timeslice_us : 0;
}

/* ---- life cycle ------------------------------------------------------------------ */

struct objtree *objtree_new(void)
{
    struct objtree *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->n_buckets = 64;
    t->buckets = calloc(t->n_buckets, sizeof *t->buckets);
    if (!t->buckets) {
        free(t);
        return NULL;
    }
    return t;
}

void objtree_free(struct objtree *tree)
{
    if (!tree)
        return;
    struct objtree_effect e;
    while (tree->roots)
        destroy_subtree(tree, tree->roots, &e);
    for (size_t i = 0; i < tree->n_holds; i++)
        release_block(tree, tree->holds[i].block, &e);
    free(tree->holds);
    free(tree->buckets);
    free(tree->classes);
    free(tree->pending);
    free(tree->maps);
    free(tree);
}
