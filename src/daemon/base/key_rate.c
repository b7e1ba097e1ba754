/* key_rate.c - a bound on events per key and window (see key_rate.h). */
#include "daemon/base/key_rate.h"

#include <stdio.h>
#include <string.h>

static bool window_over(const struct key_rate_slot *s, uint64_t now_ms, uint64_t interval_ms)
{
    return now_ms < s->since_ms || now_ms - s->since_ms >= interval_ms;
}

/* key's slot, or the one it takes: free, its window over, or the oldest window. */
static struct key_rate_slot *slot_of(struct key_rate_slot *slots, size_t n_slots,
                                     const char *key, uint64_t now_ms, uint64_t interval_ms)
{
    struct key_rate_slot *spare = NULL;
    for (size_t i = 0; i < n_slots; i++) {
        struct key_rate_slot *s = &slots[i];
        if (s->key[0] && !strncmp(s->key, key, sizeof s->key))
            return s;
        bool reusable = !s->key[0] || window_over(s, now_ms, interval_ms);
        bool spare_reusable = spare && (!spare->key[0]
                                        || window_over(spare, now_ms, interval_ms));
        if (!spare || (reusable && !spare_reusable)
            || (reusable == spare_reusable && s->since_ms < spare->since_ms))
            spare = s;
    }
    if (spare) {
        snprintf(spare->key, sizeof spare->key, "%s", key);
        spare->since_ms = now_ms;
        spare->count = 0;
    }
    return spare;
}

bool key_rate_take(struct key_rate_slot *slots, size_t n_slots, const char *key,
                   uint64_t now_ms, uint64_t interval_ms, unsigned most)
{
    struct key_rate_slot *s = slot_of(slots, n_slots, key, now_ms, interval_ms);
    if (!s)
        return false;
    if (window_over(s, now_ms, interval_ms)) {
        s->since_ms = now_ms;
        s->count = 0;
    }
    if (s->count >= most)
        return false;
    s->count++;
    return true;
}
