/* util.cu - small kernels of the library itself: C = beta * C (the K == 0
 * case of the GEMM; beta == 0 writes zeros without reading C, BLAS
 * semantics), the strided 2-D copy that repacks operands whose leading
 * dimension or address a fast kernel cannot take (route.c), and the lab's
 * random and small-integer fills on the device. */
#include <stdio.h>
#include <string.h>
#include "../lib/kernel.h"
extern "C" {   /* lab.h is a C header without C++ guards */
#include "../lab/lab.h"
}
#include "../lab/lab_rand.h"
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

/* The lab's inputs made on the device (lab_rand.h): bench fills suites of
 * large shapes in milliseconds instead of seconds on the CPU. ints = 0:
 * tk_lab_rand_elem's bf16 values; 1: the fuzzer's exact-mode small
 * integers (tk_lab_rand_int), whose products and sums an fp32 GEMM
 * computes without rounding. Both are bf16-exact, so either type of x
 * holds the same values. */
static __global__ void fill_kernel(void *x, int f32, int ints, size_t n, uint64_t seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = ints ? (float)tk_lab_rand_int(seed, i) : tk_bf16_to_f32(tk_lab_rand_elem(seed, i));
        if (f32)
            ((float *)x)[i] = v;
        else
            ((uint16_t *)x)[i] = tk_f32_to_bf16(v);
    }
}

static int fill_device(void *x, tk_dtype type, int ints, size_t n, uint64_t seed, void *stream)
{
    if (!n)
        return 0;
    const size_t blocks = (n + 255) / 256;
    fill_kernel<<<(unsigned)(blocks < 8192 ? blocks : 8192), 256, 0, (cudaStream_t)stream>>>(x, type == TK_F32, ints,
                                                                                             n, seed);
    return (int)cudaGetLastError();
}

extern "C" int tk_lab_fill_device(void *x, tk_dtype type, size_t n, uint64_t seed, void *stream)
{
    return fill_device(x, type, 0, n, seed, stream);
}

extern "C" int tk_lab_fill_int_device(void *x, tk_dtype type, size_t n, uint64_t seed, void *stream)
{
    return fill_device(x, type, 1, n, seed, stream);
}

/* The lab's DRAM read probe: every thread streams 16-byte words (four
 * independent loads in flight per iteration) and folds them into a value
 * that is written only if it equals a constant no input makes likely, so
 * the loads cannot be dropped. cs: evict-first loads (the probe: a read
 * once stream); else loads that allocate in L2 as any other (the bench's
 * L2 flush, which must replace every line there). */
static __device__ __forceinline__ uint4 read_word(const uint4 *p, int cs)
{
    return cs ? __ldcs(p) : __ldcg(p);
}

static __global__ void read_probe_kernel(const uint4 *x, size_t n16, int cs, uint32_t *sink)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t acc = 0;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        const uint4 a = read_word(x + i, cs), b = read_word(x + i + stride, cs);
        const uint4 c = read_word(x + i + 2 * stride, cs), d = read_word(x + i + 3 * stride, cs);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n16; i += stride) {
        const uint4 a = read_word(x + i, cs);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u)
        sink[blockIdx.x] = acc;
}

extern "C" int tk_lab_flush_read_device(const void *x, size_t bytes, void *sink, int sms, void *stream)
{
    read_probe_kernel<<<(unsigned)(sms * 4), 512, 0, (cudaStream_t)stream>>>((const uint4 *)x, bytes / 16, 0,
                                                                                 (uint32_t *)sink);
    return (int)cudaGetLastError();
}

extern "C" int tk_lab_read_device(const void *x, size_t bytes, void *sink, int sms, void *stream)
{
    read_probe_kernel<<<(unsigned)(sms * 4), 512, 0, (cudaStream_t)stream>>>((const uint4 *)x, bytes / 16, 1,
                                                                                (uint32_t *)sink);
    return (int)cudaGetLastError();
}
