/* test_grouped.c - many products in one call on the GPU (issue 38:
 * tk_gemm_run with group_kind set; tilekit.h, tk_group_kind), each against
 * an fp64 CPU reference of the same bf16 inputs, product by product.
 *
 * Every case runs on auto-dispatch (kernel NULL, "auto" below) and on
 * every registry kernel: there is no tk_kernel_supports for grouped
 * problems, so the call itself says whether a kernel takes the case;
 * TK_ERR_NOT_SUPPORTED and TK_ERR_ARCH_MISMATCH skip it (one line per
 * case says how many did, not counted), any other status but TK_SUCCESS fails it. auto and k01_naive
 * (the fallback, which runs every form) must run every case, cuBLAS every
 * batched one. One counted test per case and kernel that ran.
 *
 * The checks of a run: C is NaN-poisoned before it when beta == 0 (bf16
 * 0x7FC0, fp32 0x7FC00000; C is then never read) and random when beta != 0;
 * every element of C a valid group covers must be within the tolerance of
 * test_verify's (lab_compare.c: relative to sum |a||b|, fp32 accumulation,
 * bf16 rounding of the output) of that group's reference, and every other
 * element of the C buffer (rows of ROWS past offs[count-1], rows of MASKED
 * past offs[i], a bad group's C or rows, C's padding and the gaps between
 * matrices) must keep its bits. *group_error must be 1 after bad offsets
 * and 0 otherwise; cases with bad offsets run with group_error NULL too.
 * Where decreasing offsets make two valid groups share rows, an element
 * there may hold either group's result (tilekit.h).
 *
 * Cases of odd seeds go through tk_gemm_batched or tk_gemm_grouped, the
 * others through tk_gemm_run.
 *
 * Last, one ROWS call per kernel that runs it is captured into a CUDA graph
 * (cudaStreamCaptureModeGlobal: a host synchronisation in the call would
 * fail the capture) and replayed twice: the same bits as the direct call.
 *
 *   build/tests/gpu_test_grouped [name-substring]          e.g. ROWS, MASKED, "bad offs"
 *   TK_GROUPED_KERNELS=auto,k01_naive build/tests/gpu_test_grouped
 * Default: auto and every registry kernel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lab/lab.h"
#include "../host/check.h"

#define MAX_KERNELS 64
#define POISON_F32 0x7fc00000u
#define POISON_BF16 0x7fc0u
#define SHOW 5   /* mismatches printed per run */

/* ---- a case: one call's problem, with its offsets ---- */
typedef struct gcase {
    char name[160];
    int kind;                    /* tk_group_kind */
    tk_layout layout;            /* TK_COL_MAJOR for BATCHED alone */
    tk_op op_a, op_b;
    int64_t m, n, k;             /* ROWS: M of all groups; K: K of all groups; else each product's */
    int count;
    int32_t offs[2048];          /* ROWS, K: cumulative end offsets; MASKED: row counts */
    int pad;                     /* padded leading dimensions, gaps between matrices */
    float alpha, beta;
    tk_dtype c_type;
    int bcast_a;                 /* BATCHED: stride_a 0, one A for all */
    int bad;                     /* some offsets are bad: *group_error must become 1 */
    int null_error;              /* group_error NULL */
    uint64_t seed;
} gcase;

/* The arrays of a case: leading dimensions, one matrix's elements (lines
 * times ld, plus a gap when padded), the strides passed and the matrices
 * each buffer holds. */
typedef struct geom {
    int64_t lda, ldb, ldc;
    int64_t stride_a, stride_b, stride_c;
    int64_t a_elems, b_elems, c_elems;   /* whole buffers */
    size_t cb;                           /* bytes of a C element */
} geom;

/* A valid group's part of the result: C at c_off (elements), rows x n,
 * reduced over kk, with the reference's values and sum |a||b| (rows x n,
 * logical row-major). */
typedef struct region {
    int g;
    int64_t c_off, rows, kk;
    double *want, *s;
} region;

/* The inputs and reference of the case being run. */
static struct {
    gcase c;
    geom g;
    uint16_t *a, *b;             /* host */
    void *c0;                    /* host: C before the call */
    void *got;                   /* host: C read back */
    unsigned char *covered, *ok; /* per C element */
    region *reg;
    int nreg;
    void *da, *db, *dc;          /* device */
    int32_t *doffs, *derr;
} cur;

static tk_handle h;
static cudaStream_t stream;
static const char *kernels[MAX_KERNELS];   /* "auto" for auto-dispatch */
static int nkernels;
static const char *cur_kernel;
static tk_status cur_status;

static const char *kind_str(int kind)
{
    return kind == TK_GROUP_BATCHED ? "BATCHED" : kind == TK_GROUP_ROWS ? "ROWS" : kind == TK_GROUP_K ? "K" : "MASKED";
}

