/* k31_wgmma_cluster - k30_wgmma_tma plus a 2-CTA cluster with TMA multicast of B,
 * and an epilogue through shared memory and TMA stores. tilekit's sm_90
 * auto-dispatch choice.
 *
 * What changes against k30_wgmma_tma and why:
 * - Clusters of 2 CTAs along M: the two CTAs compute vertically adjacent
 *   128 x 256 tiles and so need the same 256 x 64 slice of B at every step.
 *   Each CTA loads half of it (128 x 64) with a multicast TMA that lands in
 *   both CTAs' shared memory, so the L2 -> SM traffic per CTA and k-tile falls
 *   from 48 KB to 32 KB.
 * - Because a peer writes into this CTA's stages, a stage may be refilled only
 *   when the consumers of BOTH CTAs have released it: every consumer warp
 *   arrives on the empty barrier of both CTAs (16 arrivals per phase). The
 *   full barrier stays local and expects the whole 48 KB stage, A from this
 *   CTA's own load, B from the two multicasts. Cluster barriers after the
 *   barrier init and before exit keep every peer's signals inside the
 *   lifetime of the barriers they reach. The remote arrivals use CTA-scope
 *   release: with .release.cluster every arrival carried a MEMBAR.ALL.GPU and
 *   the kernel ran at 0.41x.
 * - The persistent grid walks cluster tiles (256 x 256) in super-tile order;
 *   its size is the number of co-resident clusters the runtime reports (66 on
 *   the H100 SXM).
 * - Epilogue: when beta == 0, C meets TMA's alignment and its rows end on a
 *   16-byte boundary (a TMA store writes whole 16-byte units at the right
 *   edge: on the H100 it overwrote columns past N otherwise), each consumer
 *   writes its 64 x 256 result into swizzled 8 KB chunks of shared memory
 *   (stmatrix for bf16, 8-byte stores for fp32; two buffers per consumer)
 *   and one thread stores each chunk with a TMA store, so full 128-byte rows
 *   reach L2 and the stores drain while the next tile's MMAs run. Otherwise
 *   (beta != 0: C must be read) the direct epilogue of k30_wgmma_tma is used.
 *
 * Measured effect of each change (H100 SXM 700 W, helper's check program
 * tests/gpu/k30_check.cu, ratios to cuBLAS in the same run, L2 flushed):
 * multicast alone: 8192^3 fp32 1.010 vs 1.012 for k30_wgmma_tma (no gain; it
 * gains on 8191 x 8193 x 8190: 1.421 ms vs 1.567 ms); the TMA-store epilogue
 * on top: 8192^3 fp32 1.026, bf16 out 1.018 (k30_wgmma_tma 0.967), 4096^3
 * fp32 0.993, bf16 out 0.991 (k30_wgmma_tma 0.886). Tried and dropped:
 * ping-pong consumers (each warpgroup owning 64 x 256 tiles so that one's
 * epilogue overlaps the other's MMAs): 0.88x cuBLAS at 8192^3 (one warpgroup
 * alone does not keep the tensor cores busy), though 1.09x at 8192 x 8192 x
 * 1024.
 *
 * Tile configuration: cluster 2 x 1, BM = 128, BN = 256, BK = 64, 4 stages,
 * 3 warpgroups (384 threads), warpgroup tile 64 x 256, warp tile 16 x 256.
 * Figure (H100 80GB HBM3 SXM, 700 W, one device run of this code, cuBLAS in
 * the same run): tilekit bench (op NN, L2 flushed, median) 8192^3 fp32 out
 * 783.1 TFLOP/s = 1.005x cuBLAS, bf16 out 798.8 = 1.005x, 4096^3 758.4 =
 * 0.994x, 2048^3 0.946x, 16384^3 0.996x; tests/gpu/k30_check.cu (op_b T)
 * 8192^3 fp32 771.7 TFLOP/s = 1.028x, bf16 out 1.019x, 4096^3 0.997x.
 * Short of the 1.05x target.
 * Reproduce: build/tilekit bench --kernel k31_wgmma_cluster
 */
