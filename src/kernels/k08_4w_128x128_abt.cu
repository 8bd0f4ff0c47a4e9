/* k08_4w_128x128_abt - seed 001's kernel: 128x128 block, four warps,
 * K-step 64, B stored N x K (mma_ABt), register double-buffering.
 *
 * Reproduces: the kernel seed 001 starts from: 4 warps; warp (warp_row =
 * warp / 2, warp_col = warp % 2) holds the 32-row A slices warp_row and
 * warp_row + 2 (a_reg_0, a_reg_1) and the 32-row slices warp_col and
 * warp_col + 2 of B^T (b_reg_0, b_reg_1), and four 32x32 accumulators:
 *   C_accum[i] = a_reg_(i/2) * b_reg_(i%2)^T  at 32x32 tile
 *   (4*row + 2*(i/2) + warp_row, 4*col + 2*(i%2) + warp_col).
 * Register double-buffering: the fragments of the next K slice are loaded
 * from shared memory into a second set of registers while the MMAs of the
 * current slice run, so the ldmatrix latency hides behind tensor work.
 * What changed from k07_pc_64x128_single, and why: every warp computes (no
 * producer warps), a larger C block per warp (64x64 in four 32x32 pieces:
 * each A fragment feeds two MMAs, each B fragment two) and B stored N x K,
 * so both operands are read with plain ldmatrix.
 * What differs from the seed: the seed kept a whole 32x64 slice of A and B
 * in registers per buffer -- 2 x 4 x 32 registers per lane on top of the
 * 128 of the accumulators, over NVIDIA's 255 -- so the double buffer runs
 * over the four 16-wide K slices of each shared tile instead. The seed's
 * loop also overwrote the shared tiles with no barrier before the load (a
 * race with warps still reading); here a barrier precedes every load.
 * Edges are zero-filled / bounded, so any M, N, K works.
 *
 * Tile configuration: BM = BN = 128, BK = 64, 4 warps (128 threads), each
 * owning four interleaved 32x32 accumulators; shared memory 2 x 128 x 72
 * bf16 = 36864 bytes. B stored N x K (op_b T, mma_ABt), as in the seed.
 * Figure: not yet measured.
 * Reproduce: build/tilekit bench --kernel k08_4w_128x128_abt
 */
#include "host/kernel.h"
#include "tiles/tiles.cuh"
#include "tiles/launch.cuh"

#define BM 128
#define BN 128
#define BK 64
#define REG_BLOCK (BM / 4)     /* the seed's REG_BLOCK: 32 */
#define NWARPS 4
#define NTHREADS (NWARPS * TK_WARP_THREADS)

typedef struct k08_smem {
    TK_ST_BF(a, BM, BK);
    TK_ST_BF(b, BN, BK);   /* B^T: N x K */
} k08_smem;
TK_SMEM_CHECK(k08_smem);

static __global__ void __launch_bounds__(NTHREADS) k08_kernel(tk_args p)
{
    k08_smem *sm = TK_SMEM(k08_smem);
    const tk_gl ga = tk_gl_make(p.a, p.m, p.k, p.lda);
    const tk_gl gb = tk_gl_make(p.b, p.n, p.k, p.ldb);
    const int row = blockIdx.y, col = blockIdx.x;
    const int warp = tk_warpid(), warp_row = warp / 2, warp_col = warp % 2;

    TK_RT_FL(acc[4], REG_BLOCK, REG_BLOCK);
#pragma unroll
    for (int i = 0; i < 4; i++)
        tk_zero(acc[i]);
    /* [buffer][slice]: slice 0 is row block warp_row (warp_col for B), slice 1 the one 2 blocks below */
    TK_RT_BF(a[2][2], REG_BLOCK, 16);
    TK_RT_BF(b[2][2], REG_BLOCK, 16);

    const int ktiles = (int)tk_ceil_div(p.k, BK);
    for (int tile = 0; tile < ktiles; tile++) {
        if (tile > 0)
            __syncthreads();   /* every warp is done reading the previous tiles */
        tk_load_g2s(TK_TILE(sm->a), ga, row, tile, threadIdx.x, NTHREADS);
        tk_load_g2s(TK_TILE(sm->b), gb, col, tile, threadIdx.x, NTHREADS);
        __syncthreads();

        /* prime buffer 0 with K slice 0, then: load slice kk+1, multiply slice kk */
#pragma unroll
        for (int s = 0; s < 2; s++) {
            tk_load_rt(a[0][s], TK_SUBTILE(sm->a, REG_BLOCK, 16, warp_row + 2 * s, 0));
            tk_load_rt(b[0][s], TK_SUBTILE(sm->b, REG_BLOCK, 16, warp_col + 2 * s, 0));
        }
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            const int cur = kk % 2, nxt = (kk + 1) % 2;
            if (kk + 1 < BK / 16) {
#pragma unroll
                for (int s = 0; s < 2; s++) {
                    tk_load_rt(a[nxt][s], TK_SUBTILE(sm->a, REG_BLOCK, 16, warp_row + 2 * s, kk + 1));
                    tk_load_rt(b[nxt][s], TK_SUBTILE(sm->b, REG_BLOCK, 16, warp_col + 2 * s, kk + 1));
                }
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
                tk_mma_ABt(acc[i], a[cur][i / 2], b[cur][i % 2], acc[i]);
        }
    }

    const tk_gl_out out = tk_gl_out_make(p.c, p.m, p.n, p.ldc, p.c_type);
#pragma unroll
    for (int i = 0; i < 4; i++)
        tk_store_g(out, acc[i], row * 4 + (i / 2) * 2 + warp_row, col * 4 + (i % 2) * 2 + warp_col, p.alpha, p.beta);
}

static tk_status k08_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)dev;
    return tk_tiles_supports(a, TK_OP_T, BM, 1, why, len);
}

static void k08_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)a; (void)dev;
    r->func = (const void *)k08_kernel;
    r->threads = NTHREADS;
    r->dyn_smem = sizeof(k08_smem);
}

static tk_status k08_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    (void)dev;
    tk_status st = tk_tiles_set_smem((const void *)k08_kernel, sizeof(k08_smem), why, len);
    if (st)
        return st;
    k08_kernel<<<tk_tiles_grid(a, BM, BN), NTHREADS, sizeof(k08_smem), stream>>>(*a);
    return tk_tiles_launched(why, len);
}

extern "C" const tk_kernel tk_kernel_k08_4w_128x128_abt = {
    "k08_4w_128x128_abt", "seed 001: 4 warps on 128x128, K-step 64, B as N x K (mma_ABt), register double-buffering",
    80, BM, BN, REG_BLOCK, REG_BLOCK, 0,
    k08_supports, k08_resources, k08_launch,
};
