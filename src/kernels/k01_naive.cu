/* k01_naive - one thread per element of C, fp32 accumulation.
 *
 * The always-correct fallback: any M, N, K, every layout and op, any
 * alignment and leading dimension, sm_80 and newer; batched and grouped
 * products too (k01_grouped_kernel), the reference of their fast kernels. Each thread walks a row
 * of op(A) and a column of op(B) straight from global memory; a 16x16 block
 * of threads lets the 16 threads of a half-warp that share a row of C read
 * neighbouring elements of B (coalesced for op_b = N). Grid-stride loops
 * cover shapes beyond the grid limits.
 *
 * Epilogues (tk_epi_args; issue 39): every kind and activation, the
 * formulas of tilekit.h applied in fp32 to the fp32 dot products, rounded
 * once to c_type (src/tiles/epi_formula.cuh's per-element pieces, which
 * k40, k20 and k30 apply too; k01_epi_kernel: one thread per element of D; for GATED
 * two dot products a thread, for GATED_BACKWARD one thread writes columns
 * j and N + j). bias_grad: k01_bias_grad_kernel, one thread per column of
 * D, recomputes the column's values row by row in row order (the same
 * function as k01_epi_kernel, so the same fp32 values) and sums them in
 * fp32: slow, deterministic. It runs before k01_epi_kernel because D may be
 * C (in place) and the values read C when beta != 0.
 *
 * FP8 operands (tk_fp8_args; issue 40): k01_fp8_kernel, one thread per
 * element of C, the codes decoded to fp32 (exact), products summed in fp32
 * by fma; TK_SCALE_BLOCK scales each 128-deep k-block's sum by its two
 * scales before adding it, the others scale the whole sum once. Many FP8
 * products (TK_GROUP_ROWS, _BATCHED): k01_fp8_grouped_kernel, the same
 * rows with product z's B, C and scales (fp8.c's resolved strides).
 *
 * Tile configuration: BM = BN = 16 (one thread per element), no shared memory.
 * Figure: far below cuBLAS by design; see the README table.
 * Reproduce: build/tilekit bench --kernel k01_naive
 */
#include <stdio.h>
#include "../lib/kernel.h"
#include "../lib/group.h"
#include "../tiles/epilogue.cuh"
#include "../tiles/epi_formula.cuh"
#include "../tiles/fp8.cuh"

#define NAIVE_BLOCK 16
#define NAIVE_GRAD_THREADS 256   /* k01_bias_grad_kernel's block: one thread a column */

/* Rows i0 .. i1-1 of C = alpha * op(A)[:, k0:k1] op(B)[k0:k1, :] + beta * C,
 * grid-strided over the block's x and y. */
static __device__ __forceinline__ void naive_rows(const tk_args *p, const uint16_t *A, const uint16_t *B, void *C,
                                                  int64_t i0, int64_t i1, int64_t k0, int64_t k1)
{
    /* Strides of op(A)(i, kk) and op(B)(kk, j) in elements. */
    int64_t a_si = p->op_a == TK_OP_N ? p->lda : 1, a_sk = p->op_a == TK_OP_N ? 1 : p->lda;
    int64_t b_sk = p->op_b == TK_OP_N ? p->ldb : 1, b_sj = p->op_b == TK_OP_N ? 1 : p->ldb;
    for (int64_t i = i0 + (int64_t)blockIdx.y * NAIVE_BLOCK + threadIdx.y; i < i1; i += (int64_t)gridDim.y * NAIVE_BLOCK)
        for (int64_t j = (int64_t)blockIdx.x * NAIVE_BLOCK + threadIdx.x; j < p->n;
             j += (int64_t)gridDim.x * NAIVE_BLOCK) {
            float acc = 0.0f;
            for (int64_t kk = k0; kk < k1; kk++)
                acc = fmaf(tk_bf16_to_f32(A[i * a_si + kk * a_sk]), tk_bf16_to_f32(B[kk * b_sk + j * b_sj]), acc);
            tk_epilogue_store(C, i * p->ldc + j, p->c_type, acc, p->alpha, p->beta);
        }
}

/* ---- epilogues ---- */

/* The fp32 dot product of row i of op(A) and column j of op(B), B at Bp
 * (B itself, or GATED's b_up) with B's op and ldb; 0 for K == 0. */
