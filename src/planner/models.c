/* models.c - the built-in GPU models (MIG profile tables) and option helpers.
 *
 * One table per model, the single source of truth for profile names, slice shapes, SM
 * counts, memory and allowed start slices. Sources: NVIDIA MIG user guide (A100, H100)
 * and `nvidia-smi mig -lgip/-lgipp` read on an H200 with driver 580.159.04
 * (shared/fixtures/h200-mig-profiles.txt). "+me" profiles are left out: same geometry.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kairos/plan.h"

#define STARTS_1G 0x7fu   /* {0..6} */
#define STARTS_1G2 0x55u  /* {0,2,4,6} */
#define STARTS_2G 0x15u   /* {0,2,4} */
#define STARTS_3G 0x11u   /* {0,4} */
#define STARTS_0 0x01u    /* {0} */
#define GIB(x) ((int64_t)((x) * 1024.0))

static const struct plan_gpu_model models_builtin[] = {
    {"A100-40GB", 108, 40960, 5, {
        {"1g.5gb", 1, 1, 14, GIB(4.75), STARTS_1G},
        {"2g.10gb", 2, 2, 28, GIB(9.75), STARTS_2G},
        {"3g.20gb", 3, 4, 42, GIB(19.625), STARTS_3G},
        {"4g.20gb", 4, 4, 56, GIB(19.625), STARTS_0},
        {"7g.40gb", 7, 8, 98, GIB(39.5), STARTS_0},
    }},
    {"A100-40GB+1g.10gb", 108, 40960, 6, {
        {"1g.5gb", 1, 1, 14, GIB(4.75), STARTS_1G},
        {"1g.10gb", 1, 2, 14, GIB(9.75), STARTS_1G2},
        {"2g.10gb", 2, 2, 28, GIB(9.75), STARTS_2G},
        {"3g.20gb", 3, 4, 42, GIB(19.625), STARTS_3G},
        {"4g.20gb", 4, 4, 56, GIB(19.625), STARTS_0},
        {"7g.40gb", 7, 8, 98, GIB(39.5), STARTS_0},
    }},
    {"H100-80GB", 132, 81559, 6, {
        {"1g.10gb", 1, 1, 16, GIB(9.75), STARTS_1G},
        {"1g.20gb", 1, 2, 26, GIB(19.625), STARTS_1G2},
        {"2g.20gb", 2, 2, 32, GIB(19.625), STARTS_2G},
        {"3g.40gb", 3, 4, 60, GIB(39.5), STARTS_3G},
        {"4g.40gb", 4, 4, 64, GIB(39.5), STARTS_0},
        {"7g.80gb", 7, 8, 132, GIB(79.0), STARTS_0},
    }},
    {"H200-141GB", 132, 143771, 6, {
        {"1g.18gb", 1, 1, 16, GIB(16.0), STARTS_1G},
        {"1g.35gb", 1, 2, 26, GIB(32.5), STARTS_1G2},
        {"2g.35gb", 2, 2, 32, GIB(32.5), STARTS_2G},
        {"3g.71gb", 3, 4, 60, GIB(69.75), STARTS_3G},
        {"4g.71gb", 4, 4, 64, GIB(69.75), STARTS_0},
        {"7g.141gb", 7, 8, 132, GIB(140.0), STARTS_0},
    }},
};

#define N_BUILTIN (sizeof(models_builtin) / sizeof(models_builtin[0]))

static const char *const builtin_names[] = {
    "A100-40GB", "A100-40GB+1g.10gb", "H100-80GB", "H200-141GB", NULL,
};

const char *const *plan_model_builtin_names(void)
{
    return builtin_names;
}

int plan_model_builtin(const char *name, struct plan_gpu_model *out)
{
    for (size_t i = 0; i < N_BUILTIN; i++) {
        if (!strcmp(models_builtin[i].name, name)) {
            *out = models_builtin[i];
            return 0;
        }
    }
    return -ENOENT;
}

