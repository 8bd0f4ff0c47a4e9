/* lab_compare.c - the element-wise tolerance and the comparison that turns
 * a kernel's C into a verdict and an error map. Pure host code: arrays in,
 * report out, so the CPU tests can plant bugs and watch them get caught. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "lab.h"

/* Why the tolerance is what it is. The kernel computes one element as
 *   acc = sum_k a_ik b_kj   (fp32 accumulation, any order or blocking)
 *   v   = fma(beta, c0, fl(alpha * acc)),   then stored as fp32 or bf16.
 * Let u = 2^-24 (fp32 unit roundoff), S = sum_k |a_ik||b_kj| (S_ij) and
 * T = |alpha| S + |beta c0|.
 * 1. Products of bf16 values (8-bit significands) are exact in fp32.
 * 2. Summing K terms in fp32: the worst case is K u S, but the rounding
 *    errors of random-sign data are independent and zero-mean, so with high
 *    probability they stay below lambda sqrt(K) u S (Higham & Mary's
 *    probabilistic bound: fails with probability <= 2 exp(-lambda^2 / 2),
 *    about 3e-14 per element at lambda = 8). Tensor cores truncate instead
 *    of rounding and drop bits when they align the products of one MMA
 *    (u -> 2u, plus a few ulps of the chunk's largest product, itself <= S),
 *    so: e_acc = 16 sqrt(K) u |alpha| S  (lambda = 8 times 2). Truncation is
 *    biased, but its errors are relative to the partial sums (~sqrt(k)/3
 *    for verify's uniform [-1, 1] data, not S ~ K/4), which keeps the biased
 *    sum ~9x under e_acc. verify's inputs are random-signed by design.
 * 3. The epilogue: fl(alpha acc) and the fma each round once: e_epi = 2 u T.
 * 4. bf16 output rounds v to nearest with 8 significant bits: at most half an
 *    ulp, <= 2^-8 |v| <= 2^-8 (|want| + e_acc + e_epi). This bound is tight:
 *    an honest bf16 result can use nearly all of its tolerance.
 * Against the exact fp64 reference the tolerance is e_acc + e_epi (+ 4.);
 * against cuBLAS, whose result carries the same kinds of error, it is twice
 * that. A wrong index or a lost k-block moves an element by about the size
 * of a typical value (sqrt(K)/3), hundreds of times this tolerance. */
double tk_lab_tolerance(int64_t k, float alpha, float beta, double s, double c0, double want, tk_dtype out,
                        int exact_ref)
{
    const double u = 0x1p-24;
    double as = fabs((double)alpha) * s;
    double t = as + (beta != 0.0f ? fabs((double)beta * c0) : 0.0);
    double e = 16.0 * sqrt((double)k) * u * as + 2.0 * u * t;
    if (out == TK_BF16)
        e += 0x1p-8 * (fabs(want) + e);
    return exact_ref ? e : 2.0 * e;
}

