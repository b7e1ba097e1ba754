/* top_frame.c - the text of one `kairos top` frame (see top_frame.h).
 *
 *   kairosd: 2 GPUs, 3 tenants, 2 with a compute policy
 *
 *   GPU 0
 *     TENANT  TARGET   100MS    1MIN   SHARE   LIMIT  MEMORY HELD/QUOTA    PROCS
 *     capped   30.0%   29.1%   29.8%   30.0%   30.0%  3.00 GiB/8.00 GiB        2
 *
 * The columns are those the caller chose (columns.h: a default set that fits 80
 * columns, --wide, or -o); by default target and achieved come first, so that they
 * stay visible in a narrow terminal. */
#include "cli/top_frame.h"

#include <errno.h>

static void gpu_block(FILE *out, const struct columns *cols, const struct ps_snapshot *s,
                      unsigned g)
{
    fprintf(out, "\nGPU %u\n", g);
    size_t shown = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!ps_gpu_shown(&s->list[i], g))
            continue;
        if (!shown++)
            columns_header(out, cols, "  ");
        struct columns_row row = {.r = &s->list[i], .g = g, .first = true};
        columns_row(out, cols, "  ", &row);
    }
    if (!shown)
        fprintf(out, "  no tenant\n");
}

int top_frame_write(FILE *out, const struct ps_snapshot *s, const struct columns *chosen)
{
    size_t with_compute = 0;
    for (size_t i = 0; i < s->n; i++)
        with_compute += ps_tenant_has_compute(&s->list[i], s->n_gpus);
    fprintf(out, "kairosd: %u GPU%s, %zu tenant%s, %zu with a compute policy\n", s->n_gpus,
            s->n_gpus == 1 ? "" : "s", s->n, s->n == 1 ? "" : "s", with_compute);
    struct columns cols = *chosen;
    columns_fit_names(&cols, s);
    for (unsigned g = 0; g < s->n_gpus; g++)
        gpu_block(out, &cols, s, g);
    fflush(out);
    return ferror(out) ? -EIO : 0;
}
