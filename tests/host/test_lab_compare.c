/* test_lab_compare.c - verify's comparison must pass an honest result and
 * catch each planted bug, with the error map marking exactly the bad tiles
 * (in C's logical rows/cols, for both layouts). No GPU: the "kernel" here
 * is an fp32 CPU loop, the "cuBLAS" the same loop summing backwards. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lab/lab.h"
#include "check.h"

#define TR 128   /* tile rows/cols of the map */
#define TC 128
#define WR 64    /* warp tile */
#define WC 32

typedef struct fixture {
    tk_lab_case c;
    tk_gemm_problem hp;          /* host problem: A, B, C0 */
    uint16_t *a, *b;
    void *c0, *got, *want;       /* C-sized, out type, tight ldc */
    float *s;                    /* S in C's layout */
    int64_t *prow, *pcol;        /* every point, row-major */
    double *pwant, *ps;
} fixture;

/* An fp32-accumulating GEMM on the CPU, summing forwards or backwards. */
static void fp32_gemm(fixture *f, void *out, int backwards)
{
    const tk_lab_case *c = &f->c;
    tk_gemm_problem p = f->hp;
    for (int64_t i = 0; i < c->m; i++)
        for (int64_t j = 0; j < c->n; j++) {
            float acc = 0.0f, s = 0.0f;
            for (int64_t t = 0; t < c->k; t++) {
                int64_t kk = backwards ? c->k - 1 - t : t;
                /* op(A)(i, kk) and op(B)(kk, j), indexed here independently of lab_cpuref.c */
                int row = c->layout == TK_ROW_MAJOR;
                int64_t ai = (c->op_a == TK_OP_N) == row ? i * p.lda + kk : kk * p.lda + i;
                int64_t bi = (c->op_b == TK_OP_N) == row ? kk * p.ldb + j : j * p.ldb + kk;
                double x = tk_lab_bf16_to_f32(f->a[ai]), y = tk_lab_bf16_to_f32(f->b[bi]);
                acc += (float)(x * y);
                s += fabsf((float)(x * y));
            }
            int64_t idx = tk_lab_index(c->layout, p.ldc, i, j);
            float v = c->alpha * acc;
            if (c->beta != 0.0f)
                v = fmaf(c->beta, (float)tk_lab_load(f->c0, c->out, idx), v);
            if (c->out == TK_F32)
                ((float *)out)[idx] = v;
            else
                ((uint16_t *)out)[idx] = tk_lab_f32_to_bf16(v);
            if (out == f->want)
                f->s[idx] = s;
        }
}

static void setup(fixture *f, tk_layout l, tk_dtype out, int64_t m, int64_t n, int64_t k, float beta)
{
    memset(f, 0, sizeof *f);
    f->c = (tk_lab_case){ l, TK_OP_N, TK_OP_T, m, n, k, 1.5f, beta, out, 5, 0, 0 };
    size_t mn = (size_t)(m * n), es = out == TK_F32 ? 4 : 2;
    f->a = malloc((size_t)(m * k) * 2);
    f->b = malloc((size_t)(k * n) * 2);
    f->c0 = malloc(mn * es);
    f->got = malloc(mn * es);
    f->want = malloc(mn * es);
    f->s = malloc(mn * 4);
    tk_lab_fill(f->a, TK_BF16, (size_t)(m * k), 1);
    tk_lab_fill(f->b, TK_BF16, (size_t)(k * n), 2);
    tk_lab_fill(f->c0, out, mn, 3);
    tk_lab_problem(&f->c, f->a, f->b, f->c0, &f->hp);
    fp32_gemm(f, f->got, 0);
    fp32_gemm(f, f->want, 1);
    f->prow = malloc(mn * 8);
    f->pcol = malloc(mn * 8);
    f->pwant = malloc(mn * 8);
    f->ps = malloc(mn * 8);
    for (size_t t = 0; t < mn; t++) {
        f->prow[t] = (int64_t)t / n;
        f->pcol[t] = (int64_t)t % n;
    }
    tk_lab_ref_points(&f->hp, mn, f->prow, f->pcol, f->pwant, f->ps);
}

static void teardown(fixture *f)
{
    free(f->a); free(f->b); free(f->c0); free(f->got); free(f->want); free(f->s);
    free(f->prow); free(f->pcol); free(f->pwant); free(f->ps);
}

