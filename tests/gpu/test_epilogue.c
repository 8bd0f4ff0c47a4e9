/* test_epilogue.c - fused epilogues on the GPU (issue 39: tk_gemm_desc
 * version 3; tilekit.h, tk_epilogue_kind), through auto-dispatch and
 * k01_naive, the reference kernel that takes every epilogue.
 *
 * The cases go through the lab's verify of an epilogue case
 * (tk_lab_epi_verify_run, lab_everify.c), so the fp64 reference and its
 * tolerances are lab_epi.c's, not a second copy: random inputs (the
 * backward kinds' aux of standard deviation 2), D, aux and bias_grad
 * poisoned with NaN, each output followed by a poisoned guard band (and,
 * in padded cases, its padding) that must keep its bits, C unchanged where
 * D is apart, D against the formula, aux against bf16 of the exact z,
 * bias_grad against the fp64 column sums.
 *
 * - sweep: every kind x activation x bias (none, per column, per row; fp32
 *   and bf16) x type of D x D in place or apart, each at one of the edge
 *   shapes M in {1, 7, 64, 130}, N in {2, 6, 130, 258}, K in {1, 5, 64,
 *   200} (walked so that every value of each comes up), with ops, aux,
 *   bias_grad, the up half (split or halves), beta and padding varying
 *   from case to case;
 * - shapes: every one of the 64 edge shapes for each kind;
 * - tiles: every kind and activation at shapes of many tiles and at few
 *   tiles with a long K (split over K);
 * - skinny: k40_skinny's decode shapes (op_a N, op_b T, M 1 to 64, N odd
 *   and N/2 odd, K off its chunk) and a shape for each path of its plan;
 * - bias_grad_bits: bias_grad of one problem bit-identical over 100 runs,
 *   the last 50 with split-K off (no kernel workspace);
 * - refusals: an odd N for gated, a backward kind without aux, bias_grad
 *   with bias_act, gated_backward with beta != 0: TK_ERR_INVALID_VALUE, and
 *   D, C, aux and bias_grad keep every bit.
 * Every case must run on auto and k01_naive (a refusal of a valid case
 * fails); the fused kernels (k30_wgmma_tma, k31_wgmma_cluster, k40_skinny,
 * k20_mma_sync, k21_mma_fastload) run the cases they take (k30, k31: TMA's
 * aligned strides, the fused kinds; k40: op_a N, op_b T, no bias_grad;
 * k20, k21: every kind, but A and B 16-byte aligned with leading
 * dimensions multiples of 8) and may refuse the others, counted and
 * printed, but must pass each they run and run some of each test (on a
 * GPU below sm_90 the Hopper kernels refuse every case: name the kernels
 * with TK_EPI_KERNELS there).
 *
 *   build/tests/gpu_test_epilogue [name-substring]
 *   TK_EPI_KERNELS=k01_naive,k31_wgmma_cluster build/tests/gpu_test_epilogue
 *   TK_EPI_KERNELS=k20_mma_sync,k21_mma_fastload build/tests/gpu_test_epilogue */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lab/lab.h"
#include "../host/check.h"

#define MAX_KERNELS 8
#define GRAD_RUNS 100

static tk_lab_verify *v;
static tk_handle h;
static const char *kernels[MAX_KERNELS];
static int nkernels;

static const int64_t Ms[] = { 1, 7, 64, 130 }, Ns[] = { 2, 6, 130, 258 }, Ks[] = { 1, 5, 64, 200 };
static const int kinds[] = { TK_EPI_BIAS_ACT, TK_EPI_GATED, TK_EPI_BACKWARD, TK_EPI_GATED_BACKWARD };

static int verified;   /* runs that passed verify: printed per test, so a silent sweep shows what it did */
static int ran[MAX_KERNELS], refused[MAX_KERNELS];   /* per kernel, in the current test */

/* Whether kernel must take every valid case (auto, k01_naive). */
static int takes_all(const char *kernel) { return !strcmp(kernel, "auto") || !strcmp(kernel, "k01_naive"); }

/* Whether kernel must take bias_grad_bits' problems: those, and the
 * sm_80+ kernels, which take bias_grad at its aligned strides. */
static int takes_grad(const char *kernel)
{
    return takes_all(kernel) || !strcmp(kernel, "k20_mma_sync") || !strcmp(kernel, "k21_mma_fastload");
}

