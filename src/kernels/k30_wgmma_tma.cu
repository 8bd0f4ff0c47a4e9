/* k30_wgmma_tma - the Hopper kernel: TMA loads, wgmma, warp specialization,
 * persistent grid, super-tile order.
 *
 * Builds on the sm_80 tensor-core kernels by moving to Hopper's own units:
 * - One producer warpgroup: a single thread issues TMA (cp.async.bulk.tensor)
 *   loads of A and B tiles into a ring of K30_STAGES shared-memory stages.
 *   Each stage has a full barrier (the producer's arrive.expect_tx plus the
 *   copy engine's complete_tx bytes) and an empty barrier (one arrival per
 *   consumer warp once its wgmma reading the stage has completed). Waits are
 *   raw mbarrier try_wait.parity loops, the cheapest synchronization.
 * - Two consumer warpgroups, each computing 64 x 256 of the 128 x 256 block
 *   tile with wgmma.m64n256k16 straight from the 128B-swizzled shared tiles
 *   (no ldmatrix); one wgmma group stays in flight while the next stage is
 *   awaited, and a stage is released as soon as the group reading it is done.
 * - setmaxnreg moves registers from the producer (40) to the consumers (232):
 *   128 fp32 accumulators per consumer thread.
 * - Persistent: one block per SM walks the output tiles (t, t + grid, ...) in
 *   super-tile order (K30_GROUP_M block rows per group, down each column of the
 *   group first), so the blocks running at once share A rows and B columns in
 *   L2. The producer runs ahead into the next tile while the consumers store.
 * - Epilogue straight from the accumulators: alpha/beta (C read only when
 *   beta != 0), fp32 or bf16, pairs of columns per store, bounds-checked.
 * - Layouts: A K-major (op_a N) or M-major (op_a T), B K-major (op_b T) or
 *   N-major (op_b N), through wgmma's transpose flags; MN-major tiles are
 *   loaded as 64-wide TMA boxes (the 128-byte swizzle span) side by side.
 * Edges: TMA zero-fills rows, columns and K beyond the matrices, so partial
 * tiles and K tails need no special code; stores are bounds-checked.
 *
 * Tile configuration: BM = 128, BN = 256, BK = 64, 4 stages (48 KB each),
 * 3 warpgroups (384 threads), warpgroup tile 64 x 256, warp tile 16 x 256.
 * Needs sm_90a, 16-byte aligned A and B with leading dimensions that are
 * multiples of 8, C pairs aligned (ldc even).
 * Tensor maps are encoded on the host at every launch (no cache; a few
 * microseconds).
 * Figure: not yet measured with tilekit bench; the helper's check program
 * (tests/gpu/k30_check.cu, H100 80GB HBM3 SXM) saw 754.5 TFLOP/s = 1.005x
 * cuBLAS at 8192^3 fp32 out (0.99-1.01x over four runs), 0.96x at 4096^3,
 * 0.94-0.97x with bf16 out.
 * Auto-dispatch prefers k31_wgmma_cluster; this kernel is the fallback (rank 29)
 * where the cluster kernel refuses a problem.
 * Reproduce: build/tilekit bench --kernel k30_wgmma_tma
 */
#include <stdio.h>
#include <string.h>
#include <cuda.h>
#include "../host/kernel.h"
#include "../host/tma.h"
#include "../ptx/common.cuh"
#include "../ptx/fence.cuh"
#include "../ptx/mbarrier.cuh"
#include "../ptx/setmaxnreg.cuh"
#include "../ptx/tma.cuh"
#include "../ptx/wgmma.cuh"
#include "../tiles/epilogue.cuh"

#define K30_BM 128
#define K30_BN 256
#define K30_BK 64                      /* 64 bf16 = 128 bytes = the swizzle span */
#define K30_STAGES 4
#define K30_CONSUMERS 2                /* consumer warpgroups, 64 rows of the tile each */
#define K30_THREADS (128 * (1 + K30_CONSUMERS))
#define K30_GROUP_M 16                 /* block rows per super-tile */
#define K30_PRODUCER_REGS 40
#define K30_CONSUMER_REGS 232
#define K30_BOX 8192                   /* one 64 x 64 bf16 TMA box (MN-major tiles) */
#define K30_A_BYTES (K30_BM * K30_BK * 2)
#define K30_B_BYTES (K30_BN * K30_BK * 2)
#define K30_STAGE_BYTES (K30_A_BYTES + K30_B_BYTES)
/* + 1024 to align the ring to the 128B-swizzle pattern, + the barriers */
#define K30_SMEM_BYTES (1024 + K30_STAGES * K30_STAGE_BYTES + 2 * 8 * K30_STAGES)

