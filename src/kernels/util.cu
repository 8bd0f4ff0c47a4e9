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

/* One 16-byte chunk of 16 / sizeof(U) units, as a vector or as units. */
template <typename U>
union copy_chunk {
    uint4 v;
    U u[16 / sizeof(U)];
};

/* Up to TK_COPY_JOBS copies in one launch (a route's misaligned operands:
 * each copy of its own is a launch, ~3 us at small sizes), in units of one
 * size: job q moves rows x cols units from src (leading dimension lds) to
 * dst (ldd); first[q] is its first chunk in the launch's numbering. */
typedef struct copy_jobs {
    char *dst[TK_COPY_JOBS];
    const char *src[TK_COPY_JOBS];
    int64_t ldd[TK_COPY_JOBS], lds[TK_COPY_JOBS], cols[TK_COPY_JOBS], chunks[TK_COPY_JOBS];
    int64_t first[TK_COPY_JOBS + 1];
    int n;
} copy_jobs;

/* Thread i moves chunk i of the jobs' flattened rows x ceil(cols / UNITS)
 * chunks: 16 consecutive bytes of one row, with one 16-byte access where
 * the address allows it and unit-sized ones otherwise, so a warp reads and
 * writes 512 contiguous bytes of a row whatever the alignment of either
 * side. U is the unit: uint16_t for bf16 and wider elements, uint8_t where
 * a job has FP8 codes (their rows may start at any byte). A template: the
 * unit's size sets the chunk's unit count and the unrolled loops' bounds at
 * compile time, which C could only do by pasting the body into a macro. */
template <typename U>
static __global__ void copy_2d_kernel(const __grid_constant__ copy_jobs jb)
{
    constexpr int UNITS = 16 / sizeof(U);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < jb.first[jb.n];
         i += (int64_t)gridDim.x * blockDim.x) {
        int q = 0;
        while (i >= jb.first[q + 1])
            q++;
        const int64_t k = i - jb.first[q], cols = jb.cols[q];
        const int64_t r = k / jb.chunks[q], c = (k - r * jb.chunks[q]) * UNITS;
        const U *s = (const U *)jb.src[q] + r * jb.lds[q] + c;
        U *d = (U *)jb.dst[q] + r * jb.ldd[q] + c;
        const bool full = c + UNITS <= cols;
        copy_chunk<U> x;
        if (full && (uintptr_t)s % 16 == 0) {
            x.v = *(const uint4 *)s;
        } else {
#pragma unroll
            for (int j = 0; j < UNITS; j++)
                x.u[j] = c + j < cols ? s[j] : 0;
        }
        if (full && (uintptr_t)d % 16 == 0) {
            *(uint4 *)d = x.v;
        } else {
#pragma unroll
            for (int j = 0; j < UNITS; j++)
                if (c + j < cols)
                    d[j] = x.u[j];
        }
    }
}

/* TK_SUCCESS when n jobs fit one launch of `what` (at most cap). */
static tk_status jobs_fit(const char *what, int n, int cap, char *why, size_t len)
{
    if (n <= cap)
        return TK_SUCCESS;
    snprintf(why, len, "%s: %d jobs in one launch, at most %d", what, n, cap);
    return TK_ERR_INVALID_VALUE;
}

/* A launch's outcome: TK_SUCCESS, or TK_ERR_CUDA with why ("what launch: ..."). */
static tk_status launch_status(const char *what, char *why, size_t len)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "%s launch: %s", what, cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

