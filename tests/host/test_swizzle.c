/* test_swizzle.c - the index math of src/tiles/swizzle.cuh and
 * src/tiles/raster.cuh on the host: the swizzle is a permutation with the
 * bank properties the kernels rely on, and the super-tile order visits every
 * output tile exactly once. */
#include <stdlib.h>
#include <string.h>
#include "tiles/swizzle.cuh"
#include "tiles/raster.cuh"
#include "check.h"

/* The 16-byte bank group (0..7) of a byte offset: 32 banks x 4 bytes. */
static unsigned bank_group(uint32_t off) { return (off / 16) % 8; }

static void test_swizzle_is_permutation_within_rows(void)
{
    for (uint32_t row = 0; row < 64; row++) {
        unsigned seen = 0;
        for (uint32_t c = 0; c < 8; c++) {
            uint32_t off = tk_swz128_chunk(row, c);
            CHECK(off / TK_SWZ_ROW_BYTES == row, "row %u chunk %u left its row (offset %u)", row, c, off);
            CHECK(off % 16 == 0, "row %u chunk %u: offset %u not 16-byte aligned", row, c, off);
            seen |= 1u << bank_group(off);
        }
        CHECK(seen == 0xffu, "row %u: its 8 chunks cover bank groups 0x%x, not all 8 (write conflict)", row, seen);
    }
}

/* ldmatrix reads one 16-byte chunk from each of 8 consecutive rows: the 8
 * rows starting at a multiple of 8, at any logical chunk, must land in 8
 * different bank groups. */
static void test_swizzle_ldmatrix_conflict_free(void)
{
    for (uint32_t r0 = 0; r0 < 256; r0 += 8)
        for (uint32_t c = 0; c < 8; c++) {
            unsigned seen = 0;
            for (uint32_t r = r0; r < r0 + 8; r++)
                seen |= 1u << bank_group(tk_swz128_chunk(r, c));
            CHECK(seen == 0xffu, "rows %u..%u chunk %u: bank groups 0x%x (ldmatrix conflict)", r0, r0 + 7, c, seen);
        }
}

/* The XOR step the kernels use: offset(r, c ^ d) == offset(r, c) ^ (d << 4). */
static void test_swizzle_xor_step(void)
{
    for (uint32_t r = 0; r < 16; r++)
        for (uint32_t c = 0; c < 8; c++)
            for (uint32_t d = 0; d < 8; d++)
                CHECK(tk_swz128_chunk(r, c ^ d) == (tk_swz128_chunk(r, c) ^ (d << 4)), "r %u c %u d %u", r, c, d);
}

/* tk_swz128_elem is a bijection from a rows x cols tile onto its bytes. */
static void test_swizzle_elem_bijection(void)
{
    const uint32_t rows = 64, cols = 256;
    unsigned char *hit = calloc(rows * cols, 1);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            uint32_t off = tk_swz128_elem(rows, r, c);
            CHECK(off % 2 == 0 && off / 2 < rows * cols, "(%u, %u) -> %u out of the tile", r, c, off);
            if (off / 2 < rows * cols)
                hit[off / 2]++;
        }
    for (uint32_t i = 0; i < rows * cols; i++)
        CHECK(hit[i] == 1, "element slot %u hit %u times", i, hit[i]);
    free(hit);
}

static void check_raster(int tiles_m, int tiles_n, int group_m)
{
    int n = tiles_m * tiles_n;
    unsigned char *hit = calloc((size_t)n, 1);
    int bad = 0;
    for (int id = 0; id < n; id++) {
        int tm, tn;
        tk_raster_supertile(id, tiles_m, tiles_n, group_m, &tm, &tn);
        if (tm < 0 || tm >= tiles_m || tn < 0 || tn >= tiles_n)
            bad++;
        else
            hit[tm * tiles_n + tn]++;
    }
    CHECK(bad == 0, "%d x %d tiles, group %d: %d ids map outside the grid", tiles_m, tiles_n, group_m, bad);
    int missing = 0;
    for (int i = 0; i < n; i++)
        missing += hit[i] != 1;
    CHECK(missing == 0, "%d x %d tiles, group %d: %d tiles not visited exactly once", tiles_m, tiles_n, group_m,
          missing);
    free(hit);
}

static void test_raster_bijection(void)
{
    const int dims[] = { 1, 2, 3, 7, 8, 9, 16, 33, 64 };
    const int groups[] = { 1, 2, 4, 8, 16, 100 };
    for (size_t a = 0; a < sizeof dims / sizeof dims[0]; a++)
        for (size_t b = 0; b < sizeof dims / sizeof dims[0]; b++)
            for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
                check_raster(dims[a], dims[b], groups[g]);
}

/* The first group_m * c ids cover exactly c columns of the first group_m rows. */
static void test_raster_groups_are_square_patches(void)
{
    const int tiles_m = 64, tiles_n = 32, group_m = 8;
    for (int id = 0; id < group_m * 5; id++) {
        int tm, tn;
        tk_raster_supertile(id, tiles_m, tiles_n, group_m, &tm, &tn);
        CHECK(tm == id % group_m && tn == id / group_m, "id %d -> (%d, %d)", id, tm, tn);
    }
    int tm, tn;
    tk_raster_supertile(group_m * tiles_n, tiles_m, tiles_n, group_m, &tm, &tn);
    CHECK(tm == group_m && tn == 0, "first id of group 1 -> (%d, %d), expected (%d, 0)", tm, tn, group_m);
    /* A short last group (tiles_m = 10, group 8: rows 8..9) still walks down its columns. */
    tk_raster_supertile(8 * tiles_n + 3, 10, tiles_n, group_m, &tm, &tn);
    CHECK(tm == 9 && tn == 1, "short group: id -> (%d, %d), expected (9, 1)", tm, tn);
}

void tk_tests(void)
{
    TK_TEST(test_swizzle_is_permutation_within_rows);
    TK_TEST(test_swizzle_ldmatrix_conflict_free);
    TK_TEST(test_swizzle_xor_step);
    TK_TEST(test_swizzle_elem_bijection);
    TK_TEST(test_raster_bijection);
    TK_TEST(test_raster_groups_are_square_patches);
}
