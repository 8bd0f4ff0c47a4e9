/* k36_wgmma_swap - k30_wgmma_tma with the operands' roles swapped, for
 * small M: C^T = op(B)^T A^T, so that N runs along wgmma's M (64 rows of B
 * a tile) and M along wgmma's N (BM = 16 or 32 rows of A a tile).
 *
 * What changes against k30_wgmma_tma and why: at small M its 128 x 64 tiles
 * are few (64 x 768 x 768: 12 tiles for 132 SMs) and each lives long
 * (docs/NOTES.md, session 9: the fixed part of one tile, start, first data,
 * epilogue, split fix-up, is about cuBLAS's whole time). cuBLAS runs such
 * shapes as narrow tiles, 64 rows of the weights by 8-80 tokens, as many as
 * fill about one wave, with a deep ring (session 9's ncu table). Here:
 * - One producer warpgroup (one thread issues the TMA loads, as in k30) and
 *   one consumer warpgroup: its wgmma takes the B tile (64 rows of N,
 *   K-major or one 64-wide N-major box) as A and the A tile (BM rows of M,
 *   K-major) as B, m64nBMk16, BM / 2 accumulators a thread.
 * - Stages of two k-tiles (K36_KA), each 64 x 64 of B plus BM x 64 of A, up
 *   to K30_NARROW_MAX_STAGES k-tiles in the ring: eight wgmma a full/empty
 *   hand-over instead of four (the hand-over cost ~170 cycles a stage,
 *   the m64n16 chain ~109 a k-tile: NOTES, session 11); a unit's odd last
 *   k-tile is paired with a box from past K, which TMA fills with zeros.
 * - Epilogue: C^T's fragments stored as C, one element a store (a warp
 *   writes 8 consecutive columns of 4 rows per instruction), alpha/beta,
 *   bounds-checked; any ldc and C alignment.
 * - The walk, split-K (fixed-order fix-up), loops and tensor maps are the
 *   k30 core's (k30_core.cuh), with the tile sizes as template arguments.
 * Needs op_a N (A K-major: its narrow tile is BM rows of 128 bytes; an
 * M-major A would need narrower swizzle boxes), sm_90a, A and B as TMA
 * requires (16-byte aligned, leading dimensions multiples of 8).
 * Configurations: k36_swap_16x64, k36_swap_32x64 (C tile BM x 64), stages
 * of 20 / 24 KB, 8 of them (K30_STAGES_MNA).
 * Figures (NVIDIA H100 80GB HBM3, fp32 C, L2 flushed, x cuBLAS in the same
 * run; docs/NOTES.md, session 12), where k30_pick_swap gives them to
 * auto-dispatch (their tiles fit one wave): 16 x 64 at 32 x 768 x 768 NT
 * 6.9 us (0.98x), 64 x 768 x 768 7.5 (0.98x), 256^3 NN 5.8 (0.96x), 32 x
 * 3584 x 3584 NT 17.8 (0.98x); 32 x 64 at 64 x 4096 x 4096 NT 22.5 (0.97x),
 * 512^3 7.1 (0.94x). Beyond one wave they lose (session 11, one k-tile a
 * stage: 1024^3 16 x 64 31.7 us, k34 10.3): the consumer loop then took
 * ~400 cycles a k-tile even with no loads, for a quarter of k34's work. A
 * 64 x 64 configuration was never the best of three on 32 low shapes and
 * left the registry (figures in docs/NOTES.md).
 * Reproduce: build/tilekit bench --kernel k36_swap_16x64,k36_swap_32x64,k34_wgmma_128x64 --shapes 64x768x768 --op-b t
 */
#include "k30_core.cuh"

#define K36_BN 64                      /* C columns a tile: wgmma's M */
#define K36_THREADS 256                /* producer warpgroup, consumer warpgroup */
#define K36_GROUP_M 16                 /* tile rows per super-tile */
/* k-tiles a stage holds: 2 halves the full/empty hand-overs per unit of K
 * (docs/NOTES.md, session 12: 3-6% faster at the one-wave k36 shapes) */
