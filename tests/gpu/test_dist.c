/* test_dist.c - the distributed GEMMs (issue 41) on 2 GPUs (or
 * $TK_DIST_RANKS), one process per GPU (dist_fork.h: fork, no MPI; a
 * watchdog aborts the communicator instead of hanging).
 *
 * Exact checks: A and B hold small integers (lab_rand.h's -3..3), so every
 * product and partial sum is an integer below 2^24, exact in fp32 in any
 * order; C is poisoned with NaN before each call (beta == 0), so each
 * element must equal the reference bit for bit: the single-GPU product of
 * the gathered operands (all-gather: A_all B_r; reduce-scatter: the sum of
 * every rank's A_r B_r, as one product of the concatenated operands), by
 * tk_gemm on a handle of its own, with alpha, beta and the rounding to
 * bf16 applied on the host. The gathered A is compared byte for byte.
 * Shapes: tile-aligned and not (M / R = 500, 1), small and zero K, a
 * padded shard, ranks with different N, both layouts, every chunk count
 * from 1 to more than the rows allow, bf16 partials.
 * Determinism: random bf16 operands, 20 runs of each operation, C (and
 * the gathered A) the same bits every run; with a named kernel, the same
 * bits for 1, 2 and 4 chunks.
 * Transports: the correctness, memcheck and determinism tests run once
 * with P2P and once with CE (the copy engines; each CE run checks that
 * tk_dist_plan then says CE, and prints `skip:` with NCCL's reason where
 * CE cannot be had); ce_vs_p2p: with a named kernel, CE gives P2P's bits
 * (all-gather with and without the gathered A, reduce-scatter with fp32
 * and bf16 partials, 1 and 3 chunks).
 * Bad input: M not a multiple of R, another current device, a context on
 * the communicator of another device, shapes that differ across ranks
 * (check_shapes: TK_ERR_INVALID_VALUE on every rank, no hang; the
 * transport asked differing too), a bad $TK_DIST_TRANSPORT, an unknown
 * kernel (refused before anything is enqueued), and a call one rank never
 * makes (tk_dist_sync times out with TK_ERR_COMM; the communicator is
 * aborted; with CE asked on a fresh context, the set-up's agreement times
 * out instead: the call itself returns TK_ERR_COMM).
 *
 *   build/tests/gpu_test_dist [name-substring]      (memcheck: one overlapped call of each operation)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit_dist.h"
#include "lab/lab.h"
#include "lab/lab_rand.h"
#include "../host/check.h"
#include "dist_fork.h"

#define TIMEOUT_S 120
static int nranks = 2;

typedef struct dcase {
    const char *name;
    tk_dist_op op;
    int64_t m, n, k;             /* m: all ranks' rows; k: all-gather's K, reduce-scatter's K per rank */
    tk_layout layout;
    tk_op op_a, op_b;
    tk_dtype c_type, partial_type;
    int chunks;
    int gathered;                /* all-gather: ask for the gathered A */
    int lda_pad;                 /* extra elements per stored row of A */
    int n_step;                  /* all-gather: rank r's N is n + r * n_step */
    float alpha, beta;
    const char *kernel;
} dcase;

static const tk_dist_op AG = TK_DIST_ALL_GATHER_GEMM, RS = TK_DIST_GEMM_REDUCE_SCATTER;

static float ival(uint64_t seed, uint64_t i) { return (float)tk_lab_rand_int(seed, i); }

/* A logical rows x cols matrix stored as op says (op T: its transpose) in
 * `layout` with pad extra elements per line: *ld set, bf16 values v(i, j). */
typedef float (*valfn)(uint64_t seed, int64_t i, int64_t j, int64_t cols);
static float v_int(uint64_t seed, int64_t i, int64_t j, int64_t cols) { return ival(seed, (uint64_t)(i * cols + j)); }
static float v_rand(uint64_t seed, int64_t i, int64_t j, int64_t cols)
{
    return tk_lab_bf16_to_f32(tk_lab_rand_elem(seed, (uint64_t)(i * cols + j)));
}

static uint16_t *store(valfn v, uint64_t seed, int64_t rows, int64_t cols, int64_t row0, tk_layout layout, tk_op op,
                       int pad, int64_t *ld, size_t *count)
{
    const int64_t sr = op == TK_OP_N ? rows : cols, sc = op == TK_OP_N ? cols : rows;
    *ld = (layout == TK_ROW_MAJOR ? sc : sr) + pad;
    if (*ld < 1)
        *ld = 1;   /* K = 0: tk_gemm's leading dimensions are at least 1 */
    *count = (size_t)(*ld) * (size_t)(layout == TK_ROW_MAJOR ? sr : sc);
    uint16_t *h = calloc(*count ? *count : 1, 2);
    for (int64_t i = 0; h && i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            int64_t si = op == TK_OP_N ? i : j, sj = op == TK_OP_N ? j : i;
            h[layout == TK_ROW_MAJOR ? si * *ld + sj : si + sj * *ld] = tk_lab_f32_to_bf16(v(seed, row0 + i, j, cols));
        }
    return h;
}

