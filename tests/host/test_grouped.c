/* test_grouped.c - the argument checks of many products in one call
 * (issue 38: tk_gemm_desc version 2, tk_gemm_batched, tk_gemm_grouped;
 * src/lib/grouped.c) on the CPU: each refusal's status and the argument its
 * message names, through tk_gemm_run and, where it can say the same, the
 * kind's own function; the order of the checks (all before the device is
 * asked for: without a GPU a bad call is TK_ERR_INVALID_VALUE, a good one
 * TK_ERR_NO_DEVICE, a no-op TK_SUCCESS); a descriptor of the first
 * version's size (its group fields unread); the named kernels that refuse a
 * form. The products themselves are checked on the GPU
 * (tests/gpu/test_grouped.c).
 *
 * Safe on a GPU machine too: the fake pointers below reach no launch. A
 * call the checks must accept is made on a hand-made handle whose device is
 * not the current one (refused after every argument check, naming h), and
 * on a real handle only where cudaGetDeviceCount finds no GPU. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lib/internal.h"
#include "check.h"
#include "fake_handle.h"

/* Stand-ins for device pointers, never dereferenced; 256-byte aligned. */
#define FAKE_A ((const void *)(uintptr_t)0x100000)
#define FAKE_B ((const void *)(uintptr_t)0x200000)
#define FAKE_C ((void *)(uintptr_t)0x300000)
#define FAKE_OFFS ((const int32_t *)(uintptr_t)0x400000)
#define FAKE_ERR ((int32_t *)(uintptr_t)0x500000)

/* The products of every descriptor here: op(A) M x K, op(B) K x N, C M x N. */
enum { M = 64, N = 32, K = 16, COUNT = 4 };

static const int grouped_kinds[] = { TK_GROUP_ROWS, TK_GROUP_K, TK_GROUP_MASKED };
static const int all_kinds[] = { TK_GROUP_BATCHED, TK_GROUP_ROWS, TK_GROUP_K, TK_GROUP_MASKED };
#define NKINDS(a) ((int)(sizeof a / sizeof a[0]))

static const char *kind_str(int kind)
{
    switch (kind) {
    case TK_GROUP_BATCHED: return "BATCHED";
    case TK_GROUP_ROWS: return "ROWS";
    case TK_GROUP_K: return "K";
    case TK_GROUP_MASKED: return "MASKED";
    }
    return "?";
}

/* A valid descriptor of `kind`, COUNT products or groups, row-major NN:
 * BATCHED and MASKED COUNT M x N x K products end to end; ROWS M rows in
 * groups, one K x N B each; K K split in groups, one M x N C each. */
static tk_gemm_desc desc_of(int kind)
{
    tk_gemm_desc d = TK_GEMM_DESC_INIT;
    d.problem = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_N, M, N, K, 1.0f, 0.0f, FAKE_A, K, FAKE_B, N, FAKE_C,
                                   N, TK_F32 };
    d.group_kind = kind;
    d.count = COUNT;
    const int per_a = kind == TK_GROUP_BATCHED || kind == TK_GROUP_MASKED;
    d.stride_a = per_a ? M * K : 0;
    d.stride_b = kind != TK_GROUP_K ? K * N : 0;
    d.stride_c = kind != TK_GROUP_ROWS ? M * N : 0;
    d.offs = kind != TK_GROUP_BATCHED ? FAKE_OFFS : NULL;
    return d;
}

/* d's problem stored column-major, its leading dimensions the tightest
 * (A M x K, B K x N, C M x N: op N). */
static void col_major(tk_gemm_desc *d)
{
    d->problem.layout = TK_COL_MAJOR;
    d->problem.lda = M;
    d->problem.ldb = K;
    d->problem.ldc = M;
}

/* d through tk_gemm_batched or tk_gemm_grouped, where they can say it. */
static int has_own_call(const tk_gemm_desc *d)
{
    if (d->group_kind == TK_GROUP_BATCHED)
        return !d->offs && !d->group_error;
    return d->group_kind == TK_GROUP_ROWS || d->group_kind == TK_GROUP_K || d->group_kind == TK_GROUP_MASKED;
}

static tk_status own_call(tk_handle h, const tk_gemm_desc *d)
{
    if (d->group_kind == TK_GROUP_BATCHED)
        return tk_gemm_batched(h, &d->problem, d->count, d->stride_a, d->stride_b, d->stride_c, NULL, NULL);
    return tk_gemm_grouped(h, &d->problem, (tk_group_kind)d->group_kind, d->count, d->offs, d->stride_a, d->stride_b,
                           d->stride_c, d->group_error, NULL, NULL);
}

