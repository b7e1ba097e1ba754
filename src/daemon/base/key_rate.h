/* key_rate.h - at most `most` events per key (a tenant's name) in a window of
 * interval_ms that starts at the key's first event, for up to as many keys at once as
 * the caller gives slots: the bound on things a tenant may start per second (the MPS
 * control clients of its ENDINGs). A key that finds no slot of its own takes a free
 * one, or one whose window is over, or else the one whose window began longest ago,
 * so a flood of many keys lets no key past its rate by more than that key's own
 * window restarting. The caller gives the time, so the rule is pure and testable.
 *
 * Thread rules: no shared state; one array of slots, used from one thread.
 */
#ifndef KAIROS_DAEMON_KEY_RATE_H
#define KAIROS_DAEMON_KEY_RATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KEY_RATE_KEY_MAX 64

struct key_rate_slot {
    char key[KEY_RATE_KEY_MAX]; /* "": free */
    uint64_t since_ms;          /* the window's start */
    unsigned count;             /* events taken in it */
};

/* An event of key at now_ms: true when it is within the rate (and counted), false when
 * key has had `most` events in its window already. */
bool key_rate_take(struct key_rate_slot *slots, size_t n_slots, const char *key,
                   uint64_t now_ms, uint64_t interval_ms, unsigned most);

#endif /* KAIROS_DAEMON_KEY_RATE_H */
