/* columns.c - the table of columns of kairos ps and kairos top and the printing of
 * a header and a row through a selection of them (see columns.h). */
#include "cli/columns.h"

#include <errno.h>
#include <string.h>

#include "core/units.h"

typedef void (*cell_fn)(const struct columns_row *row, char *out, size_t cap);

static const struct column *find(const char *name, size_t len);

struct column {
    const char *name;   /* for -o */
    const char *header;
    int width;          /* 0: the tenant column, as wide as the longest name */
    bool left;          /* left aligned */
    bool compute;       /* dropped by columns_drop_compute */
    cell_fn cell;
};

/* The tenant's compute figures on the row's GPU; false: "-" in every compute cell. */
static bool row_compute(const struct columns_row *row, struct ps_compute *c)
{
    return !row->no_gpu && ps_compute_get(row->r, row->g, c);
}

#define REMOVED_MARK " (removed)" /* a tenant the configuration removed (KAIROS_PS_REMOVED) */

static void cell_tenant(const struct columns_row *row, char *out, size_t cap)
{
    snprintf(out, cap, "%.*s%s", KAIROS_NAME_MAX, row->first ? row->r->tenant : "",
             row->first && (row->r->flags & KAIROS_PS_REMOVED) ? REMOVED_MARK : "");
}

/* The tenant's fault domain, on its first row ("-": none, or a kairosd of before). */
static void cell_domain(const struct columns_row *row, char *out, size_t cap)
{
    if (!row->first)
        snprintf(out, cap, "%s", "");
    else
        snprintf(out, cap, "%.*s", KAIROS_NAME_MAX,
                 row->r->fault_domain[0] ? row->r->fault_domain : "-");
}

/* The part of the SMs its MPS clients may run on (sms:), on its first row ("-": no
 * such limit, or a kairosd of before). */
static void cell_sms(const struct columns_row *row, char *out, size_t cap)
{
    if (!row->first)
        snprintf(out, cap, "%s", "");
    else if (!row->r->sm_percent)
        snprintf(out, cap, "-");
    else
        snprintf(out, cap, "%u%%", row->r->sm_percent);
}

/* GPU faults on its first row: CAUSED/LOST ("-": none). */
static void cell_faults(const struct columns_row *row, char *out, size_t cap)
{
    const struct kairos_ps_reply *r = row->r;
    if (!row->first)
        snprintf(out, cap, "%s", "");
    else if (!r->faults_caused && !r->faults_lost)
        snprintf(out, cap, "-");
    else
        snprintf(out, cap, "%llu/%llu", (unsigned long long)r->faults_caused,
                 (unsigned long long)r->faults_lost);
}

static void cell_gpu(const struct columns_row *row, char *out, size_t cap)
{
    if (row->no_gpu)
        snprintf(out, cap, "-");
    else
        snprintf(out, cap, "%u", row->g);
}

static void cell_size(const struct columns_row *row, const uint64_t *v, char *out, size_t cap)
{
    if (row->no_gpu)
        snprintf(out, cap, "-");
    else
        units_format_size(v[row->g], out, cap);
}

static void cell_held(const struct columns_row *row, char *out, size_t cap)
{
    cell_size(row, row->r->held, out, cap);
}

static void cell_quota(const struct columns_row *row, char *out, size_t cap)
{
    if (row->no_gpu)
        snprintf(out, cap, "no GPU");
    else
        cell_size(row, row->r->quota, out, cap);
}

static void cell_memory(const struct columns_row *row, char *out, size_t cap)
{
    if (row->no_gpu)
        snprintf(out, cap, "no GPU");
    else
        ps_cell_memory(row->r, row->g, out, cap);
}

static void cell_refused(const struct columns_row *row, char *out, size_t cap)
{
    if (row->no_gpu)
        snprintf(out, cap, "-");
    else
        snprintf(out, cap, "%llu", (unsigned long long)row->r->refusals[row->g]);
}

/* The compute cells: "-" without a policy on the row's GPU. */
#define COMPUTE_CELL(fname, expr)                                                               \
    static void fname(const struct columns_row *row, char *out, size_t cap)                    \
    {                                                                                           \
        struct ps_compute c;                                                                    \
        if (!row_compute(row, &c))                                                              \
            snprintf(out, cap, "-");                                                            \
        else                                                                                    \
            expr;                                                                               \
    }

