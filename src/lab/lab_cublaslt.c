/* lab_cublaslt.c - the yardstick of FP8 cases (lab.h, "bench of FP8
 * cases"): cuBLASLt's FP8 matmul (cublasLtMatmul with CUDA_R_8F_E4M3 or
 * _E5M2 A and B, fp32 compute, C and D of the case's type, in place) on
 * the same codes and scales as the tilekit call, on the lab's own
 * cuBLASLt handle. The lab alone calls cuBLASLt; the library never does.
 *
 * What cuBLASLt takes (cublasLt.h's cublasLtMatmulMatrixScale_t; the
 * modes past the per-tensor one came with CUDA 12.9, on Hopper):
 *   - the "TN" layout alone: column-major A transposed, B not, so both
 *     operands K-major. A row-major problem runs as the column-major C^T =
 *     op(B)^T op(A)^T, cuBLASLt's A being tilekit's B: it needs op_a N and
 *     op_b T (A stored M x K, B stored N x K: torch._scaled_mm's layout).
 *     A column-major problem goes as it is and needs op_a T, op_b N.
 *   - TK_SCALE_TENSOR: SCALAR_32F, one fp32 value each (A_SCALE_POINTER,
 *     B_SCALE_POINTER).
 *   - TK_SCALE_ROW: OUTER_VEC_32F, a value per row of op(A) and per column
 *     of op(B): tilekit's scales as they are (torch._scaled_mm's
 *     row-wise mode runs this).
 *   - TK_SCALE_BLOCK: VEC128_32F for the activation (a value per row and
 *     128 of K, the rows contiguous: tilekit's scale_a with ld_scale_a =
 *     M) and BLK128x128_32F for the weight (a value per 128 x 128 block,
 *     the K-blocks contiguous and their count rounded up to a multiple of
 *     4, as PyTorch's scaled_mm pads them). tilekit's scale_b holds the
 *     N-blocks contiguous, so prepare uploads it re-laid.
 * A combination cuBLASLt lacks (E5M2 x E5M2, a leading dimension that is
 * not a multiple of 16 bytes, a mode this GPU has not) shows as no
 * algorithm from its heuristic: the row then says so. */
#include <stdlib.h>
#include <string.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include "lab.h"

#define WORKSPACE_BYTES ((size_t)32 << 20)   /* cuBLASLt's split-K and the like, as PyTorch gives it on Hopper */

struct tk_lab_cublaslt {
    cublasLtHandle_t h;
    void *ws;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulHeuristicResult_t algo;
    int ready;                  /* prepared: op, layouts and algo describe the case */
    float alpha, beta;
    const void *a, *b;
    void *c;
    float *blk;                 /* BLK128x128's scales of the weight, re-laid (device) */
    size_t blk_cap;             /* bytes */
};

static void release(tk_lab_cublaslt *x)
{
    if (x->op) cublasLtMatmulDescDestroy(x->op);
    if (x->la) cublasLtMatrixLayoutDestroy(x->la);
    if (x->lb) cublasLtMatrixLayoutDestroy(x->lb);
    if (x->lc) cublasLtMatrixLayoutDestroy(x->lc);
    x->op = NULL;
    x->la = x->lb = x->lc = NULL;
    x->ready = 0;
}

void tk_lab_cublaslt_close(tk_lab_cublaslt *x)
{
    if (!x)
        return;
    release(x);
    if (x->h)
        cublasLtDestroy(x->h);
    cudaFree(x->ws);
    cudaFree(x->blk);
    free(x);
}

int tk_lab_cublaslt_open(tk_lab_cublaslt **out, char *why, size_t len)
{
    *out = NULL;
    tk_lab_cublaslt *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(why, len, "out of host memory");
        return -1;
    }
    cublasStatus_t s = cublasLtCreate(&x->h);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, len, "cublasLtCreate: %s", cublasLtGetStatusString(s));
        tk_lab_cublaslt_close(x);
        return -1;
    }
    cudaError_t e = cudaMalloc(&x->ws, WORKSPACE_BYTES);
    if (e) {
        snprintf(why, len, "cuBLASLt's workspace: %s", cudaGetErrorString(e));
        cudaGetLastError();
        tk_lab_cublaslt_close(x);
        return -1;
    }
    *out = x;
    return 0;
}

static cudaDataType_t lt_type(int fp8) { return fp8 == TK_FP8_E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

/* The K-major layout of an FP8 operand: rows x cols column-major (cuBLASLt's
 * view of the stored matrix). */
static cublasStatus_t layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld)
{
    return cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld);
}

#define SET(attr, val) (s = s ? s : cublasLtMatmulDescSetAttribute(x->op, attr, &(val), sizeof(val)))

