/* k13_pc_128x256_superm - seed 004's port: the Hopper reference kernel's
 * structure and L2 block order with no warpgroup instructions, TMA or wgmma.
 *
 * Reproduces: the port seed 004 asked for. The reference kernel (64x64
 * tiles, M_BLOCK 2, N_BLOCK 4: a 128 x 256 C block; a producer loading
 * double-buffered A and B tiles with TMA; two consumer warpgroups each
 * multiplying their 64-row A tile by the 64 x 256 B panel with wgmma; the
 * SUPER_M = 12 grouping of blocks) becomes: a producer warpgroup copying
 * the next K-step's 2 A tiles and 4 B tiles (64x64 each) into the toc
 * buffer with cp.async while eight consumer warps multiply the tic buffer
 * with mma.sync -- consumer warp w takes A tile w / 4 and B tile w % 4, a
 * 64x64 accumulator -- one barrier per K-step, and blocks numbered in the
 * reference's super-tile order (tk_raster_supertile, src/tiles/raster.cuh):
 * SUPER_M block rows walked down one block column at a time, so the A
 * panels of those rows and one B panel are reused from L2.
 * What changed from k12_8w_256x128_gregs, and why: back to wave
 * specialization (k06's scheme) at the reference's tile sizes, double
 * buffering in shared memory instead of registers, asynchronous copies, and
 * the L2-aware block order -- the "cache reuse properties" the user wanted
 * to keep.
 * What differs from the reference: without setmaxnreg (Hopper only) every
 * warp gets the same register budget, and with 12 warps one of the SM's
 * four register-file quarters holds 3 of them: 168 registers per thread.
 * The consumers fit by walking their 64x64 accumulator in 16-row strips
 * against one set of B fragments, and producers and consumers run separate
 * loops so the producers' copy addresses never share registers with the
 * accumulators. The C store goes straight from registers (the reference's
 * C_tiles staging existed for TMA stores). Edges are zero-filled /
 * bounded, so any M, N, K works.
 *
 * Tile configuration: BM = 128, BN = 256, BK = 64, 12 warps (384 threads:
 * warps 0-3 producers, 4-11 consumers), warp tile 64x64; shared memory
 * 2 x 6 tiles of 64 x 72 bf16 = 110592 bytes; SUPER_M = 12. B stored K x N
 * (op_b N, mma_AB), as in the reference.
 * Figure: not yet measured.
 * Reproduce: build/tilekit bench --kernel k13_pc_128x256_superm
 */
#include "host/kernel.h"
#include "tiles/tiles.cuh"
#include "tiles/raster.cuh"
#include "tiles/launch.cuh"

#define TILE 64                 /* the reference's BLOCK_SIZE */
#define M_BLOCK 2
#define N_BLOCK 4
#define BM (TILE * M_BLOCK)
#define BN (TILE * N_BLOCK)
#define SUPER_M 12
#define NCONSUMER_WARPS (M_BLOCK * N_BLOCK)
#define NPRODUCER_WARPS 4
#define PRODUCER_THREADS (NPRODUCER_WARPS * TK_WARP_THREADS)
#define NWARPS (NPRODUCER_WARPS + NCONSUMER_WARPS)
#define NTHREADS (NWARPS * TK_WARP_THREADS)

typedef struct k13_smem {
    TK_ST_BF(a[2][M_BLOCK], TILE, TILE);   /* [tic/toc][m] */
    TK_ST_BF(b[2][N_BLOCK], TILE, TILE);   /* [tic/toc][n]: K x N */
} k13_smem;
TK_SMEM_CHECK(k13_smem);

/* The producer warps start the copies of K-step `tile` into buffer `buf`
 * and wait for their own copies; the barrier after publishes them. */
static __device__ __forceinline__ void k13_produce(k13_smem *sm, int buf, const tk_gl *ga, const tk_gl *gb,
                                                   int row, int col, int tile)
{
    const int tid = tk_group_tid(0);
#pragma unroll
    for (int m = 0; m < M_BLOCK; m++)
        tk_load_g2s_async(TK_TILE(sm->a[buf][m]), *ga, row + m, tile, tid, PRODUCER_THREADS);
#pragma unroll
    for (int n = 0; n < N_BLOCK; n++)
        tk_load_g2s_async(TK_TILE(sm->b[buf][n]), *gb, tile, col + n, tid, PRODUCER_THREADS);
    tk_cp_async_commit();
    tk_cp_async_wait(0);
}

