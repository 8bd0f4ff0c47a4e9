/* lab.h - the kernel lab's harness: random inputs, the fp64 CPU reference,
 * the element-wise comparison with its error map, verify, bench and info.
 *
 * Used by the CLI (tools/tilekit.c), the GPU tests and every kernel's tests.
 * Everything here works in the USER's view of a problem (tk_gemm_problem:
 * row- or column-major, logical row i and column j of C); the pure host parts
 * (numbers, reference, comparison, statistics) need no GPU.
 */
#ifndef TK_LAB_H
#define TK_LAB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "tilekit.h"

/* ---- numbers (lab_num.c) ---- */
float tk_lab_bf16_to_f32(uint16_t x);
uint16_t tk_lab_f32_to_bf16(float x);          /* round to nearest even; NaN stays NaN */
uint64_t tk_lab_mix64(uint64_t x);             /* the splitmix64 finalizer: a counter-based PRNG */
/* FP8 on the host (issue 40's reference): the OCP 8-bit formats. E4M3:
 * bias 7, no infinities, NaN S.1111.111, largest finite 448, subnormals
 * down to 2^-9. E5M2: bias 15, IEEE-like, infinities S.11111.00, NaN
 * S.11111.xx (xx != 0), largest finite 57344, subnormals down to 2^-16.
 * decode: the code's value exactly (NaN for the NaN codes). encode: x
 * rounded to the nearest code, ties to the even one (PTX's cvt.rn); a
 * magnitude past the largest finite after rounding becomes it with
 * satfinite (cvt's .satfinite; NaN stays NaN), else NaN (E4M3) or infinity
 * (E5M2); NaN gives 0x7F; the sign of zero is kept. */
typedef enum tk_lab_fp8 { TK_LAB_E4M3 = 0, TK_LAB_E5M2 = 1 } tk_lab_fp8;
double tk_lab_fp8_decode(uint8_t v, tk_lab_fp8 f);
uint8_t tk_lab_fp8_encode(double x, tk_lab_fp8 f, int satfinite);
/* The FP8 quantizer's reference (issue 40: what tk_quantize_fp8 must give
 * bit for bit). x: rows x cols fp32 values, row-major with leading
 * dimension ldx; q: the codes, rows x cols with leading dimension ldq;
 * scale: fp32, x ~ scale * decode(q) per group. A group's scale is
 * fl32(amax / fmax) (fmax: 448 or 57344; 1 where amax is 0; NaN where the
 * group holds a NaN, and then every code of it NaN), each code
 * encode(fl32(x / scale)) with satfinite.
 * Groups and where their scales go (tk_gemm_desc's layouts, version 4):
 *   TK_LAB_Q_TENSOR: one, scale[0];
 *   TK_LAB_Q_ROW: one per row, scale[r];
 *   TK_LAB_Q_1X128: per row and 128 columns, scale[r + (c / 128) * rows]
 *     (scale_a's: ld_scale_a = rows);
 *   TK_LAB_Q_128X128: per 128 x 128 block, scale[r / 128 + (c / 128) *
 *     ceil(rows / 128)] (scale_b's for a weight stored N x K: ld_scale_b =
 *     ceil(N / 128)).
 * The scales it writes: tk_lab_fp8_nscales. */
typedef enum tk_lab_qmode { TK_LAB_Q_TENSOR, TK_LAB_Q_ROW, TK_LAB_Q_1X128, TK_LAB_Q_128X128 } tk_lab_qmode;
int64_t tk_lab_fp8_nscales(tk_lab_qmode mode, int64_t rows, int64_t cols);
void tk_lab_fp8_quantize(const float *x, int64_t rows, int64_t cols, int64_t ldx, tk_lab_fp8 f, tk_lab_qmode mode,
                         uint8_t *q, int64_t ldq, float *scale);
/* Element i of the stream `seed`: uniform in [-1, 1] rounded to bf16, never 0.
 * Counter-based, so any slice can be filled by any thread deterministically. */
uint16_t tk_lab_rand_bf16(uint64_t seed, uint64_t i);
/* x[0..n) = elements 0..n-1 of stream seed, as bf16 or fp32 (fp32 gets the
 * same bf16-exact values). Multi-threaded for large n. */
void tk_lab_fill(void *x, tk_dtype type, size_t n, uint64_t seed);
/* The same into device memory x, on stream (lab_device.cu); a CUDA error code. */
int tk_lab_fill_device(void *x, tk_dtype type, size_t n, uint64_t seed, void *stream);
/* Device memory x = small integers of stream seed (tk_lab_rand_int in
 * lab_rand.h, in [-3, 3]) as bf16 or fp32, on stream (lab_device.cu): inputs whose
 * fp32 GEMM is exact. A CUDA error code. */
int tk_lab_fill_int_device(void *x, tk_dtype type, size_t n, uint64_t seed, void *stream);
/* Reads bytes (a multiple of 16) at x once with sms * 4 blocks (lab_device.cu): the
 * DRAM read probe; sink holds sms * 4 words. 0 or a cudaError_t. */
int tk_lab_read_device(const void *x, size_t bytes, void *sink, int sms, void *stream);
/* The same read with loads that allocate in L2: bench's flush (lab_bench.c). */
int tk_lab_flush_read_device(const void *x, size_t bytes, void *sink, int sms, void *stream);
int tk_lab_threads(void);                      /* worker threads to use: online CPUs, >= 1 */
/* body(ctx, lo, hi) over [0, n) in ranges, one per thread of
 * tk_lab_threads() (one range when n < 2^20), all done on return. */
void tk_lab_parallel(size_t n, void (*body)(void *ctx, size_t lo, size_t hi), void *ctx);

/* The offset of logical element (i, j) of a matrix in layout l with leading dimension ld. */
static inline int64_t tk_lab_index(tk_layout l, int64_t ld, int64_t i, int64_t j)
{
    return l == TK_ROW_MAJOR ? i * ld + j : j * ld + i;
}
double tk_lab_load(const void *x, tk_dtype t, int64_t idx);

/* ---- the problem of one test/bench case ---- */
typedef struct tk_lab_case {
    tk_layout layout;
    tk_op op_a, op_b;
    int64_t m, n, k;
    float alpha, beta;
    tk_dtype out;
    uint64_t seed;
    int pad;                    /* 0: tight leading dimensions; 1: padded (see tk_lab_ld); bench too */
    int offset;                 /* 0..TK_LAB_OFFSET_MAX: elements added to the A, B and C pointers,
                                   so a view starts off its buffer's alignment */
} tk_lab_case;

#define TK_LAB_OFFSET_MAX 7

/* The leading dimension of a stored matrix whose lines (rows when
 * row-major, columns when column-major) hold len elements: len (at least 1)
 * when pad == 0; else len rounded up to a multiple of 8, plus 8. So a padded
 * ld always exceeds len (every line has padding a kernel could wrongly read
 * or write) and is a multiple of 8 (16-byte vector loads stay legal, so
 * kernels that refuse odd ld still run at odd M, N, K). */
int64_t tk_lab_ld(int64_t len, int pad);
/* Elements of a buffer that holds an r x c matrix stored either way round
 * (r x c or c x r, as op and layout choose) with padded or tight ld, from
 * any offset: max(r * tk_lab_ld(c, 1), c * tk_lab_ld(r, 1)) + OFFSET_MAX + 1. */
size_t tk_lab_buf_elems(int64_t r, int64_t c);
/* p = the case over buffers a, b, c with leading dimensions from
 * tk_lab_ld(stored line length, c->pad). Buffers of tk_lab_buf_elems(m, k),
 * (k, n) and (m, n) elements serve every op, layout and pad of a shape: the
 * data are i.i.d., so one input buffer set per shape is enough. */
void tk_lab_problem(const tk_lab_case *c, const void *a, const void *b, void *cc, tk_gemm_problem *p);
/* "1000x1000x1000 row NT fp32 a=1.5 b=0.5", with " padded" when c->pad and
 * " offset N" when c->offset */
void tk_lab_case_name(const tk_lab_case *c, char *buf, size_t len);

/* ---- batched and grouped problems (lab_group.c), pure host code ----
 * The lab's view of tilekit.h's many products in one call (tk_group_kind):
 * a case (layout, ops, out, alpha, beta, seed, pad) plus the form, the
 * count and, for the grouped kinds, each group's size. The lab makes the
 * sizes on the host, so it knows every group's range where the library
 * reads them from device memory: the reference, the cuBLAS loops and the
 * check of what no group owns all go group by group on the host. Matrices
 * of a kind that has one per product or group are packed: a stride is one
 * stored matrix (lines x ld), or 0 for BATCHED's broadcast A or B. */
#define TK_LAB_GROUPS_MAX 1024      /* groups of one grouped case at most */
#define TK_LAB_BATCH_MAX 65536      /* products of one batched case at most */
#define TK_LAB_SIZE_MAX (INT64_C(1) << 24)   /* M, N, K and a groups' TOTAL at most, as --m */

/* How --groups gives the sizes. */
typedef enum tk_lab_dist {
    TK_LAB_DIST_LIST = 0,       /* one by one: "0,7,128,1,300" */
    TK_LAB_DIST_BALANCED,       /* "G:TOTAL:balanced": equal as possible */
    TK_LAB_DIST_SKEWED,         /* "G:TOTAL:skewed": G/4 groups (at least one) empty, the others Zipf-like
                                   (the r-th largest gets a share 1/r^1.5), in an order drawn from the seed */
    TK_LAB_DIST_EMPTY,          /* "G:TOTAL:empty": every 4th group (3, 7, ...) empty, the others balanced */
} tk_lab_dist;

typedef struct tk_lab_group_spec {
    tk_lab_dist dist;
    int count;                  /* groups: 1..TK_LAB_GROUPS_MAX */
    int64_t total;              /* the sizes' sum: 1..TK_LAB_SIZE_MAX */
    int64_t list[TK_LAB_GROUPS_MAX];    /* TK_LAB_DIST_LIST: the sizes (0..TK_LAB_SIZE_MAX each) */
} tk_lab_group_spec;

/* Parses a --groups SPEC: "SIZE[,SIZE..]" or "G:TOTAL:balanced|skewed|empty".
 * 0, or -1 with why saying what is wrong and what was expected, quoting
 * the text, without naming an option (the caller adds "--groups: " or
 * "FILE:LINE: "). skewed needs G >= 2, empty G >= 4 (they promise empty
 * groups). */
int tk_lab_group_spec_parse(const char *text, tk_lab_group_spec *s, char *why, size_t len);
/* The spec back as text ("8:4096:skewed"; a list as given, cut to len
 * with ".." when longer). */
void tk_lab_group_spec_str(const tk_lab_group_spec *s, char *buf, size_t len);
/* sizes[0..count) of s: the list, or the distribution, deterministic from
 * seed (skewed's order), summing to s->total. */
void tk_lab_group_sizes(const tk_lab_group_spec *s, uint64_t seed, int64_t *sizes);

