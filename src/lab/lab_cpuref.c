/* lab_cpuref.c - the fp64 CPU reference: exact bf16 products summed in
 * double, for any layout and op, split over all CPUs with pthreads; FP8
 * operands with their scales too (tk_lab_ref_full_fp8).
 *
 * With bf16 inputs (8-bit significands) every product is exact in double
 * and a sum of K <= 2^29 of them loses at most K * 2^-53 relative to
 * sum |a||b|: far below anything a fp32-accumulating GPU kernel can show. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include "lab.h"

/* Strides of op(A)(i, kk) and op(B)(kk, j) in elements of the stored
 * matrices, in the user's layout: a transposed op or a column-major layout
 * each swap which index walks the leading dimension. */
typedef struct ref_view {
    const uint16_t *a, *b;
    int64_t a_si, a_sk, b_sk, b_sj;
    int64_t k, n;
    double alpha, beta;
    const void *c0;
    tk_dtype c_type;
    tk_layout layout;
    int64_t ldc;
    const tk_lab_fp8_ref *f8;   /* FP8 operands and their scales (a and b then point at bytes), or NULL */
} ref_view;

static void view_init(const tk_gemm_problem *p, ref_view *v)
{
    int row = p->layout == TK_ROW_MAJOR;
    int a_ld_i = row == (p->op_a == TK_OP_N);   /* does i walk A's leading dimension? */
    int b_ld_k = row == (p->op_b == TK_OP_N);   /* does kk walk B's leading dimension? */
    v->a = p->a;
    v->b = p->b;
    v->a_si = a_ld_i ? p->lda : 1;
    v->a_sk = a_ld_i ? 1 : p->lda;
    v->b_sk = b_ld_k ? p->ldb : 1;
    v->b_sj = b_ld_k ? 1 : p->ldb;
    v->k = p->k;
    v->n = p->n;
    v->alpha = p->alpha;
    v->beta = p->beta;
    v->c0 = p->c;
    v->c_type = p->c_type;
    v->layout = p->layout;
    v->ldc = p->ldc;
}

/* The scale of term kk of element (i, j) (tk_gemm_desc version 4's modes). */
static double fp8_scale(const tk_lab_fp8_ref *f, int64_t i, int64_t j, int64_t kk)
{
    switch (f->scale_mode) {
    case TK_SCALE_TENSOR:
        return (double)f->scale_a[0] * (double)f->scale_b[0];
    case TK_SCALE_ROW:
        return (double)f->scale_a[i] * (double)f->scale_b[j];
    default:   /* TK_SCALE_BLOCK: row i and n-block j / 128, each at k-block kk / 128 */
        return (double)f->scale_a[i + kk / 128 * f->ld_scale_a] * (double)f->scale_b[j / 128 + kk / 128 * f->ld_scale_b];
    }
}

static void ref_one(const ref_view *v, int64_t i, int64_t j, double *want, double *s)
{
    double acc = 0.0, abs_acc = 0.0;
    if (v->f8) {   /* (sa a)(sb b): a double holds each term to 2^-53 (4 + 4 + 24 + 24 significant bits) */
        const uint8_t *a = (const uint8_t *)v->a + i * v->a_si, *b = (const uint8_t *)v->b + j * v->b_sj;
        for (int64_t kk = 0; kk < v->k; kk++) {
            double x = tk_lab_fp8_decode(a[kk * v->a_sk], v->f8->fa) * tk_lab_fp8_decode(b[kk * v->b_sk], v->f8->fb) *
                       fp8_scale(v->f8, i, j, kk);
            acc += x;
            abs_acc += fabs(x);
        }
    } else {
        const uint16_t *a = v->a + i * v->a_si, *b = v->b + j * v->b_sj;
        for (int64_t kk = 0; kk < v->k; kk++) {
            double x = (double)tk_lab_bf16_to_f32(a[kk * v->a_sk]) * (double)tk_lab_bf16_to_f32(b[kk * v->b_sk]);
            acc += x;
            abs_acc += fabs(x);
        }
    }
    double r = v->alpha * acc;
    if (v->beta != 0.0)   /* C0 is read only when beta != 0 (it may be NaN poison) */
        r += v->beta * tk_lab_load(v->c0, v->c_type, tk_lab_index(v->layout, v->ldc, i, j));
    *want = r;
    if (s)
        *s = abs_acc;
}