static __device__ __forceinline__ float naive_dot(const tk_args *p, const uint16_t *Bp, int64_t i, int64_t j)
{
    const uint16_t *A = (const uint16_t *)p->a;
    int64_t a_si = p->op_a == TK_OP_N ? p->lda : 1, a_sk = p->op_a == TK_OP_N ? 1 : p->lda;
    int64_t b_sk = p->op_b == TK_OP_N ? p->ldb : 1, b_sj = p->op_b == TK_OP_N ? 1 : p->ldb;
    float acc = 0.0f;
    for (int64_t kk = 0; kk < p->k; kk++)
        acc = fmaf(tk_bf16_to_f32(A[i * a_si + kk * a_sk]), tk_bf16_to_f32(Bp[kk * b_sk + j * b_sj]), acc);
    return acc;
}

/* v + beta * C's element (i, j) (epi_formula.cuh). */
static __device__ __forceinline__ float naive_residual(const tk_args *p, int64_t i, int64_t j, float v)
{
    return tk_epi_residual(p->c, p->ldc, p->c_type, p->beta, i, j, v);
}

/* P = alpha * dot, rounded as written (__fmul_rn is never contracted into
 * an fma: every kernel on epi_formula.cuh gets the same bits). */
static __device__ __forceinline__ float naive_p(const tk_args *p, const uint16_t *Bp, int64_t i, int64_t j)
{
    return __fmul_rn(p->alpha, naive_dot(p, Bp, i, j));
}

/* D's element (i, j) in fp32 before its rounding: tilekit.h's formula of
 * e->kind (j < out_cols; epi_formula.cuh's pieces). With store_aux, the
 * forward kinds also store z (bf16) where e->aux is set;
 * k01_bias_grad_kernel passes 0 (it stores nothing but the sums). */
static __device__ __forceinline__ float naive_epi_value(const tk_args *p, const tk_epi_args *e, int64_t i,
                                                        int64_t j, int store_aux)
{
    const uint16_t *B = (const uint16_t *)p->b;
    switch (e->kind) {
    case TK_EPI_BIAS_ACT:
        return naive_residual(p, i, j, tk_epi_bias_act(e, naive_p(p, B, i, j), i, j, store_aux));
    case TK_EPI_GATED: {
        float Pg = naive_p(p, B, i, j), Pu = naive_p(p, (const uint16_t *)e->b_up, i, j);
        return naive_residual(p, i, j, tk_epi_gated(e, Pg, Pu, i, j, p->n / 2, store_aux));
    }
    case TK_EPI_BACKWARD:
        return naive_residual(p, i, j, tk_epi_backward(e, naive_p(p, B, i, j), i, j));
    default: {   /* TK_EPI_GATED_BACKWARD: column j < 2N from P[i, j mod N]; beta is 0 */
        int64_t jn = j < p->n ? j : j - p->n;
        return tk_epi_gated_grad(e, naive_p(p, B, i, jn), i, jn, j >= p->n);
    }
    }
}

/* One thread per element (i, j) of D (GATED_BACKWARD: per (i, j < N),
 * writing columns j and N + j, which share the dot product). */
static __global__ void k01_epi_kernel(tk_args p, tk_epi_args e)
{
    const int64_t cols = e.kind == TK_EPI_GATED_BACKWARD ? p.n : e.out_cols;
    for (int64_t i = (int64_t)blockIdx.y * NAIVE_BLOCK + threadIdx.y; i < p.m; i += (int64_t)gridDim.y * NAIVE_BLOCK)
        for (int64_t j = (int64_t)blockIdx.x * NAIVE_BLOCK + threadIdx.x; j < cols;
             j += (int64_t)gridDim.x * NAIVE_BLOCK) {
            if (e.kind == TK_EPI_GATED_BACKWARD) {
                float P = naive_p(&p, (const uint16_t *)p.b, i, j);
                tk_epi_store_d(&e, p.c_type, i, j, tk_epi_gated_grad(&e, P, i, j, 0));
                tk_epi_store_d(&e, p.c_type, i, p.n + j, tk_epi_gated_grad(&e, P, i, j, 1));
            } else {
                tk_epi_store_d(&e, p.c_type, i, j, naive_epi_value(&p, &e, i, j, 1));
            }
        }
}

/* bias_grad[j] = the sum over rows 0, 1, ..., M-1 of D's fp32 values in
 * column j (naive_epi_value: the values k01_epi_kernel rounds), in that
 * order: the same bits every run. */
static __global__ void k01_bias_grad_kernel(tk_args p, tk_epi_args e)
{
    for (int64_t j = (int64_t)blockIdx.x * NAIVE_GRAD_THREADS + threadIdx.x; j < e.out_cols;
         j += (int64_t)gridDim.x * NAIVE_GRAD_THREADS) {
        float sum = 0.0f;
        for (int64_t i = 0; i < p.m; i++)
            sum += naive_epi_value(&p, &e, i, j, 0);
        e.bias_grad[j] = sum;
    }
}