/* FP8 operands (issue 40). Products of two FP8 codes (at most 4 + 4
 * significant bits) are exact in fp32; a kernel that sums them in fp32
 * (k01_naive) and scales each 128-deep block's partial sum (two roundings a
 * block: at most 2 u of its sum of |terms|, 2 u S in all) is inside the bf16
 * derivation above, S being the sum of the scaled terms' magnitudes.
 * Hopper's FP8 wgmma does not sum in fp32. tests/gpu/fp8_mma measured it
 * (docs/NOTES.md, session 29; H200): with one product of 2^16 in a k32
 * instruction, or 2^16 already in the accumulator, products of 2^3 are
 * kept and products of 2^2 and below are dropped whole, 31 of them as
 * readily as one: every addend is aligned to the largest magnitude among
 * the accumulator and the instruction's products and truncated to 13 bits
 * after the point (2^-13 of it). The fast kernels therefore add each
 * 128-deep chunk's partial (four k32 instructions) to fp32 registers (the
 * promotion of DeepSeek-V3's report). A chunk's error is then below a few
 * 2^-13 S_c (S_c: the chunk's sum of |terms|, which bounds its partial
 * sums and products); measured on uniform full-range e4m3 data, the
 * largest |err| / (2^-13 S_c) over 32768 elements was 1.45 at K = 128, and
 * the chunks' errors add like random-signed ones: with nc = ceil(K / 128)
 * chunks of S / nc each, |err| <= 0.65 * 2^-13 S / sqrt(nc) at K = 1024,
 * 4096 and 16384. Tolerance: 8 * 2^-13 |alpha| S / sqrt(nc) on top of the
 * fp32 terms, 5.5x the largest seen at K = 128 and 12x at long K. Without
 * the promotion the error grows with K (||err|| / ||want|| 1.1e-4 at 128,
 * 2.9e-3 at 16384), which this tolerance does not allow for long K. A lost
 * 128-deep block moves an element by about sqrt(128) typical terms: far
 * past this bound at short K, at K = 32768 (where the fp32 terms dominate
 * it) only 1.2 times it in rms, so it leaves it in 40% of the elements
 * there (test_lab_fp8.c: 1731 of 4096). As with bf16, verify's data
 * are random-signed and independent (lab_f8verify.c's streams): a sum of
 * one-signed terms accumulates truncation error in one direction and
 * exceeds this bound. The model of the instruction (test_lab_fp8.c) errs
 * by up to 9.6 * 2^-13 S on 128-deep sums of squares, and such chunks'
 * errors keep their sign at any K; it gave an H200's sums bit for bit
 * where verify's B was A shifted by one (C(j + 1, j) a sum of squares:
 * fuzz --seed 1 case f163). On verify's data it stays below 1.9 * 2^-13
 * S_c over 1023 x 1023 x 128 and 2.2 over fuzz's first 300 FP8 cases. */
double tk_lab_tolerance_fp8(int64_t k, float alpha, float beta, double s, double c0, double want, tk_dtype out)
{
    const double nc = (double)((k + 127) / 128 > 0 ? (k + 127) / 128 : 1);
    const double as = fabs((double)alpha) * s;
    double e = tk_lab_tolerance(k, alpha, beta, s, c0, want, TK_F32, 1) + 2.0 * 0x1p-24 * as + 8.0 * 0x1p-13 * as / sqrt(nc);
    if (out == TK_BF16)
        e += 0x1p-8 * (fabs(want) + e);
    return e;
}

typedef struct elem {
    int64_t i, j;
    double got, want, tol;
} elem;

static void elem_full(const tk_lab_cmp_spec *s, int64_t i, int64_t j, elem *e)
{
    int64_t gi = tk_lab_index(s->layout, s->got.ld, i, j);
    int64_t wi = tk_lab_index(s->layout, s->want.ld, i, j);
    double c0 = s->beta != 0.0f ? tk_lab_load(s->c0.data, s->c0.type, tk_lab_index(s->layout, s->c0.ld, i, j)) : 0.0;
    double sv = tk_lab_load(s->s.data, s->s.type, tk_lab_index(s->layout, s->s.ld, i, j));
    e->i = i;
    e->j = j;
    e->got = tk_lab_load(s->got.data, s->got.type, gi);
    e->want = tk_lab_load(s->want.data, s->want.type, wi);
    e->tol = tk_lab_tolerance(s->k, s->alpha, s->beta, sv, c0, e->want, s->out, s->exact_ref);
}

static void elem_point(const tk_lab_cmp_spec *s, size_t t, elem *e)
{
    int64_t i = s->prow[t], j = s->pcol[t];
    double c0 = s->beta != 0.0f ? tk_lab_load(s->c0.data, s->c0.type, tk_lab_index(s->layout, s->c0.ld, i, j)) : 0.0;
    e->i = i;
    e->j = j;
    e->got = tk_lab_load(s->got.data, s->got.type, tk_lab_index(s->layout, s->got.ld, i, j));
    e->want = s->pwant[t];
    e->tol = tk_lab_tolerance(s->k, s->alpha, s->beta, s->ps[t], c0, e->want, s->out, s->exact_ref);
}

