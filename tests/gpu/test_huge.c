/* test_huge.c - trust under stress: products whose C has more than 2^31 and
 * 2^32 elements, and operands over 4 GiB, through auto-dispatch and every
 * registry kernel that accepts them, on the public API (tk_gemm_ex). A
 * kernel, copy or fill that wraps an offset at 32 bits writes the wrong
 * elements (sampled values off, or still NaN), writes outside C (the
 * sentinel bands around it change) or faults (the run fails).
 *
 * Each case allocates A, B and C once, C between two 4 KB sentinel bands,
 * fills A and B on the GPU (tk_lab_fill_device) and runs the four op
 * combinations on them: the stored matrices of op N and op T hold the same
 * number of elements, so one buffer serves both. beta is 0 (C poisoned with
 * NaN first: an element left unwritten fails) for NN and TT, 0.5 for NT and
 * TN (C filled with the lab's random numbers, which the host recomputes from
 * their offsets: a fill that wrapped shows too). The check is sampled:
 * windows of 8 consecutive rows of C (the first, the last, those holding
 * the elements at offsets 2^31 and 2^32 and bytes 2^31, 2^32, 2^33 of C and
 * of A, three random ones) times windows of 8 columns (likewise with C and
 * B), every element of each pair against the fp64 reference
 * (tk_lab_ref_points), computed on the host from copies of only those rows
 * of op(A) and columns of op(B) (cudaMemcpy2D).
 *
 * About 12 GB of free GPU memory for the largest case (a case that does not
 * fit is skipped, with the reason); without a GPU nothing runs. Run time on
 * an H100 estimated at 20-30 s, most of it k01_naive and the C fills; a
 * run estimated above RUN_MAX_S, or started after TOTAL_MAX_S, is skipped
 * and printed.
 *
 *   build/tests/gpu_test_huge [name-substring]      e.g. "A>4GiB" or k31
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lab/lab.h"
#include "../host/check.h"

#define WIN 8                   /* a sampled window: 8 consecutive rows or columns */
#define MAX_WIN 16
#define GUARD_BYTES 4096        /* sentinel band before and after C (keeps C 4 KB aligned) */
#define MARGIN_BYTES ((size_t)1 << 30)   /* cuBLAS's and the kernels' workspaces, the context */
#define RUN_MAX_S 5.0
#define TOTAL_MAX_S 80.0
#define SEED_A 0xa1
#define SEED_B 0xb1
#define SEED_C 0xc1

typedef struct huge_case {
    const char *name;
    int64_t m, n, k;
    tk_dtype out;
    int a_pad;                  /* added to A's tight leading dimension: 1 makes it odd, so auto copies A */
} huge_case;

/* C: 2.62e9 fp32 elements (10.5 GB; offsets past 2^31 elements and 2^33
 * bytes, TMA stores) and 4.30e9 bf16 elements (8.6 GB; offsets past 2^32
 * elements; an odd ldc, so the Hopper kernels store rows one by one and
 * k20/k21 refuse). A: 2.36e9 elements (4.7 GB), tight and with an odd lda
 * (auto-dispatch repacks it: route.c's copy of a 4.7 GB operand). B: 2.4e9
 * elements (4.8 GB). K is small where C is large and M or N small where an
 * operand is: each product is at most 5.5e11 flop. */
