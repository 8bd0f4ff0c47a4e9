/* int_gemm.h - GEMM problems whose every result is exact, for the GPU tests
 * of concurrency and failure isolation: checks are bit for bit.
 *
 * A and B hold small integers (the lab's tk_lab_rand_int, -3..3) as bf16, so
 * every product and every partial sum, in any order and any split over K
 * (< 2^20), is an integer below 2^24: exact in fp32. alpha is a small integer or half of one, so
 * alpha times the sum is exact too; beta is 0. fp32 C must then equal alpha
 * times the reference exactly, and bf16 C that value rounded to nearest even
 * (what every epilogue does with an exact value). Each operand set comes
 * from its own seed, so a result made from another set's operands, copies or
 * partial sums does not match. Before each call C is filled with 0xff bytes
 * (NaN in both types), so an entry a kernel did not write does not match
 * either.
 *
 * The reference of a set is computed once, by cuBLAS with fp32 C (exact
 * here) on a handle of its own, and checked on the host at sampled entries
 * ($TK_IG_REF names another kernel for it: under compute-sanitizer's
 * racecheck, which reports hazards inside cuBLAS's own kernels).
 * Only fp32 C is compared with "cublas": its bf16 C may come from partial
 * sums rounded to bf16 (test_verify.c's note on 2300 x 2040 x 2104).
 */
#ifndef TK_TESTS_INT_GEMM_H
#define TK_TESTS_INT_GEMM_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lab/lab.h"
#include "lab/lab_rand.h"

/* Row-major C = alpha * A op(B): A is M x K with lda = K, starting a_off
 * elements into its buffer (1: only 2-byte aligned); B is K x N (op N,
 * ldb = N) or N x K (op T, ldb = K); C is M x N with ldc = N. */
typedef struct ig_shape {
    const char *name;
    int64_t m, n, k;
    tk_op op_b;
    int64_t a_off;
    tk_dtype c_type;
} ig_shape;

typedef struct ig_set {
    ig_shape s;
    void *a_buf, *b, *c;         /* device */
    const void *a;               /* a_buf + a_off elements */
    int64_t lda, ldb, ldc;
    size_t c_bytes;
    float *ref;                  /* host, M x N: A op(B) exactly */
    void *host_c;                /* pinned, c_bytes: C read back */
} ig_set;

/* op(A) op(B) at (i, j) from the host operands, as an exact integer. */
static inline int64_t ig_dot(const ig_set *o, const uint16_t *ha, const uint16_t *hb, int64_t i, int64_t j)
{
    int64_t sum = 0;
    for (int64_t kk = 0; kk < o->s.k; kk++) {
        float a = tk_lab_bf16_to_f32(ha[o->s.a_off + i * o->lda + kk]);
        float b = tk_lab_bf16_to_f32(o->s.op_b == TK_OP_N ? hb[kk * o->ldb + j] : hb[j * o->ldb + kk]);
        sum += (int64_t)a * (int64_t)b;
    }
    return sum;
}

static inline void ig_free(ig_set *o)
{
    cudaFree(o->a_buf);
    cudaFree(o->b);
    cudaFree(o->c);
    cudaFreeHost(o->host_c);
    free(o->ref);
    memset(o, 0, sizeof *o);
}

/* The reference, by cuBLAS on ref_h (fp32 C, exact here), checked on the
 * host at 64 entries (two of them corners). */
