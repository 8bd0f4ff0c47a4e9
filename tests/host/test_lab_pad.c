/* test_lab_pad.c - padded leading dimensions in the harness: the ld that
 * tk_lab_problem gives every layout/op/operand, the buffer size that serves
 * them all, the fp64 reference reading through padded ld, and the sentinel
 * check that turns a write into C's padding into a failure. No GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lab/lab.h"
#include "check.h"

static const int64_t shapes[][3] = { { 1, 1, 1 }, { 17, 33, 9 }, { 127, 129, 65 }, { 64, 80, 8 }, { 16, 24, 40 },
                                     { 200, 136, 24 } };
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

/* The expected ld, written out independently of tk_lab_ld. */
static int64_t want_ld(int64_t len, int pad)
{
    if (!pad)
        return len;
    int64_t up = len % 8 ? len + (8 - len % 8) : len;
    return up + 8;
}

static void test_padded_ld_every_layout_and_op(void)
{
    for (int sh = 0; sh < NSHAPES; sh++)
        for (int combo = 0; combo < 16; combo++) {
            int64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2];
            tk_lab_case c = { (tk_layout)(combo & 1), (tk_op)(combo >> 1 & 1), (tk_op)(combo >> 2 & 1), m, n, k,
                              1.0f, 0.0f, TK_F32, 1, combo >> 3, 0 };
            tk_gemm_problem p;
            tk_lab_problem(&c, NULL, NULL, NULL, &p);
            int row = c.layout == TK_ROW_MAJOR;
            /* stored A: m x k (N) or k x m (T); stored B: k x n (N) or n x k (T) */
            int64_t ar = c.op_a == TK_OP_N ? m : k, ac = c.op_a == TK_OP_N ? k : m;
            int64_t br = c.op_b == TK_OP_N ? k : n, bc = c.op_b == TK_OP_N ? n : k;
            int64_t la = row ? ac : ar, lb = row ? bc : br, lc = row ? n : m;   /* line lengths */
            int64_t na = row ? ar : ac, nb = row ? br : bc, nc = row ? m : n;   /* line counts */
            char name[128];
            tk_lab_case_name(&c, name, sizeof name);
            CHECK(p.lda == want_ld(la, c.pad) && p.ldb == want_ld(lb, c.pad) && p.ldc == want_ld(lc, c.pad),
                  "%s: ld %lld %lld %lld, want %lld %lld %lld", name, (long long)p.lda, (long long)p.ldb,
                  (long long)p.ldc, (long long)want_ld(la, c.pad), (long long)want_ld(lb, c.pad),
                  (long long)want_ld(lc, c.pad));
            if (c.pad) {
                CHECK(p.lda % 8 == 0 && p.ldb % 8 == 0 && p.ldc % 8 == 0, "%s: ld not a multiple of 8", name);
                CHECK(p.lda > la && p.ldb > lb && p.ldc > lc, "%s: a padded ld without padding", name);
                CHECK(strstr(name, " padded") != NULL, "name lacks 'padded': %s", name);
            } else {
                CHECK(strstr(name, "padded") == NULL, "tight case named padded: %s", name);
            }
            /* the shared buffers hold the stored matrix, padding included */
            CHECK((size_t)(na * p.lda) <= tk_lab_buf_elems(m, k), "%s: A needs %lld > %zu", name,
                  (long long)(na * p.lda), tk_lab_buf_elems(m, k));
            CHECK((size_t)(nb * p.ldb) <= tk_lab_buf_elems(k, n), "%s: B needs %lld > %zu", name,
                  (long long)(nb * p.ldb), tk_lab_buf_elems(k, n));
            CHECK((size_t)(nc * p.ldc) <= tk_lab_buf_elems(m, n), "%s: C needs %lld > %zu", name,
                  (long long)(nc * p.ldc), tk_lab_buf_elems(m, n));
        }
    CHECK(tk_lab_ld(9, 1) == 24 && tk_lab_ld(8, 1) == 16 && tk_lab_ld(1, 1) == 16 && tk_lab_ld(9, 0) == 9,
          "tk_lab_ld: %lld %lld %lld %lld", (long long)tk_lab_ld(9, 1), (long long)tk_lab_ld(8, 1),
          (long long)tk_lab_ld(1, 1), (long long)tk_lab_ld(9, 0));
    CHECK(tk_lab_buf_elems(17, 9) == 17 * 24 + TK_LAB_OFFSET_MAX + 1, "buf_elems(17, 9) = %zu", tk_lab_buf_elems(17, 9));
}

