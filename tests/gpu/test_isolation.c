/* test_isolation.c - a call that fails leaves its handle working and
 * leaks nothing. Results are checked bit for bit (int_gemm.h).
 *
 *   refusals_keep_the_handle: on one handle, each kind of refusal
 *     (INVALID_VALUE, NOT_SUPPORTED, ARCH_MISMATCH, OUT_OF_RESOURCES; the
 *     last three by describing the device or the copy workspace smaller
 *     than they are) followed by a good call: the refusal must name its
 *     reason and leave C as it was, the good call must be right.
 *   allocation_failures: the handle's n-th device allocation fails
 *     (h->fail_alloc), n = 1, 2, ... until a sequence of calls that needs
 *     them all (cuBLAS's workspace, the split workspace, the copy
 *     workspace, the event that orders them across streams) makes fewer
 *     than n. Each call must be right (the split runs without its
 *     workspace) or return ALLOC or OUT_OF_RESOURCES with C as it was; the
 *     calls after the failed one must be right or refused the same way (a
 *     failed allocation left as the runtime's last error made the next
 *     launch fail); then, the hook spent, the whole sequence must be right
 *     on the same handle; and after tk_destroy the device's free memory
 *     must be what it was before tk_create, within 2 MB.
 *
 * Expected to take a second or two on an H100.
 *   build/tests/gpu_test_isolation [name-substring]
 */
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "lib/internal.h"
#include "../host/check.h"
#include "int_gemm.h"

#define MSG 512
#define LEAK_SLACK (2u << 20)     /* bytes of free memory cudaMemGetInfo may differ by */

/* SPLIT: k34's few-tile split on the H100 (64 tiles of 128 x 64 in two
 * k-slices; 128 x 2048 x 2048 and 128 x 4096 x 4096 went to k36's swapped
 * tiles unsplit, without the split workspace the allocation test counts);
 * COPY: lda odd, so
 * auto-dispatch copies A. */
enum { SPLIT, COPY, NSETS };
static const ig_shape shapes[NSETS] = {
    { "128x4096x8192 NT (split)", 128, 4096, 8192, TK_OP_T, 0, TK_F32 },
    { "512x512x1023 bf16 (lda odd: A copied)", 512, 512, 1023, TK_OP_N, 0, TK_BF16 },
};
static ig_set sets[NSETS];
static tk_handle ref_h;
static int hopper;
static cudaStream_t streams[2];

static const float alphas[] = { 1.0f, -2.0f, 3.0f, 0.5f, -1.0f };
#define NALPHA ((int)(sizeof alphas / sizeof alphas[0]))

/* One call of set `set` through `kernel` on h, with C filled with 0xff
 * first, judged: right, or (when `refusable`) refused with one of the
 * allocation statuses, a message, and C as it was. 0, or 1 with why. */
static int good_or_refused(tk_handle h, int set, const char *kernel, int stream, float alpha, int refusable,
                           char *why, size_t len)
{
    ig_set *o = &sets[set];
    cudaStream_t s = streams[stream];
    ig_poison(o, s);
    tk_status st = ig_gemm(h, o, alpha, kernel, s);
    if (st == TK_SUCCESS)
        return ig_check(o, alpha, s, why, len);
    if (refusable && (st == TK_ERR_ALLOC || st == TK_ERR_OUT_OF_RESOURCES) && *tk_last_error(h))
        return ig_untouched(o, s, why, len);
    snprintf(why, len, "%s (\"%s\")", tk_status_string(st), tk_last_error(h));
    return 1;
}

/* ---- refusals ---- */

/* A call to refuse: the set's problem through `kernel`, broken as the
 * fields say, expected to fail with `want` and a message naming `word`. */
typedef struct refusal {
    const char *what;
    int set;
    const char *kernel;
    int64_t lda;                 /* > 0: this (too small) lda */
    int null_b;                  /* B NULL */
    int sm;                      /* > 0: the device described as sm_<sm> */
    size_t smem_optin;           /* > 0: its shared memory per block described as this */
    size_t copy_limit;           /* > 0: the copy workspace limited to this */
    tk_status want;
    const char *word;
    int needs_hopper;            /* the kernel named runs on sm_90 only */
} refusal;

/* The copy limit first: it refuses only while the copy workspace is smaller
 * than the copy, i.e. before the first copy on the handle. */
