/* common.cuh - helpers every PTX wrapper needs. */
#ifndef TK_PTX_COMMON_CUH
#define TK_PTX_COMMON_CUH

#include <stdint.h>

/* A generic pointer into shared memory as the 32-bit shared-window address
 * that ld/st.shared, ldmatrix, cp.async and mbarrier operands take. */
static __device__ __forceinline__ uint32_t tk_smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Zeros in shared memory: 16 bytes at a 16-byte aligned address, or one
 * 2-byte element (st.shared). */
static __device__ __forceinline__ void tk_st_shared_zero16(uint32_t addr)
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0) : "memory");
}
static __device__ __forceinline__ void tk_st_shared_zero2(uint32_t addr)
{
    asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(addr), "h"((uint16_t)0) : "memory");
}

#endif
