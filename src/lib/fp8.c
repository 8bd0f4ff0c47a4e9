/* fp8.c - FP8 operands (tilekit.h, tk_gemm_desc versions 4 and 5; issue
 * 40, in progress): the checks of the version-4 fields (and version 5's
 * many products, below), then the call, routed
 * like any other to the kernels whose family accepts TK_ACCEPT_AB_FP8:
 * K-major operands to the FP8 instances of k31, k45 and k36_swap_* (many
 * products: k43's), the
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
        { "stride_scale_a", d->stride_scale_a != 0 }, { "stride_scale_b", d->stride_scale_b != 0 },
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

/* ---- many FP8 products (tilekit.h, tk_gemm_desc version 5) ----
 * Design (session 31's helper; docs/NOTES.md "Grouped FP8"): the scales
 * follow their operand. An operand that is one per product (stride_a or
 * stride_b nonzero: B of TK_GROUP_ROWS, a mixture of experts' weights; A
 * and B of TK_GROUP_BATCHED) has one set of scales per product, the g-th
 * at scale + g * stride_scale; an operand shared by all (stride 0; ROWS' A,
 * the stacked token rows, always) has one set, which for ROWS spans all M
 * rows exactly as one product's does (TK_SCALE_ROW's M values,
 * TK_SCALE_BLOCK's M x K / 128 at ld_scale_a), so a group's rows read
 * their own entries. One set is what one product's scale_mode asks for:
 * TENSOR 1 value (so a tensor scale per expert: scale_b[g]), ROW M (A) or
 * N (B: torch._scaled_grouped_mm's (count, N) scale_b), BLOCK ld_scale *
 * K / 128 (DeepGEMM's grouped-contiguous scales, in tilekit's n-fastest
 * order). stride_scale 0 is the default: the packed size of one set where
 * the operand is one per product, 0 where it is shared; a stride set must
 * hold one set (>= that size, sets never overlap) and is refused where the
 * operand is shared. TK_GROUP_K (the weight gradient: K split at
 * arbitrary offsets, which cut through block scales' 128-deep k-blocks)
 * and TK_GROUP_MASKED (DeepGEMM's decode layout: BATCHED with row counts;
 * the same scales as BATCHED, refused until a test covers it) are not
 * supported yet. Kernels: k43's FP8 instances (k43_fp8.cu: K-major A and
 * B, K a multiple of 16, lines and strides in 16-byte units), k01_naive
 * (k01_fp8_grouped_kernel, correct and slow) the rest. */

static int64_t scale_set_size(int mode, int64_t lines, int64_t ld, int64_t k)
{
    return mode == TK_SCALE_TENSOR ? 1 : mode == TK_SCALE_ROW ? lines : ld * (k / 128);
}

/* One operand's stride_scale: *out the resolved elements from one product's
 * scales to the next; shared: why the operand is one for all (NULL: it is
 * one per product). */
static tk_status check_scale_stride(tk_handle h, const tk_gemm_desc *d, const char *name, const char *shared,
                                    int64_t v, int64_t set, int64_t *out)
{
    *out = 0;
    if (shared) {
        if (v)
            return tk_fail(h, TK_ERR_INVALID_VALUE,
                           "%s: %" PRId64 " is set, but %s (one operand for all products, so one set of its "
                           "scales; expected 0)",
                           name, v, shared);
        return TK_SUCCESS;
    }
    if (v < 0)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "%s: %" PRId64 " is negative (expected 0 for the default, or >= %" PRId64
                       " elements)", name, v, set);
    if (v && v < set)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "%s: %" PRId64 " is below one product's scales (%" PRId64 " elements for scale_mode %d), so "
                       "the groups' scales would overlap (expected 0 for the default, or >= %" PRId64 ")",
                       name, v, set, d->scale_mode, set);
    *out = v ? v : set;
    if (d->count > 1 && *out > (INT64_MAX / 4 - set) / (d->count - 1))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "%s: %d sets of scales %" PRId64 " elements apart span more than INT64_MAX bytes", name,
                       d->count, *out);
    return TK_SUCCESS;
}

/* The group fields of an FP8 call (before the problem's checks): the
 * kind's own (grouped.c's), the kinds FP8 takes, the scales' strides
 * resolved into *ssa, *ssb (the public problem's A and B). */