/* d through tk_gemm_run and, where it can say the same, the kind's own
 * function: each outcome checked as fh_check_outcome does, words[0] the
 * argument (NULL: the status alone). `where` ends how the call is named. */
static void expect(tk_handle h, const tk_gemm_desc *d, tk_status want, const char *what, const char *where,
                   const char *const *words)
{
    char label[128], how[96];
    snprintf(label, sizeof label, "%s %s", kind_str(d->group_kind), what);
    snprintf(how, sizeof how, "tk_gemm_run%s", where);
    fh_check_outcome(h, tk_gemm_run(h, d, NULL, NULL), want, label, how, words[0], words + 1);
    if (!has_own_call(d))
        return;
    snprintf(how, sizeof how, "its own function%s", where);
    fh_check_outcome(h, own_call(h, d), want, label, how, words[0], words + 1);
}

/* REFUSED(h, d, what, "arg:", words...): d refused with
 * TK_ERR_INVALID_VALUE, the message starting with the argument's name and
 * holding the words. */
#define REFUSED(h, d, what, ...)                                           \
    do {                                                                   \
        const char *const words_[] = { __VA_ARGS__, NULL };                \
        expect((h), (d), TK_ERR_INVALID_VALUE, (what), "", words_);        \
    } while (0)

static const char *const status_only[] = { NULL };

/* d refused with each of n values of one of its int32 fields (field points
 * into d), the message starting with arg and naming the value and word. */
static void refused_values(tk_handle h, tk_gemm_desc *d, int32_t *field, const int32_t *vals, int n, const char *arg,
                           const char *word)
{
    for (int i = 0; i < n; i++) {
        char num[16], what[48];
        *field = vals[i];
        snprintf(num, sizeof num, "%d", (int)vals[i]);
        snprintf(what, sizeof what, "%s %d", arg, (int)vals[i]);
        REFUSED(h, d, what, arg, num, word);
    }
}

/* Expects d to pass every argument check: on a handle whose device is not
 * the current one, the refusal that comes after them all (naming h); on a
 * real handle without a GPU, TK_ERR_NO_DEVICE. */
static void accepted(tk_handle h, const tk_gemm_desc *d, const char *what)
{
    const char *const h_arg[] = { "h:", NULL };
    struct tk_handle_s fake;
    fh_other_device(&fake);
    expect(&fake, d, TK_ERR_INVALID_VALUE, what, ", device 1 current", h_arg);
    if (!have_gpu())
        expect(h, d, TK_ERR_NO_DEVICE, what, ", no GPU", status_only);
}

/* Expects d to be a no-op: TK_SUCCESS with no GPU asked for (here on the
 * real handle, GPU or none, and on one whose device is not current), and
 * no message left. */
static void noop(tk_handle h, const tk_gemm_desc *d, const char *what)
{
    struct tk_handle_s fake;
    fh_other_device(&fake);
    tk_handle hs[2] = { h, &fake };
    for (int i = 0; i < 2; i++) {
        expect(hs[i], d, TK_SUCCESS, what, "", status_only);
        CHECK(!strcmp(tk_last_error(hs[i]), ""), "%s %s: a no-op left '%s'", kind_str(d->group_kind), what,
              tk_last_error(hs[i]));
    }
}

/* The descriptors every test starts from are valid. */
static void test_valid_descs(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS(all_kinds); i++) {
        tk_gemm_desc d = desc_of(all_kinds[i]);
        accepted(h, &d, kind_str(all_kinds[i]));
        d.group_error = all_kinds[i] != TK_GROUP_BATCHED ? FAKE_ERR : NULL;
        d.problem.c_type = TK_BF16;
        accepted(h, &d, kind_str(all_kinds[i]));
        /* one product or group */
        d.count = 1;
        accepted(h, &d, kind_str(all_kinds[i]));
    }
    tk_destroy(h);
}