static_assert(K30_BM == 64 * K30_CONSUMERS, "each consumer warpgroup owns 64 rows (one wgmma M)");
static_assert(K30_STAGE_BYTES % 1024 == 0, "stages must keep the 1024-byte swizzle alignment");
static_assert(K30_PRODUCER_REGS * 128 + K30_CONSUMER_REGS * 128 * K30_CONSUMERS <= 65536,
              "register reallocation exceeds the SM's 64K registers");
static_assert(K30_SMEM_BYTES <= 227 * 1024, "shared memory exceeds the sm_90 per-block limit");

typedef struct k30_params {
    CUtensorMap map_a;                 /* A tiles: box BM x BK (K-major) or 64 x 64 (M-major) */
    CUtensorMap map_b;                 /* B tiles: box BN x BK (K-major) or 64 x 64 (N-major) */
    void *c;
    int64_t ldc;
    int m, n;
    int tiles_m, tiles_n, k_tiles;
    float alpha, beta;
    int c_bf16;
} k30_params;

/* The device helpers exist only in the sm_90a pass (the sm_80 pass compiles
 * an empty kernel body and would warn that they are unused). */
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Output tile t -> (block row, block column) in super-tile order. */
static __device__ __forceinline__ void k30_tile_coords(int t, int tiles_m, int tiles_n, int *tm, int *tn)
{
    int per_group = K30_GROUP_M * tiles_n;
    int g = t / per_group;
    int first = g * K30_GROUP_M;
    int rows = min(tiles_m - first, K30_GROUP_M);
    int r = t - g * per_group;
    *tm = first + r % rows;
    *tn = r / rows;
}

static __device__ __forceinline__ uint32_t k30_pack_bf16x2(float lo, float hi)
{
    return (uint32_t)tk_f32_to_bf16(lo) | ((uint32_t)tk_f32_to_bf16(hi) << 16);
}

/* Stores one consumer's 64 x 256 accumulators at rows r0.., columns c0..
 * (r0, c0: the warpgroup tile's corner). Thread (warp w, lane l) holds rows
 * r0 + 16w + l/4 (+8) and column pairs c0 + 8j + 2(l%4). */
