/* test_api.c - every argument check of the public API that needs no GPU,
 * and the host internals behind them (normalization, resource and alignment
 * checks) driven with hand-made devices.
 *
 * Safe on a GPU machine too: a problem with fake pointers is only ever
 * passed where a check must refuse it before any launch, or to
 * tk_kernel_supports, which launches nothing. Calls that would reach the
 * GPU are made only when cudaGetDeviceCount finds none. */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lib/internal.h"
#include "check.h"
#include "fake_handle.h"

/* Stand-ins for device pointers: never dereferenced (every call using them
 * is refused first, or made only without a GPU). 256-byte aligned. */
#define FAKE_A ((const void *)(uintptr_t)0x100000)
#define FAKE_B ((const void *)(uintptr_t)0x200000)
#define FAKE_C ((void *)(uintptr_t)0x300000)

/* A valid 8 x 6 x 4 row-major NN problem with fp32 C. */
static tk_gemm_problem base_problem(void)
{
    tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 8, 6, 4, 1.0f, 0.0f, FAKE_A, 4, FAKE_B, 6, FAKE_C, 6,
                          TK_F32 };
    return p;
}

/* A stand-in for cudaGetDevice in hand-made handles (tk_handle_s.get_device;
 * fake_handle.h has device 0 or 1 current): the call failing. */
static cudaError_t current_fails(int *dev)
{
    *dev = -1;
    return cudaErrorNoDevice;
}

/* Expects tk_gemm_ex to refuse p with st and a message containing each of
 * the NULL-terminated words. */
static void expect_refusal(tk_handle h, const tk_gemm_problem *p, const char *kernel, tk_status want,
                           const char *label, const char *const *words)
{
    tk_status st = tk_gemm_ex(h, p, kernel, NULL);
    CHECK(st == want, "%s: got %s, want %s (%s)", label, tk_status_string(st), tk_status_string(want),
          tk_last_error(h));
    for (const char *const *w = words; *w; w++)
        CHECK(contains(tk_last_error(h), *w), "%s: message '%s' lacks '%s'", label, tk_last_error(h), *w);
}

#define EXPECT(h, p, kernel, want, label, ...)                                    \
    do {                                                                          \
        const char *const words_[] = { __VA_ARGS__, NULL };                       \
        expect_refusal((h), (p), (kernel), (want), (label), words_);              \
    } while (0)

static void test_status_strings(void)
{
    for (int s = 0; s <= TK_ERR_COMM; s++)
        CHECK(strncmp(tk_status_string((tk_status)s), "TK_", 3) == 0, "status %d has no name", s);
    CHECK(strstr(tk_status_string((tk_status)999), "unknown") != NULL, "unknown status not flagged");
}

static void test_version(void)
{
    CHECK(tk_version() == TILEKIT_VERSION, "library %d, header %d", tk_version(), TILEKIT_VERSION);
}

static void test_null_handle(void)
{
    tk_status st = tk_gemm(NULL, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 4, 4, 4, 1.0f, FAKE_A, 4, FAKE_B, 4, 0.0f,
                           FAKE_C, TK_F32, 4, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE, "got %d", st);
    CHECK(contains(tk_last_error(NULL), "handle"), "message: %s", tk_last_error(NULL));
    tk_gemm_problem p = base_problem();
    st = tk_kernel_supports(NULL, "k01_naive", &p);
    CHECK(st == TK_ERR_INVALID_VALUE, "supports with NULL handle: %d", st);
    CHECK(tk_select_kernel(NULL, &p) == NULL, "select with NULL handle returned a kernel");
    CHECK(contains(tk_last_error(NULL), "handle"), "message: %s", tk_last_error(NULL));
}

static void test_create_destroy(void)
{
    CHECK(tk_create(NULL) == TK_ERR_INVALID_VALUE, "tk_create(NULL) accepted");
    /* like every argument check's message, it starts with the argument's name */
    CHECK(!strncmp(tk_last_error(NULL), "out:", 4), "message: %s", tk_last_error(NULL));
    CHECK(tk_destroy(NULL) == TK_SUCCESS, "tk_destroy(NULL) failed");
    tk_handle h = make_handle();
    CHECK(strcmp(tk_last_error(h), "") == 0, "fresh handle has an error: %s", tk_last_error(h));
    tk_destroy(h);
}

static void test_null_problem(void)
{
    tk_handle h = make_handle();
    CHECK(tk_gemm_ex(h, NULL, NULL, NULL) == TK_ERR_INVALID_VALUE, "NULL problem accepted");
    CHECK(contains(tk_last_error(h), "problem"), "message: %s", tk_last_error(h));
    CHECK(tk_kernel_supports(h, NULL, NULL) == TK_ERR_INVALID_VALUE, "supports: NULL problem accepted");
    CHECK(tk_select_kernel(h, NULL) == NULL, "select: NULL problem accepted");
    tk_destroy(h);
}

static void test_bad_enums(void)
{
    tk_handle h = make_handle();
    tk_gemm_problem p = base_problem();
    p.layout = (tk_layout)2;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "layout 2", "layout", "2");
    p = base_problem();
    p.op_a = (tk_op)5;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "op_a 5", "op_a", "5");
    p = base_problem();
    p.op_b = (tk_op)-1;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "op_b -1", "op_b", "-1");
    p = base_problem();
    p.c_type = (tk_dtype)7;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "c_type 7", "c_type", "7");
    tk_destroy(h);
}

static void test_negative_dims(void)
{
    tk_handle h = make_handle();
    tk_gemm_problem p = base_problem();
    p.m = -1;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "m -1", "m:", "negative");
    p = base_problem();
    p.n = -7;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "n -7", "n:", "-7");
    p = base_problem();
    p.k = INT64_MIN;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "k min", "k:", "negative");
    tk_destroy(h);
}

/* The smallest valid leading dimensions of an M x N x K problem. */
static int64_t need_lda(tk_layout l, tk_op op, int64_t m, int64_t k)
{
    /* stored M x K (op N) or K x M (op T); row-major needs the column count */
    int64_t rows = op == TK_OP_N ? m : k, cols = op == TK_OP_N ? k : m;
    return l == TK_ROW_MAJOR ? cols : rows;
}