static void test_group_kind(void)
{
    tk_handle h = make_handle();
    const int32_t bad[] = { -1, 5, 100 };
    tk_gemm_desc d = desc_of(TK_GROUP_ROWS);
    refused_values(h, &d, &d.group_kind, bad, NKINDS(bad), "group_kind:", "TK_GROUP_MASKED");
    /* tk_gemm_grouped takes the grouped kinds alone */
    d = desc_of(TK_GROUP_ROWS);
    const int not_grouped[] = { TK_GROUP_NONE, TK_GROUP_BATCHED, 7 };
    for (int i = 0; i < NKINDS(not_grouped); i++) {
        tk_status st = tk_gemm_grouped(h, &d.problem, (tk_group_kind)not_grouped[i], COUNT, FAKE_OFFS, 0, K * N, 0,
                                       NULL, NULL, NULL);
        CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "kind:"), "tk_gemm_grouped kind %d: %s (%s)",
              not_grouped[i], tk_status_string(st), tk_last_error(h));
    }
    CHECK(contains(tk_last_error(h), "TK_GROUP_ROWS"), "message: %s", tk_last_error(h));
    tk_status st = tk_gemm_grouped(h, &d.problem, TK_GROUP_BATCHED, COUNT, NULL, M * K, K * N, M * N, NULL, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && contains(tk_last_error(h), "tk_gemm_batched"),
          "tk_gemm_grouped with BATCHED should point at tk_gemm_batched: %s", tk_last_error(h));
    tk_destroy(h);
}

static void test_count(void)
{
    tk_handle h = make_handle();
    const int32_t counts[] = { 0, -1, INT32_MIN };
    for (int i = 0; i < NKINDS(grouped_kinds); i++) {
        tk_gemm_desc d = desc_of(grouped_kinds[i]);
        refused_values(h, &d, &d.count, counts, NKINDS(counts), "count:", ">= 1");
    }
    tk_gemm_desc d = desc_of(TK_GROUP_BATCHED);
    refused_values(h, &d, &d.count, counts + 1, 2, "count:", "batch count");   /* 0 is a no-op */
    d = desc_of(TK_GROUP_BATCHED);
    /* tk_gemm_batched's count is 64-bit; the descriptor's is 32 */
    const int64_t big[] = { (int64_t)INT32_MAX + 1, INT64_MAX, INT64_MIN };
    for (int i = 0; i < NKINDS(big); i++) {
        tk_status st = tk_gemm_batched(h, &d.problem, big[i], M * K, K * N, M * N, NULL, NULL);
        CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "count:"), "tk_gemm_batched count %lld: %s (%s)",
              (long long)big[i], tk_status_string(st), tk_last_error(h));
    }
    /* the largest count passes the checks (its strides fit: 2^31 products of a few KB) */
    if (!have_gpu()) {
        tk_status st = tk_gemm_batched(h, &d.problem, INT32_MAX, M * K, K * N, M * N, NULL, NULL);
        CHECK(st == TK_ERR_NO_DEVICE, "tk_gemm_batched count 2^31 - 1: %s (%s)", tk_status_string(st),
              tk_last_error(h));
    }
    tk_destroy(h);
}

static void test_offs(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS(grouped_kinds); i++) {
        const int kind = grouped_kinds[i];
        char label[64];
        tk_gemm_desc d = desc_of(kind);
        d.offs = NULL;
        REFUSED(h, &d, "offs NULL", "offs:", "NULL", "device memory");
        for (uintptr_t off = 1; off < 4; off++) {
            d = desc_of(kind);
            d.offs = (const int32_t *)((uintptr_t)FAKE_OFFS + off);
            snprintf(label, sizeof label, "offs at +%u bytes", (unsigned)off);
            REFUSED(h, &d, label, "offs:", "4-byte");
            d = desc_of(kind);
            d.group_error = (int32_t *)((uintptr_t)FAKE_ERR + off);
            snprintf(label, sizeof label, "group_error at +%u bytes", (unsigned)off);
            REFUSED(h, &d, label, "group_error:", "4-byte");
        }
    }
    /* BATCHED has no offsets, so no error flag either */
    tk_gemm_desc d = desc_of(TK_GROUP_BATCHED);
    d.offs = FAKE_OFFS;
    REFUSED(h, &d, "with offs", "offs:", "NULL", "TK_GROUP_BATCHED");
    d = desc_of(TK_GROUP_BATCHED);
    d.group_error = FAKE_ERR;
    REFUSED(h, &d, "with group_error", "group_error:", "NULL");
    tk_destroy(h);
}

