/* fp8_mma - what Hopper's FP8 wgmma does to a sum (issue 40), on the device.
 *
 *   gpucu_fp8_mma        (sm_90 only; skipped elsewhere)
 *
 * One warpgroup multiplies a 64 x K by a K x 8 block of FP8 codes with
 * m64n8k32 (tk_wgmma_m64n8k32_f32_fp8), both operands K-major in the 128B
 * swizzle the FP8 kernels use, and either chains the whole K in the tensor
 * core's accumulator or adds each CHUNK-deep partial to fp32 registers
 * (the promotion of DeepSeek-V3's report). Against an fp64 sum of the
 * decoded products:
 *   exact     small integers in every format pairing: the sums must come
 *             back exact (the layout and descriptors are right);
 *   align     one product of 2^16 and K - 1 products of 2^e: which e the
 *             accumulator keeps, the large product first or last;
 *   random    codes of uniform data at full e4m3 range: the error over
 *             S = sum |a b|, with and without promotion, K 128 ... 16384.
 * The figures it prints are what lab_compare.c's FP8 tolerance is derived
 * from (docs/NOTES.md, session 29); the promoted sums must stay inside it
 * and the chained ones at K = 16384 must not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cuda_runtime.h>
#include "tilekit.h"
#include "ptx/fence.cuh"
#include "ptx/wgmma.cuh"
extern "C" {
#include "../host/check.h"
#include "lab/lab.h"
}

#define PM 64
#define PN 8
#define PK 128   /* K of one shared tile: a 128-byte swizzled row */

/* Byte (r, c) of a 128B-swizzled tile of 128-byte rows: 16-byte chunks
 * XOR-ed by r % 8 (as TMA writes them). */
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
static __device__ __forceinline__ int sw128(int r, int c) { return r * 128 + ((((c >> 4) ^ (r & 7))) << 4) + (c & 15); }
#endif

template <int FA, int FB>
static __global__ void __launch_bounds__(128) probe_kernel(const uint8_t *A, const uint8_t *B, float *D, int K,
                                                           int chunk)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ __align__(1024) uint8_t sa[PM * PK];
    __shared__ __align__(1024) uint8_t sb[PN * PK];
    const uint8_t *a = A + (size_t)blockIdx.x * PM * K, *b = B + (size_t)blockIdx.x * PN * K;
    float d[4] = {0, 0, 0, 0}, acc[4] = {0, 0, 0, 0};
    int fresh = 1;
    for (int k0 = 0; k0 < K; k0 += PK) {
        for (int q = threadIdx.x; q < PM * PK / 16; q += 128) {
            int r = q / 8, c = (q % 8) * 16;
            *(uint4 *)(sa + sw128(r, c)) = *(const uint4 *)(a + (size_t)r * K + k0 + c);
        }
        for (int q = threadIdx.x; q < PN * PK / 16; q += 128) {
            int r = q / 8, c = (q % 8) * 16;
            *(uint4 *)(sb + sw128(r, c)) = *(const uint4 *)(b + (size_t)r * K + k0 + c);
        }
        __syncthreads();
        tk_fence_proxy_async_shared();
        tk_wgmma_fence();
        uint32_t pa = (uint32_t)__cvta_generic_to_shared(sa), pb = (uint32_t)__cvta_generic_to_shared(sb);
#pragma unroll
        for (int s = 0; s < PK / 32; s++) {
            tk_wgmma_m64n8k32_f32_fp8<FA, FB>(d, tk_wgmma_desc_sw128(pa + 32 * s, 16, 1024),
                                              tk_wgmma_desc_sw128(pb + 32 * s, 16, 1024), !(fresh && s == 0));
        }
        tk_wgmma_commit();
        tk_wgmma_wait(0);
#pragma unroll
        for (int i = 0; i < 4; i++)
            tk_wgmma_reg_fence(d[i]);
        fresh = 0;
        if (chunk && (k0 + PK) % chunk == 0) {
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[i] += d[i];
            fresh = 1;
        }
        __syncthreads();
    }
    if (!chunk)
        for (int i = 0; i < 4; i++)
            acc[i] = d[i];
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    float *o = D + (size_t)blockIdx.x * PM * PN;
    for (int h = 0; h < 2; h++)
        for (int e = 0; e < 2; e++)
            o[(16 * w + l / 4 + 8 * h) * PN + 2 * (l % 4) + e] = acc[2 * h + e];
#endif
}

typedef struct probe {
    int fa, fb;   /* tk_fp8_format */
    int blocks, k, chunk;
    uint8_t *ha, *hb;
    float *hd;
    double *want, *s;
} probe;

static void probe_alloc(probe *p, int fa, int fb, int blocks, int k, int chunk)
{
    p->fa = fa, p->fb = fb, p->blocks = blocks, p->k = k, p->chunk = chunk;
    p->ha = (uint8_t *)calloc((size_t)blocks * PM * k, 1);
    p->hb = (uint8_t *)calloc((size_t)blocks * PN * k, 1);
    p->hd = (float *)calloc((size_t)blocks * PM * PN, sizeof(float));
    p->want = (double *)calloc((size_t)blocks * PM * PN, sizeof(double));
    p->s = (double *)calloc((size_t)blocks * PM * PN, sizeof(double));
}