static void test_leading_dims(void)
{
    const int64_t M = 8, N = 6, K = 4;   /* all different, so each need is distinct per case */
    tk_handle h = make_handle();
    for (int l = 0; l < 2; l++)
        for (int oa = 0; oa < 2; oa++)
            for (int ob = 0; ob < 2; ob++) {
                tk_layout lay = (tk_layout)l;
                int64_t lda = need_lda(lay, (tk_op)oa, M, K);
                int64_t ldb = need_lda(lay, (tk_op)ob, K, N);   /* B is K x N: same rule */
                int64_t ldc = lay == TK_ROW_MAJOR ? N : M;
                float c_host[4] = { 1, 2, 3, 4 };   /* must stay untouched by a refused call */
                tk_gemm_problem p = { lay, (tk_op)oa, (tk_op)ob, M, N, K, 1.0f, 0.5f, FAKE_A, lda, FAKE_B, ldb,
                                      c_host, ldc, TK_F32 };
                char label[96], need[32];
                snprintf(label, sizeof label, "%s op_a=%c op_b=%c", l ? "col" : "row", "NT"[oa], "NT"[ob]);
                p.lda = lda - 1;
                snprintf(need, sizeof need, ">= %" PRId64, lda);
                EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, label, "lda", need, l ? "column-major" : "row-major");
                p.lda = lda;
                p.ldb = ldb - 1;
                snprintf(need, sizeof need, ">= %" PRId64, ldb);
                EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, label, "ldb", need);
                p.ldb = ldb;
                p.ldc = ldc - 1;
                snprintf(need, sizeof need, ">= %" PRId64, ldc);
                EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, label, "ldc", need);
                p.ldc = ldc;
                CHECK(c_host[0] == 1 && c_host[3] == 4, "%s: C was written by a refused call", label);
                /* the minimal leading dimensions pass every argument check */
                tk_status st = tk_kernel_supports(h, "k01_naive", &p);
                CHECK(st != TK_ERR_INVALID_VALUE, "%s: minimal lds refused: %s", label, tk_last_error(h));
            }
    /* leading dimension 0 is refused even for an empty matrix (BLAS: ld >= max(1, rows)) */
    tk_gemm_problem p = base_problem();
    p.m = 0;
    p.ldc = 0;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "ldc 0", "ldc", ">= 6");
    /* an offset that cannot be represented is refused, not wrapped */
    p = base_problem();
    p.lda = INT64_MAX / 2;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "huge lda", "lda", "too large");
    tk_destroy(h);
}

/* Passes every argument check: refused for want of a GPU on this machine,
 * or (with one) judged by a kernel, never refused as an invalid argument. */
static void expect_valid(tk_handle h, const tk_gemm_problem *p, const char *label)
{
    if (have_gpu()) {
        tk_status st = tk_kernel_supports(h, "k01_naive", p);
        CHECK(st != TK_ERR_INVALID_VALUE, "%s: refused: %s", label, tk_last_error(h));
        return;
    }
    tk_status st = tk_gemm_ex(h, p, NULL, NULL);
    CHECK(st == TK_ERR_NO_DEVICE, "%s: got %s, want TK_ERR_NO_DEVICE (%s)", label, tk_status_string(st),
          tk_last_error(h));
}

/* A matrix whose last byte lies past INT64_MAX cannot be addressed: its
 * span ((lines - 1) * ld + line length elements, times 2 bytes for A and B,
 * 4 or 2 for C) is checked in bytes, not elements, on both sides of the
 * limit. */
static void test_byte_size_limit(void)
{
    const int64_t P = 1;   /* 1 << n below is P << n: an int64 shift */
    tk_handle h = make_handle();
    /* C, m x 4 with ldc 4: spans 4m elements; fp32 holds INT64_MAX / 4 = 2^61 - 1 of them */
    tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, P << 61, 4, 1, 1.0f, 0.0f, FAKE_A, 1, FAKE_B, 4, FAKE_C,
                          4, TK_F32 };
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "fp32 C of 2^63 elements", "ldc:", "too large", "INT64_MAX");
    p.m = P << 59;   /* 2^61 elements = 2^63 bytes: one past the limit (2^61 elements passed the old check) */
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "fp32 C of 2^63 bytes", "ldc:", "too large", "4-byte");
    p.m = (P << 59) - 1;   /* 2^63 - 16 bytes */
    expect_valid(h, &p, "fp32 C just under 2^63 bytes");
    /* bf16 C: twice the elements in the same bytes */
    p.c_type = TK_BF16;
    p.m = P << 59;
    expect_valid(h, &p, "bf16 C of 2^62 bytes");
    p.m = P << 60;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "bf16 C of 2^63 bytes", "ldc:", "too large", "2-byte");
    p.m = (P << 60) - 1;
    expect_valid(h, &p, "bf16 C just under 2^63 bytes");

    /* A through k: one row of k bf16 elements (B is k x 1, as long) */
    p = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 1, 1, (P << 62) - 1, 1.0f, 0.0f, FAKE_A, (P << 62) - 1,
                           FAKE_B, 1, FAKE_C, 1, TK_F32 };
    expect_valid(h, &p, "k = 2^62 - 1");
    p.k = p.lda = P << 62;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "k = 2^62", "lda:", "too large");
    /* B through ldb: two rows of one element, ldb apart */
    p = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 1, 1, 2, 1.0f, 0.0f, FAKE_A, 2, FAKE_B, (P << 62) - 2,
                           FAKE_C, 1, TK_F32 };
    expect_valid(h, &p, "ldb = 2^62 - 2");
    p.ldb = (P << 62) - 1;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "ldb = 2^62 - 1", "ldb:", "too large");
    p.ldb = INT64_MAX;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "ldb = INT64_MAX", "ldb:", "too large");
    /* A through lda, column-major: k columns of m elements, lda apart */
    p = (tk_gemm_problem){ TK_COL_MAJOR, TK_OP_N, TK_OP_N, 1, 1, 2, 1.0f, 0.0f, FAKE_A, (P << 62) - 2, FAKE_B, 2,
                           FAKE_C, 1, TK_F32 };
    expect_valid(h, &p, "column-major lda = 2^62 - 2");
    p.lda = (P << 62) - 1;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "column-major lda = 2^62 - 1", "lda:", "too large", "column-major");
    /* C through ldc in fp32: two rows, ldc apart */
    p = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 2, 1, 1, 1.0f, 0.0f, FAKE_A, 1, FAKE_B, 1, FAKE_C,
                           (P << 61) - 2, TK_F32 };
    expect_valid(h, &p, "fp32 ldc = 2^61 - 2");
    p.ldc = (P << 61) - 1;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "fp32 ldc = 2^61 - 1", "ldc:", "too large");
    /* one line: the leading dimension is never stepped over */
    p.m = 1;
    p.ldc = INT64_MAX;
    expect_valid(h, &p, "one row of C, ldc = INT64_MAX");
    /* an empty A (K = 0) spans nothing, whatever lda */
    p = base_problem();
    p.k = 0;
    p.lda = INT64_MAX;
    expect_valid(h, &p, "K = 0, lda = INT64_MAX");
    /* m = INT64_MAX: A (m x 1) is checked first */
    p = base_problem();
    p.m = INT64_MAX;
    p.k = p.lda = 1;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "m = INT64_MAX", "lda:", "too large");
    tk_destroy(h);
}

