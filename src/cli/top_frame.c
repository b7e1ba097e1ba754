/* top_frame.c - the text of one `kairos top` frame (see top_frame.h).
 *
 *   kairosd: 2 GPUs, 3 tenants, 2 with a compute policy
 *
 *   GPU 0
 *     TENANT  TARGET  100MS   1MIN  SHARE  LIMIT  PRIO     WINDOW      PAUSES  MEMORY ...
 *     capped   30.0%  29.1%  29.8%  30.0%  30.0%  normal   29.3/100ms      57  3.00 GiB/8.00 GiB
 *
 * Target and achieved come first, so that they stay visible in a narrow terminal. */
#include "cli/top_frame.h"

#include <errno.h>
#include <string.h>

#define ROW_FMT "  %-*s  %6s  %6s  %6s  %6s  %6s  %-7s  %11s  %7s  %-21s  %5s\n"

static int name_width(const struct ps_snapshot *s)
{
    int w = 6;
    for (size_t i = 0; i < s->n; i++)
        if ((int)strlen(s->list[i].tenant) > w)
            w = (int)strlen(s->list[i].tenant);
    return w;
}

static void tenant_row(FILE *out, int w, const struct kairos_ps_reply *r, unsigned g)
{
    char target[16] = "-", window[16] = "-", minute[16] = "-", share[16] = "-", limit[16] = "-",
         duty[32] = "-", pauses[24] = "-", memory[64], procs[16];
    const char *prio = "-";
    struct ps_compute c;
    if (ps_compute_get(r, g, &c)) {
        ps_cell_pct(c.target, true, target, sizeof target);
        ps_cell_pct(c.window, c.measured, window, sizeof window);
        ps_cell_pct(c.minute, c.measured, minute, sizeof minute);
        ps_cell_pct(c.share, true, share, sizeof share);
        ps_cell_limit(c.limit, limit, sizeof limit);
        prio = c.priority;
        ps_cell_window(&c, duty, sizeof duty);
        snprintf(pauses, sizeof pauses, "%llu", (unsigned long long)c.pauses);
    }
    ps_cell_memory(r, g, memory, sizeof memory);
    snprintf(procs, sizeof procs, "%u", r->n_pids);
    fprintf(out, ROW_FMT, w, r->tenant, target, window, minute, share, limit, prio, duty, pauses,
            memory, procs);
}

static void gpu_block(FILE *out, int w, const struct ps_snapshot *s, unsigned g)
{
    fprintf(out, "\nGPU %u\n", g);
    size_t shown = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!ps_gpu_shown(&s->list[i], g))
            continue;
        if (!shown++)
            fprintf(out, ROW_FMT, w, "TENANT", "TARGET", "100MS", "1MIN", "SHARE", "LIMIT", "PRIO",
                    "WINDOW", "PAUSES", "MEMORY HELD/QUOTA", "PROCS");
        tenant_row(out, w, &s->list[i], g);
    }
    if (!shown)
        fprintf(out, "  no tenant\n");
}

int top_frame_write(FILE *out, const struct ps_snapshot *s)
{
    size_t with_compute = 0;
    for (size_t i = 0; i < s->n; i++)
        with_compute += ps_tenant_has_compute(&s->list[i], s->n_gpus);
    fprintf(out, "kairosd: %u GPU%s, %zu tenant%s, %zu with a compute policy\n", s->n_gpus,
            s->n_gpus == 1 ? "" : "s", s->n, s->n == 1 ? "" : "s", with_compute);
    int w = name_width(s);
    for (unsigned g = 0; g < s->n_gpus; g++)
        gpu_block(out, w, s, g);
    fflush(out);
    return ferror(out) ? -EIO : 0;
}
