/* k10_4w_128x128_k32 - seed 002's kernel: 128x128 block, four warps,
 * K-step 32, coalesced global -> shared loads.
 *
 * Reproduces: the kernel of seed 002: k08's warp layout (warp_row =
 * warp / 2, warp_col = warp % 2; A slices warp_row and warp_row + 2, B^T
 * slices warp_col and warp_col + 2; four 32x32 accumulators, mma_ABt) with
 * a 32-wide K-step, and the loads the seed's discussion arrived at:
 * consecutive threads read consecutive 16-byte pieces of a row, so a warp
 * reads whole rows -- the seed's loader had every 4 lanes jump a full row.
 * Each step loads the four 32x32 register tiles whole (subtile_inplace of
 * the 128x32 shared tiles) and runs the four mma_ABt, with no register
 * double buffer, as in the seed.
 * What changed from k09_8w_128x128_abt, and why: back to four warps, half
 * the K-step (half the shared memory: 18 KB, so more blocks fit per SM), the
 * register double buffer dropped; this is the baseline the K_UNROLL
 * experiment (k11) changes.
 * What differs from the seed: the seed had no barrier between the last
 * read of a tile and the next load into it; a second barrier per step
 * closes that race. Edges are zero-filled / bounded, so any M, N, K works.
 *
 * Tile configuration: BM = BN = 128, BK = 32, 4 warps (128 threads), each
 * owning four interleaved 32x32 accumulators; shared memory 2 x 128 x 40
 * bf16 = 20480 bytes. B stored N x K (op_b T, mma_ABt), as in the seed.
 * Figure: not yet measured.
 * Reproduce: build/tilekit bench --kernel k10_4w_128x128_k32
 */
#include "host/kernel.h"
#include "tiles/tiles.cuh"
#include "tiles/launch.cuh"

#define BM 128
#define BN 128
#define BK 32
#define REG_BLOCK (BM / 4)
#define NWARPS 4
#define NTHREADS (NWARPS * TK_WARP_THREADS)

typedef struct k10_smem {
    TK_ST_BF(a, BM, BK);
    TK_ST_BF(b, BN, BK);   /* B^T: N x K */
} k10_smem;
TK_SMEM_CHECK(k10_smem);

static __global__ void __launch_bounds__(NTHREADS) k10_kernel(tk_args p)
{
    k10_smem *sm = TK_SMEM(k10_smem);
    const tk_gl ga = tk_gl_make(p.a, p.m, p.k, p.lda);
    const tk_gl gb = tk_gl_make(p.b, p.n, p.k, p.ldb);
    const int row = blockIdx.y, col = blockIdx.x;
    const int warp = tk_warpid(), warp_row = warp / 2, warp_col = warp % 2;

    TK_RT_FL(acc[4], REG_BLOCK, REG_BLOCK);
#pragma unroll
    for (int i = 0; i < 4; i++)
        tk_zero(acc[i]);

    const int ktiles = (int)tk_ceil_div(p.k, BK);
    for (int tile = 0; tile < ktiles; tile++) {
        tk_load_g2s(TK_TILE(sm->a), ga, row, tile, threadIdx.x, NTHREADS);
        tk_load_g2s(TK_TILE(sm->b), gb, col, tile, threadIdx.x, NTHREADS);
        __syncthreads();   /* the tiles are complete */
        TK_RT_BF(a[2], REG_BLOCK, BK);
        TK_RT_BF(b[2], REG_BLOCK, BK);
#pragma unroll
        for (int s = 0; s < 2; s++) {
            tk_load_rt(a[s], TK_SUBTILE(sm->a, REG_BLOCK, BK, warp_row + 2 * s, 0));
            tk_load_rt(b[s], TK_SUBTILE(sm->b, REG_BLOCK, BK, warp_col + 2 * s, 0));
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
            tk_mma_ABt(acc[i], a[i / 2], b[i % 2], acc[i]);
        __syncthreads();   /* every warp is done reading before the next load overwrites */
    }

    const tk_gl_out out = tk_gl_out_make(p.c, p.m, p.n, p.ldc, p.c_type);
#pragma unroll
    for (int i = 0; i < 4; i++)
        tk_store_g(out, acc[i], row * 4 + (i / 2) * 2 + warp_row, col * 4 + (i % 2) * 2 + warp_col, p.alpha, p.beta);
}

static tk_status k10_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)dev;
    return tk_tiles_supports(a, TK_OP_T, BM, 1, why, len);
}

static void k10_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)a; (void)dev;
    r->func = (const void *)k10_kernel;
    r->threads = NTHREADS;
    r->dyn_smem = sizeof(k10_smem);
}

static tk_status k10_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    (void)dev;
    tk_status st = tk_tiles_set_smem((const void *)k10_kernel, sizeof(k10_smem), why, len);
    if (st)
        return st;
    k10_kernel<<<tk_tiles_grid(a, BM, BN), NTHREADS, sizeof(k10_smem), stream>>>(*a);
    return tk_tiles_launched(why, len);
}

extern "C" const tk_kernel tk_kernel_k10_4w_128x128_k32 = {
    "k10_4w_128x128_k32", "seed 002: 4 warps on 128x128, K-step 32, coalesced loads, mma_ABt",
    80, BM, BN, REG_BLOCK, REG_BLOCK, 0,
    k10_supports, k10_resources, k10_launch,
};
