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
 * microseconds). The configuration, loops and epilogue live in k30_core.cuh,
 * shared with k31_wgmma_cluster.
 * Figure: not yet measured with tilekit bench; the helper's check program
 * (tests/gpu/k30_check.cu, H100 80GB HBM3 SXM) saw 754.5 TFLOP/s = 1.005x
 * cuBLAS at 8192^3 fp32 out (0.99-1.01x over four runs), 0.96x at 4096^3,
 * 0.94-0.97x with bf16 out.
 * Auto-dispatch prefers k31_wgmma_cluster; this kernel is the fallback (rank 29)
 * where the cluster kernel refuses a problem.
 * Reproduce: build/tilekit bench --kernel k30_wgmma_tma
 */
#include "k30_core.cuh"

#define K30_GROUP_M 16                 /* block rows per super-tile */
#define K30_SMEM_BYTES K30_SMEM_WITH(0)

static_assert(K30_SMEM_BYTES <= 227 * 1024, "shared memory exceeds the sm_90 per-block limit");

/* A template because the operand majors are wgmma immediates and fix the
 * TMA box pattern: A_MN = 1 for M-major A (op_a T), B_MN = 1 for N-major B
 * (op_b N). */
template <int A_MN, int B_MN>
static __global__ void __launch_bounds__(K30_THREADS, 1) k30_kernel(const __grid_constant__ k30_params p)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) uint8_t k30_smem[];
    const uint32_t ring = k30_ring(k30_smem);
    const uint32_t full_bar = ring + K30_RING_BYTES;
    const uint32_t empty_bar = full_bar + 8 * K30_STAGES;
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0)
        k30_init(&p, full_bar, empty_bar, 4 * K30_CONSUMERS);
    __syncthreads();

    if (wg == 0) {
        /* Producer warpgroup: one thread issues every load. */
        tk_setmaxnreg_dec(K30_PRODUCER_REGS);
        if (threadIdx.x == 0)
            k30_produce<A_MN, B_MN>(&p, ring, full_bar, empty_bar, blockIdx.x, gridDim.x, p.tiles_m, K30_GROUP_M, 1,
                                    0);
    } else {
        /* Consumer warpgroup c: rows 64c..64c+63 of each tile. */
        tk_setmaxnreg_inc(K30_CONSUMER_REGS);
        const int c = wg - 1;
        const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
        const uint32_t empty[1] = { empty_bar };
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; i++)
            acc[i] = 0.0f;
        int s = 0;
        uint32_t phase = 0;
        for (int t = blockIdx.x; t < p.tiles_m * p.tiles_n; t += gridDim.x) {
            int tm, tn;
            k30_tile_coords(t, p.tiles_m, p.tiles_n, K30_GROUP_M, &tm, &tn);
            k30_consume_tile<A_MN, B_MN>(acc, ring, full_bar, empty, 1, p.k_tiles, c, lane, &s, &phase);
            k30_epilogue_direct(&p, acc, tm * K30_BM + 64 * c, tn * K30_BN, warp, lane);
        }
    }
#endif
}

static tk_status k30_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    return k30_supports_common(a, dev, 0, why, len);
}

static void k30_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)dev;
    r->func = a ? K30_SELECT(k30_kernel, a->op_a, a->op_b) : K30_SELECT(k30_kernel, TK_OP_N, TK_OP_T);
    r->threads = K30_THREADS;
    r->dyn_smem = K30_SMEM_BYTES;
}

static tk_status k30_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    k30_params p;
    tk_status st = k30_fill_params(&p, a, 1, why, len);
    if (st)
        return st;
    const void *func = K30_SELECT(k30_kernel, a->op_a, a->op_b);
    cudaError_t e = cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, K30_SMEM_BYTES);
    if (e == cudaSuccess) {
        long long tiles = (long long)p.tiles_m * p.tiles_n;
        unsigned grid = (unsigned)(tiles < dev->sm_count ? tiles : dev->sm_count);
        void *args[] = { &p };
        e = cudaLaunchKernel(func, dim3(grid), dim3(K30_THREADS), args, K30_SMEM_BYTES, stream);
    }
    return k30_launch_status(e, why, len);
}

extern "C" const tk_kernel tk_kernel_k30_wgmma_tma = {
    "k30_wgmma_tma",
    "Hopper TMA + wgmma: producer warpgroup, 2 consumer warpgroups (64x256), 4-stage mbarrier ring, persistent, "
    "super-tiles",
    90, K30_BM, K30_BN, 16, 256, 29,
    k30_supports, k30_resources, k30_launch,
};