static __device__ __forceinline__ void k30_epilogue(const k30_params *p, float acc[128], int r0, int c0, int warp,
                                                    int lane)
{
    const int row = r0 + 16 * warp + (lane >> 2);
    const int col = c0 + 2 * (lane & 3);
    const bool interior = r0 + 64 <= p->m && c0 + K30_BN <= p->n;
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
                    *q = k30_pack_bf16x2(v0, v1);
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

#endif

/* A template because the operand majors are wgmma immediates and fix the
 * TMA box pattern: A_MN = 1 for M-major A (op_a T), B_MN = 1 for N-major B
 * (op_b N). */
template <int A_MN, int B_MN>
static __global__ void __launch_bounds__(K30_THREADS, 1) k30_kernel(const __grid_constant__ k30_params p)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) uint8_t k30_smem[];
    /* Stage s: A at ring + s * STAGE_BYTES, B right after it; each tile on a
     * 1024-byte boundary as the 128B swizzle requires. */
    const uint32_t ring = (tk_smem_u32(k30_smem) + 1023u) & ~1023u;
    const uint32_t full_bar = ring + K30_STAGES * K30_STAGE_BYTES;
    const uint32_t empty_bar = full_bar + 8 * K30_STAGES;
    const int wg = threadIdx.x / 128;
    const int num_tiles = p.tiles_m * p.tiles_n;

    if (threadIdx.x == 0) {
        tk_tma_prefetch_map(&p.map_a);
        tk_tma_prefetch_map(&p.map_b);
        for (int s = 0; s < K30_STAGES; s++) {
            tk_mbarrier_init(full_bar + 8 * s, 1);
            tk_mbarrier_init(empty_bar + 8 * s, 4 * K30_CONSUMERS);
        }
        tk_fence_mbarrier_init();
    }
    __syncthreads();

    if (wg == 0) {
        /* Producer warpgroup: one thread issues every load. */
        tk_setmaxnreg_dec(K30_PRODUCER_REGS);
        if (threadIdx.x == 0) {
            int s = 0;
            uint32_t phase = 0;
            for (int t = blockIdx.x; t < num_tiles; t += gridDim.x) {
                int tm, tn;
                k30_tile_coords(t, p.tiles_m, p.tiles_n, &tm, &tn);
                const int m0 = tm * K30_BM, n0 = tn * K30_BN;
                for (int kt = 0; kt < p.k_tiles; kt++) {
                    const int k0 = kt * K30_BK;
                    const uint32_t fb = full_bar + 8 * s;
                    const uint32_t sa = ring + s * K30_STAGE_BYTES, sb = sa + K30_A_BYTES;
                    /* Wait until every consumer warp has released the stage
                     * (passes at once in the first round: parity 1 of a fresh
                     * barrier reads as completed). */
                    tk_mbarrier_wait_parity(empty_bar + 8 * s, phase ^ 1);
                    /* Out-of-bounds box parts are zero-filled and still
                     * counted, so the byte count is always the full stage. */
                    tk_mbarrier_arrive_expect_tx(fb, K30_STAGE_BYTES);
                    if (A_MN) {
#pragma unroll
                        for (int j = 0; j < K30_BM / 64; j++)
                            tk_tma_load_2d(sa + j * K30_BOX, &p.map_a, m0 + 64 * j, k0, fb);
                    } else {
                        tk_tma_load_2d(sa, &p.map_a, k0, m0, fb);
                    }
                    if (B_MN) {
#pragma unroll
                        for (int j = 0; j < K30_BN / 64; j++)
                            tk_tma_load_2d(sb + j * K30_BOX, &p.map_b, n0 + 64 * j, k0, fb);
                    } else {
                        tk_tma_load_2d(sb, &p.map_b, k0, n0, fb);
                    }
                    if (++s == K30_STAGES) {
                        s = 0;
                        phase ^= 1;
                    }
                }
            }
        }
    } else {
        /* Consumer warpgroup c: rows 64c..64c+63 of each tile. */
        tk_setmaxnreg_inc(K30_CONSUMER_REGS);
        const int c = wg - 1;
        const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
        /* K-major tiles: row r (M or N) at 128r, K steps of 16 = 32 bytes
         * inside the row. MN-major tiles: K row k at 128k within 64-wide
         * boxes 8 KB apart (LBO), K steps of 16 rows = 2048 bytes. Both:
         * SBO = 1024 bytes per 8 rows. A's 64-row half c starts 8 KB in
         * either way (64 K-major rows, or the c-th M-major box). */
        const uint32_t a_lbo = A_MN ? K30_BOX : 16, b_lbo = B_MN ? K30_BOX : 16;
        const uint32_t a_kstep = A_MN ? 2048 : 32, b_kstep = B_MN ? 2048 : 32;
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; i++)
            acc[i] = 0.0f;
        int s = 0;
        uint32_t phase = 0;
        for (int t = blockIdx.x; t < num_tiles; t += gridDim.x) {
            int tm, tn;
            k30_tile_coords(t, p.tiles_m, p.tiles_n, &tm, &tn);
            int prev = 0;
            for (int kt = 0; kt < p.k_tiles; kt++) {
                const uint32_t sa = ring + s * K30_STAGE_BYTES + c * K30_BOX;
                const uint32_t sb = ring + s * K30_STAGE_BYTES + K30_A_BYTES;
                tk_mbarrier_wait_parity(full_bar + 8 * s, phase);
                tk_wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < K30_BK / 16; kk++) {
                    uint64_t da = tk_wgmma_desc_sw128(sa + kk * a_kstep, a_lbo, 1024);
                    uint64_t db = tk_wgmma_desc_sw128(sb + kk * b_kstep, b_lbo, 1024);
                    /* The first product of a tile overwrites the accumulators. */
                    tk_wgmma_m64n256k16_f32_bf16<A_MN, B_MN>(acc, da, db, kt > 0 || kk > 0);
                }
                tk_wgmma_commit();
                if (kt > 0) {
                    /* The previous stage's group is done: release it. */
                    tk_wgmma_wait(1);
                    if (lane == 0)
                        tk_mbarrier_arrive(empty_bar + 8 * prev);
                }
                prev = s;
                if (++s == K30_STAGES) {
                    s = 0;
                    phase ^= 1;
                }
            }
            tk_wgmma_wait(0);
            if (lane == 0)
                tk_mbarrier_arrive(empty_bar + 8 * prev);
            /* The epilogue must read the accumulators after the wait. */
