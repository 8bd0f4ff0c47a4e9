/* epilogue.cuh - one C element: v = alpha*acc + beta*C_old, stored as fp32
 * or bf16. C_old is read only when beta != 0, so a C full of NaN poison with
 * beta == 0 gives a clean result (BLAS semantics). */
#ifndef TK_TILES_EPILOGUE_CUH
#define TK_TILES_EPILOGUE_CUH

#include <cuda_bf16.h>
#include <stdint.h>
#include "tilekit.h"

static __device__ __forceinline__ float tk_bf16_to_f32(uint16_t x)
{
    return __uint_as_float((uint32_t)x << 16);
}

static __device__ __forceinline__ uint16_t tk_f32_to_bf16(float x)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

/* Applies alpha/beta and stores one element at c + idx (idx in elements). */
static __device__ __forceinline__ void tk_epilogue_store(void *c, int64_t idx, tk_dtype c_type, float acc,
                                                         float alpha, float beta)
{
    float v = alpha * acc;
    if (c_type == TK_F32) {
        float *p = (float *)c + idx;
        if (beta != 0.0f)
            v = fmaf(beta, *p, v);
        *p = v;
    } else {
        uint16_t *p = (uint16_t *)c + idx;
        if (beta != 0.0f)
            v = fmaf(beta, tk_bf16_to_f32(*p), v);
        *p = tk_f32_to_bf16(v);
    }
}

/* The same for two neighbours at c + idx and c + idx + 1, stored as one
 * vector: the caller guarantees that address is aligned to two elements
 * (idx even, ldc even, c aligned -- tk_gl_out.pairs in types.cuh). */
static __device__ __forceinline__ void tk_epilogue_store2(void *c, int64_t idx, tk_dtype c_type, float acc0,
                                                          float acc1, float alpha, float beta)
{
    float v0 = alpha * acc0, v1 = alpha * acc1;
    if (c_type == TK_F32) {
        float2 *p = (float2 *)((float *)c + idx);
        if (beta != 0.0f) {
            float2 old = *p;
            v0 = fmaf(beta, old.x, v0);
            v1 = fmaf(beta, old.y, v1);
        }
        *p = make_float2(v0, v1);
    } else {
        __nv_bfloat162 *p = (__nv_bfloat162 *)((uint16_t *)c + idx);
        if (beta != 0.0f) {
            float2 old = __bfloat1622float2(*p);
            v0 = fmaf(beta, old.x, v0);
            v1 = fmaf(beta, old.y, v1);
        }
        *p = __floats2bfloat162_rn(v0, v1);
    }
}

#endif /* TK_TILES_EPILOGUE_CUH */
