/* k30_check - device check of the Hopper kernels k30_* against cuBLAS.
 *
 *   gpucu_k30_check [name-substring]       correctness tests (sm_90 only)
 *   TK_K30_BENCH=1 gpucu_k30_check bench   also the timing table
 *   TK_K30_KERNELS=a,b                     kernels under test (default: the k30 family)
 *   TK_K30_REF=k01_naive                   reference kernel (default cublas; use
 *                                          k01_naive under compute-sanitizer, whose
 *                                          racecheck flags cuBLAS's own kernels)
 *
 * Correctness: A and B hold small random integers (-2..2, never all zero), so
 * every product and fp32 sum is exact and the result must match the
 * reference bit for bit. For bf16 C the reference is the fp32 result rounded
 * to nearest here (cuBLAS's own bf16 output differs by one bf16 ulp from
 * that on some shapes, e.g. 8191 x 8193 x 8190). One real-valued case per
 * output type checks with a tolerance instead. C is
 * poisoned with NaN when beta == 0 and filled with integers when beta != 0;
 * leading dimensions are padded and two guard rows follow C, so the
 * comparison over whole rows also proves the kernel wrote nothing outside
 * M x N. Timing: cudaEvents around each call, L2 flushed by a 128 MiB memset
 * before every sample, kernels interleaved with cuBLAS, median of 20 after
 * 3 warm-up calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "tilekit.h"
#include "kernels/k30_core.cuh"
extern "C" {
#include "../host/check.h"
}

#define KERNEL "k31_wgmma_cluster"   /* the one auto-dispatch must pick */

static tk_handle g_h;
static int g_ok_device;
/* The kernels under test: every registry entry of the k30 family (k30_*,
 * k31_*, k33_* .. k36_*, k38_*, k42_*), or the
 * comma-separated list in TK_K30_KERNELS. */
static const char *g_kernels[16];
static int g_nkernels;
static char g_kernel_env[256];
static const char *g_ref = "cublas";   /* TK_K30_REF: the reference (k01_naive under the sanitizers) */

static __device__ uint32_t hash32(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* mode 0: integers -2..2; mode 1: uniform reals in [-1, 1). */
static __global__ void fill_bf16(uint16_t *p, int64_t n, uint32_t seed, int mode)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t r = hash32((uint64_t)i * 0x9E3779B97F4A7C15ULL + seed);
        float v = mode == 0 ? (float)((int)(r % 5u) - 2) : (float)(r >> 8) * (2.0f / 16777216.0f) - 1.0f;
        p[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
}

/* poison = 1: NaN everywhere; else integers -3..3. */
static __global__ void fill_c(void *p, int64_t n, int bf16, uint32_t seed, int poison)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = poison ? __int_as_float(0x7fc00000) : (float)((int)(hash32((uint64_t)i + seed) % 7u) - 3);
        if (bf16)
            ((uint16_t *)p)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
        else
            ((float *)p)[i] = v;
    }
}

typedef struct cmp_result {
    unsigned long long bad;    /* elements that differ (exact) or are NaN in one only */
    unsigned long long first;  /* smallest bad index */
    unsigned int max_diff;     /* float bits of max |x - y| over differing elements */
    unsigned int max_ref;      /* float bits of max |y| over finite y */
} cmp_result;

static __global__ void compare(const void *x, const void *y, int64_t n, int bf16, int exact, cmp_result *r)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float a, b;
        uint32_t ba, bb;
        if (bf16) {
            ba = ((const uint16_t *)x)[i];
            bb = ((const uint16_t *)y)[i];
            a = __uint_as_float(ba << 16);
            b = __uint_as_float(bb << 16);
        } else {
            a = ((const float *)x)[i];
            b = ((const float *)y)[i];
            ba = __float_as_uint(a);
            bb = __float_as_uint(b);
        }
        if (isfinite(b))
            atomicMax(&r->max_ref, __float_as_uint(fabsf(b)));
        if (ba == bb)
            continue;
        float d = fabsf(a - b);
        if (exact || isnan(d)) {
            atomicAdd(&r->bad, 1ULL);
            atomicMin(&r->first, (unsigned long long)i);
        }
        if (!isnan(d))
            atomicMax(&r->max_diff, __float_as_uint(d));
    }
}

/* The bf16 reference: cuBLAS with fp32 C (exact for integer data), rounded
 * to nearest here; elements cuBLAS left alone (NaN poison, padding) keep
 * their original bits. */
static __global__ void widen_bf16(const uint16_t *in, float *out, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = __uint_as_float((uint32_t)in[i] << 16);
}

static __global__ void narrow_f32(const float *in, uint16_t *out, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        if (!isnan(in[i]))
            out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
}