#include <stdio.h>
#include <string.h>
#include <cuda.h>
#include "../host/kernel.h"
#include "../host/tma.h"
#include "../ptx/bar.cuh"
#include "../ptx/common.cuh"
#include "../ptx/fence.cuh"
#include "../ptx/mbarrier.cuh"
#include "../ptx/setmaxnreg.cuh"
#include "../ptx/stmatrix.cuh"
#include "../ptx/tma.cuh"
#include "../ptx/wgmma.cuh"
#include "../tiles/epilogue.cuh"

#define K30MC_CLUSTER 2                /* CTAs per cluster, along M */
#define K30MC_BM 128
#define K30MC_BN 256
#define K30MC_BK 64                    /* 64 bf16 = 128 bytes = the swizzle span */
#define K30MC_STAGES 4
#define K30MC_CONSUMERS 2
#define K30MC_THREADS (128 * (1 + K30MC_CONSUMERS))
#define K30MC_GROUP_M 16               /* block rows per super-tile (8 cluster rows) */
#define K30MC_PRODUCER_REGS 40
#define K30MC_CONSUMER_REGS 232
#define K30MC_BOX 8192                 /* one 64 x 64 bf16 TMA box (MN-major tiles) */
#define K30MC_A_BYTES (K30MC_BM * K30MC_BK * 2)
#define K30MC_B_BYTES (K30MC_BN * K30MC_BK * 2)
#define K30MC_STAGE_BYTES (K30MC_A_BYTES + K30MC_B_BYTES)
#define K30MC_EPI_CHUNK 8192           /* 64 rows x 128 bytes: one TMA store box */
#define K30MC_EPI_BYTES (K30MC_CONSUMERS * 2 * K30MC_EPI_CHUNK)
/* + 1024 to align the ring to the 128B-swizzle pattern, + the barriers */
#define K30MC_SMEM_BYTES (1024 + K30MC_STAGES * K30MC_STAGE_BYTES + K30MC_EPI_BYTES + 2 * 8 * K30MC_STAGES)

static_assert(K30MC_BM == 64 * K30MC_CONSUMERS, "each consumer warpgroup owns 64 rows (one wgmma M)");
static_assert(K30MC_STAGE_BYTES % 1024 == 0, "stages must keep the 1024-byte swizzle alignment");
static_assert(K30MC_PRODUCER_REGS * 128 + K30MC_CONSUMER_REGS * 128 * K30MC_CONSUMERS <= 65536,
              "register reallocation exceeds the SM's 64K registers");
static_assert(K30MC_SMEM_BYTES <= 227 * 1024, "shared memory exceeds the sm_90 per-block limit");

typedef struct k30mc_params {
    CUtensorMap map_a;                 /* A: box BM x BK (K-major) or 64 x 64 (M-major) */
    CUtensorMap map_b;                 /* B: box BN/2 x BK (K-major) or 64 x 64 (N-major) */
    CUtensorMap map_c;                 /* C: box 64 rows x 128 bytes, 128B swizzle (when c_tma) */
    void *c;
    int64_t ldc;
    int m, n;
    int tiles_m, tiles_n, k_tiles;
    float alpha, beta;
    int c_bf16;
    int c_tma;                         /* 1: epilogue through shared memory and TMA stores */
} k30mc_params;

/* The device helpers exist only in the sm_90a pass (the sm_80 pass compiles
 * an empty kernel body and would warn that they are unused). */
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Cluster tile t -> (cluster row, block column) in super-tile order. */
static __device__ __forceinline__ void k30mc_tile_coords(int t, int ctiles_m, int tiles_n, int *ctm, int *tn)
{
    const int group = K30MC_GROUP_M / K30MC_CLUSTER;
    int per_group = group * tiles_n;
    int g = t / per_group;
    int first = g * group;
    int rows = min(ctiles_m - first, group);
    int r = t - g * per_group;
    *ctm = first + r % rows;
    *tn = r / rows;
}

