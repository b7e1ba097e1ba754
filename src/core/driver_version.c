/* driver_version.c - reading an NVIDIA driver version and deciding whether Kairos
 * knows its argument layouts (see driver_version.h). Only libc: the shim carries
 * this code. */
#include "core/driver_version.h"

#include <string.h>

static const unsigned supported_branches[] = {580};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0;
}

/* One word [p, end) as "N.N" or "N.N.N" (each at most 9 digits) into v. */
static bool parse_word(const char *p, const char *end, struct driver_version *v)
{
    unsigned parts[3] = {0, 0, 0};
    size_t n = 0, digits = 0;
    for (const char *q = p; q < end; q++) {
        if (is_digit(*q)) {
            if (++digits > 9)
                return false;
            parts[n] = parts[n] * 10 + (unsigned)(*q - '0');
        } else if (*q == '.' && digits > 0 && n < 2) {
            n++;
            digits = 0;
        } else {
            return false;
        }
    }
    if (n < 1 || digits == 0 || (size_t)(end - p) >= sizeof v->text)
        return false;
    v->major = parts[0];
    v->minor = parts[1];
    v->patch = parts[2];
    memcpy(v->text, p, (size_t)(end - p));
    v->text[end - p] = 0;
    return true;
}

int driver_version_parse(const char *text, size_t len, struct driver_version *v)
{
    memset(v, 0, sizeof *v);
    const char *end = text + len;
    const char *p = text;
    while (p < end) {
        while (p < end && is_space(*p))
            p++;
        const char *w = p;
        while (p < end && !is_space(*p))
            p++;
        if (p > w && parse_word(w, p, v))
            return 0;
    }
    memset(v, 0, sizeof *v);
    return -1;
}

bool driver_version_supported(const struct driver_version *v)
{
    for (size_t i = 0; i < sizeof supported_branches / sizeof supported_branches[0]; i++)
        if (v->major == supported_branches[i])
            return true;
    return false;
}
