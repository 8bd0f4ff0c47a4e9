/* launch.cuh - host-side helpers shared by the tile kernels' registry
 * entries (src/kernels/k02..k13): the support check and the launch checks.
 */
#ifndef TK_TILES_LAUNCH_CUH
#define TK_TILES_LAUNCH_CUH

#include <stdio.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include "lib/kernel.h"
#include "layout.h"

/* The problems every tile kernel can run: A stored M x K (op_a N; its rows
 * are read with 16-byte loads along K), B in the one layout op_b the kernel
 * was written for (its seed used one), A and B 16-byte aligned with leading
 * dimensions a multiple of 8 elements (every 16-byte chunk aligned), and a
 * grid of ceil(M/bm) block rows that fits gridDim.y when m_on_y is set.
 * C has no alignment need: the epilogue falls back to single stores.
 * NULL pointers (introspection) are judged on the leading dimensions only. */
static inline tk_status tk_tiles_supports(const tk_args *a, tk_op op_b, int bm, int m_on_y, char *why,
                                          size_t len)
{
    if (a->op_a != TK_OP_N) {
        snprintf(why, len, "op_a T is not supported: A must be stored M x K (op N), its rows are loaded along K");
        return TK_ERR_NOT_SUPPORTED;
    }
    if (a->op_b != op_b) {
        snprintf(why, len, "op_b %s is not supported: this kernel reads B stored %s (op_b %s), as its seed did",
                 a->op_b == TK_OP_N ? "N" : "T", op_b == TK_OP_N ? "K x N" : "N x K", op_b == TK_OP_N ? "N" : "T");
        return TK_ERR_NOT_SUPPORTED;
    }
    /* 16-byte loads of A and B rows; C is stored element by element */
    tk_status st = tk_check_align(a, TK_CHUNK_ELEMS, 1, why, len);
    if (st != TK_SUCCESS)
        return st;
    if (m_on_y && tk_ceil_div(a->m, bm) > 65535) {
        snprintf(why, len, "M = %lld needs %lld block rows of %d, more than the grid's 65535", (long long)a->m,
                 (long long)tk_ceil_div(a->m, bm), bm);
        return TK_ERR_NOT_SUPPORTED;
    }
    return TK_SUCCESS;
}

/* Opts in to more than 48 KB of dynamic shared memory when a kernel needs it. */
static inline tk_status tk_tiles_set_smem(const void *func, size_t bytes, char *why, size_t len)
{
    if (bytes <= 48 * 1024)
        return TK_SUCCESS;
    cudaError_t e = cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize = %zu): %s", bytes,
                 cudaGetErrorString(e));
        cudaGetLastError();
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

/* After a launch: the launch error, if any. */
static inline tk_status tk_tiles_launched(char *why, size_t len)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "launch: %s", cudaGetErrorString(e));
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

/* The grid of a kernel with bm x bn blocks: x over N, y over M. */
static inline dim3 tk_tiles_grid(const tk_args *a, int bm, int bn)
{
    return dim3((unsigned)tk_ceil_div(a->n, bn), (unsigned)tk_ceil_div(a->m, bm));
}

#endif /* TK_TILES_LAUNCH_CUH */
