/* tma.h - host-side creation of TMA tensor maps (CUtensorMap) for the Hopper
 * kernels, and the alignment rules TMA imposes, for their support checks.
 *
 * cuTensorMapEncodeTiled is a driver API function; it is looked up through
 * the runtime (cudaGetDriverEntryPointByVersion), so tilekit has no link-time
 * dependency on libcuda. <cuda.h> is included for its types only.
 */
#ifndef TK_HOST_TMA_H
#define TK_HOST_TMA_H

#include <cuda.h>
#include "kernel.h"
#include "launch_cache.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TMA's rules for a matrix `name` at p with leading dimension ld (elements of
 * elem_bytes each): the base 16-byte aligned and the row stride a multiple of
 * 16 bytes below TK_TMA_MAX_STRIDE. p == NULL (introspection) judges ld
 * only. TK_SUCCESS or TK_ERR_NOT_SUPPORTED with the reason in why. */
#define TK_TMA_MAX_STRIDE ((uint64_t)1 << 40)
tk_status tk_tma_check(const char *name, const void *p, int64_t ld, size_t elem_bytes, char *why, size_t len);

/* Encodes the map of a row-major matrix of rows x cols elements with leading
 * dimension ld (elements), copied in boxes of box_rows x box_cols (box_cols *
 * elem_bytes <= 128 with the 128B swizzle). Boxes may reach past the matrix:
 * loads zero-fill and stores clip there. L2 promotion is 128 bytes. With lc,
 * a map encoded before from the same inputs is copied instead. */
tk_status tk_tma_map_2d(tk_launch_cache *lc, CUtensorMap *map, CUtensorMapDataType dtype, size_t elem_bytes, const void *base,
                        uint64_t rows, uint64_t cols, uint64_t ld, uint32_t box_rows, uint32_t box_cols,
                        CUtensorMapSwizzle swizzle, char *why, size_t len);

/* The same for `depth` such matrices, zstride elements apart (a multiple
 * of 16 bytes), loaded by 3-D boxes of one matrix (coordinates column,
 * row, matrix). depth >= 1. */
tk_status tk_tma_map_3d(tk_launch_cache *lc, CUtensorMap *map, CUtensorMapDataType dtype, size_t elem_bytes,
                        const void *base, uint64_t depth, uint64_t zstride, uint64_t rows, uint64_t cols, uint64_t ld,
                        uint32_t box_rows, uint32_t box_cols, CUtensorMapSwizzle swizzle, char *why, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* TK_HOST_TMA_H */
