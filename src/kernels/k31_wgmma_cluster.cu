/* k31_wgmma_cluster - k30_wgmma_tma plus a 2-CTA cluster with TMA multicast of B,
 * and an epilogue through shared memory and TMA stores. tilekit's sm_90
 * auto-dispatch choice.
 *
 * What changes against k30_wgmma_tma and why: the two CTAs of a cluster
 * need the same slice of B, so each loads half of it by TMA multicast into
 * both (less L2 -> SM traffic), and a stage is refilled only once both CTAs'
 * consumers have released it; with beta == 0 the result leaves through
 * swizzled shared memory and TMA stores that drain during the next tile's
 * MMAs; a short last wave, or fewer tiles than clusters, is split along K and
 * the slices added in a fixed order. Each point in full, its measured effect
 * and the levers tried and dropped: docs/kernels/k30.md.
 *
 * Tile configuration: cluster 2 x 1, BM = 128, BN = 256, BK = 64, 4 stages,
 * 3 warpgroups (384 threads), warpgroup tile 64 x 256, warp tile 16 x 256.
 * Figure (H100 80GB HBM3 SXM, 700 W, bench/device_run.sh on commit 0f073e2,
 * 2026-11-22, cuBLAS in the same run; tilekit bench, op NN, L2 flushed,
 * median): 8192^3 fp32 out 787.6 TFLOP/s = 1.008x cuBLAS, bf16 out 803.0 =
 * 1.011x, 4096^3 742.2 = 0.977x (0.98-0.99x in this session's other runs),
 * 2048^3 0.937x, 16384^3 0.955x (clocks fell to 1275-1335 MHz there),
 * 4096 x 14336 x 4096 0.984x, 8192 x 8192 x 1024 0.965x, 4352 x 4352 x 4096
 * 0.965x (last wave split), 8191 x 8193 x 8190 with padded ld 4.62x (cuBLAS
 * is slow there). Short of issue 5's 1.05x: see docs/kernels/k30.md, session 2.
 * The configuration, loops and direct epilogue are in k30_core.cuh;
 * k39_cluster_64x128 is this kernel with 64 x 128 tiles a CTA.
 * Fused epilogues (issue 39): k31_epi_kernel, the 128 x 256 tiles with
 * TK_EPI_BIAS_ACT and TK_EPI_BACKWARD (k30_epi_transform, as in
 * k30_wgmma_tma); TK_EPI_GATED not yet (the gated arm spilled here: it
 * runs on k30_wgmma_tma); k39 refuses them.
 * FP8 (issue 40): k31_fp8_kernel at 128 x 256 and k45_cluster_128x128's
 * 128 x 128; H200, tilekit bench --dtype e4m3, cuBLASLt in the same run
 * (docs/NOTES.md session 30, calls 2-3): 8192^3 per-tensor 1320 TFLOP/s
 * (0.87x), block scales 1180 (0.87x).
 * Reproduce: build/tilekit bench --kernel k31_wgmma_cluster
 */
#include "k30_core.cuh"
#include "table.h"

#define K31_CLUSTER 2                  /* CTAs per cluster, along M */
#define K31_GROUP_M 16                 /* block rows per super-tile (8 cluster rows) */
/* Consumer warpgroups, threads and shared memory of an instance with bm x
 * bn tiles a CTA: the core's unswapped configuration (K30_CONS(bm, 0),
 * K30_THREADS_CFG, K30_SMEM_CFG). */
static_assert(K30_SMEM_CFG(K30_BM, K30_BN, 0) <= 227 * 1024 && K30_SMEM_CFG(64, 128, 0) <= 227 * 1024,
              "shared memory exceeds the sm_90 per-block limit");

/* The kernel's body (k31_kernel, k31_epi_kernel). A template because the
 * operand majors are wgmma immediates and fix the TMA box pattern (A_MN:
 * op_a T, B_MN: op_b N); BM and BN size the tile, the instruction and the
 * accumulators; EPI = 1 applies the fused epilogue (k30_epi_transform) to
 * each tile's final sum before storing it; F8 (k31_fp8_kernel): FP8
 * operands, as k30_run's. */
