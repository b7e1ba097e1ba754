/* bound.c - a lower bound on the GPUs any plan needs: the LP relaxation of a
 * resource model, solved by GLPK.
 *
 * Each GPU of pool p offers 7 compute slices x PLAN_TIME_UNITS of time and 8 memory
 * slices. Workload w on option o of pool p takes at least t(w,o) x compute(o) of the
 * first (t its interference-free time share, a lower bound under any interference) and
 * mem(w) / mem(o) x memory_slices(o) of the second (its part of the instance's memory;
 * the whole GPU counts 8 slices). With x(w,p,o) >= 0, sum over (p,o) of x = 1:
 *   minimise sum_p G_p  s.t.  sum x t c <= 7000 G_p,  sum x m <= 8 G_p
 * (the pools' sizes are left out: the bound is on the GPUs needed, not on what exists).
 * Every plan is a feasible integral point, so the optimum (rounded up) bounds every
 * plan. Workloads that fit nowhere are left out. Refused (-E2BIG) beyond
 * PLAN_BOUND_MAX_WORKLOADS, to keep the simplex fast.
 */
#include <errno.h>
#include <glpk.h>
#include <math.h>
#include <stdlib.h>

#include "kairos/plan.h"

static double bound_mem_slices(const struct plan_gpu_model *m, int o, int64_t mem)
{
    int slices = o == PLAN_OPTION_WHOLE ? PLAN_MEM_SLICES : m->profiles[o - 1].mem_slices;
    return (double)mem / (double)plan_option_mem(m, o) * slices;
}

/* Adds x(w,p,o) for every usable option of w; returns how many. */
static int bound_columns(glp_prob *lp, const struct plan_input *in, int w, int row_w, int *ind,
                         double *val)
{
    int n = 0;
    for (int p = 0; p < in->n_pools; p++) {
        const struct plan_gpu_model *m = &in->pools[p].model;
        for (int o = 0; o < plan_option_count(m); o++) {
            int t = plan_time_needed(&in->workloads[w], p, m, o);
            if (t < 0)
                continue;
            int j = glp_add_cols(lp, 1);
            glp_set_col_bnds(lp, j, GLP_LO, 0, 0);
            ind[1] = row_w;
            val[1] = 1;
            ind[2] = 2 * p + 1;     /* compute-time row of pool p */
            val[2] = (double)t * plan_option_compute(m, o) / (PLAN_COMPUTE_SLICES * PLAN_TIME_UNITS);
            ind[3] = 2 * p + 2;     /* memory row of pool p */
            val[3] = bound_mem_slices(m, o, in->workloads[w].mem_mib) / PLAN_MEM_SLICES;
            glp_set_mat_col(lp, j, 3, ind, val);
            n++;
        }
    }
    return n;
}

int plan_lower_bound(const struct plan_input *in, double *gpus)
{
    int ind[4];
    double val[4];
    if (in->n_workloads > PLAN_BOUND_MAX_WORKLOADS)
        return -E2BIG;
    int term = glp_term_out(GLP_OFF);
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    glp_add_rows(lp, 2 * in->n_pools);
    for (int p = 0; p < in->n_pools; p++) {
        int g = glp_add_cols(lp, 1);   /* G_p */
        glp_set_col_bnds(lp, g, GLP_LO, 0, 0);   /* the pool's size is not a bound */
        glp_set_obj_coef(lp, g, 1);
        glp_set_row_bnds(lp, 2 * p + 1, GLP_UP, 0, 0);
        glp_set_row_bnds(lp, 2 * p + 2, GLP_UP, 0, 0);
        int rows[3] = {0, 2 * p + 1, 2 * p + 2};
        double ones[3] = {0, -1, -1};
        glp_set_mat_col(lp, g, 2, rows, ones);
    }
    for (int w = 0; w < in->n_workloads; w++) {
        int row = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, row, GLP_FX, 1, 1);
        if (!bound_columns(lp, in, w, row, ind, val))
            glp_set_row_bnds(lp, row, GLP_FR, 0, 0);   /* fits nowhere: not counted */
    }
    glp_smcp sm;
    glp_init_smcp(&sm);
    sm.msg_lev = GLP_MSG_OFF;
    int rc = 0;
    if (glp_simplex(lp, &sm) || glp_get_status(lp) != GLP_OPT)
        rc = -EDOM;
    else
        *gpus = glp_get_obj_val(lp);
    glp_delete_prob(lp);
    glp_term_out(term);
    return rc;
}
