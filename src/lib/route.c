/* route.c - how auto-dispatch runs a problem whose operands the fast kernels
 * cannot take as they are.
 *
 * The TMA kernels (k30, k31) need A and B 16-byte aligned with leading
 * dimensions that are multiples of 8 elements; the mma.sync kernels (k20,
 * k21) need the same and C aligned to pairs. A view into a larger tensor, an
 * odd K or a vocabulary of 50257 breaks that, and only k01_naive (about 5
 * TFLOP/s) would be left. So auto-dispatch may run the problem on copies:
 * each misaligned operand repacked into the handle's workspace with its
 * leading dimension rounded up to 8 elements, and, where the best kernel for
 * that still refuses C, C staged there too (copied in when beta != 0, out
 * after the product). A repack moves each byte twice at copy bandwidth: about
 * 0.1 ms for a 134 MB operand on an H100, against about 2 ms of math for the
 * 8191 x 8193 x 8190 product it makes 4x faster than cuBLAS.
 *
 * Candidates, in order: as is; the misaligned A and B packed; that plus C
 * staged. The highest auto_rank wins, the earlier (fewer copies) on a tie.
 * The copies in are one launch (tk_launch_copy_2d_jobs: 255 x 257 x 129 took
 * 16.7 us with a launch per operand, 12.8 us with one, on the H100); C's copy
 * out is a second. Problems under TK_ROUTE_TINY_FLOP (2 M N K < 2^22) take no
 * copies: each launch costs about 3-4 us at these sizes, and on the H100
 * k01_naive took 9.6 us at 64 x 64 x 65 against 9.5 us for k31 on padded
 * copies before the copies are counted, but 15.6 us at 128^3 (k31 10.0) and
 * 27.8 us at 256^3 (k31 11.5): the crossover is near 2 M N K = 2^22.
 *
 * FP8 operands (a->fp8) take the same route with one more reason to copy:
 * the FP8 kernels (k31's, k45's, k36_swap_*'s instances) read A and B
 * K-major alone (op_a N, op_b T: FP8 wgmma has no other layout), through
 * TMA (16-byte aligned, lines of a multiple of 16 bytes). Their copies are
 * K-major: op(A) as M x K rows, op(B)^T as N x K rows, lines rounded up to
 * 16 codes; an operand stored the other way is transposed on the way
 * (tk_launch_transpose_2d_jobs: one launch for A and B, through shared
 * memory), a K-major misaligned one repacked in byte units, a K-major
 * aligned one used in place; the run is then op_a N, op_b T. The scales
 * belong to op(A) and op(B), which the copies do not change, so tk_fp8_args
 * passes through as it is (a column-major call's operands, formats and
 * scales were swapped before: fp8.c). The padding past K of a copied line
 * is left unwritten: the kernels' tensor maps are K wide (k30_fill_params),
 * so TMA never reads it. A transposed copy costs what a repack does, one
 * read and one write of the operand: about 0.01 ms for a 4096 x 4096 FP8
 * operand at 3 TB/s, beside the 0.1 ms of a 4096^3 product at 1200 TFLOP/s
 * (k01_naive: 0.6 TFLOP/s).
 * The planning below is pure (no GPU): tests check it on the CPU. */
#include <stdio.h>
#include <inttypes.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "internal.h"

/* A repacked line is rounded up to this many elements: 16 bytes of bf16,
 * 16 of FP8 codes. */
#define TK_ROUTE_ALIGN 8
#define TK_ROUTE_ALIGN_FP8 16

static size_t round_up(size_t x, size_t q) { return (x + q - 1) / q * q; }

/* off + rows lines of line_bytes, rounded up to 256 bytes, or SIZE_MAX when
 * that does not fit in size_t: argument checks bound each operand's span by
 * INT64_MAX bytes, but its copy's lines, rounded up to 8 elements (16 for
 * FP8), can be 16 times longer (lines of one element; a transposed copy's
 * lines are the other side's). cudaMalloc refuses SIZE_MAX, so such
 * a route fails for want of workspace instead of running on a wrapped one. */
static size_t add_copy(size_t off, int64_t rows, size_t line_bytes)
{
    const size_t cap = SIZE_MAX - 255;   /* round_up of up to cap cannot wrap */
    if (off > cap || (line_bytes && (size_t)rows > (cap - off) / line_bytes))
        return SIZE_MAX;
    return round_up(off + (size_t)rows * line_bytes, 256);
}

int tk_route_tiny(const tk_args *a)
{
    return 2.0 * (double)a->m * (double)a->n * (double)a->k < TK_ROUTE_TINY_FLOP;
}

int tk_route_aligned(const void *p, int64_t ld, size_t elem_bytes)
{
    return ((uint64_t)ld * elem_bytes) % 16 == 0 && (uintptr_t)p % 16 == 0;
}

/* Stored rows and columns of A, B and C in the normalized problem. */
static void stored_dims(const tk_args *a, int which, int64_t *rows, int64_t *cols)
{
    if (which == 0) {
        *rows = a->op_a == TK_OP_N ? a->m : a->k;
        *cols = a->op_a == TK_OP_N ? a->k : a->m;
    } else if (which == 1) {
        *rows = a->op_b == TK_OP_N ? a->k : a->n;
        *cols = a->op_b == TK_OP_N ? a->n : a->k;
    } else {
        *rows = a->m;
        *cols = a->n;
    }
}

/* Whether operand w (0 A, 1 B) of an FP8 problem is stored the way the
 * FP8 kernels do not read (not K-major), so its copy is transposed. */
static int fp8_transposed(const tk_args *a, int w)
{
    return a->fp8 && (w == 0 ? a->op_a != TK_OP_N : a->op_b != TK_OP_T);
}

