/* lab_everify.c - verify and bench of one case with a fused epilogue
 * (lab.h, "epilogues"): the buffers of tk_gemm_desc's version-3 fields,
 * random inputs, outputs poisoned and guarded, the call through
 * tk_gemm_run, and the judgement against lab_epi.c's fp64 reference.
 * bench times the same call against cuBLAS's plain GEMM of the product. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "lab.h"

#define GUARD_ELEMS 256         /* poisoned elements after each output's last row */

/* One output buffer: rows x ld elements of esz bytes plus the guard band. */
typedef struct ebuf {
    void *dev, *img, *got;      /* device; what it held before the call; after */
    size_t elems, esz;
    int64_t rows, cols, ld;
} ebuf;

/* The case's buffers (host and device). */
typedef struct ebufs {
    tk_lab_epi_dims dims;
    size_t na, nb;
    int64_t lda, ldb;
    uint16_t *ha, *hb, *hup, *haux_in;
    void *hbias;
    void *da, *db, *dup, *dbias;
    ebuf c, d, aux, grad;       /* d.dev NULL: D is C; aux.dev, grad.dev NULL: none */
} ebufs;

static void ebuf_free(ebuf *b)
{
    cudaFree(b->dev);
    free(b->img);
    free(b->got);
}

static void ebufs_free(ebufs *b)
{
    free(b->ha); free(b->hb); free(b->hup); free(b->haux_in); free(b->hbias);
    cudaFree(b->da); cudaFree(b->db); cudaFree(b->dup); cudaFree(b->dbias);
    ebuf_free(&b->c); ebuf_free(&b->d); ebuf_free(&b->aux); ebuf_free(&b->grad);
}

/* The poison: the padding sentinel (a NaN with a fixed payload). */
static void poison(void *x, size_t esz, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (esz == 4) {
            uint32_t v = TK_LAB_PAD_F32;
            memcpy((char *)x + 4 * i, &v, 4);
        } else {
            uint16_t v = TK_LAB_PAD_BF16;
            memcpy((char *)x + 2 * i, &v, 2);
        }
    }
}

static int ebuf_alloc(ebuf *b, int64_t rows, int64_t cols, int pad, size_t esz)
{
    b->rows = rows;
    b->cols = cols;
    b->ld = tk_lab_ld(cols, pad);
    b->esz = esz;
    b->elems = (size_t)(rows * b->ld) + GUARD_ELEMS;
    b->img = malloc(b->elems * esz);
    b->got = malloc(b->elems * esz);
    if (!b->img || !b->got || cudaMalloc(&b->dev, b->elems * esz))
        return -1;
    poison(b->img, esz, b->elems);
    return 0;
}

/* Elements of b whose bits changed where nothing may be written: outside
 * the rows x cols region, or anywhere (all). The first at *where. */
static int64_t ebuf_guard(const ebuf *b, int all, const char *name, char *where, size_t len)
{
    int64_t n = 0;
    for (size_t e = 0; b->dev && e < b->elems; e++) {
        int64_t r = (int64_t)e / b->ld, col = (int64_t)e % b->ld;
        if (!all && r < b->rows && col < b->cols)
            continue;
        if (memcmp((char *)b->img + e * b->esz, (char *)b->got + e * b->esz, b->esz) && !n++) {
            if (r >= b->rows)
                snprintf(where, len, "%s element %lld past its %lld rows", name, (long long)e, (long long)b->rows);
            else
                snprintf(where, len, "%s row %lld col %lld%s", name, (long long)r, (long long)col,
                         col >= b->cols ? " (padding)" : "");
        }
    }
    return n;
}

/* x[0..n) of type t, uniform in [-1, 1], never 0 (tk_lab_fill). */
static void *host_rand(tk_dtype t, size_t n, uint64_t seed)
{
    void *x = malloc((n ? n : 1) * (t == TK_F32 ? 4 : 2));
    if (x)
        tk_lab_fill(x, t, n, seed);
    return x;
}

/* The backward kinds' z: a sum of three uniforms times 2 (mean 0,
 * standard deviation 2: the derivatives vary over it), bf16, never 0. */