static void probe_free(probe *p)
{
    free(p->ha), free(p->hb), free(p->hd), free(p->want), free(p->s);
}

static tk_lab_fp8 lab_fmt(int f) { return f == TK_FP8_E4M3 ? TK_LAB_E4M3 : TK_LAB_E5M2; }

/* Runs p on the device and fills want, s from the decoded codes. */
static int probe_run(probe *p)
{
    size_t na = (size_t)p->blocks * PM * p->k, nb = (size_t)p->blocks * PN * p->k, nd = (size_t)p->blocks * PM * PN;
    uint8_t *da, *db;
    float *dd;
    if (cudaMalloc(&da, na) || cudaMalloc(&db, nb) || cudaMalloc(&dd, nd * 4))
        return 0;
    cudaMemcpy(da, p->ha, na, cudaMemcpyHostToDevice);
    cudaMemcpy(db, p->hb, nb, cudaMemcpyHostToDevice);
    cudaMemset(dd, 0xff, nd * 4);   /* NaN */
    void (*f)(const uint8_t *, const uint8_t *, float *, int, int) =
        p->fa == TK_FP8_E4M3 ? (p->fb == TK_FP8_E4M3 ? probe_kernel<1, 1> : probe_kernel<1, 2>)
                             : (p->fb == TK_FP8_E4M3 ? probe_kernel<2, 1> : probe_kernel<2, 2>);
    f<<<p->blocks, 128>>>(da, db, dd, p->k, p->chunk);
    int ok = cudaDeviceSynchronize() == cudaSuccess;
    cudaMemcpy(p->hd, dd, nd * 4, cudaMemcpyDeviceToHost);
    cudaFree(da), cudaFree(db), cudaFree(dd);
    double dec_a[256], dec_b[256];
    for (int v = 0; v < 256; v++)
        dec_a[v] = tk_lab_fp8_decode((uint8_t)v, lab_fmt(p->fa)), dec_b[v] = tk_lab_fp8_decode((uint8_t)v, lab_fmt(p->fb));
    for (int blk = 0; blk < p->blocks; blk++)
        for (int i = 0; i < PM; i++)
            for (int j = 0; j < PN; j++) {
                const uint8_t *ra = p->ha + ((size_t)blk * PM + i) * p->k, *rb = p->hb + ((size_t)blk * PN + j) * p->k;
                double w = 0, s = 0;
                for (int kk = 0; kk < p->k; kk++) {
                    double t = dec_a[ra[kk]] * dec_b[rb[kk]];
                    w += t, s += fabs(t);
                }
                p->want[((size_t)blk * PM + i) * PN + j] = w, p->s[((size_t)blk * PM + i) * PN + j] = s;
            }
    return ok;
}

static int sm90(void)
{
    int major = 0, minor = 0, n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        return 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    return major == 9 && minor == 0;
}

/* Small integers (-3 .. 3, every pairing of formats, K 512): exact sums. */
static void test_exact(void)
{
    static const int fmts[4][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}};
    for (int f = 0; f < 4; f++)
        for (int chunk = 0; chunk <= 128; chunk += 128) {
            probe p;
            probe_alloc(&p, fmts[f][0], fmts[f][1], 4, 512, chunk);
            uint64_t x = 12345 + f;
            for (size_t i = 0; i < (size_t)4 * PM * 512; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                p.ha[i] = tk_lab_fp8_encode((double)((int)(x >> 33) % 7 - 3), lab_fmt(p.fa), 1);
            }
            for (size_t i = 0; i < (size_t)4 * PN * 512; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                p.hb[i] = tk_lab_fp8_encode((double)((int)(x >> 33) % 7 - 3), lab_fmt(p.fb), 1);
            }
            CHECK(probe_run(&p), "the probe kernel failed");
            int64_t bad = 0;
            for (size_t i = 0; i < (size_t)4 * PM * PN; i++)
                bad += (double)p.hd[i] != p.want[i];
            CHECK(bad == 0, "formats %d x %d chunk %d: %lld of %d sums not exact", p.fa, p.fb, chunk,
                      (long long)bad, 4 * PM * PN);
            probe_free(&p);
        }
}

/* One product 2^16 (a = b = 256) and K - 1 products 2^e (a = 2^e, b = 1),
 * e = 3 - row / 4 (3 ... -12); the large product at k = 0 or at k = 31.
 * Prints, per e, how much of the small products' sum came back. */
