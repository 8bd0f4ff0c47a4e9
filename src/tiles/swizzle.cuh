/* swizzle.cuh - the 128-byte XOR swizzle of shared-memory tiles of bf16.
 *
 * A "panel" is a tile stored as rows of exactly 64 bf16 = 128 bytes = 8
 * chunks of 16 bytes; a wider tile is a sequence of panels (panel p holds
 * columns 64p..64p+63 of every row, panels back to back). Within a panel,
 * chunk c of row r is stored at chunk position c ^ (r & 7).
 *
 * Why this is conflict-free (32 banks x 4 bytes = 128 bytes per wavefront):
 *  - writes (cp.async / st.shared of 16 bytes): 8 consecutive threads store
 *    the 8 chunks of one row; XOR with a per-row constant permutes them
 *    inside the same 128 bytes, so each row is one full wavefront.
 *  - ldmatrix reads: each 8x8 matrix is 8 rows r0..r0+7 (r0 % 8 == 0) at the
 *    same logical chunk c; their physical chunks c ^ 0 .. c ^ 7 are all 8
 *    distinct chunks, so the 8 row addresses cover all 32 banks once.
 *    Unswizzled, all 8 rows would hit the same 4 banks (8-way conflict).
 * A consequence used by the kernels: for a panel whose base is 128-byte
 * aligned, the swizzled byte offset of (r, c ^ d) equals that of (r, c)
 * XOR (d << 4), so stepping to another chunk is one XOR.
 *
 * Plain C apart from TK_HD, so the host tests (tests/host/test_swizzle.c)
 * check exactly the arithmetic the kernels use.
 */
#ifndef TK_TILES_SWIZZLE_CUH
#define TK_TILES_SWIZZLE_CUH

#include <stdint.h>

/* Host-and-device marker: these functions are written `static inline TK_HD`. */
#ifndef TK_HD
#ifdef __CUDACC__
#define TK_HD __host__ __device__
#else
#define TK_HD
#endif
#endif

#define TK_SWZ_ROW_BYTES 128   /* one panel row: 64 bf16 */
#define TK_SWZ_ROW_ELEMS 64
#define TK_SWZ_CHUNKS 8        /* 16-byte chunks per row */

/* Byte offset, inside one panel, of 16-byte chunk `chunk` (0..7) of row `row`. */
static inline TK_HD uint32_t tk_swz128_chunk(uint32_t row, uint32_t chunk)
{
    return row * TK_SWZ_ROW_BYTES + ((chunk ^ (row & 7u)) << 4);
}

/* Byte offset of element (row, col) of a tile `rows` rows high made of
 * panels of 64 columns (col may exceed 63: it selects the panel). */
static inline TK_HD uint32_t tk_swz128_elem(uint32_t rows, uint32_t row, uint32_t col)
{
    return (col / TK_SWZ_ROW_ELEMS) * rows * TK_SWZ_ROW_BYTES + tk_swz128_chunk(row, (col % TK_SWZ_ROW_ELEMS) / 8) +
           (col % 8) * 2;
}

#endif /* TK_TILES_SWIZZLE_CUH */