static __global__ void __launch_bounds__(NTHREADS, 1) k13_kernel(tk_args p)
{
    k13_smem *sm = TK_SMEM(k13_smem);
    const tk_gl ga = tk_gl_make(p.a, p.m, p.k, p.lda);
    const tk_gl gb = tk_gl_make(p.b, p.k, p.n, p.ldb);
    int brow, bcol;
    tk_raster_supertile((int)blockIdx.x, (int)tk_ceil_div(p.m, BM), (int)tk_ceil_div(p.n, BN), SUPER_M, &brow, &bcol);
    const int row = brow * M_BLOCK, col = bcol * N_BLOCK;   /* in 64x64 tiles */
    const int warp = tk_warpid();
    const bool is_producer = warp < NPRODUCER_WARPS;
    const int consumer = warp - NPRODUCER_WARPS, cm = consumer / N_BLOCK, cn = consumer % N_BLOCK;

    const int ktiles = (int)tk_ceil_div(p.k, TILE);
    /* Producers and consumers run separate loops that meet at one barrier
     * per K-step (a named barrier over all warps, which may be reached from
     * different code), so the accumulators live only in the consumer branch
     * and the producers' address registers do not compete with them. */
    if (is_producer) {
        k13_produce(sm, 0, &ga, &gb, row, col, 0);
        tk_sync_warps(1, NWARPS);
        for (int tile = 0, toc = 1; tile < ktiles; tile++, toc ^= 1) {
            if (tile + 1 < ktiles)
                k13_produce(sm, toc, &ga, &gb, row, col, tile + 1);
            tk_sync_warps(1, NWARPS);   /* toc is full and the consumers are done with tic */
        }
        return;
    }

    /* the 64x64 accumulator as four 16-row strips, so one set of B fragments
     * (16 registers) is reused against A one 16x16 block at a time */
    TK_RT_FL(acc[TILE / 16], 16, TILE);
#pragma unroll
    for (int i = 0; i < TILE / 16; i++)
        tk_zero(acc[i]);
    tk_sync_warps(1, NWARPS);
    for (int tile = 0, tic = 0; tile < ktiles; tile++, tic ^= 1) {
#pragma unroll
        for (int kk = 0; kk < TILE / 16; kk++) {
            TK_RT_BF_COL(b, 16, TILE);
            tk_load_rt_col(b, TK_SUBTILE(sm->b[tic][cn], 16, TILE, kk, 0));
#pragma unroll
            for (int i = 0; i < TILE / 16; i++) {
                TK_RT_BF(a, 16, 16);
                tk_load_rt(a, TK_SUBTILE(sm->a[tic][cm], 16, 16, i, kk));
                tk_mma_AB(acc[i], a, b, acc[i]);
            }
        }
        tk_sync_warps(1, NWARPS);   /* matches the producers' barrier of this K-step */
    }

    const tk_gl_out out = tk_gl_out_make(p.c, p.m, p.n, p.ldc, p.c_type);
#pragma unroll
    for (int i = 0; i < TILE / 16; i++)
        tk_store_g(out, acc[i], (row + cm) * (TILE / 16) + i, col + cn, p.alpha, p.beta);
}

static tk_status k13_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    if (dev->smem_per_block_optin < sizeof(k13_smem)) {
        snprintf(why, len, "needs %zu bytes of shared memory per block, this GPU allows %zu", sizeof(k13_smem),
                 dev->smem_per_block_optin);
        return TK_ERR_OUT_OF_RESOURCES;
    }
    /* the block number is an int in the super-tile order, and a 1-D grid */
    if (tk_ceil_div(a->m, BM) * tk_ceil_div(a->n, BN) > 0x7fffffff) {
        snprintf(why, len, "%lld x %lld blocks exceed the 1-D grid limit", (long long)tk_ceil_div(a->m, BM),
                 (long long)tk_ceil_div(a->n, BN));
        return TK_ERR_NOT_SUPPORTED;
    }
    return tk_tiles_supports(a, TK_OP_N, BM, 0, why, len);
}

static void k13_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)a; (void)dev;
    r->func = (const void *)k13_kernel;
    r->threads = NTHREADS;
    r->dyn_smem = sizeof(k13_smem);
}

static tk_status k13_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    (void)dev;
    tk_status st = tk_tiles_set_smem((const void *)k13_kernel, sizeof(k13_smem), why, len);
    if (st)
        return st;
    unsigned blocks = (unsigned)(tk_ceil_div(a->m, BM) * tk_ceil_div(a->n, BN));
    k13_kernel<<<blocks, NTHREADS, sizeof(k13_smem), stream>>>(*a);
    return tk_tiles_launched(why, len);
}

extern "C" const tk_kernel tk_kernel_k13_pc_128x256_superm = {
    "k13_pc_128x256_superm", "seed 004 port: 4 producer + 8 consumer warps, cp.async tic/toc, 128x256, SUPER_M = 12 order",
    80, BM, BN, TILE, TILE, 0,
    k13_supports, k13_resources, k13_launch,
};