static void measure_align(void)
{
    for (int k = 32; k <= 128; k *= 4)
        for (int last = 0; last <= 1; last++) {
            if (k == 128 && last)
                continue;
            probe p;
            probe_alloc(&p, 1, 1, 1, PK, 0);
            /* K of the probe is PK (its tile); products past k are 0 */
            int big = last ? 31 : 0;
            for (int i = 0; i < PM; i++)
                for (int kk = 0; kk < k; kk++)
                    p.ha[i * PK + kk] = tk_lab_fp8_encode(kk == big ? 256.0 : ldexp(1.0, 3 - i / 4), TK_LAB_E4M3, 1);
            for (int j = 0; j < PN; j++)
                for (int kk = 0; kk < k; kk++)
                    p.hb[j * PK + kk] = tk_lab_fp8_encode(kk == big ? 256.0 : 1.0, TK_LAB_E4M3, 1);
            CHECK(probe_run(&p), "the probe kernel failed");
            printf("align: K %d, 2^16 at k = %d:", k, big);
            for (int i = 0; i < PM; i += 4) {
                double small = p.want[i * PN] - 65536.0, got = (double)p.hd[i * PN] - 65536.0;
                printf(" 2^%d:%.3g", 3 - i / 4, small ? got / small : 0.0);
            }
            printf("  (kept fraction of the small products' sum)\n");
            probe_free(&p);
        }
}

/* Uniform [-1, 1] data at full e4m3 range (x 448) for A and B. Prints, for
 * K and the promotion chunk, max |err| / S, max |err| / (2^-13 S_chunk) where
 * S_chunk = S * chunk / K, the norm-wise relative error ||err|| / ||want||,
 * and the median |err| / |want|. */
static void measure_random(void)
{
    static const int ks[] = {128, 1024, 4096, 16384};
    for (int ki = 0; ki < 4; ki++)
        for (int chunk = 0; chunk <= 128; chunk += 128) {
            int k = ks[ki], blocks = k >= 4096 ? 16 : 64;
            probe p;
            probe_alloc(&p, 1, 1, blocks, k, chunk);
            uint64_t x = 777 + ki;
            for (size_t i = 0; i < (size_t)blocks * PM * k; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                p.ha[i] = tk_lab_fp8_encode(448.0 * ((double)(x >> 11) * 0x1p-53 * 2 - 1), TK_LAB_E4M3, 1);
            }
            for (size_t i = 0; i < (size_t)blocks * PN * k; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                p.hb[i] = tk_lab_fp8_encode(448.0 * ((double)(x >> 11) * 0x1p-53 * 2 - 1), TK_LAB_E4M3, 1);
            }
            CHECK(probe_run(&p), "the probe kernel failed");
            size_t n = (size_t)blocks * PM * PN;
            double mx = 0, mxc = 0, e2 = 0, w2 = 0;
            int64_t over = 0;
            double *rel = (double *)malloc(n * sizeof(double));
            for (size_t i = 0; i < n; i++) {
                double e = fabs((double)p.hd[i] - p.want[i]);
                double sc = p.s[i] * (chunk ? (double)chunk / k : 1.0);
                mx = fmax(mx, e / p.s[i]);
                mxc = fmax(mxc, e / (0x1p-13 * sc));
                e2 += e * e, w2 += p.want[i] * p.want[i];
                rel[i] = p.want[i] ? e / fabs(p.want[i]) : 0;
                over += e > tk_lab_tolerance_fp8(k, 1.0f, 0.0f, p.s[i], 0.0, p.want[i], TK_F32);
            }
            /* median by partial selection sort would be long; a simple sort */
            for (size_t i = 1; i < n; i++) {
                double v = rel[i];
                size_t j = i;
                while (j > 0 && rel[j - 1] > v)
                    rel[j] = rel[j - 1], j--;
                rel[j] = v;
            }
            printf("random: K %5d promote %3d: max err/S %.3g, max err/(2^-13 S_chunk) %.3g, ||err||/||want|| %.3g, "
                   "median rel %.3g, max err/(sqrt(K) 2^-24 S) %.3g\n",
                   k, chunk, mx, mxc, sqrt(e2 / w2), rel[n / 2], mx / (sqrt((double)k) * 0x1p-24));
            printf("        %lld of %zu over tk_lab_tolerance_fp8\n", (long long)over, n);
            if (chunk)
                CHECK(over == 0, "K %d promoted every 128: %lld sums over the FP8 tolerance", k, (long long)over);
            else if (k == 16384)
                CHECK(over > 0, "K %d chained: every sum inside the FP8 tolerance (it should not hide a missing "
                      "promotion)", k);
            free(rel);
            probe_free(&p);
        }
}

/* test_exact fails on a wrong layout or descriptor; test_measure prints
 * the figures (NOTES) and fails where the hardware leaves the tolerance's
 * model: a promoted sum over it, or a chained K = 16384 inside it. */
static void test_measure(void)
{
    measure_align();
    measure_random();
}

void tk_tests(void)
{
    if (!sm90()) {
        printf("no sm_90 GPU: fp8_mma skipped\n");
        return;
    }
    TK_TEST(test_exact);
    TK_TEST(test_measure);
}
