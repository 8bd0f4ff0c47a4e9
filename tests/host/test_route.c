/* test_route.c - the planning half of auto-dispatch's copies (route.c),
 * which needs no GPU: which operands count as misaligned, the leading
 * dimensions and workspace offsets of their copies, the tiny threshold and
 * the route's name; FP8 operands' K-major copies (transposed where the
 * layout is not K-major). Which kernel then runs is checked on the GPU
 * (tests/gpu/test_dispatch.c). */
#include <stdint.h>
#include <string.h>
#include "lib/internal.h"
#include "check.h"

/* A row-major problem with 256-byte aligned (fake) pointers. */
static tk_args args(int64_t m, int64_t n, int64_t k, tk_op oa, tk_op ob, tk_dtype ct)
{
    tk_args a;
    memset(&a, 0, sizeof a);
    a.m = m; a.n = n; a.k = k;
    a.op_a = oa; a.op_b = ob;
    a.a = (const void *)(uintptr_t)0x10000;
    a.b = (const void *)(uintptr_t)0x20000;
    a.c = (void *)(uintptr_t)0x30000;
    a.lda = oa == TK_OP_N ? k : m;
    a.ldb = ob == TK_OP_N ? n : k;
    a.ldc = n;
    a.c_type = ct;
    a.alpha = 1.0f;
    return a;
}

static void test_aligned(void)
{
    CHECK(tk_route_aligned((void *)0x1000, 4096, 2), "ld 4096 bf16 at 0x1000 is aligned");
    CHECK(!tk_route_aligned((void *)0x1000, 4097, 2), "ld 4097 bf16 is not");
    CHECK(!tk_route_aligned((void *)0x1002, 4096, 2), "a pointer one bf16 in is not");
    CHECK(tk_route_aligned((void *)0x1000, 4, 4), "ld 4 fp32 (16 bytes) is aligned");
    CHECK(!tk_route_aligned((void *)0x1000, 6, 4), "ld 6 fp32 (24 bytes) is not");
    CHECK(tk_route_aligned(NULL, 8, 2), "NULL (introspection) with ld 8 is aligned");
}

static void test_nothing_to_copy(void)
{
    tk_args a = args(4096, 4096, 4096, TK_OP_N, TK_OP_T, TK_F32);
    tk_route r;
    tk_route_plan(&a, 1, 1, &r);
    CHECK(!r.copy[0] && !r.copy[1] && !r.copy[2] && r.bytes == 0, "aligned problem planned copies (%zu bytes)",
          r.bytes);
    CHECK(r.run.a == a.a && r.run.b == a.b && r.run.c == a.c && r.run.lda == 4096, "run differs from the problem");
}

static void test_misaligned_b(void)
{
    /* 4096 x 4097 x 4096, B stored K x N with ldb 4097: B is copied with
     * ld 4104; A stays; C (ldc 4097) only when staging is asked for. */
    tk_args a = args(4096, 4097, 4096, TK_OP_N, TK_OP_N, TK_F32);
    tk_route r;
    tk_route_plan(&a, 1, 0, &r);
    CHECK(!r.copy[0] && r.copy[1] && !r.copy[2], "copies %d %d %d, expected B only", r.copy[0], r.copy[1],
          r.copy[2]);
    CHECK(r.ld[1] == 4104 && r.run.ldb == 4104 && r.run.b == NULL, "B's copy: ld %lld", (long long)r.ld[1]);
    CHECK(r.bytes == (size_t)4096 * 4104 * 2, "workspace %zu", r.bytes);
    CHECK(r.run.c == a.c && r.run.ldc == 4097, "C changed without staging");
    tk_route_plan(&a, 1, 1, &r);
    CHECK(r.copy[1] && r.copy[2], "staging: copies %d %d %d", r.copy[0], r.copy[1], r.copy[2]);
    CHECK(r.off[2] == (size_t)4096 * 4104 * 2 && r.off[2] % 256 == 0, "C's offset %zu", r.off[2]);
    CHECK(r.ld[2] == 4104 && r.bytes == r.off[2] + (size_t)4096 * 4104 * 4, "C's copy: ld %lld, total %zu",
          (long long)r.ld[2], r.bytes);
    tk_route_bind(&r, (void *)(uintptr_t)0x100000);
    CHECK(r.run.b == (const void *)(uintptr_t)0x100000 && r.run.c == (void *)(uintptr_t)(0x100000 + r.off[2]),
          "bind: b %p c %p", r.run.b, r.run.c);
    CHECK(r.run.a == a.a, "bind moved A");
}

