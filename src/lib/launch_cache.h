/* launch_cache.h - what the host side of a launch can keep between calls on
 * one handle: TMA tensor maps, the dynamic shared memory already granted to a
 * kernel entry, and how many clusters of an entry fit co-resident.
 *
 * Every entry is keyed by all of its inputs, so a hit returns exactly what
 * asking again would return: a tensor map by base pointer, element type,
 * sizes, leading dimension, box and swizzle (a map holds nothing else, so a
 * freed and reused pointer with the same shape gets a map that is still
 * right); the occupancy by entry, shared memory and cluster size on the
 * handle's one device. A handle's cache is used by one call at a time (the
 * handle rule in tilekit.h). Kernels get it as tk_args.lc; NULL (tests,
 * introspection) means no caching. Measured on the H100: tk_gemm_ex's host
 * time per call, docs/NOTES.md.
 */
#ifndef TK_HOST_LAUNCH_CACHE_H
#define TK_HOST_LAUNCH_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include "kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_LC_MAPS 32
#define TK_LC_FUNCS 64

typedef struct tk_tma_key {
    const void *base;
    uint64_t rows, cols, ld;
    uint32_t box_rows, box_cols;
    int dtype, swizzle;
    size_t elem_bytes;
    uint64_t depth, zstride;           /* 3-D maps (tk_tma_map_3d); 0 for 2-D */
} tk_tma_key;

typedef struct tk_launch_cache {
    void *encode;                      /* cuTensorMapEncodeTiled, once looked up */
    struct { tk_tma_key key; CUtensorMap map; } maps[TK_LC_MAPS];
    /* filled entries; the next to replace when full (always 0..TK_LC_MAPS - 1:
     * a counter that only grew would wrap after 2^31 misses and index before
     * the array) */
    int nmaps, next_map;
    struct { const void *func; int smem; int cluster; int clusters; } funcs[TK_LC_FUNCS];
    int nfuncs, next_func;             /* likewise, 0..TK_LC_FUNCS - 1 */
    uint64_t map_hits, map_misses;     /* for tests */
    int max_sms;                       /* tk_set_sm_count's cap on co-resident CTAs; 0: none */
} tk_launch_cache;

/* cudaFuncSetAttribute(func, MaxDynamicSharedMemorySize, smem), skipped when
 * lc saw the same entry granted at least smem. */
cudaError_t tk_lc_func_smem(tk_launch_cache *lc, const void *func, int smem);

/* cudaOccupancyMaxActiveClusters for func launched as cfg (its dynamic shared
 * memory and cluster size, attrs[0] the cluster dimension), cached by entry,
 * shared memory and cluster size; at most max_sms / cluster (at least 1)
 * where lc->max_sms is set. */
cudaError_t tk_lc_max_clusters(tk_launch_cache *lc, const void *func, const cudaLaunchConfig_t *cfg, int cluster,
                               int *clusters);

/* The slot to fill in a table of n entries, *count of them filled: the
 * next free one, else the oldest, *next (kept in 0..n-1; a value out of
 * range, set by a test or a corruption elsewhere, is brought back into it
 * rather than used). */
int tk_lc_ring_slot(int *count, int *next, int n);

/* The cached map for key, or NULL. */
const CUtensorMap *tk_lc_map_find(tk_launch_cache *lc, const tk_tma_key *key);
/* Remembers map under key (replacing the oldest entry when full). */
void tk_lc_map_put(tk_launch_cache *lc, const tk_tma_key *key, const CUtensorMap *map);

#ifdef __cplusplus
}
#endif
#endif /* TK_HOST_LAUNCH_CACHE_H */
