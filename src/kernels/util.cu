/* util.cu - small kernels of the library itself: C = beta * C (the K == 0
 * case of the GEMM; beta == 0 writes zeros without reading C, BLAS
 * semantics), the strided 2-D copy that repacks operands whose leading
 * dimension or address a fast kernel cannot take (route.c), and the lab's
 * random and small-integer fills on the device. */
#include <stdio.h>
#include <string.h>
#include "../lib/kernel.h"
#include "../tiles/epilogue.cuh"

static __global__ void scale_c_kernel(void *c, int64_t m, int64_t n, int64_t ldc, tk_dtype c_type, float beta)
{
    for (int64_t i = blockIdx.y; i < m; i += gridDim.y)
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x)
            tk_epilogue_store(c, i * ldc + j, c_type, 0.0f, 0.0f, beta);
}

extern "C" tk_status tk_launch_scale_c(const tk_args *a, cudaStream_t stream, char *why, size_t len)
{
    int64_t bx = (a->n + 255) / 256;
    dim3 grid((unsigned)(bx < 1024 ? bx : 1024), (unsigned)(a->m < 65535 ? a->m : 65535));
    scale_c_kernel<<<grid, 256, 0, stream>>>(a->c, a->m, a->n, a->ldc, a->c_type, a->beta);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "launch: %s", cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

/* One 16-byte chunk of 8 2-byte units, as a vector or as units. */
typedef union copy_chunk {
    uint4 v;
    uint16_t u[8];
} copy_chunk;

/* Up to TK_COPY_JOBS copies in one launch (a route's misaligned operands:
 * each copy of its own is a launch, ~3 us at small sizes), in 2-byte units:
 * job q moves rows x cols units from src (leading dimension lds) to dst
 * (ldd); first[q] is its first chunk in the launch's numbering. */
typedef struct copy_jobs {
    uint16_t *dst[TK_COPY_JOBS];
    const uint16_t *src[TK_COPY_JOBS];
    int64_t ldd[TK_COPY_JOBS], lds[TK_COPY_JOBS], cols[TK_COPY_JOBS], chunks[TK_COPY_JOBS];
    int64_t first[TK_COPY_JOBS + 1];
    int n;
} copy_jobs;

/* Thread i moves chunk i of the jobs' flattened rows x ceil(cols / 8)
 * chunks: 8 consecutive units of one row, with one 16-byte access where the
 * address allows it and 2-byte ones otherwise, so a warp reads and writes
 * 512 contiguous bytes of a row whatever the alignment of either side. */
static __global__ void copy_2d_kernel(const __grid_constant__ copy_jobs jb)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < jb.first[jb.n];
         i += (int64_t)gridDim.x * blockDim.x) {
        int q = 0;
        while (i >= jb.first[q + 1])
            q++;
        const int64_t k = i - jb.first[q], cols = jb.cols[q];
        const int64_t r = k / jb.chunks[q], c = (k - r * jb.chunks[q]) * 8;
        const uint16_t *s = jb.src[q] + r * jb.lds[q] + c;
        uint16_t *d = jb.dst[q] + r * jb.ldd[q] + c;
        const bool full = c + 8 <= cols;
        copy_chunk x;
        if (full && (uintptr_t)s % 16 == 0) {
            x.v = *(const uint4 *)s;
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                x.u[j] = c + j < cols ? s[j] : 0;
        }
        if (full && (uintptr_t)d % 16 == 0) {
            *(uint4 *)d = x.v;
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (c + j < cols)
                    d[j] = x.u[j];
        }
    }
}

extern "C" tk_status tk_launch_copy_2d_jobs(const tk_copy_job *job, int n, cudaStream_t stream, char *why,
                                            size_t len)
{
    copy_jobs jb;
    memset(&jb, 0, sizeof jb);
    if (n > TK_COPY_JOBS) {
        snprintf(why, len, "copy: %d jobs in one launch, at most %d", n, TK_COPY_JOBS);
        return TK_ERR_INVALID_VALUE;
    }
    for (int q = 0; q < n; q++) {
        const int64_t u = (int64_t)job[q].elem_bytes / 2;   /* 2-byte units per element */
        if (job[q].rows <= 0 || job[q].cols <= 0)
            continue;
        jb.dst[jb.n] = (uint16_t *)job[q].dst;
        jb.src[jb.n] = (const uint16_t *)job[q].src;
        jb.ldd[jb.n] = job[q].ldd * u;
        jb.lds[jb.n] = job[q].lds * u;
        jb.cols[jb.n] = job[q].cols * u;
        jb.chunks[jb.n] = (jb.cols[jb.n] + 7) / 8;
        jb.first[jb.n + 1] = jb.first[jb.n] + job[q].rows * jb.chunks[jb.n];
        jb.n++;
    }
    const int64_t total = jb.first[jb.n];
    if (total <= 0)
        return TK_SUCCESS;
    const int64_t blocks = (total + 255) / 256;
    /* enough blocks to fill any GPU; the grid-stride loop does the rest */
    copy_2d_kernel<<<(unsigned)(blocks < 8192 ? blocks : 8192), 256, 0, stream>>>(jb);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "copy launch: %s", cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

extern "C" tk_status tk_launch_copy_2d(void *dst, int64_t ldd, const void *src, int64_t lds, int64_t rows,
                                       int64_t cols, size_t elem_bytes, cudaStream_t stream, char *why, size_t len)
{
    const tk_copy_job job = { dst, ldd, src, lds, rows, cols, elem_bytes };
    return tk_launch_copy_2d_jobs(&job, 1, stream, why, len);
}
