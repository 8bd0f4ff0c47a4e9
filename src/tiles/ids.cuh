/* ids.cuh - who am I (lane, warp, warpgroup) and the barriers between us.
 *
 * Warps are numbered by threadIdx.x / 32 (blocks are one-dimensional); a
 * warpgroup is four consecutive warps (the seeds' WARPGROUP). A "group" of
 * N warps loading a tile together (the seeds' group<N>::load) is named by its
 * thread index inside the group and its thread count.
 */
#ifndef TK_TILES_IDS_CUH
#define TK_TILES_IDS_CUH

#include "layout.h"
#include "ptx/bar.cuh"

static __device__ __forceinline__ int tk_laneid(void) { return (int)(threadIdx.x % TK_WARP_THREADS); }

/* Broadcast from lane 0 so the compiler knows the value is warp-uniform and
 * keeps warp-level branches on it free of divergence handling. */
static __device__ __forceinline__ int tk_warpid(void)
{
    return __shfl_sync(0xffffffffu, (int)(threadIdx.x / TK_WARP_THREADS), 0);
}

static __device__ __forceinline__ int tk_warpgroupid(void) { return tk_warpid() / TK_WARPGROUP_WARPS; }

/* Thread index inside the group of warps first_warp .. first_warp + n - 1. */
static __device__ __forceinline__ int tk_group_tid(int first_warp)
{
    return (int)threadIdx.x - first_warp * TK_WARP_THREADS;
}

/* Every thread of the block: shared-memory writes before are visible after. */
static __device__ __forceinline__ void tk_sync_block(void) { __syncthreads(); }

/* Only the nwarps warps that call it with the same id (1..15; 0 is the
 * block barrier): lets consumer warps wait for each other while producer
 * warps run on. */
static __device__ __forceinline__ void tk_sync_warps(int id, int nwarps) { tk_bar_sync(id, nwarps * TK_WARP_THREADS); }

/* The same for warps that reach the barrier from different code (a
 * producer loop and a consumer loop): the unaligned barrier, since the
 * aligned one requires one code position for all (bar.cuh). */
static __device__ __forceinline__ void tk_sync_roles(int id, int nwarps)
{
    tk_barrier_sync(id, nwarps * TK_WARP_THREADS);
}

#endif /* TK_TILES_IDS_CUH */