template <int A_MN, int B_MN, int BM, int BN, int EPI, int F8 = 0>
static __device__ __forceinline__ void k31_run(const k30_params &p)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) uint8_t k31_smem[];
    constexpr int CONS = K30_CONS(BM, 0), STAGES = K30_STAGES_MNA(BM, BN, 1);
    /* The ring, then the epilogue chunk buffers, then the barriers. */
    const uint32_t ring = k30_ring(k31_smem);
    const uint32_t epi = ring + K30_RING_BYTES_MNA(BM, BN, 1);
    const uint32_t full_bar = epi + K30_EPI_CFG(BM, BN, 0);
    const uint32_t empty_bar = full_bar + 8 * STAGES;
    const int wg = threadIdx.x / 128;
    const uint32_t rank = tk_cluster_ctarank();
    const int ctiles_m = (p.tiles_m + K31_CLUSTER - 1) / K31_CLUSTER;
    const int cluster_id = blockIdx.x / K31_CLUSTER;

    /* A stage is refilled only when the consumer warps of both CTAs have
     * released it. The barriers' init is ordered by its own fence
     * (k30_init), so the cluster meets with a relaxed arrival. */
    if (threadIdx.x == 0)
        k30_init(&p, full_bar, empty_bar, 4 * CONS * K31_CLUSTER, STAGES);
    tk_cluster_sync_relaxed();

    if (wg == 0) {
        /* Producer warpgroup: one thread issues every load. */
        if (K30_REALLOC(BM, 0))
            tk_setmaxnreg_dec(K30_PRODUCER_REGS);
        if (threadIdx.x == 0) {
            k30_walk w = { cluster_id, cluster_id };
            int s = 0, t, kb, ke, v;
            uint32_t phase = 0;
            while (k30_walk_next(&p, &w, &t, &kb, &ke, &v)) {
                int ctm, tn;
                k30_tile_coords(t, ctiles_m, p.tiles_n, K31_GROUP_M / K31_CLUSTER, &ctm, &tn);
                k30_produce_tile<A_MN, B_MN, BM, BN, 1, 0, 0, F8>(&p, ring, full_bar, empty_bar, ctm, tn, kb, ke,
                                                                  K31_CLUSTER, rank, &s, &phase);
            }
            /* The tail: wait until every stage's last fill has been
             * released by the consumers of both CTAs, so no peer's arrival
             * can still be on its way to this CTA's barriers when it exits
             * (instead of a cluster barrier before exit). */
            for (int i = 0; i < STAGES; i++) {
                tk_mbarrier_wait_parity(empty_bar + 8 * s, phase ^ 1);
                if (++s == STAGES) {
                    s = 0;
                    phase ^= 1;
                }
            }
        }
    } else {
        /* Consumer warpgroup c: rows 64c..64c+63 of each tile. */
        if (K30_REALLOC(BM, 0))
            tk_setmaxnreg_inc(K30_CONSUMER_REGS);
        const int c = CONS == 1 ? 0 : wg - 1;
        const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
        /* The empty barriers of every CTA of the cluster, as cluster addresses. */
        uint32_t empty[K31_CLUSTER];
#pragma unroll
        for (int r = 0; r < K31_CLUSTER; r++)
            empty[r] = tk_mapa_shared_cluster(empty_bar, (uint32_t)r);
        const uint32_t ebuf = epi + c * 2 * K30_EPI_CHUNK;
        uint8_t *epp = k31_smem + (ebuf - tk_smem_u32(k31_smem));
        float acc[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            acc[i] = 0.0f;
        const int tid = threadIdx.x % 128, sub = (int)rank * CONS + c;
        k30_walk w = { cluster_id, cluster_id };
        int s = 0, t, kb, ke, v;
        uint32_t phase = 0;
        int nchunk = 0;                /* staged chunks so far (k30_epilogue_staged) */
        while (k30_walk_next(&p, &w, &t, &kb, &ke, &v)) {
            int ctm, tn;
            k30_tile_coords(t, ctiles_m, p.tiles_n, K31_GROUP_M / K31_CLUSTER, &ctm, &tn);
            const int tm = ctm * K31_CLUSTER + (int)rank;
            if constexpr (F8)
                k30_consume_fp8<BM, BN, F8>(&p, p.f8_sa, p.f8_sb, acc, ring, full_bar, empty, K31_CLUSTER, ke - kb, kb,
                                            c, warp, lane, tm * BM, tn * BN, &s, &phase);
            else
                k30_consume_tile<A_MN, B_MN, BM, BN, 0, 1>(acc, ring, full_bar, empty, K31_CLUSTER, ke - kb, c, lane,
                                                           &s, &phase);
            if (v >= 0) {
                if (v < p.sk_tiles * (p.sk_slices - 1)) {
                    /* Not the tile's last slice: leave the sum to its owner. */
                    k30_sk_save<BN>(&p, acc, v * (K31_CLUSTER * CONS) + sub, tid, 1 + c);
                    continue;
                }
                k30_sk_gather<BN>(&p, acc, t - p.sk_first, sub, K31_CLUSTER * CONS, tid, 1 + c);
            }
            if constexpr (F8)
                k30_fp8_finish<BN>(&p, p.f8_sa, p.f8_sb, acc, tm * BM + 64 * c, tn * BN, warp, lane);
            if constexpr (EPI) {   /* the tile's final sum, on its owner */
                k30_epi_store<BN, K30_EPI_PLAIN>(&p, acc, tm * BM + 64 * c, tn * BN, warp, lane, ebuf, epp, 1 + c,
                                                 &nchunk);
                continue;
            }
            if (p.c_staged)
                k30_epilogue_staged<BN>(&p, acc, tm * BM + 64 * c, tn * BN, warp, lane, ebuf, epp, 1 + c, &nchunk);
            else
                k30_epilogue_direct<BN>(&p, acc, tm * BM + 64 * c, tn * BN, warp, lane);
        }
        /* The last TMA stores must have read shared memory before it goes. */
        if (p.c_tma && threadIdx.x % 128 == 0)
            tk_tma_store_wait_read(0);
    }
#endif
}