#ifndef K36_KA
#define K36_KA 2
#endif
#define K36_STAGES(bm) K30_STAGES_MNA(bm, K36_BN, K36_KA)
#define K36_RING_BYTES(bm) K30_RING_BYTES_MNA(bm, K36_BN, K36_KA)
#define K36_SMEM_BYTES(bm) (1024 + K36_RING_BYTES(bm) + 2 * 8 * K36_STAGES(bm))

static_assert(K36_SMEM_BYTES(16) <= 227 * 1024 && K36_SMEM_BYTES(32) <= 227 * 1024,
              "shared memory exceeds the sm_90 per-block limit");
static_assert(K30_STAGE_BYTES_MN(16, K36_BN) % 1024 == 0 && K30_STAGE_BYTES_MN(32, K36_BN) % 1024 == 0,
              "stages must keep the 1024-byte swizzle alignment");

/* A template because B's major is a wgmma immediate and fixes the TMA box
 * pattern (B_MN = 1 for op_b N), and BM, the tile's rows of M, fixes the
 * instruction and the accumulator count. */
template <int B_MN, int BM>
static __global__ void __launch_bounds__(K36_THREADS, 1) k36_kernel(const __grid_constant__ k30_params p)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) uint8_t k36_smem[];
    const uint32_t ring = k30_ring(k36_smem);
    const uint32_t full_bar = ring + K36_RING_BYTES(BM);
    const uint32_t empty_bar = full_bar + 8 * K36_STAGES(BM);
    if (threadIdx.x == 0)
        k30_init(&p, full_bar, empty_bar, 4, K36_STAGES(BM));
    __syncthreads();

    k30_walk w = { (int)blockIdx.x, (int)blockIdx.x };
    int s = 0, t, tm, tn, kb, ke, v;
    uint32_t phase = 0;
    if (threadIdx.x < 128) {
        /* Producer warpgroup: one thread issues every load. */
        if (threadIdx.x == 0)
            while (k30_walk_tile(&p, &w, p.tiles_m, K36_GROUP_M, &t, &tm, &tn, &kb, &ke, &v))
                k30_produce_tile<0, B_MN, BM, K36_BN, K36_KA>(&p, ring, full_bar, empty_bar, tm, tn, kb, ke, 1, 0, &s,
                                                      &phase);
    } else {
        const int tid = threadIdx.x - 128, warp = tid / 32, lane = tid % 32;
        const uint32_t empty[1] = { empty_bar };
        float acc[BM / 2];
#pragma unroll
        for (int i = 0; i < BM / 2; i++)
            acc[i] = 0.0f;
        while (k30_walk_tile(&p, &w, p.tiles_m, K36_GROUP_M, &t, &tm, &tn, &kb, &ke, &v)) {
            k30_consume_tile<0, B_MN, BM, K36_BN, 1, K36_KA>(acc, ring, full_bar, empty, 1, ke - kb, 0, lane, &s, &phase);
            if (v >= 0) {
                if (v < p.sk_tiles * (p.sk_slices - 1)) {
                    /* Not the tile's last slice: leave the sum to its owner. */
                    k30_sk_save<BM>(&p, acc, v, tid, 1);
                    continue;
                }
                k30_sk_gather<BM>(&p, acc, t - p.sk_first, 0, 1, tid, 1);
            }
            k30_epilogue_swap<BM>(&p, acc, tm * BM, tn * K36_BN, warp, lane);
        }
    }
#endif
}

/* The instance for BM (16 or 32) and B's major. */
static const void *k36_func(int bm, tk_op op_b)
{
    if (op_b == TK_OP_N)
        return bm == 16 ? (const void *)k36_kernel<1, 16> : (const void *)k36_kernel<1, 32>;
    return bm == 16 ? (const void *)k36_kernel<0, 16> : (const void *)k36_kernel<0, 32>;
}