#pragma unroll
            for (int i = 0; i < 128; i++)
                tk_wgmma_reg_fence(acc[i]);
            k30_epilogue(&p, acc, tm * K30_BM + 64 * c, tn * K30_BN, warp, lane);
        }
    }
#endif
}

static tk_status k30_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    if (dev->sm != 90) {
        snprintf(why, len,
                 "needs sm_90a (wgmma, setmaxnreg and TMA code built for sm_90a runs only on sm_90); this GPU is "
                 "sm_%d",
                 dev->sm);
        return TK_ERR_NOT_SUPPORTED;
    }
    if (a->m > INT32_MAX || a->n > INT32_MAX || a->k > INT32_MAX) {
        snprintf(why, len, "TMA coordinates are 32-bit: M, N and K must be below 2^31");
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

static const void *k30_func(tk_op op_a, tk_op op_b)
{
    int a_mn = op_a == TK_OP_T, b_mn = op_b == TK_OP_N;
    if (a_mn)
        return b_mn ? (const void *)k30_kernel<1, 1> : (const void *)k30_kernel<1, 0>;
    return b_mn ? (const void *)k30_kernel<0, 1> : (const void *)k30_kernel<0, 0>;
}

static void k30_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)dev;
    r->func = a ? k30_func(a->op_a, a->op_b) : k30_func(TK_OP_N, TK_OP_T);
    r->threads = K30_THREADS;
    r->dyn_smem = K30_SMEM_BYTES;
}

static tk_status k30_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    k30_params p;
    memset(&p, 0, sizeof p);
    tk_status st;
    /* A: M x K (K-major, box BM x BK) or stored K x M (M-major, 64 x 64 boxes). */
    if (a->op_a == TK_OP_N)
        st = tk_tma_map_2d(&p.map_a, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a->a, a->m, a->k, a->lda, K30_BM, K30_BK,
                           CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    else
        st = tk_tma_map_2d(&p.map_a, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a->a, a->k, a->m, a->lda, K30_BK, 64,
                           CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    if (st)
        return st;
    /* B: stored N x K (op T, K-major, box BN x BK) or K x N (op N, N-major, 64 x 64 boxes). */
    if (a->op_b == TK_OP_T)
        st = tk_tma_map_2d(&p.map_b, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a->b, a->n, a->k, a->ldb, K30_BN, K30_BK,
                           CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    else
        st = tk_tma_map_2d(&p.map_b, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a->b, a->k, a->n, a->ldb, K30_BK, 64,
                           CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    if (st)
        return st;
    p.c = a->c;
    p.ldc = a->ldc;
    p.m = (int)a->m;
    p.n = (int)a->n;
    p.tiles_m = (int)((a->m + K30_BM - 1) / K30_BM);
    p.tiles_n = (int)((a->n + K30_BN - 1) / K30_BN);
    p.k_tiles = (int)((a->k + K30_BK - 1) / K30_BK);
    p.alpha = a->alpha;
    p.beta = a->beta;
    p.c_bf16 = a->c_type == TK_BF16;

    const void *func = k30_func(a->op_a, a->op_b);
    cudaError_t e = cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, K30_SMEM_BYTES);
    if (e == cudaSuccess) {
        long long tiles = (long long)p.tiles_m * p.tiles_n;
        unsigned grid = (unsigned)(tiles < dev->sm_count ? tiles : dev->sm_count);
        void *args[] = { &p };
        e = cudaLaunchKernel(func, dim3(grid), dim3(K30_THREADS), args, K30_SMEM_BYTES, stream);
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

extern "C" const tk_kernel tk_kernel_k30_wgmma_tma = {
    "k30_wgmma_tma",
    "Hopper TMA + wgmma: producer warpgroup, 2 consumer warpgroups (64x256), 4-stage mbarrier ring, persistent, "
    "super-tiles",
    90, K30_BM, K30_BN, 16, 256, 29,
    k30_supports, k30_resources, k30_launch,
};