static void test_null_pointers(void)
{
    tk_handle h = make_handle();
    tk_gemm_problem p = base_problem();
    p.a = NULL;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "A NULL", "A", "NULL");
    p = base_problem();
    p.b = NULL;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "B NULL", "B", "NULL");
    p = base_problem();
    p.c = NULL;
    EXPECT(h, &p, "k01_naive", TK_ERR_INVALID_VALUE, "C NULL", "C", "NULL");
    /* K == 0: A and B are not read, so NULL is fine; C is still needed */
    p = base_problem();
    p.k = 0;
    p.a = p.b = NULL;
    p.c = NULL;
    EXPECT(h, &p, NULL, TK_ERR_INVALID_VALUE, "K=0, C NULL", "C", "NULL");
    /* introspection (tilekit.h): tk_kernel_supports takes NULL pointers and
     * judges alignment on the leading dimensions alone */
    p = base_problem();
    p.a = p.b = NULL;
    p.c = NULL;
    tk_status st = tk_kernel_supports(h, "k01_naive", &p);
    CHECK(st == (have_gpu() ? TK_SUCCESS : TK_ERR_NO_DEVICE), "supports with NULL pointers: %s (%s)",
          tk_status_string(st), tk_last_error(h));
    tk_destroy(h);
}

static void test_noop(void)
{
    tk_handle h = make_handle();
    for (int which = 0; which < 2; which++) {
        /* M or N == 0: nothing is read or written, every pointer may be NULL, no GPU needed */
        tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, which ? 5 : 0, which ? 0 : 5, 3, 1.0f, 1.0f, NULL,
                              3, NULL, which ? 1 : 5, NULL, which ? 1 : 5, TK_BF16 };
        tk_status st = tk_gemm_ex(h, &p, NULL, NULL);
        CHECK(st == TK_SUCCESS, "%s = 0: %s (%s)", which ? "N" : "M", tk_status_string(st), tk_last_error(h));
        CHECK(strcmp(tk_last_error(h), "") == 0, "success left a message: %s", tk_last_error(h));
        st = tk_gemm_ex(h, &p, "k01_naive", NULL);
        CHECK(st == TK_SUCCESS, "named kernel no-op: %s (%s)", tk_status_string(st), tk_last_error(h));
        /* the kernel name is still checked */
        EXPECT(h, &p, "no_such_kernel", TK_ERR_INVALID_VALUE, "no-op, bad kernel", "no_such_kernel");
    }
    tk_destroy(h);
}

static void test_k_zero(void)
{
    /* K == 0 is C = beta * C: A and B may be NULL. It needs the GPU to scale C,
     * so without one it must get past the argument checks to NO_DEVICE. */
    tk_handle h = make_handle();
    tk_gemm_problem p = base_problem();
    p.k = 0;
    p.a = p.b = NULL;
    p.lda = 1;   /* A is stored 8 x 0: any lda >= 1 */
    tk_status st = tk_kernel_supports(h, "k01_naive", &p);
    CHECK(st == (have_gpu() ? TK_SUCCESS : TK_ERR_NO_DEVICE), "supports K=0: %s (%s)", tk_status_string(st),
          tk_last_error(h));
    if (!have_gpu()) {
        st = tk_gemm_ex(h, &p, NULL, NULL);
        CHECK(st == TK_ERR_NO_DEVICE, "gemm K=0 without GPU: %s (%s)", tk_status_string(st), tk_last_error(h));
    }
    tk_destroy(h);
}

static void test_unknown_kernel(void)
{
    tk_handle h = make_handle();
    tk_gemm_problem p = base_problem();
    EXPECT(h, &p, "k99_missing", TK_ERR_INVALID_VALUE, "unknown kernel", "kernel", "k99_missing", "cublas",
           "k01_naive", "auto");
    CHECK(tk_kernel_supports(h, "k99_missing", &p) == TK_ERR_INVALID_VALUE, "supports: unknown kernel accepted");
    tk_destroy(h);
}

/* Issue 37: the list of valid names was cut at 511 characters, in the
 * middle of a name, so the last kernels were never shown. Every name must
 * be in the message, the last one followed by the closing parenthesis, in
 * the handle's and the thread's message alike, also after a long unknown
 * name (echoed cut, the list whole). */
static void test_unknown_kernel_lists_all(void)
{
    tk_handle h = make_handle();
    tk_gemm_problem p = base_problem();
    char longname[600];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    const char *bad[] = { "k99_missing", longname };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        tk_status st = tk_gemm_ex(h, &p, bad[b], NULL);
        CHECK(st == TK_ERR_INVALID_VALUE, "%s", tk_status_string(st));
        const char *msgs[] = { tk_last_error(h), tk_last_error(NULL) };
        for (int m = 0; m < 2; m++) {
            for (int i = 0; i < tk_kernel_count(); i++) {
                tk_kernel_props kp;
                tk_kernel_get(i, &kp);
                if (!contains(msgs[m], kp.name)) {   /* the first missing name only */
                    CHECK(0, "%s message lacks kernel %s: %s", m ? "thread" : "handle", kp.name, msgs[m]);
                    break;
                }
            }
            tk_kernel_props last;
            tk_kernel_get(tk_kernel_count() - 1, &last);
            char tail[128];
            snprintf(tail, sizeof tail, ", %s)", last.name);
            size_t n = strlen(msgs[m]), t = strlen(tail);
            CHECK(n >= t && !strcmp(msgs[m] + n - t, tail), "message does not end with '%s' (%zu characters): %s",
                  tail, n, msgs[m]);
        }
    }
    CHECK(contains(tk_last_error(h), "xxx...'"), "a long name is echoed cut, with '...': %.200s", tk_last_error(h));
    tk_destroy(h);
}

static void test_no_device(void)
{
    if (have_gpu())
        return;   /* only meaningful, and only safe with fake pointers, without a GPU */
    tk_handle h = make_handle();
    tk_gemm_problem p = base_problem();
    const char *names[] = { NULL, "auto", "", "cublas", "k01_naive" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        tk_status st = tk_gemm_ex(h, &p, names[i], NULL);
        CHECK(st == TK_ERR_NO_DEVICE, "kernel %s: %s (%s)", names[i] ? names[i] : "NULL", tk_status_string(st),
              tk_last_error(h));
        CHECK(contains(tk_last_error(h), "CUDA") || contains(tk_last_error(h), "device"), "message: %s",
              tk_last_error(h));
    }
    CHECK(tk_kernel_supports(h, "k01_naive", &p) == TK_ERR_NO_DEVICE, "supports without GPU");
    CHECK(tk_select_kernel(h, &p) == NULL, "select without GPU returned a kernel");
    tk_destroy(h);
}

/* Issue 37: without any NVIDIA driver the reason was CUDA's "driver version
 * is insufficient", as if a newer one were needed. Where the driver library
 * cannot be loaded the reason now says no driver was found; where it can,
 * CUDA's words stay. Both branches through tk_device_none_why with a
 * missing and a present library, then the real path on this machine. */
