/* cvt.cuh - two fp32 values to two FP8 codes (sm_89+; issue 40's quantizer).
 *
 * cvt.rn.satfinite.e4m3x2.f32 d, a, b   (and .e5m2x2)
 *   d (16 bits): b's code in the low byte, a's in the high one; each the
 *   nearest code, ties to the even one, a magnitude past the largest finite
 *   (448; E5M2 57344) saturated to it (.satfinite), NaN to a NaN code.
 *   Below sm_89 there is no such instruction: cuda_fp8.h's
 *   __nv_cvt_float2_to_fp8x2 computes the same codes in software (it is
 *   what the header itself falls back to).
 * Clobbers: none (no memory operand).
 */
#ifndef TK_PTX_CVT_CUH
#define TK_PTX_CVT_CUH

#include <stdint.h>
#include <cuda_fp8.h>

static __device__ __forceinline__ uint16_t tk_cvt_e4m3x2_f32(float lo, float hi)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    uint16_t d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
#else
    return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
#endif
}

static __device__ __forceinline__ uint16_t tk_cvt_e5m2x2_f32(float lo, float hi)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    uint16_t d;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\n" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
#else
    return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E5M2);
#endif
}

#endif /* TK_PTX_CVT_CUH */