static __global__ void k01_naive_kernel(tk_args p)
{
    naive_rows(&p, (const uint16_t *)p.a, (const uint16_t *)p.b, p.c, 0, p.m, 0, p.k);
}

/* Many products (tk_group_args): product or group z on grid z, its range
 * from the offsets (group.h: a bad one is skipped and reported). */
static __global__ void k01_grouped_kernel(tk_args p, tk_group_args g)
{
    const size_t cb = p.c_type == TK_F32 ? 4 : 2;
    for (int64_t z = blockIdx.z; z < g.count; z += gridDim.z) {
        int64_t lo, hi;
        if (!tk_group_range(g.kind, g.offs, (int)z, g.kind == TK_GROUP_K ? p.k : p.m, &lo, &hi)) {
            tk_group_bad(g.error);
            continue;
        }
        const int per_a = g.kind == TK_GROUP_BATCHED || g.kind == TK_GROUP_MASKED;
        const uint16_t *A = (const uint16_t *)p.a + (per_a ? z * g.stride_a : 0);
        const uint16_t *B = (const uint16_t *)p.b + (g.kind != TK_GROUP_K ? z * g.stride_b : 0);
        void *C = (char *)p.c + (g.kind != TK_GROUP_ROWS ? z * g.stride_c : 0) * cb;
        if (g.kind == TK_GROUP_K)
            naive_rows(&p, A, B, C, 0, p.m, lo, hi);
        else
            naive_rows(&p, A, B, C, lo, hi, 0, p.k);
    }
}

/* ---- FP8 operands ---- */

/* Rows i0 .. i1-1 of C from A, B and their scales sa, sb (one product's:
 * the problem's own, or product z's of many). */
static __device__ __forceinline__ void naive_fp8_rows(const tk_args *p, const tk_fp8_args *f, const uint8_t *A,
                                                      const uint8_t *B, void *C, const float *sa, const float *sb,
                                                      int64_t i0, int64_t i1)
{
    const int64_t a_si = p->op_a == TK_OP_N ? p->lda : 1, a_sk = p->op_a == TK_OP_N ? 1 : p->lda;
    const int64_t b_sk = p->op_b == TK_OP_N ? p->ldb : 1, b_sj = p->op_b == TK_OP_N ? 1 : p->ldb;
    for (int64_t i = i0 + (int64_t)blockIdx.y * NAIVE_BLOCK + threadIdx.y; i < i1; i += (int64_t)gridDim.y * NAIVE_BLOCK)
        for (int64_t j = (int64_t)blockIdx.x * NAIVE_BLOCK + threadIdx.x; j < p->n;
             j += (int64_t)gridDim.x * NAIVE_BLOCK) {
            float acc = 0.0f;
            for (int64_t k0 = 0; k0 < p->k; k0 += 128) {
                const int64_t k1 = k0 + 128 < p->k ? k0 + 128 : p->k;
                float part = 0.0f;
                for (int64_t kk = k0; kk < k1; kk++)
                    part = fmaf(tk_fp8_to_f32(A[i * a_si + kk * a_sk], f->fa), tk_fp8_to_f32(B[kk * b_sk + j * b_sj], f->fb),
                                part);
                if (f->mode == TK_SCALE_BLOCK)   /* row i and n-block j / 128 at k-block k0 / 128 */
                    part *= sa[i + k0 / 128 * f->ld_sa] * sb[j / 128 + k0 / 128 * f->ld_sb];
                acc += part;
            }
            if (f->mode == TK_SCALE_TENSOR)
                acc *= sa[0] * sb[0];
            else if (f->mode == TK_SCALE_ROW)
                acc *= sa[i] * sb[j];
            tk_epilogue_store(C, i * p->ldc + j, p->c_type, acc, p->alpha, p->beta);
        }
}

static __global__ void k01_fp8_kernel(tk_args p, tk_fp8_args f)
{
    naive_fp8_rows(&p, &f, (const uint8_t *)p.a, (const uint8_t *)p.b, p.c, f.sa, f.sb, 0, p.m);
}

/* Many FP8 products (TK_GROUP_ROWS, TK_GROUP_BATCHED; fp8.c refuses the
 * others): product or group z on grid z, as k01_grouped_kernel, with its
 * scales at sa + z * sstride_a and sb + z * sstride_b (fp8.c resolved the
 * strides: 0 where an operand and its scales are shared). ROWS' rows keep
 * their index in A, C and scale_a: a group's rows read their own scales. */
