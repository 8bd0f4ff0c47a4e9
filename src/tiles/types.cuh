/* types.cuh - the tile vocabulary: global views, shared tiles and their
 * sub-tile views, the shared-memory layout, and register tiles.
 *
 * Shapes are compile-time constants. C has no templates, so a tile's shape
 * lives in its declaration (array extents) and is read back with sizeof by
 * the TK_*_ROWS/COLS macros; every primitive is a macro that static_asserts
 * the shapes it is given (the seeds' "register tile and shared tile must
 * match height" is such a check) and then calls a typed
 * `static __device__ __forceinline__` function with the shape as constant
 * arguments, which the compiler fully unrolls so register arrays are only
 * ever indexed by constants.
 */
#ifndef TK_TILES_TYPES_CUH
#define TK_TILES_TYPES_CUH

#include <stdint.h>
#include "tilekit.h"
#include "layout.h"

/* ---- global views ----
 * A row-major bf16 matrix in global memory: element (r, c) is p[r*ld + c].
 * Tile-unit coordinates (the seeds' {0, 0, row, col}) are given to the load
 * primitives, which multiply them by the shape of the destination tile. */
typedef struct tk_gl {
    const uint16_t *p;
    int64_t rows, cols, ld;
} tk_gl;

/* The output matrix C (fp32 or bf16). `pairs` is set when two neighbouring
 * elements at an even column can be stored as one aligned vector (ld even
 * and p aligned to two elements): the epilogue then stores pairs. */
typedef struct tk_gl_out {
    void *p;
    int64_t rows, cols, ld;
    tk_dtype type;
    int pairs;
} tk_gl_out;

static inline __host__ __device__ tk_gl tk_gl_make(const void *p, int64_t rows, int64_t cols, int64_t ld)
{
    tk_gl g = { (const uint16_t *)p, rows, cols, ld };
    return g;
}

static inline __host__ __device__ tk_gl_out tk_gl_out_make(void *p, int64_t rows, int64_t cols, int64_t ld,
                                                           tk_dtype type)
{
    size_t pair_bytes = type == TK_F32 ? 8 : 4;
    tk_gl_out g = { p, rows, cols, ld, type, ld % 2 == 0 && (uintptr_t)p % pair_bytes == 0 };
    return g;
}

/* ---- shared tiles ----
 * TK_ST_BF declares an R x C bf16 tile with padded rows (layout.h says why
 * padding), 16-byte aligned, as a member of a kernel's shared-memory layout
 * struct. `name` may carry array extents: TK_ST_BF(As[2], 64, 32) is a pair
 * of 64 x 32 tiles (the seeds' tic/toc buffers). */
#define TK_ST_BF(name, R, C)                                                                      \
    static_assert((R) % 16 == 0 && (C) % 16 == 0,                                                 \
                  "shared tile " #name ": rows and cols must be multiples of 16 (ldmatrix blocks; " \
                  "the padding is conflict-free only for such widths)");                          \
    __align__(16) uint16_t name[R][(C) + TK_ST_PAD]

#define TK_ST_ROWS(st) ((int)(sizeof(st) / sizeof((st)[0])))
#define TK_ST_PITCH(st) ((int)(sizeof((st)[0]) / sizeof((st)[0][0])))
#define TK_ST_COLS(st) (TK_ST_PITCH(st) - TK_ST_PAD)

/* Sub-tile views (the seeds' subtile_inplace). A view is written as the five
 * macro arguments every shared-tile primitive takes -- (tile, rows, cols,
 * i, j): the rows x cols sub-tile (i, j) of tile, counted in sub-tile units --
 * because without templates a view cannot carry its shape in a type. The
 * primitives static_assert that the sub-tile shape divides the tile. */
#define TK_SUBTILE(st, R, C, i, j) st, R, C, i, j
#define TK_TILE(st) st, TK_ST_ROWS(st), TK_ST_COLS(st), 0, 0