extern "C" tk_status tk_launch_copy_2d_jobs(const tk_copy_job *job, int n, cudaStream_t stream, char *why,
                                            size_t len)
{
    if (jobs_fit("copy", n, TK_COPY_JOBS, why, len))
        return TK_ERR_INVALID_VALUE;
    copy_jobs jb;
    memset(&jb, 0, sizeof jb);
    /* the launch's unit: bytes where any job has 1-byte elements (each
     * element of the others is then elem_bytes units), else 2 bytes */
    size_t unit = 2;
    for (int q = 0; q < n; q++)
        if (job[q].elem_bytes == 1 && job[q].rows > 0 && job[q].cols > 0)
            unit = 1;
    const int64_t per_chunk = 16 / (int64_t)unit;
    for (int q = 0; q < n; q++) {
        const int64_t u = (int64_t)(job[q].elem_bytes / unit);   /* units per element */
        if (job[q].rows <= 0 || job[q].cols <= 0)
            continue;
        jb.dst[jb.n] = (char *)job[q].dst;
        jb.src[jb.n] = (const char *)job[q].src;
        jb.ldd[jb.n] = job[q].ldd * u;
        jb.lds[jb.n] = job[q].lds * u;
        jb.cols[jb.n] = job[q].cols * u;
        jb.chunks[jb.n] = (jb.cols[jb.n] + per_chunk - 1) / per_chunk;
        jb.first[jb.n + 1] = jb.first[jb.n] + job[q].rows * jb.chunks[jb.n];
        jb.n++;
    }
    const int64_t total = jb.first[jb.n];
    if (total <= 0)
        return TK_SUCCESS;
    const int64_t blocks = (total + 255) / 256;
    /* enough blocks to fill any GPU; the grid-stride loop does the rest */
    const unsigned grid = (unsigned)(blocks < 8192 ? blocks : 8192);
    if (unit == 1)
        copy_2d_kernel<uint8_t><<<grid, 256, 0, stream>>>(jb);
    else
        copy_2d_kernel<uint16_t><<<grid, 256, 0, stream>>>(jb);
    return launch_status("copy", why, len);
}

/* ---- the transposing copy of 1-byte elements (FP8 codes made K-major) ----
 * A tile is 64 rows x 64 bytes of src, which becomes 64 rows x 64 bytes of
 * dst. Each of the 256 threads reads a 4 x 4 block of bytes as four 32-bit
 * words (four rows of src; 16 threads cover a row's 64 bytes, so each read
 * of a warp is two 64-byte runs), transposes it in registers (__byte_perm)
 * and stores the four words, now four rows of dst, to shared memory; after
 * the barrier each thread writes four words of dst rows, again 64-byte
 * runs. Shared memory thus sees 32-bit accesses only; its rows are padded
 * to 17 words so the stores of a warp (16 blocks down one column of words)
 * fall on 16 banks, two lanes each, and the reads on distinct ones but
 * one. A word whose address is not 4-byte aligned, or that crosses an edge
 * of the matrix, goes byte by byte. */
#define TR_TILE 64
#define TR_WORDS (TR_TILE / 4)        /* 32-bit words a tile row */
#define TR_PITCH (TR_WORDS + 1)       /* a shared row's words, padded */
#define TR_THREADS 256                /* one 4 x 4 block each */

typedef struct transpose_jobs {
    uint8_t *dst[TK_TRANSPOSE_JOBS];
    const uint8_t *src[TK_TRANSPOSE_JOBS];
    int64_t ldd[TK_TRANSPOSE_JOBS], lds[TK_TRANSPOSE_JOBS], rows[TK_TRANSPOSE_JOBS], cols[TK_TRANSPOSE_JOBS];
    int64_t tiles_c[TK_TRANSPOSE_JOBS];     /* tiles across src's columns */
    int64_t first[TK_TRANSPOSE_JOBS + 1];   /* job q's first tile in the launch's numbering */
    int n;
} transpose_jobs;

/* n (0..4) bytes at p, little-endian into a word; the rest 0. */
static __device__ __forceinline__ uint32_t load_bytes(const uint8_t *p, int n)
{
    uint32_t w = 0;
#pragma unroll
    for (int j = 0; j < 4; j++)
        if (j < n)
            w |= (uint32_t)p[j] << (8 * j);
    return w;
}

static __device__ __forceinline__ void store_bytes(uint8_t *p, uint32_t w, int n)
{
#pragma unroll
    for (int j = 0; j < 4; j++)
        if (j < n)
            p[j] = (uint8_t)(w >> (8 * j));
}