/* Stored lines and leading dimension of an r x c op(X) in layout. */
static int64_t lines_ld(tk_layout l, tk_op op, int64_t r, int64_t c, int pad, int64_t *ld)
{
    const int64_t sr = op == TK_OP_N ? r : c, sc = op == TK_OP_N ? c : r;
    *ld = tk_lab_ld(l == TK_ROW_MAJOR ? sc : sr, pad);
    return l == TK_ROW_MAJOR ? sr : sc;
}

static void geom_of(const gcase *c, geom *g)
{
    const int per_a = (c->kind == TK_GROUP_BATCHED || c->kind == TK_GROUP_MASKED) && !c->bcast_a;
    const int per_b = c->kind != TK_GROUP_K, per_c = c->kind != TK_GROUP_ROWS;
    const int64_t gap = c->pad ? 8 : 0;
    const int64_t a1 = lines_ld(c->layout, c->op_a, c->m, c->k, c->pad, &g->lda) * g->lda + gap;
    const int64_t b1 = lines_ld(c->layout, c->op_b, c->k, c->n, c->pad, &g->ldb) * g->ldb + gap;
    const int64_t c1 = lines_ld(c->layout, TK_OP_N, c->m, c->n, c->pad, &g->ldc) * g->ldc + gap;
    g->stride_a = per_a ? a1 : 0;
    g->stride_b = per_b ? b1 : 0;
    g->stride_c = per_c ? c1 : 0;
    g->a_elems = a1 * (per_a ? c->count : 1);
    g->b_elems = b1 * (per_b ? c->count : 1);
    g->c_elems = c1 * (per_c ? c->count : 1);
    g->cb = c->c_type == TK_F32 ? 4 : 2;
}

/* Group g's range by tilekit.h's rule, written here again (not group.h's)
 * so the test does not grade the library by its own code: 1 if valid. */
static int group_range(const gcase *c, int g, int64_t *lo, int64_t *hi)
{
    *lo = 0;
    *hi = c->m;
    if (c->kind == TK_GROUP_BATCHED)
        return 1;
    const int64_t total = c->kind == TK_GROUP_K ? c->k : c->m;
    *hi = c->offs[g];
    if (c->kind != TK_GROUP_MASKED && g > 0)
        *lo = c->offs[g - 1];
    return 0 <= *lo && *lo <= *hi && *hi <= total;
}

/* The host problem of valid group g over [lo, hi), pointers into the
 * host arrays; *c_off: where its C starts in the C buffer. */
static tk_gemm_problem group_problem(int g, int64_t lo, int64_t hi, int64_t *c_off)
{
    const gcase *c = &cur.c;
    const geom *q = &cur.g;
    tk_gemm_problem p = { c->layout, c->op_a, c->op_b, c->m, c->n, c->k, c->alpha, c->beta, NULL, q->lda, NULL, q->ldb,
                          NULL, q->ldc, c->c_type };
    int64_t a = g * q->stride_a, b = g * q->stride_b;
    *c_off = g * q->stride_c;
    if (c->kind == TK_GROUP_ROWS) {   /* rows lo..hi of op(A) and C */
        a += c->op_a == TK_OP_N ? lo * q->lda : lo;
        *c_off += lo * q->ldc;
        p.m = hi - lo;
    } else if (c->kind == TK_GROUP_K) {   /* columns lo..hi of op(A), rows of op(B) */
        a += c->op_a == TK_OP_N ? lo : lo * q->lda;
        b += c->op_b == TK_OP_N ? lo * q->ldb : lo;
        p.k = hi - lo;
    } else {
        p.m = hi;
    }
    p.a = cur.a + a;
    p.b = cur.b + b;
    p.c = (char *)cur.c0 + *c_off * (int64_t)q->cb;
    return p;
}

static void free_case(void)
{
    for (int i = 0; i < cur.nreg; i++) {
        free(cur.reg[i].want);
        free(cur.reg[i].s);
    }
    free(cur.reg);
    free(cur.a);
    free(cur.b);
    free(cur.c0);
    free(cur.got);
    free(cur.covered);
    free(cur.ok);
    cudaFree(cur.da);
    cudaFree(cur.db);
    cudaFree(cur.dc);
    cudaFree(cur.doffs);
    cudaFree(cur.derr);
    memset(&cur, 0, sizeof cur);
}

/* Inputs on host and device, C's initial contents, the references of the
 * valid groups. 0 when ready. */