static void test_no_device_reason(void)
{
    char why[TK_MSG_LEN];
    tk_device_none_why(cudaErrorInsufficientDriver, "libtilekit_no_such_driver.so.1", why, sizeof why);
    CHECK(!strcmp(why, "no CUDA device: no NVIDIA driver found (libtilekit_no_such_driver.so.1 cannot be loaded)"),
          "no driver: %s", why);
    tk_device_none_why(cudaErrorInsufficientDriver, "libc.so.6", why, sizeof why);
    CHECK(contains(why, cudaGetErrorString(cudaErrorInsufficientDriver)) && !contains(why, "no NVIDIA driver"),
          "a driver present: CUDA's words expected: %s", why);
    tk_device_none_why(cudaSuccess, "libc.so.6", why, sizeof why);
    CHECK(contains(why, "device count is 0"), "count 0: %s", why);
    if (have_gpu())
        return;
    void *drv = dlopen(TK_DRIVER_LIB, RTLD_LAZY | RTLD_LOCAL);
    if (drv)
        dlclose(drv);
    tk_handle h = make_handle();
    tk_gemm_problem p = base_problem();
    CHECK(tk_gemm_ex(h, &p, NULL, NULL) == TK_ERR_NO_DEVICE, "gemm without a GPU: %s", tk_last_error(h));
    if (!drv)
        CHECK(contains(tk_last_error(h), "no NVIDIA driver found (libcuda.so.1 cannot be loaded)") &&
                  !contains(tk_last_error(h), "insufficient"),
              "no driver on this machine, but the message is: %s", tk_last_error(h));
    else
        CHECK(!contains(tk_last_error(h), "no NVIDIA driver"), "a driver is here, but: %s", tk_last_error(h));
    tk_destroy(h);
}

static void test_registry(void)
{
    int n = tk_kernel_count();
    CHECK(n >= 2, "only %d kernels", n);
    tk_kernel_props kp;
    CHECK(tk_kernel_get(-1, &kp) == TK_ERR_INVALID_VALUE, "index -1 accepted");
    CHECK(contains(tk_last_error(NULL), "index"), "message: %s", tk_last_error(NULL));
    CHECK(tk_kernel_get(n, &kp) == TK_ERR_INVALID_VALUE, "index %d accepted", n);
    CHECK(tk_kernel_get(0, NULL) == TK_ERR_INVALID_VALUE, "NULL out accepted");
    int seen_cublas = 0, seen_naive = 0, last_number = 0;
    for (int i = 0; i < n; i++) {
        CHECK(tk_kernel_get(i, &kp) == TK_SUCCESS, "get(%d) failed", i);
        CHECK(kp.name && *kp.name && kp.description && *kp.description, "kernel %d lacks a name or description", i);
        CHECK(kp.min_sm >= 80, "%s: min_sm %d", kp.name, kp.min_sm);
        seen_cublas += !strcmp(kp.name, "cublas");
        seen_naive += !strcmp(kp.name, "k01_naive");
        /* kNN_snake_case, listed in number order (STYLE.md), names unique */
        int num = 0;
        if (strcmp(kp.name, "cublas")) {
            CHECK(kp.name[0] == 'k' && kp.name[1] >= '0' && kp.name[1] <= '9' && kp.name[2] >= '0' &&
                      kp.name[2] <= '9' && kp.name[3] == '_',
                  "name %s is not kNN_...", kp.name);
            num = (kp.name[1] - '0') * 10 + (kp.name[2] - '0');
            CHECK(num >= last_number, "%s listed after k%02d", kp.name, last_number);
            last_number = num;
        }
        for (int j = 0; j < i; j++) {
            tk_kernel_props other;
            tk_kernel_get(j, &other);
            CHECK(strcmp(other.name, kp.name), "name %s appears twice", kp.name);
        }
    }
    CHECK(seen_cublas == 1 && seen_naive == 1, "cublas x%d, k01_naive x%d", seen_cublas, seen_naive);
}

/* ---- last error: per handle and per thread ---- */

static void *fail_in_thread(void *arg)
{
    tk_gemm_problem p = base_problem();
    p.m = -3;
    tk_gemm_ex((tk_handle)arg, &p, NULL, NULL);
    return NULL;
}

static void test_last_error_scopes(void)
{
    tk_handle h1 = make_handle(), h2 = make_handle();
    tk_gemm_problem p = base_problem();
    p.lda = 1;
    tk_gemm_ex(h1, &p, NULL, NULL);
    CHECK(contains(tk_last_error(h1), "lda"), "h1: %s", tk_last_error(h1));
    CHECK(contains(tk_last_error(NULL), "lda"), "thread: %s", tk_last_error(NULL));
    p = base_problem();
    p.ldb = 1;
    tk_gemm_ex(h2, &p, NULL, NULL);
    CHECK(contains(tk_last_error(h1), "lda"), "h1 overwritten by h2's failure: %s", tk_last_error(h1));
    CHECK(contains(tk_last_error(h2), "ldb"), "h2: %s", tk_last_error(h2));
    CHECK(contains(tk_last_error(NULL), "ldb"), "thread: %s", tk_last_error(NULL));
    /* another thread's failure (on its own handle h2) does not touch this thread's message */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fail_in_thread, h2) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(contains(tk_last_error(h2), "m:"), "h2 after the thread: %s", tk_last_error(h2));
    CHECK(contains(tk_last_error(NULL), "ldb"), "this thread's message changed: %s", tk_last_error(NULL));
    /* a successful call clears its handle's message */
    p = base_problem();
    p.m = 0;
    CHECK(tk_gemm_ex(h1, &p, NULL, NULL) == TK_SUCCESS, "no-op failed: %s", tk_last_error(h1));
    CHECK(strcmp(tk_last_error(h1), "") == 0, "h1 not cleared: %s", tk_last_error(h1));
    tk_destroy(h1);
    tk_destroy(h2);
}

/* Two threads fail at the same time, each on its own handle with its own
 * bad argument, and read tk_last_error(NULL) once both have failed: were the
 * message one per process, one of the two would read the other's. */
#define LE_ROUNDS 200

typedef struct le_thread {
    const char *word;            /* "lda" or "ldb": the argument this thread gets wrong */
    tk_handle h;
    pthread_barrier_t *both;
    int wrong;                   /* rounds that read another message */
    char seen[TK_MSG_LEN];       /* the first of them */
} le_thread;

static void *fail_rounds(void *arg)
{
    le_thread *t = arg;
    tk_gemm_problem p = base_problem();
    if (!strcmp(t->word, "lda"))
        p.lda = 1;
    else
        p.ldb = 1;
    for (int r = 0; r < LE_ROUNDS; r++) {
        tk_gemm_ex(t->h, &p, NULL, NULL);
        pthread_barrier_wait(t->both);   /* both messages written */
        const char *msg = tk_last_error(NULL);
        if (!contains(msg, t->word) && !t->wrong++)
            snprintf(t->seen, sizeof t->seen, "%s", msg);
        pthread_barrier_wait(t->both);   /* both read before the next round writes */
    }
    return NULL;
}

