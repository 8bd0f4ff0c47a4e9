/* lab_num.c - bf16 on the host, the lab's random numbers, case helpers. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "lab.h"
#include "lab_rand.h"

float tk_lab_bf16_to_f32(uint16_t x)
{
    uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t tk_lab_f32_to_bf16(float x) { return tk_lab_rand_f32_to_bf16(x); }

uint64_t tk_lab_mix64(uint64_t z) { return tk_lab_rand_mix(z); }

/* The formats' fields: mantissa bits, exponent bias. */
static int fp8_mbits(tk_lab_fp8 f) { return f == TK_LAB_E4M3 ? 3 : 2; }
static int fp8_bias(tk_lab_fp8 f) { return f == TK_LAB_E4M3 ? 7 : 15; }
static double fp8_max(tk_lab_fp8 f) { return f == TK_LAB_E4M3 ? 448.0 : 57344.0; }

double tk_lab_fp8_decode(uint8_t v, tk_lab_fp8 f)
{
    const int mb = fp8_mbits(f), bias = fp8_bias(f), emax = (1 << (7 - mb)) - 1;
    const int e = (v >> mb) & emax, m = v & ((1 << mb) - 1);
    if (f == TK_LAB_E4M3 && e == emax && m == (1 << mb) - 1)
        return NAN;
    if (f == TK_LAB_E5M2 && e == emax)
        return m ? NAN : v & 0x80 ? -INFINITY : INFINITY;
    /* subnormal: m 2^(1 - bias - mb); normal: (2^mb + m) 2^(e - bias - mb) */
    const double x = e ? ldexp((1 << mb) + m, e - bias - mb) : ldexp(m, 1 - bias - mb);
    return v & 0x80 ? -x : x;
}

uint8_t tk_lab_fp8_encode(double x, tk_lab_fp8 f, int satfinite)
{
    const int mb = fp8_mbits(f), bias = fp8_bias(f), emin = 1 - bias;
    if (isnan(x))
        return 0x7F;
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    const uint8_t top = f == TK_LAB_E4M3 ? 0x7E : 0x7B;                  /* the largest finite */
    const uint8_t over = f == TK_LAB_E4M3 ? 0x7F : 0x7C;                 /* NaN, or infinity */
    double a = fabs(x);
    if (a == 0.0)
        return sign;
    if (isinf(a))
        return sign | (satfinite ? top : over);
    int e2;
    frexp(a, &e2);                     /* a in [2^(e2-1), 2^e2) */
    int ex = e2 - 1 < emin ? emin : e2 - 1;
    /* a / quantum is exact (a power of two apart); rint rounds to nearest, ties to even */
    const double q = ldexp(1.0, ex - mb), r = rint(a / q);
    a = r * q;
    if (a > fp8_max(f))
        return sign | (satfinite ? top : over);
    if (a == 0.0)
        return sign;
    if (a < ldexp(1.0, emin))          /* subnormal: exponent field 0 */
        return sign | (uint8_t)(a / ldexp(1.0, emin - mb));
    frexp(a, &e2);                     /* the rounding may have carried into the next exponent */
    ex = e2 - 1;
    const int m = (int)(a / ldexp(1.0, ex - mb)) - (1 << mb);
    return sign | (uint8_t)(((ex + bias) << mb) | m);
}

int64_t tk_lab_fp8_nscales(tk_lab_qmode mode, int64_t rows, int64_t cols)
{
    const int64_t cb = (cols + 127) / 128;
    switch (mode) {
    case TK_LAB_Q_TENSOR:
        return 1;
    case TK_LAB_Q_ROW:
        return rows;
    case TK_LAB_Q_1X128:
        return rows * cb;
    default:
        return (rows + 127) / 128 * cb;
    }
}

/* Where element (r, c)'s group scale lives (tk_lab_fp8_quantize's layouts). */
static int64_t q_group(tk_lab_qmode mode, int64_t rows, int64_t r, int64_t c)
{
    switch (mode) {
    case TK_LAB_Q_TENSOR:
        return 0;
    case TK_LAB_Q_ROW:
        return r;
    case TK_LAB_Q_1X128:
        return r + c / 128 * rows;
    default:
        return r / 128 + c / 128 * ((rows + 127) / 128);
    }
}

