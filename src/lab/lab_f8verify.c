/* lab_f8verify.c - verify of one case with FP8 operands (lab.h, "FP8";
 * issue 40): codes and scales made on the host, C poisoned (or holding
 * values when beta != 0) between guard bands, the call through
 * tk_gemm_run with tk_gemm_desc's version-4 fields, and the judgement
 * against the fp64 reference of the dequantized terms
 * (tk_lab_ref_full_fp8) within tk_lab_tolerance_fp8. The codes and scales
 * (tk_lab_f8_data_make) are bench's and fuzz's too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "lab.h"

#define F8_GUARD 256            /* poisoned elements after C's last line */

static double fmax_of(tk_lab_fp8 f) { return f == TK_LAB_E4M3 ? 448.0 : 57344.0; }

/* Element i of stream seed: splitmix64 over the mixed seed, so streams
 * whose seeds are close (seed ^ 0xa, seed ^ 0xb) share no elements. Not
 * mix64(seed + i): that made B's codes A's shifted by one element, and
 * with A and B both stored K-outer at one ld (row-major TN, M and N of one
 * padded ld) C(j + 1, j) was a sum of squares, one-signed, whose wgmma
 * truncation error the FP8 tolerance does not allow for (lab_compare.c). */
static uint64_t stream(uint64_t seed, size_t i) { return tk_lab_mix64(tk_lab_mix64(seed) + (i + 1) * 0x9e3779b97f4a7c15ull); }

/* Codes i in [lo, hi) of a stream: uniform in [-fmax, fmax] (exact:
 * integers in [-4, 4]), never 0, rounded to the format. */
typedef struct codes_job {
    uint8_t *q;
    tk_lab_fp8 f;
    int exact;
    uint64_t seed;
} codes_job;

static void codes_range(void *ctx, size_t lo, size_t hi)
{
    const codes_job *j = ctx;
    for (size_t i = lo; i < hi; i++) {
        uint64_t r = stream(j->seed, i);
        double x = j->exact ? (double)((int)(r % 8) - 4 + (r % 8 >= 4)) : ((double)(r >> 11) * 0x1p-53 * 2.0 - 1.0);
        if (!j->exact && fabs(x) < 1e-3)
            x = 1e-3;
        j->q[i] = tk_lab_fp8_encode(j->exact ? x : x * fmax_of(j->f), j->f, 1);
    }
}

/* n codes of format f (codes_range's), on all CPUs when n is large
 * (bench's operands run to hundreds of MB). */
static uint8_t *codes(size_t n, tk_lab_fp8 f, int exact, uint64_t seed)
{
    uint8_t *q = malloc(n ? n : 1);
    codes_job j = { q, f, exact, seed };
    if (q)
        tk_lab_parallel(n, codes_range, &j);
    return q;
}

/* n scales: 2^-e, e in 0..4 (exact), else in [2^-8, 2^-6) (not powers of two). */
static float *scales(size_t n, int exact, uint64_t seed)
{
    float *s = malloc((n ? n : 1) * sizeof *s);
    for (size_t i = 0; s && i < n; i++) {
        uint64_t r = stream(seed, i);
        s[i] = exact ? ldexpf(1.0f, -(int)(r % 5)) : (float)(0x1p-8 * (1.0 + 3.0 * (double)(r >> 11) * 0x1p-53));
    }
    return s;
}

static void poison1(void *x, size_t esz)
{
    const uint32_t f = TK_LAB_PAD_F32;
    const uint16_t b = TK_LAB_PAD_BF16;
    memcpy(x, esz == 4 ? (const void *)&f : (const void *)&b, esz);
}

static int upload(void **dev, const void *host, size_t bytes)
{
    if (cudaMalloc(dev, bytes ? bytes : 1))
        return -1;
    return bytes && cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice) ? -1 : 0;
}

void tk_lab_f8_scale_dims(const tk_lab_case *c, int mode, size_t *na, size_t *nb, int64_t *lda, int64_t *ldb)
{
    const int64_t kb = (c->k + 127) / 128, nbk = (c->n + 127) / 128;
    *lda = *ldb = 0;
    if (mode == TK_SCALE_TENSOR)
        *na = *nb = 1;
    else if (mode == TK_SCALE_ROW)
        *na = (size_t)c->m, *nb = (size_t)c->n;
    else {
        *lda = c->m, *ldb = nbk;
        *na = (size_t)(c->m * kb), *nb = (size_t)(nbk * kb);
    }
}