/* "batch", "rows", "k", "masked" for TK_GROUP_BATCHED .. _MASKED ("dense" for 0). */
const char *tk_lab_group_kind_name(int kind);
/* --group-kind's words rows, k, masked: the kind, or 0. */
int tk_lab_group_kind_parse(const char *word);

typedef struct tk_lab_gcase {
    tk_lab_case c;              /* offset 0. BATCHED, MASKED: each product's M x N x K (MASKED: M the most
                                   rows of one); ROWS: M the rows of A and C, at least the sizes' sum
                                   (rows past it belong to no group); K: K at least the sizes' sum */
    int kind;                   /* TK_GROUP_BATCHED, _ROWS, _K, _MASKED */
    int count;                  /* products (BATCHED: 1..TK_LAB_BATCH_MAX) or groups (1..TK_LAB_GROUPS_MAX) */
    const int64_t *sizes;       /* count sizes (ROWS, MASKED: rows; K: K); NULL for BATCHED */
    int broadcast_a, broadcast_b;   /* BATCHED: one A (B) for every product: stride 0 */
    char label[64];             /* the sizes as given ("8:4096:skewed"), shown in names; "" for BATCHED */
} tk_lab_gcase;

/* One group (or product) of a case as a dense product: its sizes and the
 * element offsets of its A, B and C from the buffers' starts. */
typedef struct tk_lab_gpart {
    int64_t m, n, k;
    int64_t a_off, b_off, c_off;
} tk_lab_gpart;

/* d = the case over device (or host) buffers a, b, c: the problem (leading
 * dimensions tk_lab_ld of the stored lines, c.pad), kind, count and strides
 * (offs and group_error NULL: the caller's); *na, *nb, *nc (may be NULL):
 * the elements each buffer spans. */
void tk_lab_gcase_desc(const tk_lab_gcase *g, const void *a, const void *b, void *c, tk_gemm_desc *d, size_t *na,
                       size_t *nb, size_t *nc);
/* Group i's part, with d from tk_lab_gcase_desc. */
void tk_lab_gcase_part(const tk_lab_gcase *g, const tk_gemm_desc *d, int i, tk_lab_gpart *pt);
/* The part as a problem of d's ops, scalars and leading dimensions over
 * buffers a, b, c (d's own or others of the same shape: host copies, |A|). */
void tk_lab_gpart_problem(const tk_gemm_desc *d, const tk_lab_gpart *pt, const void *a, const void *b, void *c,
                          tk_gemm_problem *p);
/* offs[0..count): cumulative ends (ROWS, K) or row counts (MASKED), the
 * device array tilekit.h asks for; nothing for BATCHED. */
void tk_lab_gcase_offs(const tk_lab_gcase *g, int32_t *offs);
/* The flops the call does: 2 * sum over groups of m_g * n * k_g. */
double tk_lab_gcase_flop(const tk_lab_gcase *g);
/* The bytes of A and B the call must read: the parts of A and B that
 * groups with work (m_g, k_g > 0) multiply, each once (a broadcast A or B
 * once for all products; an empty group's B is not needed). The DRAM read
 * rate's numerator. */
double tk_lab_gcase_read_bytes(const tk_lab_gcase *g);
/* Whether element e of C's buffer (d's layout and strides) belongs to a
 * group's or product's C: what no group owns (rows past the groups, each
 * line's padding, BATCHED's and MASKED's rows past a product's) must not
 * be written. */
int tk_lab_gcase_owned(const tk_lab_gcase *g, const tk_gemm_desc *d, int64_t e);
/* Elements of C's buffer (nc of them, of d's type) that no group owns and
 * whose bits differ between got and img; the first at *first (-1 if none). */
int64_t tk_lab_gcase_untouched(const tk_lab_gcase *g, const tk_gemm_desc *d, const void *got, const void *img,
                               size_t nc, int64_t *first);
/* Where element e of C's buffer is, in words: "row 437 col 3 (past the
 * groups' 436 rows)", "product 2 row 9 col 0 (past its 8 rows)". */
void tk_lab_gcase_where(const tk_lab_gcase *g, const tk_gemm_desc *d, int64_t e, char *buf, size_t len);
/* "rows 8:4096:skewed 4096x28672x4096 row NT fp32 a=1 b=0" (M the rows of
 * all groups; K's case K the total); "batch 16 bcast-b 128x128x64 ...". */
void tk_lab_gcase_name(const tk_lab_gcase *g, char *buf, size_t len);
/* The form alone: "rows 8:4096:skewed", "batch 16 bcast-b". */
void tk_lab_gcase_form(const tk_lab_gcase *g, char *buf, size_t len);
/* g->label = g's sizes as a --groups list ("0,7,128"; cut with ".." past the label's room). */
void tk_lab_gcase_list_label(tk_lab_gcase *g);

/* ---- C's padding (lab_num.c) ----
 * With ldc > the logical line length, each line of C has padding (columns
 * n..ldc-1 of a row-major C, rows m..ldc-1 of a column-major one) that no
 * kernel may write. verify fills it with a sentinel, a NaN with a fixed
 * payload (its bits are compared, so no computed value can match by chance),
 * and checks it after the run. */
#define TK_LAB_PAD_F32 0x7fd5a5a5u
#define TK_LAB_PAD_BF16 0x7fd5u
/* Writes the sentinel into the padding of an m x n C (type t, layout l). */
void tk_lab_pad_fill(void *c, tk_dtype t, tk_layout l, int64_t m, int64_t n, int64_t ldc);
/* The padding elements that no longer hold the sentinel; the first of them in
 * storage order at logical (*row, *col) (col >= n for a row-major C, row >= m
 * for a column-major one). 0 when ldc is tight. */
int64_t tk_lab_pad_check(const void *c, tk_dtype t, tk_layout l, int64_t m, int64_t n, int64_t ldc, int64_t *row,
                         int64_t *col);

/* ---- fp64 CPU reference (lab_cpuref.c) ---- */
/* hp is a problem whose a, b, c point to HOST memory; c holds the initial C
 * (read only when beta != 0). For each point (row[t], col[t]) of C's logical
 * M x N: want[t] = alpha * sum_k op(A)_ik op(B)_kj + beta * C0_ij in fp64, and
 * s[t] = sum_k |op(A)_ik| |op(B)_kj| (may be NULL). Uses tk_lab_threads(). */
void tk_lab_ref_points(const tk_gemm_problem *hp, size_t npts, const int64_t *row, const int64_t *col, double *want,
                       double *s);
/* All M x N entries, written logical row-major (want[i*N + j]); s may be NULL. */
void tk_lab_ref_full(const tk_gemm_problem *hp, double *want, double *s);
/* The same with FP8 operands (issue 40): hp->a and hp->b point at one-byte
 * codes (lda, ldb in elements), decoded with fa and fb, each term scaled as
 * tk_gemm_desc version 4 says (scale_mode: TK_SCALE_TENSOR, _ROW, _BLOCK;
 * host copies of the scales): want = alpha sum_k (sa a)(sb b) + beta C0 and
 * s = sum_k |(sa a)(sb b)|. */
typedef struct tk_lab_fp8_ref {
    tk_lab_fp8 fa, fb;
    int scale_mode;
    const float *scale_a, *scale_b;
    int64_t ld_scale_a, ld_scale_b;
} tk_lab_fp8_ref;
void tk_lab_ref_full_fp8(const tk_gemm_problem *hp, const tk_lab_fp8_ref *f8, double *want, double *s);
/* Many FP8 products (tk_gemm_desc version 5, TK_GROUP_ROWS or
 * TK_GROUP_BATCHED; tilekit.h's "Many FP8 products"): each product is
 * tk_lab_ref_full_fp8's over its own A, B, C and scales (host copies):
 * product g reads hp->a + g * stride_a, hp->b + g * stride_b (codes), its
 * C0 at hp->c + g * stride_c, f8's scales + g * stride_scale_* (the
 * resolved strides: 0 where shared), and ROWS' group g is rows offs[g-1]
 * .. offs[g]-1 of the row-major M x N problem (offs: host copies, valid),
 * its rows reading their own rows of A, C0 and scale_a (TK_SCALE_ROW,
 * _BLOCK). want and s (s may be NULL): ROWS M x N (rows no group owns left
 * as they are), BATCHED count x M x N, logical row-major. */
typedef struct tk_lab_fp8_groups {
    int kind;                   /* TK_GROUP_ROWS or TK_GROUP_BATCHED */
    int count;
    const int32_t *offs;        /* ROWS: count cumulative end offsets; BATCHED: NULL */
    int64_t stride_a, stride_b, stride_c;
    int64_t stride_scale_a, stride_scale_b;
} tk_lab_fp8_groups;
void tk_lab_ref_grouped_fp8(const tk_gemm_problem *hp, const tk_lab_fp8_ref *f8, const tk_lab_fp8_groups *g,
                            double *want, double *s);

/* ---- comparison and error map (lab_compare.c), pure host code ---- */
/* The tolerance of one element; see the derivation in lab_compare.c.
 * s = sum_k |a||b|, c0 = initial C value (ignored when beta == 0), want =
 * the reference value; exact_ref: 1 if want is the fp64 reference, 0 if it
 * is another fp32-accumulating GEMM (cuBLAS) with errors of its own. */
double tk_lab_tolerance(int64_t k, float alpha, float beta, double s, double c0, double want, tk_dtype out,
                        int exact_ref);
/* The same for FP8 operands, s = sum_k |(sa a)(sb b)| (lab_compare.c says why). */
double tk_lab_tolerance_fp8(int64_t k, float alpha, float beta, double s, double c0, double want, tk_dtype out);

typedef struct tk_lab_mat {     /* a host matrix in C's layout */
    const void *data;
    tk_dtype type;
    int64_t ld;
} tk_lab_mat;

typedef struct tk_lab_cmp_spec {
    tk_layout layout;           /* of got, want, s and c0 */
    int64_t m, n, k;
    float alpha, beta;
    tk_dtype out;
    tk_lab_mat got;             /* the kernel's C */
    tk_lab_mat c0;              /* the initial C (used when beta != 0) */
    /* The reference: a whole matrix (want + s, both M x N in `layout`; cuBLAS)
     * when want.data is set, else npts sampled points (fp64 reference). */
    tk_lab_mat want, s;
    size_t npts;
    const int64_t *prow, *pcol;
    const double *pwant, *ps;
    int exact_ref;              /* see tk_lab_tolerance */
    /* Error-map cells in C's LOGICAL rows x cols: for a column-major problem
     * the kernel's BM x BN tile covers BN logical rows x BM logical columns
     * (normalization transposes C), so pass them swapped. 0 = 128. */
    int tile_rows, tile_cols;
    int warp_rows, warp_cols;   /* 0 = no warp map */
} tk_lab_cmp_spec;

#define TK_LAB_MAP_MAX 64       /* map cells per side before cells are merged */
#define TK_LAB_MSG_LEN 512      /* messages kept in results */
#define TK_LAB_SHOW 8           /* bad entries kept */

