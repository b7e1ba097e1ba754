/* input_block.c - the fast reader of a cluster file's block-style workload list (see
 * input_block.h for what it accepts and why it exists).
 *
 * An item is read line by line into entries (key, value or nested mapping, marks), then
 * laid out as libyaml nodes: node 1 the item's mapping, then per entry its key and its
 * value, each mapping's pairs contiguous. Anything outside the subset stops the reader
 * with INPUT_BLOCK_OTHER before a wrong reading can happen.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "planner/input_block.h"

struct block_entry {
    const char *key, *val;
    size_t key_len, val_len;
    size_t key_line, key_col, val_line, val_col;
    int parent;                     /* entry holding the mapping, -1: the item */
    int is_map;
};

struct block_item {
    struct block_entry *e;
    int n, cap;
};

struct block_level {
    size_t col;
    int parent;
};

#define BLOCK_MAX_DEPTH 8

int input_block_region(const char *text, size_t len, size_t *begin, size_t *end,
                       size_t *first_line)
{
    const char *p = text, *stop = text + len;
    size_t line = 0;
    while (p < stop) {
        const char *eol = memchr(p, '\n', (size_t)(stop - p));
        const char *next = eol ? eol + 1 : stop;
        if (!eol)
            eol = stop;
        if ((size_t)(eol - p) >= 10 && !memcmp(p, "workloads:", 10)) {
            const char *r = p + 10;
            while (r < eol && *r == ' ')
                r++;
            if (r == eol || (*r == '#' && r > p + 10))
                break;
        }
        p = next;
        line++;
    }
    if (p >= stop)
        return INPUT_BLOCK_OTHER;
    p = memchr(p, '\n', (size_t)(stop - p));
    if (!p)
        return INPUT_BLOCK_OTHER;
    *begin = (size_t)(++p - text);
    *first_line = line + 1;
    while (p < stop) {
        const char *eol = memchr(p, '\n', (size_t)(stop - p));
        const char *next = eol ? eol + 1 : stop;
        int item = p[0] == '-' && (p + 1 == stop || p[1] == ' ' || p[1] == '\n');
        if (p[0] != ' ' && p[0] != '\n' && p[0] != '#' && !item)
            break;
        p = next;
    }
    *end = (size_t)(p - text);
    return 0;
}

void input_block_init(struct input_block *b, const char *begin, const char *end, size_t line)
{
    memset(b, 0, sizeof(*b));
    b->pos = begin;
    b->end = end;
    b->line = line;
    b->item_col = -1;
}

void input_block_fini(struct input_block *b)
{
    free(b->doc.nodes.start);
    free(b->pairs);
    free(b->strings);
    memset(b, 0, sizeof(*b));
}

static int block_bad_byte(unsigned char ch)
{
    return ch < 0x20 || ch >= 0x7f;
}

/* End of the current line; INPUT_BLOCK_OTHER in *rc for a byte outside the subset
 * (tabs, CR, control characters, anything not ASCII). */
static const char *block_eol(const struct input_block *b, int *rc)
{
    const char *p = b->pos;
    while (p < b->end && *p != '\n') {
        if (block_bad_byte((unsigned char)*p))
            *rc = INPUT_BLOCK_OTHER;
        p++;
    }
    return p;
}

static void block_advance(struct input_block *b, const char *eol)
{
    b->pos = eol < b->end ? eol + 1 : b->end;
    b->line++;
}

/* Skips blank and comment-only lines; returns the next line's indentation, -1 at the
 * end of the region. */
static long block_skip(struct input_block *b, int *rc)
{
    while (b->pos < b->end && !*rc) {
        const char *p = b->pos, *eol = block_eol(b, rc);
        while (p < eol && *p == ' ')
            p++;
        if (p < eol && *p != '#')
            return p - b->pos;
        block_advance(b, eol);
    }
    return -1;
}

/* Character classes: what may not start a plain scalar here, what stops a key or a
 * value (flow indicators; the reader leaves flow style to libyaml). */
enum { BLOCK_INDICATOR = 1, BLOCK_FLOW = 2 };

#define BLOCK_IF (BLOCK_INDICATOR | BLOCK_FLOW)

