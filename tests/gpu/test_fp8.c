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
 * long_k: K = 32768 within the tolerance; copies: the route's copy kernels
 * (util.cu) byte for byte: 1-byte-unit copies and transposes at every
 * alignment of source and destination, edges, a mixed launch, bytes past
 * each line untouched; routed: mid-size problems of every layout (NN, NT,
 * TN, TT, row- and column-major, packed and padded, each legal scale mode)
 * through auto, against the reference as the sweep checks them, and on a
 * fast kernel (through K-major copies where the layout or alignment needs
 * them), never k01_naive; grouped: many FP8 products (tk_gemm_desc
 * version 5: mixture-of-experts rows and batches, each scale mode, empty
 * groups, a group of one row, C NaN-poisoned, bad offsets) on auto,
 * k01_naive and k43's FP8 instances against tk_lab_ref_grouped_fp8, auto
 * routed to k43 where K % 16 == 0 and to k01_naive elsewhere, k43 refusing
 * K % 16 != 0 and the lines without FP8 instances, a dense FP8 kernel
 * refusing many products (gpu_test_fp8 grouped). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lib/internal.h"
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

/* ---- the route's copies, byte for byte ---- */

/* Byte i of the test pattern (no period short enough to hide a shift). */
static uint8_t pat(size_t i) { return (uint8_t)(tk_lab_mix64(i) >> 17); }

#define COPY_POISON 0xab

/* Runs the jobs on device buffers, source bytes pat(i), destination
 * COPY_POISON, and checks every destination byte: the source's where the
 * job writes (transposed or not), the poison elsewhere (padding, before and
 * after). Each job's src and dst are given as byte offsets into their own
 * buffer (any alignment). */
static void copy_check(const char *label, const tk_copy_job *jin, const size_t *src_off, const size_t *dst_off,
                       int n, int transpose)
{
    tk_copy_job job[TK_COPY_JOBS];
    uint8_t *ds[TK_COPY_JOBS] = { 0 }, *dd[TK_COPY_JOBS] = { 0 }, *hs[TK_COPY_JOBS] = { 0 }, *hd[TK_COPY_JOBS] = { 0 };
    size_t ns[TK_COPY_JOBS] = { 0 }, nd[TK_COPY_JOBS] = { 0 };
    int ok = 1;
    for (int q = 0; q < n; q++) {
        job[q] = jin[q];
        const size_t eb = job[q].elem_bytes;
        const int64_t drows = transpose ? job[q].cols : job[q].rows;
        ns[q] = src_off[q] + (size_t)(job[q].rows * job[q].lds) * eb + 64;
        nd[q] = dst_off[q] + (size_t)(drows * job[q].ldd) * eb + 64;
        hs[q] = malloc(ns[q]);
        hd[q] = malloc(nd[q]);
        ok = ok && hs[q] && hd[q] && !cudaMalloc((void **)&ds[q], ns[q]) && !cudaMalloc((void **)&dd[q], nd[q]);
        if (!ok)
            break;
        for (size_t i = 0; i < ns[q]; i++)
            hs[q][i] = pat(i + 1000003u * (size_t)q);
        memset(hd[q], COPY_POISON, nd[q]);
        ok = !cudaMemcpy(ds[q], hs[q], ns[q], cudaMemcpyHostToDevice) &&
             !cudaMemcpy(dd[q], hd[q], nd[q], cudaMemcpyHostToDevice);
        job[q].src = ds[q] + src_off[q];
        job[q].dst = dd[q] + dst_off[q];
    }
    CHECK(ok, "%s: buffers: %s", label, cudaGetErrorString(cudaGetLastError()));
    char why[TK_MSG_LEN] = "";
    tk_status st = TK_ERR_CUDA;
    if (ok) {
        st = transpose ? tk_launch_transpose_2d_jobs(job, n, NULL, why, sizeof why)
                       : tk_launch_copy_2d_jobs(job, n, NULL, why, sizeof why);
        CHECK(st == TK_SUCCESS && !cudaDeviceSynchronize(), "%s: %s (%s; %s)", label, tk_status_string(st), why,
              cudaGetErrorString(cudaGetLastError()));
    }
    for (int q = 0; ok && st == TK_SUCCESS && q < n; q++) {
        CHECK(!cudaMemcpy(hd[q], dd[q], nd[q], cudaMemcpyDeviceToHost), "%s: copy back", label);
        const size_t eb = job[q].elem_bytes;
        const int64_t drows = transpose ? job[q].cols : job[q].rows, dcols = transpose ? job[q].rows : job[q].cols;
        int64_t bad = 0, first = -1;
        for (size_t i = 0; i < nd[q]; i++) {
            /* the destination element and byte this is, if any */
            const int64_t o = (int64_t)i - (int64_t)dst_off[q];
            const int64_t e = o >= 0 ? o / (int64_t)eb : -1, b = o >= 0 ? o % (int64_t)eb : 0;
            const int64_t r = e >= 0 ? e / job[q].ldd : -1, c = e >= 0 ? e % job[q].ldd : -1;
            int want = COPY_POISON;
            if (e >= 0 && r < drows && c < dcols) {
                const int64_t sr = transpose ? c : r, sc = transpose ? r : c;
                want = pat(src_off[q] + (size_t)((sr * job[q].lds + sc) * (int64_t)eb + b) + 1000003u * (size_t)q);
            }
            if (hd[q][i] != want && !bad++)
                first = (int64_t)i;
        }
        CHECK(!bad, "%s, job %d: %lld wrong bytes, the first at byte %lld of dst", label, q, (long long)bad,
              (long long)first);
    }
    for (int q = 0; q < n; q++) {
        cudaFree(ds[q]), cudaFree(dd[q]);
        free(hs[q]), free(hd[q]);
    }
}

