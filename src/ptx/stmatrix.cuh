/* stmatrix.cuh - register fragments -> shared memory, the store twin of
 * ldmatrix (sm_90).
 *
 * stmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 [addr], {r0, r1, r2, r3}
 *   Stores four 8x8 matrices of 16-bit elements. Register ri of every lane
 *   holds two elements of matrix i in the mma/wgmma accumulator layout: lane l
 *   owns row l/4, columns 2*(l%4)..+1 (low half = lower column). Lanes 8i..8i+7
 *   give the shared addresses of the 8 rows of matrix i (16 contiguous bytes
 *   each, 16-byte aligned). .trans stores the transpose (row and column
 *   swapped). The whole warp executes it (.aligned).
 * Clobbers: "memory".
 */
#ifndef TK_PTX_STMATRIX_CUH
#define TK_PTX_STMATRIX_CUH

#include "common.cuh"

static __device__ __forceinline__ void tk_stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                                      uint32_t r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

static __device__ __forceinline__ void tk_stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                                            uint32_t r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

#endif
