/* quantize.c - tk_quantize_fp8 (tilekit.h, issue 40): the descriptor read
 * by the versioned structs' rule, every field checked (each refusal names
 * it, says what it holds and what was expected, and comes before the
 * device is asked for), then the launch (src/kernels/quantize.cu). */
#include <inttypes.h>
#include <stddef.h>
#include "internal.h"

/* The first tk_quantize_desc: up to ld_scale. */
#define TK_QDESC_V1_SIZE (offsetof(tk_quantize_desc, ld_scale) + sizeof(int64_t))

static const char *const mode_names[] = { "TK_QUANT_NONE", "TK_QUANT_TENSOR", "TK_QUANT_ROW", "TK_QUANT_1X128",
                                          "TK_QUANT_128X128" };

/* The least ld_scale of the block modes (rows, or the 128-row blocks). */
static int64_t least_ld_scale(const tk_quantize_desc *d)
{
    return d->mode == TK_QUANT_1X128 ? d->rows : (d->rows + 127) / 128;
}

/* The bytes [lo, hi) of a row-major matrix (rows x cols of esz bytes, ld
 * apart; its extent checked, so only the address can wrap). */
typedef struct { uintptr_t lo, hi; } qspan;

static qspan qspan_of(const void *p, int64_t rows, int64_t cols, int64_t ld, int64_t esz)
{
    const uintptr_t lo = (uintptr_t)p, bytes = ((uintptr_t)(rows - 1) * (uintptr_t)ld + (uintptr_t)cols) * esz;
    return (qspan){ lo, lo + bytes < lo ? UINTPTR_MAX : lo + bytes };
}

static int qspans_meet(qspan a, qspan b) { return a.lo < b.hi && b.lo < a.hi; }

/* The scales' span: TENSOR one, ROW rows, the block modes ld_scale per
 * column block with the last block's least. */
static qspan scale_span(const tk_quantize_desc *d, int64_t ld_scale)
{
    const int64_t cb = (d->cols + 127) / 128;
    switch (d->mode) {
    case TK_QUANT_TENSOR:
        return qspan_of(d->scale, 1, 1, 1, 4);
    case TK_QUANT_ROW:
        return qspan_of(d->scale, 1, d->rows, d->rows, 4);
    default:
        return qspan_of(d->scale, cb, least_ld_scale(d), ld_scale, 4);
    }
}

static tk_status check(tk_handle h, const tk_quantize_desc *d, int64_t *ld_scale)
{
    if (d->rows < 0 || d->cols < 0)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "%s: %" PRId64 " is negative (expected >= 0)",
                       d->rows < 0 ? "rows" : "cols", d->rows < 0 ? d->rows : d->cols);
    if (d->format != TK_FP8_E4M3 && d->format != TK_FP8_E5M2)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "format: %d is not an FP8 format of the codes (expected TK_FP8_E4M3 (1) or TK_FP8_E5M2 (2))",
                       (int)d->format);
    if (d->mode < TK_QUANT_TENSOR || d->mode > TK_QUANT_128X128)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "mode: %d is not a tk_quant_mode (expected TK_QUANT_TENSOR (1), TK_QUANT_ROW (2), "
                       "TK_QUANT_1X128 (3) or TK_QUANT_128X128 (4))",
                       (int)d->mode);
    const int used = d->rows > 0 && d->cols > 0;
    tk_status st;
    if ((st = tk_check_matrix(h, "x", "ldx", TK_ROW_MAJOR, TK_OP_N, d->rows, d->cols, d->ldx, 2, d->x, used)) ||
        (st = tk_check_matrix(h, "q", "ldq", TK_ROW_MAJOR, TK_OP_N, d->rows, d->cols, d->ldq, 1, d->q, used)))
        return st;
    const int block = d->mode == TK_QUANT_1X128 || d->mode == TK_QUANT_128X128;
    const int64_t least = block ? least_ld_scale(d) : 0;
    if (!block && d->ld_scale)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "ld_scale: %" PRId64 " is set, but %s has no column blocks (expected 0)", d->ld_scale,
                       mode_names[d->mode]);
    if (block && d->ld_scale && d->ld_scale < least)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "ld_scale: %" PRId64 " is below %s (%" PRId64 ") for %s (expected 0 or >= %" PRId64 ")",
                       d->ld_scale, d->mode == TK_QUANT_1X128 ? "rows" : "ceil(rows / 128)", least,
                       mode_names[d->mode], least);
    *ld_scale = block && !d->ld_scale ? least : d->ld_scale;
    if (*ld_scale > INT64_MAX / 4 / ((d->cols + 127) / 128 + 1))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "ld_scale: %" PRId64 " is too large: the scales would span more than INT64_MAX bytes",
                       *ld_scale);
    if (!used)
        return TK_SUCCESS;
    if (!d->scale)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "scale: pointer is NULL (expected fp32 device memory for %s's scales)",
                       mode_names[d->mode]);
    if ((uintptr_t)d->scale % 4)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "scale: pointer %p is not 4-byte aligned (expected the address of a 4-byte fp32 element)",
                       (void *)d->scale);
    const qspan x = qspan_of(d->x, d->rows, d->cols, d->ldx, 2), q = qspan_of(d->q, d->rows, d->cols, d->ldq, 1);
    const qspan s = scale_span(d, *ld_scale);
    if (qspans_meet(q, x))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "q: %p (%" PRId64 " x %" PRId64 ", ldq %" PRId64 ") overlaps x (%p, ldx %" PRId64
                       "): the codes would overwrite the input (expected separate memory)",
                       d->q, d->rows, d->cols, d->ldq, d->x, d->ldx);
    if (qspans_meet(s, x) || qspans_meet(s, q))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "scale: %p overlaps %s: the scales would overwrite %s (expected separate memory)",
                       (void *)d->scale, qspans_meet(s, x) ? "x" : "q", qspans_meet(s, x) ? "the input" : "the codes");
    return TK_SUCCESS;
}

tk_status tk_quantize_fp8(tk_handle h, const tk_quantize_desc *d, void *stream)
{
    if (!h)
        return tk_fail(NULL, TK_ERR_INVALID_VALUE, "h: handle is NULL (expected one from tk_create)");
    tk_call_begin(h);
    tk_quantize_desc desc;
    int64_t ld_scale = 0;
    tk_status st = tk_read_versioned(h, "d", "tk_quantize_desc", "TK_QUANTIZE_DESC_INIT", d, &desc, sizeof desc,
                                     TK_QDESC_V1_SIZE);
    if (st || (st = check(h, &desc, &ld_scale)))
        return st;
    if (desc.rows == 0 || desc.cols == 0)
        return TK_SUCCESS;
    if ((st = tk_device_ready(h)))
        return st;
    const tk_quant_args a = {
        .rows = desc.rows, .cols = desc.cols, .x = desc.x, .ldx = desc.ldx, .q = desc.q, .ldq = desc.ldq,
        .scale = desc.scale, .ld_scale = ld_scale, .format = desc.format, .mode = desc.mode,
        .vec_x = (uintptr_t)desc.x % 16 == 0 && desc.ldx % 8 == 0,
        .vec_q = (uintptr_t)desc.q % 8 == 0 && desc.ldq % 8 == 0,
        .sm_count = h->dev.sm_count > 0 ? h->dev.sm_count : 1,
    };
    char why[TK_MSG_LEN];
    if ((st = tk_launch_quantize_fp8(&a, (cudaStream_t)stream, why, sizeof why)))
        return tk_fail(h, st, "%s", why);
    return TK_SUCCESS;
}
