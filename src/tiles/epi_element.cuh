/* epi_element.cuh - one element of a fused epilogue (tilekit.h,
 * tk_epilogue_kind) in fp32, each step rounded as written: the one copy of
 * the formulas that k01_naive (the reference), k20/k21 and k30 evaluate,
 * so every kernel makes the same bits from the same product. __fmul_rn and
 * __fadd_rn are never contracted into an fma. The activations themselves
 * are activation.cuh's; the residual D = v + beta * C is fmaf(beta, C, v),
 * as tk_epilogue_store adds it. */
#ifndef TK_TILES_EPI_ELEMENT_CUH
#define TK_TILES_EPI_ELEMENT_CUH

#include <stdint.h>
#include "activation.cuh"
#include "epilogue.cuh"

/* Element `at` of a bias vector, bf16 or fp32. */
static __device__ __forceinline__ float tk_epi_bias_at(const void *bias, int bf16, int64_t at)
{
    return bf16 ? tk_bf16_to_f32(((const uint16_t *)bias)[at]) : ((const float *)bias)[at];
}

/* z = P + bias, P = alpha * acc. (k01_naive and k30 write these two
 * operations out in place, in the order here: so their machine code
 * stayed as it was when the rest moved here.) */
static __device__ __forceinline__ float tk_epi_z(float alpha, float acc, float bias)
{
    return __fadd_rn(__fmul_rn(alpha, acc), bias);
}

/* TK_EPI_BACKWARD: P act'(z), z the forward's (aux). */
static __device__ __forceinline__ float tk_epi_backward(int act, float P, float z)
{
    return __fmul_rn(P, tk_act_grad(act, z));
}

/* TK_EPI_GATED: act(z_gate) z_up. */
static __device__ __forceinline__ float tk_epi_gated(int act, float zg, float zu)
{
    return __fmul_rn(tk_act(act, zg), zu);
}

/* TK_EPI_GATED_BACKWARD from P, the gradient of the gated output: the
 * gate half's gradient P z_up act'(z_gate), and the up half's P act(z_gate). */
static __device__ __forceinline__ float tk_epi_dgate(int act, float P, float zg, float zu)
{
    return __fmul_rn(__fmul_rn(P, zu), tk_act_grad(act, zg));
}

static __device__ __forceinline__ float tk_epi_dup(int act, float P, float zg)
{
    return __fmul_rn(P, tk_act(act, zg));
}

#endif /* TK_TILES_EPI_ELEMENT_CUH */