static __device__ __forceinline__ uint32_t k30mc_pack_bf16x2(float lo, float hi)
{
    return (uint32_t)tk_f32_to_bf16(lo) | ((uint32_t)tk_f32_to_bf16(hi) << 16);
}

/* Direct epilogue: stores one consumer's 64 x 256 accumulators at rows r0..,
 * columns c0.. (the warpgroup tile's corner). Thread (warp w, lane l) holds
 * rows r0 + 16w + l/4 (+8) and column pairs c0 + 8j + 2(l%4). */
static __device__ __forceinline__ void k30mc_epilogue_direct(const k30mc_params *p, float acc[128], int r0, int c0,
                                                             int warp, int lane)
{
    const int row = r0 + 16 * warp + (lane >> 2);
    const int col = c0 + 2 * (lane & 3);
    const bool interior = r0 + 64 <= p->m && c0 + K30MC_BN <= p->n;
    const float alpha = p->alpha, beta = p->beta;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = row + 8 * h;
        const bool row_ok = interior || r < p->m;
        const int64_t base = (int64_t)r * p->ldc + col;
        if (p->c_bf16) {
            uint16_t *crow = (uint16_t *)p->c + base;
#pragma unroll
            for (int j = 0; j < 32; j++) {
                float v0 = alpha * acc[4 * j + 2 * h], v1 = alpha * acc[4 * j + 2 * h + 1];
                const int cc = col + 8 * j;
                if (interior || (row_ok && cc + 1 < p->n)) {
                    uint32_t *q = (uint32_t *)(crow + 8 * j);
                    if (beta != 0.0f) {
                        uint32_t old = *q;
                        v0 = fmaf(beta, tk_bf16_to_f32((uint16_t)(old & 0xFFFF)), v0);
                        v1 = fmaf(beta, tk_bf16_to_f32((uint16_t)(old >> 16)), v1);
                    }
                    *q = k30mc_pack_bf16x2(v0, v1);
                } else if (row_ok && cc < p->n) {
                    tk_epilogue_store(p->c, base + 8 * j, TK_BF16, acc[4 * j + 2 * h], alpha, beta);
                }
            }
        } else {
            float *crow = (float *)p->c + base;
#pragma unroll
            for (int j = 0; j < 32; j++) {
                float2 v = make_float2(alpha * acc[4 * j + 2 * h], alpha * acc[4 * j + 2 * h + 1]);
                const int cc = col + 8 * j;
                if (interior || (row_ok && cc + 1 < p->n)) {
                    float2 *q = (float2 *)(crow + 8 * j);
                    if (beta != 0.0f) {
                        float2 old = *q;
                        v.x = fmaf(beta, old.x, v.x);
                        v.y = fmaf(beta, old.y, v.y);
                    }
                    *q = v;
                } else if (row_ok && cc < p->n) {
                    tk_epilogue_store(p->c, base + 8 * j, TK_F32, acc[4 * j + 2 * h], alpha, beta);
                }
            }
        }
    }
}

/* Before writing chunk buffer `buf`: the TMA store that last read it (two
 * chunks ago) must be done reading; then the whole consumer may write. */
static __device__ __forceinline__ void k30mc_chunk_acquire(int tid, int bar_id)
{
    if (tid == 0)
        tk_tma_store_wait_read(1);
    tk_bar_sync(bar_id, 128);
}

/* After writing a chunk: make the generic-proxy writes visible to the copy
 * engine, meet, and let one thread store the 64 x 128-byte box. */
static __device__ __forceinline__ void k30mc_chunk_release(const k30mc_params *p, int tid, int bar_id, uint32_t buf,
                                                           int col, int row)
{
    tk_fence_proxy_async_shared();
    tk_bar_sync(bar_id, 128);
    if (tid == 0) {
        tk_tma_store_2d(&p->map_c, buf, col, row);
        tk_tma_store_commit();
    }
}

/* TMA epilogue (beta == 0): 64 x 256 through two 8 KB chunk buffers at ebuf
 * (generic pointer epp), 128B-swizzled like the TMA box expects: the 16-byte
 * chunk c of row r sits at r * 128 + ((c ^ (r % 8)) * 16). */
