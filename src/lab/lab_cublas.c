/* lab_cublas.c - the cuBLAS yardsticks of batched and grouped cases (lab.h):
 * a host loop of cublasGemmEx, one call per group or product (the lab
 * knows the sizes on the host), and one cublasGemmGroupedBatchedEx call
 * (cuBLAS 12.5 and newer) with a cuBLAS group per group. On the lab's own
 * cuBLAS handle, not through tilekit's "cublas" kernel: the loop then
 * pays cuBLAS's launch cost alone, as a caller's loop would. */
#include <stdlib.h>
#include <string.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include "lab.h"

/* cublasGemmGroupedBatchedEx came with cuBLAS 12.5 (CUDA 12.5). */
#define HAVE_GROUPED_BATCHED (CUBLAS_VERSION >= 120500)

/* One cuBLAS product: a row-major problem is the column-major C^T =
 * op(B)^T op(A)^T, so B goes first with each op unchanged; a column-major
 * one goes as it is. */
typedef struct call {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc;
    const void *a, *b;
    void *c;
} call;

struct tk_lab_cublas {
    cublasHandle_t h;
    cudaStream_t stream;
    float alpha, beta;
    cudaDataType_t ctype;
    int ncalls, cap;
    call *calls;                /* the products with work, in group order */
    int batched;                /* one cuBLAS group of every product (BATCHED), else one per call */
    /* cublasGemmGroupedBatchedEx's arguments: host arrays per cuBLAS group,
     * device arrays of pointers per product */
    cublasOperation_t *ta, *tb;
    int *m, *n, *k, *lda, *ldb, *ldc, *size;
    float *alphas, *betas;
    const void **hptr;          /* A, B, C pointers of every product, one after the other */
    int stride;                 /* pointers from the A's to the B's, and to the C's: the case's count */
    void **dptr;                /* their device copy */
    size_t dptr_cap;
};

int tk_lab_cublas_open(tk_lab_cublas **out, void *stream, char *why, size_t len)
{
    tk_lab_cublas *x = calloc(1, sizeof *x);
    *out = NULL;
    if (!x) {
        snprintf(why, len, "out of host memory");
        return -1;
    }
    cublasStatus_t s = cublasCreate(&x->h);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetStream(x->h, (cudaStream_t)stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, len, "cublasCreate: %s", cublasGetStatusString(s));
        tk_lab_cublas_close(x);
        return -1;
    }
    x->stream = (cudaStream_t)stream;
    *out = x;
    return 0;
}

static void free_arrays(tk_lab_cublas *x)
{
    free(x->calls); free(x->ta); free(x->tb); free(x->m); free(x->n); free(x->k); free(x->lda); free(x->ldb);
    free(x->ldc); free(x->size); free(x->alphas); free(x->betas); free(x->hptr);
    x->calls = NULL;
    x->ta = x->tb = NULL;
    x->m = x->n = x->k = x->lda = x->ldb = x->ldc = x->size = NULL;
    x->alphas = x->betas = NULL;
    x->hptr = NULL;
    x->cap = 0;
}

void tk_lab_cublas_close(tk_lab_cublas *x)
{
    if (!x)
        return;
    if (x->h)
        cublasDestroy(x->h);
    free_arrays(x);
    cudaFree(x->dptr);
    free(x);
}

static void to_call(const tk_gemm_problem *p, call *c)
{
    const cublasOperation_t oa = p->op_a == TK_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t ob = p->op_b == TK_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int row = p->layout == TK_ROW_MAJOR;
    *c = (call){ row ? ob : oa, row ? oa : ob, (int)(row ? p->n : p->m), (int)(row ? p->m : p->n), (int)p->k,
                 (int)(row ? p->ldb : p->lda), (int)(row ? p->lda : p->ldb), (int)p->ldc,
                 row ? p->b : p->a, row ? p->a : p->b, p->c };
}

static int grow(tk_lab_cublas *x, int n)
{
    if (n <= x->cap)
        return 0;
    free_arrays(x);
    const size_t u = (size_t)n;
    x->calls = malloc(u * sizeof *x->calls);
    x->ta = malloc(u * sizeof *x->ta);
    x->tb = malloc(u * sizeof *x->tb);
    x->m = malloc(u * sizeof(int)); x->n = malloc(u * sizeof(int)); x->k = malloc(u * sizeof(int));
    x->lda = malloc(u * sizeof(int)); x->ldb = malloc(u * sizeof(int)); x->ldc = malloc(u * sizeof(int));
    x->size = malloc(u * sizeof(int));
    x->alphas = malloc(u * sizeof(float));
    x->betas = malloc(u * sizeof(float));
    x->hptr = malloc(3 * u * sizeof *x->hptr);
    if (!x->calls || !x->ta || !x->tb || !x->m || !x->n || !x->k || !x->lda || !x->ldb || !x->ldc || !x->size ||
        !x->alphas || !x->betas || !x->hptr) {
        free_arrays(x);
        return -1;
    }
    x->cap = n;
    return 0;
}

