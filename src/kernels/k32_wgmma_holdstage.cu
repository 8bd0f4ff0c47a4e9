/* k32_wgmma_holdstage - k31_wgmma_cluster whose consumers keep each tile's
 * last ring stage as extra epilogue staging, so that more of the tile's
 * result can go to shared memory before the next tile's MMAs start. An
 * experiment (auto_rank 0): it did not beat k31 (figures below).
 *
 * What changes against k31_wgmma_cluster and why:
 * - k31's consumers start the next tile only once their last chunk is in
 *   shared memory. They have two 8 KB chunk buffers each, so every chunk but
 *   the first two waits until the TMA store of the chunk two before has read
 *   its buffer: 48 of the 64 KB (fp32 out) or 16 of the 32 KB (bf16 out) of
 *   each consumer's result drain while the tensor cores wait, and every SM
 *   reaches its epilogue at about the same time. Expected: 2-4% at 4096^3.
 * - A bigger dedicated staging area costs a ring stage (4 x 48 KB + 32 KB
 *   is all of the 227 KB). Instead the consumers do not release the tile's
 *   last stage (48 KB: A and B of the last k-tile); after both consumers
 *   meet (the other may still be reading it), each uses 24 KB of it as 3
 *   more chunk buffers, 5 in all. A bf16 tile (4 chunks) then goes out
 *   without waiting, an fp32 tile (8 chunks) waits only for its first 3.
 *   During the next tile, once the second k-tile's MMAs are issued, the
 *   first thread of each consumer waits for its stores to have read the
 *   stage and arrives on the empty barriers for its 4 warps
 *   (k30_release_held); the producer needs the stage only at k-tile 3, so
 *   the main loop keeps its 4 stages apart from the first k-tiles of a tile.
 *   Everything else is k31's, from k30_core.cuh.
 *
 * Measured (H100 80GB HBM3 SXM, 700 W, tilekit bench op NN, L2 flushed,
 * budget 1 s; two device calls, each with two runs in reverse kernel order;
 * xcuBLAS run 1 / run 2, k31_wgmma_cluster in the same runs in brackets):
 *   call 1: fp32 out 4096^3 0.992 / 0.987 (0.991 / 0.996), 8192^3 0.999 /
 *   1.005 (1.003 / 1.004); bf16 out 4096^3 0.982 (0.991), 8192^3 1.003
 *   (1.006), 2048^3 0.937 (0.938).
 *   call 2: fp32 out 4096^3 0.984 / 0.982 (0.991 / 0.991), 8192^3 1.005 /
 *   1.005 (1.009 / 1.009), 2048^3 0.933 / 0.939 (0.937 / 0.944).
 * No gain: equal within noise at 8192^3, about 0.5-1% down at 4096^3.
 * Also tried in call 1 as separate kernels, not kept: a 3-stage ring with
 * 80 KB of dedicated staging (five buffers per consumer): fp32 4096^3
 * 0.952 / 0.952, 8192^3 0.995 / 1.001, bf16 4096^3 0.964; the same 3-stage
 * ring with k31's two buffers: 0.955 / 0.952, 0.995 / 1.001. So the fourth
 * stage is worth about 4% at 4096^3 and deeper staging nothing measurable:
 * the store drain is not what the epilogue costs.
 * ncu (call 2, one 4096^3 launch each, ncu's locked clocks): tensor pipe
 * active 85.3% of elapsed cycles for k31, 85.0% for this kernel, 86.3% for
 * cuBLAS (nvjet 256x128, 1x2 cluster); SM active cycles avg / max / min
 * 283k / 294k / 221k for k31 (elapsed 298k), 280k / 291k / 215k for cuBLAS:
 * the last partial wave (256 cluster tiles on 66 clusters) leaves about 5%
 * of SM cycles idle in both, the rest of the gap to peak is inside tiles.
 *
 * Tile configuration: cluster 2 x 1, BM = 128, BN = 256, BK = 64, 4 stages,
 * 3 warpgroups (384 threads), warpgroup tile 64 x 256, warp tile 16 x 256;
 * per consumer 3 chunk buffers (64 rows x 128 bytes) in the held stage and
 * 2 of its own. 168 registers, 0 spills.
 * Reproduce: build/tilekit bench --kernel cublas,k31_wgmma_cluster,k32_wgmma_holdstage
 *            --shapes 4096x4096x4096,8192x8192x8192 --budget 1
 */
#include "k30_core.cuh"
#include "../ptx/bar.cuh"
#include "../ptx/stmatrix.cuh"

#define K32_NBUF 5                     /* epilogue chunk buffers per consumer: 3 held + 2 own */
#define K32_HELD 3                     /* chunk buffers per consumer in the held stage */
#define K32_CLUSTER 2                  /* CTAs per cluster, along M */
#define K32_GROUP_M 16                 /* block rows per super-tile (8 cluster rows) */
#define K32_EPI_CHUNK 8192             /* 64 rows x 128 bytes: one TMA store box */
#define K32_EPI_BYTES (K30_CONSUMERS * (K32_NBUF - K32_HELD) * K32_EPI_CHUNK)
#define K32_SMEM_BYTES K30_SMEM_WITH(K32_EPI_BYTES)

