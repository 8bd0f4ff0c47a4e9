/* lab_epi.c - the fused epilogues' fp64 reference, its tolerances and the
 * comparison (lab.h, "epilogues"). Pure host code: the CPU tests can call
 * it, verify (lab_everify.c) and tests/gpu/test_epilogue.c judge with it.
 *
 * The formulas are tilekit.h's, in double, from fp64 dot products of the
 * bf16 inputs (exact products, so the reference's own error is far below
 * the tolerances), the bias as stored (bf16 or fp32) and the activation of
 * activation.cuh in double.
 *
 * Why the tolerances are what they are (u = 2^-24; lab_compare.c derives
 * the product's part): the kernel computes P = fl(alpha * acc) with
 *   e_P = (16 sqrt(K) + 1) u |alpha| S        (S = sum_k |a_ik b_kj|)
 * then z = fl(P + bias):  e_z = e_P + u (|P| + |bias|).
 * An activation is Lipschitz with constant L <= 1.2 (relu 1, gelu 1.13,
 * silu 1.10), and its fp32 evaluation (erff, expf, tanhf: a few ulps, and
 * 0.5 x (1 + erf) cancelling for negative x) errs by at most
 *   e_f = 8 u (|act(z)| + |z|),
 * so BIAS_ACT's act(z) + beta C errs by L e_z + e_f + 2 u (|act(z)| +
 * |beta C|): the activation adds no new term beyond its rounding. GATED's
 * act(z_g) z_u multiplies two such values, each with its own error:
 *   (L e_zg + e_fg) |z_u| + (|act(z_g)| + L e_zg + e_fg) e_zu
 * which is about twice BIAS_ACT's relative error. The backward kinds read
 * z from aux exactly (bf16 on both sides); act'(x) costs e_g = 16 u (1 +
 * |x|) (its terms are at most ~1 + |x| before they cancel), so P act'(x)
 * errs by e_P |act'| + |P| e_g + 2 u |P act'|. A bf16 D adds half an ulp:
 * 2^-8 (|want| + e). aux holds bf16(z): the kernel's rounding of its own
 * z, one bf16 ulp (2^-7 |z|) from bf16 of the exact z at most, plus e_z.
 * bias_grad sums the M fp32 values of a column: the sum of their
 * tolerances (before any bf16 rounding) plus M u sum |v| for the fp32
 * additions, in any order. A wrong index, a missed bias or the wrong half
 * moves a value by about its own size, hundreds of times these. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "lab.h"

#define U32 0x1p-24
#define ACT_LIPSCHITZ 1.2

static const char *const kind_names[] = { "none", "bias_act", "gated", "backward", "gated_backward" };
static const char *const act_names[] = { "none", "relu", "gelu", "gelu_tanh", "silu" };

/* The index of word in names[0 .. 4], or -1. */
static int name_index(const char *const *names, const char *word)
{
    for (int i = 0; i < 5; i++)
        if (!strcmp(word, names[i]))
            return i;
    return -1;
}

const char *tk_lab_epi_kind_name(int kind)
{
    return kind >= 0 && kind < 5 ? kind_names[kind] : "?";
}

int tk_lab_epi_kind_parse(const char *word) { return name_index(kind_names, word); }

const char *tk_lab_act_name(int act)
{
    return act >= 0 && act < 5 ? act_names[act] : "?";
}

int tk_lab_act_parse(const char *word) { return name_index(act_names, word); }

void tk_lab_epi_name(const tk_lab_epi *e, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s%s%s%s%s%s%s", tk_lab_epi_kind_name(e->kind), tk_lab_act_name(e->act),
             e->bias == 0 ? "" : e->bias == 1 ? " bias col" : " bias row",
             e->bias ? (e->bias_bf16 ? " bf16" : " fp32") : "",
             e->aux && (e->kind == TK_EPI_BIAS_ACT || e->kind == TK_EPI_GATED) ? " aux" : "",
             e->bias_grad ? " bias_grad" : "", e->d_apart ? " d" : "",
             e->kind == TK_EPI_GATED ? (e->up_split ? " up split" : " up halves") : "");
}