static int setup_case(const gcase *c)
{
    memset(&cur, 0, sizeof cur);
    cur.c = *c;
    geom_of(c, &cur.g);
    const geom *q = &cur.g;
    const size_t cbytes = (size_t)q->c_elems * q->cb;
    /* A and B hold no element where K is 0: one still, so no pointer is NULL */
    const size_t abytes = (size_t)(q->a_elems > 0 ? q->a_elems : 1) * 2;
    const size_t bbytes = (size_t)(q->b_elems > 0 ? q->b_elems : 1) * 2;
    cur.a = malloc(abytes);
    cur.b = malloc(bbytes);
    cur.c0 = malloc(cbytes);
    cur.got = malloc(cbytes);
    cur.covered = calloc((size_t)q->c_elems, 1);
    cur.ok = calloc((size_t)q->c_elems, 1);
    cur.reg = calloc((size_t)c->count, sizeof *cur.reg);
    if (!cur.a || !cur.b || !cur.c0 || !cur.got || !cur.covered || !cur.ok || !cur.reg)
        return 1;
    tk_lab_fill(cur.a, TK_BF16, (size_t)q->a_elems, c->seed * 4 + 1);
    tk_lab_fill(cur.b, TK_BF16, (size_t)q->b_elems, c->seed * 4 + 2);
    if (c->beta != 0.0f)
        tk_lab_fill(cur.c0, c->c_type, (size_t)q->c_elems, c->seed * 4 + 3);
    else
        for (int64_t i = 0; i < q->c_elems; i++) {
            if (c->c_type == TK_F32)
                ((uint32_t *)cur.c0)[i] = POISON_F32;
            else
                ((uint16_t *)cur.c0)[i] = POISON_BF16;
        }
    for (int g = 0; g < c->count; g++) {
        int64_t lo, hi;
        if (!group_range(c, g, &lo, &hi))
            continue;
        region *r = &cur.reg[cur.nreg++];
        tk_gemm_problem p = group_problem(g, lo, hi, &r->c_off);
        r->g = g;
        r->rows = p.m;
        r->kk = p.k;
        const size_t elems = (size_t)(p.m * p.n > 0 ? p.m * p.n : 1);
        r->want = malloc(elems * sizeof(double));
        r->s = malloc(elems * sizeof(double));
        if (!r->want || !r->s)
            return 1;
        tk_lab_ref_full(&p, r->want, r->s);
    }
    const size_t offs_bytes = (size_t)c->count * sizeof(int32_t);
    if (cudaMalloc(&cur.da, abytes) || cudaMalloc(&cur.db, bbytes) || cudaMalloc(&cur.dc, cbytes) ||
        cudaMalloc((void **)&cur.doffs, offs_bytes) || cudaMalloc((void **)&cur.derr, sizeof(int32_t)) ||
        cudaMemcpy(cur.da, cur.a, abytes, cudaMemcpyHostToDevice) ||
        cudaMemcpy(cur.db, cur.b, bbytes, cudaMemcpyHostToDevice) ||
        cudaMemcpy(cur.doffs, c->offs, offs_bytes, cudaMemcpyHostToDevice))
        return 1;
    return 0;
}

/* Which entry point a case goes through: tk_gemm_run, or for cases of an
 * odd seed the kind's own function (tk_gemm_batched, tk_gemm_grouped). */
static const char *entry(const gcase *c)
{
    return !(c->seed & 1) ? "tk_gemm_run" : c->kind == TK_GROUP_BATCHED ? "tk_gemm_batched" : "tk_gemm_grouped";
}

/* The call of the current case on kernel (NULL: auto) on stream s. */
static tk_status call(const char *kernel, cudaStream_t s)
{
    const gcase *c = &cur.c;
    tk_gemm_desc d = TK_GEMM_DESC_INIT;
    d.problem = (tk_gemm_problem){ c->layout, c->op_a, c->op_b, c->m, c->n, c->k, c->alpha, c->beta, cur.da,
                                   cur.g.lda, cur.db, cur.g.ldb, cur.dc, cur.g.ldc, c->c_type };
    d.group_kind = c->kind;
    d.count = c->count;
    d.stride_a = cur.g.stride_a;
    d.stride_b = cur.g.stride_b;
    d.stride_c = cur.g.stride_c;
    if (c->kind != TK_GROUP_BATCHED) {
        d.offs = cur.doffs;
        d.group_error = c->null_error ? NULL : cur.derr;
    }
    if (!(c->seed & 1))
        return tk_gemm_run(h, &d, kernel, s);
    if (c->kind == TK_GROUP_BATCHED)
        return tk_gemm_batched(h, &d.problem, d.count, d.stride_a, d.stride_b, d.stride_c, kernel, s);
    return tk_gemm_grouped(h, &d.problem, (tk_group_kind)d.group_kind, d.count, d.offs, d.stride_a, d.stride_b,
                           d.stride_c, d.group_error, kernel, s);
}

/* C set back to its initial contents and the error flag to 0, on s. */
static int reset_c(cudaStream_t s)
{
    const int32_t zero = 0;
    return cudaMemcpyAsync(cur.dc, cur.c0, (size_t)cur.g.c_elems * cur.g.cb, cudaMemcpyHostToDevice, s) ||
           cudaMemcpyAsync(cur.derr, &zero, sizeof zero, cudaMemcpyHostToDevice, s) || cudaStreamSynchronize(s);
}

static int read_c(void *dst, cudaStream_t s)
{
    return cudaMemcpyAsync(dst, cur.dc, (size_t)cur.g.c_elems * cur.g.cb, cudaMemcpyDeviceToHost, s) ||
           cudaStreamSynchronize(s);
}

