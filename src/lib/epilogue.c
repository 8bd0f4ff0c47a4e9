/* epilogue.c - work fused after the product (tilekit.h, tk_epilogue_kind):
 * the checks of tk_gemm_desc's version-3 fields, then one product run with
 * tk_args.epi set (kernel.h, tk_epi_args) on a kernel whose family takes
 * epilogues. As in gemm.c and grouped.c, every refusal names the field,
 * what it holds and what was expected, and all come before the device is
 * asked for (they hold without a GPU); nothing is written unless they all
 * pass. The formulas are the kernels'; here is what they may rely on:
 * row-major, one product, D with out_cols columns that only overlaps C as C
 * itself, aux and bias_grad apart from D, b_up resolved. */
#include <inttypes.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "internal.h"

static const char *epi_name(int kind)
{
    switch (kind) {
    case TK_EPI_BIAS_ACT: return "TK_EPI_BIAS_ACT";
    case TK_EPI_GATED: return "TK_EPI_GATED";
    case TK_EPI_BACKWARD: return "TK_EPI_BACKWARD";
    case TK_EPI_GATED_BACKWARD: return "TK_EPI_GATED_BACKWARD";
    }
    return "?";
}

static int is_backward(int kind) { return kind == TK_EPI_BACKWARD || kind == TK_EPI_GATED_BACKWARD; }

/* D's columns (tilekit.h): N, the gated output's N/2, or the gradient of
 * the gated forward's z, 2N. n >= 0, and n <= INT64_MAX / 2 for
 * GATED_BACKWARD (check_fields). */
static int64_t out_cols(int kind, int64_t n)
{
    return kind == TK_EPI_GATED ? n / 2 : kind == TK_EPI_GATED_BACKWARD ? 2 * n : n;
}

/* aux's columns: z, the product's N (both halves for GATED), or for
 * GATED_BACKWARD the forward's z, gate and up halves of N each. */
static int64_t aux_cols(int kind, int64_t n) { return kind == TK_EPI_GATED_BACKWARD ? 2 * n : n; }

tk_status tk_epi_none_check(tk_handle h, const tk_gemm_desc *d)
{
    const tk_field f[] = {
        { "activation", d->activation != 0 }, { "bias", d->bias != NULL },   { "bias_type", d->bias_type != 0 },
        { "bias_along", d->bias_along != 0 }, { "b_up", d->b_up != NULL },   { "d", d->d != NULL },
        { "ldd", d->ldd != 0 },               { "aux", d->aux != NULL },     { "ldaux", d->ldaux != 0 },
        { "bias_grad", d->bias_grad != NULL },
    };
    return tk_fields_unset(h, f, sizeof f / sizeof f[0],
                           "epilogue is TK_EPI_NONE (the product alone), which uses none of the epilogue fields",
                           "the epilogue that uses it");
}

#define TK_ACTS_SOME "TK_ACT_RELU (1), TK_ACT_GELU_ERF (2), TK_ACT_GELU_TANH (3) or TK_ACT_SILU (4)"

/* The kind and activation, and the problem's form: one row-major product. */
static tk_status check_kind(tk_handle h, const tk_gemm_desc *d)
{
    const int kind = d->epilogue, act = d->activation;
    if (kind < TK_EPI_BIAS_ACT || kind > TK_EPI_GATED_BACKWARD)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "epilogue: %d is not a tk_epilogue_kind (expected TK_EPI_NONE (0), TK_EPI_BIAS_ACT (1), "
                       "TK_EPI_GATED (2), TK_EPI_BACKWARD (3) or TK_EPI_GATED_BACKWARD (4))",
                       kind);
    if (act < TK_ACT_NONE || act > TK_ACT_SILU)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "activation: %d is not a tk_activation (expected TK_ACT_NONE (0), " TK_ACTS_SOME ")", act);
    if (act == TK_ACT_NONE && kind != TK_EPI_BIAS_ACT)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "activation: TK_ACT_NONE (0) is not valid for %s, %s (expected %s)",
                       epi_name(kind),
                       kind == TK_EPI_GATED ? "whose gate half goes through an activation"
                                            : "which multiplies by an activation's derivative",
                       TK_ACTS_SOME);
    if (d->group_kind >= TK_GROUP_BATCHED && d->group_kind <= TK_GROUP_MASKED)
        return tk_fail(h, TK_ERR_NOT_SUPPORTED,
                       "group_kind: %d with epilogue %s: epilogues with batched or grouped products are not "
                       "supported yet (expected TK_GROUP_NONE (0): one product)",
                       d->group_kind, epi_name(kind));
    if (d->group_kind != TK_GROUP_NONE)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "group_kind: %d is not a tk_group_kind (expected TK_GROUP_NONE (0) with an epilogue)",
                       d->group_kind);
    if (d->problem.layout != TK_ROW_MAJOR)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "layout: %d is not TK_ROW_MAJOR (0): epilogues take row-major problems alone (expected "
                       "TK_ROW_MAJOR)",
                       (int)d->problem.layout);
    return TK_SUCCESS;
}

