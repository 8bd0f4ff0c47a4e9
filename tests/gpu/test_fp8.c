/* test_fp8 - FP8 operands through tk_gemm_run on the device (issue 40):
 * every kernel that takes them against the fp64 reference of the
 * dequantized terms (lab_f8verify.c), C NaN-poisoned between guard bands.
 *
 *   gpu_test_fp8 [name-substring]
 *   TK_FP8_KERNELS=auto,k01_naive,k33_wgmma_128x128,k31_wgmma_cluster,k45_cluster_128x128,k36_swap_16x64,
 *     k36_swap_32x64,k36_swap_48x64,k36_swap_64x64,k36_swap_72x64 gpu_test_fp8   (the default)
 *
 * sweep: the four format pairings x the three scale modes x both ops and
 * layouts (block scales: row-major only, K a multiple of 128; the
 * column-major call must be refused with C untouched) over edge shapes (M
 * 1, 7, 130; N 1, 9, 258; K 1, 5, 200 or 128, 384), fp32 and bf16 C, beta
 * 0.5 in some, padded leading dimensions in half; exact: integer codes
 * with power-of-two scales must come back exact in fp32 C; tiles: shapes
 * of many tiles, split long K and decode, K-major; small_m: the swapped
 * tiles' edges (odd k-tile counts, tokens past a tile, split units);
 * long_k: K = 32768 within the tolerance. */
#include <stdio.h>
#include <string.h>
#include "tilekit.h"
#include "lab/lab.h"
#include "../host/check.h"

#define MAX_KERNELS 16

static const char *kernels[MAX_KERNELS];
static int nkernels;
static tk_lab_verify *v;
static int ran[MAX_KERNELS], refused[MAX_KERNELS];

/* Whether kernel must take every valid case (auto, k01_naive); the fast
 * kernels may refuse a layout they do not read (op_a T, op_b N), with C
 * untouched. */
static int takes_all(const char *kernel) { return !strcmp(kernel, "auto") || !strcmp(kernel, "k01_naive"); }

static void run(const tk_lab_case *c, const tk_lab_f8 *f, int must_refuse)
{
    for (int i = 0; i < nkernels; i++) {
        tk_lab_f8_result r;
        tk_lab_f8_verify_run(v, kernels[i], c, f, &r);
        const int refusal = r.outcome == 2 && r.status == TK_ERR_NOT_SUPPORTED;
        if (refusal && !must_refuse && !takes_all(kernels[i])) {
            refused[i]++;
            continue;
        }
        int ok = must_refuse ? refusal : r.outcome == 0;
        ran[i] += ok;
        if (!ok || r.outcome == 1) {
            tk_lab_f8_verify_print(stdout, kernels[i], c, f, &r);
            char name[160], fn[64];
            tk_lab_case_name(c, name, sizeof name);
            tk_lab_f8_name(f, fn, sizeof fn);
            CHECK(0, "%s %s | %s: outcome %d%s (%s)", kernels[i], name, fn, r.outcome,
                  must_refuse ? ", expected a refusal" : "", r.msg);
        }
    }
}

static void report(const char *test)
{
    for (int i = 0; i < nkernels; i++) {
        printf("  %s %-18s %4d passed, %4d refused\n", test, kernels[i], ran[i], refused[i]);
        CHECK(ran[i] > 0, "%s: %s ran none", test, kernels[i]);
        ran[i] = refused[i] = 0;
    }
}

static void case_init(tk_lab_case *c, int64_t m, int64_t n, int64_t k, unsigned t)
{
    memset(c, 0, sizeof *c);
    c->layout = (t >> 3) & 1 ? TK_COL_MAJOR : TK_ROW_MAJOR;
    c->op_a = t & 1 ? TK_OP_T : TK_OP_N;
    c->op_b = t & 2 ? TK_OP_N : TK_OP_T;
    c->m = m, c->n = n, c->k = k;
    c->alpha = t % 3 == 0 ? 1.0f : 0.75f;
    c->beta = t % 5 == 1 ? 0.5f : 0.0f;
    c->out = (t >> 2) & 1 ? TK_BF16 : TK_F32;
    c->seed = 4000 + t;
    c->pad = (t >> 4) & 1;
}

static void sweep(void)
{
    static const int64_t Ms[] = { 1, 7, 130 }, Ns[] = { 1, 9, 258 }, Ks[] = { 1, 5, 200 }, Kb[] = { 128, 384 };
    unsigned t = 0;
    for (int fa = 0; fa < 2; fa++)
        for (int fb = 0; fb < 2; fb++)
            for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++)
                for (int s = 0; s < 9; s++, t++) {
                    tk_lab_case c;
                    const int64_t k = mode == TK_SCALE_BLOCK ? Kb[s % 2] : Ks[(s + t) % 3];
                    case_init(&c, Ms[s % 3], Ns[(s / 3 + t) % 3], k, t * 7 + (unsigned)s);
                    tk_lab_f8 f = { fa ? TK_LAB_E5M2 : TK_LAB_E4M3, fb ? TK_LAB_E5M2 : TK_LAB_E4M3, mode, 0 };
                    run(&c, &f, mode == TK_SCALE_BLOCK && c.layout == TK_COL_MAJOR);
                }
    report("sweep");
}