static __global__ void __launch_bounds__(TR_THREADS) transpose_u8_kernel(const __grid_constant__ transpose_jobs jb)
{
    __shared__ uint32_t sh[TR_TILE][TR_PITCH];
    const int br = threadIdx.x / TR_WORDS, bc = threadIdx.x % TR_WORDS;   /* this thread's 4 x 4 block */
    for (int64_t t = blockIdx.x; t < jb.first[jb.n]; t += gridDim.x) {
        int q = 0;
        while (t >= jb.first[q + 1])
            q++;
        const int64_t tile = t - jb.first[q];
        const int64_t r0 = tile / jb.tiles_c[q] * TR_TILE, c0 = tile % jb.tiles_c[q] * TR_TILE;
        const int64_t rows = jb.rows[q], cols = jb.cols[q];
        /* src rows r0 + 4 br + i, columns c0 + 4 bc .. + 3 */
        const int64_t c = c0 + 4 * bc;
        const int nc = c + 4 <= cols ? 4 : c < cols ? (int)(cols - c) : 0;
        uint32_t w[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int64_t r = r0 + 4 * br + i;
            const uint8_t *p = jb.src[q] + r * jb.lds[q] + c;
            w[i] = r >= rows ? 0u : nc == 4 && (uintptr_t)p % 4 == 0 ? *(const uint32_t *)p : load_bytes(p, nc);
        }
        /* byte j of word i -> byte i of word j: pairs of rows interleaved, then pairs of pairs */
        const uint32_t lo01 = __byte_perm(w[0], w[1], 0x5140), lo23 = __byte_perm(w[2], w[3], 0x5140);
        const uint32_t hi01 = __byte_perm(w[0], w[1], 0x7362), hi23 = __byte_perm(w[2], w[3], 0x7362);
        sh[4 * bc + 0][br] = __byte_perm(lo01, lo23, 0x5410);
        sh[4 * bc + 1][br] = __byte_perm(lo01, lo23, 0x7632);
        sh[4 * bc + 2][br] = __byte_perm(hi01, hi23, 0x5410);
        sh[4 * bc + 3][br] = __byte_perm(hi01, hi23, 0x7632);
        __syncthreads();
        /* dst rows c0 + dr (src's columns), columns r0 + 4 bc .. + 3 (src's rows) */
        const int64_t dc = r0 + 4 * bc;
        const int nd = dc + 4 <= rows ? 4 : dc < rows ? (int)(rows - dc) : 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int dr = i * (TR_THREADS / TR_WORDS) + br;
            if (c0 + dr >= cols || nd == 0)
                continue;
            uint8_t *p = jb.dst[q] + (c0 + dr) * jb.ldd[q] + dc;
            const uint32_t v = sh[dr][bc];
            if (nd == 4 && (uintptr_t)p % 4 == 0)
                *(uint32_t *)p = v;
            else
                store_bytes(p, v, nd);
        }
        __syncthreads();   /* the next tile's stores wait for these reads */
    }
}

extern "C" tk_status tk_launch_transpose_2d_jobs(const tk_copy_job *job, int n, cudaStream_t stream, char *why,
                                                 size_t len)
{
    if (jobs_fit("transpose", n, TK_TRANSPOSE_JOBS, why, len))
        return TK_ERR_INVALID_VALUE;
    transpose_jobs jb;
    memset(&jb, 0, sizeof jb);
    for (int q = 0; q < n; q++) {
        if (job[q].elem_bytes != 1) {
            snprintf(why, len, "transpose: job %d has %zu-byte elements (expected 1)", q, job[q].elem_bytes);
            return TK_ERR_INVALID_VALUE;
        }
        if (job[q].rows <= 0 || job[q].cols <= 0)
            continue;
        jb.dst[jb.n] = (uint8_t *)job[q].dst;
        jb.src[jb.n] = (const uint8_t *)job[q].src;
        jb.ldd[jb.n] = job[q].ldd;
        jb.lds[jb.n] = job[q].lds;
        jb.rows[jb.n] = job[q].rows;
        jb.cols[jb.n] = job[q].cols;
        jb.tiles_c[jb.n] = (job[q].cols + TR_TILE - 1) / TR_TILE;
        jb.first[jb.n + 1] = jb.first[jb.n] + (job[q].rows + TR_TILE - 1) / TR_TILE * jb.tiles_c[jb.n];
        jb.n++;
    }
    const int64_t total = jb.first[jb.n];
    if (total <= 0)
        return TK_SUCCESS;
    /* a block a tile up to a grid that fills any GPU many times over; the
     * tile loop does the rest */
    transpose_u8_kernel<<<(unsigned)(total < 65536 ? total : 65536), TR_THREADS, 0, stream>>>(jb);
    return launch_status("transpose", why, len);
}

extern "C" tk_status tk_launch_copy_2d(void *dst, int64_t ldd, const void *src, int64_t lds, int64_t rows,
                                       int64_t cols, size_t elem_bytes, cudaStream_t stream, char *why, size_t len)
{
    const tk_copy_job job = { dst, ldd, src, lds, rows, cols, elem_bytes };
    return tk_launch_copy_2d_jobs(&job, 1, stream, why, len);
}
