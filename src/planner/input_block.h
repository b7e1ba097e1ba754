/* input_block.h - a fast reader for the block-style YAML of a cluster file's workload list.
 *
 * input.c reads a cluster file with libyaml's document API, which holds the whole file
 * as a tree (at 100,000 workloads most of the time and memory of `kairos plan`, and
 * beyond about a million workloads more nodes than libyaml allows). This reader takes
 * the top-level 'workloads:' list of a block-style file one item at a time, as a small
 * libyaml document of its own (same node types, same line and column marks), so that
 * input.c's checks and messages apply unchanged and memory stays per item. It accepts
 * only a subset of YAML it can read exactly (block mappings of plain scalars, comments,
 * blank lines) and answers INPUT_BLOCK_OTHER for anything else (quotes, flow style,
 * anchors, tags, multi-line scalars, tabs, CR): the caller then reads the file with
 * libyaml as before. Not thread-safe per object; no globals.
 */
#ifndef KAIROS_PLANNER_INPUT_BLOCK_H
#define KAIROS_PLANNER_INPUT_BLOCK_H

#include <stddef.h>
#include <yaml.h>

#define INPUT_BLOCK_OTHER 1   /* not in the subset: read the file with libyaml */

/* The top-level 'workloads:' list: [*begin, *end) are its lines (begin is the line after
 * 'workloads:', *first_line its 0-based number). Returns 0, or INPUT_BLOCK_OTHER when
 * the file has no such line on its own ("workloads:" at column 0, maybe a comment). */
int input_block_region(const char *text, size_t len, size_t *begin, size_t *end,
                       size_t *first_line);

struct input_block {
    yaml_document_t doc;          /* nodes of the current item, node 1 its mapping */
    yaml_node_pair_t *pairs;
    char *strings;                /* NUL-terminated scalars of the current item */
    size_t cap_nodes, cap_pairs, cap_strings;
    const char *pos, *end;        /* what is left of the region */
    size_t line;                  /* 0-based line of pos */
    int item_col;                 /* column of the items' '-', -1 before the first */
};

void input_block_init(struct input_block *b, const char *begin, const char *end, size_t line);
void input_block_fini(struct input_block *b);
/* The next item as b->doc (root node 1). Returns 0 with *done = 0 for an item, 0 with
 * *done = 1 at the end of the list, -ENOMEM, or INPUT_BLOCK_OTHER. */
int input_block_next(struct input_block *b, int *done);

#endif