/* The instances of table.def's k31 lines (k31_run's parameters). */
template <int A_MN, int B_MN, int BM, int BN>
static __global__ void __launch_bounds__(K30_THREADS_CFG(BM, 0), 1) k31_kernel(const __grid_constant__ k30_params p)
{
    k31_run<A_MN, B_MN, BM, BN, 0>(p);
}

/* With a fused epilogue (tk_epi_args; issue 39): k31_run with EPI = 1. A
 * kernel of its own rather than another template argument of k31_kernel,
 * whose mangled name would change with it (k30_epi_kernel says why that
 * matters). */
template <int A_MN, int B_MN, int BM, int BN>
static __global__ void __launch_bounds__(K30_THREADS_CFG(BM, 0), 1)
    k31_epi_kernel(const __grid_constant__ k30_params p)
{
    k31_run<A_MN, B_MN, BM, BN, 1>(p);
}

/* With FP8 operands (issue 40): k31_run with F8 = 4 * format of A +
 * format of B, K-major A and B, BN-wide tiles a CTA (k31_has_fp8's
 * lines; k30_consume_fp8); its own kernel as k31_epi_kernel is. A template
 * because the formats are part of the wgmma instruction's name. */
template <int BN, int F8>
static __global__ void __launch_bounds__(K30_THREADS_CFG(K30_BM, 0), 1)
    k31_fp8_kernel(const __grid_constant__ k30_params p)
{
    k31_run<0, 0, K30_BM, BN, 0, F8>(p);
}

template <int BN>
static const void *k31_fp8_func_bn(int fa, int fb)
{
    if (fa == TK_FP8_E4M3)
        return fb == TK_FP8_E4M3 ? (const void *)k31_fp8_kernel<BN, 4 * TK_FP8_E4M3 + TK_FP8_E4M3>
                                 : (const void *)k31_fp8_kernel<BN, 4 * TK_FP8_E4M3 + TK_FP8_E5M2>;
    return fb == TK_FP8_E4M3 ? (const void *)k31_fp8_kernel<BN, 4 * TK_FP8_E5M2 + TK_FP8_E4M3>
                             : (const void *)k31_fp8_kernel<BN, 4 * TK_FP8_E5M2 + TK_FP8_E5M2>;
}

/* Whether configuration (bm, bn) has FP8 instances: k31_wgmma_cluster's
 * 128 x 256 tiles and k45_cluster_128x128's 128 x 128. */
static int k31_has_fp8(int bm, int bn)
{
    return bm == K30_BM && (bn == K30_BN || bn == 128);
}

static const void *k31_fp8_func(int bn, int fa, int fb)
{
    return bn == 128 ? k31_fp8_func_bn<128>(fa, fb) : k31_fp8_func_bn<K30_BN>(fa, fb);
}

/* The instance of configuration (bm, bn) a CTA for a's operand majors: one
 * per k31 line of table.def. */