/* Checks shared by the primitives that take a view. */
#define TK_VIEW_CHECK_(st, R, C)                                                                     \
    static_assert(TK_ST_ROWS(st) % (R) == 0, "sub-tile height must divide the shared tile's height"); \
    static_assert(TK_ST_COLS(st) % (C) == 0, "sub-tile width must divide the shared tile's width")

/* Element (0, 0) of view (st, R, C, i, j) and its pitch in elements. */
#define TK_VIEW_PTR_(st, R, C, i, j) (&(st)[(i) * (R)][(j) * (C)])

/* ---- the shared-memory layout ----
 * A kernel describes its dynamic shared memory as a struct of TK_ST_BF
 * members; the compiler computes every offset, TK_SMEM_CHECK bounds the total
 * (sizeof, which the launcher passes as the dynamic size and resources()
 * reports), and TK_SMEM gives the block's instance. */
#define TK_SMEM_MAX_BYTES (227 * 1024)   /* the largest opt-in of any target (sm_90) */
#define TK_SMEM_CHECK(type)                                                                  \
    static_assert(sizeof(type) <= TK_SMEM_MAX_BYTES, #type ": shared memory exceeds 227 KB"); \
    static_assert(sizeof(type) % 16 == 0, #type ": size must be a multiple of 16 bytes")

extern __shared__ __align__(16) unsigned char tk_dyn_smem[];
#define TK_SMEM(type) ((type *)tk_dyn_smem)

/* ---- register tiles ----
 * Built from mma.sync m16n8k16 fragments (layout.h gives the lane -> element
 * maps), as 2-D arrays of fragments indexed [block row][block col]:
 *  - TK_RT_BF: bf16 R x C, row layout: 16x16 blocks in the A-operand layout.
 *    Holds A, and B stored N x K for mma_ABt.
 *  - TK_RT_BF_COL: bf16 R x C, column layout: 16x8 blocks in the B-operand
 *    layout (k = row). Holds B stored K x N for mma_AB.
 *  - TK_RT_FL: fp32 R x C accumulator: 16x8 blocks of the mma D layout. It
 *    has one layout only: the store primitives write it directly.
 * `name` may carry array extents (TK_RT_FL(acc[4], 32, 32): four tiles). */
typedef struct tk_frag_a { uint32_t x[4]; } tk_frag_a;
typedef struct tk_frag_b { uint32_t x[2]; } tk_frag_b;
typedef struct tk_frag_c { float x[4]; } tk_frag_c;

#define TK_RT_BF(name, R, C)                                                                           \
    static_assert((R) % 16 == 0 && (C) % 16 == 0, "register tile " #name ": R and C must be multiples of 16"); \
    tk_frag_a name[(R) / 16][(C) / 16]
#define TK_RT_BF_COL(name, R, C)                                                                       \
    static_assert((R) % 16 == 0 && (C) % 16 == 0, "register tile " #name ": R and C must be multiples of 16"); \
    tk_frag_b name[(R) / 16][(C) / 8]
#define TK_RT_FL(name, R, C)                                                                           \
    static_assert((R) % 16 == 0 && (C) % 8 == 0, "register tile " #name ": R must be a multiple of 16, C of 8"); \
    tk_frag_c name[(R) / 16][(C) / 8]

#define TK_RT_ROWS(t) ((int)(sizeof(t) / sizeof((t)[0])) * 16)
#define TK_RT_COLS_BF(t) ((int)(sizeof((t)[0]) / sizeof(tk_frag_a)) * 16)
#define TK_RT_COLS_BF_COL(t) ((int)(sizeof((t)[0]) / sizeof(tk_frag_b)) * 8)
#define TK_RT_COLS_FL(t) ((int)(sizeof((t)[0]) / sizeof(tk_frag_c)) * 8)

#endif /* TK_TILES_TYPES_CUH */