static const huge_case cases[] = {
    { "C>2^31 fp32", 65536, 40000, 64, TK_F32, 0 },
    { "C>2^32 bf16", 65536, 65601, 64, TK_BF16, 0 },
    { "A>4GiB", 65536, 64, 36000, TK_F32, 0 },
    { "B>4GiB", 64, 40000, 60000, TK_F32, 0 },
    { "A>4GiB odd lda", 65536, 64, 36000, TK_F32, 1 },
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static const struct { tk_op a, b; float beta; } variants[] = {
    { TK_OP_N, TK_OP_N, 0.0f }, { TK_OP_N, TK_OP_T, 0.5f }, { TK_OP_T, TK_OP_N, 0.5f }, { TK_OP_T, TK_OP_T, 0.0f },
};

/* Starts of sampled windows along one dimension. */
typedef struct wins {
    int n;
    int64_t start[MAX_WIN];
} wins;

/* Everything of the case on the GPU and the variant being checked. */
typedef struct huge_run {
    const huge_case *hc;
    tk_handle h;
    cudaStream_t stream;
    uint16_t *a, *b;            /* device */
    char *c_base;               /* device: band, C, band */
    void *c;
    size_t a_elems, b_elems, c_bytes, esz, guard_elems;
    void *band;                 /* host: GUARD_BYTES of sentinel */
    tk_gemm_problem p;          /* the variant */
    wins rows, cols;
    size_t npts;
    double *want, *s, *c0;      /* per point: the fp64 reference, sum |a||b|, initial C */
    void *got;                  /* per point: the kernel's C (pinned) */
    const char *kernel;
    char no_ref[TK_LAB_MSG_LEN];    /* why the variant has no reference ("": it has) */
    char refused[TK_LAB_MSG_LEN];   /* auto or k01_naive refused the variant ("": neither) */
    int runs, failed;
} huge_run;

static huge_run *cur;
static int dead;                /* a CUDA error broke the context: nothing more can run */
static struct timespec t0;

static double seconds_since(const struct timespec *t)
{
    struct timespec n;
    clock_gettime(CLOCK_MONOTONIC, &n);
    return (double)(n.tv_sec - t->tv_sec) + 1e-9 * (double)(n.tv_nsec - t->tv_nsec);
}

/* Adds the window of WIN lines around line i of a dimension of dim >= WIN lines. */
static void win_add(wins *w, int64_t i, int64_t dim)
{
    int64_t s = i - WIN / 2;
    s = s > dim - WIN ? dim - WIN : s;
    s = s < 0 ? 0 : s;
    for (int t = 0; t < w->n; t++)
        if (w->start[t] == s)
            return;
    if (w->n < MAX_WIN)
        w->start[w->n++] = s;
}

/* Where 32-bit arithmetic breaks, as element offsets of elements of esz
 * bytes: elements 2^31 and 2^32 (an int or unsigned element index), bytes
 * 2^31, 2^32 and 2^33 (an int or unsigned byte offset, and one past it).
 * Returns how many of them lie below total. */
static int breaks(size_t esz, uint64_t total, uint64_t out[5])
{
    const uint64_t all[5] = { 1ull << 31, 1ull << 32, (1ull << 31) / esz, (1ull << 32) / esz, (1ull << 33) / esz };
    int n = 0;
    for (int i = 0; i < 5; i++)
        if (all[i] < total)
            out[n++] = all[i];
    return n;
}

/* For a stored matrix of `stored_rows` rows of ld elements, adds the window
 * of the logical line that holds each break offset: the stored row (lines
 * are stored rows) or the stored column (when that is below dim). */
static void win_add_breaks(wins *w, size_t esz, int64_t stored_rows, int64_t ld, int lines_are_rows, int64_t dim)
{
    uint64_t b[5];
    int n = breaks(esz, (uint64_t)stored_rows * (uint64_t)ld, b);
    for (int i = 0; i < n; i++) {
        int64_t line = lines_are_rows ? (int64_t)(b[i] / (uint64_t)ld) : (int64_t)(b[i] % (uint64_t)ld);
        if (line < dim)
            win_add(w, line, dim);
    }
}

/* Copies the sampled lines of op(X) (rows of op(A) or columns of op(B),
 * each of len elements) from the stored bf16 matrix d (leading dimension
 * ld) to the host: stored rows (lines_are_rows) into a (n * WIN) x len
 * matrix, stored columns into a len x (n * WIN) one, so the host problem
 * keeps the device problem's ops. *h_ld: the host leading dimension. */
static cudaError_t gather_lines(uint16_t *h, int64_t *h_ld, const uint16_t *d, int64_t ld, int lines_are_rows,
                                int64_t len, const wins *w)
{
    const size_t width = (size_t)w->n * WIN;
    cudaError_t e = cudaSuccess;
    *h_ld = lines_are_rows ? len : (int64_t)width;
    for (int t = 0; t < w->n && !e; t++) {
        if (lines_are_rows)
            e = cudaMemcpy2D(h + (size_t)t * WIN * (size_t)len, (size_t)len * 2, d + w->start[t] * ld,
                             (size_t)ld * 2, (size_t)len * 2, WIN, cudaMemcpyDeviceToHost);
        else
            e = cudaMemcpy2D(h + (size_t)t * WIN, width * 2, d + w->start[t], (size_t)ld * 2, WIN * 2, (size_t)len,
                             cudaMemcpyDeviceToHost);
    }
    return e;
}

/* The sampled C values, window pair by window pair, in point order. */
static cudaError_t gather_c(const huge_run *r)
{
    const int64_t ldc = r->p.ldc;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < r->rows.n && !e; i++)
        for (int j = 0; j < r->cols.n && !e; j++) {
            const size_t pair = (size_t)i * (size_t)r->cols.n + (size_t)j;
            const char *src = (const char *)r->c + (size_t)(r->rows.start[i] * ldc + r->cols.start[j]) * r->esz;
            e = cudaMemcpy2D((char *)r->got + pair * WIN * WIN * r->esz, WIN * r->esz, src, (size_t)ldc * r->esz,
                             WIN * r->esz, WIN, cudaMemcpyDeviceToHost);
        }
    return e;
}