static void fill_aux(uint16_t *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        float s = 0.0f;
        for (int t = 0; t < 3; t++)
            s += tk_lab_bf16_to_f32(tk_lab_rand_bf16(seed, 3 * (uint64_t)i + (uint64_t)t));
        uint16_t v = tk_lab_f32_to_bf16(2.0f * s);
        x[i] = v & 0x7fff ? v : tk_lab_f32_to_bf16(0.5f);
    }
}

static int upload(void **dev, const void *host, size_t bytes)
{
    if (cudaMalloc(dev, bytes ? bytes : 1))
        return -1;
    return bytes && cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice) ? -1 : 0;
}

/* Makes every buffer of the case and d over them. 0, or -1 with why. */
static int ebufs_make(ebufs *b, const tk_lab_case *c, const tk_lab_epi *e, tk_gemm_desc *d, char *why, size_t len)
{
    memset(b, 0, sizeof *b);
    tk_lab_epi_dims_of(c, e, &b->dims);
    const tk_lab_epi_dims *dm = &b->dims;
    const uint64_t s = tk_lab_mix64(c->seed);
    const int64_t a_rows = c->op_a == TK_OP_N ? c->m : c->k, a_cols = c->op_a == TK_OP_N ? c->k : c->m;
    const int64_t b_rows = c->op_b == TK_OP_N ? c->k : dm->b_cols, b_cols = c->op_b == TK_OP_N ? dm->b_cols : c->k;
    const size_t cb = c->out == TK_F32 ? 4 : 2;
    b->lda = tk_lab_ld(a_cols, c->pad);
    b->ldb = tk_lab_ld(b_cols, c->pad);
    b->na = (size_t)(a_rows * b->lda);
    b->nb = (size_t)(b_rows * b->ldb);
    b->ha = host_rand(TK_BF16, b->na, s ^ 0xa);
    b->hb = host_rand(TK_BF16, b->nb, s ^ 0xb);
    const int split = e->kind == TK_EPI_GATED && e->up_split;
    if (split)
        b->hup = host_rand(TK_BF16, b->nb, s ^ 0xd);
    if (dm->bias_len)
        b->hbias = host_rand(e->bias_bf16 ? TK_BF16 : TK_F32, (size_t)dm->bias_len, s ^ 0xe);
    if (!b->ha || !b->hb || (split && !b->hup) || (dm->bias_len && !b->hbias)) {
        snprintf(why, len, "out of host memory");
        return -1;
    }
    const size_t bias_bytes = (size_t)dm->bias_len * (e->bias_bf16 ? 2 : 4);
    if (upload(&b->da, b->ha, b->na * 2) || upload(&b->db, b->hb, b->nb * 2) ||
        (split && upload(&b->dup, b->hup, b->nb * 2)) || (dm->bias_len && upload(&b->dbias, b->hbias, bias_bytes)) ||
        ebuf_alloc(&b->c, c->m, dm->out_cols, c->pad, cb) || (e->d_apart && ebuf_alloc(&b->d, c->m, dm->out_cols,
                                                                                      c->pad, cb)) ||
        (dm->aux_cols && ebuf_alloc(&b->aux, c->m, dm->aux_cols, c->pad, 2)) ||
        (dm->grad_len && ebuf_alloc(&b->grad, 1, dm->grad_len, 0, 4))) {
        cudaGetLastError();
        snprintf(why, len, "out of memory for the case's buffers");
        return -1;
    }
    /* C: random values where it is read (beta != 0) or must keep them (D
     * apart); NaN poison where D is C and beta == 0 */
    if (c->beta != 0.0f || e->d_apart)
        for (int64_t i = 0; i < c->m; i++)
            tk_lab_fill((char *)b->c.img + (size_t)(i * b->c.ld) * cb, c->out, (size_t)dm->out_cols,
                        s ^ (0xc00000000ull + (uint64_t)i));
    const int backward = e->kind == TK_EPI_BACKWARD || e->kind == TK_EPI_GATED_BACKWARD;
    if (backward) {   /* aux is the backward kinds' input */
        for (int64_t i = 0; i < c->m; i++)
            fill_aux((uint16_t *)b->aux.img + i * b->aux.ld, (size_t)dm->aux_cols, s ^ (0xf00000000ull + (uint64_t)i));
    }
    memset(d, 0, sizeof *d);
    d->size = sizeof *d;
    tk_gemm_problem *p = &d->problem;
    tk_lab_problem(c, NULL, NULL, NULL, p);   /* sizes, ops, alpha, beta, C's type; the operands are this file's */
    p->layout = TK_ROW_MAJOR;
    p->a = b->da;
    p->lda = b->lda;
    p->b = b->db;
    p->ldb = b->ldb;
    p->c = b->c.dev;
    p->ldc = b->c.ld;
    d->epilogue = e->kind;
    d->activation = e->act;
    d->bias = b->dbias;
    d->bias_type = e->bias_bf16 ? TK_BF16 : TK_F32;
    d->bias_along = e->bias == 2 ? TK_BIAS_ROWS : TK_BIAS_COLUMNS;
    d->b_up = b->dup;
    d->d = b->d.dev;
    d->ldd = b->d.dev ? b->d.ld : 0;
    d->aux = b->aux.dev;
    d->ldaux = b->aux.dev ? b->aux.ld : 0;
    d->bias_grad = (float *)b->grad.dev;
    return 0;
}