void tk_lab_f8_data_free(tk_lab_f8_data *d)
{
    free(d->a), free(d->b), free(d->sa), free(d->sb);
    memset(d, 0, sizeof *d);
}

int tk_lab_f8_data_make(const tk_lab_case *c, const tk_lab_f8 *f, tk_lab_f8_data *d)
{
    memset(d, 0, sizeof *d);
    const uint64_t seed = tk_lab_mix64(c->seed ^ 0xf8);
    const int row = c->layout == TK_ROW_MAJOR;
    /* A's and B's stored lines in the case's layout */
    const int a_tr = (c->op_a == TK_OP_T) != !row, b_tr = (c->op_b == TK_OP_T) != !row;
    const int64_t a_lines = a_tr ? c->k : c->m, b_lines = b_tr ? c->n : c->k;
    tk_lab_problem(c, NULL, NULL, NULL, &d->p);   /* lda, ldb, ldc from the case */
    d->na = (size_t)(a_lines * d->p.lda);
    d->nb = (size_t)(b_lines * d->p.ldb);
    tk_lab_f8_scale_dims(c, f->scale_mode, &d->nsa, &d->nsb, &d->ld_sa, &d->ld_sb);
    d->a = codes(d->na, f->fa, f->exact, seed ^ 0xa);
    d->b = codes(d->nb, f->fb, f->exact, seed ^ 0xb);
    d->sa = scales(d->nsa, f->exact, seed ^ 0x5a);
    d->sb = scales(d->nsb, f->exact, seed ^ 0x5b);
    if (d->a && d->b && d->sa && d->sb)
        return 0;
    tk_lab_f8_data_free(d);
    return -1;
}

void tk_lab_f8_desc(const tk_lab_f8 *f, const tk_lab_f8_data *d, const void *a, const void *b, void *c,
                    const float *sa, const float *sb, tk_gemm_desc *out)
{
    const tk_gemm_desc init = TK_GEMM_DESC_INIT;
    *out = init;
    out->problem = d->p;
    out->problem.a = a, out->problem.b = b, out->problem.c = c;
    out->a_fp8 = f->fa == TK_LAB_E4M3 ? TK_FP8_E4M3 : TK_FP8_E5M2;
    out->b_fp8 = f->fb == TK_LAB_E4M3 ? TK_FP8_E4M3 : TK_FP8_E5M2;
    out->scale_mode = f->scale_mode;
    out->scale_a = sa, out->scale_b = sb;
    out->ld_scale_a = d->ld_sa, out->ld_scale_b = d->ld_sb;
}