/* Point t's position in C: window pair, then row and column inside it. */
static void point_of(const huge_run *r, size_t t, int64_t *row, int64_t *col)
{
    const size_t pair = t / (WIN * WIN), in = t % (WIN * WIN);
    *row = r->rows.start[pair / (size_t)r->cols.n] + (int64_t)(in / WIN);
    *col = r->cols.start[pair % (size_t)r->cols.n] + (int64_t)(in % WIN);
}

/* The sampled windows of the variant in r->p: the first and last rows and
 * columns, those holding the break offsets of C, of A (rows) and of B
 * (columns), and three random ones each. */
static void pick_windows(huge_run *r)
{
    const tk_gemm_problem *p = &r->p;
    const int a_rows = p->op_a == TK_OP_N, b_rows = p->op_b == TK_OP_T;   /* sampled lines are stored rows */
    memset(&r->rows, 0, sizeof r->rows);
    memset(&r->cols, 0, sizeof r->cols);
    win_add(&r->rows, 0, p->m);
    win_add(&r->rows, p->m - 1, p->m);
    win_add(&r->cols, 0, p->n);
    win_add(&r->cols, p->n - 1, p->n);
    win_add_breaks(&r->rows, r->esz, p->m, p->ldc, 1, p->m);
    win_add_breaks(&r->cols, r->esz, p->m, p->ldc, 0, p->n);
    win_add_breaks(&r->rows, 2, a_rows ? p->m : p->k, p->lda, a_rows, p->m);
    win_add_breaks(&r->cols, 2, b_rows ? p->n : p->k, p->ldb, b_rows, p->n);
    uint64_t x = tk_lab_mix64((uint64_t)p->m * 31 + (uint64_t)p->op_a * 7 + (uint64_t)p->op_b);
    for (int i = 0; i < 3; i++) {
        win_add(&r->rows, (int64_t)((x = tk_lab_mix64(x)) % (uint64_t)p->m), p->m);
        win_add(&r->cols, (int64_t)((x = tk_lab_mix64(x)) % (uint64_t)p->n), p->n);
    }
    r->npts = (size_t)r->rows.n * (size_t)r->cols.n * WIN * WIN;
}

/* r->want, r->s and r->c0 at every point: op(A)'s sampled rows into ha and
 * op(B)'s sampled columns into hb (host), the fp64 reference of the same
 * ops over them (point t at row prow[t], column pcol[t] of the windows),
 * then alpha and beta with C's initial values. */
