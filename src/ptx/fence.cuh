/* fence.cuh - memory fences between the generic proxy (ordinary loads and
 * stores, stmatrix) and the async proxy (TMA, wgmma operand reads) (sm_90).
 *
 * fence.proxy.async.shared::cta
 *   Orders this thread's earlier generic-proxy shared-memory writes before
 *   later async-proxy accesses (a TMA store reading a tile written with
 *   stmatrix, or wgmma reading it). Each writing thread issues it, then a
 *   barrier lets the issuing thread start the async operation.
 * fence.mbarrier_init.release.cluster
 *   Makes prior mbarrier.init visible to the async proxy and (with a barrier
 *   after it) to the other threads: issued once by the initialising thread.
 * Clobbers: "memory".
 */
#ifndef TK_PTX_FENCE_CUH
#define TK_PTX_FENCE_CUH

static __device__ __forceinline__ void tk_fence_proxy_async_shared(void)
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

static __device__ __forceinline__ void tk_fence_mbarrier_init(void)
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

#endif
