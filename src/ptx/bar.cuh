/* bar.cuh - named CTA barriers (sm_70+).
 *
 * bar.sync id, nthreads
 *   Waits until nthreads threads (a multiple of 32, whole warps) have arrived
 *   at barrier id (0..15) and makes their earlier shared-memory writes
 *   visible to each other. Barrier 0 with all threads is __syncthreads();
 *   other ids let a subset of warps (say the consumer warps) synchronize
 *   without stalling the rest of the block. Every warp that arrives must
 *   pass the same nthreads.
 * bar.sync is barrier.sync.aligned: every participating thread must execute
 * the same barrier instruction (the same code position), else the behaviour
 * is undefined (compute-sanitizer's synccheck reports it as divergent).
 *
 * barrier.sync id, nthreads
 *   The same without .aligned: the participating warps may arrive from
 *   different code, e.g. producer warps in their loop and consumer warps in
 *   theirs (k13).
 *
 * barrier.arrive id, nthreads
 *   Counts the calling warps' arrival at barrier id and goes on without
 *   waiting: with barrier.sync on the other side, an ordering between warp
 *   groups (k30's ping-pong consumers: one signals, the other waits).
 * Clobbers: "memory", so the compiler keeps shared accesses on their side.
 */
#ifndef TK_PTX_BAR_CUH
#define TK_PTX_BAR_CUH

static __device__ __forceinline__ void tk_bar_sync(int id, int nthreads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}

static __device__ __forceinline__ void tk_barrier_sync(int id, int nthreads)
{
    asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}

static __device__ __forceinline__ void tk_barrier_arrive(int id, int nthreads)
{
    asm volatile("barrier.arrive %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}

#endif
