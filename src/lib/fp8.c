/* fp8.c - FP8 operands (tilekit.h, tk_gemm_desc version 4; issue 40, in
 * progress): the checks of the version-4 fields, then the call, routed
 * like any other to the kernels whose family accepts TK_ACCEPT_AB_FP8:
 * K-major operands to the FP8 instances of k31, k45 and k36_swap_*, the
 * other layouts and alignments to them through K-major copies (route.c),
 * the rest to k01_naive. As epilogue.c's, every refusal names the field,
 * what it holds and what was expected, and all come before the device is
 * asked for. */
#include <inttypes.h>
#include <string.h>
#include "internal.h"

static const char *fp8_name(int f) { return f == TK_FP8_E4M3 ? "TK_FP8_E4M3" : "TK_FP8_E5M2"; }

tk_status tk_fp8_none_check(tk_handle h, const tk_gemm_desc *d)
{
    const tk_field f[] = {
        { "scale_mode", d->scale_mode != 0 }, { "scale_a", d->scale_a != NULL },   { "scale_b", d->scale_b != NULL },
        { "ld_scale_a", d->ld_scale_a != 0 }, { "ld_scale_b", d->ld_scale_b != 0 },
    };
    return tk_fields_unset(h, f, sizeof f / sizeof f[0],
                           "a_fp8 and b_fp8 are TK_FP8_NONE (bf16 operands), which take no scales",
                           "FP8 operands (a_fp8, b_fp8)");
}

/* The formats, the mode and the scales' pointers and strides. */
static tk_status check_fields(tk_handle h, const tk_gemm_desc *d)
{
    static const char *const formats = "TK_FP8_E4M3 (1) or TK_FP8_E5M2 (2)";
    const int fa = d->a_fp8, fb = d->b_fp8;
    if (fa < TK_FP8_NONE || fa > TK_FP8_E5M2)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "a_fp8: %d is not a tk_fp8_format (expected TK_FP8_NONE (0), %s)",
                       fa, formats);
    if (fb < TK_FP8_NONE || fb > TK_FP8_E5M2)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "b_fp8: %d is not a tk_fp8_format (expected TK_FP8_NONE (0), %s)",
                       fb, formats);
    if (!fa || !fb)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "%s: TK_FP8_NONE (0), but %s is %s: an FP8 product takes both operands in FP8 (expected %s)",
                       fa ? "b_fp8" : "a_fp8", fa ? "a_fp8" : "b_fp8", fp8_name(fa ? fa : fb), formats);
    const int mode = d->scale_mode;
    if (mode < TK_SCALE_TENSOR || mode > TK_SCALE_BLOCK)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "scale_mode: %d with FP8 operands (expected TK_SCALE_TENSOR (1), TK_SCALE_ROW (2) or "
                       "TK_SCALE_BLOCK (3); scales of 1.0 for none)",
                       mode);
    if (!d->scale_a || !d->scale_b)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "%s: pointer is NULL (expected the fp32 scales scale_mode %d asks for)",
                       d->scale_a ? "scale_b" : "scale_a", mode);
    if ((uintptr_t)d->scale_a % 4 || (uintptr_t)d->scale_b % 4)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "%s: pointer %p is not 4-byte aligned (expected the address of a 4-byte fp32 element)",
                       (uintptr_t)d->scale_a % 4 ? "scale_a" : "scale_b",
                       (const void *)((uintptr_t)d->scale_a % 4 ? d->scale_a : d->scale_b));
    const tk_gemm_problem *p = &d->problem;
    if (mode != TK_SCALE_BLOCK) {
        if (d->ld_scale_a || d->ld_scale_b)
            return tk_fail(h, TK_ERR_INVALID_VALUE,
                           "%s: %" PRId64 " is set, but only TK_SCALE_BLOCK's scales have k-blocks (expected 0)",
                           d->ld_scale_a ? "ld_scale_a" : "ld_scale_b", d->ld_scale_a ? d->ld_scale_a : d->ld_scale_b);
        return TK_SUCCESS;
    }
    if (p->k % 128)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "k: %" PRId64 " is not a multiple of 128, but TK_SCALE_BLOCK scales blocks of 128 of K (expected "
                       "a multiple of 128, or TK_SCALE_ROW / TK_SCALE_TENSOR)",
                       p->k);
    if (d->ld_scale_a < (p->m > 1 ? p->m : 1))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "ld_scale_a: %" PRId64 " is below M (%" PRId64 "): scale_a holds M values per k-block (expected "
                       ">= M)",
                       d->ld_scale_a, p->m);
    const int64_t nb = p->n > 0 ? (p->n + 127) / 128 : 1;
    if (d->ld_scale_b < nb)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "ld_scale_b: %" PRId64 " is below ceil(N / 128) (%" PRId64 "): scale_b holds one value per 128 "
                       "columns per k-block (expected >= %" PRId64 ")",
                       d->ld_scale_b, nb, nb);
    return TK_SUCCESS;
}

