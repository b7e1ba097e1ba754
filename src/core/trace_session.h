/* trace_session.h - consumes recorded driver-boundary events and keeps their meaning.
 *
 * A session takes the records of one recording (live from the shim or from a file),
 * keeps per process the descriptors (fd -> open file), the object tree and its
 * memory, and hands each decoded event to a printer callback. At the end it has the
 * figures of the summary. Both `kairos trace -- CMD` and `kairos trace --replay`
 * run through it, so they print the same thing for the same calls.
 *
 * Thread rules: single-threaded.
 */
#ifndef KAIROS_CORE_TRACE_SESSION_H
#define KAIROS_CORE_TRACE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/objtree.h"
#include "core/rm_decode.h"
#include "core/trace_record.h"

/* One event as the printers see it. */
struct trace_event {
    const struct trace_rec *rec;
    int pid;
    double t_rel_us;              /* since the first timed event */
    const struct rm_op *op;       /* TREC_IOCTL only */
    uint32_t freed_class;         /* RM_FREE: class of the freed object, 0 if unknown */
    enum objtree_map_kind map_kind; /* TREC_MMAP */
    struct objtree_effect effect;
    const struct objtree *tree;   /* the process's object tree after the event */
};

struct trace_escape_count {
    enum rm_node node;
    const char *name;
    uint32_t calls;
};

struct trace_class_count {
    uint32_t h_class;
    uint32_t created, live;
};

struct trace_summary {
    uint32_t processes;
    uint64_t events, ioctls, mmaps;
    uint64_t problems;            /* calls the decoder flagged */
    uint64_t vidmem_allocated, vidmem_freed, vidmem_peak, vidmem_now;
    uint32_t vidmem_allocs, vidmem_frees;
    uint32_t channel_groups, channels, usermode, doorbell_mappings;
    struct trace_escape_count *escapes; /* sorted by node, then name */
    size_t n_escapes;
    struct trace_class_count *classes;  /* ascending class, all processes */
    size_t n_classes;
};

typedef void (*trace_event_fn)(const struct trace_event *ev, void *ctx);

struct trace_session;

struct trace_session *trace_session_new(trace_event_fn fn, void *ctx);
void trace_session_free(struct trace_session *s);

/* Feeds one parsed record. Returns 0, or -ENOMEM. */
int trace_session_feed(struct trace_session *s, const struct trace_rec *rec);

/* Fills the summary; its arrays belong to the session and live until the next call
 * or trace_session_free. */
int trace_session_summary(struct trace_session *s, struct trace_summary *sum);

#endif /* KAIROS_CORE_TRACE_SESSION_H */
