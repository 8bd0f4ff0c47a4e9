/* ldmatrix.cuh - shared memory -> mma.sync fragments (sm_75+).
 *
 * ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16
 *   Loads 1, 2 or 4 8x8 matrices of 16-bit elements. Lanes 8i..8i+7 give
 *   the shared addresses of the 8 rows (16 contiguous bytes each, 16-byte
 *   aligned) of matrix i; lanes of an x1/x2 beyond the used matrices must
 *   still pass valid addresses. Each lane receives, per matrix, one u32
 *   holding row lane/4, columns 2*(lane%4)..+1 -- the mma.sync fragment
 *   layout. .trans delivers the transpose (row and column swapped), which
 *   turns a k-major stored tile into the "col" B operand.
 * Clobbers: none besides the outputs; "memory" keeps it after the stores
 * and barrier that filled the tile.
 */
#ifndef TK_PTX_LDMATRIX_CUH
#define TK_PTX_LDMATRIX_CUH

#include "common.cuh"

static __device__ __forceinline__ void tk_ldmatrix_x1(uint32_t r[1], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(addr) : "memory");
}

static __device__ __forceinline__ void tk_ldmatrix_x2(uint32_t r[2], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(addr) : "memory");
}

static __device__ __forceinline__ void tk_ldmatrix_x4(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

static __device__ __forceinline__ void tk_ldmatrix_x2_trans(uint32_t r[2], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(addr) : "memory");
}

static __device__ __forceinline__ void tk_ldmatrix_x4_trans(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

#endif
