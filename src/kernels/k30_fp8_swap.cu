/* k30_fp8_swap - k30's swapped small-M tiles (k36_swap_*) with FP8
 * operands (issue 40: "FP8 instances of ... the swapped small-M and skinny
 * decode paths"). What changes against k30_fp8 (k33's 128 x 128 FP8
 * tiles): at M = 64-256 those tiles run half empty or worse (k31's and
 * k45's clusters pair two 128-row tiles along M: at M = 64 three quarters
 * of their tensor-core rows are zero fill); here, as k36 does for bf16,
 * C^T = B^T A^T: B's 64 rows a tile are wgmma's m side and the BM = 16 ..
 * 72 tokens its n (m64nBMk32, B's format first), one consumer warpgroup,
 * a stage two 128-deep k-tiles. Each k-tile is summed alone in the tensor
 * core and promoted to fp32 while the next one runs (two sets of BM / 2
 * sums, k30_consume_fp8_swap), with TK_SCALE_BLOCK's scales there (the A
 * scale by token, along the instruction's n; one B block a tile); the
 * per-tensor and row scales on the final sum (k30_fp8_finish_swap), then
 * k36's swapped epilogues. K-major A and B only (FP8 wgmma reads no other
 * layout). Auto-dispatch gives these tiles the shapes where k30_pick_swap
 * (in FP8's bytes) finds one that fits one wave.
 * Figure: not measured yet (written without a GPU).
 * Reproduce: build/tilekit bench --kernel auto,k36_swap_32x64,k45_cluster_128x128 --dtype e4m3 --scale block
 * --shapes 64x2112x7168 */
#include "k30_run.cuh"
#include "table.h"

/* A template because the formats are part of the wgmma instruction's name
 * (F8 = 4 * format of A + format of B) and BM picks the instruction. */
template <int BM, int F8>
static __global__ void __launch_bounds__(K30_THREADS_CFG(BM, 1), 1)
    k30_fp8_swap_kernel(const __grid_constant__ k30_params p)
{
    k30_run<0, 0, BM, 64, 1, 0, 0, F8>(p);
}

/* The instance of a k30 line for formats fa, fb: the swapped one-consumer
 * lines (swap 1: k36_swap_*) have them, the others none. */
template <int BM, int BN, int SWAP>
static const void *k30_fp8_swap_row(int fa, int fb)
{
    if constexpr (SWAP != 1 || BN != 64) {
        (void)fa, (void)fb;
        return NULL;
    } else {
        if (fa == TK_FP8_E4M3)
            return fb == TK_FP8_E4M3 ? (const void *)k30_fp8_swap_kernel<BM, 4 * TK_FP8_E4M3 + TK_FP8_E4M3>
                                     : (const void *)k30_fp8_swap_kernel<BM, 4 * TK_FP8_E4M3 + TK_FP8_E5M2>;
        return fb == TK_FP8_E4M3 ? (const void *)k30_fp8_swap_kernel<BM, 4 * TK_FP8_E5M2 + TK_FP8_E4M3>
                                 : (const void *)k30_fp8_swap_kernel<BM, 4 * TK_FP8_E5M2 + TK_FP8_E5M2>;
    }
}

extern "C" const void *k30_fp8_swap_func(int bm, int fa, int fb)
{
#define TK_MATCH_k30 TK_T_PROBE
#define K30_FP8_ROW(bm_, bn_, swap_)                     \
    if (swap_ == 1 && bm == (bm_))                      \
        return k30_fp8_swap_row<bm_, bn_, swap_>(fa, fb);
#define TK_CONFIG(name, family, bm_, bn_, bk, wm, wn, swap_, first_rank, auto_rank, description) \
    TK_T_WHEN(TK_MATCH_##family)(K30_FP8_ROW(bm_, bn_, swap_))
#include "table.def"
#undef K30_FP8_ROW
#undef TK_MATCH_k30
    return NULL;
}