/* The fields' values and pointers, with no extent measured yet (the
 * problem's sizes are checked after these, by gemm.c). */
static tk_status check_fields(tk_handle h, const tk_gemm_desc *d)
{
    const int kind = d->epilogue;
    const tk_gemm_problem *p = &d->problem;
    if (kind == TK_EPI_GATED && p->n > 0 && p->n % 2)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "n: %" PRId64 " is odd, but TK_EPI_GATED splits the product's N columns into a gate half and "
                       "an up half (expected an even N)",
                       p->n);
    if (kind == TK_EPI_GATED_BACKWARD && p->n > INT64_MAX / 2)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "n: %" PRId64 " is too large: TK_EPI_GATED_BACKWARD's D and aux have 2N columns (expected "
                       "N <= INT64_MAX / 2)",
                       p->n);
    if (d->bias_type != TK_F32 && d->bias_type != TK_BF16)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "bias_type: %d is not TK_F32 (0) or TK_BF16 (1)", d->bias_type);
    if (d->bias_along != TK_BIAS_COLUMNS && d->bias_along != TK_BIAS_ROWS)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "bias_along: %d is not TK_BIAS_COLUMNS (0) or TK_BIAS_ROWS (1)",
                       d->bias_along);
    if (d->bias && is_backward(kind))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "bias: is set, but %s adds no bias (expected NULL: a bias goes with TK_EPI_BIAS_ACT or "
                       "TK_EPI_GATED)",
                       epi_name(kind));
    const unsigned bias_bytes = d->bias_type == TK_F32 ? 4 : 2;
    if ((uintptr_t)d->bias % bias_bytes)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "bias: pointer %p is not %u-byte aligned (expected the address of a %s element: bias_type %s)",
                       d->bias, bias_bytes, bias_bytes == 4 ? "4-byte fp32" : "2-byte bf16",
                       bias_bytes == 4 ? "TK_F32" : "TK_BF16");
    if (d->b_up && kind != TK_EPI_GATED)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "b_up: is set, but %s has no up projection (expected NULL: b_up goes with TK_EPI_GATED)",
                       epi_name(kind));
    if (d->bias_grad && !is_backward(kind))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "bias_grad: is set, but %s has no gradient to sum (expected NULL: bias_grad goes with "
                       "TK_EPI_BACKWARD or TK_EPI_GATED_BACKWARD)",
                       epi_name(kind));
    if ((uintptr_t)d->bias_grad % 4)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "bias_grad: pointer %p is not 4-byte aligned (expected the address of a 4-byte fp32 element)",
                       (void *)d->bias_grad);
    if ((uintptr_t)d->aux % 2)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "aux: pointer %p is not 2-byte aligned (expected the address of a 2-byte bf16 element)", d->aux);
    if (!d->aux && d->ldaux && !is_backward(kind))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "ldaux: %" PRId64 " is set, but aux is NULL (no z stored; expected 0)", d->ldaux);
    if (!d->d && d->ldd)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "ldd: %" PRId64 " is set, but d is NULL (D is C, written in place with ldc; expected 0)",
                       d->ldd);
    if (kind == TK_EPI_GATED_BACKWARD && p->beta != 0.0f)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "beta: %g is not 0, but TK_EPI_GATED_BACKWARD takes no residual (its D is the gradient of z; "
                       "expected 0)",
                       (double)p->beta);
    return TK_SUCCESS;
}