static tk_status check_group_fields(tk_handle h, const tk_gemm_desc *d, int64_t *ssa, int64_t *ssb)
{
    *ssa = *ssb = 0;
    if (!d->group_kind) {
        const tk_field f[] = { { "stride_scale_a", d->stride_scale_a != 0 },
                               { "stride_scale_b", d->stride_scale_b != 0 } };
        tk_status st = tk_fields_unset(h, f, 2, "group_kind is TK_GROUP_NONE (one product, one set of scales)",
                                       "TK_GROUP_ROWS or TK_GROUP_BATCHED");
        return st ? st : tk_group_none_check(h, d);
    }
    tk_status st = tk_group_check(h, d);
    if (st)
        return st;
    if (d->group_kind == TK_GROUP_K || d->group_kind == TK_GROUP_MASKED)
        return tk_fail(h, TK_ERR_NOT_SUPPORTED,
                       "group_kind: %s with FP8 operands is not supported yet (expected TK_GROUP_NONE (0), "
                       "TK_GROUP_BATCHED (1) or TK_GROUP_ROWS (2))",
                       d->group_kind == TK_GROUP_K ? "TK_GROUP_K" : "TK_GROUP_MASKED");
    const tk_gemm_problem *p = &d->problem;
    const int mode = d->scale_mode;
    const char *shared_a = d->group_kind == TK_GROUP_ROWS
                               ? "TK_GROUP_ROWS's A is the groups' rows stacked, its scales over all M rows"
                           : d->stride_a ? NULL : "stride_a is 0";
    if ((st = check_scale_stride(h, d, "stride_scale_a", shared_a, d->stride_scale_a,
                                 scale_set_size(mode, p->m, d->ld_scale_a, p->k), ssa)))
        return st;
    return check_scale_stride(h, d, "stride_scale_b", d->stride_b ? NULL : "stride_b is 0", d->stride_scale_b,
                              scale_set_size(mode, p->n, d->ld_scale_b, p->k), ssb);
}

/* The checks of an FP8 call and its row-major problem: *a normalized
 * (need_ptrs as tk_prepare's), a->fp8 = f, which gets the call's formats
 * and scales (a column-major call's swapped with its operands); *k the
 * named kernel (NULL: auto); *noop for M or N == 0, which asks no device. */
static tk_status fp8_prepare(tk_handle h, const tk_gemm_desc *d, const char *kernel, int need_ptrs, tk_args *a,
                             tk_fp8_args *f, tk_group_args *g, int *noop, const tk_kernel **k)
{
    int64_t ssa, ssb;
    tk_status st = check_fields(h, d);
    if (st || (st = check_group_fields(h, d, &ssa, &ssb)))
        return st;
    if (d->epilogue)
        return tk_fail(h, TK_ERR_NOT_SUPPORTED,
                       "epilogue: %d with FP8 operands: fused epilogues on FP8 products are not supported yet "
                       "(expected TK_EPI_NONE (0))",
                       d->epilogue);
    const tk_gemm_problem *p = &d->problem;
    const int col = p->layout == TK_COL_MAJOR;
    if (col && d->scale_mode == TK_SCALE_BLOCK)
        return tk_fail(h, TK_ERR_NOT_SUPPORTED,
                       "layout: TK_COL_MAJOR with TK_SCALE_BLOCK: block scales are laid out for the row-major problem "
                       "(expected TK_ROW_MAJOR, or TK_SCALE_ROW / TK_SCALE_TENSOR)");
    const tk_widths w = { p->n, p->n, 0, 1 };
    *noop = 0;
    *k = NULL;
    /* a batch of none reads no operand (as grouped.c's) */
    if ((st = tk_prepare_widths(h, p, kernel, a, noop, k, need_ptrs && !(d->group_kind && d->count == 0), &w)) ||
        (d->group_kind && (st = tk_group_check_strides(h, d, 1))))
        return st;
    if (d->group_kind && d->count == 0)
        *noop = 1;
    if (*noop)
        return TK_SUCCESS;
    if ((st = tk_device_ready(h)))
        return st;
    /* column-major C = op(A) op(B) runs as row-major C^T = op(B)^T op(A)^T (normalize):
     * the formats and the per-row / per-column scales change places with the operands */
    *f = (tk_fp8_args){ col ? d->b_fp8 : d->a_fp8, col ? d->a_fp8 : d->b_fp8, d->scale_mode,
                        col ? d->scale_b : d->scale_a, col ? d->scale_a : d->scale_b,
                        d->ld_scale_a, d->ld_scale_b, col ? ssb : ssa, col ? ssa : ssb };
    a->fp8 = f;
    if (d->group_kind) {
        tk_group_args_of(d, g);
        a->grp = g;
    }
    return TK_SUCCESS;
}

tk_status tk_fp8_run(tk_handle h, const tk_gemm_desc *d, const char *kernel, void *stream)
{
    tk_args a;
    tk_fp8_args f;
    tk_group_args g;
    int noop = 0;
    const tk_kernel *k = NULL;
    tk_status st = fp8_prepare(h, d, kernel, 1, &a, &f, &g, &noop, &k);
    return st || noop ? st : tk_run_args(h, &a, k, (cudaStream_t)stream);
}

tk_status tk_fp8_route(tk_handle h, const tk_gemm_desc *d, tk_fp8_args *f, tk_group_args *g, tk_route *r)
{
    tk_args a;
    int noop = 0;
    const tk_kernel *k = NULL;
    memset(r, 0, sizeof *r);
    tk_call_begin(h);
    if (d->group_kind && !g)   /* r->run points at the caller's tk_group_args */
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "group_kind: %d: the route of many FP8 products needs the caller's tk_group_args (g NULL)",
                       d->group_kind);
    tk_group_args none;
    tk_status st = fp8_prepare(h, d, NULL, 0, &a, f, g ? g : &none, &noop, &k);
    /* many products take no copies (tk_run_args: the kernels read them as they are) */
    return st || noop ? st : tk_route_select(h, &a, r, !d->group_kind);
}
