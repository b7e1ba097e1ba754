/* xid.c - reading the driver's Xid lines (see xid.h). The line comes from the kernel
 * log, which any process that can write to /dev/kmsg may add to: only the exact shape
 * is taken, each field bounded, and a pid is a number or nothing. */
#include "daemon/gpu/xid.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XID_TAG "NVRM: Xid (PCI:"

/* Parses an unsigned decimal or hex number of at most max_digits digits at *p. */
static bool number(const char **p, int base, unsigned max_digits, uint32_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    unsigned n = 0;
    for (; n < max_digits && (base == 16 ? isxdigit((unsigned char)s[n])
                                         : isdigit((unsigned char)s[n])); n++) {
        int d = isdigit((unsigned char)s[n]) ? s[n] - '0'
                                             : tolower((unsigned char)s[n]) - 'a' + 10;
        v = v * (unsigned)base + (unsigned)d;
    }
    if (n == 0 || (base == 16 ? isxdigit((unsigned char)s[n]) : isdigit((unsigned char)s[n])))
        return false;
    *out = (uint32_t)v;
    *p = s + n;
    return true;
}

static bool literal(const char **p, const char *text)
{
    size_t n = strlen(text);
    if (strncmp(*p, text, n))
        return false;
    *p += n;
    return true;
}

/* "pid=4242, " or "pid='<unknown>', " (the driver's two spellings). */
static bool pid_field(const char **p, uint32_t *pid)
{
    if (!literal(p, "pid="))
        return false;
    *pid = 0;
    if (literal(p, "'<unknown>'") || literal(p, "<unknown>"))
        return literal(p, ", ");
    return number(p, 10, 7, pid) && *pid != 0 && literal(p, ", ");
}

/* "name=python3, " or "name=python3" at the end; the name has no comma. */
static bool name_field(const char **p, char *name, size_t cap)
{
    if (!literal(p, "name="))
        return false;
    size_t n = strcspn(*p, ",\r\n");
    const char *end = (*p)[n] == ',' ? *p + n : NULL;
    snprintf(name, cap, "%.*s", (int)n, *p);
    if (!strcmp(name, "<unknown>"))
        name[0] = 0;
    *p += n;
    if (end)
        *p += end[1] == ' ' ? 2 : 1;
    return true;
}

bool xid_parse(const char *line, struct xid_report *out)
{
    const char *p = strstr(line, XID_TAG);
    if (!p)
        return false;
    struct xid_report r = {0};
    p += strlen(XID_TAG);
    uint32_t xid;
    if (!number(&p, 16, 8, &r.pci.domain) || !literal(&p, ":") ||
        !number(&p, 16, 2, &r.pci.bus) || !literal(&p, ":") ||
        !number(&p, 16, 2, &r.pci.device) || !literal(&p, "): ") ||
        !number(&p, 10, 5, &xid) || !literal(&p, ", "))
        return false;
    r.xid = xid;
    if (pid_field(&p, &r.pid) && name_field(&p, r.name, sizeof r.name)) {
        size_t n = strcspn(p, "\r\n");
        snprintf(r.detail, sizeof r.detail, "%.*s", (int)n, p);
    } else {
        r.pid = 0; /* a shape of another driver: the Xid and GPU stand, no process */
        r.name[0] = 0;
    }
    *out = r;
    return true;
}