static void exact(void)
{
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++)
        for (unsigned t = 0; t < 4; t++) {
            tk_lab_case c;
            case_init(&c, 67, 131, mode == TK_SCALE_BLOCK ? 512 : 320, t);   /* K a multiple of 16: the fast kernels take t = 0 */
            c.layout = TK_ROW_MAJOR, c.out = TK_F32, c.alpha = 1.0f, c.beta = 0.0f;
            tk_lab_f8 f = { t & 1 ? TK_LAB_E5M2 : TK_LAB_E4M3, t & 2 ? TK_LAB_E5M2 : TK_LAB_E4M3, mode, 1 };
            run(&c, &f, 0);
        }
    report("exact");
}

/* Shapes of several tiles, K-major operands (the fast kernels' layout):
 * many tiles with edges in M, N and K (K not a multiple of 128 but for
 * block scales), a few tiles over long K (split into slices), decode. */
static void tiles(void)
{
    static const int64_t shapes[][3] = { { 520, 1000, 1000 }, { 130, 1024, 8192 }, { 1, 4096, 4096 }, { 300, 136, 384 } };
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++)
        for (unsigned t = 0; t < 4; t++) {
            tk_lab_case c;
            const int64_t k = mode == TK_SCALE_BLOCK ? (shapes[t][2] + 127) / 128 * 128 : shapes[t][2];
            case_init(&c, shapes[t][0], shapes[t][1], k, t * 4);
            c.layout = TK_ROW_MAJOR, c.op_a = TK_OP_N, c.op_b = TK_OP_T;
            tk_lab_f8 f = { t == 3 ? TK_LAB_E5M2 : TK_LAB_E4M3, t == 2 ? TK_LAB_E5M2 : TK_LAB_E4M3, mode, 0 };
            run(&c, &f, 0);
        }
    report("tiles");
}

/* The swapped small-M tiles (k36_swap_*'s FP8 instances) at their edges:
 * auto's split 32 x 64 tiles (64 x 2112 x 7168), an odd number of k-tiles
 * (5 and 9: the last stage's second half past K), tokens and B rows past
 * the tile edges (37 x 200, 100 x 520: 72-row tiles' second row of tiles
 * 28 tokens), a DRAM stream of B (16 x 4096 x 4096); every format pairing
 * and scale mode. */
static void small_m(void)
{
    static const int64_t shapes[][3] = { { 64, 2112, 7168 }, { 37, 200, 640 }, { 100, 520, 1152 }, { 16, 4096, 4096 } };
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++)
        for (unsigned t = 0; t < 4; t++) {
            tk_lab_case c;
            case_init(&c, shapes[t][0], shapes[t][1], shapes[t][2], t * 4 + 1);
            c.layout = TK_ROW_MAJOR, c.op_a = TK_OP_N, c.op_b = TK_OP_T;
            tk_lab_f8 f = { t & 1 ? TK_LAB_E5M2 : TK_LAB_E4M3, t & 2 ? TK_LAB_E5M2 : TK_LAB_E4M3, mode, 0 };
            run(&c, &f, 0);
        }
    report("small_m");
}

static void long_k(void)
{
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++) {
        tk_lab_case c;
        case_init(&c, 64, 72, 32768, 0);
        c.layout = TK_ROW_MAJOR;
        tk_lab_f8 f = { TK_LAB_E4M3, TK_LAB_E4M3, mode, 0 };
        run(&c, &f, 0);
    }
    report("long_k");
}

void tk_tests(void)
{
    char why[256];
    if (tk_lab_verify_open(&v, why, sizeof why)) {
        printf("no GPU: %s\n", why);
        return;
    }
    tk_lab_verify_set_cublas(v, 0);
    nkernels = tk_test_kernels_from_env("TK_FP8_KERNELS", kernels, MAX_KERNELS);
    if (!nkernels) {
        kernels[nkernels++] = "auto";
        kernels[nkernels++] = "k01_naive";
        kernels[nkernels++] = "k33_wgmma_128x128";     /* the FP8 instances (k30_fp8.cu, */
        kernels[nkernels++] = "k31_wgmma_cluster";     /* k31_wgmma_cluster.cu) */
        kernels[nkernels++] = "k45_cluster_128x128";
        kernels[nkernels++] = "k36_swap_16x64";        /* the swapped small-M ones (k30_fp8_swap.cu) */
        kernels[nkernels++] = "k36_swap_32x64";
        kernels[nkernels++] = "k36_swap_48x64";
        kernels[nkernels++] = "k36_swap_64x64";
        kernels[nkernels++] = "k36_swap_72x64";
    }
    TK_TEST(sweep);
    TK_TEST(exact);
    TK_TEST(tiles);
    TK_TEST(small_m);
    TK_TEST(long_k);
    tk_lab_verify_close(v);
}
