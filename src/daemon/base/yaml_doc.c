/* yaml_doc.c - what kairosd's YAML readers share: error messages with positions, a
 * value's checks (its kind, a whole number, a yes or no), the refusal of duplicate
 * keys in any mapping (libyaml keeps them all, and a reader that looks keys up would
 * take one silently), and the refusal of a second document in a file meant to hold
 * one. */
#include "daemon/base/yaml_doc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Keys of one mapping in order of text, then of position: equal keys end up side by
 * side, the first one written first. */
static int key_order(const void *a, const void *b)
{
    const yaml_node_t *x = *(const yaml_node_t *const *)a, *y = *(const yaml_node_t *const *)b;
    size_t lx = x->data.scalar.length, ly = y->data.scalar.length;
    int c = memcmp(x->data.scalar.value, y->data.scalar.value, lx < ly ? lx : ly);
    if (c || lx != ly)
        return c ? c : (lx < ly ? -1 : 1);
    return x->start_mark.index < y->start_mark.index ? -1
                                                     : x->start_mark.index > y->start_mark.index;
}

static int unique_keys(struct ydoc *p, const yaml_node_t *map, const yaml_node_t **keys)
{
    size_t n = 0;
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
         pr++) {
        const yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        if (k && k->type == YAML_SCALAR_NODE)
            keys[n++] = k;
    }
    qsort(keys, n, sizeof *keys, key_order);
    for (size_t i = 1; i < n; i++)
        if (keys[i - 1]->data.scalar.length == keys[i]->data.scalar.length &&
            !memcmp(keys[i - 1]->data.scalar.value, keys[i]->data.scalar.value,
                    keys[i]->data.scalar.length))
            return ydoc_fail(p, keys[i], "'%.64s' appears twice in the same mapping (first at "
                             "line %lu); keep one", (const char *)keys[i]->data.scalar.value,
                             (unsigned long)keys[i - 1]->start_mark.line + 1);
    return 0;
}

int ydoc_check_unique_keys(struct ydoc *p)
{
    size_t most = 0;
    for (yaml_node_t *n = p->doc->nodes.start; n < p->doc->nodes.top; n++)
        if (n->type == YAML_MAPPING_NODE) {
            size_t count = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
            most = count > most ? count : most;
        }
    const yaml_node_t **keys = malloc((most ? most : 1) * sizeof *keys);
    if (!keys)
        return -ENOMEM;
    int rc = 0;
    for (yaml_node_t *n = p->doc->nodes.start; !rc && n < p->doc->nodes.top; n++)
        if (n->type == YAML_MAPPING_NODE)
            rc = unique_keys(p, n, keys);
    free(keys);
    return rc;
}

int ydoc_refuse_more(struct ydoc *p, yaml_parser_t *parser)
{
    yaml_document_t next;
    if (!yaml_parser_load(parser, &next))
        return ydoc_fail(p, NULL, "after the first document: %s",
                         parser->problem ? parser->problem : "not valid YAML");
    yaml_node_t *root = yaml_document_get_root_node(&next);
    int rc = 0;
    if (root)
        rc = ydoc_fail(p, root, "a second YAML document: %s holds one document; remove the "
                       "'---' and what follows, or merge it into the first", p->name);
    yaml_document_delete(&next);
    return rc;
}

static const char *kind_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return "a value";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

const char *ydoc_text(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

int ydoc_want(struct ydoc *p, const yaml_node_t *n, yaml_node_type_t type, const char *what)
{
    if (n->type != type)
        return ydoc_fail(p, n, "expected %s, found %s", what, kind_name(n));
    return 0;
}

int ydoc_uint(struct ydoc *p, const yaml_node_t *n, const char *what, unsigned long max,
                      unsigned long *out)
{
    if (ydoc_want(p, n, YAML_SCALAR_NODE, what))
        return -EINVAL;
    const char *s = ydoc_text(n);
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-' || v > max)
        return ydoc_fail(p, n, "expected %s (a whole number from 0 to %lu), found '%s'", what,
                         max, s);
    *out = v;
    return 0;
}

int ydoc_bool(struct ydoc *p, const yaml_node_t *n, const char *what, bool *out)
{
    if (ydoc_want(p, n, YAML_SCALAR_NODE, what))
        return -EINVAL;
    const char *s = ydoc_text(n);
    if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on"))
        *out = true;
    else if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off"))
        *out = false;
    else
        return ydoc_fail(p, n, "expected %s (true or false), found '%s'", what, s);
    return 0;
}