static void test_last_error_two_threads(void)
{
    pthread_barrier_t both;
    pthread_barrier_init(&both, NULL, 2);
    le_thread t[2] = { { "lda", make_handle(), &both, 0, "" }, { "ldb", make_handle(), &both, 0, "" } };
    pthread_t tid;
    int started = pthread_create(&tid, NULL, fail_rounds, &t[1]) == 0;
    CHECK(started, "pthread_create");
    if (started) {
        fail_rounds(&t[0]);
        pthread_join(tid, NULL);
    }
    for (int i = 0; i < 2 && started; i++) {
        CHECK(t[i].wrong == 0, "thread %d (%s) read another message in %d of %d rounds: %s", i, t[i].word, t[i].wrong,
              LE_ROUNDS, t[i].seen);
        CHECK(contains(tk_last_error(t[i].h), t[i].word), "handle %d: %s", i, tk_last_error(t[i].h));
    }
    pthread_barrier_destroy(&both);
    tk_destroy(t[0].h);
    tk_destroy(t[1].h);
}

/* ---- internals ---- */

static void test_normalize(void)
{
    tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_T, TK_OP_N, 8, 6, 4, 2.0f, 0.5f, FAKE_A, 8, FAKE_B, 6, FAKE_C, 6,
                          TK_BF16 };
    tk_args a;
    int noop = -1;
    CHECK(tk_problem_normalize(NULL, &p, &a, &noop) == TK_SUCCESS, "row: %s", tk_last_error(NULL));
    CHECK(noop == 0, "noop %d", noop);
    CHECK(a.m == 8 && a.n == 6 && a.k == 4, "row: sizes %" PRId64 " %" PRId64 " %" PRId64, a.m, a.n, a.k);
    CHECK(a.a == FAKE_A && a.lda == 8 && a.op_a == TK_OP_T, "row: A changed");
    CHECK(a.b == FAKE_B && a.ldb == 6 && a.op_b == TK_OP_N, "row: B changed");
    CHECK(a.c == FAKE_C && a.ldc == 6 && a.c_type == TK_BF16 && a.alpha == 2.0f && a.beta == 0.5f, "row: C changed");

    /* column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T: the
     * operands and M/N swap, each keeps its op */
    tk_gemm_problem q = { TK_COL_MAJOR, TK_OP_T, TK_OP_N, 8, 6, 4, 2.0f, 0.5f, FAKE_A, 4, FAKE_B, 4, FAKE_C, 8,
                          TK_F32 };
    CHECK(tk_problem_normalize(NULL, &q, &a, &noop) == TK_SUCCESS, "col: %s", tk_last_error(NULL));
    CHECK(a.m == 6 && a.n == 8 && a.k == 4, "col: sizes %" PRId64 " %" PRId64 " %" PRId64, a.m, a.n, a.k);
    CHECK(a.a == FAKE_B && a.lda == 4 && a.op_a == TK_OP_N, "col: new A is not old B with its op");
    CHECK(a.b == FAKE_A && a.ldb == 4 && a.op_b == TK_OP_T, "col: new B is not old A with its op");
    CHECK(a.c == FAKE_C && a.ldc == 8 && a.c_type == TK_F32, "col: C changed");

    q.n = 0;
    CHECK(tk_problem_normalize(NULL, &q, &a, &noop) == TK_SUCCESS && noop == 1, "N = 0 is not a no-op");
}

/* An H100-like device, filled by hand. */
static int dummy_func;   /* stands for a __global__ entry; the attributes are passed in */

static void test_check_resources(void)
{
    tk_device d = fh_device(90);
    tk_func_attrs fa = { 64, 1024, 0, 1024 };
    tk_resources r = { &dummy_func, 256, 64 * 1024 };
    char why[TK_MSG_LEN];
    tk_status st = tk_check_resources(NULL, &r, &d, &fa, why, sizeof why);
    CHECK(st == TK_SUCCESS, "fits: %s", why);

    r.threads = 1025;
    st = tk_check_resources(NULL, &r, &d, &fa, why, sizeof why);
    CHECK(st == TK_ERR_OUT_OF_RESOURCES && contains(why, "threads") && contains(why, "1024"), "threads: %d %s", st,
          why);

    r.threads = 256;
    r.dyn_smem = d.smem_per_block_optin - fa.static_smem + 1;   /* one byte over, counting static smem */
    st = tk_check_resources(NULL, &r, &d, &fa, why, sizeof why);
    CHECK(st == TK_ERR_OUT_OF_RESOURCES && contains(why, "shared memory"), "smem: %d %s", st, why);
    r.dyn_smem -= 1;
    st = tk_check_resources(NULL, &r, &d, &fa, why, sizeof why);
    CHECK(st == TK_SUCCESS, "smem exactly at the limit refused: %s", why);

    r.dyn_smem = 0;
    r.threads = 1024;
    fa.num_regs = 255;
    fa.max_threads = 256;   /* what the compiler allows at 255 registers */
    st = tk_check_resources(NULL, &r, &d, &fa, why, sizeof why);
    CHECK(st == TK_ERR_OUT_OF_RESOURCES && contains(why, "registers"), "regs/max threads: %d %s", st, why);
    fa.max_threads = 1024;   /* registers alone over the per-block file */
    st = tk_check_resources(NULL, &r, &d, &fa, why, sizeof why);
    CHECK(st == TK_ERR_OUT_OF_RESOURCES && contains(why, "registers"), "regs: %d %s", st, why);

    /* a library call (no __global__ entry) is only checked for threads */
    tk_resources lib = { NULL, 0, 0 };
    st = tk_check_resources(NULL, &lib, &d, NULL, why, sizeof why);
    CHECK(st == TK_SUCCESS, "library call refused: %s", why);
}