static void copies(void)
{
    char label[128];
    /* plain copies of FP8 codes: every pair of source and destination
     * alignments mod 16, lines shorter than a chunk, a chunk and a bit, long */
    static const int64_t shapes[][2] = { { 3, 5 }, { 7, 17 }, { 33, 1000 } };
    for (size_t s = 0; s < 3; s++)
        for (size_t so = 0; so < 16; so += 3)
            for (size_t dof = 0; dof < 16; dof += 5) {
                const int64_t rows = shapes[s][0], cols = shapes[s][1];
                const tk_copy_job j = { NULL, (cols + 15) / 16 * 16, NULL, cols + (int64_t)so, rows, cols, 1 };
                snprintf(label, sizeof label, "copy u8 %lldx%lld src +%zu dst +%zu", (long long)rows, (long long)cols,
                         so, dof);
                copy_check(label, &j, &so, &dof, 1, 0);
            }
    /* a launch with an FP8 job moves bytes: its fp32 and bf16 jobs too (a C staged beside A and B) */
    {
        const tk_copy_job j[3] = { { NULL, 1008, NULL, 1001, 40, 1000, 1 },
                                   { NULL, 136, NULL, 131, 50, 131, 4 },
                                   { NULL, 72, NULL, 67, 9, 67, 2 } };
        const size_t so[3] = { 3, 4, 2 }, dof[3] = { 0, 0, 0 };
        copy_check("copy mixed u8 + fp32 + bf16", j, so, dof, 3, 0);
    }
    /* transposes: edges in both directions (tiles of 64), misaligned lines
     * and bases on both sides, two jobs a launch */
    static const int64_t tshapes[][2] = { { 1, 1 }, { 5, 3 }, { 64, 64 }, { 65, 130 }, { 300, 1000 }, { 1000, 257 } };
    for (size_t s = 0; s < sizeof tshapes / sizeof tshapes[0]; s++)
        for (size_t so = 0; so < 4; so += 1 + 2 * (s % 2)) {
            const int64_t rows = tshapes[s][0], cols = tshapes[s][1];
            const tk_copy_job j = { NULL, (rows + 15) / 16 * 16, NULL, cols + (int64_t)(so % 3), rows, cols, 1 };
            const size_t dof = so == 3 ? 1 : 0;
            snprintf(label, sizeof label, "transpose u8 %lldx%lld src +%zu lds %lld dst +%zu", (long long)rows,
                     (long long)cols, so, (long long)j.lds, dof);
            copy_check(label, &j, &so, &dof, 1, 1);
        }
    {
        const tk_copy_job j[2] = { { NULL, 304, NULL, 1000, 300, 1000, 1 }, { NULL, 1008, NULL, 520, 1000, 517, 1 } };
        const size_t so[2] = { 0, 1 }, dof[2] = { 0, 0 };
        copy_check("transpose two jobs", j, so, dof, 2, 1);
    }
}

/* ---- auto's route on every layout ---- */

/* The route auto-dispatch takes for the FP8 case (c, f): the case's
 * problem with device-free pointers (cudaMalloc's alignment, which
 * introspection assumes for NULL) and stand-in scales (never read). */
static int routed_name(const tk_lab_case *c, const tk_lab_f8 *f, char *buf, size_t len)
{
    static const float stand_in[1];
    tk_lab_f8_data in;
    memset(&in, 0, sizeof in);
    tk_lab_problem(c, NULL, NULL, NULL, &in.p);
    size_t na, nb;
    tk_lab_f8_scale_dims(c, f->scale_mode, &na, &nb, &in.ld_sa, &in.ld_sb);
    tk_gemm_desc d;
    tk_lab_f8_desc(f, &in, NULL, NULL, NULL, stand_in, stand_in, &d);
    const tk_handle h = tk_lab_verify_handle(v);
    tk_fp8_args fa;
    tk_route r;
    buf[0] = '\0';
    const tk_status st = tk_fp8_route(h, &d, &fa, NULL, &r);
    if (st == TK_SUCCESS && r.k)
        tk_route_name(&r, buf, len);
    else
        snprintf(buf, len, "no route: %s (%s)", tk_status_string(st), tk_last_error(h));
    return st == TK_SUCCESS && r.k && strcmp(r.k->name, "k01_naive");
}