void tk_route_plan(const tk_args *a, int pack_ab, int stage_c, tk_route *r)
{
    memset(r, 0, sizeof *r);
    r->run = *a;
    size_t cb = a->c_type == TK_F32 ? 4 : 2;
    size_t off = 0;
    for (int w = 0; w < 3; w++) {
        const void *p = w == 0 ? a->a : w == 1 ? a->b : a->c;
        int64_t ld = w == 0 ? a->lda : w == 1 ? a->ldb : a->ldc;
        const int fp8 = w < 2 && a->fp8;
        size_t esz = w == 2 ? cb : fp8 ? 1 : 2;
        int want = w < 2 ? pack_ab : stage_c;
        int tr = w < 2 && fp8_transposed(a, w);
        if (!want || (!tr && tk_route_aligned(p, ld, esz)))
            continue;
        int64_t rows, cols;
        stored_dims(a, w, &rows, &cols);
        if (tr) {   /* the copy holds the stored matrix transposed */
            int64_t t = rows;
            rows = cols;
            cols = t;
        }
        int64_t ldp = (int64_t)round_up((size_t)cols, fp8 ? TK_ROUTE_ALIGN_FP8 : TK_ROUTE_ALIGN);
        r->copy[w] = 1;
        r->ld[w] = ldp;
        r->off[w] = off;
        off = add_copy(off, rows, (size_t)ldp * esz);
        /* Until bound, a copied operand's pointer is NULL: support checks
         * then judge its (aligned) leading dimension alone. */
        if (w == 0) { r->run.a = NULL; r->run.lda = ldp; }
        if (w == 1) { r->run.b = NULL; r->run.ldb = ldp; }
        if (w == 2) { r->run.c = NULL; r->run.ldc = ldp; }
        /* a transposed FP8 copy is K-major: op(A) M x K, op(B)^T N x K */
        if (tr && w == 0) { r->transposed[0] = 1; r->run.op_a = TK_OP_N; }
        if (tr && w == 1) { r->transposed[1] = 1; r->run.op_b = TK_OP_T; }
    }
    r->bytes = off;
}

void tk_route_bind(tk_route *r, void *ws)
{
    char *base = ws;
    if (r->copy[0]) r->run.a = base + r->off[0];
    if (r->copy[1]) r->run.b = base + r->off[1];
    if (r->copy[2]) r->run.c = base + r->off[2];
}

void tk_route_name(const tk_route *r, char *buf, size_t len)
{
    static const char *what[3] = { "A", "B", "C" };
    int n = snprintf(buf, len, "%s", r->k ? r->k->name : "(none)");
    int first = 1;
    for (int w = 0; w < 3 && n >= 0 && (size_t)n < len; w++)
        if (r->copy[w]) {
            n += snprintf(buf + n, len - (size_t)n, "%s%s%s", first ? " (copies " : ", ", what[w],
                          w < 2 && r->transposed[w] ? "^T" : "");
            first = 0;
        }
    if (!first && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ")");
}

unsigned tk_route_copies(const tk_route *r, tk_layout layout)
{
    /* normalization swapped A and B of a column-major problem */
    const unsigned a = layout == TK_COL_MAJOR ? 2 : 1, b = layout == TK_COL_MAJOR ? 1 : 2;
    return (r->copy[0] ? a : 0) | (r->copy[1] ? b : 0) | (r->copy[2] ? 4 : 0);
}

tk_status tk_route_copy_in(tk_handle h, tk_route *r, const tk_args *a, void *ws, cudaStream_t stream)
{
    tk_status st;
    tk_route_bind(r, ws);
    char why[TK_MSG_LEN] = "";
    size_t cb = a->c_type == TK_F32 ? 4 : 2;
    tk_copy_job job[TK_COPY_JOBS], tjob[TK_TRANSPOSE_JOBS];
    int n = 0, nt = 0;
    for (int w = 0; w < 3; w++) {
        if (!r->copy[w] || (w == 2 && a->beta == 0.0f))   /* C is read only when beta != 0 */
            continue;
        const int tr = w < 2 && r->transposed[w];
        tk_copy_job *j = tr ? &tjob[nt++] : &job[n++];
        stored_dims(a, w, &j->rows, &j->cols);   /* the source's: a transposing job swaps them */
        j->src = w == 0 ? a->a : w == 1 ? a->b : a->c;
        j->dst = w == 0 ? (void *)r->run.a : w == 1 ? (void *)r->run.b : r->run.c;
        j->lds = w == 0 ? a->lda : w == 1 ? a->ldb : a->ldc;
        j->ldd = r->ld[w];
        j->elem_bytes = w == 2 ? cb : a->fp8 ? 1 : 2;
    }
    /* One launch for the plain copies, one for the transposed (FP8). */
    st = n ? tk_launch_copy_2d_jobs(job, n, stream, why, sizeof why) : TK_SUCCESS;
    if (!st && nt)
        st = tk_launch_transpose_2d_jobs(tjob, nt, stream, why, sizeof why);
    return st ? tk_fail(h, st, "auto: copying %s: %s", nt ? "an operand" : "a misaligned operand", why)
              : TK_SUCCESS;
}

tk_status tk_route_copy_out(tk_handle h, const tk_route *r, const tk_args *a, cudaStream_t stream)
{
    if (!r->copy[2])
        return TK_SUCCESS;
    char why[TK_MSG_LEN] = "";
    tk_status st = tk_launch_copy_2d(a->c, a->ldc, r->run.c, r->ld[2], a->m, a->n, a->c_type == TK_F32 ? 4 : 2,
                                     stream, why, sizeof why);
    return st ? tk_fail(h, st, "auto: copying C back: %s", why) : TK_SUCCESS;
}
