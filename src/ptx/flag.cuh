/* flag.cuh - a 32-bit flag in global memory that one CTA sets and another
 * waits on, ordering the data written before it (sm_70+).
 *
 * st.release.gpu.global.u32 [flag], v
 *   Stores v after every earlier memory access of this thread (and, through
 *   a preceding CTA barrier, of the threads that met it) is visible at GPU
 *   scope: the writer's data is published with the flag.
 * ld.acquire.gpu.global.u32 v, [flag]
 *   Loads the flag; later accesses of this thread (and, through a following
 *   CTA barrier, of the threads that meet it) see everything published
 *   before the store that wrote the value read.
 * Clobbers: "memory", so accesses are not moved across.
 */
#ifndef TK_PTX_FLAG_CUH
#define TK_PTX_FLAG_CUH

#include <stdint.h>

static __device__ __forceinline__ void tk_flag_store_release(uint32_t *flag, uint32_t v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(flag), "r"(v) : "memory");
}

static __device__ __forceinline__ uint32_t tk_flag_load_acquire(const uint32_t *flag)
{
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
    return v;
}

#endif