typedef struct gcase {
    int64_t m, n, k;
    tk_op op_a, op_b;
    tk_dtype ct;
    float alpha, beta;
    int real;            /* 0: integers (exact), 1: reals (tolerance) */
    int pad;             /* extra elements per row beyond the minimum multiple of 8 */
    tk_layout layout;
} gcase;

static int64_t round8(int64_t x) { return (x + 7) / 8 * 8; }

typedef struct bufs {
    void *a, *b, *c, *ref;
    cmp_result *cmp;
    size_t a_bytes, b_bytes, c_bytes;
} bufs;

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess)
        return NULL;
    return p;
}

/* Builds the problem of c in freshly allocated buffers (freed by the caller). */
static int setup(const gcase *c, tk_gemm_problem *p, bufs *b)
{
    memset(b, 0, sizeof *b);
    memset(p, 0, sizeof *p);
    /* Stored shapes in the problem's layout (rows x cols of the memory image). */
    int row = c->layout == TK_ROW_MAJOR;
    int64_t ar = c->op_a == TK_OP_N ? c->m : c->k, ac = c->op_a == TK_OP_N ? c->k : c->m;
    int64_t br = c->op_b == TK_OP_N ? c->k : c->n, bc = c->op_b == TK_OP_N ? c->n : c->k;
    int64_t lda = round8(row ? ac : ar) + c->pad, ldb = round8(row ? bc : br) + c->pad;
    int64_t ldc = round8(row ? c->n : c->m) + c->pad;
    int64_t a_outer = row ? ar : ac, b_outer = row ? br : bc, c_outer = (row ? c->m : c->n) + 2;  /* 2 guard rows */
    size_t cs = c->ct == TK_F32 ? 4 : 2;
    b->a_bytes = (size_t)(lda * a_outer) * 2;
    b->b_bytes = (size_t)(ldb * b_outer) * 2;
    b->c_bytes = (size_t)(ldc * c_outer) * cs;
    b->a = dev_alloc(b->a_bytes);
    b->b = dev_alloc(b->b_bytes);
    b->c = dev_alloc(b->c_bytes);
    b->ref = dev_alloc(b->c_bytes);
    b->cmp = (cmp_result *)dev_alloc(sizeof(cmp_result));
    if (!b->a || !b->b || !b->c || !b->ref || !b->cmp)
        return 0;
    fill_bf16<<<1024, 256>>>((uint16_t *)b->a, (int64_t)(b->a_bytes / 2), 17, c->real);
    fill_bf16<<<1024, 256>>>((uint16_t *)b->b, (int64_t)(b->b_bytes / 2), 91, c->real);
    fill_c<<<1024, 256>>>(b->c, (int64_t)(b->c_bytes / cs), c->ct == TK_BF16, 5, c->beta == 0.0f);
    cudaMemcpy(b->ref, b->c, b->c_bytes, cudaMemcpyDeviceToDevice);
    tk_gemm_problem q = { c->layout, c->op_a, c->op_b, c->m, c->n, c->k, c->alpha, c->beta,
                          b->a, lda, b->b, ldb, b->c, ldc, c->ct };
    *p = q;
    return 1;
}

static void release(bufs *b)
{
    cudaFree(b->a);
    cudaFree(b->b);
    cudaFree(b->c);
    cudaFree(b->ref);
    cudaFree(b->cmp);
}

static void describe(const gcase *c, char *s, size_t len)
{
    snprintf(s, len, "%lldx%lldx%lld %s op_a=%s op_b=%s C=%s alpha=%g beta=%g %s pad=%d", (long long)c->m,
             (long long)c->n, (long long)c->k, c->layout == TK_ROW_MAJOR ? "row" : "col",
             c->op_a == TK_OP_N ? "N" : "T", c->op_b == TK_OP_N ? "N" : "T", c->ct == TK_F32 ? "f32" : "bf16",
             c->alpha, c->beta, c->real ? "real" : "int", c->pad);
}