static_assert(K32_SMEM_BYTES <= 227 * 1024, "shared memory exceeds the sm_90 per-block limit");

/* The device helpers exist only in the sm_90a pass (the sm_80 pass compiles
 * an empty kernel body and would warn that they are unused). */
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Before writing a chunk buffer: the TMA store that last read it (NBUF
 * chunks ago; this thread's groups complete in order) must be done reading;
 * then the whole consumer may write. */
static __device__ __forceinline__ void k32_chunk_acquire(int tid, int bar_id)
{
    if (tid == 0)
        tk_tma_store_wait_read(K32_NBUF - 1);
    tk_bar_sync(bar_id, 128);
}

/* After writing a chunk: make the generic-proxy writes visible to the copy
 * engine, meet, and let one thread store the 64 x 128-byte box. */
static __device__ __forceinline__ void k32_chunk_release(const k30_params *p, int tid, int bar_id, uint32_t buf,
                                                           int col, int row)
{
    tk_fence_proxy_async_shared();
    tk_bar_sync(bar_id, 128);
    if (tid == 0) {
        tk_tma_store_2d(&p->map_c, buf, col, row);
        tk_tma_store_commit();
    }
}

static_assert(K30_CONSUMERS * K32_HELD * K32_EPI_CHUNK <= K30_STAGE_BYTES, "the held chunks fit in one stage");

/* Shared address of chunk buffer b (0..NBUF-1) of a consumer: the first
 * K32_HELD in its part of the held stage, the rest in its own staging. */
static __device__ __forceinline__ uint32_t k32_chunk_addr(int b, uint32_t held, uint32_t own)
{
    return b < K32_HELD ? held + b * K32_EPI_CHUNK : own + (b - K32_HELD) * K32_EPI_CHUNK;
}

/* TMA epilogue (beta == 0): 64 x 256 through the NBUF chunk buffers, chunk q
 * of the tile in buffer q % NBUF (every store of the previous tile has been
 * read by now: the held-stage release waited for them); 128B-swizzled like
 * the TMA box expects: the 16-byte unit c of row r sits at
 * r * 128 + ((c ^ (r % 8)) * 16). smem/sbase: generic and shared address of
 * the dynamic shared memory. */
static __device__ __forceinline__ void k32_epilogue_tma(const k30_params *p, float acc[128], int r0, int c0,
                                                          int warp, int lane, uint32_t held, uint32_t own,
                                                          uint8_t *smem, uint32_t sbase, int bar_id)
{
    const int tid = warp * 32 + lane;
    const float alpha = p->alpha;
    if (p->c_bf16) {
        /* 4 chunks of 64 columns; stmatrix x4 stores the 8x8 blocks (h, j),
         * (h+1, j), (h, j+1), (h+1, j+1); lanes 8i..8i+7 address block i. */
        const int i = lane >> 3;
        const int srow = 16 * warp + 8 * (i & 1) + (lane & 7);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const uint32_t buf = k32_chunk_addr(q % K32_NBUF, held, own);
            k32_chunk_acquire(tid, bar_id);
#pragma unroll
            for (int jp = 0; jp < 4; jp++) {
                const int j = 8 * q + 2 * jp;
                const int jl = 2 * jp + (i >> 1);
                tk_stmatrix_x4(buf + srow * 128 + ((jl ^ (lane & 7)) << 4),
                               k30_pack_bf16x2(alpha * acc[4 * j], alpha * acc[4 * j + 1]),
                               k30_pack_bf16x2(alpha * acc[4 * j + 2], alpha * acc[4 * j + 3]),
                               k30_pack_bf16x2(alpha * acc[4 * j + 4], alpha * acc[4 * j + 5]),
                               k30_pack_bf16x2(alpha * acc[4 * j + 6], alpha * acc[4 * j + 7]));
            }
            k32_chunk_release(p, tid, bar_id, buf, c0 + 64 * q, r0);
        }
        return;
    }
    /* 8 chunks of 32 columns; each thread writes 8-byte pairs. */
#pragma unroll
    for (int q = 0; q < 8; q++) {
        const uint32_t buf = k32_chunk_addr(q % K32_NBUF, held, own);
        uint8_t *bp = smem + (buf - sbase);
        k32_chunk_acquire(tid, bar_id);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int srow = 16 * warp + 8 * h + (lane >> 2);
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                const int j = 4 * q + jj;
                const int c16 = 2 * jj + ((lane & 3) >> 1);
                float2 *dst = (float2 *)(bp + srow * 128 + ((c16 ^ (lane >> 2)) << 4) + (lane & 1) * 8);
                *dst = make_float2(alpha * acc[4 * j + 2 * h], alpha * acc[4 * j + 2 * h + 1]);
            }
        }
        k32_chunk_release(p, tid, bar_id, buf, c0 + 32 * q, r0);
    }
}
#endif

