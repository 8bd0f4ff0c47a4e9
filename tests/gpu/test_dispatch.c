/* test_dispatch.c - auto-dispatch on the real GPU, and on the same GPU
 * described as an sm_80 part (the handle's device record is what every
 * support check reads), so the routing issue 4 asks for is checked here:
 * the portable kernel below sm_90, a Hopper kernel on sm_90, and for
 * misaligned operands the same kernels on copies (k01_naive only when the
 * problem is tiny). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "lib/internal.h"
#include "../host/check.h"

static tk_handle h;
static int have_gpu;

static tk_gemm_problem problem(int64_t m, int64_t n, int64_t k, int64_t lda, tk_op op_a, tk_op op_b)
{
    tk_gemm_problem p = { TK_ROW_MAJOR, op_a, op_b, m, n, k, 1.0f, 0.0f, NULL, lda, NULL,
                          op_b == TK_OP_N ? n : k, NULL, n, TK_F32 };
    return p;
}

static const tk_kernel *pick(const tk_gemm_problem *p)
{
    const char *name = tk_select_kernel(h, p);
    return name ? tk_registry_find(name) : NULL;
}

static void test_sm90_picks_hopper(void)
{
    if (h->dev.sm < 90) {
        printf("     (device is sm_%d: nothing to check)\n", h->dev.sm);
        return;
    }
    for (int ops = 0; ops < 4; ops++) {
        tk_op oa = (tk_op)(ops & 1), ob = (tk_op)(ops >> 1);
        tk_gemm_problem p = problem(8192, 8192, 8192, 8192, oa, ob);
        const tk_kernel *k = pick(&p);
        CHECK(k && k->min_sm == 90, "ops %d: auto chose %s, expected a Hopper (min_sm 90) kernel: %s", ops,
              k ? k->name : "nothing", tk_last_error(h));
    }
}

static void test_sm80_picks_portable(void)
{
    tk_device saved = h->dev;
    h->dev.sm = 80;
    h->dev.smem_per_block_optin = 163 * 1024;   /* an A100's opt-in limit */
    for (int ops = 0; ops < 4; ops++) {
        tk_gemm_problem p = problem(4096, 4096, 4096, 4096, (tk_op)(ops & 1), (tk_op)(ops >> 1));
        const tk_kernel *k = pick(&p);
        CHECK(k && !strcmp(k->name, "k21_mma_fastload"), "ops %d on sm_80: auto chose %s, expected k21_mma_fastload",
              ops, k ? k->name : "nothing");
    }
    tk_gemm_problem p = problem(4096, 4096, 4096, 4096, TK_OP_N, TK_OP_N);
    tk_status st = tk_kernel_supports(h, "k31_wgmma_cluster", &p);
    CHECK(st == TK_ERR_ARCH_MISMATCH, "k31 on sm_80: status %d (%s), expected ARCH_MISMATCH", st, tk_last_error(h));
    CHECK(strstr(tk_last_error(h), "sm_90") != NULL, "message does not name sm_90: %s", tk_last_error(h));
    h->dev = saved;
}

static tk_route route(const tk_gemm_problem *p)
{
    tk_route r;
    if (tk_select_route(h, p, &r))
        memset(&r, 0, sizeof r);
    return r;
}