/* Runs the case with kernel and cuBLAS and compares; returns 1 if it passed. */
static int run_case_with(const char *kernel, const gcase *c)
{
    char d[320], d0[256];
    describe(c, d0, sizeof d0);
    snprintf(d, sizeof d, "%s %s", kernel, d0);
    tk_gemm_problem p;
    bufs b;
    if (!setup(c, &p, &b)) {
        CHECK(0, "%s: out of device memory", d);
        release(&b);
        return 0;
    }
    /* k36 and k38 (the swapped tiles) read A along K only: their refusal of op_a T
     * (after normalization) is skipped, no other refusal. */
    if ((!strncmp(kernel, "k36_", 4) || !strncmp(kernel, "k38_", 4)) &&
        tk_kernel_supports(g_h, kernel, &p) == TK_ERR_NOT_SUPPORTED &&
        strstr(tk_last_error(g_h), "op_a must be N")) {
        release(&b);
        return 1;
    }
    tk_status st = tk_gemm_ex(g_h, &p, kernel, NULL);
    CHECK(st == TK_SUCCESS, "%s: %s", d, tk_last_error(g_h));
    tk_gemm_problem r = p;
    tk_status sr;
    if (c->ct == TK_BF16) {
        int64_t count = (int64_t)(b.c_bytes / 2);
        float *r32 = (float *)dev_alloc((size_t)count * 4);
        CHECK(r32 != NULL, "%s: out of device memory", d);
        widen_bf16<<<1024, 256>>>((const uint16_t *)b.ref, r32, count);
        r.c = r32;
        r.c_type = TK_F32;
        sr = tk_gemm_ex(g_h, &r, g_ref, NULL);
        narrow_f32<<<1024, 256>>>(r32, (uint16_t *)b.ref, count);
        cudaFree(r32);
    } else {
        r.c = b.ref;
        sr = tk_gemm_ex(g_h, &r, g_ref, NULL);
    }
    CHECK(sr == TK_SUCCESS, "%s: cublas: %s", d, tk_last_error(g_h));
    cmp_result z = { 0, ~0ULL, 0, 0 }, h;
    cudaMemcpy(b.cmp, &z, sizeof z, cudaMemcpyHostToDevice);
    size_t cs = c->ct == TK_F32 ? 4 : 2;
    compare<<<1024, 256>>>(b.c, b.ref, (int64_t)(b.c_bytes / cs), c->ct == TK_BF16, !c->real, b.cmp);
    cudaError_t e = cudaMemcpy(&h, b.cmp, sizeof h, cudaMemcpyDeviceToHost);
    CHECK(e == cudaSuccess, "%s: %s", d, cudaGetErrorString(e));
    float md, mr;
    memcpy(&md, &h.max_diff, 4);
    memcpy(&mr, &h.max_ref, 4);
    float tol = c->ct == TK_F32 ? 1e-5f : 1e-2f;
    int ok = st == TK_SUCCESS && sr == TK_SUCCESS && e == cudaSuccess && h.bad == 0 &&
             (!c->real || md <= tol * mr);
    int64_t ldc = p.ldc;
    CHECK(ok, "%s: %llu bad elements, first at row %lld col %lld, max |diff| %g, max |ref| %g", d, h.bad,
          h.bad ? (long long)(h.first / ldc) : -1LL, h.bad ? (long long)(h.first % ldc) : -1LL, md, mr);
    if (!ok || c->real)
        printf("    %-4s %s  max|diff| %g  max|ref| %g\n", ok ? "ok" : "BAD", d, md, mr);
    release(&b);
    return ok;
}

static int run_case(const gcase *c)
{
    int ok = 1;
    for (int i = 0; i < g_nkernels; i++)
        ok &= run_case_with(g_kernels[i], c);
    return ok;
}

static int have_sm90(void)
{
    int dev = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    return major == 9 && minor == 0;
}

static void run_shapes(const int64_t (*shapes)[3], int count, int pad)
{
    if (!g_ok_device)
        return;
    int cases = 0, passed = 0;
    for (int s = 0; s < count; s++)
        for (int oa = 0; oa < 2; oa++)
            for (int ob = 0; ob < 2; ob++)
                for (int ct = 0; ct < 2; ct++)
                    for (int bi = 0; bi < 2; bi++) {
                        gcase c = { shapes[s][0], shapes[s][1], shapes[s][2], (tk_op)oa, (tk_op)ob, (tk_dtype)ct,
                                    1.0f, bi ? 0.5f : 0.0f, 0, pad, TK_ROW_MAJOR };
                        passed += run_case(&c);
                        cases++;
                    }
    printf("    %d of %d cases exact (shapes x op_a x op_b x C type x beta), each with %d kernels\n", passed, cases,
           g_nkernels);
}

static void k30_small_shapes(void)
{
    static const int64_t shapes[][3] = {
        { 1, 1, 1 }, { 127, 129, 65 }, { 129, 257, 63 }, { 128, 256, 64 }, { 64, 8, 8 }, { 300, 520, 16 },
        { 1000, 1000, 1000 }, { 257, 2000, 200 }, { 2300, 2040, 2104 }, { 2300, 2040, 3104 },
    };
    run_shapes(shapes, (int)(sizeof shapes / sizeof shapes[0]), 8);
    if (!g_ok_device)
        return;
    /* column-major problems go through normalization; alpha != 1 */
    gcase c1 = { 333, 517, 129, TK_OP_N, TK_OP_N, TK_F32, -1.5f, 0.5f, 0, 0, TK_COL_MAJOR };
    run_case(&c1);
    gcase c2 = { 333, 517, 129, TK_OP_T, TK_OP_T, TK_BF16, 2.0f, 0.0f, 0, 16, TK_COL_MAJOR };
    run_case(&c2);
    /* real-valued data, tolerance */
    gcase r1 = { 1000, 1000, 1000, TK_OP_N, TK_OP_N, TK_F32, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR };
    run_case(&r1);
    gcase r2 = { 1000, 1000, 1000, TK_OP_N, TK_OP_T, TK_BF16, 1.0f, 0.5f, 1, 0, TK_ROW_MAJOR };
    run_case(&r2);
}

