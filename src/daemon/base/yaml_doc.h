/* yaml_doc.h - what kairosd's YAML readers (config/, sim_scenario.c) share: the
 * document being read, errors that name file:line:column, a node's text and the
 * checks of one value (its kind, a whole number, a yes or no), and the checks of the
 * whole file (no key twice in any mapping, no second document).
 */
#ifndef KAIROS_DAEMON_YAML_DOC_H
#define KAIROS_DAEMON_YAML_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

struct ydoc {
    const char *name;      /* the file, for messages */
    yaml_document_t *doc;
    char *err;             /* where the message goes */
    size_t err_len;
};

/* Writes "file:line:column: message" for node (1:1 without one); returns -EINVAL. */
int ydoc_fail(struct ydoc *p, const yaml_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A scalar node's text. */
const char *ydoc_text(const yaml_node_t *n);
/* 0 when n is of type, else -EINVAL with "expected WHAT, found a list" (or the like). */
int ydoc_want(struct ydoc *p, const yaml_node_t *n, yaml_node_type_t type, const char *what);
/* A whole number from 0 to max into *out; 0 or -EINVAL naming what. */
int ydoc_uint(struct ydoc *p, const yaml_node_t *n, const char *what, unsigned long max,
              unsigned long *out);
/* true/yes/on or false/no/off into *out; 0 or -EINVAL naming what. */
int ydoc_bool(struct ydoc *p, const yaml_node_t *n, const char *what, bool *out);

/* -EINVAL ("file:line:column: 'KEY' appears twice ...") when any mapping of the
 * document has a key twice, -ENOMEM, or 0. Walks the document's node table, not
 * the tree: no recursion, each mapping sorted once. */
int ydoc_check_unique_keys(struct ydoc *p);

/* After the first document was loaded from parser: -EINVAL when the stream holds
 * another document (or is not valid YAML after the first), else 0. */
int ydoc_refuse_more(struct ydoc *p, yaml_parser_t *parser);

#endif /* KAIROS_DAEMON_YAML_DOC_H */
