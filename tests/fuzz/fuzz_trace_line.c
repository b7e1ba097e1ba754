/* fuzz_trace_line.c - libFuzzer target: arbitrary text through the recording parser
 * and a trace session (decoder + object trees), as `kairos trace --replay` does. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/trace_record.h"
#include "core/trace_session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t bytes[3 * TRACE_MAX_BYTES];
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    struct trace_session *s = trace_session_new(NULL, NULL);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        struct trace_rec rec;
        char err[128];
        if (trace_parse_line(line, &rec, bytes, sizeof bytes, err, sizeof err) == 0)
            trace_session_feed(s, &rec);
    }
    struct trace_summary sum;
    trace_session_summary(s, &sum);
    trace_session_free(s);
    free(text);
    return 0;
}