static void k30_large_shapes(void)
{
    static const int64_t shapes[][3] = { { 8191, 8193, 8190 }, { 8192, 8192, 8192 } };
    run_shapes(shapes, 2, 0);
}

/* A few cases for compute-sanitizer: every op combination, a small and a
 * medium shape. */
static void k30_sanitize(void)
{
    if (!g_ok_device)
        return;
    for (int oa = 0; oa < 2; oa++)
        for (int ob = 0; ob < 2; ob++) {
            gcase c = { 127, 129, 65, (tk_op)oa, (tk_op)ob, oa ? TK_BF16 : TK_F32, 1.0f, 0.5f, 0, 8, TK_ROW_MAJOR };
            run_case(&c);
        }
    gcase m = { 1000, 1000, 1000, TK_OP_N, TK_OP_N, TK_F32, 1.0f, 0.0f, 0, 0, TK_ROW_MAJOR };
    run_case(&m);
    /* 72 cluster tiles on 66 clusters: k31 splits the last 6 in 2 slices. */
    gcase sk = { 2300, 2040, 2104, TK_OP_N, TK_OP_T, TK_F32, 1.0f, 0.5f, 0, 0, TK_ROW_MAJOR };
    run_case(&sk);
    /* 6 cluster tiles: k31 splits each in 3 slices. */
    gcase few = { 300, 600, 4000, TK_OP_N, TK_OP_T, TK_BF16, 1.0f, 0.0f, 0, 0, TK_ROW_MAJOR };
    run_case(&few);
}

/* Refusals are clear and auto-dispatch picks the kernel where it applies. */
static void k30_dispatch(void)
{
    if (!g_ok_device)
        return;
    tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 127, 129, 65, 1.0f, 0.0f,
                          NULL, 65, NULL, 129, NULL, 129, TK_F32 };
    tk_status st = tk_kernel_supports(g_h, KERNEL, &p);
    CHECK(st == TK_ERR_NOT_SUPPORTED, "lda 65 should be refused, got %d", (int)st);
    printf("    refusal (lda 65): %s\n", tk_last_error(g_h));
    tk_gemm_problem q = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 8192, 8192, 8192, 1.0f, 0.0f,
                          NULL, 8192, NULL, 8192, NULL, 8192, TK_F32 };
    const char *k = tk_select_kernel(g_h, &q);
    CHECK(k && !strcmp(k, KERNEL), "auto picks %s for 8192^3, expected %s", k ? k : "(none)", KERNEL);
    printf("    auto-dispatch at 8192^3: %s\n", k ? k : "(none)");
}

/* Which last waves k31 splits (host arithmetic, no GPU needed), for 66
 * clusters as on the H100 SXM: the shapes the other tests and the bench use. */
