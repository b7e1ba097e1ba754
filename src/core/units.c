/* units.c - memory sizes and percentages as text: parsing with clear refusals, and
 * printing. */
#include "core/units.h"

#include <errno.h>
#include <math.h> /* isfinite: a macro, no libm */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct suffix {
    const char *text;
    unsigned shift;
};

static const struct suffix suffixes[] = {
    {"", 0},     {"B", 0},     {"K", 10},    {"KiB", 10}, {"M", 20},
    {"MiB", 20}, {"G", 30},    {"GiB", 30},  {"T", 40},   {"TiB", 40},
};

static int refuse(char *err, size_t err_len, const char *text, const char *reason)
{
    if (err && err_len)
        snprintf(err, err_len, "'%s': %s", text, reason);
    return -EINVAL;
}

static int parse_percent(const char *text, double value, uint64_t percent_of, uint64_t *bytes,
                         char *err, size_t err_len)
{
    if (!percent_of)
        return refuse(err, err_len, text, "a percentage needs a known total here");
    if (value <= 0 || value > 100)
        return refuse(err, err_len, text, "a percentage must be above 0 and at most 100");
    *bytes = (uint64_t)((double)percent_of * value / 100.0);
    return 0;
}

int units_parse_size(const char *text, uint64_t percent_of, uint64_t *bytes, char *err,
                     size_t err_len)
{
    if (!text || !*text)
        return refuse(err, err_len, "", "empty size");
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (end == text || errno || !isfinite(value) || value < 0)
        return refuse(err, err_len, text, "not a size (examples: 8G, 512MiB, 80%)");
    if (!strcmp(end, "%"))
        return parse_percent(text, value, percent_of, bytes, err, err_len);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (strcasecmp(end, suffixes[i].text) != 0)
            continue;
        double scaled = value * (double)(1ull << suffixes[i].shift);
        if (scaled >= 18446744073709551615.0)
            return refuse(err, err_len, text, "too large");
        if (suffixes[i].shift == 0 && (double)(uint64_t)value != value)
            return refuse(err, err_len, text, "a size in bytes must be a whole number");
        *bytes = (uint64_t)scaled;
        return 0;
    }
    if (!strcasecmp(end, "KB") || !strcasecmp(end, "MB") || !strcasecmp(end, "GB") ||
        !strcasecmp(end, "TB"))
        return refuse(err, err_len, text,
                      "write KiB, MiB, GiB or TiB (or K, M, G, T): sizes are binary");
    return refuse(err, err_len, text, "unknown unit (use B, K, M, G, T, KiB..TiB or %)");
}

bool units_size_is_bare(const char *text)
{
    if (!text || !*text)
        return false;
    char *end;
    double value = strtod(text, &end);
    (void)value;
    return end != text && *end == 0;
}

int units_parse_size_with_unit(const char *text, uint64_t percent_of, uint64_t *bytes,
                               char *err, size_t err_len)
{
    if (units_size_is_bare(text))
        return refuse(err, err_len, text,
                      "a size needs a unit: write 8G or 512MiB (or 4096B for bytes)");
    return units_parse_size(text, percent_of, bytes, err, err_len);
}

int units_parse_percent(const char *text, double *fraction, char *err, size_t err_len)
{
    if (!text || !*text)
        return refuse(err, err_len, "", "empty percentage");
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (end == text || errno || !isfinite(value))
        return refuse(err, err_len, text, "not a percentage (examples: 40%, 12.5%)");
    if (strcmp(end, "%"))
        return refuse(err, err_len, text, "a percentage ends with % (e.g. 40%)");
    if (value < 0 || value > 100)
        return refuse(err, err_len, text, "a percentage must be from 0% to 100%");
    *fraction = value / 100.0;
    return 0;
}

const char *units_format_size(uint64_t bytes, char *out, size_t cap)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t i = 0;
    while (v >= 1024.0 && i < 4) {
        v /= 1024.0;
        i++;
    }
    if (i == 0)
        snprintf(out, cap, "%llu B", (unsigned long long)bytes);
    else
        snprintf(out, cap, "%.*f %s", v < 10 ? 2 : 1, v, names[i]);
    return out;
}
