/* columns.h - the columns kairos ps and kairos top can show, one table of them:
 * name (what -o/--columns takes), header, width and the cell of a tenant on a GPU.
 * Both commands print rows of (tenant, GPU) through it, so a column means the same
 * in both. Each command has a default set that fits 80 columns (for tenant names
 * up to 10 characters) and a wide set (--wide) with every column it knows (HOLD
 * and WHY, what held a tenant back, are there: the default sets have no room).
 *
 * Thread rules: no state.
 */
#ifndef KAIROS_CLI_COLUMNS_H
#define KAIROS_CLI_COLUMNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cli/ps_view.h"

#define COLUMNS_MAX 24
#define COLUMNS_WIDTH 80 /* what the default sets fit */

#define COLUMNS_PS_DEFAULT "tenant,gpu,memory,refused,share,target,1min,pids"
#define COLUMNS_PS_WIDE                                                                        \
    "tenant,gpu,held,quota,refused,share,limit,prio,target,100ms,1min,window,pauses,hold,why,"  \
    "pids"
#define COLUMNS_TOP_DEFAULT "tenant,target,100ms,1min,share,limit,memory,procs"
#define COLUMNS_TOP_WIDE                                                                       \
    "tenant,target,100ms,1min,share,limit,prio,window,pauses,hold,why,memory,procs"

struct column; /* one entry of the table in columns.c */

/* A selection of columns, in the order they print. */
struct columns {
    const struct column *col[COLUMNS_MAX];
    size_t n;
    int name_width; /* of the tenant column: the longest name, at least 6 */
    int max_width;  /* 0: no limit; else the last column (pids) is cut to fit */
};

/* One row: tenant r on GPU g; first is false for the tenant's further rows (its
 * name and processes are printed once); no_gpu for a tenant with nothing on any GPU. */
struct columns_row {
    const struct kairos_ps_reply *r;
    unsigned g;
    bool first;
    bool no_gpu;
};

/* Parses "tenant,gpu,held" into c (width limits untouched). 0, or -EINVAL with
 * err naming the unknown column and listing the known ones. */
int columns_parse(const char *list, struct columns *c, char *err, size_t err_len);
/* Drops the compute columns (share, limit, prio, target, 100ms, 1min, window,
 * pauses, hold, why): for a default view when no tenant has a compute policy. */
void columns_drop_compute(struct columns *c);
/* Adds the space columns (domain, sms, faults) before pids, unless chosen already: for a
 * default view when a tenant has a fault domain or a GPU fault. */
void columns_add_space(struct columns *c);
/* Sets name_width from the tenants of s. */
void columns_fit_names(struct columns *c, const struct ps_snapshot *s);
/* The names every column has, comma separated (for errors). */
const char *columns_known(void);
/* The same for a help text: lines of at most 80 columns, each after indent spaces
 * (the first one too), ending in '\n'. */
void columns_print_known(FILE *out, int indent);

/* The header line and one row, each prefixed by indent, ending in '\n'. */
void columns_header(FILE *out, const struct columns *c, const char *indent);
void columns_row(FILE *out, const struct columns *c, const char *indent,
                 const struct columns_row *row);

#endif /* KAIROS_CLI_COLUMNS_H */