void tk_lab_fp8_quantize(const float *x, int64_t rows, int64_t cols, int64_t ldx, tk_lab_fp8 f, tk_lab_qmode mode,
                         uint8_t *q, int64_t ldq, float *scale)
{
    const int64_t ns = tk_lab_fp8_nscales(mode, rows, cols);
    for (int64_t g = 0; g < ns; g++)
        scale[g] = 0.0f;   /* the groups' amax first */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const float a = fabsf(x[r * ldx + c]);
            float *m = &scale[q_group(mode, rows, r, c)];
            if (a > *m || isnan(a))   /* a NaN stays (fmaxf would drop it) */
                *m = isnan(*m) ? *m : a;
        }
    const float fmax = (float)fp8_max(f);
    for (int64_t g = 0; g < ns; g++)
        scale[g] = scale[g] == 0.0f ? 1.0f : scale[g] / fmax;   /* fp32 division: fl32(amax / fmax) */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const float s = scale[q_group(mode, rows, r, c)];
            q[r * ldq + c] = tk_lab_fp8_encode((double)(x[r * ldx + c] / s), f, 1);
        }
}

uint16_t tk_lab_rand_bf16(uint64_t seed, uint64_t i) { return tk_lab_rand_elem(seed, i); }

int tk_lab_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

typedef struct par_job {
    void (*body)(void *ctx, size_t lo, size_t hi);
    void *ctx;
    size_t lo, hi;
} par_job;

static void *par_worker(void *arg)
{
    par_job *j = arg;
    j->body(j->ctx, j->lo, j->hi);
    return NULL;
}