/* D, aux and b_up against the problem's sizes (after gemm.c's checks:
 * 0 <= M, N, K); cols: D's columns. */
static tk_status check_extents(tk_handle h, const tk_gemm_desc *d, int64_t cols)
{
    const int kind = d->epilogue;
    const tk_gemm_problem *p = &d->problem;
    const int mn = p->m > 0 && p->n > 0;
    tk_status st;
    if (d->d && (st = tk_check_matrix(h, "D", "ldd", TK_ROW_MAJOR, TK_OP_N, p->m, cols, d->ldd,
                                      p->c_type == TK_F32 ? 4 : 2, d->d, mn)))
        return st;
    if (mn && !d->aux && is_backward(kind))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "aux: pointer is NULL, but %s reads the forward's z from it (expected %" PRId64 " x %" PRId64
                       " bf16 in device memory)",
                       epi_name(kind), p->m, aux_cols(kind, p->n));
    if (mn && d->aux &&
        (st = tk_check_matrix(h, "aux", "ldaux", TK_ROW_MAJOR, TK_OP_N, p->m, aux_cols(kind, p->n), d->ldaux, 2,
                              d->aux, 1)))
        return st;
    /* the up half's weight: B's op and ldb, its first N/2 columns */
    if (d->b_up && (st = tk_check_matrix(h, "b_up", "ldb", TK_ROW_MAJOR, p->op_b, p->k, p->n / 2, p->ldb, 2,
                                         d->b_up, 1)))
        return st;
    if (d->bias_grad && cols > INT64_MAX / 4)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "bias_grad: %" PRId64 " fp32 column sums span more than INT64_MAX bytes (expected fewer "
                       "columns)",
                       cols);
    return TK_SUCCESS;
}

/* The bytes [lo, hi) of a row-major matrix, rows x cols elements of esz
 * bytes ld apart; lo == hi when empty. Its extent was checked (at most
 * INT64_MAX bytes), so only the address can wrap. */
typedef struct { uintptr_t lo, hi; } span;

static span span_of(const void *ptr, int64_t rows, int64_t cols, int64_t ld, int64_t esz)
{
    span s = { (uintptr_t)ptr, (uintptr_t)ptr };
    if (rows > 0 && cols > 0) {
        const uintptr_t bytes = ((uintptr_t)(rows - 1) * (uintptr_t)ld + (uintptr_t)cols) * (uintptr_t)esz;
        s.hi = s.lo + bytes < s.lo ? UINTPTR_MAX : s.lo + bytes;
    }
    return s;
}

static int overlap(span x, span y) { return x.lo < x.hi && y.lo < y.hi && x.lo < y.hi && y.lo < x.hi; }

/* What the kernel writes must not share memory with what it reads or
 * writes elsewhere: D and C (the residual, read where beta != 0) are the
 * same matrix or apart; aux and bias_grad apart from D. */
static tk_status check_overlaps(tk_handle h, const tk_gemm_desc *d, int64_t cols)
{
    const tk_gemm_problem *p = &d->problem;
    if (p->m == 0 || cols == 0)
        return TK_SUCCESS;   /* no D written */
    const int64_t cb = p->c_type == TK_F32 ? 4 : 2;
    void *dp = d->d ? d->d : p->c;
    const int64_t ld = d->d ? d->ldd : p->ldc;
    const span D = span_of(dp, p->m, cols, ld, cb);
    if (d->d && p->beta != 0.0f && !(d->d == p->c && d->ldd == p->ldc) &&
        overlap(D, span_of(p->c, p->m, cols, p->ldc, cb)))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "d: D (%p, %" PRId64 " x %" PRId64 ", ldd %" PRId64 ") partly overlaps C (%p, ldc %" PRId64
                       "), which it reads as the residual (expected d == c with ldd == ldc for in place, or "
                       "disjoint memory)",
                       d->d, p->m, cols, d->ldd, p->c, p->ldc);
    if (d->aux && overlap(D, span_of(d->aux, p->m, aux_cols(d->epilogue, p->n), d->ldaux, 2)))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "aux: %p (%" PRId64 " x %" PRId64 ", ldaux %" PRId64 ") overlaps D (%p, %" PRId64 " x %" PRId64
                       ", ld %" PRId64 ") (expected disjoint memory)",
                       d->aux, p->m, aux_cols(d->epilogue, p->n), d->ldaux, dp, p->m, cols, ld);
    if (d->bias_grad && overlap(D, span_of(d->bias_grad, 1, cols, cols, 4)))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "bias_grad: %p (%" PRId64 " fp32) overlaps D (%p, %" PRId64 " x %" PRId64 ", ld %" PRId64
                       ") (expected disjoint memory)",
                       (void *)d->bias_grad, cols, dp, p->m, cols, ld);
    return TK_SUCCESS;
}

