/* test_workspace.c - workspace control and the split-K switch (tilekit.h,
 * "workspaces"; issue 37, items 1 and 2) on the CPU: every argument check,
 * the settings as tk_get_handle_info reports them, what tk_workspace_size
 * answers on a modeled H100, and where a call's workspaces come from
 * (workspace.c's tk_handle_call_ws): the caller's memory laid out, the cap
 * refusing or going without, and with split-K off no kernel asked for a
 * workspace at all.
 *
 * Safe on a GPU machine too: fake pointers only reach calls that refuse
 * them or make no CUDA call with them (the cases that would are skipped
 * where a GPU is present). */
#include <stdint.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lib/internal.h"
#include "check.h"
#include "fake_handle.h"

#define FAKE_WS ((void *)(uintptr_t)0x10000000)   /* 256-byte aligned, never dereferenced */

static tk_handle_info info_of(tk_handle h)
{
    tk_handle_info i = TK_HANDLE_INFO_INIT;
    tk_status st = tk_get_handle_info(h, &i);
    CHECK(st == TK_SUCCESS, "tk_get_handle_info: %s (%s)", tk_status_string(st), tk_last_error(h));
    return i;
}

/* 9 x 1000 x 16360 NT, fp32 C: k40_skinny splits it into four (as
 * tests/gpu/test_handle.c's s_decode); pointers NULL (introspection). */
static tk_gemm_problem decode_problem(void)
{
    tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, 9, 1000, 16360, 1.0f, 0.0f, NULL, 16360, NULL, 16360,
                          NULL, 1000, TK_F32 };
    return p;
}

static void test_null_handle(void)
{
    tk_handle_info i = TK_HANDLE_INFO_INIT;
    size_t bytes = 1;
    tk_gemm_problem p = decode_problem();
    const tk_status st[] = {
        tk_set_workspace(NULL, NULL, 0), tk_set_workspace_limit(NULL, 0), tk_set_split_k(NULL, TK_SPLIT_K_NEVER),
        tk_workspace_release(NULL, NULL), tk_get_handle_info(NULL, &i), tk_workspace_size(NULL, &p, NULL, &bytes),
    };
    for (size_t n = 0; n < sizeof st / sizeof st[0]; n++)
        CHECK(st[n] == TK_ERR_INVALID_VALUE, "call %zu with a NULL handle: %s", n, tk_status_string(st[n]));
    CHECK(starts(tk_last_error(NULL), "h:"), "message: %s", tk_last_error(NULL));
}

static void test_set_workspace_args(void)
{
    tk_handle h = make_handle();
    tk_handle_info i = info_of(h);
    CHECK(!i.workspace && !i.workspace_bytes && i.workspace_limit == TK_WORKSPACE_UNLIMITED && !i.workspace_held &&
              i.split_k == TK_SPLIT_K_AUTO,
          "defaults: workspace %p (%zu), limit %zu, held %zu, split %d", i.workspace, i.workspace_bytes,
          i.workspace_limit, i.workspace_held, (int)i.split_k);
    tk_status st = tk_set_workspace(h, NULL, 4096);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "ptr:") && contains(tk_last_error(h), "4096"),
          "NULL with bytes: %s (%s)", tk_status_string(st), tk_last_error(h));
    st = tk_set_workspace(h, (char *)FAKE_WS + 16, 4096);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "ptr:") && contains(tk_last_error(h), "256-byte"),
          "misaligned: %s (%s)", tk_status_string(st), tk_last_error(h));
    CHECK(!info_of(h).workspace, "a refused workspace was set");
    st = tk_set_workspace(h, FAKE_WS, 1 << 20);
    if (have_gpu()) {   /* checked there: not device memory */
        CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "ptr:"), "host address taken: %s",
              tk_status_string(st));
    } else {            /* no device to check it against: taken */
        CHECK(st == TK_SUCCESS && !*tk_last_error(h), "set: %s (%s)", tk_status_string(st), tk_last_error(h));
        i = info_of(h);
        CHECK(i.workspace == FAKE_WS && i.workspace_bytes == 1 << 20, "info: %p %zu", i.workspace,
              i.workspace_bytes);
        CHECK(h->uws == FAKE_WS && h->uws_flags == 0, "flags not to be set up again");
        st = tk_set_workspace(h, FAKE_WS, 0);   /* no workspace at all */
        CHECK(st == TK_SUCCESS && info_of(h).workspace == FAKE_WS && info_of(h).workspace_bytes == 0,
              "0 bytes: %s", tk_status_string(st));
    }
    CHECK(tk_set_workspace(h, NULL, 0) == TK_SUCCESS && !info_of(h).workspace, "back to the handle's own");
    tk_destroy(h);
}