static void test_check_align(void)
{
    char why[TK_MSG_LEN];
    tk_args a;
    memset(&a, 0, sizeof a);
    a.m = a.n = a.k = 64;
    a.a = FAKE_A; a.lda = 64;
    a.b = FAKE_B; a.ldb = 64;
    a.c = FAKE_C; a.ldc = 64; a.c_type = TK_F32;
    CHECK(tk_check_align(&a, 8, 8, why, sizeof why) == TK_SUCCESS, "aligned refused: %s", why);
    a.ldb = 60;
    CHECK(tk_check_align(&a, 8, 8, why, sizeof why) == TK_ERR_NOT_SUPPORTED && contains(why, "B") &&
              contains(why, "multiple of 8"),
          "ldb 60: %s", why);
    a.ldb = 64;
    a.a = (const char *)FAKE_A + 2;   /* bf16-aligned, not 16-byte aligned */
    CHECK(tk_check_align(&a, 8, 8, why, sizeof why) == TK_ERR_NOT_SUPPORTED && contains(why, "A") &&
              contains(why, "16-byte"),
          "A + 2 bytes: %s", why);
    a.a = NULL;   /* introspection: pointers unknown, judge the leading dimensions */
    a.b = NULL;
    a.c = NULL;
    CHECK(tk_check_align(&a, 8, 8, why, sizeof why) == TK_SUCCESS, "NULL pointers refused: %s", why);
    /* C's requirement is separate: none (c_elems 1), or pairs (c_elems 2) */
    a.a = FAKE_A; a.b = FAKE_B; a.c = FAKE_C;
    a.ldc = 63;
    CHECK(tk_check_align(&a, 8, 1, why, sizeof why) == TK_SUCCESS, "odd ldc refused with no C requirement: %s", why);
    CHECK(tk_check_align(&a, 8, 2, why, sizeof why) == TK_ERR_NOT_SUPPORTED && contains(why, "C") &&
              contains(why, "multiple of 2"),
          "ldc 63 with C pairs: %s", why);
    a.ldc = 64;
    a.c = (char *)FAKE_C + 4;   /* fp32-aligned, not 8-byte aligned: a pair store would split */
    CHECK(tk_check_align(&a, 8, 2, why, sizeof why) == TK_ERR_NOT_SUPPORTED && contains(why, "8-byte"),
          "C + 4 bytes with C pairs: %s", why);
    CHECK(tk_check_align(&a, 8, 1, why, sizeof why) == TK_SUCCESS, "C + 4 bytes refused with no C requirement: %s",
          why);
}

/* A kernel of a newer architecture than the (fake) GPU is refused with
 * ARCH_MISMATCH before its own checks run. The handle is made by hand from
 * internal.h so the device can be any SM version. */
static tk_status fake_supports(const tk_kernel *k, const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)k; (void)dev;
    return tk_check_align(a, 8, 8, why, len);
}

static void fake_resources(const tk_kernel *k, const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)k; (void)a; (void)dev;
    r->func = &dummy_func;
    r->threads = 384;
    r->dyn_smem = 200 * 1024;
}

static void test_arch_mismatch(void)
{
    struct tk_handle_s fake;
    memset(&fake, 0, sizeof fake);
    fake.have_device = 1;
    fake.dev = fh_device(80);
    fake.get_device = fh_current_is_0;
    tk_gemm_problem p = base_problem();
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (k->min_sm <= 80)
            continue;
        tk_status st = tk_kernel_supports(&fake, k->name, &p);
        CHECK(st == TK_ERR_ARCH_MISMATCH, "%s (min sm_%d) on sm_80: %s", k->name, k->min_sm, tk_status_string(st));
    }
    /* (no registered kernel may need more than sm_80 yet: the local sm_90 kernel below always runs) */
    fake.dev = fh_device(75);
    tk_status st = tk_kernel_supports(&fake, "k01_naive", &p);
    CHECK(st == TK_ERR_ARCH_MISMATCH, "k01_naive on sm_75: %s", tk_status_string(st));
    CHECK(contains(tk_last_error(&fake), "sm_80") && contains(tk_last_error(&fake), "sm_75"), "message: %s",
          tk_last_error(&fake));

    /* A local sm_90 kernel, checked the way gemm.c checks one: arch first,
     * then its support check, then resources. */
    const tk_family_ops ops = { fake_supports, fake_resources, NULL, NULL, NULL };
    const tk_family fam = { "k99", "test-only", 90, TK_ACCEPTS_BF16_GEMM, &ops, 50.0 };
    const tk_kernel k90 = { "k99_fake_sm90", "test-only", &fam, 90, 128, 256, 64, 64, 256, 0, 0, 0 };
    tk_device d80 = fh_device(80), d90 = fh_device(90);
    CHECK(d80.sm < k90.min_sm && d90.sm >= k90.min_sm, "fake devices");
    tk_args a;
    memset(&a, 0, sizeof a);
    a.m = a.n = a.k = 256;
    a.lda = a.ldb = a.ldc = 256;
    char why[TK_MSG_LEN];
    CHECK(tk_kernel_supports_args(&k90, &a, &d90, why, sizeof why) == TK_SUCCESS, "fake kernel refused: %s", why);
    a.lda = 250;
    CHECK(tk_kernel_supports_args(&k90, &a, &d90, why, sizeof why) == TK_ERR_NOT_SUPPORTED, "fake kernel took lda 250");
    tk_resources r;
    tk_kernel_resources(&k90, &a, &d90, &r);
    tk_func_attrs fa = { 168, 0, 0, 384 };
    CHECK(tk_check_resources(&k90, &r, &d90, &fa, why, sizeof why) == TK_SUCCESS, "sm_90 resources: %s", why);
    d80.smem_per_block_optin = 163 * 1024;   /* A100: 200 KiB does not fit */
    CHECK(tk_check_resources(&k90, &r, &d80, &fa, why, sizeof why) == TK_ERR_OUT_OF_RESOURCES,
          "200 KiB on an A100-sized device accepted");
}

/* The allocation hook fails exactly the n-th device allocation from now, as
 * a failed cudaMalloc whose error the wrapper clears (a later launch would
 * report it as its own otherwise). Without a GPU every allocation fails and
 * the runtime repeats its missing-driver error for good: only the count is
 * checked then. */
static void test_alloc_hook(void)
{
    tk_handle h = make_handle();
    if (!h)
        return;
    void *p = (void *)1;
    h->fail_alloc = 2;
    cudaError_t e = tk_handle_malloc(h, &p, 256, NULL);   /* the first: a real allocation */
    CHECK(h->fail_alloc == 1, "the first allocation moved the hook to %d, expected 1", h->fail_alloc);
    CHECK((e == cudaSuccess) == (p != NULL), "status %s with pointer %p", cudaGetErrorString(e), p);
    tk_handle_free(h, p, NULL);
    cudaStreamSynchronize(NULL);
    cudaGetLastError();
    p = (void *)1;
    e = tk_handle_malloc(h, &p, 256, NULL);
    CHECK(e != cudaSuccess && p == NULL, "the second allocation: %s, pointer %p", cudaGetErrorString(e), p);
    CHECK(h->fail_alloc == 0, "hook left at %d", h->fail_alloc);
    if (have_gpu()) {
        e = cudaGetLastError();
        CHECK(e == cudaSuccess, "the failure was left as the runtime's last error: %s", cudaGetErrorString(e));
        e = tk_handle_malloc(h, &p, 256, NULL);
        CHECK(e == cudaSuccess && p != NULL, "the allocation after the hook: %s", cudaGetErrorString(e));
        tk_handle_free(h, p, NULL);
        cudaStreamSynchronize(NULL);
    }
    tk_destroy(h);
}