/* mode 0: every element against "cuBLAS"; 1: every point against fp64. */
static int compare(fixture *f, int mode, tk_lab_report *r)
{
    tk_lab_cmp_spec s = { 0 };
    s.layout = f->c.layout;
    s.m = f->c.m; s.n = f->c.n; s.k = f->c.k;
    s.alpha = f->c.alpha; s.beta = f->c.beta; s.out = f->c.out;
    s.got = (tk_lab_mat){ f->got, f->c.out, f->hp.ldc };
    s.c0 = (tk_lab_mat){ f->c0, f->c.out, f->hp.ldc };
    s.tile_rows = TR; s.tile_cols = TC; s.warp_rows = WR; s.warp_cols = WC;
    if (mode == 0) {
        s.want = (tk_lab_mat){ f->want, f->c.out, f->hp.ldc };
        s.s = (tk_lab_mat){ f->s, TK_F32, f->hp.ldc };
    } else {
        s.npts = (size_t)(f->c.m * f->c.n);
        s.prow = f->prow; s.pcol = f->pcol; s.pwant = f->pwant; s.ps = f->ps;
        s.exact_ref = 1;
    }
    return tk_lab_compare(&s, r);
}

static double got_at(fixture *f, int64_t i, int64_t j)
{
    return tk_lab_load(f->got, f->c.out, tk_lab_index(f->c.layout, f->hp.ldc, i, j));
}

static void set_got(fixture *f, int64_t i, int64_t j, double v)
{
    int64_t idx = tk_lab_index(f->c.layout, f->hp.ldc, i, j);
    if (f->c.out == TK_F32)
        ((float *)f->got)[idx] = (float)v;
    else
        ((uint16_t *)f->got)[idx] = tk_lab_f32_to_bf16((float)v);
}

/* Cells of m not in cells[] must be '.', listed ones `mark` (any digit when
 * mark is 'd'). Returns the number of cells that are not so. */
static int map_is(const tk_lab_map *m, const int (*cells)[2], int ncells, char mark)
{
    int wrong = 0;
    for (int r = 0; r < m->rows; r++)
        for (int c = 0; c < m->cols; c++) {
            int listed = 0;
            for (int t = 0; t < ncells; t++)
                listed |= cells[t][0] == r && cells[t][1] == c;
            char ch = m->cell[r * m->cols + c];
            int ok = !listed ? ch == '.' : mark == 'd' ? (ch >= '0' && ch <= '9') : ch == mark;
            wrong += !ok;
        }
    return wrong;
}

/* Runs body on a 300 x 520 x 64 fixture in both layouts, both output
 * types, beta 0 and 0.5. The tile grid is 3 x 5 with partial edge tiles. */
static void each_config(void (*body)(fixture *f))
{
    for (int cfg = 0; cfg < 8; cfg++) {
        fixture f;
        setup(&f, (tk_layout)(cfg & 1), cfg & 2 ? TK_BF16 : TK_F32, 300, 520, 64, cfg & 4 ? 0.5f : 0.0f);
        body(&f);
        teardown(&f);
    }
}

static const char *cfg_name(const fixture *f)
{
    static char buf[128];
    tk_lab_case_name(&f->c, buf, sizeof buf);
    return buf;
}

static void test_correct_result_passes_body(fixture *f)
{
    for (int mode = 0; mode < 2; mode++) {
        tk_lab_report r;
        int failed = compare(f, mode, &r);
        CHECK(!failed && r.over == 0 && r.nonfinite == 0, "%s mode %d: over %lld", cfg_name(f), mode,
              (long long)r.over);
        CHECK(r.checked == 300 * 520, "%s: checked %lld", cfg_name(f), (long long)r.checked);
        CHECK(r.tiles.rows == 3 && r.tiles.cols == 5 && map_is(&r.tiles, NULL, 0, '.') == 0, "%s: map",
              cfg_name(f));
        /* bf16's half-ulp rounding bound is tight: an honest result may use nearly all of it */
        double room = f->c.out == TK_F32 ? 0.5 : 1.0;
        CHECK(r.similarity < 1e-5 && r.worst_ratio < room, "%s: similarity %g, worst %.2f of tol",
              cfg_name(f), r.similarity, r.worst_ratio);
    }
}

static void test_correct_result_passes(void) { each_config(test_correct_result_passes_body); }

