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
 * Tile configuration: BM = BN = 16 (one thread per element), no shared memory.
 * Figure: far below cuBLAS by design; see the README table.
 * Reproduce: build/tilekit bench --kernel k01_naive
 */
#include <stdio.h>
#include "../lib/kernel.h"
#include "../lib/group.h"
#include "../tiles/epilogue.cuh"

#define NAIVE_BLOCK 16

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

static tk_status naive_supports(const tk_kernel *k, const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)k; (void)a; (void)dev; (void)why; (void)len;
    return TK_SUCCESS;
}

static void naive_resources(const tk_kernel *k, const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)k; (void)dev;
    r->func = a && a->grp ? (const void *)k01_grouped_kernel : (const void *)k01_naive_kernel;
    r->threads = NAIVE_BLOCK * NAIVE_BLOCK;
    r->dyn_smem = 0;
}

static tk_status naive_launch(const tk_kernel *k, const tk_args *a, const tk_device *dev, cudaStream_t stream,
                              char *why, size_t len)
{
    (void)k; (void)dev;
    int64_t gx = (a->n + NAIVE_BLOCK - 1) / NAIVE_BLOCK, gy = (a->m + NAIVE_BLOCK - 1) / NAIVE_BLOCK;
    if (a->grp && a->grp->kind == TK_GROUP_ROWS)   /* the mean group's rows; larger groups grid-stride */
        gy = (a->m / a->grp->count + NAIVE_BLOCK - 1) / NAIVE_BLOCK;
    gy = gy < 1 ? 1 : gy;
    dim3 grid((unsigned)(gx < 65535 ? gx : 65535), (unsigned)(gy < 65535 ? gy : 65535),
              a->grp ? (unsigned)(a->grp->count < 65535 ? a->grp->count : 65535) : 1);
    if (a->grp)
        k01_grouped_kernel<<<grid, dim3(NAIVE_BLOCK, NAIVE_BLOCK), 0, stream>>>(*a, *a->grp);
    else
        k01_naive_kernel<<<grid, dim3(NAIVE_BLOCK, NAIVE_BLOCK), 0, stream>>>(*a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "launch: %s", cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

/* The family's functions (src/kernels/table.def: its configuration). */
extern "C" const tk_family_ops tk_ops_k01 = { naive_supports, naive_resources, naive_launch, NULL, NULL };