static __device__ __forceinline__ void k30mc_epilogue_tma(const k30mc_params *p, float acc[128], int r0, int c0,
                                                          int warp, int lane, uint32_t ebuf, uint8_t *epp, int bar_id)
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
            const uint32_t buf = ebuf + (q & 1) * K30MC_EPI_CHUNK;
            k30mc_chunk_acquire(tid, bar_id);
#pragma unroll
            for (int jp = 0; jp < 4; jp++) {
                const int j = 8 * q + 2 * jp;
                const int jl = 2 * jp + (i >> 1);
                tk_stmatrix_x4(buf + srow * 128 + ((jl ^ (lane & 7)) << 4),
                               k30mc_pack_bf16x2(alpha * acc[4 * j], alpha * acc[4 * j + 1]),
                               k30mc_pack_bf16x2(alpha * acc[4 * j + 2], alpha * acc[4 * j + 3]),
                               k30mc_pack_bf16x2(alpha * acc[4 * j + 4], alpha * acc[4 * j + 5]),
                               k30mc_pack_bf16x2(alpha * acc[4 * j + 6], alpha * acc[4 * j + 7]));
            }
            k30mc_chunk_release(p, tid, bar_id, buf, c0 + 64 * q, r0);
        }
    } else {
        /* 8 chunks of 32 columns; each thread writes 8-byte pairs. */
#pragma unroll
        for (int q = 0; q < 8; q++) {
            const uint32_t buf = ebuf + (q & 1) * K30MC_EPI_CHUNK;
            uint8_t *bp = epp + (q & 1) * K30MC_EPI_CHUNK;
            k30mc_chunk_acquire(tid, bar_id);
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
            k30mc_chunk_release(p, tid, bar_id, buf, c0 + 32 * q, r0);
        }
    }
}
#endif

/* A template because the operand majors are wgmma immediates and fix the TMA
 * box pattern (A_MN: op_a T, B_MN: op_b N). */