void tk_lab_epi_dims_of(const tk_lab_case *c, const tk_lab_epi *e, tk_lab_epi_dims *d)
{
    const int fwd = e->kind == TK_EPI_BIAS_ACT || e->kind == TK_EPI_GATED;
    d->out_cols = e->kind == TK_EPI_GATED ? c->n / 2 : e->kind == TK_EPI_GATED_BACKWARD ? 2 * c->n : c->n;
    d->aux_cols = fwd && !e->aux ? 0 : e->kind == TK_EPI_GATED_BACKWARD ? 2 * c->n : c->n;
    d->b_cols = e->kind == TK_EPI_GATED && e->up_split ? c->n / 2 : c->n;
    d->bias_len = !fwd || !e->bias ? 0 : e->bias == 2 ? c->m : c->n;
    d->grad_len = e->bias_grad ? d->out_cols : 0;   /* with a forward kind: for the refusal */
}

double tk_lab_act(int act, double x)
{
    switch (act) {
    case TK_ACT_RELU:
        return x > 0.0 ? x : 0.0;
    case TK_ACT_GELU_ERF:
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case TK_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case TK_ACT_SILU:
        return x / (1.0 + exp(-x));
    default:
        return x;
    }
}

double tk_lab_act_grad(int act, double x)
{
    switch (act) {
    case TK_ACT_RELU:
        return x > 0.0 ? 1.0 : 0.0;
    case TK_ACT_GELU_ERF:
        return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
    case TK_ACT_GELU_TANH: {
        double t = tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * x * x);
    }
    case TK_ACT_SILU: {
        double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 + x * (1.0 - s));
    }
    default:
        return 1.0;
    }
}

typedef struct epi_ctx {
    const tk_lab_case *c;
    const tk_lab_epi *e;
    const tk_lab_epi_in *in;
    tk_lab_epi_dims dims;
    int64_t a_si, a_sk, b_sk, b_sj;
    double *d, *d_tol, *d_tol32, *z, *z_tol;
} epi_ctx;

/* alpha * (row i of op(A)) . (column j of op(Bp)) and its e_P. */
static double epi_p(const epi_ctx *x, const uint16_t *bp, int64_t i, int64_t j, double *e_p)
{
    double acc = 0.0, s = 0.0;
    for (int64_t kk = 0; kk < x->c->k; kk++) {
        double t = (double)tk_lab_bf16_to_f32(x->in->a[i * x->a_si + kk * x->a_sk]) *
                   (double)tk_lab_bf16_to_f32(bp[kk * x->b_sk + j * x->b_sj]);
        acc += t;
        s += fabs(t);
    }
    double alpha = fabs((double)x->c->alpha);
    *e_p = (16.0 * sqrt((double)x->c->k) + 1.0) * U32 * alpha * s;
    return (double)x->c->alpha * acc;
}

/* z = P + bias for column col of z (gate or up half, from column j of bp). */
static double epi_z(const epi_ctx *x, const uint16_t *bp, int64_t i, int64_t j, int64_t col, double *e_z)
{
    double e_p, p = epi_p(x, bp, i, j, &e_p), bias = 0.0;
    if (x->e->bias) {
        int64_t at = x->e->bias == 2 ? i : col;
        bias = x->e->bias_bf16 ? (double)tk_lab_bf16_to_f32(((const uint16_t *)x->in->bias)[at])
                               : (double)((const float *)x->in->bias)[at];
    }
    *e_z = e_p + U32 * (fabs(p) + fabs(bias));
    return p + bias;
}

static double epi_fe(int act, double z)
{
    return act == TK_ACT_NONE || act == TK_ACT_RELU ? 0.0 : 8.0 * U32 * (fabs(tk_lab_act(act, z)) + fabs(z));
}

static double epi_aux(const epi_ctx *x, int64_t i, int64_t col)
{
    return (double)tk_lab_bf16_to_f32(x->in->aux[i * x->in->ldaux + col]);
}

