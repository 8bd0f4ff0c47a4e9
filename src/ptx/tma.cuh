/* tma.cuh - the tensor memory accelerator: bulk tensor copies between global
 * and shared memory described by a CUtensorMap (sm_90).
 *
 * The map (encoded on the host, src/lib/tma.c) lives in kernel parameter
 * space as a `const __grid_constant__` parameter (or in global memory), 64-byte
 * aligned; `map` is its generic address. Coordinates are in elements,
 * innermost dimension first, signed 32-bit, and may lie partly or wholly
 * outside the tensor: loads zero-fill what is outside and still count the full
 * box in the transaction bytes; stores skip what is outside (clip).
 *
 * cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
 *     [dst], [map, {c0, c1}], [bar]
 *   Loads the box at (c0, c1) into shared memory at dst (128-byte aligned;
 *   1024-byte aligned for the 128B swizzle so that the swizzle pattern, which
 *   the hardware applies on address bits 4-6 ^ 7-9, starts with the tile) and
 *   signals complete_tx(box bytes) on the mbarrier bar of this CTA.
 *   Issued by one thread; the thread does not wait.
 * ... .multicast::cluster [dst], [map, {c0, c1}], [bar], mask
 *   The same load delivered to every CTA of the cluster whose bit is set in
 *   the 16-bit mask (bit = %cluster_ctarank), at the same shared offset dst,
 *   each signalling complete_tx on its own mbarrier at offset bar.
 * cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [map, {c0, c1}], [src]
 *   Stores the box at src to global (c0, c1); completion is tracked by
 *   bulk groups: commit_group closes the stores issued so far into a group,
 *   wait_group.read N waits until at most N groups still read shared memory
 *   (the source may then be overwritten; all a kernel needs before it
 *   exits: kernel completion covers the writes).
 * prefetch.tensormap [map]
 *   Brings the map into the descriptor cache ahead of the first copy.
 * Clobbers: "memory" on all.
 */
#ifndef TK_PTX_TMA_CUH
#define TK_PTX_TMA_CUH

#include <cuda.h>
#include "common.cuh"

static __device__ __forceinline__ void tk_tma_load_2d(uint32_t dst, const CUtensorMap *map, int32_t c0, int32_t c1,
                                                      uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"((uint64_t)(uintptr_t)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

/* The same from a 3-D map (tk_tma_map_3d): c2 picks the matrix. */
static __device__ __forceinline__ void tk_tma_load_3d(uint32_t dst, const CUtensorMap *map, int32_t c0, int32_t c1,
                                                      int32_t c2, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
                 "l"((uint64_t)(uintptr_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}

static __device__ __forceinline__ void tk_tma_load_2d_multicast(uint32_t dst, const CUtensorMap *map, int32_t c0,
                                                                int32_t c1, uint32_t bar, uint16_t mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
                 "l"((uint64_t)(uintptr_t)map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
                 : "memory");
}

static __device__ __forceinline__ void tk_tma_store_2d(const CUtensorMap *map, uint32_t src, int32_t c0, int32_t c1)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                     (uint64_t)(uintptr_t)map),
                 "r"(c0), "r"(c1), "r"(src)
                 : "memory");
}

/* The same into a 3-D map (tk_tma_map_3d): c2 picks the matrix. */
static __device__ __forceinline__ void tk_tma_store_3d(const CUtensorMap *map, uint32_t src, int32_t c0, int32_t c1,
                                                       int32_t c2)
{
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
                     (uint64_t)(uintptr_t)map),
                 "r"(c0), "r"(c1), "r"(c2), "r"(src)
                 : "memory");
}

static __device__ __forceinline__ void tk_tma_store_commit(void)
{
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

/* N: an immediate. */
#define tk_tma_store_wait_read(N) asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory")

static __device__ __forceinline__ void tk_tma_prefetch_map(const CUtensorMap *map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)(uintptr_t)map) : "memory");
}

#endif