/* Mid-size problems in every layout through auto: the results checked as
 * the sweep checks them (auto alone: the fast kernels by name take K-major
 * operands only), the route a fast kernel, never k01_naive (K = 1000: lines
 * of 1000 codes, not 16-byte multiples, repacked; NN, TN, TT: transposed). */
static void routed(void)
{
    static const int64_t shapes[][3] = { { 300, 520, 1000 }, { 257, 1024, 384 } };
    const char *const saved = kernels[0];
    const int saved_n = nkernels;
    kernels[0] = "auto";
    nkernels = 1;
    unsigned t = 0;
    for (int s = 0; s < 2; s++)
        for (int layout = 0; layout < 2; layout++)
            for (int ops = 0; ops < 4; ops++)
                for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++, t++) {
                    if (mode == TK_SCALE_BLOCK && layout)   /* block scales: row-major only (the sweep checks the refusal) */
                        continue;
                    tk_lab_case c;
                    const int64_t k = mode == TK_SCALE_BLOCK ? (shapes[s][2] + 127) / 128 * 128 : shapes[s][2];
                    /* t's bits: op_a (1), op_b (2), bf16 C (4), column-major (8), padded (16) */
                    case_init(&c, shapes[s][0], shapes[s][1], k,
                              (unsigned)ops | (t & 4) | (unsigned)layout << 3 | (t / 3 & 1) << 4);
                    tk_lab_f8 f = { (t & 1) ? TK_LAB_E5M2 : TK_LAB_E4M3, (t & 2) ? TK_LAB_E5M2 : TK_LAB_E4M3, mode, 0 };
                    char route[96], name[160];
                    const int fast = routed_name(&c, &f, route, sizeof route);
                    tk_lab_case_name(&c, name, sizeof name);
                    CHECK(fast, "%s, scale %d: auto runs %s (expected a fast kernel)", name, mode, route);
                    if (t % 8 == 0)
                        printf("     %s, scale %d: %s\n", name, mode, route);
                    run(&c, &f, 0);
                }
    report("routed");
    kernels[0] = saved;
    nkernels = saved_n;
}

/* ---- grouped: many FP8 products (tk_gemm_desc version 5) ---- */

/* One grouped case: TK_GROUP_ROWS over `sizes` (count groups of token
 * rows, then 3 rows no group owns) or TK_GROUP_BATCHED (count products of
 * mb rows, A shared when share_a), N x K weights per product (op_b T), fp32
 * or bf16 C, scales of `mode` with every set `pad` elements past its end
 * (pad 0: the descriptor's strides left 0, the default), bad_last: the last
 * offset past M (that group skipped, group_error set). */
typedef struct gcase {
    int kind, mode, count;
    const int32_t *sizes;        /* ROWS */
    int64_t mb, n, k;            /* mb: BATCHED's rows */
    tk_lab_fp8 fa, fb;
    tk_dtype out;
    float beta;
    int pad, share_a, bad_last;
    uint64_t seed;
} gcase;

static void gcodes(uint8_t *q, size_t n, tk_lab_fp8 f, uint64_t seed)
{
    const double fmax = f == TK_LAB_E4M3 ? 448.0 : 57344.0;
    for (size_t i = 0; i < n; i++) {
        double x = (double)(tk_lab_mix64(seed + i) >> 11) * 0x1p-53 * 2.0 - 1.0;
        q[i] = tk_lab_fp8_encode((fabs(x) < 1e-3 ? 1e-3 : x) * fmax, f, 1);
    }
}

static void gscales(float *s, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        s[i] = (float)(0x1p-8 * (1.0 + 3.0 * (double)(tk_lab_mix64(seed + i) >> 11) * 0x1p-53));
}

static void *gdev(const void *h, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess)
        return NULL;
    if (h)
        cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}

/* kernel's call on case g against tk_lab_ref_grouped_fp8: every owned
 * element within tk_lab_tolerance_fp8, every other element of C's buffer
 * (rows no group owns, a skipped group's, the guard after C) unchanged;
 * group_error as bad_last says. must_refuse: the kernel named must refuse,
 * C untouched. route (NULL: not asked): auto-dispatch's kernel for the
 * call (tk_fp8_route). 1 when it ran (or refused) as expected. */