template <int A_MN, int B_MN>
static __global__ void __launch_bounds__(K30MC_THREADS, 1) k30mc_kernel(const __grid_constant__ k30mc_params p)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) uint8_t k30mc_smem[];
    /* Stage s: A at ring + s * STAGE_BYTES, B right after it; then the epilogue
     * chunk buffers, then the barriers. Same offsets in both CTAs, as the
     * multicast requires. */
    const uint32_t ring = (tk_smem_u32(k30mc_smem) + 1023u) & ~1023u;
    const uint32_t epi = ring + K30MC_STAGES * K30MC_STAGE_BYTES;
    const uint32_t full_bar = epi + K30MC_EPI_BYTES;
    const uint32_t empty_bar = full_bar + 8 * K30MC_STAGES;
    const int wg = threadIdx.x / 128;
    const uint32_t rank = tk_cluster_ctarank();
    const int ctiles_m = (p.tiles_m + K30MC_CLUSTER - 1) / K30MC_CLUSTER;
    const int num_ctiles = ctiles_m * p.tiles_n;
    const int cluster_id = blockIdx.x / K30MC_CLUSTER, num_clusters = gridDim.x / K30MC_CLUSTER;

    if (threadIdx.x == 0) {
        tk_tma_prefetch_map(&p.map_a);
        tk_tma_prefetch_map(&p.map_b);
        for (int s = 0; s < K30MC_STAGES; s++) {
            tk_mbarrier_init(full_bar + 8 * s, 1);
            tk_mbarrier_init(empty_bar + 8 * s, 4 * K30MC_CONSUMERS * K30MC_CLUSTER);
        }
        tk_fence_mbarrier_init();
    }
    tk_cluster_sync();

    if (wg == 0) {
        /* Producer warpgroup: one thread issues every load. */
        tk_setmaxnreg_dec(K30MC_PRODUCER_REGS);
        if (threadIdx.x == 0) {
            const uint16_t all = (uint16_t)((1u << K30MC_CLUSTER) - 1);
            int s = 0;
            uint32_t phase = 0;
            for (int t = cluster_id; t < num_ctiles; t += num_clusters) {
                int ctm, tn;
                k30mc_tile_coords(t, ctiles_m, p.tiles_n, &ctm, &tn);
                const int m0 = (ctm * K30MC_CLUSTER + (int)rank) * K30MC_BM, n0 = tn * K30MC_BN;
                for (int kt = 0; kt < p.k_tiles; kt++) {
                    const int k0 = kt * K30MC_BK;
                    const uint32_t fb = full_bar + 8 * s;
                    const uint32_t sa = ring + s * K30MC_STAGE_BYTES, sb = sa + K30MC_A_BYTES;
                    /* Both CTAs' consumers have released stage s (the peer's
                     * multicast writes here too). */
                    tk_mbarrier_wait_parity(empty_bar + 8 * s, phase ^ 1);
                    tk_mbarrier_arrive_expect_tx(fb, K30MC_STAGE_BYTES);
                    if (A_MN) {
#pragma unroll
                        for (int j = 0; j < K30MC_BM / 64; j++)
                            tk_tma_load_2d(sa + j * K30MC_BOX, &p.map_a, m0 + 64 * j, k0, fb);
                    } else {
                        tk_tma_load_2d(sa, &p.map_a, k0, m0, fb);
                    }
                    /* This CTA's share of B: rows (or 64-column boxes) of half
                     * `rank`, delivered to both CTAs. */
                    if (B_MN) {
#pragma unroll
                        for (int j = 0; j < K30MC_BN / 64 / K30MC_CLUSTER; j++) {
                            const int box = (int)rank * (K30MC_BN / 64 / K30MC_CLUSTER) + j;
                            tk_tma_load_2d_multicast(sb + box * K30MC_BOX, &p.map_b, n0 + 64 * box, k0, fb, all);
                        }
                    } else {
                        const int half = K30MC_BN / K30MC_CLUSTER;
                        tk_tma_load_2d_multicast(sb + rank * (K30MC_B_BYTES / K30MC_CLUSTER), &p.map_b, k0,
                                                 n0 + half * (int)rank, fb, all);
                    }
                    if (++s == K30MC_STAGES) {
                        s = 0;
                        phase ^= 1;
                    }
                }
            }
        }
    } else {
        /* Consumer warpgroup c: rows 64c..64c+63 of each tile. */
        tk_setmaxnreg_inc(K30MC_CONSUMER_REGS);
        const int c = wg - 1;
        const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
        /* Descriptor strides as in k30_wgmma_tma. */
        const uint32_t a_lbo = A_MN ? K30MC_BOX : 16, b_lbo = B_MN ? K30MC_BOX : 16;
        const uint32_t a_kstep = A_MN ? 2048 : 32, b_kstep = B_MN ? 2048 : 32;
        /* The empty barriers of every CTA of the cluster, as cluster addresses. */
        uint32_t empty_remote[K30MC_CLUSTER];
#pragma unroll
        for (int r = 0; r < K30MC_CLUSTER; r++)
            empty_remote[r] = tk_mapa_shared_cluster(empty_bar, (uint32_t)r);
        const uint32_t ebuf = epi + c * 2 * K30MC_EPI_CHUNK;
        uint8_t *epp = k30mc_smem + (ebuf - tk_smem_u32(k30mc_smem));
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; i++)
            acc[i] = 0.0f;
        int s = 0;
        uint32_t phase = 0;
        for (int t = cluster_id; t < num_ctiles; t += num_clusters) {
            int ctm, tn;
            k30mc_tile_coords(t, ctiles_m, p.tiles_n, &ctm, &tn);
            const int tm = ctm * K30MC_CLUSTER + (int)rank;
            int prev = 0;
            for (int kt = 0; kt < p.k_tiles; kt++) {
                const uint32_t sa = ring + s * K30MC_STAGE_BYTES + c * K30MC_BOX;
                const uint32_t sb = ring + s * K30MC_STAGE_BYTES + K30MC_A_BYTES;
                tk_mbarrier_wait_parity(full_bar + 8 * s, phase);
                tk_wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < K30MC_BK / 16; kk++) {
                    uint64_t da = tk_wgmma_desc_sw128(sa + kk * a_kstep, a_lbo, 1024);
                    uint64_t db = tk_wgmma_desc_sw128(sb + kk * b_kstep, b_lbo, 1024);
                    tk_wgmma_m64n256k16_f32_bf16<A_MN, B_MN>(acc, da, db, kt > 0 || kk > 0);
                }
                tk_wgmma_commit();
                if (kt > 0) {
                    tk_wgmma_wait(1);
                    if (lane == 0)
#pragma unroll
                        for (int r = 0; r < K30MC_CLUSTER; r++)
                            tk_mbarrier_arrive_cluster(empty_remote[r] + 8 * prev);
                }
                prev = s;
                if (++s == K30MC_STAGES) {
                    s = 0;
                    phase ^= 1;
                }
            }
            tk_wgmma_wait(0);
            if (lane == 0)
