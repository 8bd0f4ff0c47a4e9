/* test_lab_fp8.c - the lab's FP8 reference (lab_num.c, issue 40): the OCP
 * E4M3 and E5M2 codes decoded (fixed points of each format, every code
 * against the field formula), every finite code encoded back to itself,
 * ties to even at every midpoint between neighbours, overflow with and
 * without satfinite, underflow to signed zero, NaN and infinities. */
#include <math.h>
#include <string.h>
#include "lab/lab.h"
#include "check.h"

static const char *fmt_name(tk_lab_fp8 f) { return f == TK_LAB_E4M3 ? "e4m3" : "e5m2"; }

/* Codes worked out by hand from the formats' definitions. */
static void test_decode_fixed_points(void)
{
    static const struct { tk_lab_fp8 f; uint8_t v; double want; } t[] = {
        { TK_LAB_E4M3, 0x00, 0.0 },     { TK_LAB_E4M3, 0x38, 1.0 },          { TK_LAB_E4M3, 0xB8, -1.0 },
        { TK_LAB_E4M3, 0x01, 0x1p-9 },  { TK_LAB_E4M3, 0x07, 7 * 0x1p-9 },   { TK_LAB_E4M3, 0x08, 0x1p-6 },
        { TK_LAB_E4M3, 0x7E, 448.0 },   { TK_LAB_E4M3, 0xFE, -448.0 },       { TK_LAB_E4M3, 0x3C, 1.5 },
        { TK_LAB_E4M3, 0x78, 256.0 },   { TK_LAB_E5M2, 0x3C, 1.0 },          { TK_LAB_E5M2, 0x01, 0x1p-16 },
        { TK_LAB_E5M2, 0x04, 0x1p-14 }, { TK_LAB_E5M2, 0x7B, 57344.0 },      { TK_LAB_E5M2, 0xBD, -1.25 },
        { TK_LAB_E5M2, 0x7C, INFINITY }, { TK_LAB_E5M2, 0xFC, -INFINITY },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const double got = tk_lab_fp8_decode(t[i].v, t[i].f);
        CHECK(got == t[i].want, "%s 0x%02X: %.17g (expected %.17g)", fmt_name(t[i].f), t[i].v, got, t[i].want);
    }
    CHECK(signbit(tk_lab_fp8_decode(0x80, TK_LAB_E4M3)) && tk_lab_fp8_decode(0x80, TK_LAB_E4M3) == 0.0, "e4m3 -0");
    static const uint8_t nan_e4m3[] = { 0x7F, 0xFF }, nan_e5m2[] = { 0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF };
    for (size_t i = 0; i < sizeof nan_e4m3; i++)
        CHECK(isnan(tk_lab_fp8_decode(nan_e4m3[i], TK_LAB_E4M3)), "e4m3 0x%02X is not NaN", nan_e4m3[i]);
    for (size_t i = 0; i < sizeof nan_e5m2; i++)
        CHECK(isnan(tk_lab_fp8_decode(nan_e5m2[i], TK_LAB_E5M2)), "e5m2 0x%02X is not NaN", nan_e5m2[i]);
}

/* Every code: NaN exactly for the NaN codes; the others strictly
 * increasing in magnitude with the code, so no two codes share a value. */
static int is_nan_code(uint8_t v, tk_lab_fp8 f)
{
    return f == TK_LAB_E4M3 ? (v & 0x7F) == 0x7F : (v & 0x7F) > 0x7C;
}

static void test_every_code(void)
{
    for (int f = TK_LAB_E4M3; f <= TK_LAB_E5M2; f++) {
        double prev = -1.0;
        for (int v = 0; v < 128; v++) {
            const double x = tk_lab_fp8_decode((uint8_t)v, (tk_lab_fp8)f);
            const double nx = tk_lab_fp8_decode((uint8_t)(v | 0x80), (tk_lab_fp8)f);
            if (is_nan_code((uint8_t)v, (tk_lab_fp8)f)) {
                CHECK(isnan(x) && isnan(nx), "%s 0x%02X should be NaN", fmt_name(f), v);
                continue;
            }
            CHECK(x > prev && nx == -x, "%s 0x%02X: %.17g after %.17g (negative %.17g)", fmt_name(f), v, x, prev, nx);
            prev = x;
            /* each finite (and infinite) code encodes back to itself, both signs */
            const int sat = isinf(x) ? 0 : 1;
            CHECK(tk_lab_fp8_encode(x, (tk_lab_fp8)f, sat) == v, "%s: encode(%.17g) = 0x%02X (expected 0x%02X)",
                  fmt_name(f), x, tk_lab_fp8_encode(x, (tk_lab_fp8)f, sat), v);
            CHECK(tk_lab_fp8_encode(nx, (tk_lab_fp8)f, sat) == (v | 0x80), "%s: encode(%.17g) = 0x%02X", fmt_name(f),
                  nx, tk_lab_fp8_encode(nx, (tk_lab_fp8)f, sat));
        }
    }
}

/* Between neighbours a < b: the midpoint goes to the even code, a hair
 * either side to the nearer one. */