static void test_limit_and_info(void)
{
    tk_handle h = make_handle();
    const size_t limits[] = { 0, 1, 4096, (size_t)64 << 20, TK_WORKSPACE_UNLIMITED };
    for (size_t n = 0; n < sizeof limits / sizeof limits[0]; n++) {
        CHECK(tk_set_workspace_limit(h, limits[n]) == TK_SUCCESS, "limit %zu", limits[n]);
        CHECK(info_of(h).workspace_limit == limits[n], "limit %zu read back as %zu", limits[n],
              info_of(h).workspace_limit);
    }
    tk_handle_info i = info_of(h);
    CHECK(i.size == sizeof i && i.device == (have_gpu() ? i.device : -1) && (have_gpu() || i.sm == 0),
          "size %zu, device %d, sm %d", i.size, i.device, i.sm);
    /* the versioned rule: NULL, too small, exact, larger (a newer caller: zeros past what this library knows) */
    CHECK(tk_get_handle_info(h, NULL) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "out:"), "NULL out: %s",
          tk_last_error(h));
    tk_handle_info small = { .size = sizeof(size_t) };
    CHECK(tk_get_handle_info(h, &small) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "out->size:"),
          "small: %s", tk_last_error(h));
    struct { tk_handle_info i; unsigned char future[16]; } big;
    memset(&big, 0xab, sizeof big);
    big.i.size = sizeof big;
    CHECK(tk_get_handle_info(h, &big.i) == TK_SUCCESS, "larger struct: %s", tk_last_error(h));
    int zero = 1;
    for (size_t n = 0; n < sizeof big.future; n++)
        zero &= big.future[n] == 0;
    CHECK(zero && big.i.size == sizeof big && big.i.workspace_limit == TK_WORKSPACE_UNLIMITED,
          "larger struct: tail zeroed %d, size %zu", zero, big.i.size);
    tk_destroy(h);
}

/* A family whose workspace function counts the times it is asked. */
static int asked;
static tk_status count_supports(const tk_kernel *k, const tk_args *a, const tk_device *d, char *why, size_t len)
{
    (void)k; (void)a; (void)d; (void)why; (void)len;
    return TK_SUCCESS;
}
static void count_resources(const tk_kernel *k, const tk_args *a, const tk_device *d, tk_resources *r)
{
    (void)k; (void)a; (void)d;
    memset(r, 0, sizeof *r);
}
static size_t count_workspace(const tk_kernel *k, const tk_args *a, const tk_device *d, size_t *nflags)
{
    (void)k; (void)a; (void)d;
    asked++;
    *nflags = 64;
    return 1 << 20;
}

/* Item 2: with split-K off no kernel is asked for a workspace (the
 * family's workspace function is not even called), tk_workspace_size says
 * 0 for a problem that splits otherwise, and cuBLAS gets none. */
