/* test_tiles.c - the tile primitives' index arithmetic (src/tiles/layout.h)
 * on the CPU: fragment ownership, ldmatrix addressing, padded-pitch bank
 * slots, sub-tile offsets, the global -> shared chunk map and its edge
 * predicate. tests/gpu/tiles_test.cu checks the device primitives against
 * the same functions. */
#include <stdint.h>
#include <string.h>
#include "tiles/layout.h"
#include "check.h"

/* Every element of a 16x16 A fragment is owned by exactly one
 * (lane, register, half), and the pairs in a register are neighbours. */
static void test_frag_a_covers_block_once(void)
{
    int seen[16][16];
    memset(seen, 0, sizeof seen);
    for (int lane = 0; lane < 32; lane++)
        for (int reg = 0; reg < 4; reg++)
            for (int half = 0; half < 2; half++) {
                int r = tk_frag_a_row(lane, reg), c = tk_frag_a_col(lane, reg, half);
                CHECK(r >= 0 && r < 16 && c >= 0 && c < 16, "lane %d reg %d half %d -> (%d, %d) outside", lane, reg,
                      half, r, c);
                if (r >= 0 && r < 16 && c >= 0 && c < 16)
                    seen[r][c]++;
            }
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            CHECK(seen[r][c] == 1, "A element (%d, %d) owned %d times", r, c, seen[r][c]);
    /* PTX ISA figure for m16n8k16 .bf16 A: a0,a1 row g; a2,a3 row g+8; a4..a7 columns +8. */
    CHECK(tk_frag_a_row(5, 0) == 1 && tk_frag_a_col(5, 0, 1) == 3, "lane 5 reg 0 half 1 should be (1, 3)");
    CHECK(tk_frag_a_row(5, 1) == 9 && tk_frag_a_col(5, 3, 0) == 10, "lane 5 regs 1/3 should be row 9 / col 10");
}

static void test_frag_b_and_c_cover_once(void)
{
    int b[16][8], c[16][8];
    memset(b, 0, sizeof b);
    memset(c, 0, sizeof c);
    for (int lane = 0; lane < 32; lane++) {
        for (int reg = 0; reg < 2; reg++)
            for (int half = 0; half < 2; half++)
                b[tk_frag_b_k(lane, reg, half)][tk_frag_b_n(lane)]++;
        for (int e = 0; e < 4; e++)
            c[tk_frag_c_row(lane, e)][tk_frag_c_col(lane, e)]++;
    }
    for (int r = 0; r < 16; r++)
        for (int col = 0; col < 8; col++) {
            CHECK(b[r][col] == 1, "B element (k %d, n %d) owned %d times", r, col, b[r][col]);
            CHECK(c[r][col] == 1, "C element (%d, %d) owned %d times", r, col, c[r][col]);
        }
}

/* B stored N x K and loaded as a row-layout (A-like) tile gives the B
 * fragments directly (rt.cuh tk_mma_ABt_frags): register x[h + 2*reg] of the
 * 16x16 block holds, for the lane, element (n = g + 8h, k = 2t + 8reg + half),
 * which must be the B fragment element (k, n) of n-block h. */
static void test_bt_row_tile_is_b_fragment(void)
{
    for (int lane = 0; lane < 32; lane++)
        for (int h = 0; h < 2; h++)
            for (int reg = 0; reg < 2; reg++)
                for (int half = 0; half < 2; half++) {
                    int a_reg = h + 2 * reg;
                    int n = tk_frag_a_row(lane, a_reg), k = tk_frag_a_col(lane, a_reg, half);
                    CHECK(n == 8 * h + tk_frag_b_n(lane) && k == tk_frag_b_k(lane, reg, half),
                          "lane %d h %d reg %d half %d: (n %d, k %d) is not the B fragment element", lane, h, reg, half,
                          n, k);
                }
}

/* ldmatrix x4 on a 16x16 block: matrix q = lane/8 starts at the origin of
 * A register q, and row lane%8 of it; so the registers come back as the
 * A fragment (non-trans) or as two B fragments (trans). */
static void test_ldmatrix_addressing(void)
{
    for (int lane = 0; lane < 32; lane++) {
        int q = lane / 8;
        CHECK(tk_ldsm_row(lane) == lane % 8 + 8 * (q & 1), "lane %d row", lane);
        CHECK(tk_ldsm_col(lane) == 8 * (q >> 1), "lane %d col", lane);
        /* matrix q's element (g, 2t) is A register q's element for lane 4g + t */
        for (int g = 0; g < 8; g++)
            for (int t = 0; t < 4; t++) {
                int l = 4 * g + t;
                CHECK(tk_frag_a_row(l, q) == tk_ldsm_row(8 * q) + g && tk_frag_a_col(l, q, 0) == tk_ldsm_col(8 * q) + 2 * t,
                      "matrix %d element (%d, %d) is not A register %d of lane %d", q, g, 2 * t, q, l);
            }
    }
}

/* The padding claim of layout.h: the 8 rows of one ldmatrix matrix (same
 * column, consecutive rows) sit in 8 different 16-byte bank slots for every
 * tile width that is a multiple of 16, and the check would catch a bad
 * pitch (no padding: all 8 rows in one slot). */
static int slots_distinct(int pitch, int row0, int col)
{
    int used = 0;
    for (int r = 0; r < 8; r++)
        used |= 1 << tk_st_bank_slot(row0 + r, col, pitch);
    return used == 0xff;
}

