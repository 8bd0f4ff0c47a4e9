/* mma_sync.cuh - warp-level tensor-core MMA (sm_80+; also runs on sm_90).
 *
 * mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
 *   D(16x8, f32) = A(16x16, bf16, row) * B(16x8, bf16, "col": k-major) + C
 * Fragment ownership (lane = 4*g + t, g = lane/4 in 0..7, t = lane%4 in 0..3):
 *   a[0] = A[g   ][2t..2t+1]   a[1] = A[g+8][2t..2t+1]
 *   a[2] = A[g   ][2t+8..+9]   a[3] = A[g+8][2t+8..+9]    (two bf16 per u32, low = lower column)
 *   b[0] = B[2t..2t+1][g]      b[1] = B[2t+8..2t+9][g]     (low half = lower k)
 *   c[0..1] = D[g][2t..2t+1]   c[2..3] = D[g+8][2t..2t+1]
 * Clobbers: none besides d. The whole warp must execute it (.aligned).
 */
#ifndef TK_PTX_MMA_SYNC_CUH
#define TK_PTX_MMA_SYNC_CUH

#include <stdint.h>

static __device__ __forceinline__ void tk_mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                            const float c[4])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
                   "f"(c[2]), "f"(c[3]));
}

#endif
