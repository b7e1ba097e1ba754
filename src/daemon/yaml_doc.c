/* yaml_doc.c - error messages with positions for kairosd's YAML readers. */
#include "daemon/yaml_doc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int ydoc_fail(struct ydoc *p, const yaml_node_t *node, const char *fmt, ...)
{
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->err_len, "%s:%lu:%lu: %s", p->name,
             node ? (unsigned long)node->start_mark.line + 1 : 1ul,
             node ? (unsigned long)node->start_mark.column + 1 : 1ul, what);
    return -EINVAL;
}