int plan_option_count(const struct plan_gpu_model *m)
{
    return m->n_profiles + 1;
}

const char *plan_option_name(const struct plan_gpu_model *m, int option)
{
    return option == PLAN_OPTION_WHOLE ? "whole" : m->profiles[option - 1].name;
}

int plan_option_compute(const struct plan_gpu_model *m, int option)
{
    return option == PLAN_OPTION_WHOLE ? PLAN_COMPUTE_SLICES : m->profiles[option - 1].compute_slices;
}

int64_t plan_option_mem(const struct plan_gpu_model *m, int option)
{
    return option == PLAN_OPTION_WHOLE ? m->whole_mem_mib : m->profiles[option - 1].mem_mib;
}

int plan_option_sms(const struct plan_gpu_model *m, int option)
{
    return option == PLAN_OPTION_WHOLE ? m->whole_sms : m->profiles[option - 1].sms;
}

int plan_option_sm_percent(const struct plan_gpu_model *m, int option)
{
    int sms = plan_option_sms(m, option), whole = m->whole_sms > 0 ? m->whole_sms : 1;
    int p = (sms * 100 + whole - 1) / whole; /* ceil(100 x SMs / whole SMs) */
    return p < 1 ? 1 : p > 100 ? 100 : p;
}

int plan_option_find(const struct plan_gpu_model *m, const char *name)
{
    if (!strcmp(name, "whole"))
        return PLAN_OPTION_WHOLE;
    for (int i = 0; i < m->n_profiles; i++)
        if (!strcmp(m->profiles[i].name, name))
            return i + 1;
    return -1;
}

static int profile_validate(const struct plan_profile *p, char *err, size_t errlen)
{
    static const int sizes[] = {1, 2, 4, 8};
    int size_ok = 0;
    for (size_t i = 0; i < 4; i++)
        size_ok |= p->mem_slices == sizes[i];
    if (!size_ok) {
        snprintf(err, errlen, "profile %s: memory_slices must be 1, 2, 4 or 8", p->name);
        return -EINVAL;
    }
    if (p->compute_slices < 1 || p->compute_slices > PLAN_COMPUTE_SLICES) {
        snprintf(err, errlen, "profile %s: compute_slices must be 1..7", p->name);
        return -EINVAL;
    }
    if (p->sms < 1 || p->mem_mib < 1) {
        snprintf(err, errlen, "profile %s: sms and memory must be positive", p->name);
        return -EINVAL;
    }
    for (int s = 0; s < PLAN_MEM_SLICES; s++) {
        if ((p->start_mask >> s & 1u) && s + p->mem_slices > PLAN_MEM_SLICES) {
            snprintf(err, errlen, "profile %s: start %d runs past memory slice 7", p->name, s);
            return -EINVAL;
        }
    }
    if (!p->start_mask || p->start_mask > 0xffu) {
        snprintf(err, errlen, "profile %s: starts must be within 0..7", p->name);
        return -EINVAL;
    }
    return 0;
}

int plan_model_validate(const struct plan_gpu_model *m, char *err, size_t errlen)
{
    if (m->whole_sms < 1 || m->whole_mem_mib < 1) {
        snprintf(err, errlen, "model %s: whole-GPU sms and memory must be positive", m->name);
        return -EINVAL;
    }
    if (m->n_profiles < 0 || m->n_profiles > PLAN_MAX_PROFILES) {
        snprintf(err, errlen, "model %s: at most %d profiles", m->name, PLAN_MAX_PROFILES);
        return -EINVAL;
    }
    for (int i = 0; i < m->n_profiles; i++) {
        int rc = profile_validate(&m->profiles[i], err, errlen);
        if (rc)
            return rc;
        for (int j = 0; j < i; j++) {
            if (!strcmp(m->profiles[i].name, m->profiles[j].name)) {
                snprintf(err, errlen, "model %s: profile %s listed twice", m->name,
                         m->profiles[i].name);
                return -EINVAL;
            }
        }
    }
    return 0;
}