typedef struct tk_lab_bad {
    int64_t row, col;
    double got, want, tol;
} tk_lab_bad;

typedef struct tk_lab_map {
    int rows, cols;             /* cells */
    int64_t cell_rows, cell_cols;   /* C elements per cell */
    int64_t row0, col0;         /* C element of cell (0, 0) */
    int64_t unit_rows, unit_cols;   /* the tile (or warp tile) a cell is a whole number of */
    /* One char per cell, row-major: '.' ok, '0'..'9' = floor(log10(err/tol))
     * capped at 9 ('0' = up to 10x over), 'N' NaN/Inf, ' ' nothing checked. */
    char cell[TK_LAB_MAP_MAX * TK_LAB_MAP_MAX];
    /* The worst relative error of each cell's checked elements (|d| /
     * max(|want|, tol), as max_rel); inf for NaN/Inf, -1 nothing checked. */
    float rel[TK_LAB_MAP_MAX * TK_LAB_MAP_MAX];
} tk_lab_map;

typedef struct tk_lab_report {
    int64_t checked, over, nonfinite;
    double max_abs, max_rel;    /* max_rel = |d| / max(|want|, tol) */
    double similarity;          /* 1 - 2 sum(xy) / sum(x^2 + y^2), finite pairs */
    double worst_ratio;         /* max |d| / tol (inf for NaN) */
    int64_t worst_row, worst_col;
    int nbad;
    tk_lab_bad bad[TK_LAB_SHOW];/* the first over-tolerance entries, in storage order */
    tk_lab_map tiles;           /* the whole C */
    int has_warp_map;
    tk_lab_map warps;           /* the worst tile (not merged) at warp granularity */
} tk_lab_report;

/* Compares and fills r. Returns 0 when every entry is within tolerance and
 * finite, 1 otherwise. */
int tk_lab_compare(const tk_lab_cmp_spec *s, tk_lab_report *r);
/* The maps (when failed) and the first bad entries, each line led by indent. */
void tk_lab_report_print(FILE *f, const tk_lab_report *r, const char *indent);

/* ---- the error map as a picture (lab_errmap.c, PNG encoder in lab_png.c) ----
 * One cell per map cell (a BM x BN tile, or a block of them when the map
 * merged cells), coloured by the cell's worst relative error on a log scale
 * (one colour per decade), failing cells (a digit or 'N' in the text map)
 * outlined, unchecked cells grey; axes numbered in tile coordinates, a title
 * and the colour key. Pure host code. */
#define TK_LAB_ERRMAP_DECADES 8     /* colour bins: < 1e-7, 1e-7.., .., 1e-1.., >= 1 */

typedef struct tk_lab_errmap_geom {
    int width, height;          /* the picture, pixels */
    int x0, y0;                 /* top-left pixel of cell (0, 0) */
    int cell;                   /* pixels per cell side (cells are square) */
    int outline;                /* pixels of a failing cell's outline, inside the cell */
} tk_lab_errmap_geom;

/* Where everything goes for map m. */
void tk_lab_errmap_layout(const tk_lab_map *m, tk_lab_errmap_geom *g);
/* The colour of a cell whose worst relative error is rel (inf: NaN/Inf,
 * < 0: not checked) and of a failing cell's outline. */
void tk_lab_errmap_rgb(double rel, unsigned char rgb[3]);
void tk_lab_errmap_outline_rgb(unsigned char rgb[3]);
/* Writes the picture of m as a PNG to f, with title (printable ASCII;
 * letters are drawn upper case, characters the font lacks as blanks) on
 * top. 0, or -1 on a write error or out of memory. */
int tk_lab_errmap_png(FILE *f, const tk_lab_map *m, const char *title);

/* ---- PNG (lab_png.c): an 8-bit palette image, zlib stream of stored
 * (uncompressed) deflate blocks, so no zlib is needed ---- */
uint32_t tk_lab_crc32(uint32_t crc, const void *data, size_t n);      /* start with crc = 0 */
uint32_t tk_lab_adler32(uint32_t adler, const void *data, size_t n);  /* start with adler = 1 */
/* w x h pixels, one palette index per byte, row-major; palette of ncolors
 * (1..256) RGB triples. 0, or -1 on a write error or out of memory. */
int tk_lab_png_write(FILE *f, int w, int h, const unsigned char *index, const unsigned char (*palette)[3],
                     int ncolors);

/* ---- statistics (lab_stats.c) ---- */
/* Percentile q in [0, 1] of x[0..n), linear interpolation between order
 * statistics (numpy's default); x is sorted in place. n >= 1. */
double tk_lab_percentile(double *x, int n, double q);
double tk_lab_tflops(int64_t m, int64_t n, int64_t k, double ms);
/* Dense bf16 tensor flop per clock per SM for sm (e.g. 90), 0 if unknown. */
int tk_lab_flop_per_clk(int sm);
double tk_lab_peak_tflops(int sm, int sm_count, int clock_khz);

/* ---- verify (lab_verify.c) ---- */
typedef struct tk_lab_verify tk_lab_verify;

typedef struct tk_lab_verify_result {
    int outcome;                /* 0 passed, 1 failed, 2 skipped (kernel refuses), -1 error */
    char msg[TK_LAB_MSG_LEN];       /* the refusal or error text */
    int ref_full;               /* 1: every entry checked against the CPU reference */
    int64_t pad_writes;         /* elements of C's padding the kernel changed (a failure) */
    int64_t pad_row, pad_col;   /* the first of them, in C's logical coordinates */
    tk_lab_report vs_cublas, vs_ref;
    /* cuBLAS's own C at the reference's points: where it is off the fp64
     * reference (cuBLAS's bf16 split-K paths round partial sums), cuBLAS
     * cannot judge the case and the fp64 reference alone does. */
    tk_lab_report cublas_vs_ref;
    int cublas_off;
    int no_cublas;              /* cuBLAS was not run (tk_lab_verify_set_cublas) */
    int planted;                /* 1: the element (plant_row, plant_col) was changed (tk_lab_verify_set_plant) */
    int64_t plant_row, plant_col;
} tk_lab_verify_result;

/* A verify context owns a handle, a stream and the per-shape input cache. */
tk_status tk_lab_verify_open(tk_lab_verify **v, char *why, size_t len);
void tk_lab_verify_close(tk_lab_verify *v);
/* on = 0: run cases without cuBLAS, judged by the fp64 reference alone
 * (under compute-sanitizer's racecheck, cuBLAS's kernels hit a sanitizer
 * internal error); default 1. */
void tk_lab_verify_set_cublas(tk_lab_verify *v, int on);
/* A lab demonstration of the error map: from now on, element (row, col) of
 * each case's C (logical coordinates; cases smaller than that are left
 * alone) is changed after the kernel ran and before the comparison, by at
 * least 1 and by more than its own magnitude, so one tile fails. row < 0
 * turns it off (the default). The result says when it happened. */
void tk_lab_verify_set_plant(tk_lab_verify *v, int64_t row, int64_t col);
/* Models a GPU with less shared memory: from now on the context's device
 * offers at most `bytes` per block (a larger value than the device's own
 * changes nothing), so a kernel needing more is refused before launch with
 * the library's own message, as on such a GPU. */
void tk_lab_verify_set_smem_limit(tk_lab_verify *v, size_t bytes);
/* The report whose error map stands for the case: the comparison with
 * cuBLAS (every element) when cuBLAS ran and judged, else the one with the
 * fp64 reference (sampled elements). */
const tk_lab_report *tk_lab_verify_map_report(const tk_lab_verify_result *r);
/* The error-map cells for kernel's C in `layout`, in logical rows x cols:
 * the registry's BM x BN (128 x 128 if unset) and WM x WN (0 = none),
 * swapped for column-major, whose C the kernel sees transposed. */
void tk_lab_map_dims(const char *kernel, tk_layout layout, int *tile_rows, int *tile_cols, int *warp_rows,
                     int *warp_cols);
/* Runs one case of `kernel`, compares it with cuBLAS and the reference and
 * (padded cases) checks that C's padding was not written. */
void tk_lab_verify_run(tk_lab_verify *v, const char *kernel, const tk_lab_case *c, tk_lab_verify_result *r);
/* One summary line, then (on failure) the maps and bad entries. */
void tk_lab_verify_print(FILE *f, const char *kernel, const tk_lab_case *c, const tk_lab_verify_result *r);
/* The start of a verdict's line: "ok  |FAIL KERNEL NAME", or the whole
 * line of an error ("ERR  KERNEL NAME: msg") or a skip ("skip ...: msg"),
 * for which it returns 1 (0: the caller goes on with the figures). */
int tk_lab_verdict_head(FILE *f, const char *kernel, const char *name, int outcome, const char *msg);

/* ---- cuBLAS yardsticks of batched and grouped cases (lab_cublas.c) ---- */
typedef struct tk_lab_cublas tk_lab_cublas;
typedef struct tk_lab_cublaslt tk_lab_cublaslt;   /* FP8 cases' (lab_cublaslt.c) */

/* A cuBLAS handle of the lab's own, on stream. 0, or -1 with why. */
int tk_lab_cublas_open(tk_lab_cublas **out, void *stream, char *why, size_t len);
void tk_lab_cublas_close(tk_lab_cublas *x);
/* Takes the case's calls from d (tk_lab_gcase_desc over device buffers;
 * its pointers, scalars and type of C): a product per group or product
 * with rows and columns (K = 0 stays: C = beta * C), and the device arrays
 * of pointers cublasGemmGroupedBatchedEx reads. Synchronizes the stream.
 * 0, or -1 with why. */
int tk_lab_cublas_prepare(tk_lab_cublas *x, const tk_lab_gcase *g, const tk_gemm_desc *d, char *why, size_t len);
/* The prepared products as a host loop of cublasGemmEx on the stream. 0,
 * or -1 with why. */
int tk_lab_cublas_loop(tk_lab_cublas *x, char *why, size_t len);
/* The same as one cublasGemmGroupedBatchedEx (a cuBLAS group per product;
 * BATCHED: one of all). 0; -1 with why when cuBLAS refuses; 1 with why
 * when this cuBLAS has no such function (before 12.5). */
int tk_lab_cublas_grouped(tk_lab_cublas *x, char *why, size_t len);

/* ---- verify of batched and grouped cases (lab_gverify.c) ----
 * One call of the kernel on the whole case, C poisoned (NaN where beta is
 * 0, else random values inside the groups' C and NaN outside), then group
 * by group: the fp64 reference (every element of a group's C up to 65536
 * elements, else sampled), the cuBLAS loop (every element, with S = the
 * loop on |A| and |B|) and cublasGemmGroupedBatchedEx (every element),
 * each cuBLAS judging the groups where it agrees with the fp64 reference
 * itself; every element of C's buffer that no group owns must keep its
 * bits, and the library's group_error flag must stay 0 (the offsets are
 * valid). */