static const void *k31_func(int bm, int bn, tk_op op_a, tk_op op_b)
{
#define TK_MATCH_k31 TK_T_PROBE
#define K31_ROW(bm_, bn_)              \
    if (bm == (bm_) && bn == (bn_))    \
        return K30_SELECT_CFG(k31_kernel, op_a, op_b, bm_, bn_);
#define TK_CONFIG(name, family, bm_, bn_, bk, wm, wn, swap, first_rank, auto_rank, description) \
    TK_T_WHEN(TK_MATCH_##family)(K31_ROW(bm_, bn_))
#include "table.def"
#undef K31_ROW
#undef TK_MATCH_k31
    return NULL;
}

/* Whether configuration (bm, bn) has k31_epi_kernel instances: k31's
 * default, the 128 x 256 tiles auto-dispatch gives MLP-like shapes, alone
 * so far (k39_cluster_64x128 has none), to keep the build's time. */
static int k31_has_epi(int bm, int bn)
{
    return bm == K30_BM && bn == K30_BN;
}

static void k31_resources_cfg(int bm, int bn, const tk_args *a, tk_resources *r)
{
    r->func = a ? k31_func(bm, bn, a->op_a, a->op_b) : k31_func(bm, bn, TK_OP_N, TK_OP_T);
    if (a && a->epi)   /* NULL where the configuration has no such instance (k31_supports_cfg refuses it) */
        r->func = k31_has_epi(bm, bn) ? K30_SELECT_CFG(k31_epi_kernel, a->op_a, a->op_b, K30_BM, K30_BN) : NULL;
    if (a && a->fp8)   /* NULL where the configuration has none (k31_supports_cfg refuses it) */
        r->func = k31_has_fp8(bm, bn) ? k31_fp8_func(bn, a->fp8->fa, a->fp8->fb) : NULL;
    r->threads = K30_THREADS_CFG(bm, 0);
    r->dyn_smem = (size_t)K30_SMEM_CFG(bm, bn, 0);
}

static tk_status k31_launch_cfg(int bm, int bn, const tk_args *a, cudaStream_t stream, char *why, size_t len)
{
    tk_resources r;
    k31_resources_cfg(bm, bn, a, &r);
    return k30_launch_cluster_tma_c(&r, K31_CLUSTER, bm, bn, a, stream, why, len);
}

/* A CTA pair's last tile reaches K31_CLUSTER * bm rows past M at most. */
static tk_status k31_supports_cfg(int bm, int bn, const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    tk_status st = a->fp8 && !k31_has_fp8(bm, bn) ? TK_ERR_NOT_SUPPORTED : TK_SUCCESS;
    if (st)
        snprintf(why, len, "FP8 operands: of the cluster configurations only k31_wgmma_cluster and "
                           "k45_cluster_128x128 have FP8 instances");
    if (st == TK_SUCCESS)
        st = k30_supports_fp8(a, 1, why, len);
    if (st == TK_SUCCESS)
        st = k30_supports_common(a, dev, K31_CLUSTER * bm, why, len);
    if (st == TK_SUCCESS)
        st = k30_supports_epi(a, k31_has_epi(bm, bn), 0,
                              "only the 128 x 256 tiles (k31_wgmma_cluster, k30_wgmma_tma) have instances with a "
                              "fused epilogue yet",
                              why, len);
    return st;
}

/* Cluster tiles (K31_CLUSTER * bm x bn) of a problem. */
static long long k31_ctiles(int bm, int bn, const tk_args *a)
{
    const long long ctile_rows = (a->m + K31_CLUSTER * bm - 1) / (K31_CLUSTER * bm);
    return ctile_rows * ((a->n + bn - 1) / bn);
}

/* The split workspace, sized for one cluster per SM pair; none when no
 * split can apply (k30_sk_may_split). */
static size_t k31_workspace_cfg(int bm, int bn, const tk_args *a, const tk_device *dev, size_t *nflags)
{
    const int max_clusters = dev->sm_count / K31_CLUSTER;
    const long long ctiles = k31_ctiles(bm, bn, a);
    const int k_tiles = (int)((a->k + K30_BK - 1) / K30_BK);
    *nflags = 0;
    return k30_sk_may_split(ctiles, k_tiles, max_clusters)
               ? k30_sk_bytes(max_clusters, K31_CLUSTER * K30_CONS(bm, 0), nflags)
               : 0;
}

/* Auto-dispatch prefers k30_wgmma_tma (rank 29) over this kernel where M
 * fits one block row (the cluster's second CTA has no rows) or N one block
 * column, unless this kernel splits the few tiles there: measured on the
 * H100 (bf16 C), k30 / k31 x cuBLAS: 64 x 65536 x 4096 0.919 / 0.879,
 * 65536 x 64 x 4096 0.753 / 0.503, 32768 x 128 x 1024 0.805 / 0.788,
 * 128 x 32768 x 1024 0.910 / 0.901. */
static int k31_rank(const tk_args *a, const tk_device *dev)
{
    const int max_clusters = dev->sm_count / K31_CLUSTER;
    const long long ctiles = k31_ctiles(K30_BM, K30_BN, a);
    const int k_tiles = (int)((a->k + K30_BK - 1) / K30_BK);
    return (a->m <= K30_BM || a->n <= K30_BN) && !(ctiles < max_clusters && k30_sk_may_split(ctiles, k_tiles, max_clusters))
               ? 28
               : 30;
}

/* The family's functions: each reads its configuration's tile from the
 * registry row k (a k31 line of src/kernels/table.def). */
static tk_status k31_family_supports(const tk_kernel *k, const tk_args *a, const tk_device *dev, char *why,
                                     size_t len)
{
    return k31_supports_cfg(k->bm, k->bn, a, dev, why, len);
}

static void k31_family_resources(const tk_kernel *k, const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)dev;
    k31_resources_cfg(k->bm, k->bn, a, r);
}