static int grouped_case(const char *label, const gcase *g, const char *kernel, int must_refuse, char *route,
                        size_t route_len)
{
    enum { GUARD = 256 };
    const int rows = g->kind == TK_GROUP_ROWS, cnt = g->count;
    if (route)
        snprintf(route, route_len, "not asked (no device memory)");
    int32_t offs[64];
    int64_t M = g->mb;
    if (rows) {
        M = 0;
        for (int z = 0; z < cnt; z++)
            offs[z] = (int32_t)(M += g->sizes[z]);
        M += 3;
        if (g->bad_last)
            offs[cnt - 1] = (int32_t)M + 1;
    }
    const int64_t N = g->n, K = g->k, kb = K / 128, nb = (N + 127) / 128;
    const int mode = g->mode;
    const int64_t set_a = mode == TK_SCALE_TENSOR ? 1 : mode == TK_SCALE_ROW ? M : M * kb;
    const int64_t set_b = mode == TK_SCALE_TENSOR ? 1 : mode == TK_SCALE_ROW ? N : nb * kb;
    const int per_a = !rows && !g->share_a, na_prod = per_a ? cnt : 1, nc_prod = rows ? 1 : cnt;
    const int64_t ss_a = per_a ? set_a + g->pad : 0, ss_b = set_b + g->pad;
    const size_t na = (size_t)(na_prod * M * K), nb_ = (size_t)(cnt * N * K);
    const size_t nsa = (size_t)(na_prod * (set_a + g->pad)), nsb = (size_t)(cnt * ss_b);
    const size_t nout = (size_t)(nc_prod * M * N), nc = nout + GUARD, esz = g->out == TK_F32 ? 4 : 2;
    uint8_t *ha = malloc(na ? na : 1), *hb = malloc(nb_ ? nb_ : 1);
    float *hsa = malloc(nsa * 4), *hsb = malloc(nsb * 4);
    void *img = malloc(nc * esz), *got = malloc(nc * esz);
    double *want = malloc(nout * sizeof(double)), *sum = malloc(nout * sizeof(double));
    gcodes(ha, na, g->fa, g->seed ^ 0xa);
    gcodes(hb, nb_, g->fb, g->seed ^ 0xb);
    gscales(hsa, nsa, g->seed ^ 0x5a);
    gscales(hsb, nsb, g->seed ^ 0x5b);
    if (g->beta == 0.0f)
        memset(img, 0xff, nc * esz);   /* NaN in both types: an owned element left unwritten shows */
    else
        tk_lab_fill(img, g->out, nc, g->seed ^ 0xc);
    uint8_t *da = gdev(ha, na), *db = gdev(hb, nb_);
    float *dsa = gdev(hsa, nsa * 4), *dsb = gdev(hsb, nsb * 4);
    void *dc = gdev(img, nc * esz);
    int32_t *doffs = rows ? gdev(offs, (size_t)cnt * 4) : NULL, *derr = gdev(NULL, 4);
    int ok = da && db && dsa && dsb && dc && derr && (!rows || doffs);
    CHECK(ok, "%s: out of device memory", label);
    if (ok) {
        cudaMemset(derr, 0, 4);
        tk_gemm_desc d = TK_GEMM_DESC_INIT;
        d.problem = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_T, M, N, K, 0.75f, g->beta, da, K, db, K,
                                       dc, N, g->out };
        d.group_kind = g->kind;
        d.count = cnt;
        d.stride_a = per_a ? M * K : 0, d.stride_b = N * K, d.stride_c = rows ? 0 : M * N;
        d.offs = doffs;
        d.group_error = rows ? derr : NULL;   /* BATCHED takes neither (no offsets): derr stays 0 */
        d.a_fp8 = g->fa == TK_LAB_E4M3 ? TK_FP8_E4M3 : TK_FP8_E5M2;
        d.b_fp8 = g->fb == TK_LAB_E4M3 ? TK_FP8_E4M3 : TK_FP8_E5M2;
        d.scale_mode = mode;
        d.scale_a = dsa, d.scale_b = dsb;
        d.ld_scale_a = mode == TK_SCALE_BLOCK ? M : 0, d.ld_scale_b = mode == TK_SCALE_BLOCK ? nb : 0;
        d.stride_scale_a = g->pad ? ss_a : 0, d.stride_scale_b = g->pad ? ss_b : 0;
        tk_handle h = tk_lab_verify_handle(v);
        if (route) {
            tk_fp8_args fa;
            tk_group_args ga;
            tk_route r;
            const tk_status rs = tk_fp8_route(h, &d, &fa, &ga, &r);
            if (rs == TK_SUCCESS && r.k)
                snprintf(route, route_len, "%s", r.k->name);
            else
                snprintf(route, route_len, "no route: %s (%s)", tk_status_string(rs), tk_last_error(h));
        }
        const tk_status st = tk_gemm_run(h, &d, strcmp(kernel, "auto") ? kernel : NULL, NULL);
        const cudaError_t e = cudaDeviceSynchronize();
        int32_t err = -1;
        cudaMemcpy(got, dc, nc * esz, cudaMemcpyDeviceToHost);
        cudaMemcpy(&err, derr, 4, cudaMemcpyDeviceToHost);
        if (must_refuse) {
            ok = (st == TK_ERR_NOT_SUPPORTED || st == TK_ERR_ARCH_MISMATCH) && !memcmp(got, img, nc * esz);
            CHECK(ok, "%s on %s: %s, expected a refusal with C untouched (%s)", label, kernel, tk_status_string(st),
                  tk_last_error(h));
        } else {
            ok = st == TK_SUCCESS && e == cudaSuccess && err == (g->bad_last ? 1 : 0);
            CHECK(ok, "%s on %s: %s, %s, group_error %d (%s)", label, kernel, tk_status_string(st),
                  cudaGetErrorString(e), (int)err, tk_last_error(h));
        }
        if (ok && !must_refuse) {
            const tk_gemm_problem hp = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, M, N, K, 0.75f, g->beta, ha, K, hb, K,
                                         img, N, g->out };
            const tk_lab_fp8_ref f8 = { g->fa, g->fb, mode, hsa, hsb, d.ld_scale_a, d.ld_scale_b };
            const tk_lab_fp8_groups gg = { g->kind, cnt, rows ? offs : NULL, d.stride_a, d.stride_b, d.stride_c,
                                           ss_a, ss_b };
            /* the reference of the valid groups alone (bad_last: the last is skipped) */
            tk_lab_fp8_groups gv = gg;
            gv.count -= g->bad_last;
            tk_lab_ref_grouped_fp8(&hp, &f8, &gv, want, sum);
            const int64_t owned_rows = rows ? (gv.count ? offs[gv.count - 1] : 0) : M;
            int64_t bad = 0, first = -1;
            for (size_t i = 0; i < nc; i++) {
                const int64_t r = (int64_t)(i % (size_t)(M * N)) / N;
                const int owned = i < nout && r < owned_rows;
                const int same = !memcmp((char *)got + i * esz, (char *)img + i * esz, esz);
                int good = same;
                if (owned) {
                    const double x = tk_lab_load(got, g->out, (int64_t)i);
                    const double c0 = g->beta != 0.0f ? tk_lab_load(img, g->out, (int64_t)i) : 0.0;
                    good = !isnan(x) && fabs(x - want[i]) <=
                                            tk_lab_tolerance_fp8(K, 0.75f, g->beta, sum[i], c0, want[i], g->out);
                }
                if (!good && !bad++)
                    first = (int64_t)i;
            }
            ok = bad == 0;
            CHECK(ok, "%s on %s: %lld elements wrong, the first %lld (product %lld, row %lld, col %lld%s)", label,
                  kernel, (long long)bad, (long long)first, (long long)(first / (M * N)),
                  (long long)(first % (M * N) / N), (long long)(first % N),
                  first >= (int64_t)nout ? ": the guard" : "");
        }
    }
    cudaFree(da); cudaFree(db); cudaFree(dsa); cudaFree(dsb); cudaFree(dc); cudaFree(doffs); cudaFree(derr);
    free(ha); free(hb); free(hsa); free(hsb); free(img); free(got); free(want); free(sum);
    return ok;
}