/* One case on every kernel: must run and pass (a fused kernel may refuse). */
static void run_case(const tk_lab_case *c, const tk_lab_epi *e)
{
    for (int i = 0; i < nkernels; i++) {
        tk_lab_epi_result r;
        tk_lab_epi_verify_run(v, kernels[i], c, e, &r);
        verified += r.outcome == 0;
        ran[i] += r.outcome == 0;
        if (r.outcome == 2 && r.status == TK_ERR_NOT_SUPPORTED && !takes_all(kernels[i])) {
            refused[i]++;
            continue;
        }
        if (r.outcome != 0) {
            tk_lab_epi_verify_print(stdout, kernels[i], c, e, &r);
            char name[128], epi[128];
            tk_lab_case_name(c, name, sizeof name);
            tk_lab_epi_name(e, epi, sizeof epi);
            CHECK(0, "%s %s | %s: outcome %d (%s)", kernels[i], name, epi, r.outcome, r.msg);
        }
    }
}

/* The test's counts, per kernel; each kernel must have run some case. */
static void report(const char *test)
{
    printf("%s: %d runs verified against fp64\n", test, verified);
    for (int i = 0; i < nkernels; i++) {
        printf("  %-20s %4d passed, %4d refused\n", kernels[i], ran[i], refused[i]);
        CHECK(ran[i] > 0, "%s: %s ran none of the cases", test, kernels[i]);
        ran[i] = refused[i] = 0;
    }
    verified = 0;
}

static void case_init(tk_lab_case *c, int64_t m, int64_t n, int64_t k, unsigned t)
{
    memset(c, 0, sizeof *c);
    c->layout = TK_ROW_MAJOR;
    c->op_a = t & 1 ? TK_OP_T : TK_OP_N;
    c->op_b = t & 2 ? TK_OP_N : TK_OP_T;
    c->m = m;
    c->n = n;
    c->k = k;
    c->alpha = t % 3 == 0 ? 1.0f : 0.75f;
    c->beta = t % 4 == 1 ? 0.5f : 0.0f;
    c->out = TK_F32;
    c->seed = 1000 + t;
    c->pad = (t >> 2) & 1;
}

/* kind x act x bias (5 forms) x out x D: 400 cases at walked edge shapes. */
static void sweep(void)
{
    unsigned t = 0;
    for (int ki = 0; ki < 4; ki++)
        for (int act = TK_ACT_NONE; act <= TK_ACT_SILU; act++)
            for (int bias = 0; bias < 5; bias++)
                for (int out = 0; out < 2; out++)
                    for (int apart = 0; apart < 2; apart++, t++) {
                        tk_lab_case c;
                        case_init(&c, Ms[t % 4], Ns[(t / 4) % 4], Ks[(t / 16) % 4], t);
                        c.out = out ? TK_BF16 : TK_F32;
                        tk_lab_epi e = { 0 };
                        e.kind = kinds[ki];
                        e.act = act;
                        e.bias = bias == 0 ? 0 : bias <= 2 ? 1 : 2;
                        e.bias_bf16 = bias == 2 || bias == 4;
                        e.d_apart = apart;
                        e.aux = e.kind >= TK_EPI_BACKWARD || (t / 2) % 2;
                        e.bias_grad = e.kind >= TK_EPI_BACKWARD && (t / 3) % 2;
                        e.up_split = e.kind == TK_EPI_GATED && (t / 5) % 2;
                        if (e.kind == TK_EPI_GATED_BACKWARD)
                            c.beta = 0.0f;   /* tilekit.h: beta must be 0 */
                        if (e.kind >= TK_EPI_BACKWARD)
                            e.bias = 0;      /* the backward kinds take no bias: only the first form is new */
                        if (e.kind >= TK_EPI_BACKWARD && bias)
                            continue;
                        if (e.kind != TK_EPI_BIAS_ACT && act == TK_ACT_NONE)
                            continue;   /* refused by tilekit.h's rule: the other kinds need an activation */
                        run_case(&c, &e);
                    }
    report("sweep");
}

