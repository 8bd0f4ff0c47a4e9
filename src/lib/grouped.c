/* grouped.c - many products in one call (tilekit.h, tk_group_kind): the
 * checks of what a kind adds to the problem (count, offsets, unused
 * fields), then the problem's own checks (gemm.c's), then the strides
 * against the matrices they step over, and the launch of gemm.c. As there,
 * every refusal names the argument and what was expected, and nothing is
 * launched unless all checks pass; all come before the device is asked
 * for, and a no-op (M or N == 0, a batch of none) needs none. The offsets'
 * values live on the device and are never read here (the kernels check
 * them, group.h). */
#include <inttypes.h>
#include <string.h>
#include "internal.h"

static const char *kind_name(int kind)
{
    switch (kind) {
    case TK_GROUP_BATCHED: return "TK_GROUP_BATCHED";
    case TK_GROUP_ROWS: return "TK_GROUP_ROWS";
    case TK_GROUP_K: return "TK_GROUP_K";
    case TK_GROUP_MASKED: return "TK_GROUP_MASKED";
    }
    return "?";
}

/* Elements one stored matrix spans: (lines - 1) * ld + len, 0 if empty. */
static int64_t extent(tk_layout layout, tk_op op, int64_t r, int64_t c, int64_t ld)
{
    int64_t sr = op == TK_OP_N ? r : c, sc = op == TK_OP_N ? c : r;
    int64_t lines = layout == TK_ROW_MAJOR ? sr : sc, len = layout == TK_ROW_MAJOR ? sc : sr;
    return lines == 0 || len == 0 ? 0 : (lines - 1) * ld + len;
}

/* One stride of `count` matrices of `ext` elements of esz bytes: >= 0, and
 * the last matrix's end within INT64_MAX bytes. */
static tk_status check_stride(tk_handle h, const char *name, int64_t stride, int64_t count, int64_t ext, int64_t esz)
{
    if (stride < 0)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "%s: %" PRId64 " is negative (expected >= 0 elements)", name, stride);
    const int64_t max_elems = INT64_MAX / esz;
    if (count > 1 && ext > 0 && stride > 0 && (count - 1 > (max_elems - ext) / stride))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "%s: %" PRId64 " matrices %" PRId64 " elements apart span more than INT64_MAX bytes", name,
                       count, stride);
    return TK_SUCCESS;
}

/* The fields kind leaves unused must be zero. */
static tk_status check_unused(tk_handle h, const tk_gemm_desc *d)
{
    const int kind = d->group_kind;
    const struct { const char *name; int64_t v; int used; } f[] = {
        { "stride_a", d->stride_a, kind == TK_GROUP_BATCHED || kind == TK_GROUP_MASKED },
        { "stride_b", d->stride_b, kind != TK_GROUP_K },
        { "stride_c", d->stride_c, kind != TK_GROUP_ROWS },
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!f[i].used && f[i].v)
            return tk_fail(h, TK_ERR_INVALID_VALUE,
                           "%s: %" PRId64 " is set, but %s does not use it (expected 0: %s)", f[i].name, f[i].v,
                           kind_name(kind),
                           kind == TK_GROUP_ROWS ? "the groups' rows share A and C, only B is one per group"
                                                 : "the groups' K shares A and B, only C is one per group");
    if (kind == TK_GROUP_BATCHED && (d->offs || d->group_error))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "%s: must be NULL for TK_GROUP_BATCHED (products of one shape have no offsets)",
                       d->offs ? "offs" : "group_error");
    return TK_SUCCESS;
}

tk_status tk_group_check(tk_handle h, const tk_gemm_desc *d)
{
    const int kind = d->group_kind;
    if (kind < TK_GROUP_BATCHED || kind > TK_GROUP_MASKED)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "group_kind: %d is not TK_GROUP_NONE (0), TK_GROUP_BATCHED (1), TK_GROUP_ROWS (2), TK_GROUP_K "
                       "(3) or TK_GROUP_MASKED (4)",
                       kind);
    if (kind == TK_GROUP_BATCHED ? d->count < 0 : d->count < 1)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "count: %d is not a %s count (expected %s)", d->count,
                       kind == TK_GROUP_BATCHED ? "batch" : "group", kind == TK_GROUP_BATCHED ? ">= 0" : ">= 1");
    tk_status st = check_unused(h, d);
    if (st)
        return st;
    if (kind != TK_GROUP_BATCHED) {
        if (!d->offs)
            return tk_fail(h, TK_ERR_INVALID_VALUE,
                           "offs: pointer is NULL (expected %d int32 %s in device memory)", d->count,
                           kind == TK_GROUP_MASKED ? "row counts" : "cumulative end offsets");
        if ((uintptr_t)d->offs % 4 || (uintptr_t)d->group_error % 4)
            return tk_fail(h, TK_ERR_INVALID_VALUE, "%s: pointer %p is not 4-byte aligned (expected int32 elements)",
                           (uintptr_t)d->offs % 4 ? "offs" : "group_error",
                           (uintptr_t)d->offs % 4 ? (const void *)d->offs : (const void *)d->group_error);
        if (d->problem.layout != TK_ROW_MAJOR)
            return tk_fail(h, TK_ERR_INVALID_VALUE,
                           "layout: %s takes TK_ROW_MAJOR alone (its groups split rows or K of row-major arrays)",
                           kind_name(kind));
    }
    return TK_SUCCESS;
}

/* The strides against the matrices they step over: after the problem's own
 * checks, which bound each matrix's extent (so none overflows here). A's
 * and B's elements are ab_bytes each (2 bf16, 1 FP8). */