static void test_split_k_never(void)
{
    tk_handle h = make_handle();
    CHECK(tk_set_split_k(h, (tk_split_k)2) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "mode:"),
          "mode 2: %s", tk_last_error(h));
    CHECK(tk_set_split_k(h, (tk_split_k)-1) == TK_ERR_INVALID_VALUE, "mode -1 accepted");
    CHECK(tk_set_split_k(h, TK_SPLIT_K_NEVER) == TK_SUCCESS && info_of(h).split_k == TK_SPLIT_K_NEVER, "never");
    CHECK(tk_set_split_k(h, TK_SPLIT_K_AUTO) == TK_SUCCESS && info_of(h).split_k == TK_SPLIT_K_AUTO, "auto");
    tk_destroy(h);

    struct tk_handle_s fake;
    fh_init(&fake, 90);
    const tk_family_ops ops = { count_supports, count_resources, NULL, count_workspace, NULL };
    const tk_family fam = { "k98", "test-only", 80, TK_ACCEPTS_BF16_GEMM, &ops, 50.0 };
    const tk_kernel k = { "k98_counting", "test-only", &fam, 80, 128, 128, 64, 64, 64, 0, 0, 0 };
    tk_args a;
    memset(&a, 0, sizeof a);
    a.m = a.n = 256;
    a.k = 65536;
    size_t nflags = 0;
    asked = 0;
    CHECK(tk_call_kws(&fake, &k, &a, &nflags) == 1 << 20 && nflags == 64 && asked == 1, "split-K on: asked %d",
          asked);
    fake.split_never = 1;
    nflags = 7;
    CHECK(tk_call_kws(&fake, &k, &a, &nflags) == 0 && nflags == 0 && asked == 1,
          "split-K off: the kernel was asked for a workspace (%d times)", asked);

    /* the real split kernels on the modeled H100, through the public call */
    fake.split_never = 0;
    tk_gemm_problem p = decode_problem();
    fh_attrs(&fake, &p);
    size_t bytes = 0;
    tk_status st = tk_workspace_size(&fake, &p, "k40_skinny", &bytes);
    CHECK(st == TK_SUCCESS && bytes > 0, "k40_skinny splits 9 x 1000 x 16360: %s, %zu bytes (%s)",
          tk_status_string(st), bytes, tk_last_error(&fake));
    const tk_kernel *k40 = tk_registry_find("k40_skinny");
    tk_args na;
    int noop = 0;
    const tk_kernel *kk = NULL;
    CHECK(tk_prepare(&fake, &p, NULL, &na, &noop, &kk, 0) == TK_SUCCESS, "normalize");
    CHECK(tk_call_kws(&fake, k40, &na, &nflags) > 0 && nflags > 0, "k40's workspace: %zu flags", nflags);
    tk_gemm_problem few = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, 512, 4096, 4096, 1.0f, 0.0f, NULL, 4096, NULL, 4096,
                            NULL, 4096, TK_BF16 };
    fh_attrs(&fake, &few);
    size_t few_bytes = 0;
    st = tk_workspace_size(&fake, &few, "k31_wgmma_cluster", &few_bytes);
    CHECK(st == TK_SUCCESS && few_bytes > 0, "k31 splits 512 x 4096 x 4096: %s, %zu (%s)", tk_status_string(st),
          few_bytes, tk_last_error(&fake));
    size_t cb = 0;
    CHECK(tk_workspace_size(&fake, &few, "cublas", &cb) == TK_SUCCESS && cb == TK_CUBLAS_WORKSPACE,
          "cublas: %zu", cb);
    fake.split_never = 1;
    fh_attrs(&fake, &p);
    CHECK(tk_workspace_size(&fake, &p, "k40_skinny", &bytes) == TK_SUCCESS && bytes == 0,
          "split-K off: k40_skinny still needs %zu bytes", bytes);
    CHECK(tk_workspace_size(&fake, &p, NULL, &bytes) == TK_SUCCESS && bytes == 0, "split-K off, auto: %zu", bytes);
    fh_attrs(&fake, &few);
    CHECK(tk_workspace_size(&fake, &few, "k31_wgmma_cluster", &bytes) == TK_SUCCESS && bytes == 0,
          "split-K off: k31 still needs %zu bytes", bytes);
    CHECK(tk_workspace_size(&fake, &few, "cublas", &bytes) == TK_SUCCESS && bytes == 0,
          "split-K off: cuBLAS still gets %zu bytes", bytes);
}

