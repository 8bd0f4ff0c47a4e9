/* tma.c - TMA tensor maps, encoded through the driver entry point that the
 * runtime hands out (no libcuda at link time).
 *
 * L2 promotion is 128 bytes: with 256 (before) a row stride that is not a
 * multiple of 128 bytes cost k31 14% at 3000 x 5000 x 7000 (0.369 -> 0.316
 * ms on the H100 with 128, the same with none) and aligned shapes 0.5-3%
 * (docs/NOTES.md).
 *
 * The entry point and the maps are kept in the handle's launch cache
 * (launch_cache.h), not in statics: tilekit keeps no global mutable state. */
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>
#include "tma.h"

tk_status tk_tma_check(const char *name, const void *p, int64_t ld, size_t elem_bytes, char *why, size_t len)
{
    if (((uint64_t)ld * elem_bytes) % 16) {
        snprintf(why, len,
                 "TMA needs the row stride of %s to be a multiple of 16 bytes: its leading dimension %lld (elements "
                 "of %zu bytes) is not a multiple of %zu",
                 name, (long long)ld, elem_bytes, 16 / elem_bytes);
        return TK_ERR_NOT_SUPPORTED;
    }
    if ((uintptr_t)p % 16) {
        snprintf(why, len, "TMA needs %s 16-byte aligned; %p is not", name, p);
        return TK_ERR_NOT_SUPPORTED;
    }
    /* cuTensorMapEncodeTiled rejects strides of 2^40 bytes and more: refused
     * here, such a matrix is routed elsewhere instead of failing at launch. */
    if ((uint64_t)ld >= TK_TMA_MAX_STRIDE / elem_bytes) {
        snprintf(why, len, "TMA row strides must be below 2^40 bytes: %s has %lld elements of %zu bytes per row",
                 name, (long long)ld, elem_bytes);
        return TK_ERR_NOT_SUPPORTED;
    }
    return TK_SUCCESS;
}

static tk_status encode_fn(tk_launch_cache *lc, PFN_cuTensorMapEncodeTiled_v12000 *fn, char *why, size_t len)
{
    if (lc && lc->encode) {
        *fn = (PFN_cuTensorMapEncodeTiled_v12000)lc->encode;
        return TK_SUCCESS;
    }
    void *p = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p) {
        snprintf(why, len, "cuTensorMapEncodeTiled not available from the driver (%s, query result %d)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "no error", (int)q);
        cudaGetLastError();
        if (e != cudaSuccess)
            tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    *fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
    if (lc)
        lc->encode = p;
    return TK_SUCCESS;
}

/* The map of `depth` matrices (depth 0: a 2-D map), zstride elements apart. */
static tk_status map_nd(tk_launch_cache *lc, CUtensorMap *map, CUtensorMapDataType dtype, size_t elem_bytes,
                        const void *base, uint64_t depth, uint64_t zstride, uint64_t rows, uint64_t cols, uint64_t ld,
                        uint32_t box_rows, uint32_t box_cols, CUtensorMapSwizzle swizzle, char *why, size_t len)
{
    tk_tma_key key;
    memset(&key, 0, sizeof key);
    key.base = base;
    key.rows = rows;
    key.cols = cols;
    key.ld = ld;
    key.box_rows = box_rows;
    key.box_cols = box_cols;
    key.dtype = (int)dtype;
    key.swizzle = (int)swizzle;
    key.elem_bytes = elem_bytes;
    key.depth = depth;
    key.zstride = zstride;
    const CUtensorMap *hit = tk_lc_map_find(lc, &key);
    if (hit) {
        *map = *hit;
        return TK_SUCCESS;
    }
    PFN_cuTensorMapEncodeTiled_v12000 encode;
    tk_status st = encode_fn(lc, &encode, why, len);
    if (st)
        return st;
    const cuuint32_t rank = depth ? 3 : 2;
    cuuint64_t dims[3] = { cols, rows, depth };                        /* innermost first */
    cuuint64_t strides[2] = { ld * elem_bytes, zstride * elem_bytes };  /* bytes, of every dimension but the innermost */
    cuuint32_t box[3] = { box_cols, box_rows, 1 };
    cuuint32_t elem_strides[3] = { 1, 1, 1 };
    CUresult r = encode(map, dtype, rank, (void *)base, dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        snprintf(why, len,
                 "cuTensorMapEncodeTiled failed (CUresult %d) for %llu matrices of %llu x %llu, ld %llu, %llu apart, box "
                 "%u x %u at %p",
                 (int)r, (unsigned long long)(depth ? depth : 1), (unsigned long long)rows, (unsigned long long)cols,
                 (unsigned long long)ld, (unsigned long long)zstride, box_rows, box_cols, base);
        return TK_ERR_CUDA;
    }
    tk_lc_map_put(lc, &key, map);
    return TK_SUCCESS;
}

tk_status tk_tma_map_2d(tk_launch_cache *lc, CUtensorMap *map, CUtensorMapDataType dtype, size_t elem_bytes,
                        const void *base, uint64_t rows, uint64_t cols, uint64_t ld, uint32_t box_rows,
                        uint32_t box_cols, CUtensorMapSwizzle swizzle, char *why, size_t len)
{
    return map_nd(lc, map, dtype, elem_bytes, base, 0, 0, rows, cols, ld, box_rows, box_cols, swizzle, why, len);
}

tk_status tk_tma_map_3d(tk_launch_cache *lc, CUtensorMap *map, CUtensorMapDataType dtype, size_t elem_bytes,
                        const void *base, uint64_t depth, uint64_t zstride, uint64_t rows, uint64_t cols, uint64_t ld,
                        uint32_t box_rows, uint32_t box_cols, CUtensorMapSwizzle swizzle, char *why, size_t len)
{
    return map_nd(lc, map, dtype, elem_bytes, base, depth, zstride, rows, cols, ld, box_rows, box_cols, swizzle, why,
                  len);
}