typedef struct tk_lab_gstat {   /* one yardstick's comparison, over the groups */
    int ran;                    /* 1: it ran (the figures below mean something) */
    int64_t checked, over, nonfinite;
    double max_abs, max_rel;
    int off;                    /* groups where this cuBLAS itself is off the fp64 reference (it then does not judge) */
} tk_lab_gstat;

typedef struct tk_lab_gverdict {    /* one group's or product's */
    int64_t m, n, k;
    int outcome;                /* 0 passed, 1 failed, 2 nothing to check (no rows) */
    int64_t checked;            /* elements compared with the fp64 reference */
    int64_t over, nonfinite;    /* over tolerance or not finite against a yardstick that judges */
    double max_abs, max_rel;    /* against the fp64 reference */
    double max_rel_loop;        /* against the cuBLAS loop; NaN when it did not run */
} tk_lab_gverdict;

typedef struct tk_lab_gverify_result {
    int outcome;                /* 0 passed, 1 failed, 2 skipped (the kernel refuses), -1 error */
    char msg[TK_LAB_MSG_LEN];   /* the refusal or error */
    int count;
    tk_lab_gverdict *group;     /* count verdicts; tk_lab_gverify_free */
    int failed, empty;          /* groups that failed, groups with nothing to check */
    int ref_full;               /* every owned element was checked against the fp64 reference */
    tk_lab_gstat vs_ref, vs_loop, vs_grouped;
    char grouped_why[TK_LAB_MSG_LEN];   /* why cublasGemmGroupedBatchedEx did not run; "" if it did */
    int64_t untouched_writes;   /* elements no group owns whose bits changed */
    char first_write[128];      /* where the first of them is (tk_lab_gcase_where) */
    int group_error;            /* the library set group_error for valid offsets */
    int worst;                  /* the first failed group; -1 */
    tk_lab_report worst_report; /* its comparison with the fp64 reference (the cuBLAS loop when only that failed) */
} tk_lab_gverify_result;

/* Runs the case on kernel ("auto" or a registry name; a refusal is a skip)
 * and judges it as above. cuBLAS is left out (the fp64 reference alone)
 * when the context says so (tk_lab_verify_set_cublas). r->group is
 * allocated: free it with tk_lab_gverify_free. */
void tk_lab_gverify_run(tk_lab_verify *v, const char *kernel, const tk_lab_gcase *g, tk_lab_gverify_result *r);
void tk_lab_gverify_free(tk_lab_gverify_result *r);
/* The case's line, a line per group (every group when there are at most
 * 16, else the failed ones, at most 16), then the failed group's map. */
void tk_lab_gverify_print(FILE *f, const char *kernel, const tk_lab_gcase *g, const tk_lab_gverify_result *r);
/* The verify context's parts that lab_gverify.c uses: its handle, stream,
 * whether cuBLAS runs, and its cuBLAS yardsticks (opened on first use; NULL
 * with why when they cannot be). */
tk_handle tk_lab_verify_handle(const tk_lab_verify *v);
void *tk_lab_verify_stream(const tk_lab_verify *v);
int tk_lab_verify_cublas_on(const tk_lab_verify *v);
tk_lab_cublas *tk_lab_verify_baselines(tk_lab_verify *v, char *why, size_t len);
/* The last batched or grouped case's buffers and cuBLAS results, kept in
 * the context for the next kernel on the same case (lab_gverify.c owns
 * what the slot holds; tk_lab_verify_close frees it). */
typedef struct tk_lab_gcache tk_lab_gcache;
tk_lab_gcache **tk_lab_verify_gcache(tk_lab_verify *v);
void tk_lab_gcache_free(tk_lab_gcache *c);

/* ---- epilogues (lab_epi.c: the reference; lab_everify.c: verify and
 * bench) ----
 * A dense row-major case with tilekit.h's fused epilogue (tk_gemm_desc
 * version 3). The reference is tilekit.h's formula in fp64 from fp64 dot
 * products of the bf16 inputs, the bias as stored and the activation in
 * double; with each value comes its tolerance (lab_epi.c says why). */
typedef struct tk_lab_epi {
    int kind;                   /* tk_epilogue_kind; TK_EPI_NONE: no epilogue */
    int act;                    /* tk_activation */
    int bias;                   /* 0 none, 1 per column (TK_BIAS_COLUMNS), 2 per row */
    int bias_bf16;              /* 1: the bias is bf16, else fp32 */
    int d_apart;                /* 1: D in a buffer of its own (tk_gemm_desc.d), else D is C */
    int aux;                    /* forward kinds: store z in aux (the backward kinds always read it) */
    int bias_grad;              /* backward kinds: the column sums */
    int up_split;               /* GATED: 1 a second weight b_up (B has N/2 columns), 0 B's right half */
} tk_lab_epi;

/* The sizes of a case's matrices: D's columns (out_cols), aux's (0: no
 * aux), B's columns as stored in op(B) (GATED with up_split: N/2), the
 * bias's length (0: none), bias_grad's (0: none; given with a forward
 * kind too, which the library refuses). */
typedef struct tk_lab_epi_dims {
    int64_t out_cols, aux_cols, b_cols, bias_len, grad_len;
} tk_lab_epi_dims;
void tk_lab_epi_dims_of(const tk_lab_case *c, const tk_lab_epi *e, tk_lab_epi_dims *d);

/* Names: "none", "bias_act", "gated", "backward", "gated_backward"; "none",
 * "relu", "gelu", "gelu_tanh", "silu". The parsers return the value or -1. */
const char *tk_lab_epi_kind_name(int kind);
int tk_lab_epi_kind_parse(const char *word);
const char *tk_lab_act_name(int act);
int tk_lab_act_parse(const char *word);
/* "gated silu bias col bf16 aux d up split" */
void tk_lab_epi_name(const tk_lab_epi *e, char *buf, size_t len);
/* act(x), act'(x) in double (activation.cuh's formulas). */
double tk_lab_act(int act, double x);
double tk_lab_act_grad(int act, double x);

/* The host inputs of a case (row-major, the case's ops; leading
 * dimensions in elements): b_up for GATED with up_split, else NULL; aux
 * (bf16) for the backward kinds; c the initial C (read when beta != 0). */
typedef struct tk_lab_epi_in {
    const uint16_t *a, *b, *b_up;
    int64_t lda, ldb;
    const void *bias;
    const uint16_t *aux;
    int64_t ldaux;
    const void *c;
    int64_t ldc;
} tk_lab_epi_in;

/* The fp64 reference of the whole case, written densely (row-major, no
 * padding): d and d_tol (M x out_cols): D and its tolerance for c->out;
 * z and z_tol (M x aux_cols, forward kinds with an aux; may be NULL
 * otherwise): z before its rounding to bf16 and the tolerance of the
 * kernel's bf16 aux against bf16(z); grad and grad_tol (grad_len; may be
 * NULL): the column sums. Uses tk_lab_threads(). */
void tk_lab_epi_ref(const tk_lab_case *c, const tk_lab_epi *e, const tk_lab_epi_in *in, double *d, double *d_tol,
                    double *z, double *z_tol, double *grad, double *grad_tol);

/* got (a matrix of type t, leading dimension ld, rows x cols) against
 * want +- tol (dense): the elements over tolerance or not finite (*over),
 * the largest |got - want| and |got - want| / max(|want|, tol), and the
 * first bad element (row, col; -1 if none). want_bf16: compare with want
 * rounded to bf16 (aux). Pure host code. */
typedef struct tk_lab_epi_cmp {
    int64_t checked, over;
    double max_abs, max_rel;
    int64_t bad_row, bad_col;
    double bad_got, bad_want, bad_tol;
} tk_lab_epi_cmp;
void tk_lab_epi_compare(const void *got, tk_dtype t, int64_t ld, int64_t rows, int64_t cols, const double *want,
                        const double *tol, int want_bf16, tk_lab_epi_cmp *r);

/* verify of one case: random inputs (never zero; the backward kinds' aux
 * N(0, 2)-like), D, aux and bias_grad poisoned with NaN and C, when D is
 * apart, holding values that must keep their bits; D, aux and bias_grad
 * against the reference; every guard element around D and aux (their
 * padding and a band past their ends) must keep its poison. A refusal is
 * outcome 2 with the status and message. */
typedef struct tk_lab_epi_result {
    int outcome;                /* 0 passed, 1 failed, 2 refused, -1 error */
    tk_status status;           /* the call's */
    char msg[TK_LAB_MSG_LEN];
    tk_lab_epi_cmp d, aux, grad;    /* checked == 0: not compared */
    int64_t guard_writes;       /* poison or C changed where nothing may be written */
    char guard_where[128];
} tk_lab_epi_result;

void tk_lab_epi_verify_run(tk_lab_verify *v, const char *kernel, const tk_lab_case *c, const tk_lab_epi *e,
                           tk_lab_epi_result *r);
void tk_lab_epi_verify_print(FILE *f, const char *kernel, const tk_lab_case *c, const tk_lab_epi *e,
                             const tk_lab_epi_result *r);
/* One JSON object (no separator) of a verify row. */
void tk_lab_epi_verify_json(FILE *f, const char *kernel, const tk_lab_case *c, const tk_lab_epi *e,
                            const tk_lab_epi_result *r);

/* ---- FP8 verify (lab_f8verify.c; issue 40) ----
 * One case (tk_lab_case: layout, ops, sizes, alpha, beta, out, seed, pad)
 * with FP8 operands: codes uniform over the format's range (exact: integers
 * in [-4, 4] with power-of-two scales, whose sums every kernel must return
 * exactly into fp32), fp32 scales of scale_mode (tk_scale_mode) in the
 * descriptor's layouts, C poisoned with NaN (values where beta != 0) with
 * a poisoned guard band after it; C against tk_lab_ref_full_fp8 within
 * tk_lab_tolerance_fp8, and every element outside M x N unchanged (all of
 * C on a refusal: outcome 2 with the status and message). */
typedef struct tk_lab_f8 {
    tk_lab_fp8 fa, fb;
    int scale_mode;             /* TK_SCALE_TENSOR, _ROW, _BLOCK */
    int exact;
} tk_lab_f8;
typedef struct tk_lab_f8_result {
    int outcome;                /* 0 passed, 1 failed, 2 refused, -1 error */
    tk_status status;
    char msg[TK_LAB_MSG_LEN];
    int64_t checked, over;
    double max_rel;
    int64_t bad_row, bad_col;
    double bad_got, bad_want, bad_tol;
    int64_t guard_writes;
    char guard_where[96];
} tk_lab_f8_result;
void tk_lab_f8_verify_run(tk_lab_verify *v, const char *kernel, const tk_lab_case *c, const tk_lab_f8 *f,
                          tk_lab_f8_result *r);
void tk_lab_f8_verify_print(FILE *o, const char *kernel, const tk_lab_case *c, const tk_lab_f8 *f,
                            const tk_lab_f8_result *r);
