/* k12_8w_256x128_gregs - seed 003's kernel: eight warps, 64-wide shared K
 * slices, the next slice prefetched global -> registers while the current
 * one is computed, and eight accumulators per warp indexed right.
 *
 * Reproduces: seed 003's 8-warp kernel: warps in a 4 x 2 grid (warp_row =
 * warp / 2, warp_col = warp % 2), each owning a 64 x 64 region of C held as
 * eight accumulators in a 2 x 4 arrangement -- the indexing the seed asked
 * for and got wrong (it used four of its eight accumulators with a 2 x 2
 * layout):
 *   C_accum[i] = a_reg_(i/4) * b_reg_(i%4)^T,
 *   a_reg_r = A rows 64*warp_row + 32*r .. +31,
 *   b_reg_c = B^T rows 64*warp_col + 16*c .. +15,
 *   stored at 32x16 tile (8*row + 2*warp_row + i/4, 8*col + 4*warp_col + i%4).
 * The shared tiles hold a 64-wide K slice (DOT_SLICE_SHARED); while the
 * warps multiply it in 16-wide steps, the next slice is already on its way
 * from global memory into registers (load_global_to_registers); after a
 * barrier it is stored to shared memory (store_registers_to_shared).
 * What changed from k11_4w_128x128_kunroll4, and why: twice the warps and
 * a 256-row block (each B fragment feeds two MMAs, each A fragment four),
 * and global latency overlapped with compute without a second shared
 * buffer, by parking the next slice in registers.
 * What differs from the seed, and why: the seed's block was 256 x 256.
 * Its fp32 accumulators alone would be 256 x 256 = 65536 registers, the
 * whole register file of an SM, and eight 32x32 accumulators per warp are
 * 256 registers per lane (over NVIDIA's 255, where AMD's 64-lane waves need
 * half that); so the block is 256 x 128 and the accumulators 32 x 16 -- the
 * same 8-warp grid and 2 x 4 accumulator indexing. Barriers are the block
 * barrier for all warps (the seed's conditional s_barrier calls, taken by
 * some warps only, are not needed). Edges are zero-filled / bounded, so any
 * M, N, K works.
 *
 * Tile configuration: BM = 256, BN = 128, BK = 64 (shared slice), 16 (MMA
 * step), 8 warps (256 threads), warp tile 64 x 64 as 2 x 4 accumulators of
 * 32 x 16; 48 registers per thread stage the next slice; shared memory
 * (256 + 128) x 72 bf16 = 55296 bytes. B stored N x K (op_b T, mma_ABt), as
 * in the seed.
 * Figure: not yet measured.
 * Reproduce: build/tilekit bench --kernel k12_8w_256x128_gregs
 */
#include "host/kernel.h"
#include "tiles/tiles.cuh"
#include "tiles/launch.cuh"

#define BM 256
#define BN 128
#define BK 64                  /* the seed's DOT_SLICE_SHARED */
#define DOT_SLICE 16
#define ACC_M 32               /* accumulator tile: 32 x 16 */
#define ACC_N 16
#define NWARPS 8
#define NTHREADS (NWARPS * TK_WARP_THREADS)

typedef struct k12_smem {
    TK_ST_BF(a, BM, BK);
    TK_ST_BF(b, BN, BK);   /* B^T: N x K */
} k12_smem;
TK_SMEM_CHECK(k12_smem);