/* "C matrix q, row i, col j" of buffer element idx (padding: j >= n or i >= m). */
static void where(int64_t idx, char *buf, size_t len)
{
    const geom *q = &cur.g;
    int64_t mat = 0, rem = idx;
    if (q->stride_c) {
        mat = idx / q->stride_c;
        rem = idx % q->stride_c;
    }
    const int64_t line = rem / q->ldc, at = rem % q->ldc;
    const int row = cur.c.layout == TK_ROW_MAJOR;
    snprintf(buf, len, "C %lld, row %lld, col %lld", (long long)mat, (long long)(row ? line : at),
             (long long)(row ? at : line));
}

static uint32_t bits_at(const void *c, int64_t idx)
{
    return cur.g.cb == 4 ? ((const uint32_t *)c)[idx] : ((const uint16_t *)c)[idx];
}

/* The run's C against the references and the initial bits; CHECK fails. */
static void check_c(const char *label)
{
    const gcase *c = &cur.c;
    const geom *q = &cur.g;
    memset(cur.covered, 0, (size_t)q->c_elems);
    memset(cur.ok, 0, (size_t)q->c_elems);
    for (int r = 0; r < cur.nreg; r++) {
        const region *g = &cur.reg[r];
        for (int64_t i = 0; i < g->rows; i++)
            for (int64_t j = 0; j < c->n; j++) {
                const int64_t idx = g->c_off + tk_lab_index(c->layout, q->ldc, i, j);
                const double want = g->want[i * c->n + j], got = tk_lab_load(cur.got, c->c_type, idx);
                const double c0 = c->beta != 0.0f ? tk_lab_load(cur.c0, c->c_type, idx) : 0.0;
                const double tol =
                    tk_lab_tolerance(g->kk, c->alpha, c->beta, g->s[i * c->n + j], c0, want, c->c_type, 1);
                cur.covered[idx] = 1;
                if (isfinite(got) && fabs(got - want) <= tol)
                    cur.ok[idx] = 1;
            }
    }
    int64_t wrong = 0, stray = 0;
    for (int64_t idx = 0; idx < q->c_elems; idx++) {
        char at[96];
        if (cur.covered[idx] && !cur.ok[idx]) {
            if (wrong++ < SHOW) {
                where(idx, at, sizeof at);
                printf("     %s: %s: got %.8g, no group's reference within tolerance\n", label, at,
                       tk_lab_load(cur.got, c->c_type, idx));
            }
        } else if (!cur.covered[idx] && bits_at(cur.got, idx) != bits_at(cur.c0, idx)) {
            if (stray++ < SHOW) {
                where(idx, at, sizeof at);
                printf("     %s: %s: written (0x%x, was 0x%x), but no valid group covers it\n", label, at,
                       bits_at(cur.got, idx), bits_at(cur.c0, idx));
            }
        }
    }
    CHECK(wrong == 0, "%lld elements of C off the reference (through %s)", (long long)wrong, entry(c));
    CHECK(stray == 0, "%lld elements of C outside every valid group written", (long long)stray);
    /* the worst covered element, printed on failure for scale */
    if (wrong) {
        for (int r = 0; r < cur.nreg; r++) {
            const region *g = &cur.reg[r];
            for (int64_t i = 0; i < g->rows; i++)
                for (int64_t j = 0; j < c->n; j++) {
                    const int64_t idx = g->c_off + tk_lab_index(c->layout, q->ldc, i, j);
                    if (!cur.ok[idx]) {
                        printf("     first bad: group %d, row %lld, col %lld: got %.8g, want %.8g (K %lld)\n", g->g,
                               (long long)i, (long long)j, tk_lab_load(cur.got, c->c_type, idx), g->want[i * c->n + j],
                               (long long)g->kk);
                        return;
                    }
                }
        }
    }
}

/* ---- the counted test of one case on one kernel ---- */
static void check_run(void)
{
    CHECK(cur_status == TK_SUCCESS, "%s through %s: %s (%s)", cur_kernel, entry(&cur.c), tk_status_string(cur_status),
          tk_last_error(h));
    if (cur_status != TK_SUCCESS)
        return;
    cudaError_t e = cudaStreamSynchronize(stream);
    CHECK(e == cudaSuccess, "after the call: %s", cudaGetErrorString(e));
    if (e != cudaSuccess || read_c(cur.got, stream)) {
        CHECK(0, "reading C back: %s", cudaGetErrorString(cudaGetLastError()));
        return;
    }
    check_c(cur_kernel);
    if (cur.c.kind != TK_GROUP_BATCHED && !cur.c.null_error) {
        int32_t err = -1;
        CHECK(cudaMemcpy(&err, cur.derr, sizeof err, cudaMemcpyDeviceToHost) == cudaSuccess, "reading group_error");
        CHECK(err == cur.c.bad, "*group_error is %d after %s offsets (want %d)", err, cur.c.bad ? "bad" : "good",
              cur.c.bad);
    }
}

static void setup_failed(void) { CHECK(0, "setup: out of host or device memory, or a CUDA copy failed"); }