void tk_lab_f8_verify_run(tk_lab_verify *v, const char *kernel, const tk_lab_case *c, const tk_lab_f8 *f,
                          tk_lab_f8_result *r)
{
    memset(r, 0, sizeof *r);
    r->bad_row = r->bad_col = -1;
    const tk_handle h = tk_lab_verify_handle(v);
    const cudaStream_t st = (cudaStream_t)tk_lab_verify_stream(v);
    const uint64_t seed = tk_lab_mix64(c->seed ^ 0xf8);
    const size_t cb = c->out == TK_F32 ? 4 : 2;
    const int row = c->layout == TK_ROW_MAJOR;
    const int64_t c_lines = row ? c->m : c->n, c_len = row ? c->n : c->m;
    tk_lab_f8_data in;
    const int made = tk_lab_f8_data_make(c, f, &in) == 0;
    const tk_gemm_problem hp = in.p;
    const size_t nc = (size_t)(c_lines * hp.ldc) + F8_GUARD;
    void *img = malloc(nc * cb), *got = malloc(nc * cb);
    double *want = malloc((size_t)(c->m * c->n + 1) * sizeof *want), *s = malloc((size_t)(c->m * c->n + 1) * sizeof *s);
    void *da = NULL, *db = NULL, *dsa = NULL, *dsb = NULL, *dc = NULL;
    if (!made || !img || !got || !want || !s) {
        snprintf(r->msg, sizeof r->msg, "out of host memory");
        r->outcome = -1;
        goto done;
    }
    /* C: the poison everywhere (a NaN with a fixed payload), values in M x N where beta reads them */
    for (size_t e = 0; e < nc; e++)
        poison1((char *)img + e * cb, cb);
    for (int64_t l = 0; c->beta != 0.0f && l < c_lines; l++)
        tk_lab_fill((char *)img + (size_t)(l * hp.ldc) * cb, c->out, (size_t)c_len, seed ^ (0xc0000 + (uint64_t)l));
    if (upload(&da, in.a, in.na) || upload(&db, in.b, in.nb) || upload(&dsa, in.sa, in.nsa * 4) ||
        upload(&dsb, in.sb, in.nsb * 4) || upload(&dc, img, nc * cb)) {
        snprintf(r->msg, sizeof r->msg, "device buffers: %s", cudaGetErrorString(cudaGetLastError()));
        r->outcome = -1;
        goto done;
    }
    tk_gemm_desc d;
    tk_lab_f8_desc(f, &in, da, db, dc, dsa, dsb, &d);
    r->status = tk_gemm_run(h, &d, kernel, st);
    cudaError_t ce = cudaStreamSynchronize(st);
    if (!ce)
        ce = cudaMemcpy(got, dc, nc * cb, cudaMemcpyDeviceToHost);
    if (ce) {
        snprintf(r->msg, sizeof r->msg, "after the call: %s", cudaGetErrorString(ce));
        r->outcome = -1;
        goto done;
    }
    if (r->status)
        snprintf(r->msg, sizeof r->msg, "%s: %s", tk_status_string(r->status), tk_last_error(h));
    /* every element outside C's M x N keeps its poison; all of C on a refusal */
    for (size_t e = 0; e < nc; e++) {
        int64_t l = (int64_t)e / hp.ldc, x = (int64_t)e % hp.ldc;
        if (!r->status && l < c_lines && x < c_len)
            continue;
        if (memcmp((char *)img + e * cb, (char *)got + e * cb, cb) && !r->guard_writes++)
            snprintf(r->guard_where, sizeof r->guard_where, "C element %zu (line %lld, %lld)", e, (long long)l,
                     (long long)x);
    }
    if (r->status) {
        r->outcome = r->guard_writes ? 1 : 2;
        goto done;
    }
    tk_gemm_problem ref = hp;
    ref.a = in.a, ref.b = in.b, ref.c = img;
    const tk_lab_fp8_ref f8 = { f->fa, f->fb, f->scale_mode, in.sa, in.sb, in.ld_sa, in.ld_sb };
    tk_lab_ref_full_fp8(&ref, &f8, want, s);
    for (int64_t i = 0; i < c->m; i++)
        for (int64_t j = 0; j < c->n; j++) {
            const int64_t at = tk_lab_index(c->layout, hp.ldc, i, j);
            double g = tk_lab_load(got, c->out, at), w = want[i * c->n + j];
            double c0 = c->beta != 0.0f ? tk_lab_load(img, c->out, at) : 0.0;
            double tol = f->exact && c->out == TK_F32 ? 0.0
                                                      : tk_lab_tolerance_fp8(c->k, c->alpha, c->beta, s[i * c->n + j], c0, w,
                                                                             c->out);
            double e = fabs(g - w);
            r->checked++;
            if (isfinite(e) && e / fmax(fabs(w), 1e-30) > r->max_rel)
                r->max_rel = e / fmax(fabs(w), 1e-30);
            if ((!isfinite(g) || e > tol) && !r->over++) {
                r->bad_row = i, r->bad_col = j;
                r->bad_got = g, r->bad_want = w, r->bad_tol = tol;
            }
        }
    r->outcome = r->over || r->guard_writes ? 1 : 0;
done:
    tk_lab_f8_data_free(&in);
    free(img), free(got), free(want), free(s);
    cudaFree(da), cudaFree(db), cudaFree(dsa), cudaFree(dsb), cudaFree(dc);
}

