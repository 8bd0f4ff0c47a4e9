/* k43_fp8 - k43's grouped core (k30_run with GRP = 1) with FP8 operands
 * (issue 40: "Grouped FP8 for mixture-of-experts (rows-grouped,
 * block-scaled)"). What changes against k43's bf16 instances
 * (k30_wgmma_tma.cu): the k-loops of the dense FP8 instances, on each
 * unit of the walk. k43_grouped_128x128 runs k33's pipelined promotion
 * (k30_consume_fp8_pipe: k-tile kt + 1 issued before kt's promotion),
 * k43_grouped_128x256 k31's 128-column halves (k30_consume_fp8), the
 * swapped k43_swap_16x64 / _32x64 k36's FP8 loop (k30_consume_fp8_swap:
 * m64nBMk32, B's rows by the tokens, two k-tiles a stage); K-major A and
 * B (FP8 wgmma reads no other layout), a k-tile 128 values of K (one
 * 128-byte row, the same boxes' bytes as bf16's), 3-D tensor maps of
 * one-byte codes (k43_map). The scales follow their operand
 * (tilekit.h "Many FP8 products"): a unit of product or group z reads
 * f8_sa + za * f8_sstride_a and f8_sb + zb * f8_sstride_b (k30_run's GRP
 * branch), TK_SCALE_BLOCK's at each promotion, the per-tensor and
 * row-wise ones on the final sum, then k43's epilogues bounded by the
 * group's rows. TK_GROUP_ROWS' A is the stacked token rows, so its row and
 * block scales are indexed by the global row as one product's are. A
 * translation unit of its own so that it compiles beside the others.
 * Figure: not measured yet (written without a GPU; docs/NOTES.md "k43 FP8
 * instances").
 * Reproduce: build/tests/gpu_test_fp8 grouped */
#include "k30_run.cuh"
#include "table.h"

/* A template because the formats are part of the wgmma instruction's name
 * (F8 = 4 * format of A + format of B) and BM, BN, SWAP pick the tile, as
 * k30_kernel's. */
template <int BM, int BN, int SWAP, int F8>
static __global__ void __launch_bounds__(K30_THREADS_CFG(BM, SWAP), 1)
    k43_fp8_kernel(const __grid_constant__ k30_params p)
{
    k30_run<0, 0, BM, BN, SWAP, 1, 0, F8>(p);
}

/* The instance of a k43 line for formats fa, fb: the lines of
 * K43_HAS_FP8 have them, the others none. */
template <int BM, int BN, int SWAP>
static const void *k43_fp8_row(int fa, int fb)
{
    if constexpr (!K43_HAS_FP8(BM, BN, SWAP)) {
        (void)fa, (void)fb;
        return NULL;
    } else {
#define K43_FP8_INSTANCE(f8) (const void *)k43_fp8_kernel<BM, BN, SWAP, f8>
        return K30_FP8_SELECT(fa, fb, K43_FP8_INSTANCE);
#undef K43_FP8_INSTANCE
    }
}

extern "C" const void *k43_fp8_func(int bm, int bn, int swap, int fa, int fb)
{
#define TK_MATCH_k43 TK_T_PROBE
#define K43_FP8_ROW(bm_, bn_, swap_)                      \
    if (bm == (bm_) && bn == (bn_) && swap == (swap_))    \
        return k43_fp8_row<bm_, bn_, swap_>(fa, fb);
#define TK_CONFIG(name, family, bm_, bn_, bk, wm, wn, swap_, first_rank, auto_rank, description) \
    TK_T_WHEN(TK_MATCH_##family)(K43_FP8_ROW(bm_, bn_, swap_))
#include "table.def"
#undef K43_FP8_ROW
#undef TK_MATCH_k43
    return NULL;
}