/* ROWS uses stride_b alone, K stride_c alone: the others must be 0. */
static void test_unused_strides(void)
{
    tk_handle h = make_handle();
    tk_gemm_desc d = desc_of(TK_GROUP_ROWS);
    d.stride_a = M * K;
    REFUSED(h, &d, "stride_a", "stride_a:", "TK_GROUP_ROWS", "expected 0");
    d = desc_of(TK_GROUP_ROWS);
    d.stride_c = M * N;
    REFUSED(h, &d, "stride_c", "stride_c:", "TK_GROUP_ROWS", "expected 0");
    d = desc_of(TK_GROUP_ROWS);
    d.stride_c = -1;   /* unused comes first: also a negative one is "set" */
    REFUSED(h, &d, "stride_c -1", "stride_c:", "TK_GROUP_ROWS");
    d = desc_of(TK_GROUP_K);
    d.stride_a = 1;
    REFUSED(h, &d, "stride_a", "stride_a:", "TK_GROUP_K", "expected 0");
    d = desc_of(TK_GROUP_K);
    d.stride_b = K * N;
    REFUSED(h, &d, "stride_b", "stride_b:", "TK_GROUP_K", "expected 0");
    /* a stride 0 where used is fine: one B for every ROWS group, one A for every batch */
    d = desc_of(TK_GROUP_ROWS);
    d.stride_b = 0;
    accepted(h, &d, "stride_b 0");
    d = desc_of(TK_GROUP_BATCHED);
    d.stride_a = 0;
    d.stride_b = 0;
    accepted(h, &d, "stride_a, stride_b 0");
    tk_destroy(h);
}

static void test_negative_strides(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS(all_kinds); i++) {
        const int kind = all_kinds[i];
        for (int which = 0; which < 3; which++) {
            tk_gemm_desc d = desc_of(kind);
            int64_t *s = which == 0 ? &d.stride_a : which == 1 ? &d.stride_b : &d.stride_c;
            if (!*s)
                continue;   /* unused by the kind: test_unused_strides */
            *s = which == 2 ? INT64_MIN : -1;
            char label[48], arg[16];
            snprintf(arg, sizeof arg, "stride_%c:", "abc"[which]);
            snprintf(label, sizeof label, "%s negative", arg);
            REFUSED(h, &d, label, arg, "negative");
        }
    }
    tk_destroy(h);
}

/* COUNT matrices a stride apart must end within INT64_MAX bytes. */
static void test_stride_overflow(void)
{
    tk_handle h = make_handle();
    tk_gemm_desc d = desc_of(TK_GROUP_BATCHED);
    d.stride_a = INT64_MAX / 4;   /* 4 bf16 matrices: past INT64_MAX bytes */
    REFUSED(h, &d, "stride_a huge", "stride_a:", "INT64_MAX");
    d = desc_of(TK_GROUP_ROWS);
    d.stride_b = INT64_MAX / 2 / (COUNT - 1);   /* the last B starts within range but ends past it */
    REFUSED(h, &d, "stride_b huge", "stride_b:", "INT64_MAX");
    d = desc_of(TK_GROUP_K);
    d.stride_c = INT64_MAX / 8;   /* fp32 C: 4 bytes each */
    REFUSED(h, &d, "stride_c huge", "stride_c:", "INT64_MAX");
    /* the largest stride that fits */
    d = desc_of(TK_GROUP_BATCHED);
    d.stride_a = (INT64_MAX / 2 - M * K) / (COUNT - 1);
    accepted(h, &d, "stride_a at the limit");
    tk_destroy(h);
}

/* The C matrices of BATCHED, K and MASKED may not overlap: stride_c at
 * least one C's extent, (M - 1) * ldc + N row-major, (N - 1) * ldc + M
 * column-major; exactly that is fine (a padded C's last row's padding may
 * hold the next C), as is any stride with a single product. */
static void test_stride_c_overlap(void)
{
    tk_handle h = make_handle();
    const int kinds[] = { TK_GROUP_BATCHED, TK_GROUP_K, TK_GROUP_MASKED };
    for (int i = 0; i < NKINDS(kinds); i++)
        for (int pad = 0; pad < 2; pad++) {
            const int kind = kinds[i];
            tk_gemm_desc d = desc_of(kind);
            d.problem.ldc = N + 8 * pad;
            const int64_t ext = (M - 1) * d.problem.ldc + N;
            char label[64], need[32];
            snprintf(need, sizeof need, ">= %lld", (long long)ext);
            snprintf(label, sizeof label, "ldc %lld, stride_c one short", (long long)d.problem.ldc);
            d.stride_c = ext - 1;
            REFUSED(h, &d, label, "stride_c:", "overlap", need);
            d.stride_c = 0;
            REFUSED(h, &d, "stride_c 0", "stride_c:", "overlap");
            d.stride_c = ext;
            accepted(h, &d, "stride_c = extent");
            d.stride_c = M * d.problem.ldc;
            accepted(h, &d, "stride_c = M * ldc");
            d.count = 1;
            d.stride_c = 0;
            accepted(h, &d, "one product, stride_c 0");
        }
    /* bf16 C: the same extent in elements */
    tk_gemm_desc d = desc_of(TK_GROUP_MASKED);
    d.problem.c_type = TK_BF16;
    d.stride_c = M * N - 1;
    REFUSED(h, &d, "bf16 C one short", "stride_c:", "overlap");
    /* column-major BATCHED: C's lines are its columns */
    d = desc_of(TK_GROUP_BATCHED);
    col_major(&d);
    d.problem.ldc = M + 8;
    const int64_t ext = (N - 1) * (M + 8) + M;
    d.stride_c = ext - 1;
    REFUSED(h, &d, "column-major, stride_c one short", "stride_c:", "overlap");
    d.stride_c = ext;
    accepted(h, &d, "column-major, stride_c = extent");
    /* ROWS has one C: the groups' rows */
    d = desc_of(TK_GROUP_ROWS);
    accepted(h, &d, "ROWS, one C");
    tk_destroy(h);
}