/* One JSON object (no separator) of a verify row. */
void tk_lab_f8_verify_json(FILE *o, const char *kernel, const tk_lab_case *c, const tk_lab_f8 *f,
                           const tk_lab_f8_result *r);
/* "e4m3 x e5m2, scale block[, exact]" */
void tk_lab_f8_name(const tk_lab_f8 *f, char *buf, size_t len);
/* Words of the CLI: "e4m3", "e5m2"; "tensor", "row", "block". The parsers
 * return the value (tk_lab_fp8; tk_scale_mode) or -1. */
const char *tk_lab_fp8_format_name(tk_lab_fp8 f);
int tk_lab_fp8_format_parse(const char *word);
const char *tk_lab_scale_mode_name(int mode);
int tk_lab_scale_mode_parse(const char *word);

/* The inputs of an FP8 case as verify, bench and fuzz make them (pure host
 * code): A's and B's codes over their stored lines (the case's layout,
 * ops and leading dimensions from tk_lab_problem), uniform over the
 * format's range, never 0 (exact: integers in [-4, 4]), and the scales of
 * f->scale_mode in tk_gemm_desc version 4's layouts, in [2^-8, 2^-6) and
 * no power of two (exact: 2^-e, e in 0..4; block: ld_scale_a = M,
 * ld_scale_b = ceil(N / 128)); all drawn from independent streams of
 * c->seed, on every CPU for large operands. */
typedef struct tk_lab_f8_data {
    tk_gemm_problem p;          /* the case's problem: its layout, ops, sizes, scalars, lda, ldb, ldc; pointers NULL */
    uint8_t *a, *b;             /* na, nb codes */
    float *sa, *sb;             /* nsa, nsb scales */
    size_t na, nb, nsa, nsb;
    int64_t ld_sa, ld_sb;       /* the descriptor's ld_scale_a, ld_scale_b (0 but for TK_SCALE_BLOCK) */
} tk_lab_f8_data;
/* 0, or -1 (out of host memory: d holds nothing). */
int tk_lab_f8_data_make(const tk_lab_case *c, const tk_lab_f8 *f, tk_lab_f8_data *d);
void tk_lab_f8_data_free(tk_lab_f8_data *d);
/* The scales' counts of case c in mode (tk_scale_mode) and their ld (0 but for block). */
void tk_lab_f8_scale_dims(const tk_lab_case *c, int mode, size_t *na, size_t *nb, int64_t *lda, int64_t *ldb);
/* out = the call of d's problem with f's version-4 fields over device
 * buffers a, b, c and scales sa, sb. */
void tk_lab_f8_desc(const tk_lab_f8 *f, const tk_lab_f8_data *d, const void *a, const void *b, void *c,
                    const float *sa, const float *sb, tk_gemm_desc *out);

/* ---- bench (lab_bench.c; the table, JSON and CSV in lab_report.c) ---- */
typedef struct tk_lab_bench tk_lab_bench;

typedef struct tk_lab_bench_opts {
    int hot;                    /* 1: no L2 flush between samples */
    double budget_s;            /* time per case after warm-up (default 2) */
    int min_samples, max_samples;   /* defaults 10, 200 */
    double spread;              /* stop when (p80 - p20) / median <= spread (default 0.01) */
    int no_probe;               /* 1: skip the DRAM read probe at open (tk_lab_bench_launch's use) */
} tk_lab_bench_opts;

typedef struct tk_lab_bench_row {
    char kernel[64];
    tk_lab_case c;
    int samples;
    int attempts;               /* times sampled: 1, more when the first spread widely (lab_bench.c) */
    double ms_min, ms_median, ms_p20, ms_p80, tflops, pct_peak;
    double ratio_cublas;        /* cublas_ms / kernel_ms; NaN when not measured */
    int nvml_mhz;               /* SM clock read after the samples; 0 if NVML is absent */
    char status[TK_LAB_MSG_LEN];    /* "ok" or why there is no timing */
    char chosen[64];            /* kernel "auto": the kernel auto-dispatch ran ("" if none) */
    char suite[32];             /* the shape's suite (set by the caller; "" outside a suite) */
    /* Batched and grouped rows (lab_gbench.c); form[0] == '\0' in a dense row. c is then the
     * gcase's (tk_lab_gcase.c), ratio_cublas against the cuBLAS loop of the same case. */
    char form[80];              /* "rows 8:4096:skewed", "k 0,7,128", "batch 16 bcast-b" */
    double flop;                /* the call's flops (tk_lab_gcase_flop): tflops = flop / time */
    double read_bytes;          /* A and B it must read (tk_lab_gcase_read_bytes) */
    double read_gbs;            /* read_bytes / ms_median, GB/s */
    double ratio_grouped;       /* cublasGemmGroupedBatchedEx median / this row's; NaN: not measured */
    double ratio_dense;         /* the loop of dense tilekit calls' median / this row's; NaN: not measured */
    /* FP8 rows (lab_f8bench.c): f8_set 1, ratio_cublas against cuBLASLt's FP8 matmul of the same case */
    int f8_set;
    tk_lab_f8 f8;
} tk_lab_bench_row;

typedef struct tk_lab_bench_info {
    char name[256];
    int sm, sm_count, clock_mhz, mem_clock_mhz, l2_bytes;
    double peak_tflops;         /* at clock_mhz, the max SM clock */
    int l2_flush;
    size_t flush_bytes;
    int nvml_mhz;               /* SM clock when opened; 0 if NVML is absent */
    double dram_read_gbs;       /* measured DRAM read bandwidth, GB/s (tk_lab_dram_read); 0: not measured */
} tk_lab_bench_info;

/* A timed row's p80 over 1.25 times its p20: timed through a slow phase of
 * the machine; bench times it again (lab_bench.c). lab_stats.c. */
int tk_lab_row_unstable(const tk_lab_bench_row *r);
/* Whether attempt cand replaces best among a row's attempts: the smaller
 * relative spread (p80 - p20) / median wins, not the faster median. */
int tk_lab_attempt_better(const tk_lab_bench_row *cand, const tk_lab_bench_row *best);

tk_status tk_lab_bench_open(tk_lab_bench **b, const tk_lab_bench_opts *o, char *why, size_t len);
void tk_lab_bench_close(tk_lab_bench *b);
const tk_lab_bench_info *tk_lab_bench_get_info(const tk_lab_bench *b);
/* Times one case; row->status says "ok" or why not. Returns 0 when timed. */
int tk_lab_bench_run(tk_lab_bench *b, const char *kernel, const tk_lab_case *c, tk_lab_bench_row *row);
/* One call of something timed, on b's stream (tk_lab_bench_stream): 0, or
 * -1 with why when it is refused. */
typedef int (*tk_lab_call)(tk_lab_bench *b, void *ctx, char *why, size_t len);
/* Times call as tk_lab_bench_run times a kernel: warm-up calls, then
 * samples with L2 flushed before each until the median is stable or the
 * budget is spent, timed again when unstable; fills row's times, samples,
 * attempts and clock, status "ok". 0, or -1 with row->status saying why. */
int tk_lab_bench_time(tk_lab_bench *b, tk_lab_call call, void *ctx, tk_lab_bench_row *row);
/* The context's handle and stream, for the lab's other timed calls (lab_gbench.c). */
tk_handle tk_lab_bench_handle(const tk_lab_bench *b);
void *tk_lab_bench_stream(const tk_lab_bench *b);
/* Its cuBLAS yardsticks of batched and grouped cases, opened on first use
 * (NULL with why when they cannot be). */
tk_lab_cublas *tk_lab_bench_baselines(tk_lab_bench *b, char *why, size_t len);
/* Its cuBLASLt handle for the FP8 yardstick, opened on first use (NULL with why). */
tk_lab_cublaslt *tk_lab_bench_cublaslt(tk_lab_bench *b, char *why, size_t len);
void tk_lab_bench_print_header(FILE *f, const tk_lab_bench_info *info);
void tk_lab_bench_print_row(FILE *f, const tk_lab_bench_row *row);
/* After the table of a suite run (rows with a suite name): for each kernel
 * but cuBLAS, per suite and overall, the geometric mean of x cuBLAS, the
 * slowest shape, the shapes below TK_LAB_SUITE_BELOW and those not measured. */
void tk_lab_bench_print_summary(FILE *f, const tk_lab_bench_row *rows, int n);
/* After it: auto-dispatch's decode rows (M <= 16, B of at least 64 MB) as
 * bytes of A + B + C per second against info->dram_read_gbs. */
void tk_lab_bench_print_decode_bw(FILE *f, const tk_lab_bench_info *info, const tk_lab_bench_row *rows, int n);
/* The header of the batched and grouped rows' table (printed before the
 * first of them: their columns differ from the dense rows'). */
void tk_lab_bench_print_gheader(FILE *f);

/* ---- bench of epilogue cases (lab_everify.c) ----
 * The call with its epilogue (tk_gemm_run, timed as the dense rows), and
 * as the yardstick cuBLAS's plain GEMM of the same product (no epilogue:
 * ratio_cublas is "x cuBLAS GEMM alone"). rows gets the cuBLAS row, then
 * one per kernel; printed on out as timed. Returns the rows written. */
int tk_lab_epi_bench_case(tk_lab_bench *b, const tk_lab_case *c, const tk_lab_epi *e, const char *const *kernels,
                          int nkernels, int no_cublas, FILE *out, tk_lab_bench_row *rows);

/* ---- bench of FP8 cases (lab_f8bench.c; the yardstick in lab_cublaslt.c) ----
 * The call through tk_gemm_run with tk_gemm_desc's version-4 fields over
 * random codes and scales (tk_lab_f8_data_make, uploaded once per case),
 * timed as the dense rows (tk_lab_bench_time), against the yardstick
 * timed in the same run on the same buffers: cuBLASLt's FP8 matmul
 * (TK_LAB_CUBLASLT), where cuBLASLt has the case's layout (A and B
 * K-major), formats and scale mode (lab_cublaslt.c says which);
 * ratio_cublas = its median / the row's. The rows carry f8 (f8_set 1) and
 * print in their own table (tk_lab_bench_print_f8header). */
#define TK_LAB_CUBLASLT "cublaslt"

/* A cuBLASLt handle and workspace of the lab's own. 0, or -1 with why. */
int tk_lab_cublaslt_open(tk_lab_cublaslt **out, char *why, size_t len);
void tk_lab_cublaslt_close(tk_lab_cublaslt *x);
/* Prepares cuBLASLt's FP8 matmul of d (FP8 fields set, over device
 * buffers; host_scale_b: a host copy of d->scale_b's values, read in block
 * mode). 0; 1 with why when cuBLASLt has no FP8 matmul for it (the layout,
 * formats, mode or alignment); -1 with why on an error. */
int tk_lab_cublaslt_prepare(tk_lab_cublaslt *x, const tk_gemm_desc *d, const float *host_scale_b, char *why,
                            size_t len);