/* Every output back to its image (before each call). */
static int ebufs_reset(ebufs *b)
{
    const ebuf *o[] = { &b->c, &b->d, &b->aux, &b->grad };
    for (int i = 0; i < 4; i++)
        if (o[i]->dev && cudaMemcpy(o[i]->dev, o[i]->img, o[i]->elems * o[i]->esz, cudaMemcpyHostToDevice))
            return -1;
    return 0;
}

static int ebufs_fetch(ebufs *b)
{
    ebuf *o[] = { &b->c, &b->d, &b->aux, &b->grad };
    for (int i = 0; i < 4; i++)
        if (o[i]->dev && cudaMemcpy(o[i]->got, o[i]->dev, o[i]->elems * o[i]->esz, cudaMemcpyDeviceToHost))
            return -1;
    return 0;
}

static void set_msg(tk_lab_epi_result *r, int outcome, const char *what, const char *msg)
{
    r->outcome = outcome;
    snprintf(r->msg, sizeof r->msg, "%s%s%s", what, *what ? ": " : "", msg);
}

/* The guards of every output (refused: every element of each). */
static void check_guards(const ebufs *b, const tk_lab_case *c, const tk_lab_epi *e, int refused, tk_lab_epi_result *r)
{
    const int fwd = e->kind == TK_EPI_BIAS_ACT || e->kind == TK_EPI_GATED;
    char where[128] = "";
    /* C: wholly unchanged when D is apart; else D's guards */
    r->guard_writes = ebuf_guard(&b->c, refused || e->d_apart, "C", r->guard_where, sizeof r->guard_where);
    int64_t n = ebuf_guard(&b->d, refused, "D", where, sizeof where);
    if (n && !r->guard_writes)
        snprintf(r->guard_where, sizeof r->guard_where, "%s", where);
    r->guard_writes += n;
    /* aux: written by the forward kinds only */
    n = ebuf_guard(&b->aux, refused || !fwd, "aux", where, sizeof where);
    if (n && !r->guard_writes)
        snprintf(r->guard_where, sizeof r->guard_where, "%s", where);
    r->guard_writes += n;
    n = ebuf_guard(&b->grad, refused, "bias_grad", where, sizeof where);
    if (n && !r->guard_writes)
        snprintf(r->guard_where, sizeof r->guard_where, "%s", where);
    r->guard_writes += n;
    (void)c;
}

