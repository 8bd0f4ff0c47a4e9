/* cluster.cuh - thread-block cluster primitives (sm_90).
 *
 * mapa.shared::cluster.u32 r, addr, rank
 *   The shared::cluster address of the same offset addr in CTA `rank` of this
 *   cluster (e.g. a peer's mbarrier).
 * mbarrier.arrive.shared::cluster.b64 _, [r]
 *   One arrival on a (possibly remote) mbarrier at cluster address r, with
 *   the default release at CTA scope. Enough to hand a stage back after the
 *   wgmma reading it has completed; .release.cluster would add MEMBAR.ALL.GPU
 *   before every arrival (seen in SASS), which made a 2-CTA GEMM 2.4x slower.
 * barrier.cluster.arrive.relaxed / barrier.cluster.wait (not .aligned:
 * callable from diverged code)
 *   All non-exited threads of all CTAs of the cluster meet
 *   (tk_cluster_sync_relaxed), after mbarrier init (ordered for the peers by
 *   fence.mbarrier_init.release.cluster), so no peer signals a barrier not
 *   yet initialised. The default .release arrival cost k31 ~0.7 us at the
 *   start and ~0.8 us more as a meeting before exit (H100, 64 x 128 tiles
 *   at 1024^3; docs/NOTES.md session 19), where k31 now waits for its
 *   stages' releases instead.
 * %cluster_ctarank: this CTA's rank in its cluster.
 * Clobbers: "memory" on the arrival and the barrier, so shared-memory accesses
 * are not moved across.
 */
#ifndef TK_PTX_CLUSTER_CUH
#define TK_PTX_CLUSTER_CUH

#include "common.cuh"

static __device__ __forceinline__ uint32_t tk_mapa_shared_cluster(uint32_t addr, uint32_t rank)
{
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}

static __device__ __forceinline__ void tk_mbarrier_arrive_cluster(uint32_t cluster_addr)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}

static __device__ __forceinline__ void tk_cluster_sync_relaxed(void)
{
    asm volatile("barrier.cluster.arrive.relaxed;\n"
                 "barrier.cluster.wait;\n" ::
                     : "memory");
}

static __device__ __forceinline__ uint32_t tk_cluster_ctarank(void)
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

#endif
