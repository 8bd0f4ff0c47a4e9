/* test_lab_grouped.c - verify and bench of batched and grouped cases on the GPU
 * (lab_gverify.c, lab_gbench.c): every form through auto-dispatch and
 * k01_naive (the fallback that runs every form) must pass the fp64
 * reference, the cuBLAS loop and cublasGemmGroupedBatchedEx group by group,
 * with empty groups, odd sizes, rows and K past the groups and padded
 * leading dimensions, and leave what no group owns untouched; "cublas"
 * runs batched cases (cublasGemmStridedBatchedEx) and refuses grouped ones;
 * one bench case yields timed rows with their ratios and read rate.
 *
 *   build/tests/gpu_test_lab_grouped
 * Written without a GPU at hand (issue 38's lab part): not yet run. Without
 * a GPU nothing is counted (0 passed, 0 failed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tilekit.h"
#include "lab/lab.h"
#include "../host/check.h"

static tk_lab_verify *ctx;
static tk_lab_gverify_result *res;

static const int64_t rows[] = { 0, 7, 128, 1, 0, 300 };   /* the README's list, an empty group more */
static const int64_t ks[] = { 33, 0, 64, 1 };
static const int64_t masked[] = { 5, 0, 17, 17 };

/* Runs kernel on g and checks its outcome (0 passed, 2 refused). */
static void expect(const char *kernel, const tk_lab_gcase *g, int outcome)
{
    tk_lab_gverify_run(ctx, kernel, g, res);
    tk_lab_gverify_print(stdout, kernel, g, res);
    char name[256];
    tk_lab_gcase_name(g, name, sizeof name);
    CHECK(res->outcome == outcome, "%s %s: outcome %d (expected %d): %s", kernel, name, res->outcome, outcome,
          res->msg);
    if (outcome == 0)
        CHECK(res->vs_loop.ran && res->vs_ref.checked > 0 && res->untouched_writes == 0 && !res->group_error,
              "%s %s: the cuBLAS loop did not run or nothing was checked", kernel, name);
    tk_lab_gverify_free(res);
}

static tk_lab_gcase make(int kind, int count, const int64_t *sizes, int64_t m, int64_t n, int64_t k, tk_op op_a,
                         tk_op op_b, tk_dtype out, float beta, int pad)
{
    tk_lab_gcase g = { 0 };
    g.c = (tk_lab_case){ TK_ROW_MAJOR, op_a, op_b, m, n, k, 1.0f, beta, out, 3, pad, 0 };
    g.kind = kind;
    g.count = count;
    g.sizes = sizes;
    if (sizes)
        tk_lab_gcase_list_label(&g);
    return g;
}

static void test_rows(void)
{
    for (int pad = 0; pad < 2; pad++)
        for (int t = 0; t < 2; t++) {
            /* 436 rows in groups, 9 past them */
            tk_lab_gcase g = make(TK_GROUP_ROWS, 6, rows, 445, 72, 40, TK_OP_N, t ? TK_OP_T : TK_OP_N,
                                  t ? TK_BF16 : TK_F32, t ? 0.5f : 0.0f, pad);
            expect("auto", &g, 0);
            expect("k01_naive", &g, 0);
            expect("cublas", &g, 2);
        }
}

static void test_k(void)
{
    /* dW = dY^T X: op_a t, with K past the groups and an empty group (C = beta C) */
    for (int pad = 0; pad < 2; pad++) {
        tk_lab_gcase g = make(TK_GROUP_K, 4, ks, 48, 40, 98 + 5, TK_OP_T, TK_OP_N, TK_F32, pad ? 1.0f : 0.0f, pad);
        expect("auto", &g, 0);
        expect("k01_naive", &g, 0);
    }
}

static void test_masked_and_batched(void)
{
    tk_lab_gcase g = make(TK_GROUP_MASKED, 4, masked, 20, 24, 16, TK_OP_N, TK_OP_T, TK_BF16, 0.0f, 1);
    expect("auto", &g, 0);
    expect("k01_naive", &g, 0);
    for (int layout = 0; layout < 2; layout++)
        for (int bc = 0; bc < 3; bc++) {
            tk_lab_gcase b = make(TK_GROUP_BATCHED, 5, NULL, 33, 20, 17, TK_OP_T, TK_OP_N, TK_F32, 0.0f, 0);
            b.c.layout = (tk_layout)layout;
            b.broadcast_a = bc == 1;
            b.broadcast_b = bc == 2;
            expect("auto", &b, 0);
            expect("k01_naive", &b, 0);
            expect("cublas", &b, 0);
        }
}

/* One bench case: the loop, cuBLAS grouped, the dense loop and auto,
 * timed; auto's ratios and read rate are finite. */
static void test_bench_case(void)
{
    tk_lab_bench_opts bo = { 0 };
    bo.budget_s = 0.05;
    bo.no_probe = 1;
    tk_lab_bench *b;
    char why[TK_LAB_MSG_LEN];
    if (tk_lab_bench_open(&b, &bo, why, sizeof why)) {
        CHECK(0, "bench: %s", why);
        return;
    }
    static const int64_t sizes[] = { 16, 0, 3, 200, 1 };
    tk_lab_gcase g = make(TK_GROUP_ROWS, 5, sizes, 220, 256, 128, TK_OP_N, TK_OP_T, TK_F32, 0.0f, 0);
    const char *kernels[] = { "auto" };
    const tk_lab_gbench_opts go = { 0, 0, 1 };
    tk_lab_bench_row rows_out[8];
    tk_lab_bench_print_gheader(stdout);
    int n = tk_lab_gbench_case(b, &g, kernels, 1, &go, stdout, rows_out);
    CHECK(n == 4, "%d rows (expected the loop, cuBLAS grouped, the dense loop and auto)", n);
    for (int i = 0; i < n; i++) {
        const tk_lab_bench_row *r = &rows_out[i];
        const int grouped = !strcmp(r->kernel, TK_LAB_CUBLAS_GROUPED);
        /* cuBLAS may not take bf16 -> fp32 grouped: then its row says why */
        CHECK(!strcmp(r->status, "ok") || (grouped && strstr(r->status, "cublasGemmGroupedBatchedEx")), "%s: %s",
              r->kernel, r->status);
        CHECK(r->flop == 2.0 * 220 * 256 * 128, "%s: flop %g", r->kernel, r->flop);
    }
    const tk_lab_bench_row *a = &rows_out[n - 1];
    CHECK(!strcmp(a->status, "ok") && isfinite(a->ratio_cublas) && isfinite(a->ratio_dense) && a->read_gbs > 0 &&
              a->tflops > 0,
          "auto: x loop %g x dense %g read %g GB/s", a->ratio_cublas, a->ratio_dense, a->read_gbs);
    tk_lab_bench_close(b);
}

void tk_tests(void)
{
    char why[TK_LAB_MSG_LEN];
    if (tk_lab_verify_open(&ctx, why, sizeof why)) {
        printf("no GPU (%s): nothing counted\n", why);
        return;
    }
    res = malloc(sizeof *res);
    TK_TEST(test_rows);
    TK_TEST(test_k);
    TK_TEST(test_masked_and_batched);
    TK_TEST(test_bench_case);
    free(res);
    tk_lab_verify_close(ctx);
}