/* The up half's B: b_up as given, or B's columns N/2 .. N-1 (op_b N:
 * stored K x N, N/2 elements on; op_b T: stored N x K, N/2 rows on). NULL
 * where B is NULL: not read (K == 0). */
static const void *up_half(const tk_gemm_desc *d)
{
    const tk_gemm_problem *p = &d->problem;
    if (d->epilogue != TK_EPI_GATED || d->b_up || !p->b)
        return d->b_up;
    const int64_t half = p->n / 2;
    return (const char *)p->b + 2 * (p->op_b == TK_OP_T ? half * p->ldb : half);
}

void tk_epi_args_of(const tk_gemm_desc *d, tk_epi_args *e)
{
    const tk_gemm_problem *p = &d->problem;
    memset(e, 0, sizeof *e);
    e->kind = d->epilogue;
    e->act = d->activation;
    e->bias = d->bias;
    e->bias_bf16 = d->bias_type == TK_BF16;
    e->bias_rows = d->bias_along == TK_BIAS_ROWS;
    e->b_up = up_half(d);
    e->d = d->d ? d->d : p->c;
    e->ldd = d->d ? d->ldd : p->ldc;
    e->aux = d->aux;
    e->ldaux = d->ldaux;
    e->bias_grad = d->bias_grad;
    e->out_cols = out_cols(d->epilogue, p->n);
}

/* M == 0: bias_grad's column sums over no rows are zeros (on the stream,
 * so a graph can capture it). */
static tk_status zero_bias_grad(tk_handle h, float *bias_grad, int64_t cols, cudaStream_t s)
{
    tk_status st = tk_device_ready(h);
    if (st)
        return st;
    const cudaError_t e = cudaMemsetAsync(bias_grad, 0, (size_t)cols * sizeof(float), s);
    if (e == cudaSuccess)
        return TK_SUCCESS;
    cudaGetLastError();
    tk_note_cuda_error((int)e);
    return tk_fail(h, TK_ERR_CUDA, "bias_grad: cudaMemsetAsync of its %" PRId64 " zeros (M = 0): %s", cols,
                   cudaGetErrorString(e));
}

tk_status tk_epilogue_run(tk_handle h, const tk_gemm_desc *d, const char *kernel, void *stream)
{
    tk_status st;
    if ((st = check_kind(h, d)) || (st = tk_group_none_check(h, d)) || (st = check_fields(h, d)))
        return st;
    const tk_gemm_problem *p = &d->problem;
    const int kind = d->epilogue;
    const int64_t n = p->n < 0 ? 0 : p->n;   /* a negative N is refused by the problem's checks */
    const int64_t cols = out_cols(kind, n);
    /* B holds N/2 columns when b_up holds the up half; C has D's columns,
     * and is neither read nor written with a D apart and beta 0 */
    const tk_widths w = { kind == TK_EPI_GATED && d->b_up ? n / 2 : n, cols, d->d && p->beta == 0.0f, 0 };
    tk_args a;
    int noop = 0;
    const tk_kernel *k = NULL;
    if ((st = tk_prepare_widths(h, p, kernel, &a, &noop, &k, 1, &w)) || (st = check_extents(h, d, cols)) ||
        (st = check_overlaps(h, d, cols)))
        return st;
    cudaStream_t s = (cudaStream_t)stream;
    if (noop)   /* M or N == 0; K == 0 is not one: D = the formula on P = 0 */
        return p->m == 0 && cols > 0 && d->bias_grad ? zero_bias_grad(h, d->bias_grad, cols, s) : TK_SUCCESS;
    if ((st = tk_device_ready(h)))
        return st;
    tk_epi_args e;
    tk_epi_args_of(d, &e);
    a.epi = &e;
    return tk_run_args(h, &a, k, s);
}
