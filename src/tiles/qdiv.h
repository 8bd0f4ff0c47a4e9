/* qdiv.h - the FP8 quantizer's division fl32(x / s) as a product and one
 * correction, in plain C so that the CPU test (tests/host/test_quantize.c)
 * runs the same formula as the kernels (src/kernels/quantize.cu).
 *
 * With r = fl32(1 / s) (IEEE, once per group), a code's quotient is
 *   q = fl32(x * r);  e = fma(q, s, -x);  fl32(fma(-r, e, q))
 * three instructions instead of __fdiv_rn's seven and a branch (MUFU.RCP,
 * FCHK, five FFMA). This is Markstein's correction step: r within half an
 * ulp of 1 / s makes q within one ulp of x / s, then e = q s - x is exact
 * (fma) and q - r e rounds to fl32(x / s), as long as nothing underflows.
 * Written as fma(-r, e, q) with e = q s - x (not fma(r, x - q s, q)), so
 * that x = -0 gives -0: q = -0, e = +0, -r * +0 + -0 = -0.
 *
 * Where it holds: s = fl32(amax / fmax) of a group (fmax 448 or 57344) with
 * TK_QDIV_MIN <= s <= TK_QDIV_MAX, and x any bf16 with |x| <= amax (a
 * group's values; no NaN or infinity there, else s would not be finite).
 * Then the result is fl32(x / s) bit for bit wherever |x / s| >= 2^-20,
 * and below that both are under half of E5M2's least subnormal (2^-17),
 * with x's sign, so both give the same code (the zero of that sign). Why
 * the bound: x under 2^-100 (which makes e inexact: the residual falls
 * below fp32's normal range) then has |x / s| < 2^-100 / 2^-64; x above it
 * keeps e exact. Checked on every pair (every amax of both formats, every
 * x of either sign up to it: 1.9e9 pairs) in session 30; the CPU test
 * repeats it on each amax's top binades, the 2^-100 edge and the
 * subnormals. A group outside the range (tiny amax, or a NaN or infinite
 * scale) keeps __fdiv_rn. TK_QDIV_MAX only keeps r normal: finite bf16
 * scales stay under 2^120.
 *
 * The host side needs C's fp contraction off (ISO C mode, as -std=c11
 * gives), so that x * r is rounded on its own. */
#ifndef TK_TILES_QDIV_H
#define TK_TILES_QDIV_H

#include <math.h>
#include "layout.h"   /* TK_HD */

#define TK_QDIV_MIN 0x1p-64f
#define TK_QDIV_MAX 0x1p126f

static inline TK_HD int tk_qdiv_fits(float s) { return s >= TK_QDIV_MIN && s <= TK_QDIV_MAX; }

/* fl32(1 / s), IEEE. */
static inline TK_HD float tk_qdiv_recip(float s)
{
#ifdef __CUDA_ARCH__
    return __frcp_rn(s);
#else
    return 1.0f / s;
#endif
}

/* fl32(x / s) (above), r = tk_qdiv_recip(s). */
static inline TK_HD float tk_qdiv(float x, float s, float r)
{
#ifdef __CUDA_ARCH__
    const float q = __fmul_rn(x, r), e = __fmaf_rn(q, s, -x);
    return __fmaf_rn(-r, e, q);
#else
    const float q = x * r, e = fmaf(q, s, -x);
    return fmaf(-r, e, q);
#endif
}

#endif /* TK_TILES_QDIV_H */