/* Every edge shape for each kind (silu, a column bias, aux, bias_grad). */
static void shapes(void)
{
    unsigned t = 0;
    for (int ki = 0; ki < 4; ki++)
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++)
                for (int k = 0; k < 4; k++, t++) {
                    tk_lab_case c;
                    case_init(&c, Ms[a], Ns[b], Ks[k], t);
                    c.out = t & 8 ? TK_BF16 : TK_F32;
                    tk_lab_epi e = { 0 };
                    e.kind = kinds[ki];
                    e.act = 1 + (int)(t % 4);
                    e.bias = e.kind < TK_EPI_BACKWARD ? 1 + (int)(t % 2) : 0;
                    e.aux = 1;
                    e.bias_grad = e.kind >= TK_EPI_BACKWARD;
                    e.d_apart = (t >> 4) & 1;
                    e.up_split = e.kind == TK_EPI_GATED && (t & 1);
                    if (e.kind == TK_EPI_GATED_BACKWARD)
                        c.beta = 0.0f;
                    run_case(&c, &e);
                }
    report("shapes");
}


/* Many tiles and the split over K: every fused kind and activation at
 * shapes of several 128 x 256 tiles each way (edges off the tile) and at
 * few tiles with a long K (the Hopper kernels split K there and the
 * epilogue runs on the gathered sum, on the tile's owner). */
static void tiles(void)
{
    static const int64_t sh[][3] = { { 520, 1032, 264 }, { 1030, 776, 136 }, { 256, 512, 8192 }, { 130, 264, 4104 } };
    unsigned t = 0;
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
        for (int ki = 0; ki < 4; ki++)   /* every kind: k30 fuses them all, k31 all but the gated ones */
            for (int act = TK_ACT_RELU; act <= TK_ACT_SILU; act++, t++) {
                tk_lab_case c;
                case_init(&c, sh[s][0], sh[s][1], sh[s][2], t);
                c.out = t & 1 ? TK_BF16 : TK_F32;
                tk_lab_epi e = { 0 };
                e.kind = kinds[ki];
                e.act = act;
                e.bias = e.kind < TK_EPI_BACKWARD ? 1 + (int)(t % 2) : 0;
                if (e.kind == TK_EPI_GATED_BACKWARD)
                    c.beta = 0.0f;   /* tilekit.h: beta must be 0 */
                e.up_split = e.kind == TK_EPI_GATED && (t & 4);
                e.bias_bf16 = (t >> 1) & 1;
                e.aux = 1;
                e.d_apart = c.beta == 0.0f && (t & 2);
                run_case(&c, &e);
            }
    report("tiles");
}

/* k40_skinny's territory (decode: op_a N, op_b T, M up to 64, and the
 * swapped form with N small) and each of its paths: every kind at M in
 * {1, 7, 16, 64} x N in {6 (gated: N/2 odd), 130, 333 (odd: gated is
 * skipped, refused by tilekit.h's rule), 2050} with K walked over {5,
 * 200, 1001, 4104} (never a multiple of k40's 32-k chunk but 200's
 * neighbours; 1001 with tight rows: element loads); then shapes picked
 * for k40's plans (k40_plan.h): the TMA ring with one, two and four token
 * fragments (sm_90), the tokens staged in shared memory, the split over K
 * (the epilogue on the last split's fixed-order sum), two warps a slab
 * with six-chunk steps, and the swapped form. Bias forms, aux, D in place
 * or apart, beta, the up half and the output type vary from case to case;
 * bias_grad in a few (k40 refuses it: the others run them). */
