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

#endif /* TK_TILES_EPILOGUE_CUH */