static const refusal refusals[] = {
    { "copy workspace over its limit", COPY, "auto", 0, 0, 0, 0, 1, TK_ERR_OUT_OF_RESOURCES, "workspace", 0 },
    { "lda too small", SPLIT, "auto", 100, 0, 0, 0, 0, TK_ERR_INVALID_VALUE, "lda", 0 },
    { "unknown kernel", SPLIT, "k99_missing", 0, 0, 0, 0, 0, TK_ERR_INVALID_VALUE, "k99_missing", 0 },
    { "B NULL", SPLIT, "auto", 0, 1, 0, 0, 0, TK_ERR_INVALID_VALUE, "B:", 0 },
    { "k31 on an odd lda", COPY, "k31_wgmma_cluster", 0, 0, 0, 0, 0, TK_ERR_NOT_SUPPORTED, "row stride", 1 },
    { "k21 on an odd lda", COPY, "k21_mma_fastload", 0, 0, 0, 0, 0, TK_ERR_NOT_SUPPORTED, "leading dimension", 0 },
    { "k31 on a device described as sm_80", SPLIT, "k31_wgmma_cluster", 0, 0, 80, 0, 0, TK_ERR_ARCH_MISMATCH,
      "sm_90", 1 },
    { "k34 over a 48 KiB shared memory limit", SPLIT, "k34_wgmma_128x64", 0, 0, 0, 48 << 10, 0,
      TK_ERR_OUT_OF_RESOURCES, "shared memory", 1 },
};

/* The good calls after them, in turn. */
static const struct { int set; const char *kernel; } goods[] = {
    { SPLIT, "auto" }, { COPY, "auto" }, { SPLIT, "k34_wgmma_128x64" }, { SPLIT, "cublas" },
    { SPLIT, "k31_wgmma_cluster" },
};

/* Makes the refused call on h; h as it was afterwards. */
static tk_status refused_call(tk_handle h, const refusal *r)
{
    tk_gemm_problem p = ig_problem(&sets[r->set], 1.0f);
    if (r->lda)
        p.lda = r->lda;
    if (r->null_b)
        p.b = NULL;
    tk_device saved = h->dev;
    if (r->sm)
        h->dev.sm = r->sm;
    if (r->smem_optin)
        h->dev.smem_per_block_optin = r->smem_optin;
    h->copy_ws_limit = r->copy_limit;
    tk_status st = tk_gemm_ex(h, &p, r->kernel, streams[0]);
    h->dev = saved;
    h->copy_ws_limit = 0;
    return st;
}

static void test_refusals_keep_the_handle(void)
{
    tk_handle h = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS, "tk_create: %s", tk_last_error(NULL));
    if (!h)
        return;
    int n = (int)(sizeof refusals / sizeof refusals[0]), ngood = (int)(sizeof goods / sizeof goods[0]);
    for (int i = 0; i < n; i++) {
        const refusal *r = &refusals[i];
        if (r->needs_hopper && !hopper) {
            printf("     (%s: needs sm_90, left out)\n", r->what);
            continue;
        }
        char why[MSG];
        ig_poison(&sets[r->set], streams[0]);
        tk_status st = refused_call(h, r);
        CHECK(st == r->want, "%s: %s, expected %s (%s)", r->what, tk_status_string(st), tk_status_string(r->want),
              tk_last_error(h));
        CHECK(strstr(tk_last_error(h), r->word) != NULL, "%s: the message does not say '%s': %s", r->what, r->word,
              tk_last_error(h));
        CHECK(!ig_untouched(&sets[r->set], streams[0], why, sizeof why), "%s: %s", r->what, why);
        int g = i % ngood;
        if (!hopper && strncmp(goods[g].kernel, "k3", 2) == 0)
            g = 0;   /* auto instead of a Hopper kernel */
        if (good_or_refused(h, goods[g].set, goods[g].kernel, 0, alphas[i % NALPHA], 0, why, sizeof why))
            CHECK(0, "%s on %s after '%s': %s", goods[g].kernel, shapes[goods[g].set].name, r->what, why);
    }
    tk_destroy(h);
}

/* ---- allocation failures ---- */

/* On a fresh handle each call needs one more device allocation than the
 * one before: cuBLAS's workspace, the split workspace (Hopper), the copy
 * workspace, the event ordering the workspaces on a second stream; the
 * last call needs none. */