/* op(X)(r, c) of a stored matrix, indexed independently of lab_cpuref.c. */
static double at(const uint16_t *x, tk_layout l, tk_op op, int64_t ld, int64_t r, int64_t c)
{
    int64_t sr = op == TK_OP_N ? r : c, sc = op == TK_OP_N ? c : r;
    return tk_lab_bf16_to_f32(x[l == TK_ROW_MAJOR ? sr * ld + sc : sc * ld + sr]);
}

/* Buffers as verify allocates them (random padding included): the reference
 * must read through the padded ld and never take padding for data. */
static void test_reference_with_padded_ld(void)
{
    for (int sh = 0; sh < 3; sh++)
        for (int combo = 0; combo < 16; combo++) {
            int64_t m = shapes[sh + 1][0], n = shapes[sh + 1][1], k = shapes[sh + 1][2];
            tk_lab_case c = { (tk_layout)(combo & 1), (tk_op)(combo >> 1 & 1), (tk_op)(combo >> 2 & 1), m, n, k,
                              1.5f, combo >> 3 ? 0.5f : 0.0f, TK_F32, 4, 1, 0 };
            size_t na = tk_lab_buf_elems(m, k), nb = tk_lab_buf_elems(k, n), nc = tk_lab_buf_elems(m, n);
            uint16_t *a = malloc(na * 2), *b = malloc(nb * 2);
            float *c0 = malloc(nc * 4);
            double *want = malloc((size_t)(m * n) * 8);
            tk_lab_fill(a, TK_BF16, na, 1);
            tk_lab_fill(b, TK_BF16, nb, 2);
            tk_lab_fill(c0, TK_F32, nc, 3);
            tk_gemm_problem p;
            tk_lab_problem(&c, a, b, c0, &p);
            tk_lab_ref_full(&p, want, NULL);
            int bad = 0;
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double acc = 0;
                    for (int64_t t = 0; t < k; t++)
                        acc += at(a, c.layout, c.op_a, p.lda, i, t) * at(b, c.layout, c.op_b, p.ldb, t, j);
                    double w = 1.5 * acc + (c.beta != 0 ? 0.5 * c0[tk_lab_index(c.layout, p.ldc, i, j)] : 0.0);
                    bad += fabs(want[i * n + j] - w) > 1e-12 * (1 + fabs(w));
                }
            char name[128];
            tk_lab_case_name(&c, name, sizeof name);
            CHECK(bad == 0, "%s: %d entries differ from the triple loop", name, bad);
            free(a); free(b); free(c0); free(want);
        }
}

static int64_t pad_check(const void *c, tk_dtype t, tk_layout l, int64_t m, int64_t n, int64_t ldc, int64_t *r,
                         int64_t *col)
{
    *r = *col = -1;
    return tk_lab_pad_check(c, t, l, m, n, ldc, r, col);
}

/* A planted write into any one padding element is caught at its logical
 * (row, col); writes inside C's M x N are not the check's business. */