void tk_lab_epi_verify_run(tk_lab_verify *v, const char *kernel, const tk_lab_case *c, const tk_lab_epi *e,
                           tk_lab_epi_result *r)
{
    memset(r, 0, sizeof *r);
    ebufs b;
    tk_gemm_desc d;
    const tk_handle h = tk_lab_verify_handle(v);
    const cudaStream_t s = (cudaStream_t)tk_lab_verify_stream(v);
    double *want = NULL, *tol = NULL, *z = NULL, *ztol = NULL, *g = NULL, *gtol = NULL;
    if (ebufs_make(&b, c, e, &d, r->msg, sizeof r->msg) || ebufs_reset(&b)) {
        if (!r->msg[0])
            snprintf(r->msg, sizeof r->msg, "preparing the buffers: %s", cudaGetErrorString(cudaGetLastError()));
        r->outcome = -1;
        ebufs_free(&b);
        return;
    }
    r->status = tk_gemm_run(h, &d, kernel, s);
    cudaError_t ce = cudaStreamSynchronize(s);
    if (!ce && ebufs_fetch(&b))
        ce = cudaGetLastError();
    if (ce) {
        set_msg(r, -1, "after the call", cudaGetErrorString(ce));
        ebufs_free(&b);
        return;
    }
    if (r->status) {
        /* a refusal: reported with its status, and nothing may have changed */
        set_msg(r, 2, tk_status_string(r->status), tk_last_error(h));
        check_guards(&b, c, e, 1, r);
        if (r->guard_writes)
            r->outcome = 1;
        ebufs_free(&b);
        return;
    }
    const tk_lab_epi_dims *dm = &b.dims;
    const size_t nd = (size_t)(c->m * dm->out_cols), nz = (size_t)(c->m * dm->aux_cols);
    want = malloc((nd ? nd : 1) * sizeof *want);
    tol = malloc((nd ? nd : 1) * sizeof *tol);
    z = malloc((nz ? nz : 1) * sizeof *z);
    ztol = malloc((nz ? nz : 1) * sizeof *ztol);
    g = malloc((size_t)(dm->grad_len + 1) * sizeof *g);
    gtol = malloc((size_t)(dm->grad_len + 1) * sizeof *gtol);
    if (!want || !tol || !z || !ztol || !g || !gtol) {
        set_msg(r, -1, "", "out of host memory");
    } else {
        tk_lab_epi_in in = { b.ha, b.hb, b.hup, b.lda, b.ldb, b.hbias, (const uint16_t *)b.aux.img, b.aux.ld,
                             b.c.img, b.c.ld };
        tk_lab_epi_ref(c, e, &in, want, tol, z, ztol, g, gtol);
        const ebuf *out = b.d.dev ? &b.d : &b.c;
        tk_lab_epi_compare(out->got, c->out, out->ld, c->m, dm->out_cols, want, tol, 0, &r->d);
        if (dm->aux_cols && (e->kind == TK_EPI_BIAS_ACT || e->kind == TK_EPI_GATED))
            tk_lab_epi_compare(b.aux.got, TK_BF16, b.aux.ld, c->m, dm->aux_cols, z, ztol, 1, &r->aux);
        if (dm->grad_len)
            tk_lab_epi_compare(b.grad.got, TK_F32, b.grad.ld, 1, dm->grad_len, g, gtol, 0, &r->grad);
        check_guards(&b, c, e, 0, r);
        r->outcome = r->d.over || r->aux.over || r->grad.over || r->guard_writes ? 1 : 0;
    }
    free(want); free(tol); free(z); free(ztol); free(g); free(gtol);
    ebufs_free(&b);
}

static void print_cmp(FILE *f, const char *what, const tk_lab_epi_cmp *m)
{
    if (!m->checked)
        return;
    fprintf(f, " | %s: max_abs %.3g max_rel %.3g", what, m->max_abs, m->max_rel);
    if (m->over)
        fprintf(f, " (%lld over)", (long long)m->over);
}

static void print_bad(FILE *f, const char *what, const tk_lab_epi_cmp *m)
{
    if (m->over)
        fprintf(f, "  %s(%lld, %lld) = %.9g, expected %.9g +- %.3g\n", what, (long long)m->bad_row,
                (long long)m->bad_col, m->bad_got, m->bad_want, m->bad_tol);
}