/* The checks of an FP8 call and its row-major problem: *a normalized
 * (need_ptrs as tk_prepare's), a->fp8 = f, which gets the call's formats
 * and scales (a column-major call's swapped with its operands); *k the
 * named kernel (NULL: auto); *noop for M or N == 0, which asks no device. */
static tk_status fp8_prepare(tk_handle h, const tk_gemm_desc *d, const char *kernel, int need_ptrs, tk_args *a,
                             tk_fp8_args *f, int *noop, const tk_kernel **k)
{
    tk_status st = check_fields(h, d);
    if (st)
        return st;
    if (d->epilogue)
        return tk_fail(h, TK_ERR_NOT_SUPPORTED,
                       "epilogue: %d with FP8 operands: fused epilogues on FP8 products are not supported yet "
                       "(expected TK_EPI_NONE (0))",
                       d->epilogue);
    if (d->group_kind)
        return tk_fail(h, TK_ERR_NOT_SUPPORTED,
                       "group_kind: %d with FP8 operands: batched and grouped FP8 products are not supported yet "
                       "(expected TK_GROUP_NONE (0))",
                       d->group_kind);
    const tk_gemm_problem *p = &d->problem;
    const int col = p->layout == TK_COL_MAJOR;
    if (col && d->scale_mode == TK_SCALE_BLOCK)
        return tk_fail(h, TK_ERR_NOT_SUPPORTED,
                       "layout: TK_COL_MAJOR with TK_SCALE_BLOCK: block scales are laid out for the row-major problem "
                       "(expected TK_ROW_MAJOR, or TK_SCALE_ROW / TK_SCALE_TENSOR)");
    const tk_widths w = { p->n, p->n, 0, 1 };
    *noop = 0;
    *k = NULL;
    if ((st = tk_prepare_widths(h, p, kernel, a, noop, k, need_ptrs, &w)))
        return st;
    if (*noop)
        return TK_SUCCESS;
    if ((st = tk_device_ready(h)))
        return st;
    /* column-major C = op(A) op(B) runs as row-major C^T = op(B)^T op(A)^T (normalize):
     * the formats and the per-row / per-column scales change places with the operands */
    *f = (tk_fp8_args){ col ? d->b_fp8 : d->a_fp8, col ? d->a_fp8 : d->b_fp8, d->scale_mode,
                        col ? d->scale_b : d->scale_a, col ? d->scale_a : d->scale_b,
                        d->ld_scale_a, d->ld_scale_b };
    a->fp8 = f;
    return TK_SUCCESS;
}

tk_status tk_fp8_run(tk_handle h, const tk_gemm_desc *d, const char *kernel, void *stream)
{
    tk_args a;
    tk_fp8_args f;
    int noop = 0;
    const tk_kernel *k = NULL;
    tk_status st = fp8_prepare(h, d, kernel, 1, &a, &f, &noop, &k);
    return st || noop ? st : tk_run_args(h, &a, k, (cudaStream_t)stream);
}

tk_status tk_fp8_route(tk_handle h, const tk_gemm_desc *d, tk_fp8_args *f, tk_route *r)
{
    tk_args a;
    int noop = 0;
    const tk_kernel *k = NULL;
    memset(r, 0, sizeof *r);
    tk_call_begin(h);
    tk_status st = fp8_prepare(h, d, NULL, 0, &a, f, &noop, &k);
    return st || noop ? st : tk_route_select(h, &a, r, 1);
}