static void epi_store_z(const epi_ctx *x, int64_t i, int64_t col, double z, double e_z)
{
    if (!x->z)
        return;
    x->z[i * x->dims.aux_cols + col] = z;
    x->z_tol[i * x->dims.aux_cols + col] = e_z + 0x1p-7 * (fabs(z) + e_z);
}

/* Element (i, j) of D: its value and fp32 tolerance. */
static double epi_one(const epi_ctx *x, int64_t i, int64_t j, double *tol)
{
    const tk_lab_case *c = x->c;
    const int act = x->e->act;
    const uint16_t *b = x->in->b;
    double beta_c = c->beta != 0.0f ? (double)c->beta * tk_lab_load(x->in->c, c->out, i * x->in->ldc + j) : 0.0;
    double v, e;
    switch (x->e->kind) {
    case TK_EPI_BIAS_ACT: {
        double e_z, z = epi_z(x, b, i, j, j, &e_z), f = tk_lab_act(act, z);
        epi_store_z(x, i, j, z, e_z);
        v = f + beta_c;
        e = ACT_LIPSCHITZ * e_z + epi_fe(act, z) + 2.0 * U32 * (fabs(f) + fabs(beta_c));
        break;
    }
    case TK_EPI_GATED: {
        const int64_t half = c->n / 2;
        const uint16_t *up = x->in->b_up ? x->in->b_up : b;
        const int64_t up_j = x->in->b_up ? j : half + j;
        double e_g, e_u, zg = epi_z(x, b, i, j, j, &e_g), zu = epi_z(x, up, i, up_j, half + j, &e_u);
        epi_store_z(x, i, j, zg, e_g);
        epi_store_z(x, i, half + j, zu, e_u);
        double f = tk_lab_act(act, zg), e_f = ACT_LIPSCHITZ * e_g + epi_fe(act, zg);
        v = f * zu + beta_c;
        e = e_f * fabs(zu) + (fabs(f) + e_f) * e_u + 2.0 * U32 * (fabs(f * zu) + fabs(beta_c));
        break;
    }
    case TK_EPI_BACKWARD: {
        double e_p, p = epi_p(x, b, i, j, &e_p), xa = epi_aux(x, i, j), g = tk_lab_act_grad(act, xa);
        v = p * g + beta_c;
        e = e_p * fabs(g) + fabs(p) * 16.0 * U32 * (1.0 + fabs(xa)) + 2.0 * U32 * (fabs(p * g) + fabs(beta_c));
        break;
    }
    default: {   /* TK_EPI_GATED_BACKWARD */
        const int64_t jn = j < c->n ? j : j - c->n;
        double e_p, p = epi_p(x, b, i, jn, &e_p), zg = epi_aux(x, i, jn);
        if (j < c->n) {
            double zu = epi_aux(x, i, c->n + jn), g = tk_lab_act_grad(act, zg);
            v = p * zu * g;
            e = e_p * fabs(zu * g) + fabs(p * zu) * 16.0 * U32 * (1.0 + fabs(zg)) + 3.0 * U32 * fabs(v);
        } else {
            double f = tk_lab_act(act, zg);
            v = p * f;
            e = e_p * fabs(f) + fabs(p) * epi_fe(act, zg) + 2.0 * U32 * fabs(v);
        }
        break;
    }
    }
    *tol = e;
    return v;
}

typedef struct epi_job {
    const epi_ctx *x;
    int64_t lo, hi;
} epi_job;

static void *epi_worker(void *arg)
{
    const epi_job *jb = arg;
    const epi_ctx *x = jb->x;
    const int64_t cols = x->dims.out_cols;
    for (int64_t i = jb->lo; i < jb->hi; i++)
        for (int64_t j = 0; j < cols; j++) {
            double e, v = epi_one(x, i, j, &e);
            x->d[i * cols + j] = v;
            x->d_tol32[i * cols + j] = e;
            x->d_tol[i * cols + j] = x->c->out == TK_BF16 ? e + 0x1p-8 * (fabs(v) + e) : e;
        }
    return NULL;
}

