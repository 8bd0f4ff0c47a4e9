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

#endif