static void skinny(void)
{
    static const int64_t sm[] = { 1, 7, 16, 64 }, sn[] = { 6, 130, 333, 2050 }, sk[] = { 5, 200, 1001, 4104 };
    static const int64_t paths[][3] = {
        { 1, 4096, 4096 },   /* the ring, one token fragment (gated: two 8-row boxes a stage) */
        { 16, 4096, 4104 },  /* the ring, two fragments, and the chunk across the K edge */
        { 32, 4096, 4096 },  /* the ring, a full block of 32 tokens */
        { 64, 2048, 4096 },  /* tokens staged in shared memory, eight fragments */
        { 24, 4096, 2048 },  /* staged, four fragments */
        { 16, 1024, 8200 },  /* split over K */
        { 1, 20000, 768 },   /* four warps a slab, six-chunk steps */
        { 9, 20000, 760 },   /* two warps a slab */
        { 4096, 16, 1000 },  /* swapped: the weights are A's rows (gated: refused by k40) */
    };
    const size_t nshape = 4 * 4 + sizeof paths / sizeof paths[0];
    unsigned t = 0;
    for (int ki = 0; ki < 4; ki++)
        for (size_t s = 0; s < nshape; s++, t++) {
            int64_t m, n, k;
            if (s < 16) {
                m = sm[s % 4];
                n = sn[s / 4];
                k = sk[(s + (size_t)ki) % 4];
            } else {
                m = paths[s - 16][0];
                n = paths[s - 16][1];
                k = paths[s - 16][2];
            }
            if (kinds[ki] == TK_EPI_GATED && n % 2)
                continue;
            tk_lab_case c;
            case_init(&c, m, n, k, t);
            c.op_a = TK_OP_N;
            c.op_b = TK_OP_T;
            c.pad = k == 1001 ? 0 : (t >> 1) & 1;
            c.out = t & 1 ? TK_BF16 : TK_F32;
            tk_lab_epi e = { 0 };
            e.kind = kinds[ki];
            e.act = kinds[ki] == TK_EPI_GATED ? (t % 3 ? TK_ACT_SILU : TK_ACT_GELU_TANH) : 1 + (int)(t % 4);
            e.bias = e.kind < TK_EPI_BACKWARD ? (int)(t % 3) : 0;
            e.bias_bf16 = (t >> 2) & 1;
            e.aux = e.kind >= TK_EPI_BACKWARD || (t % 5) < 3;
            e.bias_grad = e.kind >= TK_EPI_BACKWARD && t % 7 == 0;
            e.up_split = e.kind == TK_EPI_GATED && (t & 2);
            e.d_apart = (t >> 3) & 1;
            if (e.kind == TK_EPI_GATED_BACKWARD)
                c.beta = 0.0f;   /* tilekit.h: beta must be 0 */
            run_case(&c, &e);
        }
    report("skinny");
}

/* ---- direct calls: bias_grad's bits, refusals ---- */

typedef struct dbufs {
    void *a, *b, *c, *d, *aux, *grad, *bias;
    void *img_c, *img_d, *img_aux, *img_grad, *got;
    size_t c_bytes, aux_bytes, grad_bytes;
} dbufs;

static void dbufs_free(dbufs *x)
{
    cudaFree(x->a); cudaFree(x->b); cudaFree(x->c); cudaFree(x->d); cudaFree(x->aux); cudaFree(x->grad);
    cudaFree(x->bias);
    free(x->img_c); free(x->img_d); free(x->img_aux); free(x->img_grad); free(x->got);
}

/* A row-major M x N x K problem (op_a N, op_b N, fp32 C) with D apart,
 * aux (M x 2N: room for every kind), bias_grad (2N) and a bias (N + M),
 * all but the inputs poisoned (0xFF bytes: NaN in both types). */
static int dbufs_make(dbufs *x, int64_t m, int64_t n, int64_t k, tk_gemm_desc *d)
{
    memset(x, 0, sizeof *x);
    x->c_bytes = (size_t)(m * 2 * n) * 4;
    x->aux_bytes = (size_t)(m * 2 * n) * 2;
    x->grad_bytes = (size_t)(2 * n) * 4;
    size_t na = (size_t)(m * k), nb = (size_t)(k * n);
    if (cudaMalloc(&x->a, na * 2) || cudaMalloc(&x->b, nb * 2) || cudaMalloc(&x->c, x->c_bytes) ||
        cudaMalloc(&x->d, x->c_bytes) || cudaMalloc(&x->aux, x->aux_bytes) || cudaMalloc(&x->grad, x->grad_bytes) ||
        cudaMalloc(&x->bias, (size_t)(n + m) * 4))
        return -1;
    x->img_c = malloc(x->c_bytes);
    x->img_d = malloc(x->c_bytes);
    x->img_aux = malloc(x->aux_bytes);
    x->img_grad = malloc(x->grad_bytes);
    x->got = malloc(x->c_bytes);
    if (!x->img_c || !x->img_d || !x->img_aux || !x->img_grad || !x->got)
        return -1;
    if (tk_lab_fill_device(x->a, TK_BF16, na, 11, NULL) || tk_lab_fill_device(x->b, TK_BF16, nb, 12, NULL) ||
        tk_lab_fill_device(x->c, TK_F32, (size_t)(m * 2 * n), 13, NULL) ||
        tk_lab_fill_device(x->aux, TK_BF16, (size_t)(m * 2 * n), 14, NULL) ||
        tk_lab_fill_device(x->bias, TK_F32, (size_t)(n + m), 15, NULL) || cudaMemset(x->d, 0xff, x->c_bytes) ||
        cudaMemset(x->grad, 0xff, x->grad_bytes) || cudaDeviceSynchronize())
        return -1;
    memset(d, 0, sizeof *d);
    d->size = sizeof *d;
    tk_gemm_problem *p = &d->problem;
    p->layout = TK_ROW_MAJOR;
    p->op_a = p->op_b = TK_OP_N;
    p->m = m;
    p->n = n;
    p->k = k;
    p->alpha = 1.0f;
    p->a = x->a;
    p->lda = k;
    p->b = x->b;
    p->ldb = n;
    p->c = x->c;
    p->ldc = 2 * n;
    p->c_type = TK_F32;
    d->d = x->d;
    d->ldd = 2 * n;
    d->aux = x->aux;
    d->ldaux = 2 * n;
    return 0;
}

