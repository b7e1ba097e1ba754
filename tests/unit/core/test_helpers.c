/* test_helpers.c - fixture lookup and file replay for the core unit tests. */
#include "test_helpers.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *fixture_path(const char *name)
{
    static char path[4096];
    const char *dir = getenv("KAIROS_FIXTURES");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", name);
    return path;
}

int replay_file(struct trace_session *s, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t cap = TRACE_MAX_LINE + 2;
    char *line = malloc(cap);
    uint8_t *buf = malloc(3 * TRACE_MAX_BYTES);
    int bad = 0;
    while (line && buf && fgets(line, (int)cap, f)) {
        struct trace_rec rec;
        char err[160];
        if (trace_parse_line(line, &rec, buf, 3 * TRACE_MAX_BYTES, err, sizeof err))
            bad++;
        else
            trace_session_feed(s, &rec);
    }
    free(line);
    free(buf);
    fclose(f);
    return bad;
}