static void test_workspace_size(void)
{
    tk_handle h = make_handle();
    tk_gemm_problem p = decode_problem();
    size_t bytes = 7;
    CHECK(tk_workspace_size(h, &p, NULL, NULL) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "bytes:"),
          "NULL bytes: %s", tk_last_error(h));
    CHECK(tk_workspace_size(h, NULL, NULL, &bytes) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "problem:"),
          "NULL problem: %s", tk_last_error(h));
    p.lda = 3;
    CHECK(tk_workspace_size(h, &p, NULL, &bytes) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "lda:") &&
              bytes == 0,
          "bad lda: %s, %zu", tk_last_error(h), bytes);
    p = decode_problem();
    CHECK(tk_workspace_size(h, &p, "k99_nope", &bytes) == TK_ERR_INVALID_VALUE &&
              starts(tk_last_error(h), "kernel:"),
          "unknown kernel: %s", tk_last_error(h));
    if (!have_gpu()) {
        tk_status st = tk_workspace_size(h, &p, NULL, &bytes);
        CHECK(st == TK_ERR_NO_DEVICE, "no device: %s", tk_status_string(st));
    }
    p.m = 0;   /* a no-op needs nothing, and no device */
    bytes = 7;
    CHECK(tk_workspace_size(h, &p, NULL, &bytes) == TK_SUCCESS && bytes == 0, "no-op: %zu (%s)", bytes,
          tk_last_error(h));
    tk_destroy(h);

    struct tk_handle_s fake;
    fh_init(&fake, 90);
    /* an aligned product of many tiles: no copies; k31's split workspace
     * for its last wave (one slot per cluster and consumer: about 35 MB) */
    tk_gemm_problem big = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 8192, 8192, 8192, 1.0f, 0.0f, NULL, 8192, NULL, 8192,
                            NULL, 8192, TK_F32 };
    fh_attrs(&fake, &big);
    tk_route r;
    CHECK(tk_select_route(&fake, &big, &r) == TK_SUCCESS && !r.bytes, "8192^3: %s", tk_last_error(&fake));
    CHECK(tk_workspace_size(&fake, &big, NULL, &bytes) == TK_SUCCESS && bytes == tk_route_ws_bytes(&fake, &r) &&
              bytes > 0 && bytes < ((size_t)40 << 20),
          "8192^3 (%s): %zu bytes (%s)", r.k ? r.k->name : "?", bytes, tk_last_error(&fake));
    /* lda 8191: auto-dispatch copies A (8192 rows of 8192 bf16) */
    big.k = big.lda = 8191;
    fh_attrs(&fake, &big);
    CHECK(tk_select_route(&fake, &big, &r) == TK_SUCCESS && r.copy[0], "the copy route was not chosen (%s)",
          tk_last_error(&fake));
    CHECK(tk_workspace_size(&fake, &big, NULL, &bytes) == TK_SUCCESS && bytes >= (size_t)8192 * 8192 * 2 &&
              bytes == tk_route_ws_bytes(&fake, &r),
          "copies of A: %zu bytes, the route %zu", bytes, r.bytes);
    /* a named kernel runs A as it is: a refusal, as tk_kernel_supports gives it */
    tk_status st = tk_workspace_size(&fake, &big, "k31_wgmma_cluster", &bytes);
    CHECK(st == TK_ERR_NOT_SUPPORTED && bytes == 0 && contains(tk_last_error(&fake), "k31_wgmma_cluster"),
          "k31 on lda 8191: %s, %zu (%s)", tk_status_string(st), bytes, tk_last_error(&fake));
    CHECK(tk_kernel_supports(&fake, "k31_wgmma_cluster", &big) == st, "differs from tk_kernel_supports");
}

/* Where a call's workspaces come from with the caller's memory
 * (workspace.c's layout): flags first and kept, copies, partial sums. The
 * flags are taken as set up already (uws_flags), so no CUDA call is made. */
