/* movmatrix.cuh - transpose an 8x8 bf16 matrix held in registers (sm_75+).
 *
 * movmatrix.sync.aligned.m8n8.trans.b16 d, a
 *   The warp holds an 8x8 matrix of 16-bit elements, one u32 per lane:
 *   lane 4*g + t has row g, columns 2t..2t+1 (low half = lower column),
 *   the ldmatrix / mma.sync fragment layout. d receives the transpose in the
 *   same layout: row g, columns 2t..2t+1 of the transpose, i.e. elements
 *   (2t, g) and (2t+1, g) of the input. This is how a register tile changes
 *   between the row (A operand) and column (B operand) layouts.
 * Clobbers: none besides d. The whole warp must execute it (.aligned).
 */
#ifndef TK_PTX_MOVMATRIX_CUH
#define TK_PTX_MOVMATRIX_CUH

#include <stdint.h>

static __device__ __forceinline__ uint32_t tk_movmatrix_trans(uint32_t a)
{
    uint32_t d;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
    return d;
}

#endif