static __global__ void k01_fp8_grouped_kernel(tk_args p, tk_fp8_args f, tk_group_args g)
{
    const size_t cb = p.c_type == TK_F32 ? 4 : 2;
    for (int64_t z = blockIdx.z; z < g.count; z += gridDim.z) {
        int64_t lo, hi;
        if (!tk_group_range(g.kind, g.offs, (int)z, p.m, &lo, &hi)) {
            tk_group_bad(g.error);
            continue;
        }
        const uint8_t *A = (const uint8_t *)p.a + z * g.stride_a;   /* ROWS: stride_a is 0 */
        const uint8_t *B = (const uint8_t *)p.b + z * g.stride_b;
        void *C = (char *)p.c + (g.kind == TK_GROUP_BATCHED ? z * g.stride_c : 0) * cb;
        naive_fp8_rows(&p, &f, A, B, C, f.sa + z * f.sstride_a, f.sb + z * f.sstride_b, lo, hi);
    }
}

static tk_status naive_supports(const tk_kernel *k, const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)k; (void)a; (void)dev; (void)why; (void)len;
    return TK_SUCCESS;
}

static void naive_resources(const tk_kernel *k, const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)k; (void)dev;
    r->func = a && a->fp8  ? (a->grp ? (const void *)k01_fp8_grouped_kernel : (const void *)k01_fp8_kernel)
            : a && a->grp ? (const void *)k01_grouped_kernel
            : a && a->epi ? (const void *)k01_epi_kernel : (const void *)k01_naive_kernel;
    r->threads = NAIVE_BLOCK * NAIVE_BLOCK;
    r->dyn_smem = 0;
}

static tk_status naive_launch_error(char *why, size_t len)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "launch: %s", cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

static unsigned naive_grid(int64_t blocks)
{
    return (unsigned)(blocks < 1 ? 1 : blocks < 65535 ? blocks : 65535);
}

/* An epilogue: bias_grad's sums first (they read C, which D may be), then
 * D and aux. */
static tk_status naive_launch_epi(const tk_args *a, cudaStream_t stream, char *why, size_t len)
{
    const tk_epi_args *e = a->epi;
    if (e->bias_grad) {
        k01_bias_grad_kernel<<<naive_grid((e->out_cols + NAIVE_GRAD_THREADS - 1) / NAIVE_GRAD_THREADS),
                               NAIVE_GRAD_THREADS, 0, stream>>>(*a, *e);
        tk_status st = naive_launch_error(why, len);
        if (st)
            return st;
    }
    int64_t cols = e->kind == TK_EPI_GATED_BACKWARD ? a->n : e->out_cols;
    dim3 grid(naive_grid((cols + NAIVE_BLOCK - 1) / NAIVE_BLOCK), naive_grid((a->m + NAIVE_BLOCK - 1) / NAIVE_BLOCK));
    k01_epi_kernel<<<grid, dim3(NAIVE_BLOCK, NAIVE_BLOCK), 0, stream>>>(*a, *e);
    return naive_launch_error(why, len);
}

static tk_status naive_launch(const tk_kernel *k, const tk_args *a, const tk_device *dev, cudaStream_t stream,
                              char *why, size_t len)
{
    (void)k; (void)dev;
    if (a->epi)
        return naive_launch_epi(a, stream, why, len);
    int64_t gx = (a->n + NAIVE_BLOCK - 1) / NAIVE_BLOCK, gy = (a->m + NAIVE_BLOCK - 1) / NAIVE_BLOCK;
    if (a->grp && a->grp->kind == TK_GROUP_ROWS)   /* the mean group's rows; larger groups grid-stride */
        gy = (a->m / a->grp->count + NAIVE_BLOCK - 1) / NAIVE_BLOCK;
    dim3 grid(naive_grid(gx), naive_grid(gy), a->grp ? naive_grid(a->grp->count) : 1);
    if (a->fp8 && a->grp)
        k01_fp8_grouped_kernel<<<grid, dim3(NAIVE_BLOCK, NAIVE_BLOCK), 0, stream>>>(*a, *a->fp8, *a->grp);
    else if (a->fp8)
        k01_fp8_kernel<<<grid, dim3(NAIVE_BLOCK, NAIVE_BLOCK), 0, stream>>>(*a, *a->fp8);
    else if (a->grp)
        k01_grouped_kernel<<<grid, dim3(NAIVE_BLOCK, NAIVE_BLOCK), 0, stream>>>(*a, *a->grp);
    else
        k01_naive_kernel<<<grid, dim3(NAIVE_BLOCK, NAIVE_BLOCK), 0, stream>>>(*a);
    return naive_launch_error(why, len);
}

/* The family's functions (src/kernels/table.def: its configuration). */
extern "C" const tk_family_ops tk_ops_k01 = { naive_supports, naive_resources, naive_launch, NULL, NULL };