static cudaError_t reference(huge_run *r, uint16_t *ha, uint16_t *hb, int64_t *prow, int64_t *pcol, double *dot)
{
    const tk_gemm_problem *p = &r->p;
    tk_gemm_problem hp = *p;
    hp.m = (int64_t)r->rows.n * WIN;
    hp.n = (int64_t)r->cols.n * WIN;
    hp.alpha = 1.0f;
    hp.beta = 0.0f;
    hp.a = ha;
    hp.b = hb;
    hp.c = NULL;
    hp.ldc = hp.n;
    cudaError_t e = gather_lines(ha, &hp.lda, (const uint16_t *)p->a, p->lda, p->op_a == TK_OP_N, p->k, &r->rows);
    if (!e) e = gather_lines(hb, &hp.ldb, (const uint16_t *)p->b, p->ldb, p->op_b == TK_OP_T, p->k, &r->cols);
    if (e)
        return e;
    for (size_t t = 0; t < r->npts; t++) {
        const size_t pair = t / (WIN * WIN), in = t % (WIN * WIN);
        prow[t] = (int64_t)(pair / (size_t)r->cols.n * WIN + in / WIN);
        pcol[t] = (int64_t)(pair % (size_t)r->cols.n * WIN + in % WIN);
    }
    tk_lab_ref_points(&hp, r->npts, prow, pcol, dot, r->s);
    for (size_t t = 0; t < r->npts; t++) {
        int64_t i, j;
        point_of(r, t, &i, &j);
        /* what tk_lab_fill_device wrote at this offset of C (beta != 0) */
        r->c0[t] = p->beta != 0.0f ? tk_lab_bf16_to_f32(tk_lab_rand_bf16(SEED_C, (uint64_t)(i * p->ldc + j))) : 0.0;
        r->want[t] = (double)p->alpha * dot[t] + (double)p->beta * r->c0[t];
    }
    return cudaSuccess;
}

/* Windows, reference and the buffer for the kernels' values of the variant
 * in r->p; on failure the reason in r->no_ref. */
static void prepare_variant(huge_run *r)
{
    pick_windows(r);
    const size_t na = (size_t)r->rows.n * WIN * (size_t)r->p.k, nb = (size_t)r->cols.n * WIN * (size_t)r->p.k;
    uint16_t *ha = NULL, *hb = NULL;
    int64_t *prow = malloc(r->npts * sizeof *prow), *pcol = malloc(r->npts * sizeof *pcol);
    double *dot = malloc(r->npts * sizeof *dot);
    r->want = malloc(r->npts * sizeof *r->want);
    r->s = malloc(r->npts * sizeof *r->s);
    r->c0 = malloc(r->npts * sizeof *r->c0);
    /* pinned: the column copies are 2-D copies of 16-byte rows */
    cudaError_t e = cudaMallocHost((void **)&ha, na * 2);
    if (!e) e = cudaMallocHost((void **)&hb, nb * 2);
    if (!e) e = cudaMallocHost(&r->got, r->npts * r->esz);
    r->no_ref[0] = '\0';
    if (e || !prow || !pcol || !dot || !r->want || !r->s || !r->c0)
        snprintf(r->no_ref, sizeof r->no_ref, "host memory for %zu sample points: %s", r->npts,
                 e ? cudaGetErrorString(e) : "malloc failed");
    else if ((e = reference(r, ha, hb, prow, pcol, dot)))
        snprintf(r->no_ref, sizeof r->no_ref, "copying the sampled lines of A and B: %s", cudaGetErrorString(e));
    cudaFreeHost(ha);
    cudaFreeHost(hb);
    free(prow);
    free(pcol);
    free(dot);
}

static void free_variant(huge_run *r)
{
    free(r->want); free(r->s); free(r->c0);
    cudaFreeHost(r->got);
    r->want = r->s = r->c0 = NULL;
    r->got = NULL;
}

/* C's initial state for a run: NaN poison (all-ones bits, NaN in fp32 and
 * bf16) when beta == 0, else the lab's random numbers of stream SEED_C. */
static cudaError_t prepare_c(const huge_run *r)
{
    if (r->p.beta == 0.0f)
        return cudaMemsetAsync(r->c, 0xff, r->c_bytes, r->stream);
    return (cudaError_t)tk_lab_fill_device(r->c, r->p.c_type, r->c_bytes / r->esz, SEED_C, r->stream);
}

/* The sentinel bands before and after C: elements that changed. */
static int64_t guard_check(const huge_run *r, const char *where, int64_t *first)
{
    int64_t bad = 0, row, col;
    for (int side = 0; side < 2; side++) {
        const char *d = side ? (const char *)r->c + r->c_bytes : r->c_base;
        cudaError_t e = cudaMemcpy(r->band, d, GUARD_BYTES, cudaMemcpyDeviceToHost);
        if (e) {
            CHECK(0, "%s: reading the sentinel band: %s", where, cudaGetErrorString(e));
            return 1;
        }
        int64_t n = tk_lab_pad_check(r->band, r->p.c_type, TK_ROW_MAJOR, 1, 0, (int64_t)r->guard_elems, &row, &col);
        if (n && !bad)   /* element offset relative to C's first element */
            *first = side ? (int64_t)(r->c_bytes / r->esz) + col : col - (int64_t)r->guard_elems;
        bad += n;
    }
    return bad;
}