const char *tk_lab_fp8_format_name(tk_lab_fp8 f) { return f == TK_LAB_E4M3 ? "e4m3" : "e5m2"; }

int tk_lab_fp8_format_parse(const char *word)
{
    return !strcmp(word, "e4m3") ? TK_LAB_E4M3 : !strcmp(word, "e5m2") ? TK_LAB_E5M2 : -1;
}

static const char *const mode_names[] = { "none", "tensor", "row", "block" };

const char *tk_lab_scale_mode_name(int mode) { return mode_names[mode & 3]; }

int tk_lab_scale_mode_parse(const char *word)
{
    for (int m = TK_SCALE_TENSOR; m <= TK_SCALE_BLOCK; m++)
        if (!strcmp(word, mode_names[m]))
            return m;
    return -1;
}

void tk_lab_f8_name(const tk_lab_f8 *f, char *buf, size_t len)
{
    snprintf(buf, len, "%s x %s, scale %s%s", tk_lab_fp8_format_name(f->fa), tk_lab_fp8_format_name(f->fb),
             tk_lab_scale_mode_name(f->scale_mode), f->exact ? ", exact" : "");
}

void tk_lab_f8_verify_json(FILE *o, const char *kernel, const tk_lab_case *c, const tk_lab_f8 *f,
                           const tk_lab_f8_result *r)
{
    static const char *outcome[] = { "error", "ok", "fail", "refused" };
    fputs("{\"kernel\":", o);
    tk_lab_json_str(o, kernel);
    fprintf(o, ",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"layout\":\"%s\",\"op_a\":\"%s\",\"op_b\":\"%s\",\"out\":\"%s\","
               "\"alpha\":%.9g,\"beta\":%.9g,\"pad\":%d,\"dtype\":\"%s\",\"dtype_b\":\"%s\",\"scale\":\"%s\","
               "\"exact\":%s,\"status\":\"%s\",\"tk_status\":",
            (long long)c->m, (long long)c->n, (long long)c->k, c->layout == TK_ROW_MAJOR ? "row" : "col",
            c->op_a == TK_OP_N ? "n" : "t", c->op_b == TK_OP_N ? "n" : "t", c->out == TK_F32 ? "fp32" : "bf16",
            (double)c->alpha, (double)c->beta, c->pad, tk_lab_fp8_format_name(f->fa), tk_lab_fp8_format_name(f->fb),
            tk_lab_scale_mode_name(f->scale_mode), f->exact ? "true" : "false", outcome[r->outcome + 1]);
    tk_lab_json_str(o, tk_status_string(r->status));
    fputs(",\"msg\":", o);
    tk_lab_json_str(o, r->msg);
    fprintf(o, ",\"checked\":%lld,\"over\":%lld,\"max_rel\":%.6g,\"guard_writes\":%lld}", (long long)r->checked,
            (long long)r->over, r->max_rel, (long long)r->guard_writes);
}

void tk_lab_f8_verify_print(FILE *o, const char *kernel, const tk_lab_case *c, const tk_lab_f8 *f,
                            const tk_lab_f8_result *r)
{
    char name[160], fn[64];
    tk_lab_case_name(c, name, sizeof name);
    tk_lab_f8_name(f, fn, sizeof fn);
    const char *verdict = r->outcome == 0 ? "ok  " : r->outcome == 2 ? "skip" : r->outcome < 0 ? "ERR " : "FAIL";
    fprintf(o, "%s %-18s %s | %s", verdict, kernel, name, fn);
    if (r->outcome == 0 || r->outcome == 1)
        fprintf(o, " | %lld checked, max rel %.2e", (long long)r->checked, r->max_rel);
    if (r->msg[0])
        fprintf(o, " | %s", r->msg);
    fprintf(o, "\n");
    if (r->over)
        fprintf(o, "     %lld over tolerance; first (%lld, %lld): got %.9g want %.9g tol %.3g\n", (long long)r->over,
                (long long)r->bad_row, (long long)r->bad_col, r->bad_got, r->bad_want, r->bad_tol);
    if (r->guard_writes)
        fprintf(o, "     %lld writes outside C's M x N; first at %s\n", (long long)r->guard_writes, r->guard_where);
}
