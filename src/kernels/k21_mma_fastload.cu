/* k21_mma_fastload - k20_mma_sync with bounds-free global loads for the
 * tiles that lie inside the matrices.
 *
 * What it changes against k20 and why: ncu on k20 at 8192^3 showed the
 * tensor pipe active 72% of the cycles, an issue slot busy 41% of the time,
 * and warps stalled mostly on fixed-latency dependencies and the math pipe;
 * the SASS showed about 440 instructions per warp per K tile of which only
 * 128 are HMMA, 32 LDSM and 12 LDGSTS -- most of the rest is the bounds
 * arithmetic of the predicated cp.async (row/column limits, zero-fill byte
 * counts, pointer selects), done for every copy although only edge tiles
 * need it. With only 2 warps per scheduler, those instruction runs leave the
 * tensor pipe idle. k21 decides once per K tile (uniform over the block)
 * whether the whole tile is inside A and B; if so the copies are plain
 * 16-byte cp.async at a pointer that advances by a fixed step. Edge tiles
 * and the last partial K tile take k20's predicated path unchanged.
 * Everything else (tiles, swizzle, pipeline, epilogue) is k20's.
 *
 * Tile configuration: as k20: BM = 128, BN = 256, BK = 64, 8 warps of
 * 64 x 64, 4 stages (192 KB) on H100, GROUP_M = 16, __launch_bounds__(256, 1):
 * 240-244 registers, no spills (tilekit info on the H100: 241 registers,
 * 196608 bytes dynamic shared memory, 1 block/SM).
 *
 * Measured effect (H100 SXM, one device run with k20 and cuBLAS, bf16 ->
 * fp32, NN, L2 flushed; the SM clock under this load was 1665-1680 MHz of
 * 1980, so figures move by up to ~10% between runs):
 *   SASS (sm_90a): the main loop of interior blocks is 242 instructions per
 *   warp per K tile (128 HMMA, 32 LDSM, 12 LDGSTS) against k20's 439.
 *   ncu at 8192^3 (clock locked at 1.44 GHz): tensor pipe active 80.9% of
 *   cycles (k20, then with GROUP_M 8, in an earlier run: 71.9%).
 *   tilekit bench, TFLOP/s (x cuBLAS): 8192^3 cuBLAS 781.5, k20 416.7
 *   (0.533), k21 497.3 (0.636); 4096^3 cuBLAS 754.5, k20 427.9, k21 455.7
 *   (0.604); 2048^3 cuBLAS 582.9, k20 344.8, k21 375.0 (0.643); 8000^3
 *   cuBLAS 761.8, k20 392.0, k21 420.9 (0.552).
 *   H4's harness in the same run, 8192^3 (median of 20): cuBLAS 776.1, k20
 *   400.0, k21 443.9; k21 with GROUP_M 8: 443.7, 256x128 tiles: 463.8,
 *   128x128 tiles with 2 blocks/SM: 422.2, 3 stages: 418.3. 8191x8193x8190
 *   (ld padded to 8): cuBLAS 126.8, k20 417.5, k21 384.4.
 *   Bank conflicts (ncu, 2048^3, op_b T): 0 on shared loads and stores;
 *   4.23M load wavefronts for 1.06M ldmatrix.x4, the minimum of 4 each.
 * Figure: 0.636x cuBLAS at 8192^3 (497.3 vs 781.5 TFLOP/s, tilekit bench);
 * the issue's 0.75x is not reached. The mma.sync ceiling this H100 showed in
 * a register-only loop is 645 TFLOP/s at 1826 MHz (2678 flop/clk/SM).
 * Reproduce: build/tilekit bench --kernel k21_mma_fastload
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
template <int A_T, int B_T>
static __global__ void __launch_bounds__(K20_THREADS, K20_MIN_BLOCKS) k21_kernel(tk_args p, int stages, int group_m)
{
    extern __shared__ __align__(1024) uint8_t k21_smem[];
    k20_pipe s;
    const k20_block b = k20_block_init<A_T, B_T>(&p, &s, tk_smem_u32(k21_smem), stages, group_m);
    /* A block whose C tile lies inside C reads A and B tiles that lie inside
     * A and B, except in the last, partial K tile. */
    const int interior = b.m0 + K20_BM <= (int)p.m && b.n0 + K20_BN <= (int)p.n;
    k20_prologue<A_T, B_T>(&p, &s, b.ktiles, interior);

    float acc[K20_MT][K20_NT][4];
    uint32_t af[2][K20_MT][4], bf[2][K20_NT][2];
    k20_mainloop_start<A_T, B_T>(&b, &s, acc, af, bf);
    int kt = 0;
    if (interior) {
        /* K tiles whose copies (of K tile kt + stages - 1) are complete tiles */
        const int kfast = (int)p.k / K20_BK - (stages - 1);
        for (; kt < kfast; kt++)
            k20_ktile<A_T, B_T, 1>(&p, &s, acc, af, bf, 1);
    }
    for (; kt < b.ktiles; kt++)
        k20_ktile<A_T, B_T, 0>(&p, &s, acc, af, bf, kt + stages - 1 < b.ktiles);
    tk_cp_async_wait_all();
    k20_epilogue(&p, &b, acc);
}

/* ---- host side ---- */

/* The four instances, in k20_pick's order: (op_a, op_b) = NN, NT, TN, TT. */
static const k20_fn k21_fns[4] = { k21_kernel<0, 0>, k21_kernel<0, 1>, k21_kernel<1, 0>, k21_kernel<1, 1> };

/* The family's functions (src/kernels/table.def: its configuration). */
K20_FAMILY_OPS(k21, k21_fns)