static inline int ig_reference(ig_set *o, tk_handle ref_h, const uint16_t *ha, const uint16_t *hb, char *why,
                               size_t len)
{
    const ig_shape *s = &o->s;
    size_t ref_bytes = (size_t)s->m * (size_t)s->n * sizeof(float);
    void *d = NULL;
    if (cudaMalloc(&d, ref_bytes) != cudaSuccess) {
        snprintf(why, len, "%s: cudaMalloc of the reference: %s", s->name, cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    const char *ref = getenv("TK_IG_REF");
    tk_status st = tk_gemm(ref_h, TK_ROW_MAJOR, TK_OP_N, s->op_b, s->m, s->n, s->k, 1.0f, o->a, o->lda, o->b,
                           o->ldb, 0.0f, d, TK_F32, s->n, ref && *ref ? ref : "cublas", NULL);
    cudaError_t e = st ? cudaSuccess : cudaMemcpy(o->ref, d, ref_bytes, cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (st || e) {
        snprintf(why, len, "%s: reference: %s %s", s->name, st ? tk_last_error(ref_h) : "",
                 cudaGetErrorString(e));
        return 1;
    }
    for (int t = 0; t < 64; t++) {
        int64_t i = t == 0 ? 0 : t == 1 ? s->m - 1 : (int64_t)(tk_lab_mix64(2 * (uint64_t)t) % (uint64_t)s->m);
        int64_t j = t == 0 ? 0 : t == 1 ? s->n - 1 : (int64_t)(tk_lab_mix64(2 * (uint64_t)t + 1) % (uint64_t)s->n);
        int64_t want = ig_dot(o, ha, hb, i, j);
        if ((double)o->ref[i * s->n + j] != (double)want) {
            snprintf(why, len, "%s: cuBLAS reference at (%lld, %lld) is %g, the host's %lld", s->name, (long long)i,
                     (long long)j, (double)o->ref[i * s->n + j], (long long)want);
            return 1;
        }
    }
    return 0;
}

/* Allocates and fills a set of shape s from seed, with its reference.
 * 0, or 1 with why (the set freed). */
static inline int ig_make(ig_set *o, const ig_shape *s, uint32_t seed, tk_handle ref_h, char *why, size_t len)
{
    memset(o, 0, sizeof *o);
    o->s = *s;
    o->lda = s->k;
    o->ldb = s->op_b == TK_OP_N ? s->n : s->k;
    o->ldc = s->n;
    size_t na = (size_t)(s->m * o->lda + s->a_off), nb = (size_t)((s->op_b == TK_OP_N ? s->k : s->n) * o->ldb);
    o->c_bytes = (size_t)s->m * (size_t)s->n * (s->c_type == TK_F32 ? 4 : 2);
    uint16_t *ha = malloc(na * 2), *hb = malloc(nb * 2);
    o->ref = malloc((size_t)s->m * (size_t)s->n * sizeof(float));
    int bad = !ha || !hb || !o->ref || cudaMalloc(&o->a_buf, na * 2) || cudaMalloc(&o->b, nb * 2) ||
              cudaMalloc(&o->c, o->c_bytes) || cudaMallocHost(&o->host_c, o->c_bytes);
    if (bad) {
        snprintf(why, len, "%s: out of memory (%s)", s->name, cudaGetErrorString(cudaGetLastError()));
    } else {
        o->a = (const uint16_t *)o->a_buf + s->a_off;
        for (size_t i = 0; i < na; i++)   /* 2 seed feeds A, 2 seed + 1 B */
            ha[i] = tk_lab_f32_to_bf16((float)tk_lab_rand_int(2 * (uint64_t)seed, i));
        for (size_t i = 0; i < nb; i++)
            hb[i] = tk_lab_f32_to_bf16((float)tk_lab_rand_int(2 * (uint64_t)seed + 1, i));
        bad = cudaMemcpy(o->a_buf, ha, na * 2, cudaMemcpyHostToDevice) ||
              cudaMemcpy(o->b, hb, nb * 2, cudaMemcpyHostToDevice);
        if (bad)
            snprintf(why, len, "%s: upload: %s", s->name, cudaGetErrorString(cudaGetLastError()));
        else
            bad = ig_reference(o, ref_h, ha, hb, why, len);
    }
    free(ha);
    free(hb);
    if (bad)
        ig_free(o);
    return bad;
}

/* Fills C with 0xff bytes on stream. */
static inline cudaError_t ig_poison(const ig_set *o, cudaStream_t stream)
{
    return cudaMemsetAsync(o->c, 0xff, o->c_bytes, stream);
}

/* The set's problem with this alpha (beta 0). */
static inline tk_gemm_problem ig_problem(const ig_set *o, float alpha)
{
    const ig_shape *s = &o->s;
    tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, s->op_b, s->m, s->n, s->k, alpha, 0.0f, o->a, o->lda, o->b, o->ldb,
                          o->c, o->ldc, s->c_type };
    return p;
}

static inline tk_status ig_gemm(tk_handle h, const ig_set *o, float alpha, const char *kernel, cudaStream_t stream)
{
    tk_gemm_problem p = ig_problem(o, alpha);
    return tk_gemm_ex(h, &p, kernel, stream);
}

/* Reads C back (synchronizing stream). 0, or 1 with why. */
static inline int ig_read(ig_set *o, cudaStream_t stream, char *why, size_t len)
{
    cudaError_t e = cudaMemcpyAsync(o->host_c, o->c, o->c_bytes, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(why, len, "reading C back: %s", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

/* Whether C equals alpha times the reference everywhere (see the top). 0,
 * or 1 with the first wrong entry and the count in why. */
static inline int ig_check(ig_set *o, float alpha, cudaStream_t stream, char *why, size_t len)
{
    if (ig_read(o, stream, why, len))
        return 1;
    const size_t n = (size_t)o->s.m * (size_t)o->s.n;
    size_t wrong = 0, first = 0;
    float got0 = 0.0f, want0 = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float want = alpha * o->ref[i], got;
        if (o->s.c_type == TK_F32) {
            got = ((const float *)o->host_c)[i];
        } else {
            got = tk_lab_bf16_to_f32(((const uint16_t *)o->host_c)[i]);
            want = tk_lab_bf16_to_f32(tk_lab_f32_to_bf16(want));
        }
        if (got != want && !wrong++) {   /* NaN (an entry never written) is != too */
            first = i;
            got0 = got;
            want0 = want;
        }
    }
    if (wrong)
        snprintf(why, len, "C[%zu][%zu] = %g, expected %g (%zu of %zu entries wrong)", first / (size_t)o->s.n,
                 first % (size_t)o->s.n, (double)got0, (double)want0, wrong, n);
    return wrong != 0;
}

/* Whether C still holds ig_poison's bytes everywhere (a refused call must not
 * write it). 0, or 1 with why. */
static inline int ig_untouched(ig_set *o, cudaStream_t stream, char *why, size_t len)
{
    if (ig_read(o, stream, why, len))
        return 1;
    const unsigned char *p = o->host_c;
    for (size_t i = 0; i < o->c_bytes; i++)
        if (p[i] != 0xff) {
            snprintf(why, len, "byte %zu of C is %02x: a refused call wrote C", i, p[i]);
            return 1;
        }
    return 0;
}

#endif