/* k43's lines with FP8 instances (K43_HAS_FP8, k43_fp8.cu). */
static const char *const k43_fp8[] = { "k43_grouped_128x128", "k43_grouped_128x256", "k43_swap_16x64",
                                       "k43_swap_32x64" };

/* Case g on auto (its route checked: a k43 FP8 instance where K % 16 ==
 * 0, else k01_naive), k01_naive and each k43 FP8 instance (which must take
 * it where K % 16 == 0 and refuse it, C untouched, elsewhere); the number
 * of calls that ran or refused as expected, *calls the number made. */
static int grouped_all(const char *label, const gcase *g, int *calls)
{
    const int fast = g->k % 16 == 0;
    char route[TK_MSG_LEN + 64];
    int passed = grouped_case(label, g, "auto", 0, route, sizeof route);
    const int routed_ok = fast ? !strncmp(route, "k43_", 4) && strcmp(route, "k43_grouped_64x128") &&
                                     strcmp(route, "k43_grouped_128x64")
                               : !strcmp(route, "k01_naive");
    CHECK(routed_ok, "%s: auto runs %s (expected %s)", label, route,
          fast ? "a k43 FP8 instance" : "k01_naive: K % 16 != 0");
    passed += grouped_case(label, g, "k01_naive", 0, NULL, 0);
    *calls += 2;
    for (size_t i = 0; i < sizeof k43_fp8 / sizeof k43_fp8[0]; i++, ++*calls)
        passed += grouped_case(label, g, k43_fp8[i], !fast, NULL, 0);
    return passed;
}

