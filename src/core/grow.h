/* grow.h - room for one more element at the end of a realloc'd array, the doubling
 * that kairos's growing lists share. Pure libc, no state: any thread. */
#ifndef KAIROS_CORE_GROW_H
#define KAIROS_CORE_GROW_H

#include <stddef.h>

/* An array with room for n + 1 elements of size bytes: v itself while n < *cap, else
 * v reallocated to twice *cap elements (first ones when *cap is 0) and *cap updated.
 * NULL when memory (or size_t) runs out: v and *cap are then untouched, v still the
 * caller's. */
void *grow_for_one(void *v, size_t *cap, size_t n, size_t size, size_t first);

#endif /* KAIROS_CORE_GROW_H */