static void test_one_wrong_element_body(fixture *f)
{
    set_got(f, 200, 300, got_at(f, 200, 300) + 1.0);
    for (int mode = 0; mode < 2; mode++) {
        tk_lab_report r;
        CHECK(compare(f, mode, &r) == 1, "%s mode %d: not caught", cfg_name(f), mode);
        CHECK(r.over == 1 && r.nbad == 1 && r.bad[0].row == 200 && r.bad[0].col == 300, "%s: over %lld",
              cfg_name(f), (long long)r.over);
        static const int tile[][2] = { { 1, 2 } }, warp[][2] = { { 1, 1 } };
        CHECK(map_is(&r.tiles, tile, 1, 'd') == 0, "%s: tile map", cfg_name(f));
        CHECK(r.has_warp_map && r.warps.row0 == 128 && r.warps.col0 == 256 && r.warps.rows == 2 &&
                  r.warps.cols == 4 && map_is(&r.warps, warp, 1, 'd') == 0,
              "%s: warp map", cfg_name(f));
    }
}

static void test_one_wrong_element(void) { each_config(test_one_wrong_element_body); }

static void test_swapped_tiles_body(fixture *f)
{
    for (int64_t i = 0; i < TR; i++)
        for (int64_t j = 0; j < TC; j++) {
            double x = got_at(f, i, j), y = got_at(f, TR + i, 3 * TC + j);
            set_got(f, i, j, y);
            set_got(f, TR + i, 3 * TC + j, x);
        }
    for (int mode = 0; mode < 2; mode++) {
        tk_lab_report r;
        CHECK(compare(f, mode, &r) == 1, "%s: not caught", cfg_name(f));
        static const int cells[][2] = { { 0, 0 }, { 1, 3 } };
        CHECK(map_is(&r.tiles, cells, 2, 'd') == 0, "%s: tile map", cfg_name(f));
        CHECK(r.over > TR * TC, "%s: only %lld over", cfg_name(f), (long long)r.over);
    }
}

static void test_swapped_tiles(void) { each_config(test_swapped_tiles_body); }

static void test_unwritten_tile_and_nan_body(fixture *f)
{
    /* the bottom-right edge tile (rows 256..299, cols 512..519) left as NaN poison */
    for (int64_t i = 256; i < 300; i++)
        for (int64_t j = 512; j < 520; j++)
            set_got(f, i, j, NAN);
    set_got(f, 5, 7, NAN);
    set_got(f, 6, 200, INFINITY);
    for (int mode = 0; mode < 2; mode++) {
        tk_lab_report r;
        CHECK(compare(f, mode, &r) == 1, "%s: not caught", cfg_name(f));
        CHECK(r.nonfinite == 44 * 8 + 2, "%s: nonfinite %lld", cfg_name(f), (long long)r.nonfinite);
        static const int cells[][2] = { { 2, 4 }, { 0, 0 }, { 0, 1 } };
        CHECK(map_is(&r.tiles, cells, 3, 'N') == 0, "%s: tile map", cfg_name(f));
        CHECK(isfinite(r.similarity) && isfinite(r.max_abs), "%s: NaN leaked into the figures", cfg_name(f));
    }
}

static void test_unwritten_tile_and_nan(void) { each_config(test_unwritten_tile_and_nan_body); }

static void test_severity_digits(void)
{
    fixture f;
    setup(&f, TK_ROW_MAJOR, TK_F32, 300, 520, 64, 0.0f);
    const double over[] = { 5, 500, 1e12 };
    const char digit[] = { '0', '2', '9' };
    for (int t = 0; t < 3; t++) {
        int64_t p = 10 * 520 + 20;   /* point (10, 20), in tile (0, 0) */
        double tol = tk_lab_tolerance(64, 1.5f, 0.0f, f.ps[p], 0.0, f.pwant[p], TK_F32, 1);
        set_got(&f, 10, 20, f.pwant[p] + over[t] * tol);
        tk_lab_report r;
        compare(&f, 1, &r);
        CHECK(r.tiles.cell[0] == digit[t], "%gx over tol shows '%c', expected '%c'", over[t], r.tiles.cell[0],
              digit[t]);
    }
    teardown(&f);
}