/* Whether kernel may skip the case: the fallback and auto run every form,
 * cuBLAS every batched product. */
static int may_skip(const char *kernel, int kind)
{
    if (!strcmp(kernel, "auto") || !strcmp(kernel, "k01_naive"))
        return 0;
    return strcmp(kernel, "cublas") || kind != TK_GROUP_BATCHED;
}

/* The counted test's name of case c on kernel i. */
static void test_name(const gcase *c, int i, char *buf, size_t len)
{
    snprintf(buf, len, "%s / %s", c->name, kernels[i]);
}

/* Whether the runner's filter keeps any kernel's test of case c. */
static int case_wanted(const gcase *c)
{
    for (int i = 0; i < nkernels; i++) {
        char name[220];
        test_name(c, i, name, sizeof name);
        if (tk_test_wanted(name))
            return 1;
    }
    return 0;
}

/* The kernels that refused the current case: how many, the first's reason. */
static int nskipped;
static char first_skip[TK_LAB_MSG_LEN + 64];

/* Case c on kernel i, its C reset first: 1 when it ran (counted: its
 * status in cur_status), 0 when filtered out or skipped (tallied). */
static int call_kernel(const gcase *c, int i)
{
    char name[220];
    test_name(c, i, name, sizeof name);
    if (!tk_test_wanted(name))
        return 0;
    cur_kernel = kernels[i];
    cur_status = reset_c(stream) ? TK_ERR_CUDA : call(strcmp(kernels[i], "auto") ? kernels[i] : NULL, stream);
    if ((cur_status == TK_ERR_NOT_SUPPORTED || cur_status == TK_ERR_ARCH_MISMATCH) && may_skip(kernels[i], c->kind)) {
        if (!nskipped++)
            snprintf(first_skip, sizeof first_skip, "%s", tk_last_error(h));
        return 0;
    }
    return 1;
}

/* One line for the kernels that refused case c (not counted). */
static void print_skips(const gcase *c)
{
    if (nskipped)
        printf("skip %s: %d kernel%s refused it (%s)\n", c->name, nskipped, nskipped > 1 ? "s" : "", first_skip);
    nskipped = 0;
}

/* One case on every kernel. */
static void run_case(const gcase *c)
{
    if (!case_wanted(c))
        return;
    if (setup_case(c)) {
        tk_run_test(c->name, setup_failed);
        free_case();
        return;
    }
    for (int i = 0; i < nkernels; i++) {
        char name[220];
        test_name(c, i, name, sizeof name);
        if (call_kernel(c, i))
            tk_run_test(name, check_run);
    }
    print_skips(c);
    free_case();
}

/* ---- the cases ---- */
/* A case as a table row: kind, name, M, N, K, count, group sizes, ops
 * ("NT": op_a N, op_b T; a third letter 'c': column-major), C's type,
 * alpha, beta and flags (below). */
typedef struct spec {
    int kind;
    const char *name;
    int64_t m, n, k;             /* as in gcase; with RANDOM, M (ROWS) or K is the sizes' sum */
    int count;
    const int32_t *sizes;        /* count sizes: ROWS rows, K K, MASKED rows (NULL for BATCHED) */
    const char *ops;
    tk_dtype c_type;
    float alpha, beta;
    unsigned flags;
} spec;

enum {
    PAD = 1,                     /* padded leading dimensions, gaps between matrices */
    BCAST_A = 2,                 /* BATCHED: stride_a 0 */
    RANDOM = 4,                  /* sizes NULL: each 0..3; ROWS gets 5 rows after them */
    BAD = 8,                     /* sizes are the offsets as they are, some bad: run with group_error and NULL */
};

static const int32_t tiles[] = { 1, 7, 63, 65, 129, 300 };   /* no multiple of a tile */
static const int32_t empty_ends[] = { 0, 0, 17, 0, 33, 0 };   /* and 14 rows of 64 after them */
static const int32_t ones[] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
static const int32_t moe[] = { 180, 3, 97, 0, 64, 121, 1, 46 };   /* 512 tokens routed unevenly to 8 experts */
static const int32_t k_empty_first[] = { 0, 7, 64, 0, 129 };
static const int32_t k_empty_last[] = { 13, 0, 31, 0 };
static const int32_t k_odd[] = { 1, 9, 17, 33 };
static const int32_t none[] = { 0, 0, 0 };
static const int32_t rows6[] = { 0, 64, 1, 33, 64, 0 };
static const int32_t rows4[] = { 17, 0, 5, 16 };
static const int32_t just100[] = { 100 };
static const int32_t just50[] = { 50 };
/* bad offsets: which groups are bad is said beside each */
static const int32_t decreasing[] = { 10, 30, 20, 20 };   /* 2 [30, 20); 3 empty */
static const int32_t overlap[] = { 10, 30, 20, 35 };      /* 2 bad; 3 [20, 35) shares rows 20..29 with 1 */
static const int32_t past[] = { 8, 50, 50 };              /* 1 and 2 end past M 40 */
static const int32_t negative[] = { 8, -4, 16, 24 };      /* 1 and 2; 3 valid after them */
static const int32_t first_negative[] = { -1, 8, 16 };    /* 0 and 1 */
static const int32_t k_decreasing[] = { 8, 4, 12 };       /* 1 */
static const int32_t k_past[] = { 8, 20 };                /* 1 ends past K 12 */
static const int32_t k_negative[] = { -2, 6, 12 };        /* 0 and 1 */
static const int32_t masked_bad[] = { 5, -1, 70, 64 };    /* 1 and 2 */

