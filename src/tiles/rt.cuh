/* rt.cuh - operations on register tiles: zero, swap_layout, mma_AB, mma_ABt.
 *
 * Each operation is a macro that checks the tiles' shapes at compile time
 * and calls a fragment loop whose bounds are those constant shapes.
 */
#ifndef TK_TILES_RT_CUH
#define TK_TILES_RT_CUH

#include "types.cuh"
#include "ptx/mma_sync.cuh"
#include "ptx/movmatrix.cuh"

/* ---- zero ---- */
static __device__ __forceinline__ void tk_zero_frags(tk_frag_c *t, int n)
{
#pragma unroll
    for (int i = 0; i < n; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            t[i].x[e] = 0.0f;
}

/* acc = 0 (an fp32 accumulator tile). */
#define tk_zero(acc) tk_zero_frags(&(acc)[0][0], (int)(sizeof(acc) / sizeof(tk_frag_c)))

/* ---- swap_layout: the same bf16 matrix between row and column layout ----
 * The 8x8 block (rb, cb) of a 16x16 row-layout block is register
 * x[rb + 2*cb] (lane 4g+t: row g, columns 2t..2t+1); in column layout the
 * same 8x8 block must hold, per lane, rows 2t..2t+1 of column g -- the
 * transpose of that register's content -- which movmatrix.trans produces.
 * So column-layout fragment (kb, nb) register r is the transposed row-layout
 * register r + 2*(nb % 2) of block (kb, nb / 2), and back. */
static __device__ __forceinline__ void tk_swap_to_col_frags(tk_frag_b *dst, const tk_frag_a *src, int rt, int ct)
{
#pragma unroll
    for (int i = 0; i < rt; i++)
#pragma unroll
        for (int j = 0; j < ct; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int r = 0; r < 2; r++)
                    dst[i * 2 * ct + 2 * j + h].x[r] = tk_movmatrix_trans(src[i * ct + j].x[r + 2 * h]);
}

static __device__ __forceinline__ void tk_swap_to_row_frags(tk_frag_a *dst, const tk_frag_b *src, int rt, int ct)
{
#pragma unroll
    for (int i = 0; i < rt; i++)
#pragma unroll
        for (int j = 0; j < ct; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int r = 0; r < 2; r++)
                    dst[i * ct + j].x[r + 2 * h] = tk_movmatrix_trans(src[i * 2 * ct + 2 * j + h].x[r]);
}

/* dst (column layout) = src (row layout), same R x C matrix. */
#define tk_swap_layout_to_col(dst, src)                                                                     \
    do {                                                                                                    \
        static_assert(TK_RT_ROWS(dst) == TK_RT_ROWS(src), "swap_layout: tiles must have the same height"); \
        static_assert(TK_RT_COLS_BF_COL(dst) == TK_RT_COLS_BF(src), "swap_layout: tiles must have the same width"); \
        tk_swap_to_col_frags(&(dst)[0][0], &(src)[0][0], TK_RT_ROWS(src) / 16, TK_RT_COLS_BF(src) / 16);   \
    } while (0)

/* dst (row layout) = src (column layout), same R x C matrix. */
#define tk_swap_layout_to_row(dst, src)                                                                     \
    do {                                                                                                    \
        static_assert(TK_RT_ROWS(dst) == TK_RT_ROWS(src), "swap_layout: tiles must have the same height"); \
        static_assert(TK_RT_COLS_BF(dst) == TK_RT_COLS_BF_COL(src), "swap_layout: tiles must have the same width"); \
        tk_swap_to_row_frags(&(dst)[0][0], &(src)[0][0], TK_RT_ROWS(dst) / 16, TK_RT_COLS_BF(dst) / 16);   \
    } while (0)

/* ---- mma ----
 * d = a * b + c over fragment grids: mt x nt accumulator blocks (16x8),
 * kt steps of 16 along K. d and c may be the same tile. */
static __device__ __forceinline__ void tk_mma_AB_frags(tk_frag_c *d, const tk_frag_a *a, const tk_frag_b *b,
                                                       const tk_frag_c *c, int mt, int nt, int kt)
{
#pragma unroll
    for (int k = 0; k < kt; k++)
#pragma unroll
        for (int i = 0; i < mt; i++)
#pragma unroll
            for (int j = 0; j < nt; j++)
                tk_mma_m16n8k16_bf16(d[i * nt + j].x, a[i * kt + k].x, b[k * nt + j].x,
                                     k == 0 ? c[i * nt + j].x : d[i * nt + j].x);
}

/* B^T arrives as a row-layout N x K tile: its 16x16 block (jn, k) holds, in
 * registers {x0, x2} and {x1, x3}, exactly the B fragments of columns
 * jn*16 + 0..7 and jn*16 + 8..15 (layout.h: row g of B^T is column g of B). */
static __device__ __forceinline__ void tk_mma_ABt_frags(tk_frag_c *d, const tk_frag_a *a, const tk_frag_a *bt,
                                                        const tk_frag_c *c, int mt, int nt, int kt)
{
#pragma unroll
    for (int k = 0; k < kt; k++)
#pragma unroll
        for (int i = 0; i < mt; i++)
#pragma unroll
            for (int j = 0; j < nt; j++) {
                const tk_frag_a *blk = &bt[(j / 2) * kt + k];
                uint32_t b[2] = { blk->x[j % 2], blk->x[j % 2 + 2] };
                tk_mma_m16n8k16_bf16(d[i * nt + j].x, a[i * kt + k].x, b, k == 0 ? c[i * nt + j].x : d[i * nt + j].x);
            }
}

/* d = a * b + c: a R x K row layout, b K x C column layout, c and d R x C. */
#define tk_mma_AB(d, a, b, c)                                                                                 \
    do {                                                                                                      \
        static_assert(TK_RT_ROWS(d) == TK_RT_ROWS(a), "mma_AB: D and A must have the same height");          \
        static_assert(TK_RT_COLS_FL(d) == TK_RT_COLS_BF_COL(b), "mma_AB: D and B must have the same width"); \
        static_assert(TK_RT_COLS_BF(a) == TK_RT_ROWS(b), "mma_AB: A's width must equal B's height (K)");     \
        static_assert(sizeof(c) == sizeof(d), "mma_AB: C and D must have the same shape");                    \
        tk_mma_AB_frags(&(d)[0][0], &(a)[0][0], &(b)[0][0], &(c)[0][0], TK_RT_ROWS(d) / 16,                  \
                        TK_RT_COLS_FL(d) / 8, TK_RT_COLS_BF(a) / 16);                                         \
    } while (0)

/* d = a * b^T + c: a R x K row layout, b C x K row layout (B stored N x K). */
#define tk_mma_ABt(d, a, b, c)                                                                                \
    do {                                                                                                      \
        static_assert(TK_RT_ROWS(d) == TK_RT_ROWS(a), "mma_ABt: D and A must have the same height");         \
        static_assert(TK_RT_COLS_FL(d) == TK_RT_ROWS(b), "mma_ABt: D's width must equal B's height (N)");    \
        static_assert(TK_RT_COLS_BF(a) == TK_RT_COLS_BF(b), "mma_ABt: A and B must have the same width (K)"); \
        static_assert(sizeof(c) == sizeof(d), "mma_ABt: C and D must have the same shape");                   \
        tk_mma_ABt_frags(&(d)[0][0], &(a)[0][0], &(b)[0][0], &(c)[0][0], TK_RT_ROWS(d) / 16,                 \
                         TK_RT_COLS_FL(d) / 8, TK_RT_COLS_BF(a) / 16);                                        \
    } while (0)

#endif /* TK_TILES_RT_CUH */