static void test_caller_layout(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    char *const base = FAKE_WS;
    fake.uws = base;
    fake.uws_bytes = 1 << 20;
    fake.uws_flags = 4096;
    tk_call_ws w;
    /* 100 flags: the first 512 bytes of the area set up (no zeroing), then the copies, then the sums */
    tk_status st = tk_handle_call_ws(&fake, 8192, 65536, 100, 0, &w, NULL);
    CHECK(st == TK_SUCCESS && w.flags == (uint32_t *)base && w.nflags == 128 && w.copy == base + 512 &&
              (char *)w.kws == base + 512 + 8192 && w.kws_bytes == (1 << 20) - 512 - 8192 && w.seq == 1 &&
              fake.uws_flags == 512,
          "layout: %s flags %p (%zu) copies %p kws %p (%zu) seq %u", tk_status_string(st), (void *)w.flags,
          w.nflags, w.copy, w.kws, w.kws_bytes, w.seq);
    CHECK(!fake.kws && !fake.copy_ws && !fake.flags && tk_handle_held(&fake) == 0, "the handle allocated");
    /* exactly what tk_workspace_size counts (flags rounded to 256 bytes, copies, sums): split */
    fake.uws_bytes = 512 + 8192 + 65536;
    st = tk_handle_call_ws(&fake, 8192, 65536, 100, 0, &w, NULL);
    CHECK(st == TK_SUCCESS && w.kws && w.kws_bytes == 65536 && w.seq == 2, "exact size: kws %p (%zu)", w.kws,
          w.kws_bytes);
    fake.uws_bytes = 1 << 20;
    /* the partial sums do not fit after the copies: unsplit, the copies kept after the flags */
    st = tk_handle_call_ws(&fake, (1 << 20) - 8192, 65536, 100, 0, &w, NULL);
    CHECK(st == TK_SUCCESS && !w.kws && w.copy == base + 512 && fake.uws_flags == 512, "unsplit: kws %p copy %p",
          w.kws, w.copy);
    /* copies that fit the workspace only over the flags: taken, the flags to be set up again */
    st = tk_handle_call_ws(&fake, (1 << 20) - 256, 0, 0, 0, &w, NULL);
    CHECK(st == TK_SUCCESS && w.copy == base && fake.uws_flags == 0, "over the flags: copy %p, flags %zu", w.copy,
          fake.uws_flags);
    /* more copies than the workspace: refused, the call's failure */
    st = tk_handle_call_ws(&fake, (1 << 20) + 256, 0, 0, 0, &w, NULL);
    CHECK(st == TK_ERR_OUT_OF_RESOURCES && contains(fake.err, "caller's workspace") && !w.copy,
          "too many copies: %s (%s)", tk_status_string(st), fake.err);
    /* cuBLAS: from the start, up to 32 MiB; the flags over it forgotten */
    fake.uws_flags = 4096;
    st = tk_handle_call_ws(&fake, 0, 0, 0, 1, &w, NULL);
    CHECK(st == TK_SUCCESS && w.cublas == base && w.cublas_bytes == 1 << 20 && fake.uws_flags == 0,
          "cuBLAS: %p %zu, flags %zu", w.cublas, w.cublas_bytes, fake.uws_flags);
    fake.uws_bytes = (size_t)64 << 20;
    st = tk_handle_call_ws(&fake, 0, 0, 0, 1, &w, NULL);
    CHECK(st == TK_SUCCESS && w.cublas_bytes == TK_CUBLAS_WORKSPACE, "cuBLAS in 64 MiB: %zu", w.cublas_bytes);
    /* a workspace smaller than the flags' area: cuBLAS writes over (some of) them all the same */
    fake.uws_bytes = 256;
    fake.uws_flags = 4096;
    st = tk_handle_call_ws(&fake, 0, 0, 0, 1, &w, NULL);
    CHECK(st == TK_SUCCESS && w.cublas_bytes == 256 && fake.uws_flags == 0, "cuBLAS in 256 bytes: flags %zu",
          fake.uws_flags);
    /* a workspace of 0 bytes: nothing, and no failure but the copies' */
    fake.uws_bytes = 0;
    st = tk_handle_call_ws(&fake, 0, 65536, 100, 0, &w, NULL);
    CHECK(st == TK_SUCCESS && !w.kws, "0 bytes: split");
    st = tk_handle_call_ws(&fake, 0, 0, 0, 1, &w, NULL);
    CHECK(st == TK_SUCCESS && !w.cublas && !w.cublas_bytes, "0 bytes: cuBLAS got %p", w.cublas);
    if (!have_gpu()) {
        /* flags not set up: zeroing them fails without a device, so the call runs unsplit */
        fake.uws_bytes = 1 << 20;
        fake.uws_flags = 0;
        st = tk_handle_call_ws(&fake, 0, 65536, 100, 0, &w, NULL);
        CHECK(st == TK_SUCCESS && !w.kws && fake.uws_flags == 0, "fresh flags without a device: kws %p", w.kws);
    }
}