static const spec specs[] = {
    { TK_GROUP_BATCHED, "3 x 65x63x40", 65, 63, 40, 3, NULL, "NN", TK_F32, 1.0f, 0.0f, 0 },
    { TK_GROUP_BATCHED, "5 x 33x17x9", 33, 17, 9, 5, NULL, "NT", TK_BF16, 1.5f, 0.5f, PAD },
    { TK_GROUP_BATCHED, "4 x 64x48x31", 64, 48, 31, 4, NULL, "TNc", TK_F32, 1.0f, 0.0f, 0 },
    { TK_GROUP_BATCHED, "3 x 40x24x56", 40, 24, 56, 3, NULL, "NTc", TK_BF16, 1.0f, 0.5f, PAD },
    { TK_GROUP_BATCHED, "6 x 20x24x16, broadcast A", 20, 24, 16, 6, NULL, "NT", TK_BF16, 1.0f, 0.5f, BCAST_A },
    { TK_GROUP_BATCHED, "4 x 20x24x16, broadcast A", 20, 24, 16, 4, NULL, "NNc", TK_F32, -2.0f, 0.0f, BCAST_A },
    { TK_GROUP_BATCHED, "1 x 100x72x130", 100, 72, 130, 1, NULL, "TT", TK_F32, 0.5f, 0.5f, 0 },
    { TK_GROUP_BATCHED, "3 x 9x11x0 (K 0: C = beta C)", 9, 11, 0, 3, NULL, "NN", TK_F32, 1.0f, 0.5f, 0 },
    { TK_GROUP_BATCHED, "1100 x 3x5x7", 3, 5, 7, 1100, NULL, "NN", TK_BF16, 1.0f, 0.0f, 0 },
    /* ROWS: op_b T is nn.Linear's weights (B stored G x N x K), N the input gradient's (G x K x N) */
    { TK_GROUP_ROWS, "6 groups of 1..300 rows, K 72, N 40", 565, 40, 72, 6, tiles, "NT", TK_F32, 1.0f, 0.0f, 0 },
    { TK_GROUP_ROWS, "6 groups of 1..300 rows, K 37, N 41", 565, 41, 37, 6, tiles, "TN", TK_BF16, -1.5f, 0.5f, 0 },
    { TK_GROUP_ROWS, "empty groups first, between, last; 14 rows after them, K 40, N 24", 64, 24, 40, 6, empty_ends,
      "NT", TK_BF16, 1.0f, 0.0f, 0 },
    { TK_GROUP_ROWS, "empty groups, rows after them, K 33, N 20", 64, 20, 33, 6, empty_ends, "NN", TK_F32, 1.0f, 0.5f,
      PAD },
    { TK_GROUP_ROWS, "16 groups of one row, K 33, N 20", 16, 20, 33, 16, ones, "NN", TK_F32, 2.0f, 0.0f, 0 },
    { TK_GROUP_ROWS, "1 group of 100 rows, K 64, N 48", 100, 48, 64, 1, just100, "NT", TK_F32, 1.0f, 0.5f, 0 },
    { TK_GROUP_ROWS, "1100 groups of 0..3 rows, K 32, N 24", 0, 24, 32, 1100, NULL, "NT", TK_BF16, 1.0f, 0.0f, RANDOM },
    { TK_GROUP_ROWS, "MoE forward: 8 groups, 512 rows skewed, K 1024, N 768", 512, 768, 1024, 8, moe, "NT", TK_BF16,
      1.0f, 0.0f, 0 },
    { TK_GROUP_ROWS, "MoE input gradient: 8 groups, 512 rows skewed, K 768, N 1024", 512, 1024, 768, 8, moe, "NN",
      TK_F32, 1.0f, 0.5f, 0 },
    /* K: op_a T op_b N is the weight gradient (A stored tokens x M, B tokens x N) */
    { TK_GROUP_K, "weight gradient: K 0, 7, 64, 0, 129; M 40, N 33", 40, 33, 200, 5, k_empty_first, "TN", TK_F32,
      1.0f, 0.0f, 0 },
    { TK_GROUP_K, "weight gradient: K 13, 0, 31, 0; M 24, N 17", 24, 17, 44, 4, k_empty_last, "TN", TK_BF16, 1.0f,
      0.5f, PAD },
    { TK_GROUP_K, "4 groups of K 1, 9, 17, 33; M 24, N 40", 24, 40, 60, 4, k_odd, "NN", TK_BF16, 2.0f, 0.5f, 0 },
    { TK_GROUP_K, "1 group of K 100; M 16, N 16", 16, 16, 100, 1, just100, "TN", TK_F32, 1.0f, 0.0f, 0 },
    { TK_GROUP_K, "3 empty groups (K 0: C = beta C); M 9, N 11", 9, 11, 0, 3, none, "NN", TK_F32, 1.0f, 0.5f, 0 },
    { TK_GROUP_K, "3 empty groups (K 0: C = 0); M 9, N 11", 9, 11, 0, 3, none, "TN", TK_BF16, 1.0f, 0.0f, 0 },
    { TK_GROUP_K, "1100 groups of K 0..3; M 8, N 8", 8, 8, 0, 1100, NULL, "TN", TK_F32, 1.0f, 0.0f, RANDOM },
    { TK_GROUP_K, "MoE weight gradient: 8 groups, 512 tokens skewed, M 256, N 384", 256, 384, 512, 8, moe, "TN",
      TK_F32, 1.0f, 0.0f, 0 },
    /* MASKED: offs are each product's rows */
    { TK_GROUP_MASKED, "6 x 64x40x24, rows 0, 64, 1, 33, 64, 0", 64, 40, 24, 6, rows6, "NT", TK_BF16, 1.0f, 0.0f, 0 },
    { TK_GROUP_MASKED, "4 x 17x9x35, rows 17, 0, 5, 16", 17, 9, 35, 4, rows4, "NN", TK_F32, -1.0f, 0.5f, PAD },
    { TK_GROUP_MASKED, "1 x 128x96x64, rows 50", 128, 96, 64, 1, just50, "NT", TK_F32, 1.0f, 0.0f, 0 },
    { TK_GROUP_MASKED, "1100 x 3x16x24, rows 0..3", 3, 16, 24, 1100, NULL, "NT", TK_BF16, 1.0f, 0.5f, RANDOM },
    /* bad offsets: the call succeeds, a bad group keeps its C or rows, the
     * valid ones are right, *group_error is 1. Where groups share rows,
     * beta 0: with beta != 0 the group that writes second may read the
     * first's result as C. */
    { TK_GROUP_ROWS, "bad offs: 10, 30, 20, 20 of 40 rows", 40, 24, 40, 4, decreasing, "NT", TK_F32, 1.0f, 0.0f, BAD },
    { TK_GROUP_ROWS, "bad offs: 10, 30, 20, 35 of 40 rows (groups share rows)", 40, 24, 40, 4, overlap, "NN", TK_BF16,
      0.5f, 0.0f, BAD },
    { TK_GROUP_ROWS, "bad offs: 8, 50, 50 of 40 rows", 40, 24, 16, 3, past, "NN", TK_F32, 1.0f, 0.0f, BAD },
    { TK_GROUP_ROWS, "bad offs: 8, -4, 16, 24 of 32 rows", 32, 24, 16, 4, negative, "NT", TK_BF16, 1.0f, 0.0f, BAD },
    { TK_GROUP_ROWS, "bad offs: -1, 8, 16 of 24 rows", 24, 24, 16, 3, first_negative, "NN", TK_F32, 1.0f, 0.0f, BAD },
    { TK_GROUP_K, "bad offs: K 8, 4, 12 of 12", 16, 24, 12, 3, k_decreasing, "TN", TK_F32, 1.0f, 0.0f, BAD },
    { TK_GROUP_K, "bad offs: K 8, 20 of 12", 16, 24, 12, 2, k_past, "NN", TK_F32, 1.0f, 0.5f, BAD },
    { TK_GROUP_K, "bad offs: K -2, 6, 12 of 12", 16, 24, 12, 3, k_negative, "TN", TK_BF16, 1.0f, 0.0f, BAD },
    { TK_GROUP_MASKED, "bad offs: rows 5, -1, 70, 64 of 64", 64, 24, 16, 4, masked_bad, "NT", TK_F32, 1.0f, 0.0f, BAD },
};