static const unsigned char block_classes[256] = {
    ['-'] = BLOCK_INDICATOR, ['?'] = BLOCK_INDICATOR, [':'] = BLOCK_INDICATOR,
    ['#'] = BLOCK_INDICATOR, ['&'] = BLOCK_INDICATOR, ['*'] = BLOCK_INDICATOR,
    ['!'] = BLOCK_INDICATOR, ['|'] = BLOCK_INDICATOR, ['>'] = BLOCK_INDICATOR,
    ['\''] = BLOCK_INDICATOR, ['"'] = BLOCK_INDICATOR, ['%'] = BLOCK_INDICATOR,
    ['@'] = BLOCK_INDICATOR, ['`'] = BLOCK_INDICATOR, [','] = BLOCK_IF,
    ['['] = BLOCK_IF, [']'] = BLOCK_IF, ['{'] = BLOCK_IF, ['}'] = BLOCK_IF,
};

static unsigned char block_class(char ch)
{
    return block_classes[(unsigned char)ch];
}

static int block_indicator(char ch)
{
    return block_class(ch) & BLOCK_INDICATOR;
}

/* "key: value" or "key:" from p to eol; the value may end in a comment. */
static int block_pair(const char *p, const char *eol, struct block_entry *e)
{
    const char *k = p;
    if (block_indicator(*k))
        return INPUT_BLOCK_OTHER;
    while (k < eol && !(*k == ':' && (k + 1 == eol || k[1] == ' '))) {
        if ((block_class(*k) & BLOCK_FLOW) || (*k == '#' && k[-1] == ' '))
            return INPUT_BLOCK_OTHER;
        k++;
    }
    if (k == eol)
        return INPUT_BLOCK_OTHER;
    e->key = p;
    e->key_len = (size_t)(k - p);
    while (e->key_len && p[e->key_len - 1] == ' ')
        e->key_len--;
    const char *v = k + 1;
    while (v < eol && *v == ' ')
        v++;
    e->val = v;
    e->val_len = 0;
    if (v == eol || *v == '#')
        return 0;
    if (block_indicator(*v) && !(*v == '-' && v + 1 < eol && v[1] != ' '))
        return INPUT_BLOCK_OTHER;
    const char *q = v;
    for (; q < eol && !(*q == '#' && q[-1] == ' '); q++)
        if ((*q == ':' && (q + 1 == eol || q[1] == ' ')) || ((block_class(*q) & BLOCK_FLOW) && *q != ','))
            return INPUT_BLOCK_OTHER;
    while (q > v && q[-1] == ' ')
        q--;
    e->val_len = (size_t)(q - v);
    return 0;
}

static int block_push(struct block_item *it, const char *p, const char *eol, size_t line,
                      size_t col, int parent)
{
    if (it->n == it->cap) {
        int cap = it->cap ? it->cap * 2 : 32;
        struct block_entry *e = realloc(it->e, (size_t)cap * sizeof(*e));
        if (!e)
            return -ENOMEM;
        it->e = e;
        it->cap = cap;
    }
    struct block_entry *e = &it->e[it->n];
    int rc = block_pair(p, eol, e);
    if (rc)
        return rc;
    e->key_line = e->val_line = line;
    e->key_col = col;
    e->val_col = col + (size_t)(e->val - p);
    e->parent = parent;
    e->is_map = e->val_len == 0;
    it->n++;
    return 0;
}

/* Reads one item's lines into entries; b->pos is at its "- " line. */
static int block_read(struct input_block *b, struct block_item *it, size_t col)
{
    struct block_level lv[BLOCK_MAX_DEPTH];
    int depth = 0, open = -1, rc = 0;
    const char *eol = block_eol(b, &rc), *p = b->pos + col;
    if (rc || (size_t)(eol - p) < 2 || p[0] != '-' || p[1] != ' ')
        return INPUT_BLOCK_OTHER;
    p += 2;
    while (p < eol && *p == ' ')
        p++;
    lv[0] = (struct block_level){(size_t)(p - b->pos), -1};
    for (;;) {
        rc = p < eol ? block_push(it, p, eol, b->line, (size_t)(p - b->pos), lv[depth].parent)
                     : INPUT_BLOCK_OTHER;
        if (rc)
            return rc;
        open = it->e[it->n - 1].is_map ? it->n - 1 : -1;
        block_advance(b, eol);
        long c = block_skip(b, &rc);
        if (rc)
            return rc;
        if (c < 0 || (c == b->item_col && b->pos[c] == '-'))
            return open >= 0 ? INPUT_BLOCK_OTHER : 0;
        if (open >= 0) {
            if ((size_t)c <= lv[depth].col || depth + 1 == BLOCK_MAX_DEPTH)
                return INPUT_BLOCK_OTHER;
            lv[++depth] = (struct block_level){(size_t)c, open};
        }
        while (depth > 0 && lv[depth].col > (size_t)c)
            depth--;
        if (lv[depth].col != (size_t)c)
            return INPUT_BLOCK_OTHER;
        eol = block_eol(b, &rc);
        p = b->pos + c;
        if (rc)
            return rc;
    }
}

