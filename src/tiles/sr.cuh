/* sr.cuh - shared <-> register moves of one warp.
 *
 * shared -> register with ldmatrix.x4, one 16x16 block per instruction:
 *   tk_load_rt(reg, view)      row layout (A, or B stored N x K for mma_ABt)
 *   tk_load_rt_col(reg, view)  column layout via ldmatrix.trans (B stored
 *                              K x N for mma_AB)
 * register -> shared:
 *   tk_store_rt(view, reg)     a row-layout bf16 tile
 *   tk_store_rt_fl(view, acc)  an fp32 accumulator, rounded to bf16
 * `view` is TK_TILE(st) or TK_SUBTILE(st, R, C, i, j) (types.cuh); its shape
 * must equal the register tile's, checked at compile time.
 */
#ifndef TK_TILES_SR_CUH
#define TK_TILES_SR_CUH

#include <cuda_bf16.h>
#include "types.cuh"
#include "ids.cuh"
#include "ptx/common.cuh"
#include "ptx/ldmatrix.cuh"

/* rt x ct blocks of 16x16 starting at `origin` (pitch in elements). */
static __device__ __forceinline__ void tk_ldsm_row_frags(tk_frag_a *r, const uint16_t *origin, int pitch, int rt,
                                                         int ct)
{
    const int lane = tk_laneid();
    const uint32_t base = tk_smem_u32(origin + tk_st_offset(tk_ldsm_row(lane), tk_ldsm_col(lane), pitch));
#pragma unroll
    for (int i = 0; i < rt; i++)
#pragma unroll
        for (int j = 0; j < ct; j++)
            tk_ldmatrix_x4(r[i * ct + j].x, base + 2u * (uint32_t)tk_st_offset(16 * i, 16 * j, pitch));
}

/* The same addresses with .trans: registers {0, 1} are the B fragment of
 * block columns 0-7, {2, 3} of columns 8-15 (layout.h). */
static __device__ __forceinline__ void tk_ldsm_col_frags(tk_frag_b *r, const uint16_t *origin, int pitch, int rt,
                                                         int ct)
{
    const int lane = tk_laneid();
    const uint32_t base = tk_smem_u32(origin + tk_st_offset(tk_ldsm_row(lane), tk_ldsm_col(lane), pitch));
#pragma unroll
    for (int i = 0; i < rt; i++)
#pragma unroll
        for (int j = 0; j < ct; j++) {
            uint32_t x[4];
            tk_ldmatrix_x4_trans(x, base + 2u * (uint32_t)tk_st_offset(16 * i, 16 * j, pitch));
            r[i * 2 * ct + 2 * j].x[0] = x[0];
            r[i * 2 * ct + 2 * j].x[1] = x[1];
            r[i * 2 * ct + 2 * j + 1].x[0] = x[2];
            r[i * 2 * ct + 2 * j + 1].x[1] = x[3];
        }
}

#define TK_SR_SHAPE_CHECK_(what, rrows, rcols, st, R, C)                                                  \
    TK_VIEW_CHECK_(st, R, C);                                                                             \
    static_assert((rrows) == (R), what ": register tile and shared tile must match height");              \
    static_assert((rcols) == (C), what ": register tile and shared tile must match width")

#define TK_LOAD_RT_(reg, st, R, C, i, j)                                                                  \
    do {                                                                                                  \
        TK_SR_SHAPE_CHECK_("load", TK_RT_ROWS(reg), TK_RT_COLS_BF(reg), st, R, C);                        \
        tk_ldsm_row_frags(&(reg)[0][0], TK_VIEW_PTR_(st, R, C, i, j), TK_ST_PITCH(st), (R) / 16, (C) / 16); \
    } while (0)
#define tk_load_rt(reg, view) TK_LOAD_RT_(reg, view)

#define TK_LOAD_RT_COL_(reg, st, R, C, i, j)                                                              \
    do {                                                                                                  \
        TK_SR_SHAPE_CHECK_("load", TK_RT_ROWS(reg), TK_RT_COLS_BF_COL(reg), st, R, C);                    \
        tk_ldsm_col_frags(&(reg)[0][0], TK_VIEW_PTR_(st, R, C, i, j), TK_ST_PITCH(st), (R) / 16, (C) / 16); \
    } while (0)
#define tk_load_rt_col(reg, view) TK_LOAD_RT_COL_(reg, view)

/* ---- register -> shared ----
 * Each lane writes the 32-bit pairs it owns (layout.h fragment maps); the
 * rows a warp writes at once are 8 rows at one column pair, conflict-free
 * with the padded pitch. */
static __device__ __forceinline__ void tk_sts_row_frags(uint16_t *origin, int pitch, const tk_frag_a *r, int rt,
                                                        int ct)
{
    const int lane = tk_laneid();
#pragma unroll
    for (int i = 0; i < rt; i++)
#pragma unroll
        for (int j = 0; j < ct; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                int row = 16 * i + tk_frag_a_row(lane, q), col = 16 * j + tk_frag_a_col(lane, q, 0);
                *(uint32_t *)(origin + tk_st_offset(row, col, pitch)) = r[i * ct + j].x[q];
            }
}

static __device__ __forceinline__ void tk_sts_fl_frags(uint16_t *origin, int pitch, const tk_frag_c *r, int rt,
                                                       int ct)
{
    const int lane = tk_laneid();
#pragma unroll
    for (int i = 0; i < rt; i++)
#pragma unroll
        for (int j = 0; j < ct; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int row = 16 * i + tk_frag_c_row(lane, 2 * h), col = 8 * j + tk_frag_c_col(lane, 0);
                __nv_bfloat162 v = __floats2bfloat162_rn(r[i * ct + j].x[2 * h], r[i * ct + j].x[2 * h + 1]);
                *(__nv_bfloat162 *)(origin + tk_st_offset(row, col, pitch)) = v;
            }
}

#define TK_STORE_RT_(reg, st, R, C, i, j)                                                                 \
    do {                                                                                                  \
        TK_SR_SHAPE_CHECK_("store", TK_RT_ROWS(reg), TK_RT_COLS_BF(reg), st, R, C);                       \
        tk_sts_row_frags(TK_VIEW_PTR_(st, R, C, i, j), TK_ST_PITCH(st), &(reg)[0][0], (R) / 16, (C) / 16); \
    } while (0)
#define tk_store_rt(view, reg) TK_STORE_RT_(reg, view)

#define TK_STORE_RT_FL_(reg, st, R, C, i, j)                                                              \
    do {                                                                                                  \
        TK_SR_SHAPE_CHECK_("store", TK_RT_ROWS(reg), TK_RT_COLS_FL(reg), st, R, C);                       \
        tk_sts_fl_frags(TK_VIEW_PTR_(st, R, C, i, j), TK_ST_PITCH(st), &(reg)[0][0], (R) / 16, (C) / 8);  \
    } while (0)
#define tk_store_rt_fl(view, acc) TK_STORE_RT_FL_(acc, view)

#endif /* TK_TILES_SR_CUH */