/* Mixture-of-experts groups (empty ones first, in the middle and last, one
 * of 1 row, sizes not multiples of any tile, 3 rows no group owns) and
 * batches (A per product or shared), in each scale mode and format
 * pairing, fp32 and bf16 C, beta 0 (C NaN-poisoned) and 0.5, default and
 * padded scale strides, K = 45 (k01_naive alone), 208 (K % 128 != 0: the
 * last k-tile's tail zero-filled), 128 and 384 (block scales); groups of
 * 64-333 rows (auto: 128-row tiles); K 16 and 112 (below one k-tile);
 * bad offsets (the last group past M:
 * skipped, group_error set); on auto, k01_naive and k43's FP8 instances
 * (grouped_all); k31_wgmma_cluster's FP8 instance and k43_grouped_64x128
 * (no FP8 instance) must refuse with C untouched. */
static void grouped(void)
{
    static const int32_t moe[] = { 0, 37, 1, 0, 130, 5, 0 }, big[] = { 200, 0, 333, 64 };
    int passed = 0, calls = 0, t = 0;
    for (int kind = TK_GROUP_BATCHED; kind <= TK_GROUP_ROWS; kind++)
        for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++)
            for (int v2 = 0; v2 < 2; v2++, t++) {
                gcase g = { kind, mode, kind == TK_GROUP_ROWS ? 7 : 3, moe, 7, v2 ? 258 : 130,
                            mode == TK_SCALE_BLOCK ? (v2 ? 384 : 128) : (v2 ? 208 : 45),
                            t & 1 ? TK_LAB_E5M2 : TK_LAB_E4M3, t & 2 ? TK_LAB_E5M2 : TK_LAB_E4M3,
                            v2 ? TK_BF16 : TK_F32, t % 3 == 1 ? 0.5f : 0.0f, v2 ? 3 : 0, v2, 0, 7000u + (unsigned)t };
                char label[96];
                snprintf(label, sizeof label, "%s, %s, %s x %s, %s C, K %lld, beta %g, pad %d",
                         tk_lab_group_kind_name(kind), tk_lab_scale_mode_name(mode), tk_lab_fp8_format_name(g.fa),
                         tk_lab_fp8_format_name(g.fb), v2 ? "bf16" : "fp32", (long long)g.k, (double)g.beta, g.pad);
                passed += grouped_all(label, &g, &calls);
                if (v2 == 0) {
                    passed += grouped_case(label, &g, "k31_wgmma_cluster", 1, NULL, 0);
                    passed += grouped_case(label, &g, "k43_grouped_64x128", 1, NULL, 0);
                    calls += 2;
                }
                /* groups of 64-333 rows (ROWS) or 150 (BATCHED): auto's 128-row tiles, N past one 256 tile */
                g.sizes = big;
                g.count = kind == TK_GROUP_ROWS ? 4 : 2;
                g.mb = 150;
                g.n = 300;
                g.k = mode == TK_SCALE_BLOCK ? 256 : 272;
                g.seed += 500;
                snprintf(label, sizeof label, "%s, %s, big groups, K %lld", tk_lab_group_kind_name(kind),
                         tk_lab_scale_mode_name(mode), (long long)g.k);
                passed += grouped_all(label, &g, &calls);
            }
    /* K below one FP8 k-tile (128): 16 and 112, the whole K a zero-filled tail (tensor and row scales; block
     * scales need K % 128 == 0) */
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_ROW; mode++)
        for (int q = 0; q < 2; q++) {
            gcase g = { TK_GROUP_ROWS, mode, 7, moe, 7, 130, q ? 112 : 16, TK_LAB_E4M3, q ? TK_LAB_E5M2 : TK_LAB_E4M3,
                        q ? TK_BF16 : TK_F32, q ? 0.5f : 0.0f, q ? 3 : 0, 0, 0, 7200u + (unsigned)(2 * mode + q) };
            char label[96];
            snprintf(label, sizeof label, "rows, %s, K %lld below one k-tile", tk_lab_scale_mode_name(mode),
                     (long long)g.k);
            passed += grouped_all(label, &g, &calls);
        }
    gcase bad = { TK_GROUP_ROWS, TK_SCALE_ROW, 4, moe + 1, 0, 64, 128, TK_LAB_E4M3, TK_LAB_E4M3, TK_F32, 0.0f, 0,
                  0, 1, 7100u };
    passed += grouped_case("rows, bad last offset", &bad, "k01_naive", 0, NULL, 0);
    calls++;
    for (size_t i = 0; i < sizeof k43_fp8 / sizeof k43_fp8[0]; i++, calls++)
        passed += grouped_case("rows, bad last offset", &bad, k43_fp8[i], 0, NULL, 0);
    printf("  grouped %d of %d calls as expected\n", passed, calls);
    CHECK(passed == calls, "grouped: %d of %d calls as expected", passed, calls);
}

