/* activation.cuh - the epilogues' activations (tilekit.h, tk_activation)
 * and their derivatives, in fp32, as the formulas of tilekit.h state them:
 *
 *   relu       max(x, 0)                      relu'  x > 0 ? 1 : 0
 *   gelu_erf   0.5 x (1 + erf(x / sqrt 2))    Phi(x) + x phi(x)
 *   gelu_tanh  0.5 x (1 + tanh(u)),           0.5 (1 + t) + 0.5 x (1 - t^2) u'
 *              u = sqrt(2/pi) (x + 0.044715 x^3), t = tanh(u),
 *              u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 *   silu       x s, s = 1 / (1 + exp(-x))     s (1 + x (1 - s))
 *
 * Evaluated in the forms that cost fewest instructions, since the fused
 * kernels run them 128 times a thread, unrolled, on every tile (their
 * length is the epilogue's cost, docs/NOTES.md session 26): the logistic
 * s(x) = 1 / (1 + exp(-x)) from the fast exponential and reciprocal
 * (__expf, __fdividef: about 2 + 1.5 |x| ulps of s, which is where s is
 * not tiny; where it is, x s is far below the tolerance's |x| term), and
 * gelu_tanh through 0.5 (1 + tanh u) = s(2u), so that it is x s(2u) and
 * its derivative s(2u) + 2 x s(2u) (1 - s(2u)) u' (no tanhf, and no
 * cancellation in 1 + t for negative x). erff stays the accurate one
 * (no fast form). The lab's fp64 reference (lab_epi.c) computes the
 * formulas above in double and allows 8 ulps of |act(z)| + |z| for the
 * evaluation (16 ulps of 1 + |x| for the derivatives): these forms stay
 * inside that, and tests/gpu/test_epilogue.c checks them on every kernel.
 * TK_ACT_NONE is the identity (derivative 1). */
#ifndef TK_TILES_ACTIVATION_CUH
#define TK_TILES_ACTIVATION_CUH

#include "tilekit.h"

#define TK_SQRT1_2_F 0.70710678118654752440f       /* 1 / sqrt(2) */
#define TK_INV_SQRT_2PI_F 0.39894228040143267794f  /* 1 / sqrt(2 pi): phi's constant */
#define TK_SQRT_2_PI_F 0.79788456080286535588f     /* sqrt(2 / pi): the tanh form's */
#define TK_GELU_CUBIC_F 0.044715f

static __device__ __forceinline__ float tk_act_sigmoid(float x)
{
    /* exp(-x) overflows to inf for x < -88: the reciprocal of inf is 0, the limit. */
    return __fdividef(1.0f, 1.0f + __expf(-x));
}

/* 2u of gelu_tanh: 2 sqrt(2/pi) (x + 0.044715 x^3) */
static __device__ __forceinline__ float tk_act_gelu_2u(float x)
{
    return 2.0f * TK_SQRT_2_PI_F * (x + TK_GELU_CUBIC_F * x * x * x);
}

/* act(x) */
static __device__ __forceinline__ float tk_act(int act, float x)
{
    switch (act) {
    case TK_ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case TK_ACT_GELU_ERF:
        return 0.5f * x * (1.0f + erff(x * TK_SQRT1_2_F));
    case TK_ACT_GELU_TANH:
        return x * tk_act_sigmoid(tk_act_gelu_2u(x));
    case TK_ACT_SILU:
        return x * tk_act_sigmoid(x);
    default:
        return x;
    }
}

/* act'(x) */
static __device__ __forceinline__ float tk_act_grad(int act, float x)
{
    switch (act) {
    case TK_ACT_RELU:
        return x > 0.0f ? 1.0f : 0.0f;
    case TK_ACT_GELU_ERF:
        return 0.5f * (1.0f + erff(x * TK_SQRT1_2_F)) + x * TK_INV_SQRT_2PI_F * __expf(-0.5f * x * x);
    case TK_ACT_GELU_TANH: {
        float s = tk_act_sigmoid(tk_act_gelu_2u(x));
        float du = TK_SQRT_2_PI_F * (1.0f + 3.0f * TK_GELU_CUBIC_F * x * x);
        return s + 2.0f * x * s * (1.0f - s) * du;
    }
    case TK_ACT_SILU: {
        float s = tk_act_sigmoid(x);
        return s * (1.0f + x * (1.0f - s));
    }
    default:
        return 1.0f;
    }
}

#endif /* TK_TILES_ACTIVATION_CUH */