static void test_unaligned_routes(void)
{
    /* lda = 4097 breaks every vector kernel's 16-byte rule: auto copies A
     * and runs the best kernel on the copy, on sm_90 and on sm_80 alike. */
    for (int sm = 0; sm < 2; sm++) {
        tk_device saved = h->dev;
        if (sm) {
            h->dev.sm = 80;
            h->dev.smem_per_block_optin = 163 * 1024;
        }
        const char *want = h->dev.sm == 90 ? "k31_wgmma_cluster" : "k21_mma_fastload";
        tk_gemm_problem p = problem(4096, 4096, 4096, 4097, TK_OP_N, TK_OP_N);
        tk_route r = route(&p);
        CHECK(r.k && !strcmp(r.k->name, want) && r.copy[0] && !r.copy[1] && !r.copy[2],
              "lda 4097 on sm_%d: %s copies %d %d %d, expected %s copying A", h->dev.sm, r.k ? r.k->name : "nothing",
              r.copy[0], r.copy[1], r.copy[2], want);
        /* ldc = N = 4097 with B stored N x K (aligned): the Hopper kernel
         * stores C element-wise itself; k21 needs C staged. */
        p = problem(4096, 4097, 4096, 4096, TK_OP_N, TK_OP_T);
        r = route(&p);
        int want_c = h->dev.sm != 90;
        CHECK(r.k && !strcmp(r.k->name, want) && !r.copy[0] && !r.copy[1] && r.copy[2] == want_c,
              "ldc 4097 on sm_%d: %s copies %d %d %d, expected %s%s", h->dev.sm, r.k ? r.k->name : "nothing",
              r.copy[0], r.copy[1], r.copy[2], want, want_c ? " staging C" : " with no copy");
        /* tiny: the copies would cost more than k01_naive's whole product */
        p = problem(64, 64, 64, 65, TK_OP_N, TK_OP_N);
        r = route(&p);
        CHECK(r.k && !strcmp(r.k->name, "k01_naive") && !r.bytes, "tiny unaligned on sm_%d: %s (%zu bytes of copies)",
              h->dev.sm, r.k ? r.k->name : "nothing", r.bytes);
        h->dev = saved;
    }
}

/* A copy that cannot be had is refused with OUT_OF_RESOURCES and a
 * message; C stays untouched and the handle keeps working. */
static void test_copy_refused(void)
{
    const int64_t m = 512, n = 512, k = 517;   /* lda = 517: A must be copied */
    void *a = NULL, *b = NULL, *c = NULL;
    if (cudaMalloc(&a, (size_t)m * k * 2) || cudaMalloc(&b, (size_t)k * n * 2) || cudaMalloc(&c, (size_t)m * n * 4)) {
        CHECK(0, "cudaMalloc failed");
        cudaFree(a); cudaFree(b); cudaFree(c);
        return;
    }
    cudaMemset(a, 0x3f, (size_t)m * k * 2);
    cudaMemset(b, 0x3f, (size_t)k * n * 2);
    cudaMemset(c, 0xff, (size_t)m * n * 4);
    h->copy_ws_limit = 1;
    tk_status st = tk_gemm(h, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, m, n, k, 1.0f, a, k, b, n, 0.0f, c, TK_F32, n, NULL,
                           NULL);
    CHECK(st == TK_ERR_OUT_OF_RESOURCES, "status %d (%s), expected OUT_OF_RESOURCES", st, tk_last_error(h));
    CHECK(strstr(tk_last_error(h), "workspace") != NULL, "message does not say why: %s", tk_last_error(h));
    cudaDeviceSynchronize();
    uint32_t first = 0;
    cudaMemcpy(&first, c, 4, cudaMemcpyDeviceToHost);
    CHECK(first == 0xffffffffu, "refused call wrote C (%08x)", first);
    h->copy_ws_limit = 0;
    st = tk_gemm(h, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, m, n, k, 1.0f, a, k, b, n, 0.0f, c, TK_F32, n, NULL, NULL);
    CHECK(st == TK_SUCCESS && cudaDeviceSynchronize() == cudaSuccess, "the same call without the limit: %d (%s)", st,
          tk_last_error(h));
    /* 0x3f3f as bf16 is 0.74609375: each entry is K times its square */
    float v = 0.0f;
    cudaMemcpy(&v, c, 4, cudaMemcpyDeviceToHost);
    float want = 517.0f * 0.74609375f * 0.74609375f;
    CHECK(v > want * 0.999f && v < want * 1.001f, "C[0] = %g, expected %g", (double)v, (double)want);
    cudaFree(a); cudaFree(b); cudaFree(c);
}

/* A handle created with TILEKIT_TUNE naming `text` written to a file. */
static tk_handle tuned_handle(const char *text)
{
    char path[] = "/tmp/tk_tune_dispatchXXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    setenv(TK_TUNE_ENV, path, 1);
    tk_handle t = NULL;
    tk_create(&t);
    unsetenv(TK_TUNE_ENV);
    unlink(path);
    return t;
}

/* The tune cache overrides the shape rules for the problems it lists, and
 * only where its kernel supports the problem; a stale or malformed file
 * changes nothing. The tuned run is checked for its result too. */
