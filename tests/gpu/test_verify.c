/* test_verify.c - the GPU verify matrix: each kernel at M x N x K in
 * {1x1x1, 17x33x9, 127x129x65, 1000x1000x1000, 4096x4096x4096} with tight
 * leading dimensions, the three odd shapes again with padded ones (ld a
 * multiple of 8 beyond the tight one, so kernels needing 16-byte aligned
 * rows run there too, and C's padding is checked for stray writes), and
 * 64x80x8 and 200x136x24 padded (K below one K-step); each x the four op
 * combinations x both layouts x fp32/bf16 out x beta {0, 0.5} (alpha 1.5
 * when A is transposed), plus 8192^3 NN row-major fp32; then misaligned
 * views (odd tight leading dimensions, pointer offsets of 1..7 elements) for
 * auto-dispatch and the Hopper kernels. One counted test per case; a failing
 * case prints its error map. A kernel that refuses a case is skipped there
 * (printed, not counted), except auto, cublas and k01_naive, which must run
 * everything. "auto" (auto-dispatch) is verified like a kernel.
 *
 *   build/tests/gpu_test_verify [name-substring]     e.g. k01_naive, "4096x" or "padded"
 *   TK_VERIFY_KERNELS=k01_naive,k20_mma_sync build/tests/gpu_test_verify
 * Default: every registry kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tilekit.h"
#include "lab/lab.h"
#include "../host/check.h"

/* The kernels verified on the odd views, decode and quick-tile blocks: auto,
 * the Hopper configurations (k3*) and the skinny kernel (k4*); the seed and
 * mma.sync kernels refuse those tight views. */
static int takes_views(const char *k)
{
    return !strcmp(k, "auto") || !strncmp(k, "k3", 2) || !strncmp(k, "k4", 2);
}

static tk_lab_verify *ctx;
static const char *cur_kernel;
static tk_lab_case cur;
static tk_lab_verify_result cur_result;

/* check.c's runner filters on argv[1]; read it too, so filtered-out cases
 * are not even run. */
static char filter[256];

static void read_filter(void)
{
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    size_t first = strlen(buf) + 1;   /* argv[0] */
    if (first < n)
        snprintf(filter, sizeof filter, "%s", buf + first);
}

static void check_case(void)
{
    const tk_lab_verify_result *r = &cur_result;
    if (r->outcome != 0)
        tk_lab_verify_print(stdout, cur_kernel, &cur, r);
    CHECK(r->outcome == 0, "%s", r->outcome == 2 ? "this kernel must support every case" : "see above");
}

static void run_one(const char *kernel, const tk_lab_case *c)
{
    char name[192], cn[128];
    tk_lab_case_name(c, cn, sizeof cn);
    snprintf(name, sizeof name, "%s %s", kernel, cn);
    if (*filter && !strstr(name, filter))
        return;
    cur_kernel = kernel;
    cur = *c;
    tk_lab_verify_run(ctx, kernel, c, &cur_result);
    int must = !strcmp(kernel, "cublas") || !strcmp(kernel, "k01_naive") || !strcmp(kernel, "auto");
    if (cur_result.outcome == 2 && !must) {
        printf("skip %s: %s\n", name, cur_result.msg);
        return;
    }
    tk_run_test(name, check_case);
}

static void no_gpu(void) { CHECK(0, "a GPU suite without a GPU fails"); }