/* err/tol of an element: inf for NaN/Inf on either side. */
static double elem_ratio(const elem *e)
{
    if (!isfinite(e->got) || !isfinite(e->want))
        return INFINITY;
    double d = fabs(e->got - e->want);
    return d == 0.0 ? 0.0 : e->tol > 0.0 ? d / e->tol : INFINITY;
}

/* The relative error of an element as max_rel counts it: |d| / max(|want|,
 * tol); inf for NaN/Inf on either side. */
static double elem_rel(const elem *e)
{
    if (!isfinite(e->got) || !isfinite(e->want))
        return INFINITY;
    return fabs(e->got - e->want) / fmax(fabs(e->want), e->tol > 0.0 ? e->tol : 1e-300);
}

/* A map under construction: the worst ratio and relative error seen per
 * cell (-1: none). */
typedef struct map_acc {
    tk_lab_map *map;
    int64_t rows_total, cols_total;
    double worst[TK_LAB_MAP_MAX * TK_LAB_MAP_MAX];
    double rel[TK_LAB_MAP_MAX * TK_LAB_MAP_MAX];
} map_acc;

/* Covers rows x cols elements from (row0, col0) with cells of cr x cc,
 * merging neighbours until at most TK_LAB_MAP_MAX cells per side remain. */
static void map_init(map_acc *a, tk_lab_map *m, int64_t row0, int64_t col0, int64_t rows, int64_t cols, int64_t cr,
                     int64_t cc)
{
    int64_t nr = (rows + cr - 1) / cr, nc = (cols + cc - 1) / cc;
    int64_t fr = (nr + TK_LAB_MAP_MAX - 1) / TK_LAB_MAP_MAX, fc = (nc + TK_LAB_MAP_MAX - 1) / TK_LAB_MAP_MAX;
    memset(m, 0, sizeof *m);
    m->cell_rows = cr * fr;
    m->cell_cols = cc * fc;
    m->rows = (int)((rows + m->cell_rows - 1) / m->cell_rows);
    m->cols = (int)((cols + m->cell_cols - 1) / m->cell_cols);
    m->row0 = row0;
    m->col0 = col0;
    m->unit_rows = cr;
    m->unit_cols = cc;
    a->map = m;
    a->rows_total = rows;
    a->cols_total = cols;
    for (int c = 0; c < TK_LAB_MAP_MAX * TK_LAB_MAP_MAX; c++)
        a->worst[c] = a->rel[c] = -1.0;
}

static void map_add(map_acc *a, int64_t i, int64_t j, double ratio, double rel)
{
    int64_t r = i - a->map->row0, c = j - a->map->col0;
    if (r < 0 || c < 0 || r >= a->rows_total || c >= a->cols_total)
        return;
    int64_t at = (r / a->map->cell_rows) * a->map->cols + c / a->map->cell_cols;
    if (ratio > a->worst[at])
        a->worst[at] = ratio;
    if (rel > a->rel[at])
        a->rel[at] = rel;
}

static void map_finish(map_acc *a)
{
    for (int c = 0; c < a->map->rows * a->map->cols; c++) {
        double w = a->worst[c];
        char ch = ' ';
        if (w >= 0.0 && w <= 1.0)
            ch = '.';
        else if (isinf(w))
            ch = 'N';
        else if (w > 1.0) {
            double l = floor(log10(w));
            ch = (char)('0' + (l > 9.0 ? 9 : (int)l));
        }
        a->map->cell[c] = ch;
        a->map->rel[c] = (float)a->rel[c];
    }
}