static void test_padding_conflict_free(void)
{
    for (int cols = 16; cols <= 512; cols += 16) {
        int pitch = tk_st_pitch(cols);
        for (int row0 = 0; row0 < 64; row0 += 8)
            for (int col = 0; col < cols; col += 8)
                CHECK(slots_distinct(pitch, row0, col), "cols %d: rows %d..+7 at col %d share a bank slot", cols, row0,
                      col);
        /* stores of whole rows by 8 consecutive threads are one full 128-byte
         * window when a row is at least 8 chunks */
        if (cols >= 64)
            for (int r = 0; r < 16; r++) {
                int used = 0;
                for (int c = 0; c < 8; c++)
                    used |= 1 << tk_st_bank_slot(r, 8 * c, pitch);
                CHECK(used == 0xff, "cols %d row %d: 8 chunks share a slot", cols, r);
            }
    }
    CHECK(!slots_distinct(64, 0, 0), "an unpadded 64-wide tile should conflict (the test must be able to fail)");
}

static void test_subtile_offsets(void)
{
    int pitch = tk_st_pitch(64);
    CHECK(pitch == 72, "pitch of a 64-wide tile: %d", pitch);
    CHECK(tk_subtile_offset(0, 0, 16, 16, pitch) == 0, "origin");
    CHECK(tk_subtile_offset(2, 3, 16, 16, pitch) == 32 * 72 + 48, "sub-tile (2, 3) of 16x16: %d",
          tk_subtile_offset(2, 3, 16, 16, pitch));
    CHECK(tk_subtile_offset(1, 0, 32, 64, tk_st_pitch(64)) == 32 * 72, "row of 32x64 sub-tiles");
    /* sub-tiles of one tile partition it: every element in exactly one */
    static int seen[64 * 72];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int r = 0; r < 16; r++)
                for (int c = 0; c < 32; c++)
                    seen[tk_subtile_offset(i, j, 16, 32, pitch) + tk_st_offset(r, c, pitch)]++;
    for (int r = 0; r < 64; r++)
        for (int c = 0; c < 72; c++)
            CHECK(seen[r * 72 + c] == (c < 64), "element (%d, %d) covered %d times", r, c, seen[r * 72 + c]);
}

/* The chunk map covers an R x C tile once, lanes walk along rows (32 lanes
 * of a 64-wide tile read 4 whole rows: 512 contiguous bytes per row pair). */
static void test_chunk_map(void)
{
    const int shapes[][2] = { { 64, 64 }, { 64, 16 }, { 16, 64 }, { 128, 32 }, { 32, 128 }, { 256, 64 } };
    const int groups[] = { 32, 128, 256, 96 };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
            int R = shapes[s][0], C = shapes[s][1], nt = groups[g];
            static int seen[256][128];
            memset(seen, 0, sizeof seen);
            int per = tk_chunks_per_thread(R, C, nt), total = R * C / 8;
            CHECK(per * nt >= total && (per - 1) * nt < total, "chunks per thread %d for %dx%d / %d", per, R, C, nt);
            for (int tid = 0; tid < nt; tid++)
                for (int it = 0; it < per; it++) {
                    int c = it * nt + tid;
                    if (c < total)
                        for (int e = 0; e < 8; e++)
                            seen[tk_chunk_row(c, C)][tk_chunk_col(c, C) + e]++;
                }
            for (int r = 0; r < R; r++)
                for (int c = 0; c < C; c++)
                    CHECK(seen[r][c] == 1, "%dx%d by %d threads: element (%d, %d) loaded %d times", R, C, nt, r, c,
                          seen[r][c]);
        }
    /* coalescing: lanes 0..7 of a 64-wide tile read row 0 left to right */
    for (int lane = 0; lane < 8; lane++)
        CHECK(tk_chunk_row(lane, 64) == 0 && tk_chunk_col(lane, 64) == 8 * lane, "lane %d", lane);
    CHECK(tk_chunk_row(8, 64) == 1 && tk_chunk_col(8, 64) == 0, "lane 8 starts row 1");
}

static void test_chunk_valid(void)
{
    CHECK(tk_chunk_valid(0, 0, 10, 20) == 8, "interior");
    CHECK(tk_chunk_valid(9, 16, 10, 20) == 4, "row tail: 4 of 8");
    CHECK(tk_chunk_valid(9, 19, 10, 20) == 1, "one element");
    CHECK(tk_chunk_valid(9, 20, 10, 20) == 0, "past the last column");
    CHECK(tk_chunk_valid(10, 0, 10, 20) == 0, "past the last row");
    CHECK(tk_chunk_valid(-1, 0, 10, 20) == 0 && tk_chunk_valid(0, -8, 10, 20) == 0, "negative");
    CHECK(tk_chunk_valid(0, 0, 1, 1) == 1, "1 x 1 matrix");
    CHECK(tk_chunk_valid(INT64_C(5000000000), 8, INT64_C(5000000001), 17) == 8, "64-bit rows");
    CHECK(tk_ceil_div(1, 64) == 1 && tk_ceil_div(64, 64) == 1 && tk_ceil_div(65, 64) == 2, "ceil_div");
}

void tk_tests(void)
{
    TK_TEST(test_frag_a_covers_block_once);
    TK_TEST(test_frag_b_and_c_cover_once);
    TK_TEST(test_bt_row_tile_is_b_fragment);
    TK_TEST(test_ldmatrix_addressing);
    TK_TEST(test_padding_conflict_free);
    TK_TEST(test_subtile_offsets);
    TK_TEST(test_chunk_map);
    TK_TEST(test_chunk_valid);
}