/* The first call that uses a workspace creates the ordering event, which
 * the hook can fail (ALLOC, nothing changed); without a GPU the event cannot
 * be had at all, and each such call is refused the same way. With one,
 * every such call records the event where it ends, and a call on another
 * stream waits for it (tests/gpu/test_handle.c checks the order itself). */
static void test_ws_order(void)
{
    tk_handle h = make_handle();
    if (!h)
        return;
    h->fail_alloc = 1;
    tk_status st = tk_handle_ws_begin(h, cudaStreamPerThread);
    CHECK(st == TK_ERR_ALLOC && h->ws_event == NULL && h->ws_recorded == 0 && h->fail_alloc == 0,
          "event creation failed by the hook: %s, recorded %d (%s)", tk_status_string(st), h->ws_recorded,
          tk_last_error(h));
    CHECK(contains(tk_last_error(h), "cudaEventCreate"), "message: %s", tk_last_error(h));
    if (!have_gpu()) {
        st = tk_handle_ws_begin(h, cudaStreamPerThread);
        CHECK(st == TK_ERR_ALLOC && h->ws_event == NULL, "without a GPU: %s", tk_status_string(st));
    } else {
        for (int i = 0; i < 2; i++) {
            st = tk_handle_ws_begin(h, cudaStreamPerThread);
            CHECK(st == TK_SUCCESS && h->ws_event != NULL, "per-thread stream, call %d: %s (%s)", i,
                  tk_status_string(st), tk_last_error(h));
            tk_handle_ws_end(h, cudaStreamPerThread);
            CHECK(h->ws_recorded == 1 && h->ws_unordered == 0, "call %d: event not recorded", i);
        }
        CHECK(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess, "per-thread stream");
    }
    tk_destroy(h);
}

/* Issue 35, item 4: a pointer that is not a multiple of its element size
 * faults on the GPU (cudaErrorMisalignedAddress, fatal to the CUDA
 * context); it is refused as an argument error before the device is asked
 * anything, so the refusal is the same with a GPU or without one. */
static void test_misaligned_pointers(void)
{
    tk_handle h = make_handle();
    const struct { int which; uintptr_t off; tk_dtype c_type; const char *what; const char *bytes; } cases[] = {
        { 0, 1, TK_F32, "A", "2-byte" },  { 1, 1, TK_F32, "B", "2-byte" },  { 1, 3, TK_BF16, "B", "2-byte" },
        { 2, 1, TK_BF16, "C", "2-byte" }, { 2, 2, TK_F32, "C", "4-byte" },  { 2, 1, TK_F32, "C", "4-byte" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int layout = 0; layout < 2; layout++) {
            tk_gemm_problem p = base_problem();
            p.layout = layout ? TK_COL_MAJOR : TK_ROW_MAJOR;
            if (layout) {   /* column-major 8 x 6 x 4 NN: lda 8, ldb 4, ldc 8 */
                p.lda = 8;
                p.ldb = 4;
                p.ldc = 8;
            }
            p.c_type = cases[i].c_type;
            if (cases[i].which == 0)
                p.a = (const char *)p.a + cases[i].off;
            else if (cases[i].which == 1)
                p.b = (const char *)p.b + cases[i].off;
            else
                p.c = (char *)p.c + cases[i].off;
            char label[64];
            snprintf(label, sizeof label, "%s + %u (%s)", cases[i].what, (unsigned)cases[i].off,
                     layout ? "column-major" : "row-major");
            const char *kernels[] = { NULL, "k01_naive", "cublas" };
            for (int k = 0; k < 3; k++)
                EXPECT(h, &p, kernels[k], TK_ERR_INVALID_VALUE, label, cases[i].what, "aligned", cases[i].bytes);
            /* introspection judges a pointer it is given the same way */
            tk_status st = tk_kernel_supports(h, NULL, &p);
            CHECK(st == TK_ERR_INVALID_VALUE && contains(tk_last_error(h), "aligned"), "%s: supports: %s (%s)", label,
                  tk_status_string(st), tk_last_error(h));
            CHECK(tk_select_kernel(h, &p) == NULL, "%s: select chose a kernel", label);
        }
    }
    /* 2-byte aligned bf16 operands are fine (auto-dispatch copies them where
     * a kernel needs more): past the argument checks to the device. */
    tk_gemm_problem p = base_problem();
    p.a = (const char *)p.a + 2;
    p.c_type = TK_BF16;
    p.c = (char *)p.c + 2;
    tk_status st = tk_kernel_supports(h, NULL, &p);
    CHECK(st == (have_gpu() ? TK_SUCCESS : TK_ERR_NO_DEVICE), "2-byte aligned: %s (%s)", tk_status_string(st),
          tk_last_error(h));
    tk_destroy(h);
}

/* Issue 35, item 5: a handle serves the device it was created on; a call
 * from a thread where another device is current is refused, naming both. A
 * stand-in for cudaGetDevice models the other device (and its failure). */
/* A handle made by hand (internal.h) for a modeled device of sm_XY, with
 * get_device standing in for cudaGetDevice. */
static void fake_handle(struct tk_handle_s *fake, int sm, cudaError_t (*get_device)(int *))
{
    fh_init(fake, sm);
    fake->get_device = get_device;
}

static void test_wrong_device(void)
{
    struct tk_handle_s fake;
    fake_handle(&fake, 90, fh_current_is_1);
    tk_gemm_problem p = base_problem();
    const char *kernels[] = { NULL, "k01_naive", "cublas", "k31_wgmma_cluster" };
    for (int k = 0; k < 4; k++)
        EXPECT(&fake, &p, kernels[k], TK_ERR_INVALID_VALUE, "device 1 current", "device 0", "device 1",
               "cudaSetDevice(0)");
    tk_status st = tk_kernel_supports(&fake, "k01_naive", &p);
    CHECK(st == TK_ERR_INVALID_VALUE, "supports on the wrong device: %s", tk_status_string(st));
    CHECK(tk_select_kernel(&fake, &p) == NULL, "select on the wrong device chose a kernel");
    /* M = 0 needs no device: still a no-op */
    p.m = 0;
    CHECK(tk_gemm_ex(&fake, &p, NULL, NULL) == TK_SUCCESS, "no-op on the wrong device: %s", tk_last_error(&fake));
    fake.get_device = current_fails;
    p = base_problem();
    EXPECT(&fake, &p, "k01_naive", TK_ERR_CUDA, "cudaGetDevice fails", "cudaGetDevice");
    /* the right device passes the check (then fails later for the fake pointers' sake: not called here) */
    fake.get_device = fh_current_is_0;
    fake.dev = fh_device(80);
    fake.dev.id = 0;
    st = tk_kernel_supports(&fake, "k20_mma_sync", &p);
    CHECK(st != TK_ERR_INVALID_VALUE, "the right device refused: %s (%s)", tk_status_string(st), tk_last_error(&fake));
}