static void test_transposed_and_offset(void)
{
    /* op_a T: A stored K x M = 999 x 1001, ld 1001 -> 1008; op_b T with a
     * pointer 2 bytes in: B stored N x K = 1003 x 999, ld 999 -> 1000. */
    tk_args a = args(1001, 1003, 999, TK_OP_T, TK_OP_T, TK_BF16);
    a.b = (const char *)a.b + 2;
    tk_route r;
    tk_route_plan(&a, 1, 0, &r);
    CHECK(r.copy[0] && r.copy[1], "copies %d %d", r.copy[0], r.copy[1]);
    CHECK(r.ld[0] == 1008 && r.ld[1] == 1000, "lds %lld %lld", (long long)r.ld[0], (long long)r.ld[1]);
    size_t a_bytes = (size_t)999 * 1008 * 2;
    CHECK(r.off[1] == (a_bytes + 255) / 256 * 256, "B's offset %zu", r.off[1]);
    CHECK(r.bytes == (r.off[1] + (size_t)1003 * 1000 * 2 + 255) / 256 * 256, "total %zu", r.bytes);
}

/* A copy's lines are rounded up to 8 elements, so the copy of a valid
 * operand of lines of one element can be 8 times its size: past SIZE_MAX
 * here (2^61 x 1 bf16, 2^62 bytes, copied as 2^65). The plan then asks for
 * SIZE_MAX bytes, which cudaMalloc refuses, not for the wrapped size (0). */
static void test_copy_size_saturates(void)
{
    tk_args a = args(INT64_C(1) << 61, 8, 1, TK_OP_N, TK_OP_N, TK_F32);
    tk_route r;
    tk_route_plan(&a, 1, 0, &r);
    CHECK(r.copy[0] && !r.copy[1] && r.ld[0] == 8, "copies %d %d, ld %lld", r.copy[0], r.copy[1],
          (long long)r.ld[0]);
    CHECK(r.bytes == SIZE_MAX, "workspace %zu bytes (expected SIZE_MAX)", r.bytes);
    tk_route_plan(&a, 1, 1, &r);   /* C (ldc 8 fp32) is aligned: still only A */
    CHECK(r.bytes == SIZE_MAX, "with staging: workspace %zu bytes", r.bytes);
}

static void test_tiny(void)
{
    tk_args a = args(128, 128, 128, TK_OP_N, TK_OP_N, TK_F32);   /* 2^22 flop exactly: not tiny */
    CHECK(!tk_route_tiny(&a), "128^3 counted tiny");
    a.k = 127;
    CHECK(tk_route_tiny(&a), "128x128x127 not counted tiny");
    a = args(1, 50257, 768, TK_OP_N, TK_OP_T, TK_F32);
    CHECK(tk_route_tiny(&a) == (2.0 * 50257 * 768 < TK_ROUTE_TINY_FLOP), "1 x 50257 x 768");
}

static void test_name(void)
{
    tk_args a = args(4096, 4097, 4097, TK_OP_N, TK_OP_N, TK_F32);
    tk_route r;
    tk_route_plan(&a, 1, 1, &r);
    r.k = NULL;
    char buf[128];
    tk_route_name(&r, buf, sizeof buf);
    CHECK(!strcmp(buf, "(none) (copies A, B, C)"), "name '%s'", buf);
    tk_route_plan(&a, 0, 0, &r);
    tk_route_name(&r, buf, sizeof buf);
    CHECK(!strcmp(buf, "(none)"), "name '%s'", buf);
    char small[8];
    tk_route_plan(&a, 1, 1, &r);
    tk_route_name(&r, small, sizeof small);
    CHECK(strlen(small) == sizeof small - 1, "truncated name '%s'", small);
}

/* FP8 operands (a->fp8): lines of 16 codes; a layout that is not K-major
 * copied transposed (A stored K x M becomes M x K, B stored K x N becomes
 * N x K) and the run made op_a N, op_b T; a K-major aligned one used in
 * place; the FP8 arguments passed through. */
