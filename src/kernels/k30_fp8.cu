/* k30_fp8 - k30_wgmma_tma's core with FP8 operands (issue 40): the
 * 128 x 128 tiles of k33_wgmma_128x128, A and B both K-major (FP8 wgmma
 * takes no other layout), a k-tile 128 values of K (the same 128-byte rows
 * and swizzle as 64 bf16 values, so the ring, the TMA boxes' bytes and the
 * descriptors are bf16's), four m64n128k32 a k-tile summed in the tensor
 * core and promoted to fp32 registers after each (the FP8 accumulator keeps
 * 13 bits: tests/gpu/fp8_mma), with TK_SCALE_BLOCK's scales applied there
 * and the per-tensor and row-wise scales on the final sum (k30_run.cuh,
 * k30_consume_fp8 and k30_fp8_finish in k30_core.cuh). A translation unit
 * of its own so that it compiles beside the others. 128 x 128 because the
 * promotion holds the fp32 sums and two of the tensor core's
 * (k30_consume_fp8_pipe: k-tile kt + 1 issued before kt's promotion; 192
 * registers a thread): 7% over promoting each k-tile after its own wait
 * (H200, same call, both orders).
 * Figure (H200, e4m3, bf16 C, NT, tilekit bench, cuBLASLt in the same run,
 * docs/NOTES.md session 30 call 2): 8192^3 per-tensor 1190 TFLOP/s against
 * cuBLASLt's 1516 (0.78x); auto-dispatch now prefers k31's and k45's FP8
 * instances (k31_wgmma_cluster.cu), this one their fallback.
 * Reproduce: build/tilekit bench --kernel k33_wgmma_128x128,auto --dtype e4m3
 * --scale tensor --shapes 8192x8192x8192 */
#include "k30_run.cuh"

/* A template because the formats are part of the wgmma instruction's name
 * (F8 = 4 * format of A + format of B). */
template <int F8>
static __global__ void __launch_bounds__(K30_THREADS_CFG(K30_BM, 0), 1) k30_fp8_kernel(const __grid_constant__ k30_params p)
{
    k30_run<0, 0, K30_BM, 128, 0, 0, 0, F8>(p);
}

extern "C" const void *k30_fp8_func(int fa, int fb)
{
    if (fa == TK_FP8_E4M3)
        return fb == TK_FP8_E4M3 ? (const void *)k30_fp8_kernel<4 * TK_FP8_E4M3 + TK_FP8_E4M3>
                                 : (const void *)k30_fp8_kernel<4 * TK_FP8_E4M3 + TK_FP8_E5M2>;
    return fb == TK_FP8_E4M3 ? (const void *)k30_fp8_kernel<4 * TK_FP8_E5M2 + TK_FP8_E4M3>
                             : (const void *)k30_fp8_kernel<4 * TK_FP8_E5M2 + TK_FP8_E5M2>;
}
