/* exact.c - the exact planner for small inputs: an integer program solved by GLPK.
 *
 * Instances are slots per option (slot k of option o may hold only workloads at
 * position >= k of o's feasible list, which removes most symmetry); GPUs are counted
 * per maximal layout, since a multiset of instances fits on c GPUs of layouts L iff
 * for every profile the slots used are at most sum_L c_L x count(L, profile).
 *   min  sum_L c_L + c_whole  (integral, so GLPK can round its bound up)
 *   s.t. each workload in exactly one slot; per slot time <= 100 % and memory fits;
 *        per MIG slot at most one workload unless in->mig_sharing;
 *        a[o][k] >= a[o][k+1]; x <= a; instances of o <= layout capacity for o;
 *        GPUs <= Kairos's count - 1. Infeasible means Kairos's plan is optimal; a
 *        solution is the optimum (and beats Kairos).
 * Bounded: refused beyond opt->exact_max_workloads, stopped after the time limit.
 * When not decided the result is the best plan GLPK found within the time limit, or
 * Kairos's plan, with exact_status = 0; when the pool is
 * too small for every workload, PLAN_EXACT_CAPPED (the model cannot say anything).
 * One pool only (a heterogeneous exact model is left out), and no interference model
 * (its capacity per instance depends on the tenant count: PLAN_EXACT_NO_MODEL), nor p99
 * latency targets (PLAN_EXACT_NO_LATENCY).
 */
#include <errno.h>
#include <glpk.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/internal.h"

struct exact_model {
    glp_prob *lp;
    const struct state *s;
    int n_slots[PLAN_MAX_OPTIONS];
    int slot0[PLAN_MAX_OPTIONS];      /* column of a[o][0] */
    int *feas[PLAN_MAX_OPTIONS];      /* feasible workloads of option o */
    int n_feas[PLAN_MAX_OPTIONS];
    int *xcol;                        /* [(o * n + pos) * n + k]: column or 0 */
    int col_layout0, col_whole, n;
    int *ind;
    double *val;
};

static int exact_xi(const struct exact_model *e, int o, int pos, int k)
{
    return e->xcol[((size_t)o * e->n + pos) * e->n + k];
}

static int exact_add_col(glp_prob *lp, int kind, double lo, double hi, double cost)
{
    int j = glp_add_cols(lp, 1);
    glp_set_col_kind(lp, j, kind);
    if (kind != GLP_BV)
        glp_set_col_bnds(lp, j, hi > lo ? GLP_DB : GLP_LO, lo, hi);
    glp_set_obj_coef(lp, j, cost);
    return j;
}

static void exact_add_row(glp_prob *lp, int len, const int *ind, const double *val, int type,
                          double lo, double hi)
{
    int i = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, i, type, lo, hi);
    glp_set_mat_row(lp, i, len, ind, val);
}

static void exact_columns(struct exact_model *e, double eps, int max_gpus)
{
    const struct state *s = e->s;
    for (int o = 0; o < s->n_options; o++) {
        e->slot0[o] = glp_get_num_cols(e->lp) + 1;
        for (int k = 0; k < e->n_slots[o]; k++)
            exact_add_col(e->lp, GLP_BV, 0, 1, eps * plan_option_compute(s->m, o));
        for (int pos = 0; pos < e->n_feas[o]; pos++)
            for (int k = 0; k <= pos; k++)
                e->xcol[((size_t)o * e->n + pos) * e->n + k] = exact_add_col(e->lp, GLP_BV, 0, 1, 0);
    }
    e->col_layout0 = glp_get_num_cols(e->lp) + 1;
    for (int l = 0; l < s->lay->n_mixes; l++)
        exact_add_col(e->lp, GLP_IV, 0, max_gpus, 1);
    e->col_whole = exact_add_col(e->lp, GLP_IV, 0, max_gpus, 1);
}

static int exact_pos(const struct exact_model *e, int o, int w)
{
    for (int pos = 0; pos < e->n_feas[o]; pos++)
        if (e->feas[o][pos] == w)
            return pos;
    return -1;
}

