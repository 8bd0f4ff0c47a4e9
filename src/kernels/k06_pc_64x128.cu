/* k06_pc_64x128 - seed 000's first kernel: producer warps load, consumer
 * warps compute, shared tiles double-buffered (tic/toc).
 *
 * Reproduces: the kernel seed 000 opens with (BLOCK_SIZE 32, M_BLOCK 2,
 * N_BLOCK 4): one producer warpgroup and two consumer warpgroups; the
 * C block is 64x128, i.e. 2 x 4 tiles of 32x32, one per consumer warp
 * (consumer warpgroup c takes A tile c, its warp w takes B tile w). Shared
 * memory holds two copies (tic, toc) of the 2 A tiles (32x32) and 4 B tiles
 * (32x32); while the consumers multiply the tic copy, the producers fill
 * toc with the next K-step, and one __syncthreads per step hands the
 * buffers over.
 * What changed from k05_wg_64x64_k64, and why: wave specialization -- the
 * loads move to warps that do nothing else, so on paper global latency
 * hides behind the consumers' MMAs; the price is a third of the block's
 * warps never touching a tensor core.
 * What differs from the seed: all four producer warps share the loads (the
 * seed used warp 0 only), the seed's unused C_tiles are dropped, and the
 * producer also guards the last step (no load past K). Edges are zero-filled
 * / bounded, so any M, N, K works.
 *
 * Tile configuration: BM = 64, BN = 128, BK = 32, 12 warps (384 threads:
 * warps 0-3 producers, 4-11 consumers), warp tile 32x32; shared memory
 * 2 x 6 tiles of 32 x 40 bf16 = 30720 bytes. B stored K x N (op_b N,
 * mma_AB), as in the seed.
 * Figure: not yet measured.
 * Reproduce: build/tilekit bench --kernel k06_pc_64x128
 */
#include "host/kernel.h"
#include "tiles/tiles.cuh"
#include "tiles/launch.cuh"

#define TILE 32                 /* the seed's BLOCK_SIZE */
#define M_BLOCK 2
#define N_BLOCK 4
#define BM (TILE * M_BLOCK)
#define BN (TILE * N_BLOCK)
#define NPRODUCER_WARPS 4
#define NCONSUMER_WARPS (M_BLOCK * 4)
#define NTHREADS ((NPRODUCER_WARPS + NCONSUMER_WARPS) * TK_WARP_THREADS)
#define PRODUCER_THREADS (NPRODUCER_WARPS * TK_WARP_THREADS)

typedef struct k06_smem {
    TK_ST_BF(a[2][M_BLOCK], TILE, TILE);   /* [tic/toc][m] */
    TK_ST_BF(b[2][N_BLOCK], TILE, TILE);   /* [tic/toc][n] */
} k06_smem;
TK_SMEM_CHECK(k06_smem);

/* The producers fill buffer `buf` with K-step `tile`. */
static __device__ __forceinline__ void k06_produce(k06_smem *sm, int buf, const tk_gl *ga, const tk_gl *gb, int row,
                                                   int col, int tile)
{
    const int tid = tk_group_tid(0);
#pragma unroll
    for (int m = 0; m < M_BLOCK; m++)
        tk_load_g2s(TK_TILE(sm->a[buf][m]), *ga, row + m, tile, tid, PRODUCER_THREADS);
#pragma unroll
    for (int n = 0; n < N_BLOCK; n++)
        tk_load_g2s(TK_TILE(sm->b[buf][n]), *gb, tile, col + n, tid, PRODUCER_THREADS);
}

static __global__ void __launch_bounds__(NTHREADS) k06_kernel(tk_args p)
{
    k06_smem *sm = TK_SMEM(k06_smem);
    const tk_gl ga = tk_gl_make(p.a, p.m, p.k, p.lda);
    const tk_gl gb = tk_gl_make(p.b, p.k, p.n, p.ldb);
    const int row = blockIdx.y * M_BLOCK, col = blockIdx.x * N_BLOCK;   /* in 32x32 tiles */
    const int warp = tk_warpid(), wg = warp / TK_WARPGROUP_WARPS, local_warp = warp % TK_WARPGROUP_WARPS;
    const bool is_producer = wg == 0;
    const int consumer_idx = is_producer ? 0 : wg - 1;

    TK_RT_FL(acc, TILE, TILE);
    tk_zero(acc);

    const int ktiles = (int)tk_ceil_div(p.k, TILE);
    int tic = 0, toc = 1;
    if (is_producer)
        k06_produce(sm, tic, &ga, &gb, row, col, 0);
    __syncthreads();

    for (int tile = 0; tile < ktiles; tile++, tic ^= 1, toc ^= 1) {
        if (is_producer) {
            if (tile + 1 < ktiles)
                k06_produce(sm, toc, &ga, &gb, row, col, tile + 1);
        } else {
            TK_RT_BF(a, TILE, TILE);
            TK_RT_BF_COL(b, TILE, TILE);
            tk_load_rt(a, TK_TILE(sm->a[tic][consumer_idx]));
            tk_load_rt_col(b, TK_TILE(sm->b[tic][local_warp]));
            tk_mma_AB(acc, a, b, acc);
        }
        /* toc is full and every consumer is done with tic: swap roles */
        __syncthreads();
    }

    if (!is_producer)
        tk_store_g(tk_gl_out_make(p.c, p.m, p.n, p.ldc, p.c_type), acc, row + consumer_idx, col + local_warp, p.alpha,
                   p.beta);
}

static tk_status k06_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)dev;
    return tk_tiles_supports(a, TK_OP_N, BM, 1, why, len);
}

static void k06_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)a; (void)dev;
    r->func = (const void *)k06_kernel;
    r->threads = NTHREADS;
    r->dyn_smem = sizeof(k06_smem);
}

static tk_status k06_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    (void)dev;
    tk_status st = tk_tiles_set_smem((const void *)k06_kernel, sizeof(k06_smem), why, len);
    if (st)
        return st;
    k06_kernel<<<tk_tiles_grid(a, BM, BN), NTHREADS, sizeof(k06_smem), stream>>>(*a);
    return tk_tiles_launched(why, len);
}

extern "C" const tk_kernel tk_kernel_k06_pc_64x128 = {
    "k06_pc_64x128", "seed 000 first kernel: 4 producer + 8 consumer warps, tic/toc double buffer, 64x128, K-step 32",
    80, BM, BN, TILE, TILE, 0,
    k06_supports, k06_resources, k06_launch,
};
