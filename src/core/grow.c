/* grow.c - doubling growth of realloc'd arrays (see grow.h). */
#include "core/grow.h"

#include <stdint.h>
#include <stdlib.h>

void *grow_for_one(void *v, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return v;
    size_t want = *cap ? 2 * *cap : first;
    if (want <= *cap || !size || want > SIZE_MAX / size)
        return NULL;
    void *grown = realloc(v, want * size);
    if (grown)
        *cap = want;
    return grown;
}
