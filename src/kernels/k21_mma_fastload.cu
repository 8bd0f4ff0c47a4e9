/* k21_mma_fastload - k20_mma_sync with bounds-free global loads for the
 * tiles that lie inside the matrices.
 *
 * What it changes against k20 and why: most of k20's instructions per K tile
 * were the bounds arithmetic of its predicated cp.async, which only edge
 * tiles need; with only 2 warps per scheduler they left the tensor pipe idle.
 * k21 decides once per K tile (uniform over the block) whether the whole tile
 * is inside A and B; if so the copies are plain 16-byte cp.async at a pointer
 * that advances by a fixed step (242 instructions per warp per K tile against
 * k20's 439). Edge tiles take k20's path; everything else is k20's. The ncu
 * and SASS findings and the runs: docs/kernels/k20.md.
 *
 * Tile configuration: as k20: BM = 128, BN = 256, BK = 64, 8 warps of
 * 64 x 64, 4 stages (192 KB) on H100, GROUP_M = 16, __launch_bounds__(256, 1):
 * 240-244 registers, no spills (tilekit info on the H100: 241 registers,
 * 196608 bytes dynamic shared memory, 1 block/SM).
 * Figure: 0.636x cuBLAS at 8192^3 (497.3 vs 781.5 TFLOP/s, tilekit bench);
 * the issue's 0.75x is not reached. The mma.sync ceiling this H100 showed in
 * a register-only loop is 645 TFLOP/s at 1826 MHz (2678 flop/clk/SM).
 * Reproduce: build/tilekit bench --kernel k21_mma_fastload
 *
 * Fused epilogues (issue 39): k21_epi_kernel, the same product and
 * k20_core.cuh's k20_epi_store; auto-dispatch's choice for epilogues on
 * sm_80 (and on sm_90 where k30 and k31 refuse one). Not yet timed on a GPU.
 *
 * Templates: the kernel is specialised on the two operand layouts (which
 * decide ldmatrix vs ldmatrix.trans and the loader's direction at compile
 * time) and its K-tile step on whether the copies need bounds checks; C
 * cannot express that without duplicating the kernel body eight times.
 */
#include "k20_core.cuh"

/* The configuration (tiles, stages, GROUP_M; the K20_* macros) and every
 * device step, the bounds-free copies included, are in k20_core.cuh, shared
 * with k20_mma_sync; this file holds the decision where to use them. */

/* The product of the block's tile into acc. EPI: k20_copy's (GATED's
 * tiles are BN / 2 columns of N / 2 in B and b_up). */
template <int A_T, int B_T, int EPI>
static __device__ __forceinline__ void k21_product(const tk_args *p, const k20_block *b, k20_pipe *s, int stages,
                                                   float acc[K20_MT][K20_NT][4])
{
    /* A block whose C tile lies inside C reads A and B tiles that lie inside
     * A and B, except in the last, partial K tile. */
    const int interior = b->m0 + K20_BM <= (int)p->m &&
                         (EPI == K20_EPI_GATED ? b->n0 + K20_BN / 2 <= (int)p->n / 2 : b->n0 + K20_BN <= (int)p->n);
    k20_prologue<A_T, B_T, EPI>(p, s, b->ktiles, interior);
    uint32_t af[2][K20_MT][4], bf[2][K20_NT][2];
    k20_mainloop_start<A_T, B_T>(b, s, acc, af, bf);
    int kt = 0;
    if (interior) {
        /* K tiles whose copies (of K tile kt + stages - 1) are complete tiles */
        const int kfast = (int)p->k / K20_BK - (stages - 1);
        for (; kt < kfast; kt++)
            k20_ktile<A_T, B_T, 1, EPI>(p, s, acc, af, bf, 1);
    }
    for (; kt < b->ktiles; kt++)
        k20_ktile<A_T, B_T, 0, EPI>(p, s, acc, af, bf, kt + stages - 1 < b->ktiles);
    tk_cp_async_wait_all();
}

/* k21_kernel (the plain product), k21_epi_kernel (the fused epilogues,
 * tk_epi_args) and their instances, k21_fns and k21_epi_fns (k20_core.cuh). */
K20_KERNELS(k21, k21_product)

/* ---- host side ---- */

/* The family's functions (src/kernels/table.def: its configuration). */
K20_FAMILY_OPS(k21, k21_fns, k21_epi_fns)