static void *upload(const void *h, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 16) != cudaSuccess)
        return NULL;
    if (bytes && cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

/* One rank's buffers for a case. */
typedef struct dset {
    dcase c;
    int64_t mb, n_me, lda, ldb, ldc, c_rows;
    void *a, *b, *c_dev, *g;
    size_t c_bytes;
    float *c0;                   /* host: C's starting values (beta != 0), logical c_rows x n_me */
} dset;

static void dset_free(dset *s)
{
    cudaFree(s->a);
    cudaFree(s->b);
    cudaFree(s->c_dev);
    cudaFree(s->g);
    free(s->c0);
    memset(s, 0, sizeof *s);
}

/* The seeds: the all-gather's A_all 11 (rank r holds its rows), B_r 100 + r;
 * the reduce-scatter's A_r 200 + r, B_r 300 + r; C's start 400 + r. */
static int dset_make(dset *s, const dcase *c, int rank, valfn v)
{
    memset(s, 0, sizeof *s);
    s->c = *c;
    s->mb = c->m / nranks;
    const int ag = c->op == AG;
    s->n_me = ag ? c->n + rank * c->n_step : c->n;
    s->c_rows = ag ? c->m : s->mb;
    size_t na, nb;
    uint16_t *ha = ag ? store(v, 11, s->mb, c->k, rank * s->mb, c->layout, c->op_a, c->lda_pad, &s->lda, &na)
                      : store(v, 200 + (uint64_t)rank, c->m, c->k, 0, c->layout, c->op_a, c->lda_pad, &s->lda, &na);
    uint16_t *hb = store(v, (ag ? 100 : 300) + (uint64_t)rank, c->k, s->n_me, 0, c->layout, c->op_b, 0, &s->ldb, &nb);
    const size_t cs = c->c_type == TK_F32 ? 4 : 2;
    s->ldc = c->layout == TK_ROW_MAJOR ? s->n_me + 3 : s->c_rows + 3;   /* padded: what lies between is kept */
    s->c_bytes = (size_t)s->ldc * (size_t)(c->layout == TK_ROW_MAJOR ? s->c_rows : s->n_me) * cs;
    s->a = ha ? upload(ha, na * 2) : NULL;
    s->b = hb ? upload(hb, nb * 2) : NULL;
    free(ha);
    free(hb);
    if (cudaMalloc(&s->c_dev, s->c_bytes ? s->c_bytes : 16) != cudaSuccess)
        s->c_dev = NULL;
    if (ag && c->gathered && cudaMalloc(&s->g, (size_t)(c->m * c->k * 2 + 16)) != cudaSuccess)
        s->g = NULL;
    s->c0 = calloc((size_t)(s->c_rows * s->n_me + 1), sizeof(float));
    return !s->a || !s->b || !s->c_dev || (ag && c->gathered && !s->g) || !s->c0;
}

/* dset_make, its failure a CHECK (and nothing left allocated): 1 then. */
static int dset_make_checked(dset *s, const dcase *c, int rank, valfn v)
{
    if (!dset_make(s, c, rank, v))
        return 0;
    CHECK(0, "rank %d: %s: setup", rank, c->name);
    dset_free(s);
    return 1;
}

/* C filled: NaN (0xff bytes) where beta == 0, else C's start values (and
 * NaN in the padding); the gathered buffer NaN. */
static int dset_poison(dset *s, int rank)
{
    const dcase *c = &s->c;
    const size_t cs = c->c_type == TK_F32 ? 4 : 2;
    unsigned char *h = malloc(s->c_bytes ? s->c_bytes : 1);
    if (!h)
        return 1;
    memset(h, 0xff, s->c_bytes);
    if (c->beta != 0.0f)
        for (int64_t i = 0; i < s->c_rows; i++)
            for (int64_t j = 0; j < s->n_me; j++) {
                float x = ival(400 + (uint64_t)rank, (uint64_t)(i * s->n_me + j));
                s->c0[i * s->n_me + j] = x;
                size_t idx = (size_t)(c->layout == TK_ROW_MAJOR ? i * s->ldc + j : i + j * s->ldc);
                if (cs == 4)
                    memcpy(h + idx * 4, &x, 4);
                else {
                    uint16_t b = tk_lab_f32_to_bf16(x);
                    memcpy(h + idx * 2, &b, 2);
                }
            }
    int bad = cudaMemcpy(s->c_dev, h, s->c_bytes, cudaMemcpyHostToDevice) != cudaSuccess;
    free(h);
    if (s->g)
        bad |= cudaMemset(s->g, 0xff, (size_t)(c->m * c->k * 2)) != cudaSuccess;
    return bad;
}

static tk_dist_desc dset_desc(const dset *s, int chunks, const char *kernel)
{
    const dcase *c = &s->c;
    tk_dist_desc g = TK_DIST_DESC_INIT;
    g.problem = (tk_gemm_problem){ c->layout, c->op_a, c->op_b, c->m, s->n_me, c->k, c->alpha, c->beta,
                                   s->a, s->lda, s->b, s->ldb, s->c_dev, s->ldc, c->c_type };
    g.gathered = s->g;
    g.chunks = chunks;
    g.partial_type = c->op == RS ? c->partial_type : TK_F32;
    g.check_shapes = 1;
    g.kernel = kernel;
    return g;
}

/* Runs s's operation on d and waits for it (tk_dist_sync); the status. */
static tk_status dset_run(tk_dist d, dset *s, int chunks, const char *kernel)
{
    tk_dist_desc g = dset_desc(s, chunks, kernel);
    tk_status st = s->c.op == AG ? tk_dist_all_gather_gemm(d, &g, NULL) : tk_dist_gemm_reduce_scatter(d, &g, NULL);
    if (st)
        return st;
    return tk_dist_sync(d, 60000);
}

static const tk_dist_transport P2P = TK_DIST_TRANSPORT_P2P, CE = TK_DIST_TRANSPORT_CE;

/* d set to transport t: 0, or 1 where CE cannot be had (printed: `skip:`
 * with the library's reason; never a silent pass). */
static int use_transport(tk_dist d, int rank, tk_dist_transport t, const char *test)
{
    tk_status st = tk_dist_set_transport(d, t);
    if (st == TK_ERR_NOT_SUPPORTED && t == CE) {
        printf("skip (rank %d): %s with the copy-engine transport: %s\n", rank, test, tk_dist_last_error(d));
        return 1;
    }
    CHECK(st == TK_SUCCESS, "rank %d: tk_dist_set_transport(%d): %s", rank, (int)t, tk_dist_last_error(d));
    return st != TK_SUCCESS;
}

/* A call under CE refused with TK_ERR_NOT_SUPPORTED: its set-up failed on
 * some rank (every rank then refuses alike): 1, the reason printed. */
static int ce_unavailable(tk_dist d, int rank, tk_dist_transport t, tk_status st, const char *test)
{
    if (t != CE || st != TK_ERR_NOT_SUPPORTED || !strstr(tk_dist_last_error(d), "copy-engine"))
        return 0;
    printf("skip (rank %d): %s with the copy-engine transport: %s\n", rank, test, tk_dist_last_error(d));
    return 1;
}

/* After a call: tk_dist_plan says the transport it ran is t. */
static void expect_transport(tk_dist d, const dset *s, int rank, tk_dist_transport t, const char *label)
{
    tk_dist_desc g = dset_desc(s, 0, NULL);
    tk_dist_plan_info pi = TK_DIST_PLAN_INFO_INIT;
    tk_status st = tk_dist_plan(d, s->c.op, &g, &pi);
    CHECK(st == TK_SUCCESS && pi.transport == (int)t && (t == P2P || pi.window_bytes > 0 || s->c.k == 0),
          "rank %d: %s: the plan says transport %d (%s), window bytes %zu, expected %d: %s", rank, label,
          pi.transport, pi.transport_why, pi.window_bytes, (int)t, tk_dist_last_error(d));
}

/* The logical reference on the device: ref (c_rows x n_me, fp32, row-major)
 * = the single-GPU product of the gathered operands. */
static int reference(const dset *s, int rank, float *ref, tk_handle h)
{
    const dcase *c = &s->c;
    const int ag = c->op == AG;
    const int64_t M = c->m, N = s->n_me, KK = ag ? c->k : c->k * nranks;
    float *ha = malloc(sizeof(float) * (size_t)(M * KK + 1)), *hb = malloc(sizeof(float) * (size_t)(KK * N + 1));
    uint16_t *a16 = malloc(2 * (size_t)(M * KK + 1)), *b16 = malloc(2 * (size_t)(KK * N + 1));
    int bad = !ha || !hb || !a16 || !b16;
    for (int64_t i = 0; !bad && i < M; i++)
        for (int64_t kk = 0; kk < KK; kk++)
            a16[i * KK + kk] = tk_lab_f32_to_bf16(ag ? v_int(11, i, kk, c->k)
                                                     : v_int(200 + (uint64_t)(kk / c->k), i, kk % c->k, c->k));
    for (int64_t kk = 0; !bad && kk < KK; kk++)
        for (int64_t j = 0; j < N; j++)
            b16[kk * N + j] = tk_lab_f32_to_bf16(ag ? v_int(100 + (uint64_t)rank, kk, j, N)
                                                    : v_int(300 + (uint64_t)(kk / c->k), kk % c->k, j, N));
    void *da = bad ? NULL : upload(a16, (size_t)(M * KK) * 2), *db = bad ? NULL : upload(b16, (size_t)(KK * N) * 2);
    void *dc = NULL;
    bad = bad || !da || !db || cudaMalloc(&dc, (size_t)(M * N) * 4 + 16) != cudaSuccess;
    if (!bad && KK == 0)
        bad = cudaMemset(dc, 0, (size_t)(M * N) * 4) != cudaSuccess;
    else if (!bad && M * N > 0) {
        tk_status st = tk_gemm(h, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, M, N, KK, 1.0f, da, KK, db, N, 0.0f, dc, TK_F32, N,
                               NULL, NULL);
        if (st)
            fprintf(stderr, "rank %d: reference: %s\n", rank, tk_last_error(h));
        bad = st != TK_SUCCESS;
    }
    const int64_t row0 = ag ? 0 : rank * s->mb;
    if (!bad && s->c_rows * N > 0)
        bad = cudaMemcpy(ref, (const float *)dc + row0 * N, (size_t)(s->c_rows * N) * 4, cudaMemcpyDeviceToHost) !=
              cudaSuccess;
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    free(ha);
    free(hb);
    free(a16);
    free(b16);
    return bad;
}

/* Every element of C against alpha * ref + beta * C0, rounded as C's type;
 * the padding between lines untouched; the gathered A byte for byte. */
static int compare(const dset *s, int rank, const float *ref, const char *label)
{
    const dcase *c = &s->c;
    const size_t cs = c->c_type == TK_F32 ? 4 : 2;
    unsigned char *h = malloc(s->c_bytes ? s->c_bytes : 1);
    if (!h || cudaMemcpy(h, s->c_dev, s->c_bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        CHECK(0, "rank %d: %s: read C back", rank, label);
        free(h);
        return 1;
    }
    int64_t wrong = 0;
    for (int64_t i = 0; i < s->c_rows; i++)
        for (int64_t j = 0; j < s->n_me; j++) {
            float want = c->alpha * ref[i * s->n_me + j];
            if (c->beta != 0.0f)
                want = fmaf(c->beta, s->c0[i * s->n_me + j], want);
            size_t idx = (size_t)(c->layout == TK_ROW_MAJOR ? i * s->ldc + j : i + j * s->ldc);
            uint32_t got_bits, want_bits;
            if (cs == 4) {
                memcpy(&got_bits, h + idx * 4, 4);
                memcpy(&want_bits, &want, 4);
            } else {
                uint16_t g16;
                memcpy(&g16, h + idx * 2, 2);
                got_bits = g16;
                want_bits = tk_lab_f32_to_bf16(want);
            }
            if (got_bits != want_bits && wrong++ < 3)
                CHECK(0, "rank %d: %s: C(%lld, %lld) has bits %#x, expected %#x (%g)", rank, label, (long long)i,
                      (long long)j, got_bits, want_bits, (double)want);
        }
    /* the padding of each line of C (3 elements) is never written: still 0xff */
    const int64_t lines = c->layout == TK_ROW_MAJOR ? s->c_rows : s->n_me, len = lines ? s->c_bytes / lines : 0;
    for (int64_t l = 0; l < lines && !wrong; l++)
        for (size_t b = (size_t)(len - 3 * (int64_t)cs); b < (size_t)len; b++)
            if (h[l * len + b] != 0xff && wrong++ < 1)
                CHECK(0, "rank %d: %s: the padding of line %lld of C was written", rank, label, (long long)l);
    free(h);
    if (s->g && c->m * c->k > 0) {
        size_t gb = (size_t)(c->m * c->k) * 2;
        uint16_t *g = malloc(gb);
        if (!g || cudaMemcpy(g, s->g, gb, cudaMemcpyDeviceToHost) != cudaSuccess)
            wrong++;
        for (int64_t i = 0; g && i < c->m && wrong < 4; i++)
            for (int64_t kk = 0; kk < c->k; kk++)
                if (g[i * c->k + kk] != tk_lab_f32_to_bf16(v_int(11, i, kk, c->k)) && wrong++ < 3)
                    CHECK(0, "rank %d: %s: gathered A(%lld, %lld) is %#x", rank, label, (long long)i, (long long)kk,
                          g[i * c->k + kk]);
        free(g);
    }
    if (wrong)
        CHECK(0, "rank %d: %s: %lld wrong", rank, label, (long long)wrong);
    return wrong != 0;
}

/* Runs each case (each chunk count listed) on this rank and checks it. */
typedef struct cases_arg {
    const dcase *cases;
    int count;
    const int *chunk_list;       /* chunk counts to run each case with (-1 ends; 0: the case's own) */
    tk_dist_transport transport;
} cases_arg;

static int run_cases(int rank, int R, struct ncclComm *comm, void *arg)
{
    (void)R;
    const cases_arg *ca = arg;
    tk_dist d = NULL;
    tk_handle ref_h = NULL;
    if (tk_dist_create(&d, comm) || tk_create(&ref_h)) {
        CHECK(0, "rank %d: tk_dist_create: %s", rank, tk_dist_last_error(NULL));
        return 1;
    }
    int skip = use_transport(d, rank, ca->transport, ca->cases[0].name);
    for (int i = 0; i < ca->count && !skip; i++) {
        const dcase *c = &ca->cases[i];
        dset s;
        if (dset_make_checked(&s, c, rank, v_int))
            continue;
        float *ref = malloc(sizeof(float) * (size_t)(s.c_rows * s.n_me + 1));
        if (!ref || reference(&s, rank, ref, ref_h)) {
            CHECK(0, "rank %d: %s: reference", rank, c->name);
            free(ref);
            dset_free(&s);
            continue;
        }
        for (int k = 0; ca->chunk_list[k] >= 0; k++) {
            int chunks = ca->chunk_list[k] ? ca->chunk_list[k] : c->chunks;
            char label[160];
            snprintf(label, sizeof label, "%s, %d chunk(s)", c->name, chunks);
            tk_status st = dset_poison(&s, rank) ? TK_ERR_CUDA : dset_run(d, &s, chunks, c->kernel);
            if ((skip = ce_unavailable(d, rank, ca->transport, st, label)))
                break;
            if (st) {
                CHECK(0, "rank %d: %s: %s: %s", rank, label, tk_status_string(st), tk_dist_last_error(d));
                continue;
            }
            compare(&s, rank, ref, label);
            expect_transport(d, &s, rank, ca->transport, label);
        }
        free(ref);
        dset_free(&s);
    }
    tk_destroy(ref_h);
    tk_dist_destroy(d);
    return 0;
}

static const int chunk_sweep[] = { 0, 1, 2, 3, 5, 64, -1 };
static const int chunk_own[] = { 0, -1 };

static const dcase ag_cases[] = {
    { "all-gather 256x192x64 fp32, gathered", AG, 256, 192, 64, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, TK_F32, TK_F32,
      2, 1, 0, 0, 1.0f, 0.0f, NULL },
    { "all-gather 1000x200x40 bf16 (500 rows a rank), padded shard, N by rank, B^T", AG, 1000, 200, 40,
      TK_ROW_MAJOR, TK_OP_N, TK_OP_T, TK_BF16, TK_F32, 3, 0, 8, 24, 1.0f, 0.0f, NULL },
    { "all-gather 384x136x72 column-major, alpha 2, beta 1, gathered", AG, 384, 136, 72, TK_COL_MAJOR, TK_OP_T,
      TK_OP_N, TK_F32, TK_F32, 0, 1, 0, 0, 2.0f, 1.0f, NULL },
    { "all-gather 4096x1024x1024 bf16 B^T", AG, 4096, 1024, 1024, TK_ROW_MAJOR, TK_OP_N, TK_OP_T, TK_BF16, TK_F32,
      4, 0, 0, 0, 1.0f, 0.0f, NULL },
    { "all-gather 64x32x0 (K = 0)", AG, 64, 32, 0, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, TK_F32, TK_F32, 2, 1, 0, 0,
      1.0f, 0.0f, NULL },
    { "all-gather 2x8x8 (one row a rank)", AG, 2, 8, 8, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, TK_BF16, TK_F32, 4, 1, 0, 0,
      1.0f, 0.0f, NULL },
};

static const dcase rs_cases[] = {
    { "reduce-scatter 256x192x64 fp32 B^T", RS, 256, 192, 64, TK_ROW_MAJOR, TK_OP_N, TK_OP_T, TK_F32, TK_F32, 2, 0,
      0, 0, 1.0f, 0.0f, NULL },
    { "reduce-scatter 1000x200x40 bf16 column-major", RS, 1000, 200, 40, TK_COL_MAJOR, TK_OP_N, TK_OP_N, TK_BF16,
      TK_F32, 3, 0, 0, 0, 1.0f, 0.0f, NULL },
    { "reduce-scatter 512x264x24 bf16 partials, A^T padded, alpha 0.5", RS, 512, 264, 24, TK_ROW_MAJOR, TK_OP_T,
      TK_OP_N, TK_BF16, TK_BF16, 2, 0, 8, 0, 0.5f, 0.0f, NULL },
    { "reduce-scatter 4096x1024x1024 bf16", RS, 4096, 1024, 1024, TK_ROW_MAJOR, TK_OP_N, TK_OP_T, TK_BF16, TK_F32,
      4, 0, 0, 0, 1.0f, 0.0f, NULL },
    { "reduce-scatter 384x136x72 beta 1, column-major A^T B^T", RS, 384, 136, 72, TK_COL_MAJOR, TK_OP_T, TK_OP_T,
      TK_F32, TK_F32, 0, 0, 0, 0, 1.0f, 1.0f, NULL },
    { "reduce-scatter 64x32x0 (K = 0)", RS, 64, 32, 0, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, TK_F32, TK_F32, 2, 0, 0, 0,
      1.0f, 0.0f, NULL },
    { "reduce-scatter 2x8x8 (one row a rank)", RS, 2, 8, 8, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, TK_BF16, TK_F32, 4, 0, 0,
      0, 1.0f, 0.0f, NULL },
};

/* A context on comm, or NULL with the failure recorded. */
static tk_dist open_dist(int rank, struct ncclComm *comm)
{
    tk_dist d = NULL;
    if (tk_dist_create(&d, comm))
        CHECK(0, "rank %d: tk_dist_create: %s", rank, tk_dist_last_error(NULL));
    return d;
}

static void run_group(tkf_fn fn, void *arg)
{
    char why[1024];
    int bad = tkf_run(nranks, TIMEOUT_S, fn, arg, why, sizeof why);
    CHECK(!bad, "%s", why);
}

/* fn on every rank with the transport t (its arg) */
static void run_transport(tkf_fn fn, tk_dist_transport t) { run_group(fn, &t); }

static void test_all_gather(void)
{
    cases_arg a = { ag_cases, (int)(sizeof ag_cases / sizeof ag_cases[0]), chunk_sweep, P2P };
    run_group(run_cases, &a);
}

static void test_all_gather_ce(void)
{
    cases_arg a = { ag_cases, (int)(sizeof ag_cases / sizeof ag_cases[0]), chunk_sweep, CE };
    run_group(run_cases, &a);
}

static void test_reduce_scatter(void)
{
    cases_arg a = { rs_cases, (int)(sizeof rs_cases / sizeof rs_cases[0]), chunk_sweep, P2P };
    run_group(run_cases, &a);
}

static void test_reduce_scatter_ce(void)
{
    cases_arg a = { rs_cases, (int)(sizeof rs_cases / sizeof rs_cases[0]), chunk_sweep, CE };
    run_group(run_cases, &a);
}

/* compute-sanitizer memcheck's test: one overlapped call of each operation (2 chunks), each transport */
static void test_memcheck_overlapped(void)
{
    static const dcase one[] = {
        { "all-gather 1000x200x40 bf16, gathered", AG, 1000, 200, 40, TK_ROW_MAJOR, TK_OP_N, TK_OP_T, TK_BF16,
          TK_F32, 2, 1, 0, 0, 1.0f, 0.0f, NULL },
        { "reduce-scatter 1000x200x40 bf16", RS, 1000, 200, 40, TK_ROW_MAJOR, TK_OP_N, TK_OP_T, TK_BF16, TK_F32, 2,
          0, 0, 0, 1.0f, 0.0f, NULL },
    };
    cases_arg a = { one, 2, chunk_own, P2P };
    run_group(run_cases, &a);
    a.transport = CE;
    run_group(run_cases, &a);
}

/* The tile kernel the named-kernel checks run: k30 on sm_90, else k21. */
static const char *named_kernel(void)
{
    int dev = 0, major = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    return major >= 9 ? "k30_wgmma_tma" : "k21_mma_fastload";
}

/* 20 runs of each operation on random operands give the same bits; with a
 * named kernel, 1, 2 and 4 chunks do too. */
static int determinism(int rank, int R, struct ncclComm *comm, void *arg)
{
    (void)R;
    const tk_dist_transport t = *(const tk_dist_transport *)arg;
    tk_dist d = open_dist(rank, comm);
    if (!d)
        return 1;
    int skip = use_transport(d, rank, t, "determinism");
    const char *named = named_kernel();
    static const dcase cases[] = {
        { "all-gather 2048x1536x1024 random, gathered", AG, 2048, 1536, 1024, TK_ROW_MAJOR, TK_OP_N, TK_OP_T,
          TK_BF16, TK_F32, 4, 1, 0, 0, 1.0f, 0.0f, NULL },
        { "reduce-scatter 2048x1536x1024 random", RS, 2048, 1536, 1024, TK_ROW_MAJOR, TK_OP_N, TK_OP_T, TK_BF16,
          TK_F32, 4, 0, 0, 0, 1.0f, 0.0f, NULL },
        { "reduce-scatter 2048x1536x1024 random, bf16 partials", RS, 2048, 1536, 1024, TK_ROW_MAJOR, TK_OP_N,
          TK_OP_T, TK_F32, TK_BF16, 3, 0, 0, 0, 1.0f, 0.0f, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !skip; i++) {
        dset s;
        if (dset_make_checked(&s, &cases[i], rank, v_rand))
            continue;
        const size_t gb = s.g ? (size_t)(s.c.m * s.c.k) * 2 : 0;
        unsigned char *first = malloc(s.c_bytes + gb), *now = malloc(s.c_bytes + gb);
        for (int run = 0; first && now && run < 20 + 3; run++) {
            /* runs 0..19: the case as it is (auto); 20..22: the named kernel at 1, 2, 4 chunks */
            int chunks = run < 20 ? s.c.chunks : run == 20 ? 1 : run == 21 ? 2 : 4;
            const char *kernel = run < 20 ? NULL : named;
            tk_status st = dset_poison(&s, rank) ? TK_ERR_CUDA : dset_run(d, &s, chunks, kernel);
            if ((skip = ce_unavailable(d, rank, t, st, cases[i].name)))
                break;
            if (st) {
                CHECK(0, "rank %d: %s, run %d: %s", rank, cases[i].name, run, tk_dist_last_error(d));
                break;
            }
            if (run == 0)
                expect_transport(d, &s, rank, t, cases[i].name);
            unsigned char *dst = run == 0 || run == 20 ? first : now;
            if (cudaMemcpy(dst, s.c_dev, s.c_bytes, cudaMemcpyDeviceToHost) ||
                (gb && cudaMemcpy(dst + s.c_bytes, s.g, gb, cudaMemcpyDeviceToHost))) {
                CHECK(0, "rank %d: read back", rank);
                break;
            }
            if (run != 0 && run != 20 && memcmp(first, now, s.c_bytes + gb)) {
                CHECK(0, "rank %d: %s: run %d (%s, %d chunks) differs from run %d", rank, cases[i].name, run,
                      kernel ? kernel : "auto", chunks, run < 20 ? 0 : 20);
                break;
            }
        }
        free(first);
        free(now);
        dset_free(&s);
    }
    tk_dist_destroy(d);
    return 0;
}

static void test_determinism(void) { run_transport(determinism, P2P); }
static void test_determinism_ce(void) { run_transport(determinism, CE); }

/* The same call with a named kernel on each transport gives the same bits
 * (C, and the gathered A): the same GEMMs on the same rows, the same
 * fixed-order sum, whatever moved the bytes. Random operands; 1 and 3
 * chunks; a padded A for the all-gather without the gathered A (the own
 * rows' 2D copy into the window). */
static int ce_vs_p2p(int rank, int R, struct ncclComm *comm, void *arg)
{
    (void)R;
    (void)arg;
    tk_dist d = open_dist(rank, comm);
    if (!d)
        return 1;
    const char *named = named_kernel();
    static const dcase cases[] = {
        { "all-gather 2048x1536x1024 random, gathered", AG, 2048, 1536, 1024, TK_ROW_MAJOR, TK_OP_N, TK_OP_T,
          TK_BF16, TK_F32, 1, 1, 0, 0, 1.0f, 0.0f, NULL },
        { "all-gather 2048x1536x1024 random, A padded", AG, 2048, 1536, 1024, TK_ROW_MAJOR, TK_OP_N, TK_OP_T,
          TK_BF16, TK_F32, 1, 0, 8, 0, 1.0f, 0.0f, NULL },
        { "reduce-scatter 2048x1536x1024 random, fp32 partials", RS, 2048, 1536, 1024, TK_ROW_MAJOR, TK_OP_N,
          TK_OP_T, TK_BF16, TK_F32, 1, 0, 0, 0, 1.0f, 0.0f, NULL },
        { "reduce-scatter 2048x1536x1024 random, bf16 partials, beta 1", RS, 2048, 1536, 1024, TK_ROW_MAJOR, TK_OP_N,
          TK_OP_T, TK_F32, TK_BF16, 1, 0, 0, 0, 1.0f, 1.0f, NULL },
    };
    static const int chunk_counts[] = { 1, 3 };
    int skip = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !skip; i++) {
        dset s;
        if (dset_make_checked(&s, &cases[i], rank, v_rand))
            continue;
        const size_t gb = s.g ? (size_t)(s.c.m * s.c.k) * 2 : 0;
        unsigned char *bits[2] = { malloc(s.c_bytes + gb), malloc(s.c_bytes + gb) };
        for (int k = 0; k < 2 && bits[0] && bits[1] && !skip; k++)
            for (int tr = 0; tr < 2 && !skip; tr++) {
                const tk_dist_transport t = tr ? CE : P2P;
                char label[200];
                snprintf(label, sizeof label, "%s, %d chunk(s), %s", cases[i].name, chunk_counts[k], tr ? "ce" : "p2p");
                if ((skip = use_transport(d, rank, t, label)))
                    break;
                tk_status st = dset_poison(&s, rank) ? TK_ERR_CUDA : dset_run(d, &s, chunk_counts[k], named);
                if ((skip = ce_unavailable(d, rank, t, st, label)))
                    break;
                if (st) {
                    CHECK(0, "rank %d: %s: %s", rank, label, tk_dist_last_error(d));
                    break;
                }
                expect_transport(d, &s, rank, t, label);
                if (cudaMemcpy(bits[tr], s.c_dev, s.c_bytes, cudaMemcpyDeviceToHost) ||
                    (gb && cudaMemcpy(bits[tr] + s.c_bytes, s.g, gb, cudaMemcpyDeviceToHost))) {
                    CHECK(0, "rank %d: %s: read back", rank, label);
                    break;
                }
                if (tr == 1 && memcmp(bits[0], bits[1], s.c_bytes))
                    CHECK(0, "rank %d: %s: C differs from p2p's", rank, label);
                if (tr == 1 && gb && memcmp(bits[0] + s.c_bytes, bits[1] + s.c_bytes, gb))
                    CHECK(0, "rank %d: %s: the gathered A differs from p2p's", rank, label);
            }
        free(bits[0]);
        free(bits[1]);
        dset_free(&s);
    }
    tk_dist_destroy(d);
    return 0;
}

static void test_ce_vs_p2p(void) { run_group(ce_vs_p2p, NULL); }

static int bad_input(int rank, int R, struct ncclComm *comm, void *arg)
{
    (void)arg;
    tk_dist d = open_dist(rank, comm);
    if (!d)
        return 1;
    static const dcase base = { "bad input base", RS, 256, 128, 64, TK_ROW_MAJOR, TK_OP_N, TK_OP_T, TK_F32, TK_F32,
                                2, 0, 0, 0, 1.0f, 0.0f, NULL };
    dset s;
    if (dset_make(&s, &base, rank, v_int)) {
        CHECK(0, "rank %d: setup", rank);
        return 1;
    }
    tk_dist_desc g = dset_desc(&s, 2, NULL);
    /* M not a multiple of the rank count: refused on every rank, nothing enqueued */
    g.problem.m = 257;
    tk_status st = tk_dist_gemm_reduce_scatter(d, &g, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && strstr(tk_dist_last_error(d), "multiple of the rank count"),
          "rank %d: M = 257: %s: %s", rank, tk_status_string(st), tk_dist_last_error(d));
    st = tk_dist_all_gather_gemm(d, &g, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE, "rank %d: M = 257 (all-gather): %s", rank, tk_status_string(st));
    g.problem.m = 256;
    /* another device current: refused; a context for this communicator made there: refused */
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    if (ndev > 1) {
        cudaSetDevice((rank + 1) % ndev);
        st = tk_dist_gemm_reduce_scatter(d, &g, NULL);
        CHECK(st == TK_ERR_INVALID_VALUE && strstr(tk_dist_last_error(d), "current device"),
              "rank %d: another current device: %s: %s", rank, tk_status_string(st), tk_dist_last_error(d));
        tk_dist other = NULL;
        st = tk_dist_create(&other, comm);
        CHECK(st == TK_ERR_INVALID_VALUE && !other && strstr(tk_dist_last_error(NULL), "belongs to device"),
              "rank %d: a context on another device's communicator: %s: %s", rank, tk_status_string(st),
              tk_dist_last_error(NULL));
        cudaSetDevice(rank);
    }
    /* an unknown kernel: refused before anything is enqueued, on every rank */
    g.kernel = "k99_no_such_kernel";
    st = tk_dist_gemm_reduce_scatter(d, &g, NULL);
    CHECK(st != TK_SUCCESS && strstr(tk_dist_last_error(d), "k99_no_such_kernel"), "rank %d: unknown kernel: %s: %s",
          rank, tk_status_string(st), tk_dist_last_error(d));
    g.kernel = NULL;
    /* shapes that differ across ranks: check_shapes says so on every rank */
    g.problem.k = rank == R - 1 ? 32 : 64;
    st = tk_dist_gemm_reduce_scatter(d, &g, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && strstr(tk_dist_last_error(d), "problem.k"),
          "rank %d: K differs across ranks: %s: %s", rank, tk_status_string(st), tk_dist_last_error(d));
    g.problem.k = 64;
    g.chunks = rank == 0 ? 2 : 3;
    st = tk_dist_all_gather_gemm(d, &g, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && strstr(tk_dist_last_error(d), "chunks"),
          "rank %d: chunk counts differ across ranks: %s: %s", rank, tk_status_string(st), tk_dist_last_error(d));
    /* the transport asked differs across ranks: check_shapes says so (rank
     * 0 on p2p; the others on ce, or auto where ce cannot be set) */
    g.chunks = 2;
    CHECK(tk_dist_set_transport(d, (tk_dist_transport)5) == TK_ERR_INVALID_VALUE, "rank %d: transport 5 taken", rank);
    if (rank == 0 || tk_dist_set_transport(d, TK_DIST_TRANSPORT_CE))
        tk_dist_set_transport(d, rank == 0 ? TK_DIST_TRANSPORT_P2P : TK_DIST_TRANSPORT_AUTO);
    st = tk_dist_gemm_reduce_scatter(d, &g, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && strstr(tk_dist_last_error(d), "transport"),
          "rank %d: transports differ across ranks: %s: %s", rank, tk_status_string(st), tk_dist_last_error(d));
    /* back to the default; a bad $TK_DIST_TRANSPORT is refused on every rank, nothing enqueued */
    tk_dist_set_transport(d, TK_DIST_TRANSPORT_AUTO);
    setenv("TK_DIST_TRANSPORT", "nvls", 1);
    st = tk_dist_gemm_reduce_scatter(d, &g, NULL);
    CHECK(st == TK_SUCCESS, "rank %d: the setting outranks $TK_DIST_TRANSPORT: %s", rank, tk_dist_last_error(d));
    if (!st)
        tk_dist_sync(d, 60000);
    tk_dist other = open_dist(rank, comm);
    st = other ? tk_dist_gemm_reduce_scatter(other, &g, NULL) : TK_ERR_INVALID_VALUE;
    CHECK(st == TK_ERR_INVALID_VALUE && other && strstr(tk_dist_last_error(other), "$TK_DIST_TRANSPORT: 'nvls'"),
          "rank %d: a bad $TK_DIST_TRANSPORT: %s: %s", rank, tk_status_string(st), other ? tk_dist_last_error(other) :
          "");
    unsetenv("TK_DIST_TRANSPORT");
    tk_dist_destroy(other);
    /* the communicator is still good: a right call works */
    g = dset_desc(&s, 2, NULL);
    st = dset_poison(&s, rank) ? TK_ERR_CUDA : tk_dist_gemm_reduce_scatter(d, &g, NULL);
    if (!st)
        st = tk_dist_sync(d, 60000);
    CHECK(st == TK_SUCCESS, "rank %d: a right call after the refusals: %s", rank, tk_dist_last_error(d));
    /* bad settings */
    CHECK(tk_dist_set_comm_sms(d, -1) == TK_ERR_INVALID_VALUE && tk_dist_set_comm_sms(d, 100000) ==
              TK_ERR_INVALID_VALUE && tk_dist_set_link_gbps(d, -1.0) == TK_ERR_INVALID_VALUE &&
              tk_dist_set_timeout(d, -1) == TK_ERR_INVALID_VALUE,
          "rank %d: a bad setting taken", rank);
    tk_dist_info info = TK_DIST_INFO_INIT;
    CHECK(tk_dist_get_info(d, &info) == TK_SUCCESS && info.rank == rank && info.nranks == R && info.device == rank &&
              info.nccl_version >= 2700 && info.last_chunks == 2,
          "rank %d: info: rank %d of %d, device %d, NCCL %d, last chunks %d", rank, info.rank, info.nranks,
          info.device, info.nccl_version, info.last_chunks);
    dset_free(&s);
    tk_dist_destroy(d);
    return 0;
}

static void test_bad_input(void) { run_group(bad_input, NULL); }

/* test_timeout's steps on stderr with the time since the test began: where
 * a rank stalls is then in the log */
static void step(int rank, const char *what)
{
    static struct timespec t0;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (!t0.tv_sec)
        t0 = t;
    fprintf(stderr, "rank %d: %6.0f ms: %s\n", rank, (t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6, what);
}

/* Both ranks make one call together (NCCL's connections, the CE set-up),
 * then rank 0 makes a second that rank 1 never makes. The second is
 * enqueued (connected: nothing waits on the host), rank 0's tk_dist_sync
 * must come back with TK_ERR_COMM within its timeout (not hang), and after
 * ncclCommAbort tk_dist_destroy must end rank 0's context (CE: it aborts
 * the split communicator whose barrier waits). A first call that a peer
 * never makes is not tested: NCCL's connection set-up waits for the peer
 * inside ncclGroupEnd on a blocking communicator (tilekit_dist.h). */
static int one_rank_calls(int rank, int R, struct ncclComm *comm, void *arg)
{
    (void)R;
    const tk_dist_transport t = *(const tk_dist_transport *)arg;
    step(rank, "begin");
    tk_dist d = open_dist(rank, comm);
    if (!d)
        return 1;
    if (use_transport(d, rank, t, "a call one rank never makes")) {
        tk_dist_destroy(d);
        tk_dist_comm_abort(comm);
        return 125;
    }
    static const dcase c = { "lonely", AG, 1024, 256, 256, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, TK_F32, TK_F32, 2, 0,
                             0, 0, 1.0f, 0.0f, NULL };
    dset s;
    if (dset_make(&s, &c, rank, v_int) != 0) {
        tk_dist_comm_abort(comm);
        return 125;
    }
    tk_dist_desc g = dset_desc(&s, 2, NULL);
    g.check_shapes = 0;
    tk_status st = tk_dist_all_gather_gemm(d, &g, NULL);
    if (ce_unavailable(d, rank, t, st, "a call one rank never makes")) {
        tk_dist_comm_abort(comm);
        return 125;
    }
    if (!st)
        st = tk_dist_sync(d, 20000);
    CHECK(st == TK_SUCCESS, "rank %d: the call both make: %s", rank, tk_dist_last_error(d));
    step(rank, "the call both made is done");
    if (rank == 0) {
        tk_dist_set_timeout(d, 2000);
        st = tk_dist_all_gather_gemm(d, &g, NULL);
        step(rank, "the lonely call returned");
        CHECK(st == TK_SUCCESS, "rank 0: the lonely call (connected: enqueued): %s", tk_dist_last_error(d));
        st = st ? st : tk_dist_sync(d, 2000);
        step(rank, "sync returned");
        CHECK(st == TK_ERR_COMM && strstr(tk_dist_last_error(d), "not complete after 2000 ms"),
              "rank 0: sync: %s: %s", tk_status_string(st), tk_dist_last_error(d));
        tk_dist_comm_abort(comm);
        step(rank, "aborted");
        st = tk_dist_destroy(d);
        step(rank, "destroyed");
        CHECK(st == TK_SUCCESS, "rank 0: destroy after the abort: %s", tk_dist_last_error(d));
        /* s is left allocated where destroy failed: the exchange may still name it */
    } else {
        sleep(4);
        /* not destroyed under CE: its windows' deregistration is collective, and rank 0 aborted */
        if (t != CE)
            tk_dist_destroy(d);
        step(rank, "destroyed");
        tk_dist_comm_abort(comm);
        step(rank, "aborted");
    }
    return 125;   /* aborted: tkf_child must not destroy the communicator */
}

static void test_timeout(void) { run_transport(one_rank_calls, P2P); }
static void test_timeout_ce(void) { run_transport(one_rank_calls, CE); }

void tk_tests(void)
{
    tkf_no_multicast();
    const char *env = getenv("TK_DIST_RANKS");
    if (env && *env)
        nranks = atoi(env);
    int n = tkf_gpu_count();
    if (n < nranks || nranks < 2) {
        printf("skip: test_dist needs %d GPUs (found %d): nothing run\n", nranks < 2 ? 2 : nranks, n);
        return;
    }
    TK_TEST(test_all_gather);
    TK_TEST(test_all_gather_ce);
    TK_TEST(test_reduce_scatter);
    TK_TEST(test_reduce_scatter_ce);
    TK_TEST(test_memcheck_overlapped);
    TK_TEST(test_determinism);
    TK_TEST(test_determinism_ce);
    TK_TEST(test_ce_vs_p2p);
    TK_TEST(test_bad_input);
    TK_TEST(test_timeout);
    TK_TEST(test_timeout_ce);
}