/* ROWS, K and MASKED split rows or K of row-major arrays; BATCHED takes
 * either layout. */
static void test_layout(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS(grouped_kinds); i++) {
        tk_gemm_desc d = desc_of(grouped_kinds[i]);
        col_major(&d);
        REFUSED(h, &d, "column-major", "layout:", "TK_ROW_MAJOR");
    }
    tk_gemm_desc d = desc_of(TK_GROUP_BATCHED);
    col_major(&d);
    accepted(h, &d, "column-major");
    d.problem.op_a = TK_OP_T;   /* A stored K x M column-major */
    d.problem.lda = K;
    accepted(h, &d, "column-major, op_a T");
    /* the problem's own checks still apply, in its layout */
    d.problem.lda = K - 1;
    REFUSED(h, &d, "column-major lda short", "lda:", "column-major");
    tk_destroy(h);
}

/* The problem's own checks (gemm.c's) run for every kind, before the
 * strides are measured against its matrices. */
static void test_problem_checks(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS(all_kinds); i++) {
        const int kind = all_kinds[i];
        tk_gemm_desc d = desc_of(kind);
        d.problem.lda = K - 1;
        REFUSED(h, &d, "lda short", "lda:", ">= 16");
        d = desc_of(kind);
        d.problem.m = -1;
        REFUSED(h, &d, "m -1", "m:", "negative");
        d = desc_of(kind);
        d.problem.b = NULL;
        REFUSED(h, &d, "B NULL", "B:", "NULL");
        d = desc_of(kind);
        d.problem.c = (char *)FAKE_C + 2;   /* fp32 C at 2 mod 4 */
        REFUSED(h, &d, "C misaligned", "C:", "4-byte");
        /* a leading dimension so large that A's extent overflows the stride
         * arithmetic, were the strides measured first */
        d = desc_of(kind);
        d.problem.lda = INT64_MAX / 2;
        REFUSED(h, &d, "lda huge", "lda:", "INT64_MAX");
        d = desc_of(kind);
        tk_status st = tk_gemm_run(h, &d, "k99_nope", NULL);
        CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "kernel:"), "%s unknown kernel: %s (%s)",
              kind_str(kind), tk_status_string(st), tk_last_error(h));
    }
    tk_destroy(h);
}

static void test_null_args(void)
{
    tk_handle h = make_handle();
    tk_gemm_desc d = desc_of(TK_GROUP_ROWS);
    tk_status st = tk_gemm_grouped(h, NULL, TK_GROUP_ROWS, COUNT, FAKE_OFFS, 0, K * N, 0, NULL, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "problem:"), "grouped, NULL problem: %s",
          tk_last_error(h));
    st = tk_gemm_batched(h, NULL, COUNT, M * K, K * N, M * N, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "problem:"), "batched, NULL problem: %s",
          tk_last_error(h));
    st = tk_gemm_run(h, NULL, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "d:"), "NULL descriptor: %s", tk_last_error(h));
    st = tk_gemm_grouped(NULL, &d.problem, TK_GROUP_ROWS, COUNT, FAKE_OFFS, 0, K * N, 0, NULL, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(NULL), "h:"), "grouped, NULL handle: %s",
          tk_last_error(NULL));
    st = tk_gemm_batched(NULL, &d.problem, COUNT, M * K, K * N, M * N, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(NULL), "h:"), "batched, NULL handle: %s",
          tk_last_error(NULL));
    st = tk_gemm_run(NULL, &d, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(NULL), "h:"), "run, NULL handle: %s",
          tk_last_error(NULL));
    tk_destroy(h);
}

/* No-ops need no device and succeed after the argument checks: a batch of
 * none (its operands may then be NULL, as torch's empty tensors' are), and
 * M or N == 0 of every kind. A bad argument is still refused. K == 0 of
 * the K kind is not one: every group's C = beta * C. */