static void exact_rows_assign(struct exact_model *e)
{
    const struct state *s = e->s;
    for (int i = 0; i < s->n_wl; i++) {
        int w = s->wl[i], len = 0;
        for (int o = 0; o < s->n_options; o++) {
            int pos = exact_pos(e, o, w);
            for (int k = 0; pos >= 0 && k <= pos; k++) {
                e->ind[++len] = exact_xi(e, o, pos, k);
                e->val[len] = 1;
            }
        }
        if (len)
            exact_add_row(e->lp, len, e->ind, e->val, GLP_FX, 1, 1);
    }
}

static void exact_rows_slots(struct exact_model *e)
{
    const struct state *s = e->s;
    for (int o = 0; o < s->n_options; o++) {
        for (int k = 0; k < e->n_slots[o]; k++) {
            int a = e->slot0[o] + k, lt = 0;
            int *it = e->ind, *im = e->ind + e->n + 2;
            double *vt = e->val, *vm = e->val + e->n + 2;
            for (int pos = k; pos < e->n_feas[o]; pos++) {
                int w = e->feas[o][pos], x = exact_xi(e, o, pos, k);
                ++lt;
                it[lt] = im[lt] = x;
                /* rows scaled to capacity 1 to keep GLPK's simplex well conditioned */
                vt[lt] = st_need(s, w, o) / (double)PLAN_TIME_UNITS;
                vm[lt] = (double)s->in->workloads[w].mem_mib / (double)plan_option_mem(s->m, o);
                int pair[3] = {0, x, a};
                double coef[3] = {0, 1, -1};
                exact_add_row(e->lp, 2, pair, coef, GLP_UP, 0, 0);
            }
            it[++lt] = a;
            im[lt] = a;
            vt[lt] = -1;
            vm[lt] = -1;
            exact_add_row(e->lp, lt, it, vt, GLP_UP, 0, 0);
            exact_add_row(e->lp, lt, im, vm, GLP_UP, 0, 0);
            if (!plan_may_share(s->in, o, 2)) {   /* one workload per MIG instance */
                for (int q = 1; q < lt; q++)
                    vt[q] = 1;
                exact_add_row(e->lp, lt, it, vt, GLP_UP, 0, 0);
            }
            if (k + 1 < e->n_slots[o]) {
                int pair[3] = {0, a + 1, a};
                double coef[3] = {0, 1, -1};
                exact_add_row(e->lp, 2, pair, coef, GLP_UP, 0, 0);
            }
        }
    }
}

static void exact_rows_layouts(struct exact_model *e, int max_gpus)
{
    const struct state *s = e->s;
    for (int o = 0; o < s->n_options; o++) {
        int len = 0;
        for (int k = 0; k < e->n_slots[o]; k++) {
            e->ind[++len] = e->slot0[o] + k;
            e->val[len] = 1;
        }
        if (o == PLAN_OPTION_WHOLE) {
            e->ind[++len] = e->col_whole;
            e->val[len] = -1;
        }
        for (int l = 0; o != PLAN_OPTION_WHOLE && l < s->lay->n_mixes; l++) {
            int c = plan_mix_count(s->lay->mixes[l], o);
            if (c) {
                e->ind[++len] = e->col_layout0 + l;
                e->val[len] = -c;
            }
        }
        exact_add_row(e->lp, len, e->ind, e->val, GLP_UP, 0, 0);
    }
    int len = 0;
    for (int l = 0; l <= s->lay->n_mixes; l++) {
        e->ind[++len] = l < s->lay->n_mixes ? e->col_layout0 + l : e->col_whole;
        e->val[len] = 1;
    }
    exact_add_row(e->lp, len, e->ind, e->val, GLP_UP, 0, max_gpus);
}

static int exact_build(struct exact_model *e, int max_gpus)
{
    const struct state *s = e->s;
    int total_slots = 0;
    e->n = s->n_wl;
    for (int o = 0; o < s->n_options; o++) {
        e->feas[o] = malloc(((size_t)e->n + 1) * sizeof(int));
        if (!e->feas[o])
            return -ENOMEM;
        for (int i = 0; i < s->n_wl; i++)
            if (st_need(s, s->wl[i], o) >= 0)
                e->feas[o][e->n_feas[o]++] = s->wl[i];
        e->n_slots[o] = e->n_feas[o];
        total_slots += e->n_slots[o];
    }
    size_t big = (size_t)PLAN_MAX_OPTIONS * e->n * e->n + 1;
    size_t row = 2 * (size_t)(e->n + PLAN_MAX_LAYOUTS + 4) + (size_t)total_slots + 4;
    e->xcol = calloc(big, sizeof(int));
    e->ind = malloc(row * sizeof(int));
    e->val = malloc(row * sizeof(double));
    if (!e->xcol || !e->ind || !e->val)
        return -ENOMEM;
    e->lp = glp_create_prob();
    glp_set_obj_dir(e->lp, GLP_MIN);
    exact_columns(e, 0.0, max_gpus);
    exact_rows_assign(e);
    exact_rows_slots(e);
    exact_rows_layouts(e, max_gpus);
    return 0;
}