void tk_tests(void)
{
    char why[TK_LAB_MSG_LEN];
    read_filter();
    if (tk_lab_verify_open(&ctx, why, sizeof why)) {
        printf("no GPU to verify on: %s\n", why);
        tk_run_test("verify_needs_a_gpu", no_gpu);
        return;
    }
    const char *kernels[64];
    int nk = tk_test_kernels_from_env("TK_VERIFY_KERNELS", kernels, 64);
    if (nk == 0) {
        kernels[nk++] = "auto";
        for (int i = 0; i < tk_kernel_count() && nk < 64; i++) {
            tk_kernel_props p;
            if (tk_kernel_get(i, &p) == TK_SUCCESS)
                kernels[nk++] = p.name;
        }
    }
    /* A padded variant only where some tight ld is not a multiple of 8 (the
     * cases vector kernels refuse when tight), plus the K-below-a-K-step
     * shapes; the large shapes stay tight to keep the matrix quick. Tight and
     * padded cases of a shape are adjacent: one cached input set serves both.
     * 2300 x 2040 x 2104 makes k31 split its last wave (72 cluster tiles on
     * 66 clusters); fp32 C only there: cuBLAS's bf16 C at that shape is off
     * by several bf16 ulps in the transposed and column-major cases (it fails
     * the fp64 check itself, so every kernel failed against it). k30_check
     * checks the split with bf16 C exactly, against cuBLAS's fp32 result
     * rounded to bf16. */
    static const struct { int64_t m, n, k; int pad, f32_only; } shapes[] = {
        { 1, 1, 1, 0, 0 }, { 1, 1, 1, 1, 0 }, { 17, 33, 9, 0, 0 }, { 17, 33, 9, 1, 0 }, { 127, 129, 65, 0, 0 },
        { 127, 129, 65, 1, 0 }, { 64, 80, 8, 1, 0 }, { 200, 136, 24, 1, 0 }, { 1000, 1000, 1000, 0, 0 },
        { 2300, 2040, 2104, 0, 1 }, { 4096, 4096, 4096, 0, 0 },
    };
    /* shapes outermost, so the verify context's cached inputs serve every kernel */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int kn = 0; kn < nk; kn++)
            for (int combo = 0; combo < 32; combo++) {
                if ((combo & 8) && shapes[s].f32_only)
                    continue;
                tk_op op_a = (tk_op)(combo & 1), op_b = (tk_op)(combo >> 1 & 1);
                float beta = combo & 16 ? 0.5f : 0.0f;
                tk_lab_case c = { (tk_layout)(combo >> 2 & 1), op_a, op_b, shapes[s].m, shapes[s].n,
                                  shapes[s].k, op_a == TK_OP_T ? 1.5f : 1.0f, beta,
                                  combo & 8 ? TK_BF16 : TK_F32, 1, shapes[s].pad, 0 };
                run_one(kernels[kn], &c);
            }
    /* Misaligned views with tight leading dimensions, above the size where
     * auto-dispatch copies them (route.c): every op, layout, type of C and
     * beta, with all three pointers at offset 0 and at one of 1..7 elements.
     * K = 9 is below one K-step; 4097 and 1031 make odd leading dimensions
     * of C; with N x K = ... x 64 the kernels take A and B as they are but C
     * (ldc 263) only element by element; 300 x 600 x 4000 has so few tiles
     * that every Hopper configuration splits each in k-slices (cuBLAS's
     * bf16 C is off the fp64 reference there by up to 8 bf16 ulps: verify
     * then judges by the fp64 reference alone). Kernels that refuse are
     * skipped; auto must run everything. */
    static const struct { int64_t m, n, k; int f32_only; } odd[] = {
        { 257, 263, 271, 0 }, { 333, 4097, 129, 0 }, { 4099, 1031, 9, 0 }, { 520, 263, 64, 0 }, { 300, 600, 4000, 0 },
    };
    for (size_t s = 0; s < sizeof odd / sizeof odd[0]; s++)
        for (int kn = 0; kn < nk; kn++) {
            if (!takes_views(kernels[kn]))
                continue;
            for (int combo = 0; combo < 64; combo++) {
                if ((combo & 8) && odd[s].f32_only)
                    continue;
                tk_op op_a = (tk_op)(combo & 1), op_b = (tk_op)(combo >> 1 & 1);
                tk_lab_case c = { (tk_layout)(combo >> 2 & 1), op_a, op_b, odd[s].m, odd[s].n, odd[s].k,
                                  op_a == TK_OP_T ? 1.5f : 1.0f, combo & 16 ? 0.5f : 0.0f,
                                  combo & 8 ? TK_BF16 : TK_F32, 1, 0, combo & 32 ? 1 + (combo + (int)s) % 7 : 0 };
                run_one(kernels[kn], &c);
            }
        }
    /* Decode: M around the 8-row steps of the Hopper kernels' short A box
     * and the 64-row consumer split, every op, type of C and beta. */
    static const int64_t decode_m[] = { 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65 };
    for (size_t s = 0; s < sizeof decode_m / sizeof decode_m[0]; s++)
        for (int kn = 0; kn < nk; kn++) {
            if (!takes_views(kernels[kn]))
                continue;
            for (int combo = 0; combo < 16; combo++) {
                tk_op op_a = (tk_op)(combo & 1), op_b = (tk_op)(combo >> 1 & 1);
                tk_lab_case c = { TK_ROW_MAJOR, op_a, op_b, decode_m[s], 1000, 3000, 1.0f, combo & 8 ? -1.5f : 0.0f,
                                  combo & 4 ? TK_BF16 : TK_F32, 1, 1, 0 };
                run_one(kernels[kn], &c);
            }
        }
    /* k40's staged tokens (17 to 64 tokens, at least 8M weight elements, F.linear's
     * layout): K not a multiple of the 128-k step, the swapped form, both
     * types of C and beta. */
    static const struct { int64_t m, n, k; } staged[] = {
        { 17, 2048, 4104 }, { 32, 2048, 4104 }, { 33, 2048, 4104 }, { 64, 2048, 4104 }, { 2048, 40, 4104 },
    };
    for (size_t s = 0; s < sizeof staged / sizeof staged[0]; s++)
        for (int kn = 0; kn < nk; kn++) {
            if (!takes_views(kernels[kn]))
                continue;
            for (int combo = 0; combo < 4; combo++) {
                tk_lab_case c = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, staged[s].m, staged[s].n, staged[s].k, 1.0f,
                                  combo & 2 ? -1.5f : 0.0f, combo & 1 ? TK_BF16 : TK_F32, 1, 1, 0 };
                run_one(kernels[kn], &c);
            }
        }
    /* Many tiles per CTA, each of one k-tile, bf16 C: each tile's staged
     * epilogue follows the last one's TMA stores closely. With BN 64 and 192
     * a tile has an odd number of bf16 chunks, and restarting at chunk
     * buffer 0 each tile overwrote a buffer still being stored (k34, k35;
     * found by `tilekit fuzz`, cases 2155 and 2301 of seed 1). */
    static const struct { int64_t m, n, k; } quick[] = { { 3713, 2048, 3 }, { 5888, 3745, 5 } };
    for (size_t s = 0; s < sizeof quick / sizeof quick[0]; s++)
        for (int kn = 0; kn < nk; kn++) {
            if (!takes_views(kernels[kn]))
                continue;
            for (int combo = 0; combo < 4; combo++) {
                tk_lab_case c = { (tk_layout)(combo & 1), TK_OP_N, (tk_op)(combo >> 1 & 1), quick[s].m, quick[s].n,
                                  quick[s].k, 1.0f, 0.0f, TK_BF16, 1, 1, 0 };
                run_one(kernels[kn], &c);
            }
        }
    for (int kn = 0; kn < nk; kn++) {
        tk_lab_case big = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 8192, 8192, 8192, 1.0f, 0.0f, TK_F32, 1, 0, 0 };
        run_one(kernels[kn], &big);
    }
    tk_lab_verify_close(ctx);
}