typedef struct ref_job {
    const ref_view *v;
    const int64_t *row, *col;    /* NULL: point t is (t / n, t % n) */
    size_t lo, hi;
    double *want, *s;
} ref_job;

static void *ref_worker(void *arg)
{
    ref_job *j = arg;
    for (size_t t = j->lo; t < j->hi; t++) {
        int64_t r = j->row ? j->row[t] : (int64_t)t / j->v->n;
        int64_t c = j->col ? j->col[t] : (int64_t)t % j->v->n;
        ref_one(j->v, r, c, &j->want[t], j->s ? &j->s[t] : NULL);
    }
    return NULL;
}

static void ref_run(const tk_gemm_problem *hp, const tk_lab_fp8_ref *f8, size_t npts, const int64_t *row,
                    const int64_t *col, double *want, double *s)
{
    enum { MAXT = 256 };
    ref_view v;
    view_init(hp, &v);
    v.f8 = f8;
    /* One thread per ~64k multiply-adds at least, so tiny problems stay serial. */
    double work = (double)npts * (double)(hp->k > 0 ? hp->k : 1);
    int nt = tk_lab_threads();
    if (work < 65536.0 * nt)
        nt = (int)(work / 65536.0) + 1;
    nt = nt > MAXT ? MAXT : nt;
    ref_job jobs[MAXT];
    pthread_t tid[MAXT];
    int started[MAXT] = { 0 };
    for (int t = 0; t < nt; t++) {
        jobs[t] = (ref_job){ &v, row, col, npts * (size_t)t / (size_t)nt, npts * (size_t)(t + 1) / (size_t)nt,
                             want, s };
        started[t] = t > 0 && pthread_create(&tid[t], NULL, ref_worker, &jobs[t]) == 0;
    }
    for (int t = 0; t < nt; t++)
        if (!started[t])
            ref_worker(&jobs[t]);
    for (int t = 0; t < nt; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
}

void tk_lab_ref_points(const tk_gemm_problem *hp, size_t npts, const int64_t *row, const int64_t *col, double *want,
                       double *s)
{
    if (npts)
        ref_run(hp, NULL, npts, row, col, want, s);
}

void tk_lab_ref_full(const tk_gemm_problem *hp, double *want, double *s)
{
    if (hp->m > 0 && hp->n > 0)
        ref_run(hp, NULL, (size_t)hp->m * (size_t)hp->n, NULL, NULL, want, s);
}

void tk_lab_ref_full_fp8(const tk_gemm_problem *hp, const tk_lab_fp8_ref *f8, double *want, double *s)
{
    if (hp->m > 0 && hp->n > 0)
        ref_run(hp, f8, (size_t)hp->m * (size_t)hp->n, NULL, NULL, want, s);
}

void tk_lab_ref_grouped_fp8(const tk_gemm_problem *hp, const tk_lab_fp8_ref *f8, const tk_lab_fp8_groups *g,
                            double *want, double *s)
{
    const int rows = g->kind == TK_GROUP_ROWS;
    const size_t cb = hp->c_type == TK_F32 ? 4 : 2;
    for (int z = 0; z < g->count; z++) {
        const int64_t lo = rows && z > 0 ? g->offs[z - 1] : 0, hi = rows ? g->offs[z] : hp->m;
        /* ROWS: row lo's line of A (op_a N) or column (op_a T), of C and of the scales; BATCHED: product z's */
        const int64_t a_off = rows ? (hp->op_a == TK_OP_N ? lo * hp->lda : lo) : z * g->stride_a;
        const int64_t c_off = rows ? lo * hp->ldc : z * g->stride_c;
        const size_t w_off = rows ? (size_t)lo * (size_t)hp->n : (size_t)z * (size_t)hp->m * (size_t)hp->n;
        tk_gemm_problem sub = *hp;
        sub.m = hi - lo;
        sub.a = (const uint8_t *)hp->a + a_off;
        sub.b = (const uint8_t *)hp->b + z * g->stride_b;
        sub.c = hp->c ? (void *)((char *)hp->c + (size_t)c_off * cb) : NULL;
        tk_lab_fp8_ref f = *f8;
        f.scale_a = f8->scale_a + (rows ? (f8->scale_mode == TK_SCALE_TENSOR ? 0 : lo) : z * g->stride_scale_a);
        f.scale_b = f8->scale_b + z * g->stride_scale_b;
        tk_lab_ref_full_fp8(&sub, &f, want + w_off, s ? s + w_off : NULL);
    }
}