/* Issue 35, item 7: auto-dispatch asks every candidate whether it fits; a
 * refused candidate is not a failure of the call. On a simulated sm_80
 * device (its kernels' attributes filled in by hand) the sm_90 kernels are
 * refused, and the successful choice leaves the handle's message "" and the
 * thread's message as it was. */
static void test_last_error_after_dispatch(void)
{
    struct tk_handle_s fake;
    fake_handle(&fake, 80, fh_current_is_0);
    tk_gemm_problem p = base_problem();
    p.m = p.n = p.k = 512;
    p.lda = p.ldb = p.ldc = 512;
    tk_args a;
    int noop = 0;
    CHECK(tk_problem_normalize(&fake, &p, &a, &noop) == TK_SUCCESS, "normalize");
    int sm90 = 0;
    for (int i = 0; i < tk_registry_count() && fake.nattrs < TK_ATTR_CACHE; i++) {
        const tk_kernel *k = tk_registry_at(i);
        sm90 += k->min_sm > 80 && k->auto_rank > 0;
        tk_resources r;
        tk_kernel_resources(k, &a, &fake.dev, &r);
        if (!r.func)
            continue;
        fake.attrs[fake.nattrs].func = r.func;
        fake.attrs[fake.nattrs].fa = (tk_func_attrs){ 128, 0, 0, 1024 };
        fake.nattrs++;
    }
    CHECK(sm90 > 0, "no sm_90 kernel in auto-dispatch: the test shows nothing");
    /* the thread's message before: a real failure */
    tk_gemm_problem bad = base_problem();
    bad.lda = 1;
    tk_gemm_ex(&fake, &bad, NULL, NULL);
    CHECK(contains(tk_last_error(NULL), "lda"), "thread: %s", tk_last_error(NULL));
    const char *name = tk_select_kernel(&fake, &p);
    CHECK(name != NULL, "select on sm_80: %s", tk_last_error(&fake));
    CHECK(strcmp(tk_last_error(&fake), "") == 0, "a successful select left '%s'", tk_last_error(&fake));
    CHECK(contains(tk_last_error(NULL), "lda"), "the thread's message became '%s'", tk_last_error(NULL));
    tk_status st = tk_kernel_supports(&fake, "auto", &p);
    CHECK(st == TK_SUCCESS && strcmp(tk_last_error(&fake), "") == 0, "supports(auto): %s, '%s'",
          tk_status_string(st), tk_last_error(&fake));
    /* a named sm_90 kernel is still refused with its reason */
    st = tk_kernel_supports(&fake, "k31_wgmma_cluster", &p);
    CHECK(st == TK_ERR_ARCH_MISMATCH && contains(tk_last_error(&fake), "sm_90"), "named sm_90 kernel: %s (%s)",
          tk_status_string(st), tk_last_error(&fake));
}

/* The growing descriptor (tilekit.h): its size field is checked, the
 * fields within it read, zero bytes past what the library knows accepted,
 * set ones refused naming the byte; the problem then goes the way of
 * tk_gemm_ex (here: to its argument checks, and without a GPU, NO_DEVICE). */
static void test_desc(void)
{
    tk_handle h = make_handle();
    tk_gemm_desc d = TK_GEMM_DESC_INIT;
    CHECK(d.size == sizeof d, "TK_GEMM_DESC_INIT sets size %zu, sizeof %zu", d.size, sizeof d);
    d.problem = base_problem();
    tk_status want = have_gpu() ? TK_ERR_INVALID_VALUE : TK_ERR_NO_DEVICE;   /* fake pointers: never launched */
    d.problem.lda = 1;
    tk_status st = tk_gemm_run(h, &d, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && contains(tk_last_error(h), "lda"), "the problem's checks: %s (%s)",
          tk_status_string(st), tk_last_error(h));
    d.problem.lda = 4;
    if (!have_gpu()) {
        st = tk_gemm_run(h, &d, NULL, NULL);
        CHECK(st == want, "a good descriptor: %s (%s)", tk_status_string(st), tk_last_error(h));
    }
    CHECK(tk_gemm_run(h, NULL, NULL, NULL) == TK_ERR_INVALID_VALUE && contains(tk_last_error(h), "d:"), "NULL: %s",
          tk_last_error(h));
    CHECK(tk_gemm_run(NULL, &d, NULL, NULL) == TK_ERR_INVALID_VALUE, "NULL handle accepted");
    tk_gemm_desc small = d;
    small.size = sizeof(size_t);
    st = tk_gemm_run(h, &small, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && contains(tk_last_error(h), "d->size") &&
              contains(tk_last_error(h), "TK_GEMM_DESC_INIT"),
          "size too small: %s (%s)", tk_status_string(st), tk_last_error(h));
    /* a caller compiled against a newer header: a larger struct */
    struct { tk_gemm_desc d; unsigned char future[24]; } big;
    memset(&big, 0, sizeof big);
    big.d = d;
    big.d.size = sizeof big;
    big.d.problem.lda = 1;   /* a bad problem: the checks after the descriptor's are reached */
    st = tk_gemm_run(h, &big.d, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && contains(tk_last_error(h), "lda"), "newer caller, zero tail: %s (%s)",
          tk_status_string(st), tk_last_error(h));
    big.future[5] = 1;
    st = tk_gemm_run(h, &big.d, NULL, NULL);
    char byte[32];
    snprintf(byte, sizeof byte, "byte %zu", sizeof(tk_gemm_desc) + 5);
    CHECK(st == TK_ERR_NOT_SUPPORTED && contains(tk_last_error(h), byte), "newer caller, a field set: %s (%s)",
          tk_status_string(st), tk_last_error(h));
    tk_destroy(h);
}

void tk_tests(void)
{
    TK_TEST(test_status_strings);
    TK_TEST(test_version);
    TK_TEST(test_null_handle);
    TK_TEST(test_create_destroy);
    TK_TEST(test_null_problem);
    TK_TEST(test_bad_enums);
    TK_TEST(test_negative_dims);
    TK_TEST(test_leading_dims);
    TK_TEST(test_byte_size_limit);
    TK_TEST(test_null_pointers);
    TK_TEST(test_noop);
    TK_TEST(test_k_zero);
    TK_TEST(test_unknown_kernel);
    TK_TEST(test_unknown_kernel_lists_all);
    TK_TEST(test_no_device);
    TK_TEST(test_no_device_reason);
    TK_TEST(test_registry);
    TK_TEST(test_last_error_scopes);
    TK_TEST(test_last_error_two_threads);
    TK_TEST(test_normalize);
    TK_TEST(test_check_resources);
    TK_TEST(test_check_align);
    TK_TEST(test_arch_mismatch);
    TK_TEST(test_alloc_hook);
    TK_TEST(test_ws_order);
    TK_TEST(test_misaligned_pointers);
    TK_TEST(test_wrong_device);
    TK_TEST(test_last_error_after_dispatch);
    TK_TEST(test_desc);
}
