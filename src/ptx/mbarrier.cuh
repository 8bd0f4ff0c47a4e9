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
 * The cluster-wide arrival (on a peer's barrier) and the cluster barrier are
 * in cluster.cuh.
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

#endif
