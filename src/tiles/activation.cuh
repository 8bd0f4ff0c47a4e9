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
 * With the accurate functions (erff, expf, tanhf), never the fast-math
 * intrinsics: k01_naive is the reference the fast kernels are checked
 * against, and the lab's fp64 reference (lab_epi.c) is the same formulas in
 * double. TK_ACT_NONE is the identity (derivative 1). */
#ifndef TK_TILES_ACTIVATION_CUH
#define TK_TILES_ACTIVATION_CUH

#include "tilekit.h"

#define TK_SQRT1_2_F 0.70710678118654752440f       /* 1 / sqrt(2) */
#define TK_INV_SQRT_2PI_F 0.39894228040143267794f  /* 1 / sqrt(2 pi): phi's constant */
#define TK_SQRT_2_PI_F 0.79788456080286535588f     /* sqrt(2 / pi): the tanh form's */
#define TK_GELU_CUBIC_F 0.044715f

static __device__ __forceinline__ float tk_act_sigmoid(float x)
{
    /* exp(-x) overflows to inf for x < -88: 1 / inf = 0, the limit. */
    return 1.0f / (1.0f + expf(-x));
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
        return 0.5f * x * (1.0f + tanhf(TK_SQRT_2_PI_F * (x + TK_GELU_CUBIC_F * x * x * x)));
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
        return 0.5f * (1.0f + erff(x * TK_SQRT1_2_F)) + x * TK_INV_SQRT_2PI_F * expf(-0.5f * x * x);
    case TK_ACT_GELU_TANH: {
        float t = tanhf(TK_SQRT_2_PI_F * (x + TK_GELU_CUBIC_F * x * x * x));
        float du = TK_SQRT_2_PI_F * (1.0f + 3.0f * TK_GELU_CUBIC_F * x * x);
        return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
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