static void exact_model_free(struct exact_model *e)
{
    if (e->lp)
        glp_delete_prob(e->lp);
    for (int o = 0; o < PLAN_MAX_OPTIONS; o++)
        free(e->feas[o]);
    free(e->xcol);
    free(e->ind);
    free(e->val);
}

/* Turn the MIP solution into instances and GPUs of the state. */
static int exact_decode(struct exact_model *e, struct state *s)
{
    for (int o = 0; o < s->n_options; o++) {
        for (int k = 0; k < e->n_slots[o]; k++) {
            if (glp_mip_col_val(e->lp, e->slot0[o] + k) < 0.5)
                continue;
            int inst = -1;
            for (int pos = k; pos < e->n_feas[o]; pos++) {
                if (glp_mip_col_val(e->lp, exact_xi(e, o, pos, k)) < 0.5)
                    continue;
                if (inst < 0 && (inst = st_new_inst(s, o)) < 0)
                    return inst;
                st_put(s, e->feas[o][pos], inst, st_need(s, e->feas[o][pos], o));
            }
        }
    }
    for (int l = 0; l < s->lay->n_mixes; l++) {
        int copies = (int)lround(glp_mip_col_val(e->lp, e->col_layout0 + l));
        for (int c = 0; c < copies; c++) {
            int g = st_new_gpu(s, 0);
            if (g < 0)
                return g;
            s->gpu[g].alive = 0;
            for (int i = 0; i < s->n_inst; i++) {
                int o = s->inst[i].option;
                if (o == PLAN_OPTION_WHOLE || s->inst[i].gpu >= 0
                    || plan_mix_count(s->gpu[g].mix, o) >= plan_mix_count(s->lay->mixes[l], o))
                    continue;
                st_gpu_attach(s, i, g);
            }
        }
    }
    for (int i = 0; i < s->n_inst; i++) {
        if (s->inst[i].gpu >= 0)
            continue;
        if (s->inst[i].option != PLAN_OPTION_WHOLE)
            return -EINVAL;
        int g = st_new_gpu(s, 1);
        if (g < 0)
            return g;
        st_gpu_attach(s, i, g);
    }
    return 0;
}

/* Solve with at most max_gpus GPUs: 1 solved (decoded into s), 2 proven impossible,
 * 3 a plan found but not proven optimal within the time limit (decoded into s), 0 not
 * decided within the time limit, or -errno. */
static int exact_run(struct state *s, const struct plan_options *opt, int max_gpus, double *bound)
{
    struct exact_model e;
    glp_smcp sm;
    glp_iocp io;
    memset(&e, 0, sizeof(e));
    e.s = s;
    int rc = max_gpus < 0 ? 2 : exact_build(&e, max_gpus);
    if (rc)
        goto out;
    int term = glp_term_out(GLP_OFF);   /* GLPK prints on stdout otherwise */
    glp_scale_prob(e.lp, GLP_SF_AUTO);
    glp_init_smcp(&sm);
    sm.msg_lev = GLP_MSG_OFF;
    if (glp_simplex(e.lp, &sm) || glp_get_status(e.lp) != GLP_OPT) {
        glp_term_out(term);
        rc = glp_get_status(e.lp) == GLP_NOFEAS ? 2 : 0;
        goto out;
    }
    double gpus_lp = glp_get_col_prim(e.lp, e.col_whole);
    for (int l = 0; l < s->lay->n_mixes; l++)
        gpus_lp += glp_get_col_prim(e.lp, e.col_layout0 + l);
    *bound = ceil(gpus_lp - 1e-6);
    glp_init_iocp(&io);
    io.msg_lev = GLP_MSG_OFF;
    io.tm_lim = (int)(opt->exact_time_limit_s * 1000);
    io.mip_gap = 0.0;
    int err = glp_intopt(e.lp, &io);
    if (!err && glp_mip_status(e.lp) == GLP_OPT) {
        rc = exact_decode(&e, s);
        rc = rc ? rc : 1;
    } else if ((!err || err == GLP_ENOPFS) && glp_mip_status(e.lp) == GLP_NOFEAS) {
        rc = 2;
    } else if (err == GLP_ETMLIM && glp_mip_status(e.lp) == GLP_FEAS) {
        /* out of time with a plan better than Kairos's in hand: keep it, unproven */
        rc = exact_decode(&e, s);
        rc = rc ? rc : 3;
    }
    glp_term_out(term);
out:
    exact_model_free(&e);
    return rc;
}