static int dbufs_snap(const dbufs *x)
{
    return cudaMemcpy(x->img_c, x->c, x->c_bytes, cudaMemcpyDeviceToHost) ||
           cudaMemcpy(x->img_d, x->d, x->c_bytes, cudaMemcpyDeviceToHost) ||
           cudaMemcpy(x->img_aux, x->aux, x->aux_bytes, cudaMemcpyDeviceToHost) ||
           cudaMemcpy(x->img_grad, x->grad, x->grad_bytes, cudaMemcpyDeviceToHost);
}

/* Whether dev still holds img's bytes. */
static int same(void *got, const void *dev, const void *img, size_t bytes)
{
    return !cudaMemcpy(got, dev, bytes, cudaMemcpyDeviceToHost) && !memcmp(got, img, bytes);
}

/* bias_grad of one problem bit-identical over GRAD_RUNS runs, the last
 * half with split-K off (tk_set_split_k: no kernel workspace, so k20 and
 * k21 add their sums a launch a tile row instead of in partial sums: the
 * same bits). 130 x 264 x 200: leading dimensions the sm_80+ kernels
 * take (which must run it, takes_grad), two tile rows and an edge tile. */
static void bias_grad_bits(void)
{
    const int64_t n = 264;
    for (int i = 0; i < nkernels; i++)
        for (int ki = 2; ki < 4; ki++) {
            dbufs x;
            tk_gemm_desc d;
            CHECK(!dbufs_make(&x, 130, n, 200, &d), "buffers: %s", cudaGetErrorString(cudaGetLastError()));
            d.epilogue = kinds[ki];
            d.activation = TK_ACT_GELU_TANH;
            d.bias_grad = (float *)x.grad;
            float *first = malloc(x.grad_bytes), *now = malloc(x.grad_bytes);
            CHECK(first && now, "out of host memory");
            for (int run = 0; first && now && run < GRAD_RUNS; run++) {
                if (run == GRAD_RUNS / 2)
                    CHECK(tk_set_split_k(h, TK_SPLIT_K_NEVER) == TK_SUCCESS, "split-K off: %s", tk_last_error(h));
                tk_status st = tk_gemm_run(h, &d, kernels[i], NULL);
                if (st == TK_ERR_NOT_SUPPORTED && !takes_grad(kernels[i]) && run == 0) {
                    printf("bias_grad_bits: %s refuses %s (%s)\n", kernels[i], tk_lab_epi_kind_name(kinds[ki]),
                           tk_last_error(h));
                    break;
                }
                if (st || cudaDeviceSynchronize() ||
                    cudaMemcpy(run ? now : first, x.grad, x.grad_bytes, cudaMemcpyDeviceToHost)) {
                    CHECK(0, "%s %s run %d: %s: %s", kernels[i], tk_lab_epi_kind_name(kinds[ki]), run,
                          tk_status_string(st), tk_last_error(h));
                    break;
                }
                size_t used = (size_t)(ki == 3 ? 2 * n : n) * 4;
                if (run && memcmp(first, now, used)) {
                    CHECK(0, "%s %s: bias_grad of run %d%s differs from run 0's", kernels[i],
                          tk_lab_epi_kind_name(kinds[ki]), run, run >= GRAD_RUNS / 2 ? " (split-K off)" : "");
                    break;
                }
            }
            CHECK(tk_set_split_k(h, TK_SPLIT_K_AUTO) == TK_SUCCESS, "split-K back on: %s", tk_last_error(h));
            free(first);
            free(now);
            dbufs_free(&x);
        }
}