static tk_status k31_family_launch(const tk_kernel *k, const tk_args *a, const tk_device *dev, cudaStream_t stream,
                                   char *why, size_t len)
{
    (void)dev;
    return k31_launch_cfg(k->bm, k->bn, a, stream, why, len);
}

static size_t k31_family_workspace(const tk_kernel *k, const tk_args *a, const tk_device *dev, size_t *nflags)
{
    return k31_workspace_cfg(k->bm, k->bn, a, dev, nflags);
}

/* The share of the last wave's cluster slots a bm x bn configuration
 * fills (1: every wave full), for FP8's choice between tile widths. */
static double k31_wave_fill(int bm, int bn, const tk_args *a, const tk_device *dev)
{
    const long long slots = dev->sm_count / K31_CLUSTER, ctiles = k31_ctiles(bm, bn, a);
    return (double)ctiles / (double)(((ctiles + slots - 1) / slots) * slots);
}

/* FP8 (session 30, H200, same call, both orders; docs/NOTES.md): k31's
 * 128 x 256 tiles ran fastest where waves are full (per tensor 8192^3 1320
 * TFLOP/s against k45's 1190-1280 and k33's 1190), k45's 128 x 128 where
 * the wider tiles leave much of the last wave empty (2048 x 7168 x 2048:
 * 1078 against 972, 4096 x 2112 x 7168: 1122 against 1050): per full wave
 * k31 did 1.03-1.05x k45's, so k45 where its waves are fuller by more than
 * that. Block scales: k31 everywhere (k45's pipelined loop reads the
 * scales after its wait: 748-855 against 796-1005). */
static int k31_fp8_rank(const tk_kernel *k, const tk_args *a, const tk_device *dev)
{
    if (!k31_has_fp8(k->bm, k->bn))
        return 0;
    const int narrow = a->fp8->mode != TK_SCALE_BLOCK &&
                       k31_wave_fill(K30_BM, 128, a, dev) > 1.05 * k31_wave_fill(K30_BM, K30_BN, a, dev);
    return (k->bn == 128) == narrow ? 33 : 30;
}

/* k39_cluster_64x128: this kernel with 64 x 128 tiles a CTA (one consumer
 * warpgroup), the CTA pair along M sharing B by multicast (cluster tiles
 * 128 x 128); auto-dispatch's choice where k30_pick_cluster64 says (rows
 * that are not 128-byte multiples, one wave). */
static int k31_family_rank(const tk_kernel *k, const tk_args *a, const tk_device *dev)
{
    if (a->fp8)   /* above k33_wgmma_128x128's FP8 instance (31) */
        return k31_fp8_rank(k, a, dev);
    if (k->bm == 64)
        return k30_pick_cluster64(a, dev->sm_count) ? k->first_rank : k->auto_rank;
    if (k->bn != K30_BN)   /* k45_cluster_128x128: FP8's configuration, not a dense choice */
        return 0;
    return k31_rank(a, dev);
}

extern "C" const tk_family_ops tk_ops_k31 = { k31_family_supports, k31_family_resources, k31_family_launch,
                                              k31_family_workspace, k31_family_rank };