static const struct { int set; const char *kernel; int stream; } seq[] = {
    { SPLIT, "cublas", 0 }, { SPLIT, "auto", 0 }, { COPY, "auto", 0 }, { SPLIT, "auto", 1 }, { COPY, "auto", 1 },
};
#define NSEQ ((int)(sizeof seq / sizeof seq[0]))

/* Runs seq on h: with `refusable`, calls may be refused for memory. The
 * number of wrong calls, the first described in why. */
static int run_seq(tk_handle h, int refusable, char *why, size_t len)
{
    int wrong = 0;
    for (int i = 0; i < NSEQ; i++) {
        char w[MSG / 2];
        if (good_or_refused(h, seq[i].set, seq[i].kernel, seq[i].stream, alphas[i % NALPHA], refusable, w,
                            sizeof w) &&
            !wrong++)
            snprintf(why, len, "call %d (%s on %s, stream %d): %s", i, seq[i].kernel, shapes[seq[i].set].name,
                     seq[i].stream, w);
    }
    return wrong;
}

static size_t free_memory(void)
{
    size_t free_b = 0, total = 0;
    cudaDeviceSynchronize();
    cudaMemGetInfo(&free_b, &total);
    return free_b;
}

static void test_allocation_failures(void)
{
    char why[MSG] = "";
    /* One full run first: the kernels' modules and cuBLAS's are loaded on
     * first use and stay, which is no leak of a handle. */
    tk_handle h = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS && !run_seq(h, 0, why, sizeof why), "warm-up: %s", why);
    tk_destroy(h);
    size_t before = free_memory();
    int fired = 0;
    for (int n = 1; n <= 2 * NSEQ; n++) {
        h = NULL;
        if (tk_create(&h) != TK_SUCCESS) {
            CHECK(0, "tk_create: %s", tk_last_error(NULL));
            break;
        }
        h->fail_alloc = n;
        if (run_seq(h, 1, why, sizeof why))
            CHECK(0, "allocation %d failing: %s", n, why);
        int hit = h->fail_alloc == 0;
        h->fail_alloc = 0;
        if (run_seq(h, 0, why, sizeof why))
            CHECK(0, "allocation %d failed before, then: %s", n, why);
        tk_destroy(h);
        size_t after = free_memory();
        CHECK(after + LEAK_SLACK >= before && before + LEAK_SLACK >= after,
              "allocation %d failing: %zu bytes free before tk_create, %zu after tk_destroy", n, before, after);
        if (!hit)
            break;
        fired++;
    }
    /* cuBLAS's, the copy workspace, the event; and the split one on Hopper */
    CHECK(fired >= 3 + hopper, "the hook failed only %d allocations: the sequence no longer needs them all?", fired);
    CHECK(fired < 2 * NSEQ, "every one of %d allocations failed: the hook never runs out?", fired);
}

/* ---- setup ---- */

static int setup_failed;
static char setup_why[MSG];

static void test_setup(void) { CHECK(!setup_failed, "%s", setup_why); }

static void no_gpu(void) { CHECK(0, "a GPU suite without a GPU fails"); }

void tk_tests(void)
{
    if (tk_create(&ref_h) != TK_SUCCESS || !ref_h->have_device) {
        printf("no GPU: %s\n", ref_h ? ref_h->device_error : tk_last_error(NULL));
        tk_run_test("isolation_needs_a_gpu", no_gpu);
        tk_destroy(ref_h);
        return;
    }
    hopper = ref_h->dev.sm == 90;
    for (int i = 0; i < 2 && !setup_failed; i++)
        if (cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking) != cudaSuccess) {
            setup_failed = 1;
            snprintf(setup_why, sizeof setup_why, "cudaStreamCreate: %s", cudaGetErrorString(cudaGetLastError()));
        }
    for (int i = 0; i < NSETS && !setup_failed; i++)
        setup_failed = ig_make(&sets[i], &shapes[i], (uint32_t)(100 + i), ref_h, setup_why, sizeof setup_why);
    TK_TEST(test_setup);
    if (!setup_failed) {
        TK_TEST(test_refusals_keep_the_handle);
        TK_TEST(test_allocation_failures);
    }
    for (int i = 0; i < NSETS; i++)
        ig_free(&sets[i]);
    for (int i = 0; i < 2; i++)
        if (streams[i])
            cudaStreamDestroy(streams[i]);
    tk_destroy(ref_h);
}