static void account(tk_lab_report *r, const elem *e, double *sxy, double *sxx)
{
    double ratio = elem_ratio(e);
    r->checked++;
    if (!isfinite(e->got) || !isfinite(e->want))
        r->nonfinite++;
    else {
        r->max_abs = fmax(r->max_abs, fabs(e->got - e->want));
        r->max_rel = fmax(r->max_rel, elem_rel(e));
        *sxy += e->got * e->want;
        *sxx += e->got * e->got + e->want * e->want;
    }
    if (ratio > r->worst_ratio || r->checked == 1) {
        r->worst_ratio = ratio;
        r->worst_row = e->i;
        r->worst_col = e->j;
    }
    if (ratio > 1.0) {
        if (r->nbad < TK_LAB_SHOW)
            r->bad[r->nbad++] = (tk_lab_bad){ e->i, e->j, e->got, e->want, e->tol };
        r->over++;
    }
}

/* One thread's share of the first pass: outer rows/cols (whole C) or
 * points [lo, hi), with its own report, map and sums, merged afterwards. */
typedef struct part {
    const tk_lab_cmp_spec *s;
    int64_t lo, hi;
    tk_lab_report r;
    map_acc tiles;
    double sxy, sxx;
} part;

static void *part_run(void *arg)
{
    part *p = arg;
    const tk_lab_cmp_spec *s = p->s;
    elem e;
    if (s->want.data) {
        /* storage order, so the bad entries listed are the first in memory */
        int row = s->layout == TK_ROW_MAJOR;
        int64_t inner = row ? s->n : s->m;
        for (int64_t o = p->lo; o < p->hi; o++)
            for (int64_t q = 0; q < inner; q++) {
                elem_full(s, row ? o : q, row ? q : o, &e);
                account(&p->r, &e, &p->sxy, &p->sxx);
                map_add(&p->tiles, e.i, e.j, elem_ratio(&e), elem_rel(&e));
            }
    } else {
        for (int64_t t = p->lo; t < p->hi; t++) {
            elem_point(s, (size_t)t, &e);
            account(&p->r, &e, &p->sxy, &p->sxx);
            map_add(&p->tiles, e.i, e.j, elem_ratio(&e), elem_rel(&e));
        }
    }
    return NULL;
}

/* Folds part q into the running total p (q covers later elements). */
static void part_merge(part *p, const part *q)
{
    tk_lab_report *r = &p->r;
    const tk_lab_report *x = &q->r;
    if (x->checked && (!r->checked || x->worst_ratio > r->worst_ratio)) {
        r->worst_ratio = x->worst_ratio;
        r->worst_row = x->worst_row;
        r->worst_col = x->worst_col;
    }
    r->checked += x->checked;
    r->over += x->over;
    r->nonfinite += x->nonfinite;
    r->max_abs = fmax(r->max_abs, x->max_abs);
    r->max_rel = fmax(r->max_rel, x->max_rel);
    for (int b = 0; b < x->nbad && r->nbad < TK_LAB_SHOW; b++)
        r->bad[r->nbad++] = x->bad[b];
    p->sxy += q->sxy;
    p->sxx += q->sxx;
    for (int c = 0; c < TK_LAB_MAP_MAX * TK_LAB_MAP_MAX; c++) {
        p->tiles.worst[c] = fmax(p->tiles.worst[c], q->tiles.worst[c]);
        p->tiles.rel[c] = fmax(p->tiles.rel[c], q->tiles.rel[c]);
    }
}