/* The one ROWS call captured in a graph. */
static const spec graph_spec = { TK_GROUP_ROWS, "graph: 6 groups of 1..300 rows, K 72, N 40", 600, 40, 72, 6, tiles,
                                 "NT", TK_BF16, 1.0f, 0.0f, 0 };

/* The case of row s, seed its data's stream: offsets from its sizes
 * (cumulative for ROWS and K), its name the kind, the row's and a suffix
 * of ops, layout, C's type, alpha, beta and padding. */
static void make_case(const spec *s, uint64_t seed, gcase *c)
{
    memset(c, 0, sizeof *c);
    c->kind = s->kind;
    c->layout = s->ops[2] == 'c' ? TK_COL_MAJOR : TK_ROW_MAJOR;
    c->op_a = s->ops[0] == 'T' ? TK_OP_T : TK_OP_N;
    c->op_b = s->ops[1] == 'T' ? TK_OP_T : TK_OP_N;
    c->m = s->m;
    c->n = s->n;
    c->k = s->k;
    c->count = s->count;
    c->pad = !!(s->flags & PAD);
    c->alpha = s->alpha;
    c->beta = s->beta;
    c->c_type = s->c_type;
    c->bcast_a = !!(s->flags & BCAST_A);
    c->bad = !!(s->flags & BAD);
    c->seed = seed;
    int32_t sum = 0;
    for (int g = 0; g < c->count && s->kind != TK_GROUP_BATCHED; g++) {
        const int32_t size = s->sizes ? s->sizes[g] : (int32_t)(tk_lab_mix64(seed * 7919 + (uint64_t)g) % 4);
        sum += size;
        c->offs[g] = c->bad || s->kind == TK_GROUP_MASKED ? size : sum;
    }
    if ((s->flags & RANDOM) && s->kind == TK_GROUP_ROWS)
        c->m = sum + 5;
    if ((s->flags & RANDOM) && s->kind == TK_GROUP_K)
        c->k = sum;
    snprintf(c->name, sizeof c->name, "%s %s %c%c%s %s a=%g b=%g%s", kind_str(s->kind), s->name, "NT"[c->op_a],
             "NT"[c->op_b], c->layout == TK_COL_MAJOR ? " col" : "", c->c_type == TK_F32 ? "fp32" : "bf16",
             (double)c->alpha, (double)c->beta, c->pad ? " padded" : "");
}

