/* k20_mma_sync - the portable fast kernel: mma.sync + ldmatrix + a
 * multi-stage cp.async pipeline, no warpgroups, TMA or wgmma (issue 4).
 *
 * What it changes against k01_naive (the only kernel before it), and why:
 * tensor cores (mma.sync m16n8k16, a 64x64 tile of C per warp, so fragments
 * are reused from registers); STAGES tiles of A and B in flight through
 * cp.async, so global latency overlaps the MMAs; the 128-byte XOR swizzle, so
 * the copies and the ldmatrix reads are free of bank conflicts without
 * padding; register double-buffering of the k16 slices; L2 super-tile order;
 * a stage count chosen at launch from the device's shared memory, so the same
 * kernel runs everywhere. Edges: zero-fill cp.async, bounded stores. Each
 * point in full: docs/kernels/k20.md.
 *
 * Tile configuration: BM = 128, BN = 256, BK = 64, 8 warps as 2 x 4 with
 * WM = WN = 64, 256 threads, 48 KB per stage (4 stages = 192 KB on H100),
 * GROUP_M = 16, __launch_bounds__(256, 1): 233-254 registers, no spills.
 * Measured on an H100 SXM, bf16 -> fp32, NN, cuBLAS in the same run; runs A-C
 * (A and B chose the tiles, GROUP_M and the stages) in docs/kernels/k20.md:
 * Figure: 0.55x cuBLAS at 8192^3 (run B), 0.53x (run C); the issue's 0.75x
 * is not reached. k21_mma_fastload removes most of the loader arithmetic.
 * Reproduce: build/tilekit bench --kernel k20_mma_sync
 *
 * Fused epilogues (issue 39): k20_epi_kernel, the same product and
 * k20_core.cuh's k20_epi_store; not yet timed on a GPU.
 *
 * Templates: the kernel is specialised on the two operand layouts (which
 * decide ldmatrix vs ldmatrix.trans and the loader's direction at compile
 * time); C cannot express that without duplicating the kernel four times.
 */
#include "k20_core.cuh"

/* The configuration (tiles, stages, GROUP_M) and every device step are in
 * k20_core.cuh, shared with k21_mma_fastload. */

/* The product of the block's tile into acc. Every copy predicated on the
 * M/N/K borders (FULL = 0): k21 drops that arithmetic where a block's
 * tiles lie inside the matrices. EPI: k20_copy's (GATED's B tiles). */
template <int A_T, int B_T, int EPI>
static __device__ __forceinline__ void k20_product(const tk_args *p, const k20_block *b, k20_pipe *s, int stages,
                                                   float acc[K20_MT][K20_NT][4])
{
    k20_prologue<A_T, B_T, EPI>(p, s, b->ktiles, 0);
    uint32_t af[2][K20_MT][4], bf[2][K20_NT][2];
    k20_mainloop_start<A_T, B_T>(b, s, acc, af, bf);
    for (int kt = 0; kt < b->ktiles; kt++)
        k20_ktile<A_T, B_T, 0, EPI>(p, s, acc, af, bf, kt + stages - 1 < b->ktiles);
    tk_cp_async_wait_all();
}

/* k20_kernel (the plain product), k20_epi_kernel (the fused epilogues,
 * tk_epi_args) and their instances, k20_fns and k20_epi_fns (k20_core.cuh). */
K20_KERNELS(k20, k20_product)

/* ---- host side ---- */

/* The family's functions (src/kernels/table.def: its configuration). */
K20_FAMILY_OPS(k20, k20_fns, k20_epi_fns)