static __global__ void __launch_bounds__(NTHREADS, 1) k12_kernel(tk_args p)
{
    k12_smem *sm = TK_SMEM(k12_smem);
    const tk_gl ga = tk_gl_make(p.a, p.m, p.k, p.lda);
    const tk_gl gb = tk_gl_make(p.b, p.n, p.k, p.ldb);
    const int row = blockIdx.y, col = blockIdx.x;
    const int warp = tk_warpid(), warp_row = warp / 2, warp_col = warp % 2;

    TK_RT_FL(acc[8], ACC_M, ACC_N);
#pragma unroll
    for (int i = 0; i < 8; i++)
        tk_zero(acc[i]);
    /* the next K slice, parked in registers between its global load and its shared store */
    uint4 a_next[TK_CHUNKS_PER_THREAD(BM, BK, NTHREADS)];
    uint4 b_next[TK_CHUNKS_PER_THREAD(BN, BK, NTHREADS)];

    const int ktiles = (int)tk_ceil_div(p.k, BK);
    tk_load_g2s(TK_TILE(sm->a), ga, row, 0, threadIdx.x, NTHREADS);
    tk_load_g2s(TK_TILE(sm->b), gb, col, 0, threadIdx.x, NTHREADS);
    if (ktiles > 1) {
        tk_load_g2r(a_next, TK_TILE(sm->a), ga, row, 1, threadIdx.x, NTHREADS);
        tk_load_g2r(b_next, TK_TILE(sm->b), gb, col, 1, threadIdx.x, NTHREADS);
    }
    __syncthreads();

    for (int tile = 0; tile < ktiles; tile++) {
#pragma unroll
        for (int slice = 0; slice < BK / DOT_SLICE; slice++) {
            TK_RT_BF(a[2], ACC_M, DOT_SLICE);
            TK_RT_BF(b[4], ACC_N, DOT_SLICE);
#pragma unroll
            for (int r = 0; r < 2; r++)
                tk_load_rt(a[r], TK_SUBTILE(sm->a, ACC_M, DOT_SLICE, 2 * warp_row + r, slice));
#pragma unroll
            for (int c = 0; c < 4; c++)
                tk_load_rt(b[c], TK_SUBTILE(sm->b, ACC_N, DOT_SLICE, 4 * warp_col + c, slice));
#pragma unroll
            for (int i = 0; i < 8; i++)
                tk_mma_ABt(acc[i], a[i / 4], b[i % 4], acc[i]);
        }
        if (tile + 1 < ktiles) {
            __syncthreads();   /* every warp is done reading slice `tile` */
            tk_store_r2s(TK_TILE(sm->a), a_next, threadIdx.x, NTHREADS);
            tk_store_r2s(TK_TILE(sm->b), b_next, threadIdx.x, NTHREADS);
            /* start the slice after next now, so its latency hides behind the next compute */
            if (tile + 2 < ktiles) {
                tk_load_g2r(a_next, TK_TILE(sm->a), ga, row, tile + 2, threadIdx.x, NTHREADS);
                tk_load_g2r(b_next, TK_TILE(sm->b), gb, col, tile + 2, threadIdx.x, NTHREADS);
            }
            __syncthreads();   /* slice tile + 1 is in place */
        }
    }

    const tk_gl_out out = tk_gl_out_make(p.c, p.m, p.n, p.ldc, p.c_type);
#pragma unroll
    for (int i = 0; i < 8; i++)
        tk_store_g(out, acc[i], row * (BM / ACC_M) + 2 * warp_row + i / 4, col * (BN / ACC_N) + 4 * warp_col + i % 4,
                   p.alpha, p.beta);
}

static tk_status k12_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    if (dev->smem_per_block_optin < sizeof(k12_smem)) {
        snprintf(why, len, "needs %zu bytes of shared memory per block, this GPU allows %zu", sizeof(k12_smem),
                 dev->smem_per_block_optin);
        return TK_ERR_OUT_OF_RESOURCES;
    }
    return tk_tiles_supports(a, TK_OP_T, BM, 1, why, len);
}

static void k12_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)a; (void)dev;
    r->func = (const void *)k12_kernel;
    r->threads = NTHREADS;
    r->dyn_smem = sizeof(k12_smem);
}

static tk_status k12_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    (void)dev;
    tk_status st = tk_tiles_set_smem((const void *)k12_kernel, sizeof(k12_smem), why, len);
    if (st)
        return st;
    k12_kernel<<<tk_tiles_grid(a, BM, BN), NTHREADS, sizeof(k12_smem), stream>>>(*a);
    return tk_tiles_launched(why, len);
}

extern "C" const tk_kernel tk_kernel_k12_8w_256x128_gregs = {
    "k12_8w_256x128_gregs", "seed 003: 8 warps on 256x128, 64-wide K slices prefetched global -> registers, 8 accumulators per warp",
    80, BM, BN, 64, 64, 0,
    k12_supports, k12_resources, k12_launch,
};