static void test_ties_to_even(void)
{
    for (int f = TK_LAB_E4M3; f <= TK_LAB_E5M2; f++) {
        for (int v = 0; v < 127; v++) {
            if (is_nan_code((uint8_t)(v + 1), (tk_lab_fp8)f) || isinf(tk_lab_fp8_decode((uint8_t)(v + 1), f)))
                break;
            const double a = tk_lab_fp8_decode((uint8_t)v, (tk_lab_fp8)f);
            const double b = tk_lab_fp8_decode((uint8_t)(v + 1), (tk_lab_fp8)f);
            const double mid = (a + b) / 2, eps = (b - a) / 1024;
            const int even = v % 2 == 0 ? v : v + 1;
            CHECK(tk_lab_fp8_encode(mid, (tk_lab_fp8)f, 1) == even, "%s midpoint %.17g of 0x%02X, 0x%02X: 0x%02X",
                  fmt_name(f), mid, v, v + 1, tk_lab_fp8_encode(mid, (tk_lab_fp8)f, 1));
            CHECK(tk_lab_fp8_encode(mid - eps, (tk_lab_fp8)f, 1) == v &&
                      tk_lab_fp8_encode(mid + eps, (tk_lab_fp8)f, 1) == v + 1,
                  "%s around %.17g: 0x%02X, 0x%02X", fmt_name(f), mid, tk_lab_fp8_encode(mid - eps, f, 1),
                  tk_lab_fp8_encode(mid + eps, f, 1));
        }
    }
}

/* Past the largest finite: E4M3 448 (the next step, 480, is NaN's code):
 * up to 464 (a tie, to 448's even code) rounds down; beyond, satfinite
 * clamps and the plain conversion gives NaN. E5M2 57344: from 61440 (the
 * tie goes to 65536, even) it overflows to infinity. NaN stays NaN;
 * infinities clamp with satfinite. */
static void test_overflow_nan_inf(void)
{
    CHECK(tk_lab_fp8_encode(464.0, TK_LAB_E4M3, 0) == 0x7E, "e4m3 464");
    CHECK(tk_lab_fp8_encode(464.5, TK_LAB_E4M3, 0) == 0x7F && tk_lab_fp8_encode(464.5, TK_LAB_E4M3, 1) == 0x7E,
          "e4m3 464.5");
    CHECK(tk_lab_fp8_encode(-1e30, TK_LAB_E4M3, 1) == 0xFE && tk_lab_fp8_encode(-1e30, TK_LAB_E4M3, 0) == 0xFF,
          "e4m3 -1e30");
    CHECK(tk_lab_fp8_encode(61439.0, TK_LAB_E5M2, 0) == 0x7B, "e5m2 61439");
    CHECK(tk_lab_fp8_encode(61440.0, TK_LAB_E5M2, 0) == 0x7C && tk_lab_fp8_encode(61440.0, TK_LAB_E5M2, 1) == 0x7B,
          "e5m2 61440");
    CHECK(tk_lab_fp8_encode(-INFINITY, TK_LAB_E5M2, 0) == 0xFC && tk_lab_fp8_encode(INFINITY, TK_LAB_E5M2, 1) == 0x7B,
          "e5m2 infinities");
    CHECK(tk_lab_fp8_encode(INFINITY, TK_LAB_E4M3, 1) == 0x7E && tk_lab_fp8_encode(INFINITY, TK_LAB_E4M3, 0) == 0x7F,
          "e4m3 infinity");
    for (int f = TK_LAB_E4M3; f <= TK_LAB_E5M2; f++)
        for (int sat = 0; sat < 2; sat++)
            CHECK(is_nan_code(tk_lab_fp8_encode(NAN, (tk_lab_fp8)f, sat), (tk_lab_fp8)f), "%s NaN", fmt_name(f));
}

/* Below half the smallest subnormal: zero of x's sign; the half itself a
 * tie to zero (even); a hair above it the smallest subnormal. */
static void test_underflow(void)
{
    for (int f = TK_LAB_E4M3; f <= TK_LAB_E5M2; f++) {
        const double tiny = tk_lab_fp8_decode(0x01, (tk_lab_fp8)f);
        CHECK(tk_lab_fp8_encode(tiny / 2, (tk_lab_fp8)f, 1) == 0x00, "%s half the least subnormal", fmt_name(f));
        CHECK(tk_lab_fp8_encode(-tiny / 2, (tk_lab_fp8)f, 1) == 0x80, "%s -half: -0", fmt_name(f));
        CHECK(tk_lab_fp8_encode(tiny * 0.51, (tk_lab_fp8)f, 1) == 0x01, "%s 0.51 of the least", fmt_name(f));
        CHECK(tk_lab_fp8_encode(-1e-300, (tk_lab_fp8)f, 0) == 0x80 && tk_lab_fp8_encode(0.0, (tk_lab_fp8)f, 0) == 0,
              "%s tiny", fmt_name(f));
    }
}

void tk_tests(void)
{
    TK_TEST(test_decode_fixed_points);
    TK_TEST(test_every_code);
    TK_TEST(test_ties_to_even);
    TK_TEST(test_overflow_nan_inf);
    TK_TEST(test_underflow);
}