static void test_noops(void)
{
    tk_handle h = make_handle();
    tk_gemm_desc d = desc_of(TK_GROUP_BATCHED);
    d.count = 0;
    noop(h, &d, "count 0");
    d.problem.a = d.problem.b = NULL;
    d.problem.c = NULL;
    noop(h, &d, "count 0, NULL operands");
    d.stride_a = -1;
    REFUSED(h, &d, "count 0, stride_a -1", "stride_a:", "negative");
    d = desc_of(TK_GROUP_BATCHED);
    d.count = 0;
    d.problem.ldb = N - 1;
    REFUSED(h, &d, "count 0, ldb short", "ldb:");
    for (int i = 0; i < NKINDS(all_kinds); i++) {
        const int kind = all_kinds[i];
        d = desc_of(kind);
        d.problem.m = 0;
        noop(h, &d, "M 0");
        d = desc_of(kind);
        d.problem.n = 0;
        noop(h, &d, "N 0");
        d.problem.lda = 0;
        REFUSED(h, &d, "N 0, lda 0", "lda:");
    }
    d = desc_of(TK_GROUP_ROWS);
    d.problem.m = 0;
    d.offs = NULL;
    REFUSED(h, &d, "M 0, offs NULL", "offs:");
    d = desc_of(TK_GROUP_K);
    d.problem.k = 0;
    accepted(h, &d, "K 0");
    d.problem.a = d.problem.b = NULL;   /* not read: every group is empty */
    accepted(h, &d, "K 0, A and B NULL");
    tk_destroy(h);
}

/* group_kind 0 is one product, which uses no group field: one set is
 * refused (else a count or offsets with group_kind forgotten would run one
 * product silently). */
static void test_kind_none(void)
{
    tk_handle h = make_handle();
    for (int f = 0; f < 6; f++) {
        tk_gemm_desc d = desc_of(TK_GROUP_ROWS);
        d.group_kind = TK_GROUP_NONE;
        d.count = f == 0 ? COUNT : 0;
        d.stride_a = f == 1;
        d.stride_b = f == 2 ? K * N : 0;
        d.stride_c = f == 3 ? -1 : 0;
        d.offs = f == 4 ? FAKE_OFFS : NULL;
        d.group_error = f == 5 ? FAKE_ERR : NULL;
        static const char *const args[] = { "count:", "stride_a:", "stride_b:", "stride_c:", "offs:", "group_error:" };
        const char *const words[] = { args[f], "TK_GROUP_NONE", NULL };
        fh_check_outcome(h, tk_gemm_run(h, &d, NULL, NULL), TK_ERR_INVALID_VALUE, "NONE with a group field", args[f],
                         words[0], words + 1);
    }
    tk_gemm_desc d = desc_of(TK_GROUP_ROWS);
    d.group_kind = TK_GROUP_NONE;
    d.count = 0;
    d.stride_b = 0;
    d.offs = NULL;
    struct tk_handle_s fake;
    fh_other_device(&fake);
    fh_check_outcome(&fake, tk_gemm_run(&fake, &d, NULL, NULL), TK_ERR_INVALID_VALUE, "NONE, fields 0",
                     "device 1 current", "h:", status_only);
    tk_destroy(h);
}

/* A caller compiled against the first tk_gemm_desc (size up to and
 * without group_kind) runs one product: whatever lies past its size is
 * not read, so group fields holding garbage change nothing. */
static void test_first_version_desc(void)
{
    tk_handle h = make_handle();
    tk_gemm_desc d = desc_of(TK_GROUP_ROWS);
    d.size = offsetof(tk_gemm_desc, group_kind);
    d.group_kind = 99;
    d.count = -5;
    d.stride_a = -7;
    d.offs = (const int32_t *)((uintptr_t)FAKE_OFFS + 1);
    d.group_error = (int32_t *)((uintptr_t)FAKE_ERR + 3);
    d.problem.m = COUNT;   /* a single product M x N x K */
    struct tk_handle_s fake;
    fh_other_device(&fake);
    fh_check_outcome(&fake, tk_gemm_run(&fake, &d, NULL, NULL), TK_ERR_INVALID_VALUE, "first version",
                     "device 1 current", "h:", status_only);
    if (!have_gpu())
        fh_check_outcome(h, tk_gemm_run(h, &d, NULL, NULL), TK_ERR_NO_DEVICE, "first version", "no GPU", NULL,
                         status_only);
    d.problem.lda = 1;
    const char *const lda[] = { ">= 16", NULL };
    fh_check_outcome(h, tk_gemm_run(h, &d, NULL, NULL), TK_ERR_INVALID_VALUE, "first version, lda 1", "tk_gemm_run",
                     "lda:", lda);
    d.problem.lda = K;
    d.problem.m = 0;
    fh_check_outcome(h, tk_gemm_run(h, &d, NULL, NULL), TK_SUCCESS, "first version, M 0", "tk_gemm_run", NULL,
                     status_only);
    /* one byte short of the first version */
    d.size = offsetof(tk_gemm_desc, group_kind) - 1;
    const char *const size[] = { "TK_GEMM_DESC_INIT", NULL };
    fh_check_outcome(h, tk_gemm_run(h, &d, NULL, NULL), TK_ERR_INVALID_VALUE, "size short", "tk_gemm_run", "d->size:",
                     size);
    tk_destroy(h);
}

