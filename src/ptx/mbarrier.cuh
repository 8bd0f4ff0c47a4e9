/* mbarrier.cuh - shared-memory barriers with arrival and transaction counts (sm_90).
 *
 * An mbarrier is 8 bytes of shared memory (8-byte aligned; `bar` below is its
 * 32-bit shared address, see tk_smem_u32). It completes a phase when its
 * pending arrival count reaches zero AND its pending transaction byte count
 * (raised by expect_tx, lowered by the copy engine's complete_tx) is zero;
 * then the phase parity flips and the counts re-arm.
 *
 * mbarrier.init.shared::cta.b64 [bar], count
 *   Sets the arrival count of every phase. Must be made visible to the other
 *   threads and to the copy engine before use (fence.mbarrier_init + a CTA
 *   barrier, see fence.cuh).
 * mbarrier.arrive.shared::cta.b64 _, [bar]
 *   One arrival; the phase state it returns is discarded (sink `_`).
 * mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes
 *   Raises the pending transaction count by bytes, then one arrival: the
 *   producer's call before issuing the TMA loads that will complete_tx them.
 * mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity
 *   p = 1 once the phase with the given parity has completed (parity 0 = the
 *   phase a fresh barrier is in). May suspend for a system-defined time before
 *   returning 0, so it is cheaper than a test_wait spin. On a fresh barrier,
 *   parity 1 reads as "completed": a producer waiting on empty barriers with
 *   parity (phase ^ 1) passes the first round without any consumer arrival.
 *
 * Thread-block clusters (the barriers that span the CTAs of a cluster):
 * mapa.shared::cluster.u32 r, bar, rank
 *   The shared::cluster address of the same offset bar in CTA `rank` of this
 *   cluster (a peer's mbarrier).
 * mbarrier.arrive.shared::cluster.b64 _, [r]
 *   One arrival on a (possibly remote) mbarrier at cluster address r, with
 *   the default release at CTA scope. Enough to hand a stage back after the
 *   wgmma reading it has completed; .release.cluster would add MEMBAR.ALL.GPU
 *   before every arrival (seen in SASS), which made a 2-CTA GEMM 2.4x slower.
 * barrier.cluster.arrive.release / barrier.cluster.wait.acquire (not .aligned:
 * callable from diverged code)
 *   All non-exited threads of all CTAs of the cluster meet (tk_cluster_sync):
 *   after mbarrier init, so no peer signals a barrier not yet initialised, and
 *   before exit, so no peer still signals one whose CTA is gone.
 * %cluster_ctarank: this CTA's rank in its cluster.
 * Clobbers: "memory" on all, so shared-memory accesses are not moved across.
 */
#ifndef TK_PTX_MBARRIER_CUH
#define TK_PTX_MBARRIER_CUH

#include "common.cuh"

static __device__ __forceinline__ void tk_mbarrier_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

static __device__ __forceinline__ void tk_mbarrier_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

static __device__ __forceinline__ void tk_mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

static __device__ __forceinline__ uint32_t tk_mbarrier_try_wait_parity(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return done;
}

/* Blocks until the phase of the given parity has completed. */
static __device__ __forceinline__ void tk_mbarrier_wait_parity(uint32_t bar, uint32_t parity)
{
    while (!tk_mbarrier_try_wait_parity(bar, parity)) {
    }
}

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

static __device__ __forceinline__ void tk_cluster_sync(void)
{
    asm volatile("barrier.cluster.arrive.release;\n"
                 "barrier.cluster.wait.acquire;\n" ::
                     : "memory");
}

static __device__ __forceinline__ uint32_t tk_cluster_ctarank(void)
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

#endif
