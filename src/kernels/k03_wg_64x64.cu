/* k03_wg_64x64 (entries k03_wg_64x64_k16, k04_wg_64x64_k32, k05_wg_64x64_k64)
 * - seed 000's "starting point": four warps (one warpgroup) on a 64x64 block.
 *
 * Reproduces: the kernel the user calls "my starting point" in seed 000:
 * 4 warps, a 64x64 C block cut into 16x16 sub-tiles, each warp holding four
 * 16x16 accumulators in the interleaved layout
 *   accumulator i -> sub-tile (2*(i/2) + warp_row, 2*(i%2) + warp_col),
 *   warp_row = warp / 2, warp_col = warp % 2,
 * the whole warpgroup loading the A (64 x BK) and B (BK x 64) tiles
 * (G::load), and each warp loading 16x16 sub-tiles (subtile_inplace) into
 * registers for mma_AB. The seed ran it at K-step 64, then tried 16 and
 * reported 140 -> 60 TFLOP/s on its AMD GPU; the three K-steps are three
 * registry entries here (the same code, BK a compile-time parameter) so the
 * effect can be measured on the H100.
 * What changed from k02_warp_64x64, and why: 4 warps instead of 1 (while one
 * warp waits on shared memory or the tensor core, another issues), each
 * owning a quarter of the block's C; the shared tiles are loaded by all
 * 128 threads.
 * What differs from the seed: the seed had one barrier per K-step, so a fast
 * warp could overwrite the shared tiles while a slow one still read them; a
 * second barrier after the compute closes that race. Edges are zero-filled /
 * bounded, so any M, N, K works.
 *
 * Tile configuration: BM = BN = 64, BK = 16 / 32 / 64, 4 warps (128
 * threads), warp tile 32x32 as four interleaved 16x16 accumulators; shared
 * memory (64 x (BK+8) + BK x 72) bf16: 5376 / 9728 / 18432 bytes. B stored
 * K x N (op_b N, mma_AB), as in the seed.
 * Figure: not yet measured.
 * Reproduce: build/tilekit bench --kernel k03_wg_64x64_k16 (k04_wg_64x64_k32, k05_wg_64x64_k64)
 */
#include "host/kernel.h"
#include "tiles/tiles.cuh"
#include "tiles/launch.cuh"

#define BM 64
#define BN 64
#define NWARPS 4
#define NTHREADS (NWARPS * TK_WARP_THREADS)

/* The shared-memory layout for K-step BK. */
#define K03_SMEM(BK)            \
    struct {                    \
        TK_ST_BF(a, BM, BK);    \
        TK_ST_BF(b, BK, BN);    \
    }

/* A template only to stamp out the same kernel for three compile-time
 * K-steps: the tile shapes must be constants for the unrolled loops. */
template <int BK>
static __global__ void __launch_bounds__(NTHREADS) k03_kernel(tk_args p)
{
    typedef K03_SMEM(BK) smem_t;
    TK_SMEM_CHECK(smem_t);
    smem_t *sm = TK_SMEM(smem_t);
    const tk_gl ga = tk_gl_make(p.a, p.m, p.k, p.lda);
    const tk_gl gb = tk_gl_make(p.b, p.k, p.n, p.ldb);
    const int row = blockIdx.y, col = blockIdx.x;
    const int warp = tk_warpid(), warp_row = warp / 2, warp_col = warp % 2;

    TK_RT_FL(acc[4], 16, 16);
#pragma unroll
    for (int i = 0; i < 4; i++)
        tk_zero(acc[i]);

    const int ktiles = (int)tk_ceil_div(p.k, BK);
    for (int tile = 0; tile < ktiles; tile++) {
        tk_load_g2s(TK_TILE(sm->a), ga, row, tile, threadIdx.x, NTHREADS);
        tk_load_g2s(TK_TILE(sm->b), gb, tile, col, threadIdx.x, NTHREADS);
        __syncthreads();   /* the tiles are complete */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int subtile_row = (i / 2) * 2 + warp_row, subtile_col = (i % 2) * 2 + warp_col;
#pragma unroll
            for (int j = 0; j < BK / 16; j++) {
                TK_RT_BF(a, 16, 16);
                TK_RT_BF_COL(b, 16, 16);
                tk_load_rt(a, TK_SUBTILE(sm->a, 16, 16, subtile_row, j));
                tk_load_rt_col(b, TK_SUBTILE(sm->b, 16, 16, j, subtile_col));
                tk_mma_AB(acc[i], a, b, acc[i]);
            }
        }
        __syncthreads();   /* every warp is done reading before the next load overwrites */
    }

    const tk_gl_out out = tk_gl_out_make(p.c, p.m, p.n, p.ldc, p.c_type);
#pragma unroll
    for (int i = 0; i < 4; i++)
        tk_store_g(out, acc[i], row * 4 + (i / 2) * 2 + warp_row, col * 4 + (i % 2) * 2 + warp_col, p.alpha, p.beta);
}

template <int BK>
static size_t k03_smem_bytes(void)
{
    typedef K03_SMEM(BK) smem_t;
    return sizeof(smem_t);
}

static tk_status k03_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)dev;
    return tk_tiles_supports(a, TK_OP_N, BM, 1, why, len);
}

template <int BK>
static void k03_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)a; (void)dev;
    r->func = (const void *)k03_kernel<BK>;
    r->threads = NTHREADS;
    r->dyn_smem = k03_smem_bytes<BK>();
}

template <int BK>
static tk_status k03_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    (void)dev;
    tk_status st = tk_tiles_set_smem((const void *)k03_kernel<BK>, k03_smem_bytes<BK>(), why, len);
    if (st)
        return st;
    k03_kernel<BK><<<tk_tiles_grid(a, BM, BN), NTHREADS, k03_smem_bytes<BK>(), stream>>>(*a);
    return tk_tiles_launched(why, len);
}

extern "C" const tk_kernel tk_kernel_k03_wg_64x64_k16 = {
    "k03_wg_64x64_k16", "seed 000 starting point: 4 warps on 64x64, interleaved 16x16 accumulators, K-step 16",
    80, BM, BN, 16, 16, 0,
    k03_supports, k03_resources<16>, k03_launch<16>,
};

extern "C" const tk_kernel tk_kernel_k04_wg_64x64_k32 = {
    "k04_wg_64x64_k32", "seed 000 starting point: 4 warps on 64x64, interleaved 16x16 accumulators, K-step 32",
    80, BM, BN, 16, 16, 0,
    k03_supports, k03_resources<32>, k03_launch<32>,
};

extern "C" const tk_kernel tk_kernel_k05_wg_64x64_k64 = {
    "k05_wg_64x64_k64", "seed 000 starting point: 4 warps on 64x64, interleaved 16x16 accumulators, K-step 64",
    80, BM, BN, 16, 16, 0,
    k03_supports, k03_resources<64>, k03_launch<64>,
};