int tk_lab_cublas_prepare(tk_lab_cublas *x, const tk_lab_gcase *g, const tk_gemm_desc *d, char *why, size_t len)
{
    if (grow(x, g->count)) {
        snprintf(why, len, "out of host memory for %d cuBLAS calls", g->count);
        return -1;
    }
    const tk_gemm_problem *p = &d->problem;
    x->alpha = p->alpha;
    x->beta = p->beta;
    x->ctype = p->c_type == TK_F32 ? CUDA_R_32F : CUDA_R_16BF;
    x->batched = g->kind == TK_GROUP_BATCHED;
    x->ncalls = 0;
    x->stride = g->count;
    for (int i = 0; i < g->count; i++) {
        tk_lab_gpart pt;
        tk_gemm_problem sub;
        tk_lab_gcase_part(g, d, i, &pt);
        /* no rows or columns: nothing to write. K = 0 stays: C = beta * C. */
        if (pt.m == 0 || pt.n == 0)
            continue;
        tk_lab_gpart_problem(d, &pt, p->a, p->b, p->c, &sub);
        call *c = &x->calls[x->ncalls];
        to_call(&sub, c);
        x->hptr[x->ncalls] = c->a;
        x->hptr[g->count + x->ncalls] = c->b;
        x->hptr[2 * g->count + x->ncalls] = c->c;
        x->ta[x->ncalls] = c->ta; x->tb[x->ncalls] = c->tb;
        x->m[x->ncalls] = c->m; x->n[x->ncalls] = c->n; x->k[x->ncalls] = c->k;
        x->lda[x->ncalls] = c->lda; x->ldb[x->ncalls] = c->ldb; x->ldc[x->ncalls] = c->ldc;
        x->size[x->ncalls] = 1;
        x->alphas[x->ncalls] = x->alpha;
        x->betas[x->ncalls] = x->beta;
        x->ncalls++;
    }
    if (x->batched)   /* one cuBLAS group of every product: the first's parameters serve all */
        x->size[0] = x->ncalls;
    /* the device arrays of pointers: A's, then B's, then C's */
    const size_t bytes = 3 * (size_t)g->count * sizeof(void *);
    cudaError_t e = cudaSuccess;
    if (bytes > x->dptr_cap) {
        cudaFree(x->dptr);
        x->dptr = NULL;
        x->dptr_cap = 0;
        if ((e = cudaMalloc((void **)&x->dptr, bytes)) == cudaSuccess)
            x->dptr_cap = bytes;
    }
    if (!e) e = cudaMemcpyAsync(x->dptr, x->hptr, bytes, cudaMemcpyHostToDevice, x->stream);
    if (!e) e = cudaStreamSynchronize(x->stream);   /* hptr is rewritten by the next prepare */
    if (e) {
        snprintf(why, len, "cuBLAS pointer arrays: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    return 0;
}

int tk_lab_cublas_loop(tk_lab_cublas *x, char *why, size_t len)
{
    for (int i = 0; i < x->ncalls; i++) {
        const call *c = &x->calls[i];
        cublasStatus_t s = cublasGemmEx(x->h, c->ta, c->tb, c->m, c->n, c->k, &x->alpha, c->a, CUDA_R_16BF, c->lda,
                                        c->b, CUDA_R_16BF, c->ldb, &x->beta, c->c, x->ctype, c->ldc,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS) {
            snprintf(why, len, "cublasGemmEx (call %d of %d): %s", i + 1, x->ncalls, cublasGetStatusName(s));
            return -1;
        }
    }
    return 0;
}

int tk_lab_cublas_grouped(tk_lab_cublas *x, char *why, size_t len)
{
#if HAVE_GROUPED_BATCHED
    if (!x->ncalls)
        return 0;
    const int groups = x->batched ? 1 : x->ncalls, stride = x->stride;
    cublasStatus_t s = cublasGemmGroupedBatchedEx(
        x->h, x->ta, x->tb, x->m, x->n, x->k, x->alphas, (const void *const *)x->dptr, CUDA_R_16BF, x->lda,
        (const void *const *)(x->dptr + stride), CUDA_R_16BF, x->ldb, x->betas, x->dptr + 2 * stride, x->ctype,
        x->ldc, groups, x->size, CUBLAS_COMPUTE_32F);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, len, "cublasGemmGroupedBatchedEx: %s", cublasGetStatusName(s));
        return -1;
    }
    return 0;
#else
    snprintf(why, len, "cublasGemmGroupedBatchedEx: not in this cuBLAS (built against %d; it came with 12.5)",
             CUBLAS_VERSION);
    return 1;
#endif
}