/* One call of the prepared matmul on stream. 0, or -1 with why. */
int tk_lab_cublaslt_run(tk_lab_cublaslt *x, void *stream, char *why, size_t len);

/* Times the case: the cuBLASLt row first (unless no_cublas), then each of
 * kernels[0..nkernels) ("auto" and registry names). rows gets one entry
 * per row, status "ok" or why not (a refusal, "no cuBLASLt baseline: ...");
 * each is printed on out (NULL: nowhere) as soon as it is timed. Returns
 * the rows written. */
int tk_lab_f8_bench_case(tk_lab_bench *b, const tk_lab_case *c, const tk_lab_f8 *f, const char *const *kernels,
                         int nkernels, int no_cublas, FILE *out, tk_lab_bench_row *rows);
/* The dense FP8 tensor peak of the bench's GPU in TFLOP/s (sm_90: twice
 * in->peak_tflops, the bf16 one); 0 where unknown (no %peak then). */
double tk_lab_fp8_peak_tflops(const tk_lab_bench_info *in);
/* The header of the FP8 rows' table (printed before the first of them). */
void tk_lab_bench_print_f8header(FILE *f);

/* ---- bench of batched and grouped cases (lab_gbench.c) ----
 * A case is timed as one call of tilekit (tk_gemm_run of the whole case,
 * per kernel name or "auto") against yardsticks timed in the same run, on
 * the same buffers (random, never zero): the rows named below. */
#define TK_LAB_CUBLAS_LOOP "cublas-loop"        /* a host loop of cublasGemmEx, one per group with rows */
#define TK_LAB_CUBLAS_GROUPED "cublas-grouped"  /* one cublasGemmGroupedBatchedEx (cuBLAS 12.5 and newer) */
#define TK_LAB_DENSE_LOOP "dense-loop"          /* a host loop of tk_gemm_ex (auto), one per group */
#define TK_LAB_GBENCH_ROWS 64                   /* rows of one case at most: yardsticks and kernels */

typedef struct tk_lab_gbench_opts {
    int no_cublas;              /* 1: neither cuBLAS row */
    int no_grouped;             /* 1: no cublasGemmGroupedBatchedEx row */
    int vs_dense;               /* 1: the dense-loop row */
} tk_lab_gbench_opts;

/* Times the case: the yardsticks first (cuBLAS loop, cuBLAS grouped, dense
 * loop, as o asks), then each of kernels[0..nkernels). rows gets one entry
 * per row (at most nkernels + 3), each with status "ok" or why not, its
 * flops, bytes, TFLOP/s and ratios (tk_lab_gbench_ratios); each is printed
 * on out (NULL: nowhere) as soon as it is timed. Returns the rows written. */
int tk_lab_gbench_case(tk_lab_bench *b, const tk_lab_gcase *g, const char *const *kernels, int nkernels,
                       const tk_lab_gbench_opts *o, FILE *out, tk_lab_bench_row *rows);
/* The ratios of the rows of one case, rows[0..n): ratio_cublas against its
 * TK_LAB_CUBLAS_LOOP row, ratio_grouped against TK_LAB_CUBLAS_GROUPED,
 * ratio_dense against TK_LAB_DENSE_LOOP (each yardstick_ms / row_ms; NaN
 * where that row is missing or was not timed, and in the yardstick's own
 * row). Pure host code. */
void tk_lab_gbench_ratios(tk_lab_bench_row *rows, int n);
/* Whether a row's kernel is a yardstick ("cublas", the three above and
 * TK_LAB_CUBLASLT): the suite summary leaves them out. */
int tk_lab_is_yardstick(const char *kernel);

/* After a table of batched and grouped rows: each timed row's rate of
 * reading A and B (read_gbs) against info->dram_read_gbs, the figure that
 * matters where groups are tiny (decode: each expert's weights read for a
 * few tokens). */
void tk_lab_bench_print_read_rate(FILE *f, const tk_lab_bench_info *info, const tk_lab_bench_row *rows, int n);

/* The current GPU's DRAM read bandwidth in GB/s: the median of 10 reads
 * of a 1 GiB buffer (512 MiB if that cannot be had) after 2 warm-ups. 0 on
 * failure (why filled). */
double tk_lab_dram_read(int sm_count, char *why, size_t len);
/* The files of --json / --csv (the JSON schema is read by bench/ scripts).
 * When a row has a suite or a chosen kernel, every row gets "suite" and
 * "chosen" fields (columns), else the files are as before; with suite rows
 * the JSON also gets the "summary" that tk_lab_bench_print_summary prints. */
int tk_lab_bench_write_json(FILE *f, const tk_lab_bench_info *info, const tk_lab_bench_row *rows, int n);
int tk_lab_bench_write_csv(FILE *f, const tk_lab_bench_info *info, const tk_lab_bench_row *rows, int n);
/* s as a JSON string: quoted; quotes, backslashes and control characters escaped. */
void tk_lab_json_str(FILE *f, const char *s);
/* The SM clock in MHz via NVML (dlopen'ed), or 0 when unavailable. */
int tk_lab_nvml_sm_clock(int cuda_device);

/* ---- shape suites (lab_suite.c) ----
 * A suite file (bench/shapes/NAME.txt) lists the shapes a user runs, one
 * `M N K opA opB` line each (op n or t; row-major storage, so B with op t is
 * stored N x K like a torch.nn.Linear weight). '#' starts a comment (whole
 * line or trailing); blank lines are skipped; `include NAME` reads NAME.txt
 * of the including file's folder, whose shapes keep their own suite name.
 * Many products in one call are lines that start with their form, the
 * dimension the groups split written as a --groups SPEC (SIZE[,SIZE..] or
 * G:TOTAL:balanced|skewed|empty):
 *   rows SPEC N K opA opB        TK_GROUP_ROWS: M = the sizes' sum
 *   k M N SPEC opA opB           TK_GROUP_K: K = the sizes' sum
 *   masked SPEC M N K opA opB    TK_GROUP_MASKED: row counts, each <= M
 *   batch COUNT M N K opA opB    TK_GROUP_BATCHED: COUNT products of M x N x K
 * Pure host code: no GPU. */
#define TK_LAB_SUITE_DEPTH 8        /* include nesting at most */
#define TK_LAB_SUITE_MAX 65536      /* shapes in one suite at most */
#define TK_LAB_SUITE_BELOW 0.9      /* the summary counts shapes below this x cuBLAS */

typedef struct tk_lab_shape {
    int64_t m, n, k;            /* 1 .. 2^24 each, as the CLI's sizes (ROWS: m the sizes' sum; K: k) */
    tk_op op_a, op_b;
    int kind;                   /* 0: one product; else the line's tk_group_kind */
    int count;                  /* BATCHED: the products */
    char groups[128];           /* ROWS, K, MASKED: the SPEC as written (tk_lab_group_spec_parse) */
    char suite[32];             /* the stem of the file the line is in ("odd") */
    int line;                   /* its line number there */
} tk_lab_shape;

/* The file of suite `name`: a name with a '/' or ending in .txt is a path,
 * used as is; a bare NAME is NAME.txt in the first of $TILEKIT_SHAPES,
 * <dir of the running program>/../bench/shapes (the build tree),
 * <that dir>/../share/tilekit/shapes (an installed tree) and ./bench/shapes
 * that has it. Returns 0, or -1 with why naming the places looked in. */
int tk_lab_suite_find(const char *name, char *path, size_t len, char *why, size_t wlen);
/* Reads a suite (name or path as for tk_lab_suite_find) with its includes
 * into *out (malloc'ed, the caller frees it) and *n >= 1 shapes, in file
 * order. Returns 0, or -1 with *out = NULL and why = "FILE:LINE: what is
 * wrong" (a malformed line, a size out of 1..2^24, an op other than n or t,
 * an extra field, a bad groups SPEC or COUNT, an include that is missing,
 * cyclic or nested deeper than TK_LAB_SUITE_DEPTH, a file without shapes). */
int tk_lab_suite_load(const char *name_or_path, tk_lab_shape **out, int *n, char *why, size_t len);

typedef struct tk_lab_suite_stat {
    char suite[32];             /* "" for the overall entry */
    int shapes;                 /* shapes of the suite */
    int measured;               /* those with a ratio (finite, > 0) */
    int not_measured;           /* shapes - measured: excluded from the figures below */
    double geomean;             /* geometric mean of the measured ratios; NaN if none */
    double min;                 /* the smallest ratio; NaN if none */
    int min_index;              /* its index in ratio[]; -1 if none */
    int below;                  /* measured ratios < threshold */
} tk_lab_suite_stat;

/* The summary of a suite run. ratio[i] is shape i's speed against cuBLAS
 * (cublas_ms / kernel_ms; NaN, inf or <= 0 = not measured), suite[i] its
 * suite name (NULL = ""). Writes one entry per suite in the order of first
 * appearance, then the overall one (suite ""), into out[0..max). Returns
 * the number of entries (at most n + 1), or -1 when max is too small. */
int tk_lab_suite_summary(const double *ratio, const char *const *suite, int n, double threshold,
                         tk_lab_suite_stat *out, int max);

/* ---- fuzz (lab_fuzz.c) ----
 * Seeded random problems run on auto-dispatch and every kernel that accepts
 * them. Case i of seed s comes from its own counter-based stream, so any one
 * case is replayed without generating the others. Half the cases are exact:
 * small-integer inputs and alpha, beta that keep every fp32 value exact, so
 * every kernel must match the fp64 reference bit for bit (bf16 C: the exact
 * value rounded to nearest even); the others are random and judged with
 * tk_lab_tolerance. C sits between guard bands of TK_LAB_FUZZ_GUARD_BYTES
 * holding the padding sentinel; the bands, C's padding and the elements
 * before C's offset must keep it. The generator is pure host code.
 *
 * Batched and grouped cases ("many" cases: --forms batched,grouped, on by
 * default) come from a stream of their own, so the dense cases of a run
 * are the ones they always were: after every 4th dense case (index 3, 7,
 * ...) many case index / 4 runs (with dense left out of the forms, many
 * case i runs in dense case i's place). A many case has up to
 * TK_LAB_FUZZ_GROUPS groups (empty ones and sizes one off tile multiples
 * drawn often; rows or K past the groups at times) or up to 8 batched
 * products, every op, type of C and (batched) layout, random inputs; it
 * runs through verify's grouped path (tk_lab_gverify_run) judged by the
 * fp64 reference alone, with what no group owns checked untouched. Its
 * replay is --case gI.
 *
 * FP8 cases (--forms ...,fp8 or --dtype; tk_lab_fuzz_fcase_gen) come from
 * a stream of their own too, after dense case 2, 6, ... (case i in dense
 * case i's place without dense cases): formats, scale mode, exact or not,
 * through verify's FP8 check (tk_lab_f8_verify_run); a kernel without FP8
 * operands skips them. Their replay is --case fI. */
