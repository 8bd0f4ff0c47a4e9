/* layout.h - the index arithmetic behind the tile primitives, in plain C.
 *
 * Everything here maps one index to another (a lane to the matrix element it
 * owns, a tile coordinate to an element offset, an element to its shared
 * memory bank) and nothing more, so the same functions run in the device
 * primitives (the .cuh files of src/tiles) and in the CPU tests (tests/host/test_tiles.c),
 * and the GPU tests (tests/gpu/tiles_test.cu) check the device against them.
 * TK_HD makes a function __host__ __device__ under nvcc and plain C under gcc.
 *
 * Vocabulary: a 16-byte vector of 8 bf16 is a "chunk"; an mma.sync m16n8k16
 * operand piece held by one warp is a "fragment"; lane = 4*g + t with
 * g = lane/4 (0..7) and t = lane%4 (0..3), as in src/ptx/mma_sync.cuh.
 */
#ifndef TK_TILES_LAYOUT_H
#define TK_TILES_LAYOUT_H

#include <stdint.h>

/* Host-and-device marker, shared with swizzle.cuh and raster.cuh: functions
 * are written `static inline TK_HD`. */
#ifndef TK_HD
#ifdef __CUDACC__
#define TK_HD __host__ __device__
#else
#define TK_HD
#endif
#endif

#define TK_WARP_THREADS 32
#define TK_WARPGROUP_WARPS 4
#define TK_CHUNK_ELEMS 8   /* bf16 per 16-byte vector */

/* ---- shared tiles: padded rows ----
 * A shared R x C bf16 tile is stored row-major with TK_ST_PAD extra elements
 * (16 bytes) at the end of every row, so the row pitch is C + 8 elements,
 * i.e. C/8 + 1 chunks. Why padding rather than an XOR swizzle: the 8 row
 * addresses of one ldmatrix 8x8 matrix (and of ldmatrix.trans) are then
 * 8 consecutive rows at the same column, which land in chunk slots
 * r*(C/8 + 1) mod 8 of the 128-byte bank window -- 8 different slots, so no
 * bank conflict, whenever C/8 + 1 is odd (C a multiple of 16). That holds for
 * every tile width the seeds use (16 .. 256), where an XOR swizzle over
 * 8 chunks needs rows of at least 64 elements; the price is 16 bytes per row
 * (12.5% of a 64-wide tile). test_tiles.c checks the claim for each width. */
#define TK_ST_PAD 8

static inline TK_HD int tk_st_pitch(int cols) { return cols + TK_ST_PAD; }

/* Element offset of (row, col) in a shared tile of the given pitch. */
static inline TK_HD int tk_st_offset(int row, int col, int pitch) { return row * pitch + col; }

/* Which of the 8 16-byte slots of the 128-byte bank window (32 banks x 4 B)
 * the chunk starting at (row, col) occupies; col a multiple of 8. Two
 * accesses of one phase conflict iff they use the same slot at different
 * addresses. */
static inline TK_HD int tk_st_bank_slot(int row, int col, int pitch)
{
    return (tk_st_offset(row, col, pitch) / TK_CHUNK_ELEMS) % 8;
}

/* Element offset of sub-tile (i, j) of shape sub_rows x sub_cols, counted in
 * sub-tile units (the seeds' subtile_inplace<R, C>(tile, {i, j})). */
static inline TK_HD int tk_subtile_offset(int i, int j, int sub_rows, int sub_cols, int pitch)
{
    return tk_st_offset(i * sub_rows, j * sub_cols, pitch);
}

/* ---- fragment ownership (mma.sync m16n8k16, bf16 in, fp32 accumulate) ----
 * Every register holds two bf16 (low half = lower column or lower k) or one
 * fp32. `half` selects the bf16 inside the register (0 = low). */

/* A operand, 16 x 16, registers 0..3: reg bit 0 adds 8 rows, bit 1 adds 8
 * columns. Also the layout of every 16x16 block of a row-layout register
 * tile, including B stored N x K for mma_ABt. */