int tk_lab_cublaslt_prepare(tk_lab_cublaslt *x, const tk_gemm_desc *d, const float *host_scale_b, char *why,
                            size_t len)
{
    release(x);
    const tk_gemm_problem *p = &d->problem;
    const int row = p->layout == TK_ROW_MAJOR;
    /* both operands K-major: the only layout of cuBLASLt's FP8 matmul */
    if (row ? p->op_a != TK_OP_N || p->op_b != TK_OP_T : p->op_a != TK_OP_T || p->op_b != TK_OP_N) {
        snprintf(why, len, "cuBLASLt's FP8 matmul takes A and B K-major alone (%s: --op-a %s --op-b %s)",
                 row ? "row-major" : "column-major", row ? "n" : "t", row ? "t" : "n");
        return 1;
    }
    if (d->scale_mode == TK_SCALE_BLOCK && !row) {
        snprintf(why, len, "block scales are row-major alone (tilekit.h)");
        return 1;
    }
    /* cuBLASLt's operands: the row-major problem's B first (C^T = op(B)^T op(A)^T) */
    const void *la_ptr = row ? p->b : p->a, *lb_ptr = row ? p->a : p->b;
    const int fa = row ? d->b_fp8 : d->a_fp8, fb = row ? d->a_fp8 : d->b_fp8;
    const float *sa = row ? d->scale_b : d->scale_a, *sb = row ? d->scale_a : d->scale_b;
    const int64_t m = row ? p->n : p->m, n = row ? p->m : p->n, k = p->k;
    const int64_t lda = row ? p->ldb : p->lda, ldb = row ? p->lda : p->ldb;
    int32_t mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    if (d->scale_mode == TK_SCALE_ROW)
        mode_a = mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    if (d->scale_mode == TK_SCALE_BLOCK) {
        /* cuBLASLt's A is the weight (tilekit's B, 128 x 128 blocks), its B the activation (1 x 128) */
        mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
        mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
        if (d->ld_scale_a != p->m) {
            snprintf(why, len, "cuBLASLt's 1 x 128 scales have M between k-blocks (ld_scale_a %lld, M %lld)",
                     (long long)d->ld_scale_a, (long long)p->m);
            return 1;
        }
        const int64_t kb = (k + 127) / 128, kb4 = (kb + 3) / 4 * 4, nbk = (p->n + 127) / 128;
        const size_t bytes = (size_t)(kb4 * nbk) * sizeof(float);
        float *re = calloc((size_t)(kb4 * nbk), sizeof *re);
        cudaError_t e = re ? cudaSuccess : cudaErrorMemoryAllocation;
        /* tilekit: n-block i, k-block j at [i + j * ld_scale_b]; cuBLASLt: at [j + i * kb4] */
        for (int64_t i = 0; re && i < nbk; i++)
            for (int64_t j = 0; j < kb; j++)
                re[j + i * kb4] = host_scale_b[i + j * d->ld_scale_b];
        if (!e && bytes > x->blk_cap) {
            cudaFree(x->blk);
            x->blk = NULL;
            x->blk_cap = 0;
            if (!(e = cudaMalloc((void **)&x->blk, bytes)))
                x->blk_cap = bytes;
        }
        if (!e)
            e = cudaMemcpy(x->blk, re, bytes, cudaMemcpyHostToDevice);
        free(re);
        if (e) {
            snprintf(why, len, "cuBLASLt's block scales: %s", cudaGetErrorString(e));
            cudaGetLastError();
            return -1;
        }
        sa = x->blk;
    }
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cudaDataType_t ct = p->c_type == TK_F32 ? CUDA_R_32F : CUDA_R_16BF;
    cublasStatus_t s = cublasLtMatmulDescCreate(&x->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    SET(CUBLASLT_MATMUL_DESC_TRANSA, ta);
    SET(CUBLASLT_MATMUL_DESC_TRANSB, tb);
    SET(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, mode_a);
    SET(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, mode_b);
    SET(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, sa);
    SET(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, sb);
    if (!s) s = layout(&x->la, lt_type(fa), k, m, lda);   /* stored K x M, transposed to M x K */
    if (!s) s = layout(&x->lb, lt_type(fb), k, n, ldb);
    if (!s) s = layout(&x->lc, ct, m, n, p->ldc);
    if (s) {
        snprintf(why, len, "cuBLASLt descriptors: %s", cublasLtGetStatusString(s));
        release(x);
        return -1;
    }
    cublasLtMatmulPreference_t pref = NULL;
    size_t ws = WORKSPACE_BYTES;
    int found = 0;
    s = cublasLtMatmulPreferenceCreate(&pref);
    if (!s) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (!s)
        s = cublasLtMatmulAlgoGetHeuristic(x->h, x->op, x->la, x->lb, x->lc, x->lc, pref, 1, &x->algo, &found);
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (s || !found) {
        snprintf(why, len, "cuBLASLt has no FP8 matmul for it (%s x %s, scale %s, C %s, lda %lld, ldb %lld): %s",
                 fa == TK_FP8_E4M3 ? "e4m3" : "e5m2", fb == TK_FP8_E4M3 ? "e4m3" : "e5m2",
                 tk_lab_scale_mode_name(d->scale_mode), p->c_type == TK_F32 ? "fp32" : "bf16", (long long)lda,
                 (long long)ldb, s ? cublasLtGetStatusString(s) : "its heuristic offers no algorithm");
        release(x);
        return 1;
    }
    x->alpha = p->alpha;
    x->beta = p->beta;
    x->a = la_ptr;
    x->b = lb_ptr;
    x->c = p->c;
    x->ready = 1;
    return 0;
}

int tk_lab_cublaslt_run(tk_lab_cublaslt *x, void *stream, char *why, size_t len)
{
    if (!x->ready) {
        snprintf(why, len, "cuBLASLt: nothing prepared");
        return -1;
    }
    cublasStatus_t s = cublasLtMatmul(x->h, x->op, &x->alpha, x->a, x->la, x->b, x->lb, &x->beta, x->c, x->lc, x->c,
                                      x->lc, &x->algo.algo, x->ws, WORKSPACE_BYTES, (cudaStream_t)stream);
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    snprintf(why, len, "cublasLtMatmul: %s", cublasLtGetStatusString(s));
    return -1;
}