/* The handle's own memory under a cap: the copies refused, the split and
 * cuBLAS's workspace gone without, and no allocation even tried (the
 * allocation hook, armed, is never reached); memory held already is used. */
static void test_own_cap(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    fake.ws_limit = 1000;
    fake.fail_alloc = 1;
    tk_call_ws w;
    tk_status st = tk_handle_call_ws(&fake, 4096, 0, 0, 0, &w, NULL);
    CHECK(st == TK_ERR_OUT_OF_RESOURCES && contains(fake.err, "cap of 1000") &&
              contains(fake.err, "tk_set_workspace_limit") && !w.copy,
          "copies over the cap: %s (%s)", tk_status_string(st), fake.err);
    st = tk_handle_call_ws(&fake, 0, 65536, 100, 0, &w, NULL);
    CHECK(st == TK_SUCCESS && !w.kws && !w.flags && fake.seq == 0, "split over the cap: kws %p, seq %u", w.kws,
          fake.seq);
    st = tk_handle_call_ws(&fake, 0, 0, 0, 1, &w, NULL);
    CHECK(st == TK_SUCCESS && !w.cublas, "cuBLAS over the cap: %p", w.cublas);
    CHECK(fake.fail_alloc == 1, "an allocation was tried past the cap");
    /* held before the cap was lowered: used */
    fake.copy_ws = FAKE_WS;
    fake.copy_ws_bytes = 1 << 20;
    fake.ws_limit = 0;
    st = tk_handle_call_ws(&fake, 4096, 0, 0, 0, &w, NULL);
    CHECK(st == TK_SUCCESS && w.copy == FAKE_WS && fake.fail_alloc == 1, "held copies: %s, %p", tk_status_string(st),
          w.copy);
    CHECK(tk_handle_held(&fake) == 1 << 20, "held %zu", tk_handle_held(&fake));
    tk_handle_info i = info_of(&fake);
    CHECK(i.workspace_held == 1 << 20 && i.workspace_limit == 0 && i.device == 0 && i.sm == 90,
          "info: held %zu, limit %zu, device %d, sm %d", i.workspace_held, i.workspace_limit, i.device, i.sm);
    /* the test hook's own limit, as before */
    fake.copy_ws = NULL;
    fake.copy_ws_bytes = 0;
    fake.ws_limit = TK_WORKSPACE_UNLIMITED;
    fake.copy_ws_limit = 100;
    st = tk_handle_call_ws(&fake, 4096, 0, 0, 0, &w, NULL);
    CHECK(st == TK_ERR_OUT_OF_RESOURCES && contains(fake.err, "limit of 100"), "copy_ws_limit: %s", fake.err);
}

static void test_release(void)
{
    tk_handle h = make_handle();
    CHECK(tk_workspace_release(h, NULL) == TK_SUCCESS, "nothing held: %s", tk_last_error(h));
    tk_destroy(h);
    /* a handle holding workspaces, called where another device is current: refused, nothing freed */
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    fake.kws = FAKE_WS;
    fake.kws_bytes = 65536;
    fake.get_device = fh_current_is_1;
    tk_status st = tk_workspace_release(&fake, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && contains(fake.err, "device 0") && fake.kws == FAKE_WS,
          "another device: %s (%s)", tk_status_string(st), fake.err);
    if (!have_gpu()) {
        /* the ordering event cannot be had without a device: refused before anything is freed */
        fake.get_device = fh_current_is_0;
        st = tk_workspace_release(&fake, NULL);
        CHECK(st == TK_ERR_ALLOC && fake.kws == FAKE_WS && fake.kws_bytes == 65536, "no device: %s (%s)",
              tk_status_string(st), fake.err);
    }
}

void tk_tests(void)
{
    TK_TEST(test_null_handle);
    TK_TEST(test_set_workspace_args);
    TK_TEST(test_limit_and_info);
    TK_TEST(test_split_k_never);
    TK_TEST(test_workspace_size);
    TK_TEST(test_caller_layout);
    TK_TEST(test_own_cap);
    TK_TEST(test_release);
}