static void test_tune_cache(void)
{
    if (h->dev.sm < 90) {
        printf("     (device is sm_%d: the tuned kernel below is a Hopper one)\n", h->dev.sm);
        return;
    }
    tk_gemm_problem p = problem(512, 512, 517, 520, TK_OP_N, TK_OP_N);   /* lda 520: aligned */
    const tk_kernel *model = pick(&p);
    const char *other = model && !strcmp(model->name, "k33_wgmma_128x128") ? "k34_wgmma_128x64" : "k33_wgmma_128x128";
    char text[512];
    snprintf(text, sizeof text, "tilekit-tune 1\ndevice %d %d %s\n512 512 517 n n fp32 %s\n", h->dev.sm_count,
             h->dev.sm, h->dev.name, other);
    tk_handle t = tuned_handle(text);
    CHECK(t && t->ntune == 1, "the tune file was not read");
    if (!t)
        return;
    const char *name = tk_select_kernel(t, &p);
    CHECK(name && !strcmp(name, other), "tuned: auto chose %s, the file says %s (the rules: %s)", name ? name : "nothing",
          other, model ? model->name : "nothing");
    tk_gemm_problem q = problem(512, 512, 516, 520, TK_OP_N, TK_OP_N);   /* not listed */
    const char *qn = tk_select_kernel(t, &q), *qm = tk_select_kernel(h, &q);
    CHECK(qn && qm && !strcmp(qn, qm), "an unlisted problem: %s, without the file %s", qn ? qn : "-", qm ? qm : "-");
    /* the tuned kernel runs and is right */
    void *a = NULL, *b = NULL, *c = NULL;
    if (!cudaMalloc(&a, (size_t)512 * 520 * 2) && !cudaMalloc(&b, (size_t)517 * 512 * 2) &&
        !cudaMalloc(&c, (size_t)512 * 512 * 4)) {
        cudaMemset(a, 0x3f, (size_t)512 * 520 * 2);
        cudaMemset(b, 0x3f, (size_t)517 * 512 * 2);
        tk_status st = tk_gemm(t, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 512, 512, 517, 1.0f, a, 520, b, 512, 0.0f, c, TK_F32,
                               512, NULL, NULL);
        float v = 0.0f;
        cudaDeviceSynchronize();
        cudaMemcpy(&v, (float *)c + 512 * 511 + 511, 4, cudaMemcpyDeviceToHost);
        float want = 517.0f * 0.74609375f * 0.74609375f;
        CHECK(st == TK_SUCCESS && v > want * 0.999f && v < want * 1.001f, "tuned run: status %d, C[511][511] = %g, "
              "expected %g", st, (double)v, (double)want);
    } else {
        CHECK(0, "cudaMalloc failed");
    }
    cudaFree(a); cudaFree(b); cudaFree(c);
    tk_destroy(t);
    /* stale and malformed files: ignored (a warning on stderr), the rules decide */
    const char *ignored[2] = { "tilekit-tune 1\ndevice 1 90 Some Other GPU\n512 512 517 n n fp32 k33_wgmma_128x128\n",
                               "tilekit-tune 1\ndevice 132 90 x\n512 512 n n fp32\n" };
    for (int i = 0; i < 2; i++) {
        t = tuned_handle(ignored[i]);
        CHECK(t && t->ntune == 0 && t->tune == NULL, "file %d should be ignored", i);
        name = t ? tk_select_kernel(t, &p) : NULL;
        CHECK(name && model && !strcmp(name, model->name), "file %d ignored: auto chose %s, the rules %s", i,
              name ? name : "-", model ? model->name : "-");
        tk_destroy(t);
    }
}

void tk_tests(void)
{
    have_gpu = tk_create(&h) == TK_SUCCESS && h->have_device;
    if (!have_gpu) {
        printf("no GPU: %s\n", h ? h->device_error : tk_last_error(NULL));
        TK_TEST(test_unaligned_routes);   /* fails loudly: this suite needs a GPU */
        return;
    }
    TK_TEST(test_sm90_picks_hopper);
    TK_TEST(test_sm80_picks_portable);
    TK_TEST(test_unaligned_routes);
    TK_TEST(test_copy_refused);
    TK_TEST(test_tune_cache);
    tk_destroy(h);
}