void tk_lab_epi_ref(const tk_lab_case *c, const tk_lab_epi *e, const tk_lab_epi_in *in, double *d, double *d_tol,
                    double *z, double *z_tol, double *grad, double *grad_tol)
{
    enum { MAXT = 256 };
    epi_ctx x;
    memset(&x, 0, sizeof x);
    x.c = c;
    x.e = e;
    x.in = in;
    tk_lab_epi_dims_of(c, e, &x.dims);
    x.a_si = c->op_a == TK_OP_N ? in->lda : 1;
    x.a_sk = c->op_a == TK_OP_N ? 1 : in->lda;
    x.b_sk = c->op_b == TK_OP_N ? in->ldb : 1;
    x.b_sj = c->op_b == TK_OP_N ? 1 : in->ldb;
    x.d = d;
    x.d_tol = d_tol;
    x.z = x.dims.aux_cols && (e->kind == TK_EPI_BIAS_ACT || e->kind == TK_EPI_GATED) && z_tol ? z : NULL;
    x.z_tol = x.z ? z_tol : NULL;
    const size_t nd = (size_t)(c->m * x.dims.out_cols);
    x.d_tol32 = malloc((nd ? nd : 1) * sizeof *x.d_tol32);
    double *tol32 = x.d_tol32 ? x.d_tol32 : d_tol;   /* out of memory: the bf16 tolerances, a little looser */
    x.d_tol32 = tol32;
    double work = (double)nd * (double)(c->k > 0 ? c->k : 1);
    int nt = tk_lab_threads();
    if (work < 65536.0 * nt)
        nt = (int)(work / 65536.0) + 1;
    nt = nt > MAXT ? MAXT : nt > c->m ? (int)(c->m > 0 ? c->m : 1) : nt;
    epi_job jobs[MAXT];
    pthread_t tid[MAXT];
    int started[MAXT] = { 0 };
    for (int t = 0; t < nt; t++) {
        jobs[t].x = &x;
        jobs[t].lo = c->m * t / nt;
        jobs[t].hi = c->m * (t + 1) / nt;
        started[t] = t > 0 && pthread_create(&tid[t], NULL, epi_worker, &jobs[t]) == 0;
    }
    epi_worker(&jobs[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t])
            pthread_join(tid[t], NULL);
        else
            epi_worker(&jobs[t]);
    }
    /* bias_grad: the columns' sums in row order */
    for (int64_t j = 0; grad && grad_tol && j < x.dims.grad_len; j++) {
        double s = 0.0, sa = 0.0, st = 0.0;
        for (int64_t i = 0; i < c->m; i++) {
            s += d[i * x.dims.out_cols + j];
            sa += fabs(d[i * x.dims.out_cols + j]);
            st += tol32[i * x.dims.out_cols + j];
        }
        grad[j] = s;
        grad_tol[j] = st + (double)c->m * U32 * sa;
    }
    if (tol32 != d_tol)
        free(tol32);
}

void tk_lab_epi_compare(const void *got, tk_dtype t, int64_t ld, int64_t rows, int64_t cols, const double *want,
                        const double *tol, int want_bf16, tk_lab_epi_cmp *r)
{
    memset(r, 0, sizeof *r);
    r->bad_row = r->bad_col = -1;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            double g = tk_lab_load(got, t, i * ld + j), w = want[i * cols + j], e = tol[i * cols + j];
            if (want_bf16)
                w = (double)tk_lab_bf16_to_f32(tk_lab_f32_to_bf16((float)w));
            double d = fabs(g - w);
            int bad = !isfinite(g) || !isfinite(w) || d > e;
            r->checked++;
            if (isfinite(d)) {
                r->max_abs = d > r->max_abs ? d : r->max_abs;
                double rel = d / fmax(fabs(w), e > 0.0 ? e : 1e-300);
                r->max_rel = rel > r->max_rel ? rel : r->max_rel;
            } else {
                r->max_abs = r->max_rel = INFINITY;
            }
            if (bad && !r->over++) {
                r->bad_row = i;
                r->bad_col = j;
                r->bad_got = g;
                r->bad_want = w;
                r->bad_tol = e;
            }
        }
}
