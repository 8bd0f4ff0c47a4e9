/* test_fuzz.c - a short fuzz run on the GPU: 300 cases of a fixed seed, M,
 * N, K up to 1300 and M*N*K up to 2^26, on auto-dispatch and every kernel
 * (cuBLAS excepted), the 75 batched and grouped cases that come with
 * them (issue 38) and the 75 epilogue cases (issue 39: every kind, checked
 * as verify --epilogue checks; the kernels without that epilogue skip
 * them; not yet run on a GPU). No kernel
 * may fail a case, and auto-dispatch and each
 * Hopper kernel must have run exact (small-integer, bit-for-bit) cases, so
 * the run cannot pass by refusing everything. Expected to take about 10 s
 * on an H100 (an estimate: not measured yet).
 *
 *   build/tests/gpu_test_fuzz
 * A failure line carries its replay: tilekit fuzz --seed 7 --case I --kernel
 * NAME --max-size 1300 --max-volume 67108864. Without a GPU nothing is
 * counted (0 passed, 0 failed): the CPU suite checks the generator. */
#include <string.h>
#include "tilekit.h"
#include "lab/lab.h"
#include "../host/check.h"

#define CASES 300

static tk_lab_fuzz_opts opts;
static tk_lab_fuzz_summary sum;
static tk_handle h;

static const tk_lab_fuzz_stat *stat_of(const char *name)
{
    for (int i = 0; i < sum.nkernels; i++)
        if (!strcmp(sum.kernel[i].name, name))
            return &sum.kernel[i];
    return NULL;
}

static void test_no_kernel_fails(void)
{
    CHECK(sum.cases == CASES, "%lld of %d cases ran: %s", (long long)sum.cases, CASES, sum.error);
    CHECK(sum.total.failed == 0, "%lld kernel-cases failed (the FAIL lines above replay them)",
          (long long)sum.total.failed);
    CHECK(sum.total.skipped > 0, "no kernel refused a case: the misaligned cases are missing");
}

/* Auto-dispatch runs every case; each Hopper kernel (where this GPU runs
 * them) must have run exact and random cases, not refused them all: about
 * half the cases are aligned as TMA needs, half of those exact. */
static void test_exact_cases_ran(void)
{
    static const char *const must[] = { "auto", "k30_wgmma_tma", "k31_wgmma_cluster", "k33_wgmma_128x128",
                                         "k34_wgmma_128x64", "k35_wgmma_128x192", "k36_swap_16x64",
                                         "k36_swap_32x64", "k36_swap_48x64", "k36_swap_64x64", "k36_swap_72x64",
                                         "k37_wgmma_128x144",
                                         "k38_swap_144x128", "k42_wgmma_64x128", "k42_wgmma_64x144",
                                         "k42_wgmma_64x192" };
    const tk_gemm_problem probe = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 128, 128, 128, 1.0f, 0.0f,
                                    NULL, 128, NULL, 128, NULL, 128, TK_F32 };
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
        const tk_lab_fuzz_stat *k = stat_of(must[i]);
        CHECK(k != NULL, "%s is not in the run", must[i]);
        if (!k)
            continue;
        if (i > 0 && tk_kernel_supports(h, must[i], &probe) != TK_SUCCESS) {
            printf("skip %s: %s\n", must[i], tk_last_error(h));
            continue;
        }
        CHECK(k->exact >= 10 && k->checked - k->exact >= 10, "%s ran %lld exact and %lld random cases", must[i],
              (long long)k->exact, (long long)(k->checked - k->exact));
    }
    /* and the batched, grouped and epilogue cases after every 4th dense one (their own streams) */
    const tk_lab_fuzz_stat *a = stat_of("auto");
    CHECK(sum.many == CASES / 4, "%lld batched and grouped cases (expected %d)", (long long)sum.many, CASES / 4);
    CHECK(sum.epi == CASES / 4, "%lld epilogue cases (expected %d)", (long long)sum.epi, CASES / 4);
    CHECK(a && a->checked == CASES + sum.many + sum.epi, "auto-dispatch ran %lld of %lld cases",
          a ? (long long)a->checked : 0ll, (long long)(CASES + sum.many + sum.epi));
}

void tk_tests(void)
{
    tk_lab_fuzz_defaults(&opts);
    opts.seed = 7;
    opts.cases = CASES;
    opts.gen.max_size = 1300;
    opts.gen.max_volume = (int64_t)1 << 26;
    opts.forms = TK_LAB_FORM_ALL | TK_LAB_FORM_EPILOGUE;
    char why[TK_LAB_MSG_LEN];
    tk_status st = tk_lab_fuzz_run(&opts, &sum, why, sizeof why);
    if (st == TK_ERR_NO_DEVICE) {
        printf("no GPU to fuzz on (%s): nothing counted\n", why);
        return;
    }
    tk_lab_fuzz_print_summary(stdout, &opts, &sum);
    tk_create(&h);
    TK_TEST(test_no_kernel_fails);
    TK_TEST(test_exact_cases_ran);
    tk_destroy(h);
}