#define TK_LAB_FUZZ_MAX_SIZE 6000                   /* M, N, K at most: --max-size's default and limit */
#define TK_LAB_FUZZ_MAX_VOLUME (INT64_C(1) << 30)   /* M*N*K at most: --max-volume's default */
#define TK_LAB_FUZZ_SLOW_VOLUME (INT64_C(1) << 28)  /* k0* and k1* kernels skipped above this M*N*K */
#define TK_LAB_FUZZ_CASES 1000                      /* cases of a run without --cases or --budget */
#define TK_LAB_FUZZ_GUARD_BYTES 4096
#define TK_LAB_FUZZ_KERNELS 64                      /* subjects of one run at most */
#define TK_LAB_FUZZ_KEEP 32                         /* failures kept in the summary (the JSON's) */
#define TK_LAB_FUZZ_GROUPS 16                       /* groups of a many case at most */
#define TK_LAB_FUZZ_MANY_VOLUME (INT64_C(1) << 26)  /* flops / 2 of a many case at most (the reference is on the CPU) */

/* --forms: which kinds of case run; ALL, the default, is the first three
 * (epilogue cases come with --forms ...,epilogue or --epilogue, FP8 ones
 * with --forms ...,fp8 or --dtype). */
enum {
    TK_LAB_FORM_DENSE = 1, TK_LAB_FORM_BATCHED = 2, TK_LAB_FORM_GROUPED = 4, TK_LAB_FORM_ALL = 7,
    TK_LAB_FORM_EPILOGUE = 8, TK_LAB_FORM_FP8 = 16, TK_LAB_FORM_ANY = 31
};

typedef struct tk_lab_fuzz_params {
    int64_t max_size;           /* 1..TK_LAB_FUZZ_MAX_SIZE */
    int64_t max_volume;         /* >= 1 */
} tk_lab_fuzz_params;

typedef struct tk_lab_fuzz_case {
    uint64_t seed;              /* where it came from: the run's seed and the case's index */
    int64_t index;
    int exact;                  /* 1: small-integer inputs, checked bit for bit; 0: random, with tolerance */
    tk_layout layout;
    tk_op op_a, op_b;
    tk_dtype out;
    int64_t m, n, k;
    float alpha, beta;
    int64_t lda, ldb, ldc;
    int off_a, off_b, off_c;    /* 0..TK_LAB_OFFSET_MAX elements from the start of each buffer */
    uint64_t data_seed;         /* the inputs' streams */
} tk_lab_fuzz_case;

typedef enum tk_lab_fuzz_operand { TK_LAB_FUZZ_A, TK_LAB_FUZZ_B, TK_LAB_FUZZ_C } tk_lab_fuzz_operand;

/* A batched or grouped case of the fuzzer, copyable: g.sizes is NULL
 * here, tk_lab_fuzz_gcase_view points a copy of g at sizes. */
typedef struct tk_lab_fuzz_gcase {
    uint64_t seed;              /* the run's seed and the case's index in the many stream */
    int64_t index;
    tk_lab_gcase g;             /* g.c.seed: the inputs' stream; g.label: the sizes, listed */
    int64_t sizes[TK_LAB_FUZZ_GROUPS];
} tk_lab_fuzz_gcase;

/* An epilogue case of the fuzzer (a stream of its own: "--case eI"): a
 * row-major problem with a fused epilogue, as verify --epilogue runs it. */
typedef struct tk_lab_fuzz_ecase {
    uint64_t seed;              /* the run's seed and the case's index in the epilogue stream */
    int64_t index;
    tk_lab_case c;              /* c.seed: the inputs' stream */
    tk_lab_epi e;
} tk_lab_fuzz_ecase;

/* An FP8 case of the fuzzer (a stream of its own: "--case fI"): a dense
 * problem with FP8 operands, as verify --dtype runs it. */
typedef struct tk_lab_fuzz_fcase {
    uint64_t seed;              /* the run's seed and the case's index in the FP8 stream */
    int64_t index;
    tk_lab_case c;              /* c.seed: the inputs' stream */
    tk_lab_f8 f;
} tk_lab_fuzz_fcase;

/* Case `index` of stream `seed`: M, N, K in 1..max_size (small values,
 * multiples of 8..256 and one off them, primes, log-uniform), M*N*K <=
 * max_volume; every op, layout and type of C; alpha, beta from {0, 1, -1,
 * 0.5, 2, -3, random, 65536 (alpha)}; leading dimensions tight, +1, +7, +8
 * or a multiple of 8 plus extra; pointer offsets 0..7. */
void tk_lab_fuzz_case_gen(const tk_lab_fuzz_params *p, uint64_t seed, int64_t index, tk_lab_fuzz_case *c);
/* The stored lines of an operand (rows of a row-major matrix, columns of a
 * column-major one) and their logical length; its ld >= len, and its buffer
 * holds off + lines * ld elements. */
void tk_lab_fuzz_extent(const tk_lab_fuzz_case *c, tk_lab_fuzz_operand x, int64_t *lines, int64_t *len);
/* p = the case over buffers a, b, c (its offsets added); NULL stays NULL. */
void tk_lab_fuzz_problem(const tk_lab_fuzz_case *c, const void *a, const void *b, void *cc, tk_gemm_problem *p);
/* "517x256x63 row TN bf16 exact a=2 b=0 lda=64 ldb=256 ldc=259 off=0,0,3" */
void tk_lab_fuzz_case_name(const tk_lab_fuzz_case *c, char *buf, size_t len);
/* Many case `index` of stream `seed` with the kinds `forms` allows (its
 * batched and grouped bits; at least one): each group's size and each
 * dimension the groups leave whole within max_size and 1024 (the one they
 * split is their sum, plus a tail at times), flops / 2 within max_volume
 * and TK_LAB_FUZZ_MANY_VOLUME (where the sizes alone do not exceed it). */
void tk_lab_fuzz_gcase_gen(const tk_lab_fuzz_params *p, unsigned forms, uint64_t seed, int64_t index,
                           tk_lab_fuzz_gcase *g);
/* g's case as verify takes it; g->sizes point into f, which must outlive it. */
void tk_lab_fuzz_gcase_view(const tk_lab_fuzz_gcase *f, tk_lab_gcase *g);
/* Epilogue case `index` of stream `seed`: a kind (any, or `kind` when it
 * is one: tk_epilogue_kind), an activation (not none where the kind needs
 * one), a bias (none, per column or per row, fp32 or bf16; none for the
 * backward kinds), aux, D apart, bias_grad (backward kinds), the up half
 * (gated), ops, the type of D, padding, alpha, beta (0 for
 * gated_backward); M, N, K as the dense cases draw them within max_size
 * and 1024 (N even for the gated kinds), M * N * K within max_volume and
 * TK_LAB_FUZZ_MANY_VOLUME: every case a valid one, which auto-dispatch must
 * run. */
void tk_lab_fuzz_ecase_gen(const tk_lab_fuzz_params *p, int kind, uint64_t seed, int64_t index,
                           tk_lab_fuzz_ecase *x);
/* FP8 case `index` of stream `seed`: the formats of A and B (fa, fb:
 * tk_lab_fp8, or -1: drawn), the scale mode (mode: tk_scale_mode, or 0:
 * drawn), exact (integer codes, power-of-two scales, alpha 1, 2, 0.5 or
 * -1, beta 0: C checked bit for bit when fp32) or not, ops, layout
 * (row-major for block scales: tilekit.h), the type of C, padding, alpha,
 * beta; M, N, K as the dense cases draw them within max_size and 1024, M
 * * N * K within max_volume and TK_LAB_FUZZ_MANY_VOLUME (the reference is
 * all of C on the CPU), K rounded up to a multiple of 128 for block
 * scales: every case a valid one, which auto-dispatch must run. The
 * draws do not depend on fa, fb and mode. */
void tk_lab_fuzz_fcase_gen(const tk_lab_fuzz_params *p, int fa, int fb, int mode, uint64_t seed, int64_t index,
                           tk_lab_fuzz_fcase *x);
/* --forms LIST ("dense,batched,grouped,epilogue,fp8", any of them,
 * comma-separated) into TK_LAB_FORM_* bits. 0, or -1 with why naming
 * --forms. */
int tk_lab_fuzz_parse_forms(const char *list, unsigned *forms, char *why, size_t len);

typedef struct tk_lab_fuzz_opts {
    uint64_t seed;
    int64_t cases;              /* run cases 0..cases-1 (budget_s == 0) */
    double budget_s;            /* > 0: cases 0, 1, ... until this many seconds have passed */
    int64_t only_case;          /* >= 0: only this case (a replay); -1: cases or budget_s */
    const char *const *kernels; /* NULL-terminated: "auto" and registry names but cublas; NULL: all of them */
    tk_lab_fuzz_params gen;
    FILE *log;                  /* failure lines go here (NULL: nowhere) */
    unsigned forms;             /* TK_LAB_FORM_* bits (default all): which kinds of case run */
    int only_many;              /* with only_case >= 0: replay many case only_case (--case gI) */
    int only_epi;               /* with only_case >= 0: replay epilogue case only_case (--case eI) */
    int epi_kind;               /* epilogue cases: this tk_epilogue_kind only (--epilogue KIND); 0: any */
    int only_f8;                /* with only_case >= 0: replay FP8 case only_case (--case fI) */
    int fp8_a, fp8_b;           /* FP8 cases: A's, B's tk_lab_fp8 (--dtype, --dtype-b); -1: drawn */
    int fp8_mode;               /* FP8 cases: this tk_scale_mode (--scale); 0: drawn */
} tk_lab_fuzz_opts;

typedef struct tk_lab_fuzz_stat {
    char name[64];
    int64_t checked;            /* kernel-cases run and judged (failed ones included) */
    int64_t exact;              /* those in exact mode */
    int64_t skipped;            /* refused by tk_kernel_supports */
    int64_t capped;             /* slow kernels left out above TK_LAB_FUZZ_SLOW_VOLUME */
    int64_t failed;
} tk_lab_fuzz_stat;

typedef struct tk_lab_fuzz_failure {
    char kernel[80];            /* "auto -> k30_wgmma_tma" for auto-dispatch */
    int many;                   /* 1: a batched or grouped case (g), else the dense case c */
    int epi;                    /* 1: an epilogue case (e) */
    int fp8;                    /* 1: an FP8 case (fc) */
    tk_lab_fuzz_case c;
    tk_lab_fuzz_gcase g;
    tk_lab_fuzz_ecase e;
    tk_lab_fuzz_fcase fc;
    char what[TK_LAB_MSG_LEN];
} tk_lab_fuzz_failure;