void tk_lab_parallel(size_t n, void (*body)(void *ctx, size_t lo, size_t hi), void *ctx)
{
    enum { MAXT = 64 };
    int nt = n < ((size_t)1 << 20) ? 1 : tk_lab_threads();
    nt = nt > MAXT ? MAXT : nt;
    par_job jobs[MAXT];
    pthread_t tid[MAXT];
    int started[MAXT] = { 0 };
    for (int t = 0; t < nt; t++) {
        jobs[t] = (par_job){ body, ctx, n * (size_t)t / (size_t)nt, n * (size_t)(t + 1) / (size_t)nt };
        started[t] = t > 0 && pthread_create(&tid[t], NULL, par_worker, &jobs[t]) == 0;
    }
    for (int t = 0; t < nt; t++)
        if (!started[t])   /* thread 0, or one that could not be started */
            par_worker(&jobs[t]);
    for (int t = 0; t < nt; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
}

typedef struct fill_job {
    void *x;
    tk_dtype type;
    uint64_t seed;
} fill_job;

static void fill_range(void *ctx, size_t lo, size_t hi)
{
    const fill_job *j = ctx;
    for (size_t i = lo; i < hi; i++) {
        uint16_t v = tk_lab_rand_bf16(j->seed, i);
        if (j->type == TK_BF16)
            ((uint16_t *)j->x)[i] = v;
        else
            ((float *)j->x)[i] = tk_lab_bf16_to_f32(v);
    }
}

void tk_lab_fill(void *x, tk_dtype type, size_t n, uint64_t seed)
{
    fill_job j = { x, type, seed };
    tk_lab_parallel(n, fill_range, &j);
}

double tk_lab_load(const void *x, tk_dtype t, int64_t idx)
{
    if (t == TK_F32)
        return ((const float *)x)[idx];
    return tk_lab_bf16_to_f32(((const uint16_t *)x)[idx]);
}

int64_t tk_lab_ld(int64_t len, int pad)
{
    if (len < 1)
        len = 1;
    return pad ? (len + 7) / 8 * 8 + 8 : len;
}

size_t tk_lab_buf_elems(int64_t r, int64_t c)
{
    int64_t x = r * tk_lab_ld(c, 1), y = c * tk_lab_ld(r, 1);
    return (size_t)(x > y ? x : y) + TK_LAB_OFFSET_MAX + 1;
}

void tk_lab_problem(const tk_lab_case *c, const void *a, const void *b, void *cc, tk_gemm_problem *p)
{
    memset(p, 0, sizeof *p);
    p->layout = c->layout;
    p->op_a = c->op_a;
    p->op_b = c->op_b;
    p->m = c->m;
    p->n = c->n;
    p->k = c->k;
    p->alpha = c->alpha;
    p->beta = c->beta;
    p->c_type = c->out;
    /* stored A is m x k (op N) or k x m (op T); the leading dimension is the
     * stored column count (row-major) or row count (column-major), padded
     * when the case asks. */
    int64_t a_rows = c->op_a == TK_OP_N ? c->m : c->k, a_cols = c->op_a == TK_OP_N ? c->k : c->m;
    int64_t b_rows = c->op_b == TK_OP_N ? c->k : c->n, b_cols = c->op_b == TK_OP_N ? c->n : c->k;
    int row = c->layout == TK_ROW_MAJOR;
    p->a = a ? (const uint16_t *)a + c->offset : NULL;
    p->lda = tk_lab_ld(row ? a_cols : a_rows, c->pad);
    p->b = b ? (const uint16_t *)b + c->offset : NULL;
    p->ldb = tk_lab_ld(row ? b_cols : b_rows, c->pad);
    p->c = cc ? (char *)cc + (size_t)c->offset * (c->out == TK_F32 ? 4 : 2) : NULL;
    p->ldc = tk_lab_ld(row ? c->n : c->m, c->pad);
}

void tk_lab_case_name(const tk_lab_case *c, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%lldx%lldx%lld %s %c%c %s a=%g b=%g%s", (long long)c->m, (long long)c->n,
                     (long long)c->k, c->layout == TK_ROW_MAJOR ? "row" : "col", c->op_a == TK_OP_N ? 'N' : 'T',
                     c->op_b == TK_OP_N ? 'N' : 'T', c->out == TK_F32 ? "fp32" : "bf16", (double)c->alpha,
                     (double)c->beta, c->pad ? " padded" : "");
    if (c->offset && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " offset %d", c->offset);
}

/* Padding lines and lengths: a row-major C has m lines of n logical
 * elements, a column-major one n lines of m. */
void tk_lab_pad_fill(void *c, tk_dtype t, tk_layout l, int64_t m, int64_t n, int64_t ldc)
{
    int64_t lines = l == TK_ROW_MAJOR ? m : n, len = l == TK_ROW_MAJOR ? n : m;
    for (int64_t i = 0; i < lines; i++)
        for (int64_t j = len; j < ldc; j++) {
            if (t == TK_F32) {
                uint32_t u = TK_LAB_PAD_F32;
                memcpy((float *)c + i * ldc + j, &u, 4);
            } else {
                ((uint16_t *)c)[i * ldc + j] = TK_LAB_PAD_BF16;
            }
        }
}

int64_t tk_lab_pad_check(const void *c, tk_dtype t, tk_layout l, int64_t m, int64_t n, int64_t ldc, int64_t *row,
                         int64_t *col)
{
    int64_t lines = l == TK_ROW_MAJOR ? m : n, len = l == TK_ROW_MAJOR ? n : m, bad = 0;
    for (int64_t i = 0; i < lines; i++)
        for (int64_t j = len; j < ldc; j++) {
            int ok;
            if (t == TK_F32) {
                uint32_t u;
                memcpy(&u, (const float *)c + i * ldc + j, 4);
                ok = u == TK_LAB_PAD_F32;
            } else {
                ok = ((const uint16_t *)c)[i * ldc + j] == TK_LAB_PAD_BF16;
            }
            if (!ok && bad++ == 0) {
                *row = l == TK_ROW_MAJOR ? i : j;
                *col = l == TK_ROW_MAJOR ? j : i;
            }
        }
    return bad;
}