/* A named kernel whose family does not take a form refuses it, before any
 * launch, with TK_ERR_NOT_SUPPORTED naming the form (on a modeled H100:
 * every kernel's SM is there). The kernels that take the form would launch
 * on these fake pointers: they are run on the GPU (tests/gpu). */
static void test_named_kernels_refuse(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    int refused_b = 0, refused_g = 0, takes_b = 0, takes_g = 0;
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        for (int j = 0; j < NKINDS(all_kinds); j++) {
            const int kind = all_kinds[j];
            const unsigned bit = kind == TK_GROUP_BATCHED ? TK_ACCEPT_BATCHED : TK_ACCEPT_GROUPED;
            if (k->family->accepts & bit) {
                *(kind == TK_GROUP_BATCHED ? &takes_b : &takes_g) += 1;
                continue;
            }
            tk_gemm_desc d = desc_of(kind);
            tk_status st = tk_gemm_run(&fake, &d, k->name, NULL);
            const char *want = kind == TK_GROUP_BATCHED ? "batched products" : "grouped products";
            CHECK(st == TK_ERR_NOT_SUPPORTED && contains(tk_last_error(&fake), want) &&
                      contains(tk_last_error(&fake), k->name),
                  "%s on %s: %s (%s)", k->name, kind_str(kind), tk_status_string(st), tk_last_error(&fake));
            *(kind == TK_GROUP_BATCHED ? &refused_b : &refused_g) += 1;
        }
    }
    CHECK(takes_b >= 2 && takes_g >= 3, "k01_naive and cuBLAS take batched products, k01_naive grouped ones: %d, %d",
          takes_b, takes_g / 3);
    CHECK(refused_b > 0 && refused_g > 0, "no kernel refused a form: the test shows nothing");
    CHECK(!strcmp(tk_registry_find("k01_naive")->name, "k01_naive") &&
              (tk_registry_find("k01_naive")->family->accepts & (TK_ACCEPT_BATCHED | TK_ACCEPT_GROUPED)) ==
                  (TK_ACCEPT_BATCHED | TK_ACCEPT_GROUPED),
          "k01_naive, the fallback, must take every form");
}

/* Auto-dispatch among k43's configurations on a modeled H100 (the family's
 * support and rank functions, no GPU): the swapped 16- and 32-row tiles for
 * a few tokens an expert, 64 x 128 up to 64 rows, 128 x 256 for large
 * groups, 128 x 128 for weight gradients of few output tiles; refusals: a
 * rows split of an M-major A (its groups start off TMA's 16-byte
 * boundaries), the swapped tiles for K splits, K = 0, a dense problem. */
static const char *k43_pick(const tk_args *a, const tk_device *dev)
{
    const tk_kernel *best = NULL;
    int best_rank = 0;
    char why[TK_MSG_LEN];
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (strcmp(k->family->name, "k43") || tk_kernel_supports_args(k, a, dev, why, sizeof why))
            continue;
        const int r = tk_kernel_rank(k, a, dev);
        if (r > best_rank) {
            best = k;
            best_rank = r;
        }
    }
    return best ? best->name : "(none)";
}

/* A row-major problem of kind over `count` products or groups, its
 * operands at aligned stand-ins (support checks read their alignment only). */
static tk_args k43_args(tk_group_args *g, int kind, int count, int64_t m, int64_t n, int64_t k, tk_op op_a, tk_op op_b)
{
    static uint16_t buf[64] __attribute__((aligned(256)));
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->count = count;
    g->offs = kind == TK_GROUP_BATCHED ? NULL : (const int32_t *)buf;
    g->stride_a = kind == TK_GROUP_BATCHED ? m * k : 0;
    g->stride_b = kind == TK_GROUP_K ? 0 : n * k;
    g->stride_c = kind == TK_GROUP_ROWS ? 0 : m * n;
    tk_args a;
    memset(&a, 0, sizeof a);
    a.m = m;
    a.n = n;
    a.k = k;
    a.op_a = op_a;
    a.op_b = op_b;
    a.lda = op_a == TK_OP_N ? k : m;
    a.ldb = op_b == TK_OP_N ? n : k;
    a.ldc = n;
    a.a = a.b = a.c = buf;
    a.c_type = TK_BF16;
    a.alpha = 1.0f;
    a.grp = g;
    return a;
}