/* A template because the operand majors are wgmma immediates and fix the TMA
 * box pattern (A_MN: op_a T, B_MN: op_b N). */
template <int A_MN, int B_MN>
static __global__ void __launch_bounds__(K30_THREADS, 1) k32_kernel(const __grid_constant__ k30_params p)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) uint8_t k32_smem[];
    /* The ring, then the epilogue chunk buffers, then the barriers. */
    const uint32_t ring = k30_ring(k32_smem);
    const uint32_t epi = ring + K30_RING_BYTES;
    const uint32_t full_bar = epi + K32_EPI_BYTES;
    const uint32_t empty_bar = full_bar + 8 * K30_STAGES;
    const int wg = threadIdx.x / 128;
    const uint32_t rank = tk_cluster_ctarank();
    const int ctiles_m = (p.tiles_m + K32_CLUSTER - 1) / K32_CLUSTER;
    const int cluster_id = blockIdx.x / K32_CLUSTER, num_clusters = gridDim.x / K32_CLUSTER;

    /* A stage is refilled only when the consumer warps of both CTAs have
     * released it. */
    if (threadIdx.x == 0)
        k30_init(&p, full_bar, empty_bar, 4 * K30_CONSUMERS * K32_CLUSTER);
    tk_cluster_sync();

    if (wg == 0) {
        /* Producer warpgroup: one thread issues every load. */
        tk_setmaxnreg_dec(K30_PRODUCER_REGS);
        if (threadIdx.x == 0)
            k30_produce<A_MN, B_MN>(&p, ring, full_bar, empty_bar, cluster_id, num_clusters, ctiles_m,
                                    K32_GROUP_M / K32_CLUSTER, K32_CLUSTER, rank);
    } else {
        /* Consumer warpgroup c: rows 64c..64c+63 of each tile. */
        tk_setmaxnreg_inc(K30_CONSUMER_REGS);
        const int c = wg - 1;
        const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
        /* The empty barriers of every CTA of the cluster, as cluster addresses. */
        uint32_t empty[K32_CLUSTER];
#pragma unroll
        for (int r = 0; r < K32_CLUSTER; r++)
            empty[r] = tk_mapa_shared_cluster(empty_bar, (uint32_t)r);
        const uint32_t own = epi + c * (K32_NBUF - K32_HELD) * K32_EPI_CHUNK;
        const uint32_t sbase = tk_smem_u32(k32_smem);
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; i++)
            acc[i] = 0.0f;
        int s = 0, held = -1;
        uint32_t phase = 0;
        for (int t = cluster_id; t < ctiles_m * p.tiles_n; t += num_clusters) {
            int ctm, tn;
            k30_tile_coords(t, ctiles_m, p.tiles_n, K32_GROUP_M / K32_CLUSTER, &ctm, &tn);
            const int tm = ctm * K32_CLUSTER + (int)rank;
            k30_consume_tile<A_MN, B_MN>(acc, ring, full_bar, empty, K32_CLUSTER, p.k_tiles, c, lane, &s, &phase,
                                         p.c_tma, held);
            if (p.c_tma) {
                /* The tile's last stage stays with the consumers; the other
                 * consumer may still be reading it until both meet here. */
                held = (s + K30_STAGES - 1) % K30_STAGES;
                tk_bar_sync(3, 128 * K30_CONSUMERS);
                const uint32_t hbuf = ring + held * K30_STAGE_BYTES + c * K32_HELD * K32_EPI_CHUNK;
                k32_epilogue_tma(&p, acc, tm * K30_BM + 64 * c, tn * K30_BN, warp, lane, hbuf, own, k32_smem, sbase,
                                 1 + c);
            } else {
                k30_epilogue_direct(&p, acc, tm * K30_BM + 64 * c, tn * K30_BN, warp, lane);
            }
        }
        /* The last TMA stores must have read shared memory before it goes. */
        if (p.c_tma && threadIdx.x % 128 == 0)
            tk_tma_store_wait(0);
    }
    /* No CTA may leave while its peer can still arrive on its barriers. */
    tk_cluster_sync();
#endif
}

static tk_status k32_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    return k30_supports_common(a, dev, K32_CLUSTER * K30_BM, why, len);
}

static void k32_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)dev;
    r->func = a ? K30_SELECT(k32_kernel, a->op_a, a->op_b) : K30_SELECT(k32_kernel, TK_OP_N, TK_OP_T);
    r->threads = K30_THREADS;
    r->dyn_smem = K32_SMEM_BYTES;
}

static tk_status k32_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    (void)dev;
    return k30_launch_cluster_tma_c(K30_SELECT(k32_kernel, a->op_a, a->op_b), K32_CLUSTER, K32_SMEM_BYTES, 0, a,
                                    stream, why, len);
}

extern "C" const tk_kernel tk_kernel_k32_wgmma_holdstage = {
    "k32_wgmma_holdstage",
    "k31_wgmma_cluster whose consumers keep each tile's last stage as extra epilogue staging",
    90, K30_BM, K30_BN, 16, 256, 0,
    k32_supports, k32_resources, k32_launch,
};