static void k30_split_plan(void)
{
    static const struct { int64_t m, n, k; int slices; } cases[] = {
        { 2300, 2040, 2104, 2 },   /* 72 tiles: 6 left, 2 slices end the wave in 1/2 tile */
        { 2300, 2040, 3104, 3 },   /* ... 3 slices in 1/3 once slices have 16 k-tiles */
        { 4096, 4096, 4096, 0 },   /* 256 tiles: 58 left; no split ends sooner */
        { 8192, 8192, 8192, 3 },   /* 1024 tiles: 34 left, 102 units in 2 rounds of 1/3 */
        { 8192, 8192, 1024, 0 },   /* 16 k-tiles: slices too short */
        { 4352, 4352, 4096, 2 },   /* 289 tiles: 25 left */
        { 2048, 2048, 2048, 0 },   /* 64 tiles: one partial wave; 2 slices would need 128 clusters */
        { 4096, 14336, 4096, 3 },  /* 896 tiles: 38 left */
        { 1000, 1000, 1000, 0 },   /* 16 tiles < 66 clusters, but 16 k-tiles: too short to split */
        { 2048, 1024, 2048, 2 },   /* 32 tiles: 2 slices of 16 k-tiles fill 64 clusters */
        { 300, 600, 4000, 3 },     /* 6 tiles of 63 k-tiles: 3 slices of >= 16 */
        { 512, 4096, 4096, 2 },    /* 32 tiles: 2 slices fill 64 clusters */
        { 256, 4096, 14336, 4 },   /* 16 tiles of 224 k-tiles: 4 slices at most */
        { 256, 256, 256, 0 },      /* 1 tile of 4 k-tiles */
        { 3000, 3000, 3000, 3 },   /* 144 tiles: 12 left, 3 slices of 15-16 k-tiles (last wave: >= 12) */
        { 3000, 3000, 2300, 3 },   /* 36 k-tiles: 3 slices of 12 */
        { 3000, 3000, 2200, 2 },   /* 35 k-tiles: 2 slices */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_args a;
        memset(&a, 0, sizeof a);
        a.m = cases[i].m;
        a.n = cases[i].n;
        a.k = cases[i].k;
        a.kws = (void *)(uintptr_t)4096;   /* never dereferenced here */
        a.kws_bytes = k30_sk_bytes(66, 2 * K30_CONSUMERS, &a.nflags);
        a.flags = (uint32_t *)(uintptr_t)8192;
        a.seq = 7;
        k30_params p;
        memset(&p, 0, sizeof p);
        p.k_tiles = (int)((a.k + K30_BK - 1) / K30_BK);
        const long long tiles = ((a.m + 255) / 256) * ((a.n + K30_BN - 1) / K30_BN);
        k30_plan_split_wave(&p, &a, 2 * K30_CONSUMERS, tiles, 66);
        CHECK(p.sk_slices == cases[i].slices, "%lldx%lldx%lld: %d slices, expected %d", (long long)a.m,
              (long long)a.n, (long long)a.k, p.sk_slices, cases[i].slices);
        const int few = tiles < 66;
        const long long launched = few ? tiles * (p.sk_slices ? p.sk_slices : 1) : 66;
        CHECK(p.num_clusters == launched && p.sk_first + p.sk_tiles == tiles, "walk covers %lld tiles on %d clusters",
              tiles, p.num_clusters);
        if (p.sk_slices)
            CHECK(p.sk_tiles == (few ? tiles : tiles % 66) && p.seq == 7, "split tiles %d", p.sk_tiles);
        CHECK(!p.sk_slices || k30_sk_may_split(tiles, p.k_tiles, 66), "split without a workspace from k31");
        /* Without a workspace nothing is split. */
        a.kws = NULL;
        k30_plan_split_wave(&p, &a, 2 * K30_CONSUMERS, tiles, 66);
        CHECK(p.sk_slices == 0 && p.sk_first == tiles && p.num_clusters == (few ? tiles : 66),
              "no workspace: unsplit");
    }
}

/* The block N auto-dispatch picks among the k30 family (k30_pick_bn), on
 * 132 SMs: host arithmetic, run with the split plan in the CPU suite. */