void tk_lab_epi_verify_print(FILE *f, const char *kernel, const tk_lab_case *c, const tk_lab_epi *e,
                             const tk_lab_epi_result *r)
{
    char name[128], epi[128], full[272];
    tk_lab_case_name(c, name, sizeof name);
    tk_lab_epi_name(e, epi, sizeof epi);
    snprintf(full, sizeof full, "%s | %s", name, epi);
    if (r->outcome == 2) {   /* a refusal is the verdict: the status and the library's message */
        fprintf(f, "skip %s %s: refused: %s\n", kernel, full, r->msg);
        return;
    }
    if (r->status && r->outcome == 1) {
        fprintf(f, "FAIL %s %s: refused (%s) but wrote %lld element(s), first at %s\n", kernel, full, r->msg,
                (long long)r->guard_writes, r->guard_where);
        return;
    }
    if (tk_lab_verdict_head(f, kernel, full, r->outcome, r->msg))
        return;
    print_cmp(f, "D vs fp64", &r->d);
    print_cmp(f, "aux", &r->aux);
    print_cmp(f, "bias_grad", &r->grad);
    fputc('\n', f);
    print_bad(f, "D", &r->d);
    print_bad(f, "aux", &r->aux);
    print_bad(f, "bias_grad", &r->grad);
    if (r->guard_writes)
        fprintf(f, "  write outside the outputs: %lld element(s), first at %s\n", (long long)r->guard_writes,
                r->guard_where);
}

void tk_lab_epi_verify_json(FILE *f, const char *kernel, const tk_lab_case *c, const tk_lab_epi *e,
                            const tk_lab_epi_result *r)
{
    static const char *outcome[] = { "error", "ok", "fail", "refused" };
    fputs("{\"kernel\":", f);
    tk_lab_json_str(f, kernel);
    fprintf(f, ",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"op_a\":\"%s\",\"op_b\":\"%s\",\"out\":\"%s\",\"alpha\":%.9g,"
               "\"beta\":%.9g,\"pad\":%d,\"epilogue\":\"%s\",\"act\":\"%s\",\"bias\":\"%s\",\"bias_type\":\"%s\","
               "\"d\":%s,\"aux\":%s,\"bias_grad\":%s,\"up\":\"%s\",\"status\":\"%s\",\"tk_status\":",
            (long long)c->m, (long long)c->n, (long long)c->k, c->op_a == TK_OP_N ? "n" : "t",
            c->op_b == TK_OP_N ? "n" : "t", c->out == TK_F32 ? "fp32" : "bf16", (double)c->alpha, (double)c->beta,
            c->pad, tk_lab_epi_kind_name(e->kind), tk_lab_act_name(e->act),
            e->bias == 0 ? "none" : e->bias == 1 ? "col" : "row", e->bias_bf16 ? "bf16" : "fp32",
            e->d_apart ? "true" : "false", e->aux ? "true" : "false", e->bias_grad ? "true" : "false",
            e->up_split ? "split" : "halves", outcome[r->outcome + 1]);
    tk_lab_json_str(f, tk_status_string(r->status));
    fputs(",\"msg\":", f);
    tk_lab_json_str(f, r->msg);
    fprintf(f, ",\"d_max_abs\":%.6g,\"d_max_rel\":%.6g,\"d_over\":%lld,\"aux_max_rel\":%.6g,\"aux_over\":%lld,"
               "\"grad_max_rel\":%.6g,\"grad_over\":%lld,\"guard_writes\":%lld}",
            r->d.max_abs, r->d.max_rel, (long long)r->d.over, r->aux.max_rel, (long long)r->aux.over,
            r->grad.max_rel, (long long)r->grad.over, (long long)r->guard_writes);
}

/* ---- bench ---- */

typedef struct ecall {
    tk_gemm_desc d;             /* the call with its epilogue */
    tk_gemm_problem plain;      /* cuBLAS's plain GEMM of the same product */
    const char *kernel;
} ecall;

static int run_epi(tk_lab_bench *b, void *ctx, char *why, size_t len)
{
    const ecall *c = ctx;
    const tk_handle h = tk_lab_bench_handle(b);
    tk_status st = tk_gemm_run(h, &c->d, c->kernel, tk_lab_bench_stream(b));
    if (st == TK_SUCCESS)
        return 0;
    snprintf(why, len, "%s: %s", tk_status_string(st), tk_last_error(h));
    return -1;
}