/* ---- moe_time: grouped FP8 timed against a loop of dense FP8 calls ----
 * Not a check of results (grouped does that) and not in the default run:
 * TK_FP8_MOE_TIME=1 gpu_test_fp8 moe_time. A mixture of experts' forward
 * (TK_GROUP_ROWS, equal groups, $TK_FP8_MOE_SCALE's scales: block, the
 * default, row or tensor; e4m3, bf16 C, beta 0) on
 * auto and each k43 FP8 line, and as a host loop of one dense FP8
 * tk_gemm_run a group on auto (its rows, its expert's B and scales):
 * median of 20 calls after 3, TFLOP/s of the groups' flops. */
typedef struct moe_buf {
    uint8_t *a, *b;
    float *sa, *sb;
    void *c;
    int32_t *offs;
} moe_buf;

/* The median of n (<= 32) times (ms) of d's call on kernel (NULL: auto),
 * or with dense_groups of that many dense calls of `rows` rows a group
 * (sb_set: one expert's scale_b elements): 3 warm-up calls, then n timed
 * with events; -1 when a call fails. */
static double moe_median(tk_handle h, const tk_gemm_desc *d, const char *kernel, int dense_groups, int64_t rows,
                         int64_t sb_set, int n)
{
    double t[32];
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    int ok = 1;
    for (int i = -3; i < n && ok; i++) {
        cudaEventRecord(e0, NULL);
        if (!dense_groups) {
            ok = tk_gemm_run(h, d, kernel, NULL) == TK_SUCCESS;
        } else {   /* group g: rows g * rows.., expert g's B and scales, C's rows */
            for (int g = 0; g < dense_groups && ok; g++) {
                tk_gemm_desc q = *d;
                q.group_kind = TK_GROUP_NONE;
                q.count = 0;
                q.stride_b = 0;
                q.offs = NULL;
                q.problem.m = rows;
                q.problem.a = (const uint8_t *)d->problem.a + g * rows * d->problem.lda;
                q.problem.b = (const uint8_t *)d->problem.b + g * d->stride_b;
                q.problem.c = (uint16_t *)d->problem.c + g * rows * d->problem.ldc;
                /* block: ld_scale_a stays M, the rows' entries of each k-block; tensor: one value for all */
                q.scale_a = d->scale_a + (d->scale_mode == TK_SCALE_TENSOR ? 0 : g * rows);
                q.scale_b = d->scale_b + g * sb_set;
                ok = tk_gemm_run(h, &q, kernel, NULL) == TK_SUCCESS;
            }
        }
        cudaEventRecord(e1, NULL);
        cudaEventSynchronize(e1);
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, e0, e1);
        if (i >= 0)
            t[i] = ms;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (!ok || cudaDeviceSynchronize() != cudaSuccess)
        return -1.0;
    for (int i = 1; i < n; i++)   /* insertion sort of n <= 32 */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            const double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[n / 2];
}

