/* shfl.cuh - a 32-bit exchange between the lanes of a warp (sm_70+).
 *
 * shfl.sync.bfly.b32 d, a, mask, 0x1f, 0xffffffff
 *   Lane l gets a from lane l ^ mask; all 32 lanes take part (member mask
 *   0xffffffff) and must execute it converged.
 * Inline PTX rather than __shfl_xor_sync: in k30's swapped epilogue, after
 * the wgmma loop of a persistent walk, the intrinsic made ptxas serialize
 * the wgmma instructions (C7520 "WG.AR in divergent path", C7514), the asm
 * did not (nvcc 13.0, sm_90a).
 */
#ifndef TK_PTX_SHFL_CUH
#define TK_PTX_SHFL_CUH

static __device__ __forceinline__ float tk_shfl_xor_f32(float v, int mask)
{
    float r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;\n" : "=f"(r) : "f"(v), "r"(mask));
    return r;
}

#endif /* TK_PTX_SHFL_CUH */
