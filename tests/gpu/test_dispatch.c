/* test_dispatch.c - auto-dispatch on the real GPU, and on the same GPU
 * described as an sm_80 part (the handle's device record is what every
 * support check reads), so the routing issue 4 asks for is checked here:
 * the portable kernel below sm_90, a Hopper kernel on sm_90, k01_naive for
 * what the fast kernels refuse. */
#include <string.h>
#include "host/internal.h"
#include "../host/check.h"

static tk_handle h;
static int have_gpu;

static tk_gemm_problem problem(int64_t m, int64_t n, int64_t k, int64_t lda, tk_op op_a, tk_op op_b)
{
    tk_gemm_problem p = { TK_ROW_MAJOR, op_a, op_b, m, n, k, 1.0f, 0.0f, NULL, lda, NULL,
                          op_b == TK_OP_N ? n : k, NULL, n, TK_F32 };
    return p;
}

static const tk_kernel *pick(const tk_gemm_problem *p)
{
    const char *name = tk_select_kernel(h, p);
    return name ? tk_registry_find(name) : NULL;
}

static void test_sm90_picks_hopper(void)
{
    if (h->dev.sm < 90) {
        printf("     (device is sm_%d: nothing to check)\n", h->dev.sm);
        return;
    }
    for (int ops = 0; ops < 4; ops++) {
        tk_op oa = (tk_op)(ops & 1), ob = (tk_op)(ops >> 1);
        tk_gemm_problem p = problem(8192, 8192, 8192, 8192, oa, ob);
        const tk_kernel *k = pick(&p);
        CHECK(k && k->min_sm == 90, "ops %d: auto chose %s, expected a Hopper (min_sm 90) kernel: %s", ops,
              k ? k->name : "nothing", tk_last_error(h));
    }
}

static void test_sm80_picks_portable(void)
{
    tk_device saved = h->dev;
    h->dev.sm = 80;
    h->dev.smem_per_block_optin = 163 * 1024;   /* an A100's opt-in limit */
    for (int ops = 0; ops < 4; ops++) {
        tk_gemm_problem p = problem(4096, 4096, 4096, 4096, (tk_op)(ops & 1), (tk_op)(ops >> 1));
        const tk_kernel *k = pick(&p);
        CHECK(k && !strcmp(k->name, "k21_mma_fastload"), "ops %d on sm_80: auto chose %s, expected k21_mma_fastload",
              ops, k ? k->name : "nothing");
    }
    tk_gemm_problem p = problem(4096, 4096, 4096, 4096, TK_OP_N, TK_OP_N);
    tk_status st = tk_kernel_supports(h, "k31_wgmma_cluster", &p);
    CHECK(st == TK_ERR_ARCH_MISMATCH, "k31 on sm_80: status %d (%s), expected ARCH_MISMATCH", st, tk_last_error(h));
    CHECK(strstr(tk_last_error(h), "sm_90") != NULL, "message does not name sm_90: %s", tk_last_error(h));
    h->dev = saved;
}

static void test_unaligned_goes_to_naive(void)
{
    /* lda = 4097 breaks every vector kernel's 16-byte rule: only k01_naive is left */
    for (int sm = 0; sm < 2; sm++) {
        tk_device saved = h->dev;
        if (sm)
            h->dev.sm = 80;
        tk_gemm_problem p = problem(4096, 4096, 4096, 4097, TK_OP_N, TK_OP_N);
        const tk_kernel *k = pick(&p);
        CHECK(k && !strcmp(k->name, "k01_naive"), "lda 4097 on sm_%d: auto chose %s, expected k01_naive",
              h->dev.sm, k ? k->name : "nothing");
        h->dev = saved;
    }
}

void tk_tests(void)
{
    have_gpu = tk_create(&h) == TK_SUCCESS && h->have_device;
    if (!have_gpu) {
        printf("no GPU: %s\n", h ? h->device_error : tk_last_error(NULL));
        TK_TEST(test_unaligned_goes_to_naive);   /* fails loudly: this suite needs a GPU */
        return;
    }
    TK_TEST(test_sm90_picks_hopper);
    TK_TEST(test_sm80_picks_portable);
    TK_TEST(test_unaligned_goes_to_naive);
    tk_destroy(h);
}