int tk_lab_compare(const tk_lab_cmp_spec *s, tk_lab_report *r)
{
    enum { MAXT = 64 };
    memset(r, 0, sizeof *r);
    int64_t tr = s->tile_rows > 0 ? s->tile_rows : 128, tc = s->tile_cols > 0 ? s->tile_cols : 128;
    int full = s->want.data != NULL;
    int64_t count = full ? (s->layout == TK_ROW_MAJOR ? s->m : s->n) : (int64_t)s->npts;
    /* A whole 8192^2 C is ~67M elements: worth all CPUs; a few thousand points are not. */
    int nt = full && s->m * s->n >= (1 << 20) ? tk_lab_threads() : 1;
    nt = nt > MAXT ? MAXT : nt > count ? (int)(count > 0 ? count : 1) : nt;
    part *parts = calloc((size_t)nt, sizeof *parts);
    pthread_t tid[MAXT];
    int started[MAXT] = { 0 };
    if (!parts)
        nt = 0;   /* out of memory: report it as a failure below */
    for (int t = 0; t < nt; t++) {
        parts[t].s = s;
        parts[t].lo = count * t / nt;
        parts[t].hi = count * (t + 1) / nt;
        map_init(&parts[t].tiles, &parts[t].r.tiles, 0, 0, s->m, s->n, tr, tc);
        started[t] = t > 0 && pthread_create(&tid[t], NULL, part_run, &parts[t]) == 0;
    }
    for (int t = 0; t < nt; t++)
        if (!started[t])
            part_run(&parts[t]);
    for (int t = 0; t < nt; t++) {
        if (started[t])
            pthread_join(tid[t], NULL);
        if (t > 0)
            part_merge(&parts[0], &parts[t]);
    }
    if (!parts) {
        r->nonfinite = r->over = 1;
        return 1;
    }
    *r = parts[0].r;
    double sxy = parts[0].sxy, sxx = parts[0].sxx;
    map_acc tiles = parts[0].tiles, warps;
    free(parts);
    tiles.map = &r->tiles;
    map_finish(&tiles);
    r->similarity = sxx > 0.0 ? 1.0 - 2.0 * sxy / sxx : 0.0;
    int failed = r->over > 0 || r->nonfinite > 0;
    if (!failed || s->warp_rows <= 0 || s->warp_cols <= 0)
        return failed;
    /* Second pass over the worst tile at warp granularity. */
    int64_t r0 = r->worst_row / tr * tr, c0 = r->worst_col / tc * tc;
    map_init(&warps, &r->warps, r0, c0, tr, tc, s->warp_rows, s->warp_cols);
    r->has_warp_map = 1;
    elem e;
    if (full) {
        for (int64_t i = r0; i < r0 + tr && i < s->m; i++)
            for (int64_t j = c0; j < c0 + tc && j < s->n; j++) {
                elem_full(s, i, j, &e);
                map_add(&warps, i, j, elem_ratio(&e), elem_rel(&e));
            }
    } else {
        for (size_t t = 0; t < s->npts; t++) {
            elem_point(s, t, &e);
            map_add(&warps, e.i, e.j, elem_ratio(&e), elem_rel(&e));
        }
    }
    map_finish(&warps);
    return failed;
}

static void map_print(FILE *f, const tk_lab_map *m, const char *indent)
{
    for (int r = 0; r < m->rows; r++)
        fprintf(f, "%s|%.*s|\n", indent, m->cols, m->cell + r * m->cols);
}

void tk_lab_report_print(FILE *f, const tk_lab_report *r, const char *indent)
{
    fprintf(f, "%stile map: one cell = %lld x %lld of C (logical rows down, cols across); "
               "'.' ok, digit = floor(log10(err/tol)), 'N' NaN/Inf, ' ' not checked\n",
            indent, (long long)r->tiles.cell_rows, (long long)r->tiles.cell_cols);
    map_print(f, &r->tiles, indent);
    if (r->has_warp_map) {
        fprintf(f, "%sworst tile (rows %lld.., cols %lld..) by warp tile of %lld x %lld:\n", indent,
                (long long)r->warps.row0, (long long)r->warps.col0, (long long)r->warps.cell_rows,
                (long long)r->warps.cell_cols);
        map_print(f, &r->warps, indent);
    }
    for (int b = 0; b < r->nbad; b++)
        fprintf(f, "%s(row %lld, col %lld): got %.9g want %.9g tol %.3g\n", indent, (long long)r->bad[b].row,
                (long long)r->bad[b].col, r->bad[b].got, r->bad[b].want, r->bad[b].tol);
    if (r->over > r->nbad)
        fprintf(f, "%s... %lld more over tolerance\n", indent, (long long)(r->over - r->nbad));
}
