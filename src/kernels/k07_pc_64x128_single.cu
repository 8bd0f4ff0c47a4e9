/* k07_pc_64x128_single - k06 with one shared buffer and two barriers per
 * K-step: the seed's "get rid of the double buffering" request.
 *
 * Reproduces: the single-buffer rewrite the user asked for first in seed
 * 000: producers fill one copy of the 2 A and 4 B 32x32 tiles, consumers
 * multiply it, and because the producers may only overwrite the tiles after
 * every consumer has read them, each step needs two barriers: compute,
 * barrier, load the next step, barrier.
 * What changed from k06_pc_64x128, and why: half the shared memory (the
 * seed's motivation on a 32 KB part) at the cost of all overlap: the loads
 * and the MMAs of a step now run one after the other, with the whole block
 * waiting at each barrier.
 * Edges are zero-filled / bounded, so any M, N, K works.
 *
 * Tile configuration: BM = 64, BN = 128, BK = 32, 12 warps (384 threads:
 * warps 0-3 producers, 4-11 consumers), warp tile 32x32; shared memory
 * 6 tiles of 32 x 40 bf16 = 15360 bytes. B stored K x N (op_b N, mma_AB).
 * Figure: not yet measured.
 * Reproduce: build/tilekit bench --kernel k07_pc_64x128_single
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

typedef struct k07_smem {
    TK_ST_BF(a[M_BLOCK], TILE, TILE);
    TK_ST_BF(b[N_BLOCK], TILE, TILE);
} k07_smem;
TK_SMEM_CHECK(k07_smem);

/* The producers fill the tiles with K-step `tile`. */
static __device__ __forceinline__ void k07_produce(k07_smem *sm, const tk_gl *ga, const tk_gl *gb, int row,
                                                   int col, int tile)
{
    const int tid = tk_group_tid(0);
#pragma unroll
    for (int m = 0; m < M_BLOCK; m++)
        tk_load_g2s(TK_TILE(sm->a[m]), *ga, row + m, tile, tid, PRODUCER_THREADS);
#pragma unroll
    for (int n = 0; n < N_BLOCK; n++)
        tk_load_g2s(TK_TILE(sm->b[n]), *gb, tile, col + n, tid, PRODUCER_THREADS);
}

static __global__ void __launch_bounds__(NTHREADS) k07_kernel(tk_args p)
{
    k07_smem *sm = TK_SMEM(k07_smem);
    const tk_gl ga = tk_gl_make(p.a, p.m, p.k, p.lda);
    const tk_gl gb = tk_gl_make(p.b, p.k, p.n, p.ldb);
    const int row = blockIdx.y * M_BLOCK, col = blockIdx.x * N_BLOCK;   /* in 32x32 tiles */
    const int warp = tk_warpid(), wg = warp / TK_WARPGROUP_WARPS, local_warp = warp % TK_WARPGROUP_WARPS;
    const bool is_producer = wg == 0;
    const int consumer_idx = is_producer ? 0 : wg - 1;

    TK_RT_FL(acc, TILE, TILE);
    tk_zero(acc);

    const int ktiles = (int)tk_ceil_div(p.k, TILE);
    if (is_producer)
        k07_produce(sm, &ga, &gb, row, col, 0);
    __syncthreads();

    for (int tile = 0; tile < ktiles; tile++) {
        if (!is_producer) {
            TK_RT_BF(a, TILE, TILE);
            TK_RT_BF_COL(b, TILE, TILE);
            tk_load_rt(a, TK_TILE(sm->a[consumer_idx]));
            tk_load_rt_col(b, TK_TILE(sm->b[local_warp]));
            tk_mma_AB(acc, a, b, acc);
        }
        __syncthreads();   /* every consumer has read the tiles: they may be overwritten */
        if (tile + 1 < ktiles) {
            if (is_producer)
                k07_produce(sm, &ga, &gb, row, col, tile + 1);
            __syncthreads();   /* the next K-step is in place */
        }
    }

    if (!is_producer)
        tk_store_g(tk_gl_out_make(p.c, p.m, p.n, p.ldc, p.c_type), acc, row + consumer_idx, col + local_warp, p.alpha,
                   p.beta);
}

static tk_status k07_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)dev;
    return tk_tiles_supports(a, TK_OP_N, BM, 1, why, len);
}

static void k07_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)a; (void)dev;
    r->func = (const void *)k07_kernel;
    r->threads = NTHREADS;
    r->dyn_smem = sizeof(k07_smem);
}

static tk_status k07_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    (void)dev;
    tk_status st = tk_tiles_set_smem((const void *)k07_kernel, sizeof(k07_smem), why, len);
    if (st)
        return st;
    k07_kernel<<<tk_tiles_grid(a, BM, BN), NTHREADS, sizeof(k07_smem), stream>>>(*a);
    return tk_tiles_launched(why, len);
}

extern "C" const tk_kernel tk_kernel_k07_pc_64x128_single = {
    "k07_pc_64x128_single", "seed 000 single buffer: 4 producer + 8 consumer warps, two barriers per K-step, 64x128, K-step 32",
    80, BM, BN, TILE, TILE, 0,
    k07_supports, k07_resources, k07_launch,
};