/* One counted test: kernel cur->kernel on the variant in cur->p. */
static void run_one(void)
{
    huge_run *r = cur;
    const tk_gemm_problem *p = &r->p;
    r->runs++;
    if (r->no_ref[0] || r->refused[0]) {
        CHECK(!r->no_ref[0], "the variant cannot be checked: %s", r->no_ref);
        CHECK(!r->refused[0], "%s must run every problem: %s", r->kernel, r->refused);
        r->failed++;
        return;
    }
    cudaError_t e = prepare_c(r);
    if (e) {
        CHECK(0, "preparing C: %s", cudaGetErrorString(e));
        dead = 1;
        r->failed++;
        return;
    }
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    tk_status st = tk_gemm_ex(r->h, p, r->kernel, r->stream);
    e = cudaStreamSynchronize(r->stream);
    const double secs = seconds_since(&t);
    if (st != TK_SUCCESS || e) {
        CHECK(0, "tk_gemm_ex: %s (%s); stream: %s", tk_status_string(st), tk_last_error(r->h), cudaGetErrorString(e));
        dead = e != cudaSuccess;   /* a fault in a kernel poisons the context */
        r->failed++;
        return;
    }
    if ((e = gather_c(r))) {
        CHECK(0, "reading the sampled C: %s", cudaGetErrorString(e));
        dead = 1;
        r->failed++;
        return;
    }
    int64_t over = 0;
    double worst = 0.0;
    for (size_t i = 0; i < r->npts; i++) {
        const double got = tk_lab_load(r->got, p->c_type, (int64_t)i);
        const double tol = tk_lab_tolerance(p->k, p->alpha, p->beta, r->s[i], r->c0[i], r->want[i], p->c_type, 1);
        const double ratio = isfinite(got) ? fabs(got - r->want[i]) / tol : INFINITY;
        worst = ratio > worst ? ratio : worst;
        if (ratio > 1.0 && over++ < 4) {
            int64_t row, col;
            point_of(r, i, &row, &col);
            CHECK(0, "C(%lld, %lld) at element offset %lld: got %.9g, want %.9g, tol %.3g", (long long)row,
                  (long long)col, (long long)(row * p->ldc + col), got, r->want[i], tol);
        }
    }
    CHECK(over == 0, "%lld of %zu sampled elements wrong", (long long)over, r->npts);
    int64_t first = 0, guards = guard_check(r, r->kernel, &first);
    CHECK(guards == 0, "%lld elements of the sentinel bands around C changed, the first at element offset %lld "
                       "from C (C has %zu elements)",
          (long long)guards, (long long)first, r->c_bytes / r->esz);
    printf("     %zu points in %d x %d windows, worst error %.3g of the tolerance, %.1f ms\n", r->npts, r->rows.n,
           r->cols.n, worst, 1e3 * secs);
    r->failed += over > 0 || guards > 0;
}

/* Why a run is left out, or NULL. k01_naive reaches about 5 TFLOP/s (NN,
 * README), less with transposed operands; every other kernel at least 45
 * at 4096^3 (the kernel headers): rates well below those, plus C's
 * traffic at 1 TB/s. */
static const char *too_slow(const char *kernel, const tk_gemm_problem *p, double c_bytes)
{
    const double flops = 2.0 * (double)p->m * (double)p->n * (double)p->k;
    const double rate = strcmp(kernel, "k01_naive") ? 10e12 : 0.5e12;
    if (flops / rate + 2.0 * c_bytes / 1e12 > RUN_MAX_S)
        return "estimated to take longer than RUN_MAX_S";
    if (seconds_since(&t0) > TOTAL_MAX_S)
        return "the test has run longer than TOTAL_MAX_S";
    return NULL;
}

/* Every kernel on the variant in r->p: refusals printed (auto and
 * k01_naive must run everything), the rest counted tests. */
