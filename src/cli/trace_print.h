/* trace_print.h - how `kairos trace` shows decoded events and the summary.
 *
 * Two printers with the same content: text for people (one aligned line per call,
 * names instead of numbers, sizes in MiB) and JSON Lines for tools (one object per
 * event, then one summary object). The printers only format; they keep no state
 * beyond the output stream and the chosen format.
 */
#ifndef KAIROS_CLI_TRACE_PRINT_H
#define KAIROS_CLI_TRACE_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "core/trace_session.h"

struct trace_printer {
    FILE *out;
    bool json;
    bool quiet;          /* summary only */
};

/* A trace_event_fn: prints one event. ctx is a struct trace_printer. */
void trace_print_event(const struct trace_event *ev, void *ctx);

void trace_print_summary(const struct trace_printer *p, const struct trace_summary *sum,
                         unsigned bad_lines);

/* A line of the input that could not be read. */
void trace_print_bad_line(const struct trace_printer *p, const char *source, unsigned line_no,
                          const char *why);

#endif /* KAIROS_CLI_TRACE_PRINT_H */