static void test_k43_picks(void)
{
    const tk_device dev = fh_device(90);
    const struct { int kind, count; int64_t m, n, k; tk_op op_a, op_b; const char *want; } cases[] = {
        { TK_GROUP_ROWS, 256, 128, 4096, 7168, TK_OP_N, TK_OP_T, "k43_swap_16x64" },       /* DeepSeek decode */
        { TK_GROUP_ROWS, 8, 4096, 28672, 4096, TK_OP_N, TK_OP_T, "k43_grouped_128x256" },   /* Mixtral prefill */
        { TK_GROUP_ROWS, 128, 4096, 1536, 2048, TK_OP_N, TK_OP_T, "k43_swap_32x64" },       /* 32 rows a group */
        { TK_GROUP_ROWS, 8, 512, 4096, 4096, TK_OP_N, TK_OP_T, "k43_grouped_64x128" },      /* 64 rows a group */
        { TK_GROUP_K, 8, 256, 128, 4096, TK_OP_T, TK_OP_N, "k43_grouped_64x128" },          /* 16 tiles of 128: halved */
        { TK_GROUP_BATCHED, 256, 512, 512, 128, TK_OP_N, TK_OP_T, "k43_grouped_128x256" },
        { TK_GROUP_BATCHED, 256, 512, 128, 512, TK_OP_N, TK_OP_N, "k43_grouped_128x128" },   /* N 128: no wider */
        { TK_GROUP_BATCHED, 16, 4096, 64, 128, TK_OP_N, TK_OP_N, "k43_grouped_128x64" },      /* P V, head size 64 */
        { TK_GROUP_BATCHED, 32, 128, 128, 4096, TK_OP_N, TK_OP_N, "k43_grouped_64x128" },     /* 32 tiles of 128 */
        { TK_GROUP_ROWS, 8, 4096, 4096, 4096, TK_OP_T, TK_OP_T, "(none)" },                 /* M-major A */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_group_args g;
        const tk_args a = k43_args(&g, cases[i].kind, cases[i].count, cases[i].m, cases[i].n, cases[i].k,
                                   cases[i].op_a, cases[i].op_b);
        const char *got = k43_pick(&a, &dev);
        CHECK(!strcmp(got, cases[i].want), "case %zu (kind %d, %d groups, %lld x %lld x %lld): k43 picks %s, want %s",
              i, cases[i].kind, cases[i].count, (long long)a.m, (long long)a.n, (long long)a.k, got, cases[i].want);
    }
    const tk_kernel *swap = tk_registry_find("k43_swap_16x64"), *big = tk_registry_find("k43_grouped_128x256");
    CHECK(swap && big, "k43 lines missing from the registry");
    if (!swap || !big)
        return;
    char why[TK_MSG_LEN] = "";
    tk_group_args g;
    tk_args a = k43_args(&g, TK_GROUP_K, 4, 64, 64, 256, TK_OP_N, TK_OP_T);
    CHECK(tk_kernel_supports_args(swap, &a, &dev, why, sizeof why) == TK_ERR_NOT_SUPPORTED && strstr(why, "not K"),
          "swapped tiles on a K split: %s", why);
    a.k = 0;
    CHECK(tk_kernel_supports_args(big, &a, &dev, why, sizeof why) == TK_ERR_NOT_SUPPORTED, "K = 0 taken");
    a.k = 256;
    a.grp = NULL;
    CHECK(tk_kernel_supports_args(big, &a, &dev, why, sizeof why) == TK_ERR_NOT_SUPPORTED && strstr(why, "only"),
          "a dense problem taken: %s", why);
}

void tk_tests(void)
{
    TK_TEST(test_valid_descs);
    TK_TEST(test_group_kind);
    TK_TEST(test_count);
    TK_TEST(test_offs);
    TK_TEST(test_unused_strides);
    TK_TEST(test_negative_strides);
    TK_TEST(test_stride_overflow);
    TK_TEST(test_stride_c_overlap);
    TK_TEST(test_layout);
    TK_TEST(test_problem_checks);
    TK_TEST(test_null_args);
    TK_TEST(test_noops);
    TK_TEST(test_kind_none);
    TK_TEST(test_first_version_desc);
    TK_TEST(test_named_kernels_refuse);
    TK_TEST(test_k43_picks);
}