static inline TK_HD int tk_frag_a_row(int lane, int reg) { return lane / 4 + 8 * (reg & 1); }
static inline TK_HD int tk_frag_a_col(int lane, int reg, int half) { return 2 * (lane % 4) + half + 8 * (reg >> 1); }

/* B operand, 16 (k) x 8 (n), registers 0..1: reg 1 adds 8 to k. Also every
 * 16x8 block of a column-layout register tile (k = row, n = column). */
static inline TK_HD int tk_frag_b_k(int lane, int reg, int half) { return 2 * (lane % 4) + half + 8 * reg; }
static inline TK_HD int tk_frag_b_n(int lane) { return lane / 4; }

/* Accumulator, 16 x 8 fp32, elements 0..3: element bit 1 adds 8 rows,
 * bit 0 is the column within the pair. */
static inline TK_HD int tk_frag_c_row(int lane, int elem) { return lane / 4 + 8 * (elem >> 1); }
static inline TK_HD int tk_frag_c_col(int lane, int elem) { return 2 * (lane % 4) + (elem & 1); }

/* ---- ldmatrix x4 addressing of one 16x16 block ----
 * Lane l supplies the address of row (l%8) of matrix l/8; the four matrices
 * are taken as (rows 0-7, cols 0-7), (rows 8-15, cols 0-7),
 * (rows 0-7, cols 8-15), (rows 8-15, cols 8-15). Without .trans the four
 * registers are then exactly A-fragment registers 0..3. With .trans on a
 * K x N block they are B fragments: {r0, r1} for columns 0-7 and {r2, r3}
 * for columns 8-15. */
static inline TK_HD int tk_ldsm_row(int lane) { return lane % 8 + 8 * ((lane / 8) % 2); }
static inline TK_HD int tk_ldsm_col(int lane) { return 8 * (lane / 16); }

/* ---- global -> shared chunk mapping ----
 * Chunk c of an R x C tile (C a multiple of 8) covers row c / (C/8),
 * columns (c % (C/8))*8 .. +7: consecutive threads take consecutive 16 B of a
 * row, so a warp reads whole rows (coalesced). Thread tid of an nthreads
 * group takes chunks tid, tid + nthreads, ... */
static inline TK_HD int tk_chunk_row(int c, int cols) { return c / (cols / TK_CHUNK_ELEMS); }
static inline TK_HD int tk_chunk_col(int c, int cols) { return (c % (cols / TK_CHUNK_ELEMS)) * TK_CHUNK_ELEMS; }

/* Chunks each of nthreads threads moves for an R x C tile (rounded up); the
 * macro form is a constant expression, for static_assert and array sizes. */
#define TK_CHUNKS_PER_THREAD(rows, cols, nthreads) \
    (((rows) * (cols) / TK_CHUNK_ELEMS + (nthreads) - 1) / (nthreads))
static inline TK_HD int tk_chunks_per_thread(int rows, int cols, int nthreads)
{
    return TK_CHUNKS_PER_THREAD(rows, cols, nthreads);
}

/* The edge predicate: how many of the 8 elements of the chunk starting at
 * global (grow, gcol) lie inside a rows x cols matrix (0..8). Elements
 * outside are loaded as zero, which is what makes edge tiles exact: a zero
 * in the K tail of A meets a zero in the K tail of B. */
static inline TK_HD int tk_chunk_valid(int64_t grow, int64_t gcol, int64_t rows, int64_t cols)
{
    if (grow < 0 || grow >= rows || gcol < 0 || gcol >= cols)
        return 0;
    int64_t left = cols - gcol;
    return left >= TK_CHUNK_ELEMS ? TK_CHUNK_ELEMS : (int)left;
}

/* Number of tiles of size t covering n (n >= 1). */
static inline TK_HD int64_t tk_ceil_div(int64_t n, int64_t t) { return (n + t - 1) / t; }

#endif /* TK_TILES_LAYOUT_H */
