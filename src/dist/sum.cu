/* sum.cu - the reduce-scatter's sum: out = alpha * (P_0 + P_1 + ... +
 * P_{R-1}) + beta * out, the partial products of the R ranks for this
 * rank's rows added in fp32 in rank order, whatever order they arrived in
 * and however they were chunked, then tk_gemm's epilogue (one rounding to
 * C's type; C read only when beta != 0). Memory-bound: each thread adds 4
 * consecutive elements of a row (the partials are row-major rows x n
 * blocks, so a warp reads 512 contiguous bytes of each). */
#include <stdio.h>
#include "dist.h"
#include "../tiles/epilogue.cuh"

#define SUM_THREADS 256
#define SUM_VEC 4

typedef struct sum_params {
    const void *own, *recv;
    int rank, nranks, by_source;
    int64_t rows, n, block;          /* block = rows * n elements */
    int partial_bf16;
    void *c;
    int64_t ldc;
    int col_major;
    tk_dtype c_type;
    float alpha, beta;
} sum_params;

static __device__ __forceinline__ float load_part(const void *base, int64_t idx, int bf16)
{
    return bf16 ? tk_bf16_to_f32(((const uint16_t *)base)[idx]) : ((const float *)base)[idx];
}

static __global__ void sum_kernel(const __grid_constant__ sum_params p)
{
    const int64_t total = p.block;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x * SUM_VEC;
    for (int64_t e0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * SUM_VEC; e0 < total; e0 += stride) {
        float acc[SUM_VEC];
#pragma unroll
        for (int v = 0; v < SUM_VEC; v++)
            acc[v] = 0.0f;
        /* rank order: P_0 first; P_s is the own block for s == rank, else
         * the block received from s: in the recv area at (rank - s) mod R - 1
         * (P2P's ring order) or at s (by_source: a CE window's region) */
        for (int s = 0; s < p.nranks; s++) {
            const int64_t at = p.by_source ? s : (p.rank - s + p.nranks) % p.nranks - 1;
            const void *src = s == p.rank ? p.own : (const char *)p.recv + at * total * (p.partial_bf16 ? 2 : 4);
#pragma unroll
            for (int v = 0; v < SUM_VEC; v++)
                if (e0 + v < total)
                    acc[v] = s == 0 ? load_part(src, e0 + v, p.partial_bf16)
                                    : __fadd_rn(acc[v], load_part(src, e0 + v, p.partial_bf16));
        }
#pragma unroll
        for (int v = 0; v < SUM_VEC; v++) {
            const int64_t e = e0 + v;
            if (e < total) {
                const int64_t i = e / p.n, j = e - i * p.n;
                tk_epilogue_store(p.c, p.col_major ? i + j * p.ldc : i * p.ldc + j, p.c_type, acc[v], p.alpha, p.beta);
            }
        }
    }
}

extern "C" cudaError_t tkd_launch_sum(const tkd_sum_args *a, cudaStream_t stream)
{
    sum_params p;
    p.own = a->own;
    p.recv = a->recv;
    p.rank = a->rank;
    p.nranks = a->nranks;
    p.by_source = a->by_source;
    p.rows = a->rows;
    p.n = a->n;
    p.block = a->rows * a->n;
    p.partial_bf16 = a->partial_type == TK_BF16;
    p.c = a->c;
    p.ldc = a->ldc;
    p.col_major = a->layout == TK_COL_MAJOR;
    p.c_type = a->c_type;
    p.alpha = a->alpha;
    p.beta = a->beta;
    if (p.block <= 0)
        return cudaSuccess;
    int dev = 0, sms = 1;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev))
        sms = 132;
    const int64_t want = (p.block + SUM_THREADS * SUM_VEC - 1) / (SUM_THREADS * SUM_VEC);
    const int64_t cap = (int64_t)sms * 8;
    sum_kernel<<<(unsigned)(want < cap ? want : cap), SUM_THREADS, 0, stream>>>(p);
    return cudaGetLastError();
}