static void moe_time(void)
{
    static const struct {
        int groups;
        int64_t rows, n, k;
    } shapes[] = { { 8, 512, 4096, 7168 }, { 32, 128, 4096, 2048 }, { 64, 16, 4096, 7168 }, { 128, 32, 2048, 7168 } };
    static const char *const runs[] = { "auto", "k43_grouped_128x128", "k43_grouped_128x256", "k43_swap_16x64",
                                        "k43_swap_32x64" };
    tk_handle h = tk_lab_verify_handle(v);
    const char *mode_name = getenv("TK_FP8_MOE_SCALE") ? getenv("TK_FP8_MOE_SCALE") : "block";
    const tk_scale_mode mode = !strcmp(mode_name, "row") ? TK_SCALE_ROW : !strcmp(mode_name, "tensor") ? TK_SCALE_TENSOR
                                                                                                     : TK_SCALE_BLOCK;
    printf("     %s scales\n     %-24s %-22s %9s %9s\n", mode == TK_SCALE_ROW ? "row" : mode == TK_SCALE_TENSOR
                                                                                      ? "tensor" : "block",
           "groups x rows x N x K", "kernel", "ms", "TFLOP/s");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int G = shapes[s].groups;
        const int64_t R = shapes[s].rows, Nn = shapes[s].n, Kk = shapes[s].k, M = G * R;
        const int64_t nb = (Nn + 127) / 128, kb = Kk / 128;
        const int64_t sb_set = mode == TK_SCALE_BLOCK ? nb * kb : mode == TK_SCALE_ROW ? Nn : 1;
        moe_buf m = { NULL, NULL, NULL, NULL, NULL, NULL };
        int32_t offs[128];
        const int64_t nones = M * kb > G * sb_set ? M * kb : G * sb_set;
        float *ones = malloc((size_t)nones * sizeof(float));
        for (int g = 0; g < G; g++)
            offs[g] = (int32_t)((g + 1) * R);
        int ok = ones && cudaMalloc((void **)&m.a, (size_t)(M * Kk)) == cudaSuccess &&
                 cudaMalloc((void **)&m.b, (size_t)(G * Nn * Kk)) == cudaSuccess &&
                 cudaMalloc((void **)&m.sa, (size_t)(M * kb) * sizeof(float)) == cudaSuccess &&
                 cudaMalloc((void **)&m.sb, (size_t)(G * sb_set) * sizeof(float)) == cudaSuccess &&
                 cudaMalloc(&m.c, (size_t)(M * Nn) * 2) == cudaSuccess &&
                 cudaMalloc((void **)&m.offs, (size_t)G * 4) == cudaSuccess;
        CHECK(ok, "moe_time: out of memory at %d x %lld x %lld x %lld", G, (long long)R, (long long)Nn,
              (long long)Kk);
        if (ok) {
            for (int64_t i = 0; i < nones; i++)
                ones[i] = 1.0f / 64;
            cudaMemset(m.a, 0x30, (size_t)(M * Kk));   /* e4m3 0.5: finite sums */
            cudaMemset(m.b, 0x30, (size_t)(G * Nn * Kk));
            cudaMemcpy(m.sa, ones, (size_t)(M * kb) * sizeof(float), cudaMemcpyHostToDevice);
            cudaMemcpy(m.sb, ones, (size_t)(G * sb_set) * sizeof(float), cudaMemcpyHostToDevice);
            cudaMemcpy(m.offs, offs, (size_t)G * 4, cudaMemcpyHostToDevice);
            tk_gemm_desc d = TK_GEMM_DESC_INIT;
            d.problem = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_T, M, Nn, Kk, 1.0f, 0.0f, m.a, Kk, m.b, Kk,
                                           m.c, Nn, TK_BF16 };
            d.group_kind = TK_GROUP_ROWS;
            d.count = G;
            d.stride_b = Nn * Kk;
            d.offs = m.offs;
            d.a_fp8 = d.b_fp8 = TK_FP8_E4M3;
            d.scale_mode = mode;
            d.scale_a = m.sa, d.scale_b = m.sb;
            if (mode == TK_SCALE_BLOCK)
                d.ld_scale_a = M, d.ld_scale_b = nb;
            const double flop = 2.0 * (double)M * (double)Nn * (double)Kk;
            char shape[48], route[TK_MSG_LEN];
            snprintf(shape, sizeof shape, "%d x %lld x %lld x %lld", G, (long long)R, (long long)Nn, (long long)Kk);
            tk_fp8_args fa;
            tk_group_args ga;
            tk_route r;
            snprintf(route, sizeof route, "%s", tk_fp8_route(h, &d, &fa, &ga, &r) == TK_SUCCESS && r.k ? r.k->name
                                                                                                        : "(none)");
            for (size_t i = 0; i <= sizeof runs / sizeof runs[0]; i++) {
                const int loop = i == sizeof runs / sizeof runs[0];
                const char *kernel = loop ? NULL : strcmp(runs[i], "auto") ? runs[i] : NULL;
                const double ms = moe_median(h, &d, kernel, loop ? G : 0, R, sb_set, 20);
                char name[TK_MSG_LEN + 16];
                if (!loop && !kernel)
                    snprintf(name, sizeof name, "auto: %s", route);
                else
                    snprintf(name, sizeof name, "%s", loop ? "dense loop (auto)" : runs[i]);
                if (ms < 0)
                    printf("     %-24s %-22s refused or failed: %s\n", shape, name, tk_last_error(h));
                else
                    printf("     %-24s %-22s %9.3f %9.1f\n", shape, name, ms, flop / (ms * 1e-3) / 1e12);
            }
        }
        cudaFree(m.a); cudaFree(m.b); cudaFree(m.sa); cudaFree(m.sb); cudaFree(m.c); cudaFree(m.offs);
        free(ones);
    }
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
    TK_TEST(copies);
    TK_TEST(routed);
    TK_TEST(grouped);
    if (getenv("TK_FP8_MOE_TIME"))   /* timing alone, not a check: only when asked */
        TK_TEST(moe_time);
    tk_lab_verify_close(v);
}