static void run_kernels(huge_run *r, const char *vname)
{
    const int nk = tk_kernel_count();
    for (int i = -1; i < nk && !dead; i++) {
        tk_kernel_props kp;
        const char *kernel = "auto";
        if (i >= 0 && tk_kernel_get(i, &kp) == TK_SUCCESS)
            kernel = kp.name;
        char name[192];
        snprintf(name, sizeof name, "%s %s %s", r->hc->name, vname, kernel);
        const int must = !strcmp(kernel, "auto") || !strcmp(kernel, "k01_naive");
        tk_status st = tk_kernel_supports(r->h, kernel, &r->p);
        const char *slow = st == TK_SUCCESS ? too_slow(kernel, &r->p, (double)r->c_bytes) : NULL;
        if ((st != TK_SUCCESS && !must) || slow) {
            printf("skip %s: %s\n", name, slow ? slow : tk_last_error(r->h));
            continue;
        }
        snprintf(r->refused, sizeof r->refused, "%s", st != TK_SUCCESS ? tk_last_error(r->h) : "");
        r->kernel = kernel;
        cur = r;
        tk_run_test(name, run_one);
    }
}

/* Device memory for A, B and C with its bands, when cudaMemGetInfo says
 * it fits; 0, or -1 with the reason printed (the case is skipped). */
static int alloc_case(huge_run *r)
{
    const huge_case *hc = r->hc;
    r->esz = hc->out == TK_F32 ? 4 : 2;
    /* stored A: M x (K + pad) (op N) or K x (M + pad) (op T); B: K x N or N x K */
    const int64_t an = hc->m * (hc->k + hc->a_pad), at = hc->k * (hc->m + hc->a_pad);
    r->a_elems = (size_t)(an > at ? an : at);
    r->b_elems = (size_t)hc->k * (size_t)hc->n;
    r->c_bytes = (size_t)hc->m * (size_t)hc->n * r->esz;
    r->guard_elems = GUARD_BYTES / r->esz;
    /* auto copies the odd-lda A into its workspace: as large again */
    const size_t need =
        (hc->a_pad ? 4 : 2) * r->a_elems + 2 * r->b_elems + r->c_bytes + 2 * GUARD_BYTES + MARGIN_BYTES;
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e || free_b < need) {
        printf("huge: skip %s: needs %.2f GB of GPU memory, %.2f GB free of %.2f%s%s\n", hc->name, need / 1e9,
               free_b / 1e9, total_b / 1e9, e ? ": " : "", e ? cudaGetErrorString(e) : "");
        return -1;
    }
    r->band = malloc(GUARD_BYTES);
    e = cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking);
    if (!e) e = cudaMalloc((void **)&r->a, r->a_elems * 2);
    if (!e) e = cudaMalloc((void **)&r->b, r->b_elems * 2);
    if (!e) e = cudaMalloc((void **)&r->c_base, r->c_bytes + 2 * GUARD_BYTES);
    if (e || !r->band || tk_create(&r->h) != TK_SUCCESS) {
        printf("huge: skip %s: allocating %.2f GB: %s\n", hc->name, need / 1e9,
               e ? cudaGetErrorString(e) : r->band ? tk_last_error(NULL) : "out of host memory");
        cudaGetLastError();
        return -1;
    }
    r->c = r->c_base + GUARD_BYTES;
    return 0;
}

/* A and B from the lab's random streams, the sentinel bands around C. */
static cudaError_t fill_case(huge_run *r)
{
    cudaError_t e = (cudaError_t)tk_lab_fill_device(r->a, TK_BF16, r->a_elems, SEED_A, r->stream);
    if (!e) e = (cudaError_t)tk_lab_fill_device(r->b, TK_BF16, r->b_elems, SEED_B, r->stream);
    tk_lab_pad_fill(r->band, r->hc->out, TK_ROW_MAJOR, 1, 0, (int64_t)r->guard_elems);
    if (!e) e = cudaMemcpyAsync(r->c_base, r->band, GUARD_BYTES, cudaMemcpyHostToDevice, r->stream);
    if (!e) e = cudaMemcpyAsync((char *)r->c + r->c_bytes, r->band, GUARD_BYTES, cudaMemcpyHostToDevice, r->stream);
    if (!e) e = cudaStreamSynchronize(r->stream);
    return e;
}