static void k30_split_plan_pick_bn(void)
{
    static const struct { int64_t m, n, k; int bn; int64_t lda, ldb; } cases[] = {
        { 1000, 1000, 1000, 64 },     /* 128 tiles of 128 x 64 fit one wave */
        { 1000, 1000, 1000, 128, 1000, 1000 },   /* rows of 2000 bytes: 128 x 128 */
        { 1000, 1000, 1000, 128, 1024, 1000 },
        { 1000, 1000, 1000, 64, 1024, 1024 },
        { 1024, 1024, 1024, 64, 1024, 1024 },
        { 2048, 2304, 768, 128 },     /* short K: 16 x 18 tiles of 128 x 128 */
        { 2048, 3072, 768, 128 },
        { 4096, 4096, 768, 256 },     /* 1024 tiles of 128 x 128: too many */
        { 512, 512, 512, 64 },
        { 128, 128, 128, 64 },        /* N fits 128, but 128 x 64 tiles are cheaper */
        { 1536, 1536, 1536, 192 },    /* 144 tiles of 128 x 128, 96 of 128 x 192: one wave */
        { 1536, 1536, 1536, 256, 1544, 1544 },   /* ragged rows: k31's multicast */
        { 3072, 3072, 3072, 192 },    /* 2.91 waves of 128 x 192, 2.18 of 256 x 256 clusters */
        { 3000, 3000, 3000, 256, 3000, 3000 },
        { 512, 6144, 4096, 192 },
        { 4096, 4096, 4096, 256 },    /* 3.88 waves of clusters, 5.33 of 128 x 192 */
        { 2048, 2048, 2048, 256 },
        { 65536, 64, 4096, 64 },      /* N fits 64 */
        { 32768, 128, 1024, 128 },    /* N fits 128, 512 tiles of 128 x 64 */
        { 512, 4096, 4096, 128 },     /* 128 tiles of 128 x 128: one wave */
        { 512, 4096, 14336, 128 },
        { 512, 768, 3072, 64 },       /* 48 tiles of 128 x 64 */
        { 16, 4096, 14336, 64 },      /* decode: one block row */
        { 1, 28672, 4096, 64 },
        { 128, 50257, 768, 64 },
        { 2048, 768, 3072, 128 },     /* 96 tiles of 128 x 128 */
        { 512, 28672, 4096, 256 },
        { 8192, 8192, 8192, 256 },
        { 4096, 4097, 4096, 256 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_args a;
        memset(&a, 0, sizeof a);
        a.m = cases[i].m;
        a.n = cases[i].n;
        a.k = cases[i].k;
        a.lda = cases[i].lda;
        a.ldb = cases[i].ldb;
        int bn = k30_pick_bn(&a, 132);
        CHECK(bn == cases[i].bn, "%lldx%lldx%lld: BN %d, expected %d", (long long)a.m, (long long)a.n,
              (long long)a.k, bn, cases[i].bn);
    }
}

/* 100 repeated runs give bit-identical results (no race). */
static void k30_repeat(void)
{
    if (!g_ok_device)
        return;
    /* 512 x 4096 x 4096: k31 splits each of its 32 tiles in 2 slices (a
     * fixed-order fixup); 128 x 4096 x 4096: every kernel splits its few
     * tiles (k34: 64 tiles in 2 slices, the others in 4) */
    static const int64_t ms[] = { 4096, 512, 128 };
    for (int kidx = 0; kidx < 3 * g_nkernels; kidx++) {
        const char *kernel = g_kernels[kidx % g_nkernels];
        const int64_t m = ms[kidx / g_nkernels];
        gcase c = { m, 4096, 4096, TK_OP_N, TK_OP_N, TK_F32, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR };
        tk_gemm_problem p;
        bufs b;
        if (!setup(&c, &p, &b)) {
            CHECK(0, "out of device memory");
            release(&b);
            return;
        }
        tk_gemm_ex(g_h, &p, kernel, NULL);
        cudaMemcpy(b.ref, b.c, b.c_bytes, cudaMemcpyDeviceToDevice);
        unsigned long long bad_runs = 0;
        for (int i = 0; i < 100; i++) {
            /* the same NaN poison as before the first run */
            fill_c<<<1024, 256>>>(b.c, (int64_t)(b.c_bytes / 4), 0, 5, 1);
            tk_status st = tk_gemm_ex(g_h, &p, kernel, NULL);
            CHECK(st == TK_SUCCESS, "%s run %d: %s", kernel, i, tk_last_error(g_h));
            cmp_result z = { 0, ~0ULL, 0, 0 }, h;
            cudaMemcpy(b.cmp, &z, sizeof z, cudaMemcpyHostToDevice);
            compare<<<1024, 256>>>(b.c, b.ref, (int64_t)(b.c_bytes / 4), 0, 1, b.cmp);
            cudaMemcpy(&h, b.cmp, sizeof h, cudaMemcpyDeviceToHost);
            bad_runs += h.bad != 0;
        }
        CHECK(bad_runs == 0, "%s: %llu of 100 runs differ from the first", kernel, bad_runs);
        printf("    %s: 100 runs of %lldx4096x4096 (real data, f32): %llu differ from the first\n", kernel,
               (long long)m, bad_runs);
        release(&b);
    }
}

/* k40_skinny's split-K (and auto-dispatch, which picks k40 for these):
 * 100 runs bit-identical on real data, each after a k34 launch on the same
 * handle that leaves its own split flags in the shared workspace (k40 must
 * read them as zero arrivals). 1 x 4096 x 4096 and 16 x 4096 x 14336 NT
 * run the TMA ring unsplit, 4096 x 8 x 4096 NT is its swapped form (C
 * stored transposed), 9 x 1000 x 16360 bf16 C the ring in four splits with
 * ragged rows and a K edge, 9 x 1000 x 3000 bf16 C splits 3 ways (register
 * path), 32 x 4096 x 4096 NT runs the ring with a full block of 32
 * tokens, 24 x 4096 x 4096 stages its tokens in shared memory and splits K
 * 4 ways (k40_plan.h on 132 SMs). */
static void skinny_repeat(void)
{
    if (!g_ok_device)
        return;
    static const gcase cases[] = {
        { 1, 4096, 4096, TK_OP_N, TK_OP_T, TK_F32, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR },
        { 16, 4096, 14336, TK_OP_N, TK_OP_T, TK_F32, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR },
        { 4096, 8, 4096, TK_OP_N, TK_OP_T, TK_F32, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR },
        { 9, 1000, 16360, TK_OP_N, TK_OP_T, TK_BF16, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR },
        { 9, 1000, 3000, TK_OP_N, TK_OP_T, TK_BF16, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR },
        { 32, 4096, 4096, TK_OP_N, TK_OP_T, TK_F32, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR },
        { 24, 4096, 4096, TK_OP_N, TK_OP_T, TK_F32, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR },
    };
    const char *kernels[] = { "k40_skinny", "auto" };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int kn = 0; kn < 2; kn++) {
            tk_gemm_problem p, other;
            bufs b, ob;
            gcase oc = { 128, 4096, 4096, TK_OP_N, TK_OP_N, TK_F32, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR };
            if (!setup(&cases[i], &p, &b) || !setup(&oc, &other, &ob)) {
                CHECK(0, "out of device memory");
                release(&b);
                release(&ob);
                return;
            }
            const size_t cs = cases[i].ct == TK_F32 ? 4 : 2;
            const int is_bf16 = cases[i].ct == TK_BF16;
            tk_status st = tk_gemm_ex(g_h, &p, kernels[kn], NULL);
            CHECK(st == TK_SUCCESS, "%s: %s", kernels[kn], tk_last_error(g_h));
            cudaMemcpy(b.ref, b.c, b.c_bytes, cudaMemcpyDeviceToDevice);
            unsigned long long bad_runs = 0;
            for (int r = 0; r < 100; r++) {
                tk_gemm_ex(g_h, &other, "k34_wgmma_128x64", NULL);
                fill_c<<<1024, 256>>>(b.c, (int64_t)(b.c_bytes / cs), is_bf16, 5, 1);
                st = tk_gemm_ex(g_h, &p, kernels[kn], NULL);
                CHECK(st == TK_SUCCESS, "%s run %d: %s", kernels[kn], r, tk_last_error(g_h));
                cmp_result z = { 0, ~0ULL, 0, 0 }, h;
                cudaMemcpy(b.cmp, &z, sizeof z, cudaMemcpyHostToDevice);
                compare<<<1024, 256>>>(b.c, b.ref, (int64_t)(b.c_bytes / cs), is_bf16, 1, b.cmp);
                cudaMemcpy(&h, b.cmp, sizeof h, cudaMemcpyDeviceToHost);
                bad_runs += h.bad != 0;
            }
            CHECK(bad_runs == 0, "%s %lldx%lldx%lld: %llu of 100 runs differ from the first", kernels[kn],
                  (long long)cases[i].m, (long long)cases[i].n, (long long)cases[i].k, bad_runs);
            printf("    %s: 100 runs of %lldx%lldx%lld NT (real data, %s C): %llu differ from the first\n", kernels[kn],
                   (long long)cases[i].m, (long long)cases[i].n, (long long)cases[i].k, is_bf16 ? "bf16" : "f32",
                   bad_runs);
            release(&b);
            release(&ob);
        }
}