static int run_plain(tk_lab_bench *b, void *ctx, char *why, size_t len)
{
    const ecall *c = ctx;
    const tk_handle h = tk_lab_bench_handle(b);
    if (tk_gemm_ex(h, &c->plain, "cublas", tk_lab_bench_stream(b)) == TK_SUCCESS)
        return 0;
    snprintf(why, len, "%s", tk_last_error(h));
    return -1;
}

int tk_lab_epi_bench_case(tk_lab_bench *b, const tk_lab_case *c, const tk_lab_epi *e, const char *const *kernels,
                          int nkernels, int no_cublas, FILE *out, tk_lab_bench_row *rows)
{
    ebufs eb;
    ecall call;
    char why[TK_LAB_MSG_LEN] = "";
    void *dbig = NULL;          /* cuBLAS's B of all N columns (GATED with a second weight) */
    void *cbig = NULL;          /* cuBLAS's C of all N columns (GATED's D has N / 2) */
    int n = 0;
    const int ok = !ebufs_make(&eb, c, e, &call.d, why, sizeof why) && !ebufs_reset(&eb);
    call.plain = call.d.problem;
    if (ok && eb.dims.b_cols != c->n) {   /* gate and up in one N-column B for the yardstick */
        int64_t rows_b = c->op_b == TK_OP_N ? c->k : c->n, cols_b = c->op_b == TK_OP_N ? c->n : c->k;
        call.plain.ldb = tk_lab_ld(cols_b, c->pad);
        size_t nb = (size_t)(rows_b * call.plain.ldb);
        if (cudaMalloc(&dbig, nb * 2) || tk_lab_fill_device(dbig, TK_BF16, nb, c->seed, tk_lab_bench_stream(b)))
            cudaGetLastError();
        call.plain.b = dbig;
    }
    if (ok && e->kind == TK_EPI_GATED) {   /* the product is N wide: a C of its own for the yardstick */
        call.plain.ldc = c->n;
        call.plain.beta = 0.0f;
        if (cudaMalloc(&cbig, (size_t)(c->m * c->n) * (c->out == TK_F32 ? 4 : 2)))
            cudaGetLastError();
        call.plain.c = cbig;
    }
    if (ok && e->kind == TK_EPI_GATED_BACKWARD)
        call.plain.beta = 0.0f;
    for (int i = -1; i < nkernels; i++) {
        if (i < 0 && no_cublas)
            continue;
        tk_lab_bench_row *r = &rows[n++];
        memset(r, 0, sizeof *r);
        snprintf(r->kernel, sizeof r->kernel, "%s", i < 0 ? "cublas" : kernels[i]);
        r->c = *c;
        r->ratio_cublas = r->ratio_grouped = r->ratio_dense = NAN;
        tk_lab_epi_name(e, r->form, sizeof r->form);
        r->flop = 2.0 * (double)c->m * (double)c->n * (double)c->k;
        if (!ok || (i < 0 && ((eb.dims.b_cols != c->n && !dbig) || (e->kind == TK_EPI_GATED && !cbig)))) {
            snprintf(r->status, sizeof r->status, "%s", ok ? "out of memory for cuBLAS's B or C" : why);
        } else {
            call.kernel = i < 0 ? NULL : kernels[i];
            if (tk_lab_bench_time(b, i < 0 ? run_plain : run_epi, &call, r) == 0 && r->ms_median > 0)
                r->tflops = r->flop / (r->ms_median * 1e9);
        }
        if (i >= 0 && !no_cublas && !strcmp(rows[0].status, "ok") && !strcmp(r->status, "ok") && r->ms_median > 0)
            r->ratio_cublas = rows[0].ms_median / r->ms_median;
        if (out) {
            fprintf(out, "%-24s %-40s %10.4f ms %8.1f TFLOP/s", r->kernel, r->form, r->ms_median, r->tflops);
            if (isfinite(r->ratio_cublas))
                fprintf(out, "  %.3f x cuBLAS GEMM alone (no epilogue)", r->ratio_cublas);
            if (strcmp(r->status, "ok"))
                fprintf(out, "  %s", r->status);
            fputc('\n', out);
            fflush(out);
        }
    }
    cudaFree(dbig);
    cudaFree(cbig);
    ebufs_free(&eb);
    return n;
}