static void free_case(huge_run *r)
{
    tk_destroy(r->h);   /* and auto's copy workspace with it */
    cudaFree(r->a);
    cudaFree(r->b);
    cudaFree(r->c_base);
    if (r->stream)
        cudaStreamDestroy(r->stream);
    free(r->band);
}

/* The variant v of the case: its ops, beta and leading dimensions. */
static void set_variant(huge_run *r, size_t v)
{
    const huge_case *hc = r->hc;
    tk_gemm_problem *p = &r->p;
    memset(p, 0, sizeof *p);
    p->layout = TK_ROW_MAJOR;
    p->op_a = variants[v].a;
    p->op_b = variants[v].b;
    p->m = hc->m;
    p->n = hc->n;
    p->k = hc->k;
    p->alpha = p->op_a == TK_OP_T ? 1.5f : 1.0f;
    p->beta = variants[v].beta;
    p->a = r->a;
    p->lda = (p->op_a == TK_OP_N ? hc->k : hc->m) + hc->a_pad;
    p->b = r->b;
    p->ldb = p->op_b == TK_OP_N ? hc->n : hc->k;
    p->c = r->c;
    p->ldc = hc->n;
    p->c_type = hc->out;
}

/* The largest C, A and B of the cases verified so far, for the closing line. */
typedef struct best {
    size_t bytes;
    const huge_case *hc;
} best;
static best best_c, best_a, best_b;

static void note_best(best *b, size_t bytes, const huge_case *hc)
{
    if (bytes > b->bytes) {
        b->bytes = bytes;
        b->hc = hc;
    }
}

static void run_case(const huge_case *hc)
{
    huge_run r;
    memset(&r, 0, sizeof r);
    r.hc = hc;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (alloc_case(&r)) {
        free_case(&r);
        return;
    }
    const cudaError_t fe = fill_case(&r);
    for (size_t v = 0; v < sizeof variants / sizeof variants[0] && !dead; v++) {
        set_variant(&r, v);
        /* without a reference every run of the variant fails */
        if (fe)
            snprintf(r.no_ref, sizeof r.no_ref, "filling A, B and the sentinel bands: %s", cudaGetErrorString(fe));
        else
            prepare_variant(&r);
        char vname[32];
        snprintf(vname, sizeof vname, "%c%c b=%g", r.p.op_a == TK_OP_N ? 'N' : 'T', r.p.op_b == TK_OP_N ? 'N' : 'T',
                 (double)r.p.beta);
        run_kernels(&r, vname);
        free_variant(&r);
    }
    const size_t a_bytes = (size_t)hc->m * (size_t)(hc->k + hc->a_pad) * 2, b_bytes = r.b_elems * 2;
    printf("huge: %s %lldx%lldx%lld %s C: %d runs, %d failed, %.1f s (A %.2f GB, B %.2f GB, C %.2f GB)\n", hc->name,
           (long long)hc->m, (long long)hc->n, (long long)hc->k, hc->out == TK_F32 ? "fp32" : "bf16", r.runs,
           r.failed, seconds_since(&t), a_bytes / 1e9, b_bytes / 1e9, r.c_bytes / 1e9);
    if (r.runs && !r.failed && !dead) {
        note_best(&best_c, r.c_bytes, hc);
        note_best(&best_a, a_bytes, hc);
        note_best(&best_b, b_bytes, hc);
    }
    free_case(&r);
}

static void print_best(const char *what, const best *b)
{
    if (!b->hc) {
        printf("%s none", what);
        return;
    }
    printf("%s %.2f GB (%lldx%lldx%lld %s C)", what, b->bytes / 1e9, (long long)b->hc->m, (long long)b->hc->n,
           (long long)b->hc->k, b->hc->out == TK_F32 ? "fp32" : "bf16");
}

void tk_tests(void)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e || ndev == 0) {
        cudaGetLastError();
        printf("huge: no GPU (%s): nothing run\n", e ? cudaGetErrorString(e) : "no CUDA device");
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < NCASES && !dead; i++)
        run_case(&cases[i]);
    if (dead)
        printf("huge: a CUDA error ended the test early (see above)\n");
    printf("huge: largest verified: ");
    print_best("C", &best_c);
    print_best(", A", &best_a);
    print_best(", B", &best_b);
    printf("; %.1f s in all\n", seconds_since(&t0));
}