COMPUTE_CELL(cell_share, ps_cell_pct(c.share, true, out, cap))
COMPUTE_CELL(cell_limit, ps_cell_limit(c.limit, out, cap))
COMPUTE_CELL(cell_prio, snprintf(out, cap, "%s", c.priority))
COMPUTE_CELL(cell_target, ps_cell_pct(c.target, true, out, cap))
COMPUTE_CELL(cell_window_pct, ps_cell_pct(c.window, c.measured, out, cap))
COMPUTE_CELL(cell_minute, ps_cell_pct(c.minute, c.measured, out, cap))
COMPUTE_CELL(cell_window, ps_cell_window(&c, out, cap))
COMPUTE_CELL(cell_pauses, snprintf(out, cap, "%llu", (unsigned long long)c.pauses))
COMPUTE_CELL(cell_hold, ps_cell_hold(&c.hold, out, cap))
COMPUTE_CELL(cell_why, ps_cell_why(&c.hold, out, cap))

static void cell_procs(const struct columns_row *row, char *out, size_t cap)
{
    if (row->first)
        snprintf(out, cap, "%u", row->r->n_pids);
    else if (cap)
        out[0] = 0;
}

/* The pids that fit in cap - 1 characters, then ",+N" for the N left out. */
static void cell_pids(const struct columns_row *row, char *out, size_t cap)
{
    const struct kairos_ps_reply *r = row->r;
    uint32_t listed = r->n_pids < KAIROS_PS_MAX_PIDS ? r->n_pids : KAIROS_PS_MAX_PIDS;
    snprintf(out, cap, "%s", row->first && !r->n_pids ? "-" : "");
    if (!row->first)
        return;
    size_t len = 0;
    for (uint32_t k = 0; k < listed; k++) {
        char one[16], rest[24];
        int w = snprintf(one, sizeof one, "%s%u", k ? "," : "", r->pids[k]);
        int rw = k + 1 < r->n_pids ? snprintf(rest, sizeof rest, ",+%u", r->n_pids - k - 1) : 0;
        if (len + (size_t)w + (size_t)rw >= cap) {
            snprintf(out + len, cap - len, "%s+%u", k ? "," : "", r->n_pids - k);
            return;
        }
        memcpy(out + len, one, (size_t)w + 1);
        len += (size_t)w;
    }
    if (r->n_pids > listed)
        snprintf(out + len, cap - len, ",+%u", r->n_pids - listed);
}

static const struct column table[] = {
    {"tenant", "TENANT", 0, true, false, cell_tenant},
    {"gpu", "GPU", 3, false, false, cell_gpu},
    {"held", "HELD", 11, false, false, cell_held},
    {"quota", "QUOTA", 11, false, false, cell_quota},
    {"memory", "MEMORY HELD/QUOTA", 17, true, false, cell_memory},
    {"refused", "REFUSED", 7, false, false, cell_refused},
    {"share", "SHARE", 6, false, true, cell_share},
    {"limit", "LIMIT", 6, false, true, cell_limit},
    {"prio", "PRIO", 7, true, true, cell_prio},
    {"target", "TARGET", 6, false, true, cell_target},
    {"100ms", "100MS", 6, false, true, cell_window_pct},
    {"1min", "1MIN", 6, false, true, cell_minute},
    {"window", "WINDOW", 11, false, true, cell_window},
    {"pauses", "PAUSES", 7, false, true, cell_pauses},
    {"hold", "HOLD", 6, false, true, cell_hold},
    {"why", "WHY", 5, true, true, cell_why},
    {"domain", "DOMAIN", 8, true, false, cell_domain},
    {"sms", "SMS", 4, false, false, cell_sms},
    {"faults", "FAULTS", 6, false, false, cell_faults},
    {"procs", "PROCS", 5, false, false, cell_procs},
    {"pids", "PIDS", 4, true, false, cell_pids},
};

#define N_TABLE (sizeof table / sizeof table[0])

void columns_add_space(struct columns *c)
{
    static const char *const space[] = {"domain", "sms", "faults"};
    const size_t n = sizeof space / sizeof space[0];
    for (size_t i = 0; i < c->n; i++)
        for (size_t k = 0; k < n; k++)
            if (c->col[i] == find(space[k], strlen(space[k])))
                return; /* chosen already */
    size_t at = c->n && !strcmp(c->col[c->n - 1]->name, "pids") ? c->n - 1 : c->n;
    if (c->n + n > COLUMNS_MAX)
        return;
    memmove(&c->col[at + n], &c->col[at], (c->n - at) * sizeof c->col[0]);
    for (size_t k = 0; k < n; k++)
        c->col[at + k] = find(space[k], strlen(space[k]));
    c->n += n;
}

