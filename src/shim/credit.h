/* credit.h - a tenant process's credit on one GPU: the arithmetic (pure, no I/O,
 * no lock of its own; memguard.c holds its lock around every call).
 *
 * kairosd grants each process credit ahead of need (protocol 3, CREDIT in
 * include/kairos/proto.h; docs/memory.md): an allocation that fits in it is taken
 * from it with no message at all; what the process holds and what it gives back
 * are told to kairosd later, in reports the sender thread makes. When credit runs
 * below half a chunk the process asks for more ahead; an allocation that does not
 * fit waits for the answer to a request naming what it needs. Near the quota with
 * no other member contending (kairosd's reply says ALL) the grant is all the room
 * left: the process keeps what it frees (up to two chunks, as far from it) and asks
 * ahead no more, so an allocation loop there needs no message. When members
 * contend (the reply says EXACT) nothing is asked ahead and nothing freed is kept,
 * so every allocation asks for exactly its size and no process sits on room a
 * neighbour needs. A recall gives back all unused credit at once. A revocation
 * drops it; every message from then on says so (REVOKED) until one is answered.
 *
 * Threads: called from the application's threads (the ioctl path, the exit
 * destructor) and the shim's sender and watcher threads, always under memguard's
 * lock; it takes no lock, makes no system call and uses no signal of its own.
 */
#ifndef KAIROS_SHIM_CREDIT_H
#define KAIROS_SHIM_CREDIT_H

#include <stdbool.h>
#include <stdint.h>

#include "kairos/proto.h"

#define CREDIT_KEEP_CHUNKS 2 /* what a process keeps of what it frees, in chunks */

struct credit_gpu {
    uint64_t held;        /* what this process holds (made or in the driver) */
    uint64_t credit;      /* granted, not used */
    uint64_t chunk;       /* from kairosd's last reply; 0: none yet */
    uint64_t quota;       /* the tenant's, from the last reply (0: none yet) */
    uint64_t returning;   /* given back, not told yet */
    uint64_t need;        /* what the allocations waiting for credit need */
    uint64_t least;       /* the smallest of them (0: none waits; an estimate, never
                           * above need, once one of them has left) */
    unsigned waiting;
    bool exact;           /* members contend: no credit ahead, nothing kept */
    bool all;             /* near the quota alone: all the room granted, none asked
                           * ahead */
    bool acking;          /* revoked: messages say so until one is answered */
    bool ack_built;       /* ... one was built: ack_from is its report */
    uint64_t ack_from;
    bool asking;          /* a request awaits its reply */
    bool recalled;        /* a recall to answer */
    bool dirty;           /* held changed since the last report */
    bool closed;          /* the process is exiting: nothing more is asked */
    unsigned ahead_off;   /* managed ranges being charged: nothing is asked ahead
                           * meanwhile (its grant would stand in their way) */
    uint64_t report;      /* number of the last CREDIT built */
    uint64_t ask_report;  /* ... of the request in flight */
    uint64_t gen_waiting; /* the number of the newest waiting allocation */
    uint64_t gen_asked;   /* the newest one the request in flight covers */
    uint64_t gen_answered;/* those up to here were answered, */
    uint64_t gen_refused; /* ... and those up to here refused */
    uint64_t others_held; /* the memory view: what the tenant's other members (and
                           * departed ones kept charged) held at the last reply */
    /* A refusal remembered (issue 25, item 10; proto.h, KAIROS_CREDIT_NOTICE): */
    bool notices;         /* kairosd's replies said NOTICES: requests say NOTICE */
    bool ask_notice;      /* the request in flight said NOTICE */
    uint64_t ask_least;   /* the smallest allocation waiting when it was built */
    uint64_t refused_least; /* 0: none; else allocations of at least this much are
                             * refused here, with no message, */
    uint64_t refused_ms;  /* ... until KAIROS_REFUSAL_MEMORY_MS after this, a ROOM, a
                           * free, a new connection or another quota */
};

/* Takes bytes from credit: true when they fit (no message needed). */
bool credit_take(struct credit_gpu *c, uint64_t bytes);
/* An allocation that did not fit waits: returns its number. */
uint64_t credit_wait_begin(struct credit_gpu *c, uint64_t bytes);
/* It stopped waiting (took credit, was refused or gave up). */
void credit_wait_end(struct credit_gpu *c, uint64_t bytes);
/* Whether allocation number gen was refused by the last answer that covered it. */
bool credit_wait_refused(const struct credit_gpu *c, uint64_t gen);
/* The allocation reserved reserved bytes; the driver took actual. */
void credit_settle(struct credit_gpu *c, uint64_t reserved, uint64_t actual);
/* bytes were freed: back to credit, what is beyond the keep given back. */
void credit_release(struct credit_gpu *c, uint64_t bytes);
/* kairosd recalls up to bytes of unused credit. */
void credit_recall(struct credit_gpu *c, uint64_t bytes);

/* Whether credit_next_message has something to send: a request (*request), or a
 * report only. */
bool credit_has_message(const struct credit_gpu *c, bool *request);
/* Whether a CREDIT should be sent now (and whether it is a request); out is
 * filled and the state updated as sent. False when there is nothing to say. */
bool credit_next_message(struct credit_gpu *c, uint32_t gpu, struct kairos_credit *out);
/* At exit: a report of what the process holds, giving back all its credit, flagged
 * KAIROS_CREDIT_LAST (so that a departure kairosd keeps charged while the GPU holds
 * its memory counts exactly that, even when a reply granting credit crosses it: a
 * grant that arrives after it is not taken). False when there is nothing to say. */
bool credit_last_message(struct credit_gpu *c, uint32_t gpu, struct kairos_credit *out);
/* The message could not be sent: undo what credit_next_message recorded. */
void credit_unsend(struct credit_gpu *c, const struct kairos_credit *m);
/* kairosd's reply, read at now_ms (CLOCK_MONOTONIC). */
void credit_on_reply(struct credit_gpu *c, const struct kairos_credit *r, uint64_t now_ms);
/* Whether an allocation of bytes that credit does not cover is refused by the
 * refusal remembered (no message: kairosd said no and nothing changed since). */
bool credit_refusal_holds(struct credit_gpu *c, uint64_t bytes, uint64_t now_ms);
/* kairosd's ROOM: what it refused may fit now; the next allocation asks. */
void credit_on_room(struct credit_gpu *c);
/* A new connection (kairosd restarted): what is in flight is lost; report again. */
void credit_reconnected(struct credit_gpu *c);
/* What this process claims when it reattaches: held and unused credit. */
uint64_t credit_claim(const struct credit_gpu *c);
/* The tenant's holdings as best known now (the memory view). */
uint64_t credit_tenant_held(const struct credit_gpu *c);

#endif /* KAIROS_SHIM_CREDIT_H */
