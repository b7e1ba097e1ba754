/* yaml_doc.h - what kairosd's YAML readers (config.c, sim_scenario.c) share: the
 * document being read and errors that name file:line:column.
 */
#ifndef KAIROS_DAEMON_YAML_DOC_H
#define KAIROS_DAEMON_YAML_DOC_H

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

#endif /* KAIROS_DAEMON_YAML_DOC_H */