#pragma unroll
                for (int r = 0; r < K30MC_CLUSTER; r++)
                    tk_mbarrier_arrive_cluster(empty_remote[r] + 8 * prev);
#pragma unroll
            for (int i = 0; i < 128; i++)
                tk_wgmma_reg_fence(acc[i]);
            if (p.c_tma)
                k30mc_epilogue_tma(&p, acc, tm * K30MC_BM + 64 * c, tn * K30MC_BN, warp, lane, ebuf, epp, 1 + c);
            else
                k30mc_epilogue_direct(&p, acc, tm * K30MC_BM + 64 * c, tn * K30MC_BN, warp, lane);
        }
        /* The last TMA stores must have read shared memory before it goes. */
        if (p.c_tma && threadIdx.x % 128 == 0)
            tk_tma_store_wait(0);
    }
    /* No CTA may leave while its peer can still arrive on its barriers. */
    tk_cluster_sync();
#endif
}

static tk_status k30mc_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    if (dev->sm != 90) {
        snprintf(why, len,
                 "needs sm_90a (wgmma, setmaxnreg and TMA code built for sm_90a runs only on sm_90); this GPU is "
                 "sm_%d",
                 dev->sm);
        return TK_ERR_NOT_SUPPORTED;
    }
    if (a->m > INT32_MAX - 2 * K30MC_BM || a->n > INT32_MAX || a->k > INT32_MAX) {
        snprintf(why, len, "TMA coordinates are 32-bit: M, N and K must be below 2^31 - 256");
        return TK_ERR_NOT_SUPPORTED;
    }
    tk_status st = tk_tma_check("A", a->a, a->lda, 2, why, len);
    if (st == TK_SUCCESS)
        st = tk_tma_check("B", a->b, a->ldb, 2, why, len);
    if (st != TK_SUCCESS)
        return st;
    size_t pair = a->c_type == TK_F32 ? 8 : 4;
    if (a->ldc % 2 || (uintptr_t)a->c % pair) {
        snprintf(why, len, "the epilogue stores C in pairs: ldc (%lld) must be even and C (%p) %zu-byte aligned",
                 (long long)a->ldc, a->c, pair);
        return TK_ERR_NOT_SUPPORTED;
    }
    return TK_SUCCESS;
}

static const void *k30mc_func(tk_op op_a, tk_op op_b)
{
    int a_mn = op_a == TK_OP_T, b_mn = op_b == TK_OP_N;
    if (a_mn)
        return b_mn ? (const void *)k30mc_kernel<1, 1> : (const void *)k30mc_kernel<1, 0>;
    return b_mn ? (const void *)k30mc_kernel<0, 1> : (const void *)k30mc_kernel<0, 0>;
}

static void k30mc_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)dev;
    r->func = a ? k30mc_func(a->op_a, a->op_b) : k30mc_func(TK_OP_N, TK_OP_T);
    r->threads = K30MC_THREADS;
    r->dyn_smem = K30MC_SMEM_BYTES;
}

