/* epi_formula.cuh - tilekit.h's fused-epilogue formulas (tk_epilogue_kind)
 * in fp32: the one copy that every kernel with fused epilogues applies,
 * so all of them make the same bits from the same product. Two levels:
 * - values: z = P + bias, act(z_gate) z_up, P act'(z) and the gated
 *   backward's two halves, from the fp32 product P = alpha * acc of one
 *   element, for tile epilogues that load their operands themselves (in
 *   pairs, from registers: k20_core.cuh's k20_epi_pass, k30_core.cuh's
 *   k30_epi_*);
 * - elements: the same formulas read from and stored to tk_epi_args at
 *   (i, col) of the row-major M x N product (kernel.h: tk_epi_args is as
 *   the public fields are), for kernels that finish one element at a
 *   time (k01_naive, the reference; k40_skinny after its fixed-order
 *   split-K sum).
 *
 * P, z and the products are rounded as written (__fmul_rn, __fadd_rn are
 * never contracted into an fma). The activations are activation.cuh's;
 * the residual D = v + beta * C is fmaf(beta, C, v), as tk_epilogue_store
 * adds it. */
#ifndef TK_TILES_EPI_FORMULA_CUH
#define TK_TILES_EPI_FORMULA_CUH

#include "lib/kernel.h"
#include "tiles/epilogue.cuh"
#include "tiles/activation.cuh"

/* ---- values ---- */

/* Element `at` of a bias vector, bf16 or fp32. */
static __device__ __forceinline__ float tk_epi_bias_at(const void *bias, int bf16, int64_t at)
{
    return bf16 ? tk_bf16_to_f32(((const uint16_t *)bias)[at]) : ((const float *)bias)[at];
}

/* z = P + bias. */
static __device__ __forceinline__ float tk_epi_z(float P, float bias)
{
    return __fadd_rn(P, bias);
}

/* TK_EPI_GATED: act(z_gate) z_up. */
static __device__ __forceinline__ float tk_epi_glu(int act, float zg, float zu)
{
    return __fmul_rn(tk_act(act, zg), zu);
}

/* TK_EPI_BACKWARD: P act'(z), z the forward's (aux). */
static __device__ __forceinline__ float tk_epi_dact(int act, float P, float z)
{
    return __fmul_rn(P, tk_act_grad(act, z));
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

/* ---- elements (i, col) of tk_epi_args ---- */

/* bias for column col of z in row i (0 without one). */
static __device__ __forceinline__ float tk_epi_bias(const tk_epi_args *e, int64_t i, int64_t col)
{
    if (!e->bias)
        return 0.0f;
    return tk_epi_bias_at(e->bias, e->bias_bf16, e->bias_rows ? i : col);
}

/* aux's element (i, col) as fp32. */
static __device__ __forceinline__ float tk_epi_aux(const tk_epi_args *e, int64_t i, int64_t col)
{
    return tk_bf16_to_f32(((const uint16_t *)e->aux)[i * e->ldaux + col]);
}

/* v + beta * R(i, j), the residual R (c, ldc, c_type) read only when beta
 * != 0 (an R of NaN poison with beta == 0 gives a clean D), as
 * tk_epilogue_store adds it. */
static __device__ __forceinline__ float tk_epi_residual(const void *c, int64_t ldc, tk_dtype c_type, float beta,
                                                        int64_t i, int64_t j, float v)
{
    if (beta == 0.0f)
        return v;
    int64_t at = i * ldc + j;
    float r = c_type == TK_F32 ? ((const float *)c)[at] : tk_bf16_to_f32(((const uint16_t *)c)[at]);
    return fmaf(beta, r, v);
}

/* TK_EPI_BIAS_ACT before the residual: z = P + bias, stored to aux (bf16)
 * with store_aux where aux is set; act(z). */
static __device__ __forceinline__ float tk_epi_bias_act(const tk_epi_args *e, float P, int64_t i, int64_t j,
                                                        int store_aux)
{
    float z = tk_epi_z(P, tk_epi_bias(e, i, j));
    if (store_aux && e->aux)
        ((uint16_t *)e->aux)[i * e->ldaux + j] = tk_f32_to_bf16(z);
    return tk_act(e->act, z);
}

/* TK_EPI_GATED before the residual, output column j < half (N / 2): z_gate
 * = Pg + bias[j], z_up = Pu + bias[half + j] (both stored to aux with
 * store_aux where it is set); act(z_gate) * z_up. */
static __device__ __forceinline__ float tk_epi_gated(const tk_epi_args *e, float Pg, float Pu, int64_t i, int64_t j,
                                                     int64_t half, int store_aux)
{
    float zg = tk_epi_z(Pg, tk_epi_bias(e, i, j));
    float zu = tk_epi_z(Pu, tk_epi_bias(e, i, half + j));
    if (store_aux && e->aux) {
        uint16_t *aux = (uint16_t *)e->aux;
        aux[i * e->ldaux + j] = tk_f32_to_bf16(zg);
        aux[i * e->ldaux + half + j] = tk_f32_to_bf16(zu);
    }
    return tk_epi_glu(e->act, zg, zu);
}

/* TK_EPI_BACKWARD before the residual: P * act'(aux). */
static __device__ __forceinline__ float tk_epi_backward(const tk_epi_args *e, float P, int64_t i, int64_t j)
{
    return tk_epi_dact(e->act, P, tk_epi_aux(e, i, j));
}

/* TK_EPI_GATED_BACKWARD's column jn (upper 0) or N + jn (upper 1) of row i
 * from P = P[i, jn]: P * z_up * act'(z_gate), or P * act(z_gate) (N =
 * out_cols / 2; beta is 0). z_up is read before the activation's e->act:
 * the order k40_skinny's machine code was measured in (sass_compare). */
static __device__ __forceinline__ float tk_epi_gated_grad(const tk_epi_args *e, float P, int64_t i, int64_t jn,
                                                          int upper)
{
    float zg = tk_epi_aux(e, i, jn);
    if (upper)
        return tk_epi_dup(e->act, P, zg);
    float zu = tk_epi_aux(e, i, e->out_cols / 2 + jn);
    return tk_epi_dgate(e->act, P, zg, zu);
}

/* D's element (i, j) = v, rounded once to c_type. */
static __device__ __forceinline__ void tk_epi_store_d(const tk_epi_args *e, tk_dtype c_type, int64_t i, int64_t j,
                                                      float v)
{
    if (c_type == TK_F32)
        ((float *)e->d)[i * e->ldd + j] = v;
    else
        ((uint16_t *)e->d)[i * e->ldd + j] = tk_f32_to_bf16(v);
}

#endif /* TK_TILES_EPI_FORMULA_CUH */