static void test_fp8_plan(void)
{
    const tk_fp8_args f = { TK_FP8_E4M3, TK_FP8_E5M2, TK_SCALE_ROW, (const float *)(uintptr_t)0x40000,
                            (const float *)(uintptr_t)0x50000, 0, 0, 0, 0 };
    /* op_a T (A stored 999 x 1001), op_b N (B stored 999 x 1003): both transposed */
    tk_args a = args(1001, 1003, 999, TK_OP_T, TK_OP_N, TK_F32);
    a.fp8 = &f;
    tk_route r;
    tk_route_plan(&a, 1, 0, &r);
    CHECK(r.copy[0] && r.copy[1] && r.transposed[0] && r.transposed[1], "copies %d %d, transposed %d %d",
          r.copy[0], r.copy[1], r.transposed[0], r.transposed[1]);
    CHECK(r.ld[0] == 1008 && r.ld[1] == 1008, "lds %lld %lld", (long long)r.ld[0], (long long)r.ld[1]);
    CHECK(r.run.op_a == TK_OP_N && r.run.op_b == TK_OP_T, "run ops %d %d", (int)r.run.op_a, (int)r.run.op_b);
    CHECK(r.off[1] == ((size_t)1001 * 1008 + 255) / 256 * 256, "B's offset %zu", r.off[1]);
    CHECK(r.bytes == (r.off[1] + (size_t)1003 * 1008 + 255) / 256 * 256, "total %zu", r.bytes);
    CHECK(r.run.fp8 == &f && r.run.m == 1001 && r.run.n == 1003 && r.run.k == 999, "run's problem changed");
    r.k = NULL;
    char buf[64];
    tk_route_name(&r, buf, sizeof buf);
    CHECK(!strcmp(buf, "(none) (copies A^T, B^T)"), "name '%s'", buf);
    /* K-major: A (lda 999) repacked in bytes to 1008, B (ldb 1008, aligned) used in place */
    a = args(1001, 1003, 999, TK_OP_N, TK_OP_T, TK_F32);
    a.ldb = 1008;
    a.fp8 = &f;
    tk_route_plan(&a, 1, 0, &r);
    CHECK(r.copy[0] && !r.copy[1] && !r.transposed[0], "copies %d %d, transposed %d", r.copy[0], r.copy[1],
          r.transposed[0]);
    CHECK(r.ld[0] == 1008 && r.bytes == ((size_t)1001 * 1008 + 255) / 256 * 256 && r.run.b == a.b, "A's copy: ld %lld, %zu bytes",
          (long long)r.ld[0], r.bytes);
    /* 16 codes a line: ld 1008 is aligned for FP8, 1000 (8 codes past 16) is not */
    a.lda = 1000;
    tk_route_plan(&a, 1, 0, &r);
    CHECK(r.copy[0] && r.ld[0] == 1008, "ld 1000: copy %d ld %lld", r.copy[0], (long long)r.ld[0]);
    a.lda = 1008;
    tk_route_plan(&a, 1, 1, &r);   /* C (ldc 1003 fp32) staged as for bf16 */
    CHECK(!r.copy[0] && !r.copy[1] && r.copy[2] && r.ld[2] == 1008, "C staged: copies %d %d %d, ld %lld",
          r.copy[0], r.copy[1], r.copy[2], (long long)r.ld[2]);
    /* a bf16 problem of the same layout: no transposes */
    a = args(1001, 1003, 999, TK_OP_T, TK_OP_N, TK_F32);
    tk_route_plan(&a, 1, 0, &r);
    CHECK(!r.transposed[0] && !r.transposed[1] && r.run.op_a == TK_OP_T && r.run.op_b == TK_OP_N,
          "bf16 transposed: %d %d", r.transposed[0], r.transposed[1]);
}

void tk_tests(void)
{
    TK_TEST(test_aligned);
    TK_TEST(test_nothing_to_copy);
    TK_TEST(test_misaligned_b);
    TK_TEST(test_transposed_and_offset);
    TK_TEST(test_copy_size_saturates);
    TK_TEST(test_tiny);
    TK_TEST(test_name);
    TK_TEST(test_fp8_plan);
}