const char *columns_known(void)
{
    return "tenant, gpu, held, quota, memory, refused, share, limit, prio, target, 100ms, "
           "1min, window, pauses, hold, why, domain, sms, faults, procs, pids";
}

void columns_print_known(FILE *out, int indent)
{
    int col = fprintf(out, "%*s", indent, "");
    for (size_t i = 0; i < N_TABLE; i++) {
        bool more = i + 1 < N_TABLE, first = col == indent;
        int w = (int)strlen(table[i].name) + (more ? 1 : 0) + (first ? 0 : 1);
        if (!first && col + w > COLUMNS_WIDTH) {
            col = fprintf(out, "\n%*s", indent, "") - 1;
            first = true;
        }
        col += fprintf(out, "%s%s%s", first ? "" : " ", table[i].name, more ? "," : "\n");
    }
}

static const struct column *find(const char *name, size_t len)
{
    for (size_t i = 0; i < N_TABLE; i++)
        if (strlen(table[i].name) == len && !strncmp(table[i].name, name, len))
            return &table[i];
    return NULL;
}

int columns_parse(const char *list, struct columns *c, char *err, size_t err_len)
{
    c->n = 0;
    if (!c->name_width)
        c->name_width = 6;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        const struct column *col = find(p, len);
        if (!col) {
            snprintf(err, err_len, "unknown column '%.*s' (columns: %s)", (int)len, p,
                     columns_known());
            return -EINVAL;
        }
        if (c->n == COLUMNS_MAX) {
            snprintf(err, err_len, "more than %d columns", COLUMNS_MAX);
            return -EINVAL;
        }
        c->col[c->n++] = col;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

void columns_drop_compute(struct columns *c)
{
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        if (!c->col[i]->compute)
            c->col[k++] = c->col[i];
    c->n = k;
}

void columns_fit_names(struct columns *c, const struct ps_snapshot *s)
{
    c->name_width = 6;
    for (size_t i = 0; i < s->n; i++) {
        int w = (int)strnlen(s->list[i].tenant, KAIROS_NAME_MAX);
        if (s->list[i].flags & KAIROS_PS_REMOVED)
            w += (int)strlen(REMOVED_MARK);
        if (w > c->name_width)
            c->name_width = w;
    }
}

static int width_of(const struct columns *c, const struct column *col)
{
    return col->width ? col->width : c->name_width;
}

/* Prints the cells, the line without trailing blanks. */
static void print_cells(FILE *out, const struct columns *c, const char *indent,
                        const char *const *cells)
{
    char line[COLUMNS_MAX * 1100];
    size_t len = (size_t)snprintf(line, sizeof line, "%s", indent);
    for (size_t i = 0; i < c->n && len < sizeof line; i++) {
        const struct column *col = c->col[i];
        int w = snprintf(line + len, sizeof line - len, col->left ? "%s%-*s" : "%s%*s",
                         i ? "  " : "", width_of(c, col), cells[i]);
        len += w > 0 ? (size_t)w : 0;
    }
    if (len >= sizeof line)
        len = sizeof line - 1;
    while (len && line[len - 1] == ' ')
        len--;
    fprintf(out, "%.*s\n", (int)len, line);
}

void columns_header(FILE *out, const struct columns *c, const char *indent)
{
    const char *cells[COLUMNS_MAX];
    for (size_t i = 0; i < c->n; i++)
        cells[i] = c->col[i]->header;
    print_cells(out, c, indent, cells);
}

void columns_row(FILE *out, const struct columns *c, const char *indent,
                 const struct columns_row *row)
{
    char text[COLUMNS_MAX][1024];
    const char *cells[COLUMNS_MAX];
    int pos = (int)strlen(indent);
    for (size_t i = 0; i < c->n; i++) {
        size_t cap = sizeof text[i];
        bool last = i + 1 == c->n;
        if (last && c->max_width > 0) { /* cut to what is left of the line, 8 at least */
            int left = c->max_width - pos;
            cap = (size_t)(left > 8 ? left : 8) + 1;
        }
        c->col[i]->cell(row, text[i], cap);
        cells[i] = text[i];
        pos += width_of(c, c->col[i]) + 2;
    }
    print_cells(out, c, indent, cells);
}
