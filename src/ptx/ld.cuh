/* ld.cuh - global loads with cache hints (sm_80+).
 *
 * ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {x, y, z, w}, [p]
 *   Loads 16 bytes (p 16-byte aligned) of data that stays read-only for the
 *   kernel's lifetime (.nc), without allocating in L1 (data read once), and
 *   asks L2 to fetch the whole 128-byte line around it: a row segment read
 *   64 bytes per instruction (k40_skinny's fragment layout) then finds its
 *   other half already on its way.
 * Clobbers: none besides the result (no "memory": the data is read-only).
 */
#ifndef TK_PTX_LD_CUH
#define TK_PTX_LD_CUH

#include <stdint.h>

static __device__ __forceinline__ uint4 tk_ld_stream_v4(const void *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

#endif