static int exact_fallback(const struct plan_input *in, struct plan *p, double bound, int optimal)
{
    struct plan_options k;
    plan_options_default(&k);
    int rc = plan_solve(in, &k, p);
    snprintf(p->algo, sizeof(p->algo), "exact");
    p->exact_status = optimal;
    p->exact_bound = bound;
    return rc;
}

/* Kairos's GPU count, and whether its plan left workloads out for lack of GPUs. */
static int exact_heuristic_gpus(const struct plan_input *in, int *gpus, int *capped)
{
    struct plan_options k;
    struct plan h;
    struct plan_metrics m;
    plan_options_default(&k);
    int rc = plan_solve(in, &k, &h);
    if (rc)
        return rc;
    plan_metrics_compute(in, &h, &m);
    *gpus = m.gpus;
    *capped = 0;
    for (int f = 0; f < h.n_infeasible; f++)
        *capped |= h.infeasible[f].reason == PLAN_NO_CAPACITY;
    plan_free(&h);
    return 0;
}

int exact_solve(const struct plan_input *in, const struct plan_options *opt, struct plan *p)
{
    struct plan_layouts lay;
    struct state s;
    int *wl = malloc(((size_t)in->n_workloads + 1) * sizeof(int)), n = 0, ub = 0, capped = 0;
    double bound = 0;
    int rc = wl ? 0 : -ENOMEM;
    if (!rc && (in->n_pools != 1 || in->n_workloads > opt->exact_max_workloads
                || in->interference != PLAN_INTERF_NONE || plan_input_has_p99(in))) {
        free(wl);
        return exact_fallback(in, p, 0, in->interference != PLAN_INTERF_NONE
                              ? PLAN_EXACT_NO_MODEL : plan_input_has_p99(in)
                              ? PLAN_EXACT_NO_LATENCY : PLAN_EXACT_NOT_SOLVED);
    }
    rc = rc ? rc : exact_heuristic_gpus(in, &ub, &capped);
    if (!rc && capped) {
        /* the model places every workload; with too few GPUs nothing can be proven */
        free(wl);
        return exact_fallback(in, p, 0, PLAN_EXACT_CAPPED);
    }
    rc = rc ? rc : plan_layouts_enumerate(&in->pools[0].model, &lay);
    for (int w = 0; !rc && w < in->n_workloads; w++)
        wl[n++] = w;
    rc = rc ? rc : st_init(&s, in, 0, &lay, wl, n);
    if (rc) {
        free(wl);
        return rc;
    }
    /* only workloads feasible somewhere go into the model */
    n = 0;
    for (int i = 0; i < s.n_wl; i++)
        if (algo_smallest_option(&s, s.wl[i]) >= 0)
            s.wl[n++] = s.wl[i];
    s.n_wl = n;
    /* Kairos gives a plan with ub GPUs: ask for one with at most ub - 1. */
    bound = ub;
    rc = exact_run(&s, opt, ub - 1, &bound);
    if (rc == 1 || rc == 3) {
        plan_init(p);
        snprintf(p->algo, sizeof(p->algo), "exact");
        p->exact_status = rc == 1 ? PLAN_EXACT_OPTIMAL : PLAN_EXACT_NOT_SOLVED;
        rc = st_emit(&s, p);
        for (int w = 0; !rc && w < in->n_workloads; w++)
            if (s.where[w] < 0 && plan_add_infeasible(p, w, solve_reason_of(in, w)) < 0)
                rc = -ENOMEM;
        p->exact_bound = bound;
    } else if (rc == 0 || rc == 2) {
        rc = exact_fallback(in, p, rc == 2 ? ub : bound, rc == 2);
    }
    st_free(&s);
    free(wl);
    return rc;
}