/* One refusal: TK_ERR_INVALID_VALUE, and no output changed. */
static void refuse(const char *what, int kind, int64_t n, int no_aux, int grad, float beta)
{
    for (int i = 0; i < nkernels; i++) {
        dbufs x;
        tk_gemm_desc d;
        CHECK(!dbufs_make(&x, 7, n, 5, &d), "buffers: %s", cudaGetErrorString(cudaGetLastError()));
        d.epilogue = kind;
        d.activation = TK_ACT_SILU;
        d.problem.beta = beta;
        if (no_aux) {
            d.aux = NULL;
            d.ldaux = 0;
        }
        if (grad)
            d.bias_grad = (float *)x.grad;
        CHECK(!dbufs_snap(&x), "snapshot");
        tk_status st = tk_gemm_run(h, &d, kernels[i], NULL);
        CHECK(!cudaDeviceSynchronize(), "%s %s: CUDA error", kernels[i], what);
        CHECK(st == TK_ERR_INVALID_VALUE, "%s %s: %s (%s), expected TK_ERR_INVALID_VALUE", kernels[i], what,
              tk_status_string(st), tk_last_error(h));
        CHECK(same(x.got, x.d, x.img_d, x.c_bytes), "%s %s: D changed", kernels[i], what);
        CHECK(same(x.got, x.c, x.img_c, x.c_bytes), "%s %s: C changed", kernels[i], what);
        CHECK(same(x.got, x.aux, x.img_aux, x.aux_bytes), "%s %s: aux changed", kernels[i], what);
        CHECK(same(x.got, x.grad, x.img_grad, x.grad_bytes), "%s %s: bias_grad changed", kernels[i], what);
        dbufs_free(&x);
    }
}

static void refusals(void)
{
    refuse("gated, odd N", TK_EPI_GATED, 7, 0, 0, 0.0f);
    refuse("backward without aux", TK_EPI_BACKWARD, 6, 1, 0, 0.0f);
    refuse("gated_backward without aux", TK_EPI_GATED_BACKWARD, 6, 1, 0, 0.0f);
    refuse("bias_grad with bias_act", TK_EPI_BIAS_ACT, 6, 0, 1, 0.0f);
    refuse("gated_backward, beta != 0", TK_EPI_GATED_BACKWARD, 6, 0, 0, 0.5f);
    /* the same odd N through verify: reported as a refusal, every output untouched */
    tk_lab_case c;
    case_init(&c, 7, 7, 5, 1);
    c.pad = 1;
    tk_lab_epi e = { .kind = TK_EPI_GATED, .act = TK_ACT_SILU, .bias = 1, .aux = 1, .d_apart = 1 };
    for (int i = 0; i < nkernels; i++) {
        tk_lab_epi_result r;
        tk_lab_epi_verify_run(v, kernels[i], &c, &e, &r);
        CHECK(r.outcome == 2 && r.status == TK_ERR_INVALID_VALUE && !r.guard_writes,
              "%s verify of an odd N for gated: outcome %d, %s, %lld writes (%s)", kernels[i], r.outcome,
              tk_status_string(r.status), (long long)r.guard_writes, r.msg);
    }
}

static void no_gpu(void) { CHECK(0, "a GPU suite without a GPU fails"); }

void tk_tests(void)
{
    int ndev = 0;
    char why[TK_LAB_MSG_LEN];
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0 || tk_create(&h) != TK_SUCCESS || tk_lab_verify_open(&v, why, sizeof why)) {
        printf("no GPU: %s %s\n", cudaGetErrorString(e), tk_last_error(NULL));
        tk_run_test("epilogue_needs_a_gpu", no_gpu);
        tk_destroy(h);
        return;
    }
    tk_lab_verify_set_cublas(v, 0);   /* the fp64 reference alone judges */
    nkernels = tk_test_kernels_from_env("TK_EPI_KERNELS", kernels, MAX_KERNELS);
    if (nkernels == 0) {
        kernels[nkernels++] = "auto";
        kernels[nkernels++] = "k01_naive";
        kernels[nkernels++] = "k30_wgmma_tma";       /* the fused Hopper instances */
        kernels[nkernels++] = "k31_wgmma_cluster";
        kernels[nkernels++] = "k40_skinny";          /* decode: op_a N, op_b T */
        kernels[nkernels++] = "k20_mma_sync";        /* the fused sm_80+ instances (k20_core.cuh) */
        kernels[nkernels++] = "k21_mma_fastload";
    }
    TK_TEST(sweep);
    TK_TEST(shapes);
    TK_TEST(tiles);
    TK_TEST(skinny);
    TK_TEST(bias_grad_bits);
    TK_TEST(refusals);
    tk_lab_verify_close(v);
    tk_destroy(h);
}