tk_status tk_group_check_strides(tk_handle h, const tk_gemm_desc *d, int ab_bytes)
{
    const int kind = d->group_kind;
    const tk_gemm_problem *p = &d->problem;
    tk_status st;
    const int64_t cb = p->c_type == TK_F32 ? 4 : 2;
    const int64_t ea = extent(p->layout, p->op_a, p->m, p->k, p->lda);
    const int64_t eb = extent(p->layout, p->op_b, p->k, p->n, p->ldb);
    const int64_t ec = extent(p->layout, TK_OP_N, p->m, p->n, p->ldc);
    if ((st = check_stride(h, "stride_a", d->stride_a, d->count, ea, ab_bytes)) ||
        (st = check_stride(h, "stride_b", d->stride_b, d->count, eb, ab_bytes)) ||
        (st = check_stride(h, "stride_c", d->stride_c, d->count, ec, cb)))
        return st;
    if (kind != TK_GROUP_ROWS && d->count > 1 && ec > 0 && d->stride_c < ec)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "stride_c: %" PRId64 " is smaller than one C (%" PRId64 " x %" PRId64 ", ldc %" PRId64
                       ": %" PRId64 " elements), so the outputs would overlap (expected >= %" PRId64 ")",
                       d->stride_c, p->m, p->n, p->ldc, ec, ec);
    return TK_SUCCESS;
}

tk_status tk_group_none_check(tk_handle h, const tk_gemm_desc *d)
{
    const tk_field f[] = {
        { "count", d->count != 0 },       { "stride_a", d->stride_a != 0 }, { "stride_b", d->stride_b != 0 },
        { "stride_c", d->stride_c != 0 }, { "offs", d->offs != NULL },      { "group_error", d->group_error != NULL },
    };
    return tk_fields_unset(h, f, sizeof f / sizeof f[0],
                           "group_kind is TK_GROUP_NONE (one product), which uses none of the group fields",
                           "the group_kind that uses it");
}

void tk_group_args_of(const tk_gemm_desc *d, tk_group_args *g)
{
    *g = (tk_group_args){ d->group_kind, d->count, d->stride_a, d->stride_b, d->stride_c, d->offs, d->group_error };
    if (d->problem.layout == TK_COL_MAJOR) {   /* BATCHED alone: normalize swapped A and B */
        g->stride_a = d->stride_b;
        g->stride_b = d->stride_a;
    }
}

tk_status tk_grouped_run(tk_handle h, const tk_gemm_desc *d, const char *kernel, void *stream)
{
    tk_status st = tk_group_check(h, d);
    if (st)
        return st;
    tk_args a;
    int noop = 0;
    const tk_kernel *k = NULL;
    /* A batch of none reads no operand (they may be NULL, as torch's empty
     * tensors' are) and, like any no-op, needs no device. */
    if ((st = tk_prepare_args(h, &d->problem, kernel, &a, &noop, &k, d->count > 0)) ||
        (st = tk_group_check_strides(h, d, 2)) || noop || d->count == 0 || (st = tk_device_ready(h)))
        return st;
    tk_group_args g;
    tk_group_args_of(d, &g);
    a.grp = &g;
    return tk_run_args(h, &a, k, (cudaStream_t)stream);
}

/* The entry points' common part: h and p checked, the descriptor filled and run. */
static tk_status run_form(tk_handle h, const tk_gemm_problem *p, int kind, int count, const int32_t *offs,
                          int64_t stride_a, int64_t stride_b, int64_t stride_c, int32_t *group_error,
                          const char *kernel, void *stream)
{
    tk_gemm_desc d = TK_GEMM_DESC_INIT;
    d.problem = *p;
    d.group_kind = kind;
    d.count = count;
    d.offs = offs;
    d.stride_a = stride_a;
    d.stride_b = stride_b;
    d.stride_c = stride_c;
    d.group_error = group_error;
    return tk_grouped_run(h, &d, kernel, stream);
}

/* h and p present (h's last error cleared first). */
static tk_status check_call(tk_handle h, const tk_gemm_problem *p)
{
    if (!h)
        return tk_fail(NULL, TK_ERR_INVALID_VALUE, "h: handle is NULL (expected one from tk_create)");
    tk_call_begin(h);
    return p ? TK_SUCCESS : tk_fail(h, TK_ERR_INVALID_VALUE, "problem: pointer is NULL");
}

tk_status tk_gemm_batched(tk_handle h, const tk_gemm_problem *p, int64_t count, int64_t stride_a, int64_t stride_b,
                          int64_t stride_c, const char *kernel, void *stream)
{
    tk_status st = check_call(h, p);
    if (st)
        return st;
    if (count < 0 || count > INT32_MAX)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "count: %" PRId64 " is not a batch count (expected 0 .. 2^31 - 1)",
                       count);
    return run_form(h, p, TK_GROUP_BATCHED, (int)count, NULL, stride_a, stride_b, stride_c, NULL, kernel, stream);
}

tk_status tk_gemm_grouped(tk_handle h, const tk_gemm_problem *p, tk_group_kind kind, int count, const int32_t *offs,
                          int64_t stride_a, int64_t stride_b, int64_t stride_c, int32_t *group_error,
                          const char *kernel, void *stream)
{
    tk_status st = check_call(h, p);
    if (st)
        return st;
    if (kind != TK_GROUP_ROWS && kind != TK_GROUP_K && kind != TK_GROUP_MASKED)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "kind: %d is not TK_GROUP_ROWS (2), TK_GROUP_K (3) or TK_GROUP_MASKED (4) (batched products: "
                       "tk_gemm_batched)",
                       (int)kind);
    return run_form(h, p, kind, count, offs, stride_a, stride_b, stride_c, group_error, kernel, stream);
}
