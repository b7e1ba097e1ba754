/* id_book.c - entries sorted by tenant id, found by binary search (see id_book.h). */
#include "daemon/base/id_book.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void id_book_init(struct id_book *b, size_t size, size_t max)
{
    *b = (struct id_book){.size = size < sizeof(uint32_t) ? sizeof(uint32_t) : size,
                          .max = max};
}

void id_book_fini(struct id_book *b)
{
    free(b->v);
    *b = (struct id_book){.size = b->size, .max = b->max};
}

void *id_book_at(const struct id_book *b, size_t i)
{
    return b->v + i * b->size;
}

static uint32_t id_at(const struct id_book *b, size_t i)
{
    uint32_t id;
    memcpy(&id, id_book_at(b, i), sizeof id);
    return id;
}

/* Where id's entry is, or would be put to keep the book sorted. */
static size_t place(const struct id_book *b, uint32_t id)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (id_at(b, mid) < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void *id_book_find(const struct id_book *b, uint32_t id)
{
    size_t i = place(b, id);
    return i < b->n && id_at(b, i) == id ? id_book_at(b, i) : NULL;
}

static bool room_for_one(struct id_book *b)
{
    if (b->n < b->cap)
        return true;
    size_t cap = b->cap ? 2 * b->cap : 16;
    unsigned char *v = realloc(b->v, cap * b->size);
    if (!v)
        return false;
    b->v = v;
    b->cap = cap;
    return true;
}

void *id_book_get(struct id_book *b, uint32_t id, int *rc)
{
    size_t i = place(b, id);
    if (i < b->n && id_at(b, i) == id)
        return id_book_at(b, i);
    if (b->n >= b->max) {
        *rc = -ENOSPC;
        return NULL;
    }
    if (!room_for_one(b)) {
        *rc = -ENOMEM;
        return NULL;
    }
    unsigned char *e = id_book_at(b, i);
    memmove(e + b->size, e, (b->n - i) * b->size);
    b->n++;
    memset(e, 0, b->size);
    memcpy(e, &id, sizeof id);
    return e;
}

void id_book_drop(struct id_book *b, uint32_t id)
{
    size_t i = place(b, id);
    if (i >= b->n || id_at(b, i) != id)
        return;
    unsigned char *e = id_book_at(b, i);
    memmove(e, e + b->size, (b->n - i - 1) * b->size);
    b->n--;
}

int id_book_keep(struct id_book *b, const uint32_t *live, size_t n)
{
    bool *kept = calloc(b->n ? b->n : 1, sizeof *kept);
    if (!kept)
        return -ENOMEM;
    for (size_t k = 0; k < n; k++) {
        size_t i = place(b, live[k]);
        if (i < b->n && id_at(b, i) == live[k])
            kept[i] = true;
    }
    size_t out = 0;
    for (size_t i = 0; i < b->n; i++)
        if (kept[i])
            memmove(id_book_at(b, out++), id_book_at(b, i), b->size);
    b->n = out;
    free(kept);
    return 0;
}
