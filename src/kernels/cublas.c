/* cublas - the vendor reference: cublasGemmEx (batched products:
 * cublasGemmStridedBatchedEx), bf16 inputs, fp32 compute, fp32 or bf16
 * output, every layout. Never auto-picked: it is what tilekit's
 * own kernels are measured against. */
#include <stdio.h>
#include <cublas_v2.h>
#include "../lib/kernel.h"

static tk_status cublas_supports(const tk_kernel *k, const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)k; (void)dev;
    /* cuBLAS takes 32-bit sizes and leading dimensions. */
    if (a->m > INT32_MAX || a->n > INT32_MAX || a->k > INT32_MAX || a->lda > INT32_MAX || a->ldb > INT32_MAX ||
        a->ldc > INT32_MAX) {
        snprintf(why, len, "sizes and leading dimensions must fit in 32 bits for cuBLAS");
        return TK_ERR_NOT_SUPPORTED;
    }
    return TK_SUCCESS;
}

static void cublas_resources(const tk_kernel *k, const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)k; (void)a; (void)dev;
    r->func = NULL;
    r->threads = 0;
    r->dyn_smem = 0;
}

static tk_status cublas_launch(const tk_kernel *k, const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why,
                               size_t len)
{
    (void)k; (void)dev;
    cublasHandle_t h = (cublasHandle_t)a->cublas;
    cublasStatus_t s = cublasSetStream(h, stream);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetWorkspace(h, a->kws, a->kws_bytes);
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
     * stored row-major B read as column-major is already B^T, so each op is
     * passed through unchanged with the operands swapped. */
    const cublasOperation_t ob = a->op_b == TK_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t oa = a->op_a == TK_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cudaDataType_t ct = a->c_type == TK_F32 ? CUDA_R_32F : CUDA_R_16BF;
    if (s == CUBLAS_STATUS_SUCCESS && a->grp)   /* TK_GROUP_BATCHED, the only form it accepts */
        s = cublasGemmStridedBatchedEx(h, ob, oa, (int)a->n, (int)a->m, (int)a->k, &a->alpha, a->b, CUDA_R_16BF,
                                       (int)a->ldb, a->grp->stride_b, a->a, CUDA_R_16BF, (int)a->lda,
                                       a->grp->stride_a, &a->beta, a->c, ct, (int)a->ldc, a->grp->stride_c,
                                       a->grp->count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasGemmEx(h, ob, oa, (int)a->n, (int)a->m, (int)a->k, &a->alpha, a->b, CUDA_R_16BF, (int)a->ldb, a->a,
                         CUDA_R_16BF, (int)a->lda, &a->beta, a->c, ct, (int)a->ldc, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, len, "%s: %s", a->grp ? "cublasGemmStridedBatchedEx" : "cublasGemmEx", cublasGetStatusString(s));
        tk_note_cublas_status((int)s);
        return TK_ERR_CUBLAS;
    }
    return TK_SUCCESS;
}

/* The family's functions (src/kernels/table.def: its one configuration).
 * cuBLAS gets the handle's cuBLAS workspace as kws, not one of its own. */
const tk_family_ops tk_ops_cublas = { cublas_supports, cublas_resources, cublas_launch, NULL, NULL };
