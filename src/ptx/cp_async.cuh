/* cp_async.cuh - asynchronous global -> shared copies (sm_80+).
 *
 * cp.async.cg.shared.global [dst], [src], 16, src_bytes
 *   Copies 16 bytes (both addresses 16-byte aligned), bypassing L1 (.cg).
 *   src_bytes < 16 zero-fills the rest of the 16 bytes; with src_bytes == 0
 *   nothing is read, so an out-of-bounds source may be passed (use a valid
 *   base pointer anyway). This zero fill is how edge tiles are predicated.
 * cp.async.commit_group closes the copies issued so far into one group;
 * cp.async.wait_group N waits until at most N groups are still pending
 * (per thread: a barrier is still needed before other threads read).
 * Clobbers: "memory", so the compiler does not move shared accesses across.
 */
#ifndef TK_PTX_CP_ASYNC_CUH
#define TK_PTX_CP_ASYNC_CUH

#include "common.cuh"

static __device__ __forceinline__ void tk_cp_async_16(uint32_t dst, const void *src, uint32_t src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}

static __device__ __forceinline__ void tk_cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* N must be a compile-time constant (an immediate in the instruction). */
#define tk_cp_async_wait(N) asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory")

static __device__ __forceinline__ void tk_cp_async_wait_all(void)
{
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

#endif