static float median(float *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            float t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

#define REPS 20

static void bench_case(int64_t m, int64_t n, int64_t k, tk_op op_b, tk_dtype ct, void *flush, size_t flush_bytes)
{
    gcase c = { m, n, k, TK_OP_N, op_b, ct, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR };
    tk_gemm_problem p;
    bufs b;
    if (!setup(&c, &p, &b)) {
        printf("    %lldx%lldx%lld: out of device memory\n", (long long)m, (long long)n, (long long)k);
        release(&b);
        return;
    }
    enum { MAXW = 9 };
    const char *names[MAXW];
    int nw = 0;
    names[nw++] = "cublas";
    for (int i = 0; i < g_nkernels && nw < MAXW; i++)
        names[nw++] = g_kernels[i];
    static cudaEvent_t ev[MAXW][REPS][2];
    for (int w = 0; w < nw; w++)
        for (int i = 0; i < REPS; i++)
            for (int j = 0; j < 2; j++)
                cudaEventCreate(&ev[w][i][j]);
    for (int i = 0; i < 3; i++)
        for (int w = 0; w < nw; w++)
            tk_gemm_ex(g_h, &p, names[w], NULL);
    int ok[MAXW];
    for (int w = 0; w < nw; w++)
        ok[w] = 1;
    for (int i = 0; i < REPS; i++)
        for (int w = 0; w < nw; w++) {
            cudaMemsetAsync(flush, i & 0xFF, flush_bytes, NULL);
            cudaEventRecord(ev[w][i][0], NULL);
            ok[w] &= tk_gemm_ex(g_h, &p, names[w], NULL) == TK_SUCCESS;
            cudaEventRecord(ev[w][i][1], NULL);
        }
    cudaError_t e = cudaDeviceSynchronize();
    float ms[MAXW];
    for (int w = 0; w < nw; w++) {
        float t[REPS];
        for (int i = 0; i < REPS; i++)
            cudaEventElapsedTime(&t[i], ev[w][i][0], ev[w][i][1]);
        ms[w] = median(t, REPS);
    }
    double flop = 2.0 * (double)m * (double)n * (double)k;
    for (int w = 0; w < nw; w++)
        printf("| %5lld x %5lld x %5lld | op_b %s | %-4s | %-16s | %8.3f ms | %6.1f TFLOP/s | x%.3f vs cublas |%s\n",
               (long long)m, (long long)n, (long long)k, op_b == TK_OP_N ? "N" : "T", ct == TK_F32 ? "f32" : "bf16",
               names[w], ms[w], flop / (ms[w] * 1e9), ms[0] / ms[w], ok[w] && e == cudaSuccess ? "" : " ERROR");
    for (int w = 0; w < nw; w++)
        for (int i = 0; i < REPS; i++)
            for (int j = 0; j < 2; j++)
                cudaEventDestroy(ev[w][i][j]);
    release(&b);
}

/* Host cost of one call (argument checks, dispatch, tensor maps, launch),
 * averaged over 200 calls of a small problem after one warm-up call: a
 * figure printed for the notes, not a timed test. */
static void k30_host_cost(void)
{
    if (!g_ok_device)
        return;
    gcase c = { 256, 256, 256, TK_OP_N, TK_OP_T, TK_F32, 1.0f, 0.0f, 1, 0, TK_ROW_MAJOR };
    tk_gemm_problem p;
    bufs b;
    if (!setup(&c, &p, &b)) {
        release(&b);
        return;
    }
    for (int w = -2; w < g_nkernels; w++) {
        const char *name = w == -2 ? "cublas" : w == -1 ? "auto" : g_kernels[w];
        tk_gemm_ex(g_h, &p, name, NULL);
        cudaDeviceSynchronize();
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int failed = 0;
        for (int i = 0; i < 200; i++)
            failed += tk_gemm_ex(g_h, &p, name, NULL) != TK_SUCCESS;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        CHECK(failed == 0, "%s: %d of 200 calls failed: %s", name, failed, tk_last_error(g_h));
        cudaDeviceSynchronize();
        double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / 200;
        printf("    host time per tk_gemm_ex call (256^3, enqueue only): %-16s %.2f us\n", name, us);
    }
    release(&b);
}

static void k30_bench(void)
{
    const char *env = getenv("TK_K30_BENCH");
    if (!g_ok_device || !env || strcmp(env, "1"))
        return;
    size_t flush_bytes = (size_t)128 << 20;
    void *flush = dev_alloc(flush_bytes);
    CHECK(flush != NULL, "no memory for the L2 flush buffer");
    if (!flush)
        return;
    static const int64_t shapes[][3] = {
        { 8192, 8192, 8192 }, { 4096, 4096, 4096 }, { 2048, 2048, 2048 }, { 16384, 16384, 16384 },
        { 4096, 14336, 4096 }, { 8192, 8192, 1024 }, { 8191, 8193, 8190 },
    };
    for (int s = 0; s < 7; s++) {
        bench_case(shapes[s][0], shapes[s][1], shapes[s][2], TK_OP_T, TK_F32, flush, flush_bytes);
        if (s < 2) {
            bench_case(shapes[s][0], shapes[s][1], shapes[s][2], TK_OP_N, TK_F32, flush, flush_bytes);
            bench_case(shapes[s][0], shapes[s][1], shapes[s][2], TK_OP_T, TK_BF16, flush, flush_bytes);
        }
    }
    cudaFree(flush);
}

void tk_tests(void)
{
    if (tk_create(&g_h) != TK_SUCCESS) {
        printf("tk_create failed: %s\n", tk_last_error(NULL));
        return;
    }
    g_ok_device = have_sm90();
    if (getenv("TK_K30_REF"))
        g_ref = getenv("TK_K30_REF");
    const char *env = getenv("TK_K30_KERNELS");
    if (env && *env) {
        snprintf(g_kernel_env, sizeof g_kernel_env, "%s", env);
        for (char *tok = strtok(g_kernel_env, ","); tok && g_nkernels < 16; tok = strtok(NULL, ","))
            g_kernels[g_nkernels++] = tok;
    } else {
        for (int i = 0; i < tk_kernel_count() && g_nkernels < 16; i++) {
            tk_kernel_props kp;
            if (tk_kernel_get(i, &kp) != TK_SUCCESS)
                continue;
            if (!strncmp(kp.name, "k30_", 4) || !strncmp(kp.name, "k31_", 4) || !strncmp(kp.name, "k33_", 4) ||
                !strncmp(kp.name, "k34_", 4) || !strncmp(kp.name, "k35_", 4) || !strncmp(kp.name, "k36_", 4) ||
                !strncmp(kp.name, "k38_", 4) || !strncmp(kp.name, "k42_", 4))
                g_kernels[g_nkernels++] = kp.name;
        }
    }
    printf("kernels under test:");
    for (int i = 0; i < g_nkernels; i++)
        printf(" %s", g_kernels[i]);
    printf("\n");
    if (!g_ok_device)
        printf("no sm_90 GPU: %s tests skipped\n", KERNEL);
    TK_TEST(k30_split_plan);
    TK_TEST(k30_split_plan_pick_bn);
    TK_TEST(k30_dispatch);
    TK_TEST(k30_sanitize);
    TK_TEST(k30_small_shapes);
    TK_TEST(k30_large_shapes);
    TK_TEST(k30_repeat);
    TK_TEST(skinny_repeat);
    TK_TEST(k30_host_cost);
    TK_TEST(k30_bench);
    tk_destroy(g_h);
}
