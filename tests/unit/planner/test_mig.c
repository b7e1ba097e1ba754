/* test_mig.c - MIG geometry: maximal layouts enumerated from the placement rules
 * match the counts in krypton-paper-notes.md, fitting and placing multisets. */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kairos/plan.h"

static void layouts_of(const char *model, int placements, int mixes)
{
    struct plan_gpu_model m;
    struct plan_layouts l;
    assert_int_equal(plan_model_builtin(model, &m), 0);
    assert_int_equal(plan_layouts_enumerate(&m, &l), 0);
    assert_int_equal(l.n_placements, placements);
    assert_int_equal(l.n_mixes, mixes);
}

static void test_layout_counts(void **state)
{
    (void)state;
    layouts_of("A100-40GB", 19, 14);
    layouts_of("A100-40GB+1g.10gb", 78, 38);
    layouts_of("H100-80GB", 78, 38);
    layouts_of("H200-141GB", 78, 38);
}

static plan_mix_t mix_of(const struct plan_gpu_model *m, const char *const *names, int n)
{
    plan_mix_t mix = 0;
    for (int i = 0; i < n; i++)
        mix = plan_mix_add(mix, plan_option_find(m, names[i]), 1);
    return mix;
}

static void test_fit_and_place(void **state)
{
    struct plan_gpu_model m;
    struct plan_layouts l;
    int starts[8];
    (void)state;
    plan_model_builtin("H200-141GB", &m);
    plan_layouts_enumerate(&m, &l);
    static const char *const ok1[] = {"4g.71gb", "2g.35gb", "1g.35gb"};
    static const char *const ok2[] = {"1g.35gb", "1g.35gb", "1g.35gb", "1g.35gb"};
    static const char *const ok3[] = {"1g.18gb", "1g.18gb", "1g.18gb", "1g.18gb", "1g.18gb",
                                      "1g.18gb", "1g.35gb"};
    static const char *const bad1[] = {"4g.71gb", "4g.71gb"};
    static const char *const bad2[] = {"3g.71gb", "3g.71gb", "1g.18gb", "1g.18gb"};
    static const char *const ok4[] = {"2g.35gb", "2g.35gb", "2g.35gb", "1g.35gb"};
    static const char *const bad3[] = {"2g.35gb", "2g.35gb", "2g.35gb", "1g.18gb", "1g.18gb"};
    assert_true(plan_mix_fits(&l, mix_of(&m, ok1, 3)));
    assert_true(plan_mix_fits(&l, mix_of(&m, ok2, 4)));
    assert_true(plan_mix_fits(&l, mix_of(&m, ok3, 7)));
    assert_false(plan_mix_fits(&l, mix_of(&m, bad1, 2)));
    assert_false(plan_mix_fits(&l, mix_of(&m, bad2, 4)));
    assert_true(plan_mix_fits(&l, mix_of(&m, ok4, 4)));
    assert_false(plan_mix_fits(&l, mix_of(&m, bad3, 5)));
    assert_int_equal(plan_mix_place(&m, mix_of(&m, ok3, 7), starts, 8), 0);
    assert_int_equal(starts[6], 6);   /* the 1g.35gb can only go at 6 */
    assert_int_not_equal(plan_mix_place(&m, mix_of(&m, bad3, 5), starts, 8), 0);
}

static void test_paper_a100_mixes(void **state)
{
    struct plan_gpu_model m;
    struct plan_layouts l;
    (void)state;
    plan_model_builtin("A100-40GB", &m);
    plan_layouts_enumerate(&m, &l);
    /* 3+3 leaves a compute slice unused but is maximal; 2+2+2+1 fits; 4+3+1 does not */
    static const char *const a[] = {"3g.20gb", "3g.20gb"};
    static const char *const b[] = {"2g.10gb", "2g.10gb", "2g.10gb", "1g.5gb"};
    static const char *const c[] = {"4g.20gb", "3g.20gb", "1g.5gb"};
    assert_true(plan_mix_fits(&l, mix_of(&m, a, 2)));
    assert_true(plan_mix_fits(&l, mix_of(&m, b, 4)));
    assert_false(plan_mix_fits(&l, mix_of(&m, c, 3)));
    assert_int_equal(plan_mix_compute(&m, mix_of(&m, b, 4)), 7);
}

/* The hashed fit oracle agrees with dominance over maximal layouts and with direct
 * placement, for every multiset of up to 7 instances of each profile. */
static void test_fit_oracles_agree(void **state)
{
    (void)state;
    for (const char *const *n = plan_model_builtin_names(); *n; n++) {
        struct plan_gpu_model m;
        struct plan_layouts l;
        int starts[8];
        plan_model_builtin(*n, &m);
        plan_layouts_enumerate(&m, &l);
        int total = 1;
        for (int o = 0; o < m.n_profiles; o++)
            total *= 8;
        for (int code = 0; code < total; code++) {
            plan_mix_t mix = 0;
            for (int o = 1, c = code; o <= m.n_profiles; o++, c /= 8)
                mix = plan_mix_add(mix, o, c % 8);
            int fast = plan_mix_fits(&l, mix), slow = plan_mix_fits_slow(&l, mix);
            int placed = plan_mix_place(&m, mix, starts, 8) == 0;
            if (fast != slow || fast != placed)
                fail_msg("%s mix %08x: hash %d, dominance %d, placement %d", *n, mix, fast, slow, placed);
        }
    }
}

static void test_models(void **state)
{
    struct plan_gpu_model m;
    char err[200];
    (void)state;
    for (const char *const *n = plan_model_builtin_names(); *n; n++) {
        assert_int_equal(plan_model_builtin(*n, &m), 0);
        assert_int_equal(plan_model_validate(&m, err, sizeof(err)), 0);
    }
    plan_model_builtin("H200-141GB", &m);
    assert_int_equal(m.whole_sms, 132);
    assert_int_equal(m.whole_mem_mib, 143771);
    assert_int_equal(plan_option_sms(&m, plan_option_find(&m, "1g.35gb")), 26);
    assert_int_equal(plan_option_sms(&m, plan_option_find(&m, "3g.71gb")), 60);
    assert_int_equal(plan_model_builtin("V100", &m), -ENOENT);
    plan_model_builtin("A100-40GB", &m);
    m.profiles[1].start_mask |= 1u << 7;   /* 2g starting at 7 runs past the end */
    assert_int_not_equal(plan_model_validate(&m, err, sizeof(err)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_counts),
        cmocka_unit_test(test_fit_and_place),
        cmocka_unit_test(test_paper_a100_mixes),
        cmocka_unit_test(test_fit_oracles_agree),
        cmocka_unit_test(test_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