static int block_reserve(void **buf, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *nb = realloc(*buf, n * size);
    if (!nb)
        return -ENOMEM;
    *buf = nb;
    *cap = n;
    return 0;
}

static yaml_char_t *block_string(char **arena, const char *s, size_t len)
{
    yaml_char_t *out = (yaml_char_t *)*arena;
    memcpy(*arena, s, len);
    (*arena)[len] = '\0';
    *arena += len + 1;
    return out;
}

static void block_scalar(yaml_node_t *n, yaml_char_t *value, size_t len, size_t line, size_t col)
{
    memset(n, 0, sizeof(*n));
    n->type = YAML_SCALAR_NODE;
    n->data.scalar.value = value;
    n->data.scalar.length = len;
    n->data.scalar.style = YAML_PLAIN_SCALAR_STYLE;
    n->start_mark.line = n->end_mark.line = line;
    n->start_mark.column = col;
    n->end_mark.column = col + len;
}

/* Pairs of the mapping held by entry `owner` (-1: the item), from *next on. */
static void block_mapping(struct input_block *b, const struct block_item *it, int owner,
                          yaml_node_t *n, size_t *next)
{
    memset(n, 0, sizeof(*n));
    n->type = YAML_MAPPING_NODE;
    n->data.mapping.style = YAML_BLOCK_MAPPING_STYLE;
    n->data.mapping.pairs.start = n->data.mapping.pairs.top = b->pairs + *next;
    for (int i = 0; i < it->n; i++) {
        if (it->e[i].parent != owner)
            continue;
        if (n->data.mapping.pairs.top == n->data.mapping.pairs.start) {
            n->start_mark.line = it->e[i].key_line;
            n->start_mark.column = it->e[i].key_col;
        }
        *n->data.mapping.pairs.top++ = (yaml_node_pair_t){2 + 2 * i, 3 + 2 * i};
        (*next)++;
    }
    n->data.mapping.pairs.end = n->data.mapping.pairs.top;
}

/* Lays the entries out as b->doc. */
static int block_build(struct input_block *b, const struct block_item *it)
{
    size_t nodes = 1 + 2 * (size_t)it->n, chars = 0, next = 0;
    for (int i = 0; i < it->n; i++)
        chars += it->e[i].key_len + it->e[i].val_len + 2;
    void *buf = b->doc.nodes.start;
    if (block_reserve(&buf, &b->cap_nodes, nodes, sizeof(yaml_node_t)))
        return -ENOMEM;
    b->doc.nodes.start = buf;
    buf = b->pairs;
    if (block_reserve(&buf, &b->cap_pairs, (size_t)it->n, sizeof(yaml_node_pair_t)))
        return -ENOMEM;
    b->pairs = buf;
    buf = b->strings;
    if (block_reserve(&buf, &b->cap_strings, chars, 1))
        return -ENOMEM;
    b->strings = buf;
    char *arena = b->strings;
    yaml_node_t *n = b->doc.nodes.start;
    b->doc.nodes.top = b->doc.nodes.end = n + nodes;
    block_mapping(b, it, -1, &n[0], &next);
    for (int i = 0; i < it->n; i++) {
        const struct block_entry *e = &it->e[i];
        block_scalar(&n[1 + 2 * i], block_string(&arena, e->key, e->key_len), e->key_len,
                     e->key_line, e->key_col);
        if (e->is_map)
            block_mapping(b, it, i, &n[2 + 2 * i], &next);
        else
            block_scalar(&n[2 + 2 * i], block_string(&arena, e->val, e->val_len), e->val_len,
                         e->val_line, e->val_col);
    }
    return 0;
}

int input_block_next(struct input_block *b, int *done)
{
    struct block_item it = {0};
    int rc = 0;
    long col = block_skip(b, &rc);
    *done = 0;
    if (rc)
        return rc;
    if (col < 0) {
        *done = 1;
        return 0;
    }
    if (b->item_col < 0)
        b->item_col = (int)col;
    if (col != b->item_col)
        return INPUT_BLOCK_OTHER;
    rc = block_read(b, &it, (size_t)col);
    if (!rc)
        rc = block_build(b, &it);
    free(it.e);
    return rc;
}