static void test_large_map_merges_cells(void)
{
    fixture f;
    setup(&f, TK_COL_MAJOR, TK_F32, TR * 65 + 1, 8, 4, 0.0f);
    set_got(&f, TR * 65, 3, got_at(&f, TR * 65, 3) - 2.0);
    tk_lab_report r;
    CHECK(compare(&f, 0, &r) == 1, "not caught");
    CHECK(r.tiles.rows == 33 && r.tiles.cols == 1 && r.tiles.cell_rows == 2 * TR, "map %dx%d, cells of %lld rows",
          r.tiles.rows, r.tiles.cols, (long long)r.tiles.cell_rows);
    static const int cells[][2] = { { 32, 0 } };
    CHECK(map_is(&r.tiles, cells, 1, 'd') == 0, "wrong cell marked");
    teardown(&f);
}

/* A C of >= 2^20 elements is compared by several threads: the merged
 * report must read as if one thread had scanned C in storage order. */
static void test_threaded_compare(void)
{
    for (int l = 0; l < 2; l++) {
        fixture f;
        setup(&f, (tk_layout)l, TK_F32, 1030, 1040, 4, 0.0f);
        const int64_t at[][2] = { { 1029, 5 }, { 700, 1039 }, { 3, 900 }, { 512, 512 } };
        for (int t = 0; t < 4; t++)
            set_got(&f, at[t][0], at[t][1], got_at(&f, at[t][0], at[t][1]) + (t == 3 ? 100.0 : 1.0));
        set_got(&f, 800, 2, NAN);
        tk_lab_report r;
        CHECK(compare(&f, 0, &r) == 1, "%s: not caught", cfg_name(&f));
        CHECK(r.checked == 1030 * 1040 && r.over == 5 && r.nonfinite == 1 && r.nbad == 5, "%s: %lld over",
              cfg_name(&f), (long long)r.over);
        /* storage order: row-major by row, column-major by column */
        int64_t first_row = l == 0 ? 3 : 800, first_col = l == 0 ? 900 : 2;
        CHECK(r.bad[0].row == first_row && r.bad[0].col == first_col, "%s: first bad (%lld, %lld)", cfg_name(&f),
              (long long)r.bad[0].row, (long long)r.bad[0].col);
        CHECK(r.worst_row == 800 && r.worst_col == 2, "%s: worst (%lld, %lld)", cfg_name(&f),
              (long long)r.worst_row, (long long)r.worst_col);
        /* the four digits, and the NaN's cell (6, 0) as the one exception map_is counts */
        static const int cells[][2] = { { 8, 0 }, { 5, 8 }, { 0, 7 }, { 4, 4 } };
        CHECK(map_is(&r.tiles, cells, 4, 'd') == 1 && r.tiles.cell[6 * r.tiles.cols] == 'N', "%s: tile map",
              cfg_name(&f));
        teardown(&f);
    }
}

static void test_map_dims_follow_layout(void)
{
    int tr, tc, wr, wc;
    /* k01_naive: 16x16 block tile; column-major swaps rows and cols */
    tk_lab_map_dims("k01_naive", TK_ROW_MAJOR, &tr, &tc, &wr, &wc);
    CHECK(tr == 16 && tc == 16, "row: %dx%d", tr, tc);
    tk_lab_map_dims("no_such_kernel", TK_COL_MAJOR, &tr, &tc, &wr, &wc);
    CHECK(tr == 128 && tc == 128 && wr == 0 && wc == 0, "default: %dx%d", tr, tc);
    for (int i = 0; i < 64; i++) {
        tk_kernel_props p;
        if (tk_kernel_get(i, &p) != TK_SUCCESS)
            break;
        tk_lab_map_dims(p.name, TK_COL_MAJOR, &tr, &tc, &wr, &wc);
        CHECK(!p.bm || (tr == p.bn && tc == p.bm), "%s col: %dx%d for BM %d BN %d", p.name, tr, tc, p.bm, p.bn);
    }
}

void tk_tests(void)
{
    TK_TEST(test_correct_result_passes);
    TK_TEST(test_one_wrong_element);
    TK_TEST(test_swapped_tiles);
    TK_TEST(test_unwritten_tile_and_nan);
    TK_TEST(test_severity_digits);
    TK_TEST(test_large_map_merges_cells);
    TK_TEST(test_threaded_compare);
    TK_TEST(test_map_dims_follow_layout);
}