static size_t k36_smem_bytes(int bm)
{
    return bm == 16 ? K36_SMEM_BYTES(16) : K36_SMEM_BYTES(32);
}

static tk_status k36_supports_bm(int bm, const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    if (a->op_a != TK_OP_N) {
        snprintf(why, len,
                 "op_a must be N (A stored M x K, read along K): the swapped tile reads %d rows of A as one "
                 "K-major box",
                 bm);
        return TK_ERR_NOT_SUPPORTED;
    }
    return k30_supports_common(a, dev, bm, why, len);
}

static void k36_resources_bm(int bm, const tk_args *a, tk_resources *r)
{
    r->func = k36_func(bm, a ? a->op_b : TK_OP_T);
    r->threads = K36_THREADS;
    r->dyn_smem = k36_smem_bytes(bm);
}

static tk_status k36_launch_bm(int bm, const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why,
                               size_t len)
{
    k30_params p;
    tk_status st = k30_fill_params(&p, a, 1, bm, K36_BN, why, len);
    if (st)
        return st;
    tk_resources r;
    k36_resources_bm(bm, a, &r);
    return k30_launch_one(&r, &p, a, dev, stream, why, len);
}

/* Auto-dispatch: first (41) where k30_pick_swap picks this BM, but below
 * k40_skinny (40) at M <= 16 where that takes the shape (16 x 3072 x 768
 * NT: k40 8.8 us, k36_swap_16x64 9.2; 1 x 4096 x 4096: 18.8 against 22.8);
 * a last resort elsewhere. */
static int k36_rank_bm(int bm, const tk_args *a, const tk_device *dev)
{
    if (k30_pick_swap(a, dev->sm_count) != bm)
        return 1;
    return a->m <= 16 ? 39 : 41;
}

/* One registry entry per BM: the launch contract's functions carry no
 * configuration, so each gets six one-line wrappers. */
#define K36_CONFIG(name, bm, desc)                                                                                   \
    static tk_status name##_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)              \
    {                                                                                                              \
        return k36_supports_bm(bm, a, dev, why, len);                                                              \
    }                                                                                                              \
    static void name##_resources(const tk_args *a, const tk_device *dev, tk_resources *r)                          \
    {                                                                                                              \
        (void)dev;                                                                                                 \
        k36_resources_bm(bm, a, r);                                                                                \
    }                                                                                                              \
    static tk_status name##_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why,          \
                                   size_t len)                                                                     \
    {                                                                                                              \
        return k36_launch_bm(bm, a, dev, stream, why, len);                                                        \
    }                                                                                                              \
    static size_t name##_workspace(const tk_args *a, const tk_device *dev)                                         \
    {                                                                                                              \
        return k30_workspace_mn(bm, K36_BN, a, dev);                                                               \
    }                                                                                                              \
    static int name##_rank(const tk_args *a, const tk_device *dev)                                                 \
    {                                                                                                              \
        return k36_rank_bm(bm, a, dev);                                                                            \
    }                                                                                                              \
    extern "C" const tk_kernel tk_kernel_##name = {                                                                \
        #name, desc, 90, bm, K36_BN, 16, 64, 1, name##_supports, name##_resources, name##_launch,                   \
        name##_workspace, name##_rank,                                                                             \
    };

K36_CONFIG(k36_swap_16x64, 16,
           "k30 with the roles swapped for small M: 16 x 64 C tiles as m64n16k16 of B's rows by A's, one consumer "
           "warpgroup, deep ring (op_a N)")
K36_CONFIG(k36_swap_32x64, 32,
           "k30 with the roles swapped for small M: 32 x 64 C tiles as m64n32k16 of B's rows by A's, one consumer "
           "warpgroup, deep ring (op_a N)")
