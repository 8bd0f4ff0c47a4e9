/* lab_device.cu - the lab's kernels: bench's and the fuzzer's inputs made on
 * the device (the counter-based random numbers of lab_rand.h, so the GPU
 * makes the values the CPU makes for verify) and the DRAM read probe, which
 * is also bench's L2 flush. Built into libtilekit_lab.a, never into the
 * library; declared in lab.h. */
#include <stdint.h>
extern "C" {   /* lab.h is a C header without C++ guards */
#include "lab.h"
}
#include "lab_rand.h"
#include "../tiles/epilogue.cuh"

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
