/* k02_warp_64x64 - seed 000's "clean code" kernel: one warp per 64x64 block.
 *
 * Reproduces: the user's second kernel in seed 000 (BLOCK_SIZE 64,
 * M_BLOCK = N_BLOCK = 1, NUM_WORKERS 1): a single warp loads a 64x64 tile of
 * A and of B into shared memory, multiplies them into a 64x64 fp32
 * accumulator held in its registers, and steps along K by 64.
 * What changed from k01_naive, and why: tensor cores (mma.sync m16n8k16)
 * instead of one FMA per thread, fed from shared memory through ldmatrix.
 * What differs from the seed, and why: the seed loaded the whole 64x64
 * A and B register tiles at once; on NVIDIA that is 64 + 64 registers per
 * lane on top of the 128 of the accumulator (over the 255 limit), so the
 * warp walks the 64-wide shared tiles in four K slices of 16 (same data,
 * same shared-memory traffic). The seed's 32 KB C_tiles and tic/toc
 * leftovers, which it never used, are dropped. Edges: zero-filled loads,
 * bounded stores, so any M, N, K works.
 *
 * Tile configuration: BM = BN = 64, BK = 64, 1 warp (32 threads),
 * WM = WN = 64; shared memory 2 x 64 x 72 bf16 = 18432 bytes; B stored K x N
 * (op_b N, mma_AB), as in the seed.
 * Figure: not yet measured.
 * Reproduce: build/tilekit bench --kernel k02_warp_64x64
 */
#include "host/kernel.h"
#include "tiles/tiles.cuh"
#include "tiles/launch.cuh"

#define BM 64
#define BN 64
#define BK 64
#define NTHREADS 32

typedef struct k02_smem {
    TK_ST_BF(a, BM, BK);
    TK_ST_BF(b, BK, BN);
} k02_smem;
TK_SMEM_CHECK(k02_smem);

static __global__ void __launch_bounds__(NTHREADS) k02_kernel(tk_args p)
{
    k02_smem *sm = TK_SMEM(k02_smem);
    const tk_gl ga = tk_gl_make(p.a, p.m, p.k, p.lda);
    const tk_gl gb = tk_gl_make(p.b, p.k, p.n, p.ldb);
    const int row = blockIdx.y, col = blockIdx.x, lane = tk_laneid();

    TK_RT_FL(acc, BM, BN);
    tk_zero(acc);

    const int ktiles = (int)tk_ceil_div(p.k, BK);
    for (int tile = 0; tile < ktiles; tile++) {
        tk_load_g2s(TK_TILE(sm->a), ga, row, tile, lane, NTHREADS);
        tk_load_g2s(TK_TILE(sm->b), gb, tile, col, lane, NTHREADS);
        __syncwarp();   /* the block is one warp: a warp barrier orders its shared accesses */
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            TK_RT_BF(a, BM, 16);
            TK_RT_BF_COL(b, 16, BN);
            tk_load_rt(a, TK_SUBTILE(sm->a, BM, 16, 0, kk));
            tk_load_rt_col(b, TK_SUBTILE(sm->b, 16, BN, kk, 0));
            tk_mma_AB(acc, a, b, acc);
        }
        __syncwarp();   /* all lanes are done reading before the next tile overwrites */
    }
    tk_store_g(tk_gl_out_make(p.c, p.m, p.n, p.ldc, p.c_type), acc, row, col, p.alpha, p.beta);
}

static tk_status k02_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)dev;
    return tk_tiles_supports(a, TK_OP_N, BM, 1, why, len);
}

static void k02_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)a; (void)dev;
    r->func = (const void *)k02_kernel;
    r->threads = NTHREADS;
    r->dyn_smem = sizeof(k02_smem);
}

static tk_status k02_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    (void)dev;
    tk_status st = tk_tiles_set_smem((const void *)k02_kernel, sizeof(k02_smem), why, len);
    if (st)
        return st;
    k02_kernel<<<tk_tiles_grid(a, BM, BN), NTHREADS, sizeof(k02_smem), stream>>>(*a);
    return tk_tiles_launched(why, len);
}

extern "C" const tk_kernel tk_kernel_k02_warp_64x64 = {
    "k02_warp_64x64", "seed 000 clean code: 1 warp per 64x64 block, K-step 64, mma_AB (op_b N)",
    80, BM, BN, 64, 64, 0,
    k02_supports, k02_resources, k02_launch,
};