static void test_sentinel_catches_padding_writes(void)
{
    enum { M = 5, N = 11 };
    for (int combo = 0; combo < 4; combo++) {
        tk_layout l = (tk_layout)(combo & 1);
        tk_dtype t = combo & 2 ? TK_BF16 : TK_F32;
        size_t es = t == TK_F32 ? 4 : 2;
        int row = l == TK_ROW_MAJOR;
        int64_t lines = row ? M : N, len = row ? N : M, ldc = tk_lab_ld(len, 1);
        size_t bytes = (size_t)(lines * ldc) * es;
        unsigned char *c = malloc(bytes), *orig = malloc(bytes);
        tk_lab_fill(c, t, (size_t)(lines * ldc), 9);
        memcpy(orig, c, bytes);
        tk_lab_pad_fill(c, t, l, M, N, ldc);
        int64_t r, col, changed_logical = 0, sentinels = 0;
        for (int64_t i = 0; i < lines; i++)
            for (int64_t j = 0; j < ldc; j++) {
                size_t off = (size_t)(i * ldc + j) * es;
                if (j < len) {
                    changed_logical += memcmp(c + off, orig + off, es) != 0;
                } else {
                    uint32_t u = 0;
                    memcpy(&u, c + off, es);
                    sentinels += u == (t == TK_F32 ? TK_LAB_PAD_F32 : TK_LAB_PAD_BF16);
                }
            }
        CHECK(changed_logical == 0, "combo %d: pad_fill changed %lld logical elements", combo,
              (long long)changed_logical);
        CHECK(sentinels == lines * (ldc - len), "combo %d: %lld sentinels, want %lld", combo, (long long)sentinels,
              (long long)(lines * (ldc - len)));
        CHECK(pad_check(c, t, l, M, N, ldc, &r, &col) == 0, "combo %d: untouched padding flagged at (%lld, %lld)",
              combo, (long long)r, (long long)col);
        /* every padding element: a zero and a NaN poison pattern are both caught */
        int missed = 0, misplaced = 0;
        for (int64_t i = 0; i < lines; i++)
            for (int64_t j = len; j < ldc; j++) {
                size_t off = (size_t)(i * ldc + j) * es;
                unsigned char keep[4];
                memcpy(keep, c + off, es);
                for (int v = 0; v < 2; v++) {
                    memset(c + off, v ? 0xff : 0x00, es);
                    int64_t got = pad_check(c, t, l, M, N, ldc, &r, &col);
                    missed += got != 1;
                    misplaced += r != (row ? i : j) || col != (row ? j : i);
                }
                memcpy(c + off, keep, es);
            }
        CHECK(missed == 0 && misplaced == 0, "combo %d: %d planted writes missed, %d misplaced", combo, missed,
              misplaced);
        /* a write inside C is not a padding write */
        memset(c + (size_t)(2 * ldc + 1) * es, 0, es);
        CHECK(pad_check(c, t, l, M, N, ldc, &r, &col) == 0, "combo %d: a write inside C flagged", combo);
        /* several writes: all counted, the first in storage order reported;
         * row-major (3, N+2) and (1, N+7), column-major (M+2, 3) and (M+7, 1) */
        memset(c + (size_t)(3 * ldc + len + 2) * es, 0, es);
        memset(c + (size_t)(1 * ldc + len + 7) * es, 0, es);
        int64_t got = pad_check(c, t, l, M, N, ldc, &r, &col);
        int64_t wr = row ? 1 : M + 7, wc = row ? N + 7 : 1;
        CHECK(got == 2 && r == wr && col == wc, "combo %d: %lld writes, first (%lld, %lld); want 2, (%lld, %lld)",
              combo, (long long)got, (long long)r, (long long)col, (long long)wr, (long long)wc);
        /* tight ldc: no padding, nothing written, nothing to check */
        memcpy(c, orig, bytes);
        tk_lab_pad_fill(c, t, l, M, N, len);
        CHECK(memcmp(c, orig, bytes) == 0, "combo %d: pad_fill wrote with a tight ldc", combo);
        CHECK(pad_check(c, t, l, M, N, len, &r, &col) == 0, "combo %d: tight ldc flagged", combo);
        free(c); free(orig);
    }
}

/* The sentinel is a NaN (no kernel result equals it by accident, and a
 * kernel that reads it as C0 poisons its output visibly) distinct from the
 * all-ones NaN that verify poisons C with. */
static void test_sentinel_values(void)
{
    float f;
    uint32_t u = TK_LAB_PAD_F32;
    memcpy(&f, &u, 4);
    CHECK(isnan(f) && u != 0xffffffffu, "fp32 sentinel %08x", u);
    CHECK(isnan(tk_lab_bf16_to_f32(TK_LAB_PAD_BF16)) && TK_LAB_PAD_BF16 != 0xffff, "bf16 sentinel %04x",
          TK_LAB_PAD_BF16);
}

void tk_tests(void)
{
    TK_TEST(test_padded_ld_every_layout_and_op);
    TK_TEST(test_reference_with_padded_ld);
    TK_TEST(test_sentinel_catches_padding_writes);
    TK_TEST(test_sentinel_values);
}
