/* k09_8w_128x128_abt - seed 001, the user's direction: eight warps, the
 * four-warp kernel's work split in two halves.
 *
 * Reproduces: the split the user sketched at the end of seed 001: warps 0-3
 * take the warp_row half of k09's work (A slice warp_row, accumulators
 * C_accum[0..1]) and warps 4-7 the warp_row_next half (A slice
 * warp_row + 2, C_accum[2..3]); each warp keeps both B slices and two 32x32
 * accumulators:
 *   half = warp / 4, warp_row = (warp % 4) / 2, warp_col = warp % 2,
 *   C_accum[j] = a_reg * b_reg_j^T  at 32x32 tile
 *   (4*row + 2*half + warp_row, 4*col + 2*j + warp_col).
 * Synchronization is only the block barriers around the shared tiles: no
 * flags in shared memory, no busy-waiting (the seed's rejected first
 * attempt), so nothing can deadlock or read a half-written tile.
 * What changed from k08_4w_128x128_abt, and why: twice the warps on the
 * same block, each with half the accumulators (64 instead of 128 registers),
 * so twice as many warps can hide each other's ldmatrix and MMA latency;
 * each B fragment now feeds one MMA instead of two (more shared-memory
 * reads per MMA). Loads are shared by all 8 warps. Register
 * double-buffering over the K slices as in k09.
 * Edges are zero-filled / bounded, so any M, N, K works.
 *
 * Tile configuration: BM = BN = 128, BK = 64, 8 warps (256 threads), each
 * owning two 32x32 accumulators; shared memory 2 x 128 x 72 bf16 = 36864
 * bytes. B stored N x K (op_b T, mma_ABt), as in the seed.
 * Figure: not yet measured.
 * Reproduce: build/tilekit bench --kernel k09_8w_128x128_abt
 */
#include "host/kernel.h"
#include "tiles/tiles.cuh"
#include "tiles/launch.cuh"

#define BM 128
#define BN 128
#define BK 64
#define REG_BLOCK (BM / 4)     /* the seed's REG_BLOCK: 32 */
#define NWARPS 8
#define NTHREADS (NWARPS * TK_WARP_THREADS)

typedef struct k09_smem {
    TK_ST_BF(a, BM, BK);
    TK_ST_BF(b, BN, BK);   /* B^T: N x K */
} k09_smem;
TK_SMEM_CHECK(k09_smem);

static __global__ void __launch_bounds__(NTHREADS) k09_kernel(tk_args p)
{
    k09_smem *sm = TK_SMEM(k09_smem);
    const tk_gl ga = tk_gl_make(p.a, p.m, p.k, p.lda);
    const tk_gl gb = tk_gl_make(p.b, p.n, p.k, p.ldb);
    const int row = blockIdx.y, col = blockIdx.x;
    const int warp = tk_warpid(), half = warp / 4, warp_row = (warp % 4) / 2, warp_col = warp % 2;
    const int a_slice = warp_row + 2 * half;   /* warp_row or warp_row_next */

    TK_RT_FL(acc[2], REG_BLOCK, REG_BLOCK);
#pragma unroll
    for (int j = 0; j < 2; j++)
        tk_zero(acc[j]);
    /* [buffer] for A; [buffer][slice] for B: slice 0 is row block warp_col, slice 1 two blocks below */
    TK_RT_BF(a[2], REG_BLOCK, 16);
    TK_RT_BF(b[2][2], REG_BLOCK, 16);

    const int ktiles = (int)tk_ceil_div(p.k, BK);
    for (int tile = 0; tile < ktiles; tile++) {
        if (tile > 0)
            __syncthreads();   /* every warp is done reading the previous tiles */
        tk_load_g2s(TK_TILE(sm->a), ga, row, tile, threadIdx.x, NTHREADS);
        tk_load_g2s(TK_TILE(sm->b), gb, col, tile, threadIdx.x, NTHREADS);
        __syncthreads();

        /* prime buffer 0 with K slice 0, then: load slice kk+1, multiply slice kk */
        tk_load_rt(a[0], TK_SUBTILE(sm->a, REG_BLOCK, 16, a_slice, 0));
#pragma unroll
        for (int s = 0; s < 2; s++)
            tk_load_rt(b[0][s], TK_SUBTILE(sm->b, REG_BLOCK, 16, warp_col + 2 * s, 0));
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            const int cur = kk % 2, nxt = (kk + 1) % 2;
            if (kk + 1 < BK / 16) {
                tk_load_rt(a[nxt], TK_SUBTILE(sm->a, REG_BLOCK, 16, a_slice, kk + 1));
#pragma unroll
                for (int s = 0; s < 2; s++)
                    tk_load_rt(b[nxt][s], TK_SUBTILE(sm->b, REG_BLOCK, 16, warp_col + 2 * s, kk + 1));
            }
#pragma unroll
            for (int j = 0; j < 2; j++)
                tk_mma_ABt(acc[j], a[cur], b[cur][j], acc[j]);
        }
    }

    const tk_gl_out out = tk_gl_out_make(p.c, p.m, p.n, p.ldc, p.c_type);
#pragma unroll
    for (int j = 0; j < 2; j++)
        tk_store_g(out, acc[j], row * 4 + half * 2 + warp_row, col * 4 + j * 2 + warp_col, p.alpha, p.beta);
}

static tk_status k09_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)dev;
    return tk_tiles_supports(a, TK_OP_T, BM, 1, why, len);
}

static void k09_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)a; (void)dev;
    r->func = (const void *)k09_kernel;
    r->threads = NTHREADS;
    r->dyn_smem = sizeof(k09_smem);
}

static tk_status k09_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    (void)dev;
    tk_status st = tk_tiles_set_smem((const void *)k09_kernel, sizeof(k09_smem), why, len);
    if (st)
        return st;
    k09_kernel<<<tk_tiles_grid(a, BM, BN), NTHREADS, sizeof(k09_smem), stream>>>(*a);
    return tk_tiles_launched(why, len);
}

extern "C" const tk_kernel tk_kernel_k09_8w_128x128_abt = {
    "k09_8w_128x128_abt", "seed 001 direction: 8 warps on 128x128 (warp_row / warp_row_next halves), K-step 64, mma_ABt",
    80, BM, BN, REG_BLOCK, REG_BLOCK, 0,
    k09_supports, k09_resources, k09_launch,
};