typedef struct tk_lab_fuzz_summary {
    int64_t cases;              /* dense cases run */
    int64_t many;               /* batched and grouped cases run */
    int64_t epi;                /* epilogue cases run */
    int64_t fp8;                /* FP8 cases run */
    tk_lab_fuzz_stat total;     /* name "" */
    int nkernels;
    tk_lab_fuzz_stat kernel[TK_LAB_FUZZ_KERNELS];
    tk_lab_fuzz_case largest;   /* by M*N*K; index -1 before any case */
    double seconds;
    int nkept;
    tk_lab_fuzz_failure kept[TK_LAB_FUZZ_KEEP];   /* the first failures */
    char error[TK_LAB_MSG_LEN]; /* why the run could not start or stopped early; "" if neither */
} tk_lab_fuzz_summary;

/* cases TK_LAB_FUZZ_CASES, no budget, only_case -1, all kernels, the
 * default sizes, seed 1, log stdout */
void tk_lab_fuzz_defaults(tk_lab_fuzz_opts *o);
/* 0, or -1 with why naming the bad option as the CLI spells it (--max-size,
 * --kernel, ...). Needs no GPU. */
int tk_lab_fuzz_check(const tk_lab_fuzz_opts *o, char *why, size_t len);
/* The command that replays one kernel-case of a run of o:
 * "tilekit fuzz --seed S --case I --kernel NAME" (plus the size options
 * and --forms where they are not the defaults); many: "--case gI". */
void tk_lab_fuzz_replay(const tk_lab_fuzz_opts *o, int64_t index, const char *kernel, char *buf, size_t len);
void tk_lab_fuzz_replay_many(const tk_lab_fuzz_opts *o, int64_t index, const char *kernel, char *buf, size_t len);
void tk_lab_fuzz_replay_epi(const tk_lab_fuzz_opts *o, int64_t index, const char *kernel, char *buf, size_t len);
void tk_lab_fuzz_replay_f8(const tk_lab_fuzz_opts *o, int64_t index, const char *kernel, char *buf, size_t len);
/* Runs the cases of o; each failure is one line on o->log with its replay
 * command. TK_SUCCESS when the cases ran (failures or not: see s); the
 * check's TK_ERR_INVALID_VALUE, TK_ERR_NO_DEVICE and the like with why
 * filled when nothing could run; TK_ERR_CUDA when a CUDA error stopped the
 * run part way (s covers the cases before it, s->error says why). */
tk_status tk_lab_fuzz_run(const tk_lab_fuzz_opts *o, tk_lab_fuzz_summary *s, char *why, size_t len);
/* One line per kernel, then the summary line (cases, kernel-cases checked,
 * skipped, capped, failures, the largest problem). */
void tk_lab_fuzz_print_summary(FILE *f, const tk_lab_fuzz_opts *o, const tk_lab_fuzz_summary *s);
/* The summary as JSON; 0, or -1 on a write error. */
int tk_lab_fuzz_write_json(FILE *f, const tk_lab_fuzz_opts *o, const tk_lab_fuzz_summary *s);

/* ---- info (lab_info.c) ---- */
/* Device properties, the table's families and configurations, and
 * per-kernel resources on f; kernels = NULL for all, else a
 * NULL-terminated list of names. Without a GPU: the table alone. With json,
 * the same as one JSON document there (device null and device_error
 * without a GPU; resources [] then). Returns 0 (with or without a GPU), or
 * 1 when a kernel's resources could not be read on the GPU (a CUDA error). */
int tk_lab_info(FILE *f, const char *const *kernels, FILE *json);

/* What one kernel asks of the device (its cudaFuncAttributes and launch
 * resources) and the occupancy that follows, as `tilekit info` prints it. */
typedef struct tk_lab_kinfo {
    int regs;                   /* registers per thread; -1: unknown (a library call such as cuBLAS) */
    size_t local_bytes;         /* local memory per thread: spills (and local arrays) */
    size_t static_smem, dyn_smem;
    int threads, blocks_per_sm;
    double occupancy;           /* % of the SM's threads */
} tk_lab_kinfo;

struct tk_kernel;
struct tk_device;
/* k's figures on device d (lab_info.c). 0; 1 for a library call (cuBLAS:
 * no kernel of ours, ki->regs -1); -1 on a CUDA error (why filled). */
int tk_lab_kernel_info(const struct tk_kernel *k, const struct tk_device *d, tk_lab_kinfo *ki, char *why,
                       size_t len);

/* ---- launch (lab_bench.c): one call for an outside profiler ----
 * After WARMUP unprofiled calls, `calls` calls of kernel on the case between
 * cudaProfilerStart and cudaProfilerStop, then a synchronize: what ncu
 * profiles with --profile-from-start off. Fills *ki (regs -1 for cuBLAS)
 * and row->chosen (kernel "auto"); returns 0, or -1 with row->status
 * saying why. */
int tk_lab_bench_launch(tk_lab_bench *b, const char *kernel, const tk_lab_case *c, int calls, tk_lab_bench_row *row,
                        tk_lab_kinfo *ki);

/* ---- profile (lab_profile.c, lab_ncu.c) ----
 * `tilekit profile` runs `tilekit launch` under Nsight Compute (ncu) with
 * the metrics of one table (lab_profile.c, a comment per metric), reads
 * the CSV ncu prints (--csv --page raw --print-units base: a header row,
 * a units row, one row per profiled kernel; numbers with thousands
 * separators) and prints one screen. The parsing, the derived figures, the
 * screen and the JSON are pure host code, tested on saved ncu output. */
#define TK_LAB_METRICS 57           /* entries of the table */
#define TK_LAB_PROF_KERNELS 16      /* profiled kernels kept per call */
#define TK_LAB_TOP_STALLS 4         /* stall reasons on the screen */

typedef enum tk_lab_metric_unit {
    TK_LAB_MU_PCT, TK_LAB_MU_NS, TK_LAB_MU_HZ, TK_LAB_MU_BYTES, TK_LAB_MU_BYTES_PER_S, TK_LAB_MU_COUNT,
    TK_LAB_MU_RATIO
} tk_lab_metric_unit;

typedef struct tk_lab_metric {
    const char *ncu;            /* the metric as ncu names it ("dram__bytes_read.sum") */
    const char *key;            /* its key in profile's JSON ("dram_read_bytes") */
    tk_lab_metric_unit unit;    /* what the value is in (base units: bytes, ns, Hz) */
    const char *meaning;        /* what it measures, in a few words (stall reasons: shown on the screen) */
} tk_lab_metric;

int tk_lab_metric_count(void);
const tk_lab_metric *tk_lab_metric_at(int i);
int tk_lab_metric_find(const char *ncu_name);   /* its index, or -1 */
/* The table's names, comma-separated, for ncu --metrics; the length it
 * needs (snprintf's convention). */
size_t tk_lab_metric_list(char *buf, size_t len);

typedef struct tk_lab_prof_kernel {
    char function[256];         /* ncu's "Kernel Name": "void k31_kernel<0, 1>(k30_params)" */
    double v[TK_LAB_METRICS];   /* in the table's order; NaN: not reported */
} tk_lab_prof_kernel;

typedef struct tk_lab_profile {
    char kernel[64];            /* the registry name asked for ("cublas", "auto") */
    char ran[96];               /* what `tilekit launch` says ran ("k31_wgmma_cluster"); "" unknown */
    char device[128];           /* ncu's device__attribute_display_name; "" unknown */
    int nkernels;               /* profiled kernel launches read (at most TK_LAB_PROF_KERNELS) */
    int main;                   /* the longest of them: the one the screen shows */
    tk_lab_prof_kernel k[TK_LAB_PROF_KERNELS];
    tk_lab_kinfo ki;            /* tilekit's own figures from the launch line; regs -1: none */
} tk_lab_profile;

/* Reads ncu's output text (the program's own lines, ==PROF== lines and
 * then the CSV, as ncu prints them to stdout) into p (kernel left as it
 * is). 0, or -1 with why (no CSV header, a row of the wrong length, no
 * kernel row). Values in other units than the base ones (Kbyte, usecond,
 * Mbyte/s, ...) are scaled to base units; "n/a" and the like become NaN. */
int tk_lab_profile_parse(const char *text, tk_lab_profile *p, char *why, size_t len);
/* The value of metric ncu_name for p's main kernel; NaN when not reported
 * or not in the table. */
double tk_lab_profile_value(const tk_lab_profile *p, const char *ncu_name);

/* Figures computed from a kernel's metrics. */
typedef struct tk_lab_prof_derived {
    double occ_achieved, occ_theoretical;   /* % of the SM's warps */
    int limit_blocks;           /* blocks per SM: the smallest of the launch__occupancy_limit_* */
    char limiter[96];           /* the resources that allow only that many: "registers, shared memory" */
    /* global accesses, 32-byte sectors per warp-level request: actual and
     * ideal (bytes the threads asked for / 32 per request: every sector
     * touched is used whole); NaN when there were none or ncu gave no bytes */
    double ld_spr, ld_ideal, st_spr, st_ideal, cp_spr, cp_ideal;
    double sh_ld_conflict_pct, sh_st_conflict_pct;  /* bank conflicts per shared wavefront, % */
    int nstalls;
    int stall[TK_LAB_TOP_STALLS];   /* table indices of the largest stall reasons ("selected" left out) */
} tk_lab_prof_derived;

void tk_lab_profile_derive(const tk_lab_prof_kernel *k, tk_lab_prof_derived *d);
/* The screen: the problem (c), then one column per profile (1 or 2), then
 * the legend. */
void tk_lab_profile_print(FILE *f, const tk_lab_case *c, const tk_lab_profile *p, int n);
/* The figures as JSON: problem, then per profile the metrics by key (null
 * when n/a), the derived figures and tilekit's own. 0, or -1 on a write
 * error. */
int tk_lab_profile_write_json(FILE *f, const tk_lab_case *c, const tk_lab_profile *p, int n);
/* "tilekit launch: kernel K ran R regs .. local_bytes .. static_smem ..
 * dyn_smem .. threads .. blocks_per_sm .. occupancy ..", the line launch
 * prints and the parser reads back. */
void tk_lab_launch_line(char *buf, size_t len, const char *kernel, const char *ran, const tk_lab_kinfo *ki);

/* Running ncu (lab_ncu.c). */
/* ncu's path: $NCU when set (it must name an executable file), else the
 * first executable `ncu` on $PATH. 0, or -1 with why: what was looked at
 * and how to fix it. */
int tk_lab_ncu_find(char *path, size_t len, char *why, size_t wlen);
/* Whether ncu's output says it could not profile at all (no permission to
 * read the GPU's counters, its library not loaded, the profiler not
 * initialized): 1 with why (the line and the fix), else 0. */
int tk_lab_ncu_blocked(const char *text, char *why, size_t len);
/* Runs `ncu ... self launch --kernel KERNEL args...` (args: the problem
 * options, NULL-terminated) and reads its output into p. Returns 0; 2 when
 * ncu cannot profile (tk_lab_ncu_blocked) or cannot be run; 1 when it ran
 * but profiled nothing (why ends with the launch's own output). */
int tk_lab_ncu_profile(const char *ncu, const char *self, const char *kernel, const char *const *args,
                       tk_lab_profile *p, char *why, size_t len);

#endif /* TK_LAB_H */
