/* rg.cuh - register -> global: an fp32 accumulator tile into C with
 * C = alpha * acc + beta * C (C read only when beta != 0), fp32 or bf16 C,
 * bounds-checked element by element at the matrix edges.
 *
 *   tk_store_g(out, acc, trow, tcol, alpha, beta)
 *
 * The tile lands at rows trow*R .., columns tcol*C .. of out, R x C being
 * the accumulator's shape (tile units, like the loads). Each lane owns
 * column pairs (layout.h tk_frag_c_*): a pair inside C is stored as one
 * vector when out.pairs allows it, otherwise element by element.
 */
#ifndef TK_TILES_RG_CUH
#define TK_TILES_RG_CUH

#include "types.cuh"
#include "ids.cuh"
#include "epilogue.cuh"

static __device__ __forceinline__ void tk_stg_fl_frags(tk_gl_out o, const tk_frag_c *r, int rt, int ct, int64_t r0,
                                                       int64_t c0, float alpha, float beta)
{
    const int lane = tk_laneid();
#pragma unroll
    for (int i = 0; i < rt; i++)
#pragma unroll
        for (int j = 0; j < ct; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int64_t row = r0 + 16 * i + tk_frag_c_row(lane, 2 * h);
                int64_t col = c0 + 8 * j + tk_frag_c_col(lane, 0);
                if (row >= o.rows || col >= o.cols)
                    continue;
                float v0 = r[i * ct + j].x[2 * h], v1 = r[i * ct + j].x[2 * h + 1];
                int64_t idx = row * o.ld + col;
                if (col + 1 < o.cols && o.pairs) {
                    tk_epilogue_store2(o.p, idx, o.type, v0, v1, alpha, beta);
                } else {
                    tk_epilogue_store(o.p, idx, o.type, v0, alpha, beta);
                    if (col + 1 < o.cols)
                        tk_epilogue_store(o.p, idx + 1, o.type, v1, alpha, beta);
                }
            }
}

#define tk_store_g(out, acc, trow, tcol, alpha, beta)                                                      \
    tk_stg_fl_frags(out, &(acc)[0][0], TK_RT_ROWS(acc) / 16, TK_RT_COLS_FL(acc) / 8,                       \
                    (int64_t)(trow) * TK_RT_ROWS(acc), (int64_t)(tcol) * TK_RT_COLS_FL(acc), alpha, beta)

#endif /* TK_TILES_RG_CUH */