static tk_status k30mc_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    (void)dev;
    k30mc_params p;
    memset(&p, 0, sizeof p);
    tk_status st;
    if (a->op_a == TK_OP_N)
        st = tk_tma_map_2d(&p.map_a, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a->a, a->m, a->k, a->lda, K30MC_BM,
                           K30MC_BK, CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    else
        st = tk_tma_map_2d(&p.map_a, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a->a, a->k, a->m, a->lda, K30MC_BK, 64,
                           CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    if (st)
        return st;
    if (a->op_b == TK_OP_T)
        st = tk_tma_map_2d(&p.map_b, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a->b, a->n, a->k, a->ldb,
                           K30MC_BN / K30MC_CLUSTER, K30MC_BK, CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    else
        st = tk_tma_map_2d(&p.map_b, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a->b, a->k, a->n, a->ldb, K30MC_BK, 64,
                           CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    if (st)
        return st;
    size_t cs = a->c_type == TK_F32 ? 4 : 2;
    char ignore[TK_MSG_LEN];
    /* A TMA store writes whole 16-byte units at the right edge (seen on the
     * H100: columns past N up to the next 16 bytes were overwritten), so
     * rows must end on a 16-byte boundary too. */
    p.c_tma = a->beta == 0.0f && (a->n * (int64_t)cs) % 16 == 0 &&
              tk_tma_check("C", a->c, a->ldc, cs, ignore, sizeof ignore) == TK_SUCCESS;
    if (p.c_tma) {
        st = tk_tma_map_2d(&p.map_c, a->c_type == TK_F32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                                           : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                           cs, a->c, a->m, a->n, a->ldc, 64, (uint32_t)(128 / cs), CU_TENSOR_MAP_SWIZZLE_128B, why,
                           len);
        if (st)
            return st;
    }
    p.c = a->c;
    p.ldc = a->ldc;
    p.m = (int)a->m;
    p.n = (int)a->n;
    p.tiles_m = (int)((a->m + K30MC_BM - 1) / K30MC_BM);
    p.tiles_n = (int)((a->n + K30MC_BN - 1) / K30MC_BN);
    p.k_tiles = (int)((a->k + K30MC_BK - 1) / K30MC_BK);
    p.alpha = a->alpha;
    p.beta = a->beta;
    p.c_bf16 = a->c_type == TK_BF16;

    const void *func = k30mc_func(a->op_a, a->op_b);
    cudaError_t e = cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, K30MC_SMEM_BYTES);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = K30MC_CLUSTER;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    long long ctiles = (long long)((p.tiles_m + K30MC_CLUSTER - 1) / K30MC_CLUSTER) * p.tiles_n;
    cfg.gridDim = dim3((unsigned)(K30MC_CLUSTER * (ctiles < 1024 ? ctiles : 1024)));
    cfg.blockDim = dim3(K30MC_THREADS);
    cfg.dynamicSmemBytes = K30MC_SMEM_BYTES;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveClusters(&clusters, func, &cfg);
    if (e == cudaSuccess && clusters < 1) {
        snprintf(why, len, "no cluster of %d CTAs with %d bytes of shared memory fits on this GPU", K30MC_CLUSTER,
                 K30MC_SMEM_BYTES);
        return TK_ERR_OUT_OF_RESOURCES;
    }
    if (e == cudaSuccess) {
        cfg.gridDim = dim3((unsigned)(K30MC_CLUSTER * (ctiles < clusters ? ctiles : clusters)));
        void *args[] = { &p };
        e = cudaLaunchKernelExC(&cfg, func, args);
    }
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "launch: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

extern "C" const tk_kernel tk_kernel_k31_wgmma_cluster = {
    "k31_wgmma_cluster",
    "k30_wgmma_tma + 2-CTA clusters along M with TMA multicast of B, epilogue through stmatrix and TMA stores",
    90, K30MC_BM, K30MC_BN, 16, 256, 30,
    k30mc_supports, k30mc_resources, k30mc_launch,
};