static void run_specs(void)
{
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        gcase c;
        make_case(&specs[i], 1000 + i, &c);
        run_case(&c);
        if (c.bad) {   /* again with no flag to set */
            strncat(c.name, ", group_error NULL", sizeof c.name - strlen(c.name) - 1);
            c.null_error = 1;
            run_case(&c);
        }
    }
}

/* ---- a ROWS call in a CUDA graph ---- */
static void *graph_direct;   /* the direct call's C */

static void check_graph(void)
{
    cudaStream_t s = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    const size_t bytes = (size_t)cur.g.c_elems * cur.g.cb;
    check_c(cur_kernel);   /* the direct call's C (in cur.got) */
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    int captured = 0;
    tk_status st = TK_ERR_CUDA;
    if (!reset_c(s) && cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess) {
        st = call(strcmp(cur_kernel, "auto") ? cur_kernel : NULL, s);
        cudaError_t e = cudaStreamEndCapture(s, &graph);
        captured = e == cudaSuccess && graph;
        CHECK(captured, "capture: %s (a host synchronisation in the call?)", cudaGetErrorString(e));
    }
    CHECK(st == TK_SUCCESS, "captured call: %s (%s)", tk_status_string(st), tk_last_error(h));
    if (captured && st == TK_SUCCESS) {
        CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
        for (int r = 0; r < 2 && exec; r++) {
            CHECK(!reset_c(s) && cudaGraphLaunch(exec, s) == cudaSuccess && !read_c(cur.got, s), "replay %d", r);
            CHECK(!memcmp(cur.got, graph_direct, bytes), "replay %d: C differs from the direct call's", r);
        }
    }
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    cudaGetLastError();
    cudaStreamDestroy(s);
}

static void graph_cases(void)
{
    gcase c;
    make_case(&graph_spec, 999, &c);
    if (!case_wanted(&c))
        return;
    if (setup_case(&c)) {
        tk_run_test(c.name, setup_failed);
        free_case();
        return;
    }
    graph_direct = malloc((size_t)cur.g.c_elems * cur.g.cb);
    for (int i = 0; i < nkernels && graph_direct; i++) {
        char name[220];
        test_name(&c, i, name, sizeof name);
        if (!call_kernel(&c, i))
            continue;
        if (cur_status == TK_SUCCESS && read_c(graph_direct, stream) == 0) {
            memcpy(cur.got, graph_direct, (size_t)cur.g.c_elems * cur.g.cb);
            tk_run_test(name, check_graph);
        } else {
            tk_run_test(name, check_run);
        }
    }
    print_skips(&c);
    free(graph_direct);
    graph_direct = NULL;
    free_case();
}

static void no_gpu(void) { CHECK(0, "a GPU suite without a GPU fails"); }

void tk_tests(void)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0 || tk_create(&h) != TK_SUCCESS ||
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        printf("no GPU: %s %s\n", cudaGetErrorString(e), tk_last_error(NULL));
        tk_run_test("grouped_needs_a_gpu", no_gpu);
        tk_destroy(h);
        return;
    }
    nkernels = tk_test_kernels_from_env("TK_GROUPED_KERNELS", kernels, MAX_KERNELS);
    if (nkernels == 0) {
        kernels[nkernels++] = "auto";
        for (int i = 0; i < tk_kernel_count() && nkernels < MAX_KERNELS; i++) {
            tk_kernel_props p;
            if (tk_kernel_get(i, &p) == TK_SUCCESS)
                kernels[nkernels++] = p.name;
        }
    }
    run_specs();
    graph_cases();
    cudaStreamDestroy(stream);
    tk_destroy(h);
}
