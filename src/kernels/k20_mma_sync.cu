/* k20_mma_sync - the portable fast kernel: mma.sync + ldmatrix + a
 * multi-stage cp.async pipeline, no warpgroups, TMA or wgmma (issue 4).
 *
 * What it changes against k01_naive (the only kernel before it), and why:
 *  - Tensor cores: mma.sync m16n8k16 bf16 -> fp32; each warp owns a 64x64
 *    tile of C (128 fp32 accumulators per thread), so every A fragment is
 *    used 8 times and every B fragment 4 times from registers.
 *  - Shared-memory staging with cp.async (16 bytes per copy, L1 bypassed):
 *    STAGES tiles of A and B in flight, so global latency overlaps the MMAs;
 *    one __syncthreads per K tile of 64.
 *  - The 128-byte XOR swizzle (src/tiles/swizzle.cuh): every operand tile is
 *    made of panels of 128-byte rows, so the cp.async writes and the
 *    ldmatrix reads are both free of bank conflicts without padding.
 *  - ldmatrix.x4 fragments; the .trans form serves the operands stored with
 *    M or N contiguous (op_a T, op_b N), so all four op combinations share
 *    one smem layout rule.
 *  - Register double-buffering: the fragments of k16 slice s+1 are loaded
 *    while the MMAs of slice s run; the global copies of the next stage are
 *    spread over the four slices instead of issued in one burst.
 *  - L2 super-tile order (src/tiles/raster.cuh): GROUP_M tile rows per group.
 *  - Stage count chosen at launch from the device's shared memory (4 on
 *    H100, 3 on A100, 2 on sm_86/89), so the same kernel runs everywhere.
 *  - Edges: zero-fill cp.async (src_bytes < 16) on the M/N/K borders, bounded
 *    stores; fp32 stores are float2, bf16 stores are bf16 pairs.
 *
 * Tile configuration: BM = 128, BN = 256, BK = 64, 8 warps as 2 x 4 with
 * WM = WN = 64, 256 threads, 48 KB per stage (4 stages = 192 KB on H100),
 * GROUP_M = 16, __launch_bounds__(256, 1): 233-254 registers, no spills.
 *
 * Measured (H100 SXM, 8192^3 bf16 -> fp32, NN, helper H4's harness: median of
 * 20 with L2 flushed; the clock falls to 1575-1680 MHz under this load, so
 * two runs differ by up to 10%; figures in TFLOP/s, cuBLAS in the same run):
 *   run A: cuBLAS 788.1; GROUP_M 8: 413.3; 3 stages: 405.9; 256x128 tiles:
 *          412.5; GROUP_M 16: 439.5; GROUP_M 4: 416.3.
 *   run B: cuBLAS 774.2; GROUP_M 8: 375.9; GROUP_M 16: 424.0; GROUP_M 32:
 *          412.6; 256x128 GROUP_M 16: 393.9; 128x128 tiles with 4 warps and
 *          2 blocks/SM (3 stages): 389.0 (GROUP_M 8), 380.0 (GROUP_M 16).
 *   Hence GROUP_M = 16, 128x256, 4 stages. Bank conflicts (ncu, 2048^3):
 *   341 on shared loads out of 4.2M wavefronts, 0 on stores. At 8192^3 the
 *   tensor pipe is active 72% of the cycles (ncu, GROUP_M 8), where 100% is the
 *   mma.sync peak this H100 reached in a register-only loop: 645 TFLOP/s
 *   at 1826 MHz, 2678 flop/clk/SM (65% of the wgmma rate).
 *   run C (with k21, tilekit bench): 8192^3 cuBLAS 781.5, k20 416.7 (0.533x);
 *          4096^3 754.5 vs 427.9; 2048^3 582.9 vs 344.8; 8000^3 761.8 vs 392.0.
 * Figure: 0.55x cuBLAS at 8192^3 (run B), 0.53x (run C); the issue's 0.75x
 * is not reached. k21_mma_fastload removes most of the loader arithmetic.
 * Reproduce: build/tilekit bench --kernel k20_mma_sync
 *
 * Templates: the kernel is specialised on the two operand layouts (which
 * decide ldmatrix vs ldmatrix.trans and the loader's direction at compile
 * time); C cannot express that without duplicating the kernel four times.
 */
#include "k20_core.cuh"

/* The configuration (tiles, stages, GROUP_M) and every device step are in
 * k20_core.cuh, shared with k21_mma_fastload. */
template <int A_T, int B_T>
static __global__ void __launch_bounds__(K20_THREADS, K20_MIN_BLOCKS) k20_kernel(tk_args p, int stages, int group_m)
{
    extern __shared__ __align__(1024) uint8_t k20_smem[];
    k20_pipe s;
    const k20_block b = k20_block_init<A_T, B_T>(&p, &s, tk_smem_u32(k20_smem), stages, group_m);
    k20_prologue<A_T, B_T>(&p, &s, b.ktiles, 0);

    float acc[K20_MT][K20_NT][4];
    uint32_t af[2][K20_MT][4], bf[2][K20_NT][2];
    k20_mainloop_start<A_T, B_T>(&b, &s, acc, af, bf);
    /* Every copy predicated on the M/N/K borders (FULL = 0): k21 drops that
     * arithmetic where a block's tiles lie inside the matrices. */
    for (int kt = 0; kt < b.ktiles; kt++)
        k20_ktile<A_T, B_T, 0>(&p, &s, acc, af, bf, kt + stages - 1 < b.ktiles);
    tk_cp_async_wait_all();
    k20_epilogue(&p, &b, acc);
}

/* ---- host side ---- */

/* The four instances, in k20_pick's order: (op_a, op_b) = NN, NT, TN, TT. */
static const k20_fn k20_fns[4] = { k20_kernel<0, 0>, k20_kernel<0, 1>, k20_kernel<1, 0>, k20_kernel<1, 1> };

/* The family's functions (src/kernels/table.def: its configuration). */
K20_FAMILY_OPS(k20, k20_fns)
